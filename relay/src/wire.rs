//! Encoding what the relay says, and the words it says it in.
//!
//! Every user-facing sentence the relay sends lives here, so they read alike and
//! tests can compare against them.

use std::sync::Arc;

use linkfs_proto::signal::{PeerId, RelayErrorCode, RelayToClient};

use crate::config::Limits;

/// One JSON text frame the relay sends to a peer, as the rooms and queues pass
/// it around (cheap to clone; the socket writer turns it into a WebSocket frame).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SignalText(Arc<str>);

impl SignalText {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// Bytes, as written to the socket.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

impl From<String> for SignalText {
    fn from(text: String) -> SignalText {
        SignalText(text.into())
    }
}

impl From<&str> for SignalText {
    fn from(text: &str) -> SignalText {
        SignalText(text.into())
    }
}

/// The JSON text frame for `msg`.
pub(crate) fn encode(msg: &RelayToClient) -> SignalText {
    // `RelayToClient` is plain enums, strings and numbers; serde_json only fails on
    // maps with non-string keys or failing `Serialize` impls, neither of which occurs.
    serde_json::to_string(msg)
        .expect("RelayToClient always serializes")
        .into()
}

/// An `error` frame.
pub(crate) fn error(code: RelayErrorCode, message: String) -> SignalText {
    encode(&RelayToClient::Error { code, message })
}

/// A `msg` frame as the receiver sees it. `data` is copied verbatim: it is sealed
/// ciphertext the relay neither reads nor logs.
pub(crate) fn forwarded(from: PeerId, data: &str) -> SignalText {
    encode(&RelayToClient::Msg {
        from,
        data: data.to_owned(),
    })
}

pub(crate) const NO_SUCH_ROOM: &str = "No one is sharing at this link right now. The sharer may have stopped; ask them for a new link.";
pub(crate) const HOST_LEFT: &str = "The sharer stopped sharing.";
pub(crate) const SHUTTING_DOWN: &str = "The relay is shutting down.";
pub(crate) const TOO_SLOW: &str = "This connection could not keep up with its messages.";
pub(crate) const BINARY_FRAME: &str =
    "The relay accepts only JSON text frames; a binary frame arrived.";

pub(crate) fn room_full(limits: &Limits) -> String {
    format!(
        "This share already has as many visitors as the relay allows ({}). Try again when someone leaves.",
        limits.max_guests_per_room
    )
}

pub(crate) fn too_many_rooms(limits: &Limits) -> String {
    format!(
        "The relay already holds as many shares as it allows ({}). Try again later, or use another relay.",
        limits.max_rooms
    )
}

pub(crate) fn message_too_large(limits: &Limits) -> String {
    format!(
        "A message was larger than the relay allows ({} bytes); the connection was closed.",
        limits.max_message
    )
}

pub(crate) fn rate_limited(limits: &Limits) -> String {
    format!(
        "Messages arrived faster than the relay allows ({} per second); some were dropped.",
        limits.rate_per_sec
    )
}

pub(crate) fn rate_abuse(limits: &Limits) -> String {
    format!(
        "Messages kept arriving faster than the relay allows ({} per second); the connection was closed.",
        limits.rate_per_sec
    )
}

pub(crate) fn bad_message(detail: &str) -> String {
    format!(
        "The relay could not understand a message ({detail}); expected JSON like {{\"t\":\"msg\",\"to\":0,\"data\":\"...\"}}."
    )
}

pub(crate) fn unknown_peer(to: PeerId) -> String {
    format!("Peer {} is not in this share (it may have left).", to.0)
}

pub(crate) const GUEST_TO_GUEST: &str =
    "Visitors can only send to the sharer (peer 0), not to each other.";

pub(crate) fn idle_timeout(limits: &Limits) -> String {
    format!(
        "Nothing was heard from this connection for {} s; the relay closed it.",
        limits.idle_timeout.as_secs_f64()
    )
}

/// Close codes (RFC 6455 section 7.4.1).
pub(crate) mod close_code {
    /// The host left; the room is gone.
    pub const NORMAL: u16 = 1000;
    /// The relay is shutting down.
    pub const GOING_AWAY: u16 = 1001;
    /// A message the relay does not accept (binary, malformed, abuse).
    pub const POLICY: u16 = 1008;
    /// A message over the size limit.
    pub const TOO_BIG: u16 = 1009;
    /// A limit was reached (room full, too many rooms); try again later.
    pub const TRY_AGAIN_LATER: u16 = 1013;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarded_messages_have_the_documented_json() {
        assert_eq!(
            forwarded(PeerId(2), "AQID-_x").as_str(),
            r#"{"t":"msg","from":2,"data":"AQID-_x"}"#
        );
    }

    #[test]
    fn errors_have_the_documented_json() {
        assert_eq!(
            error(RelayErrorCode::UnknownPeer, unknown_peer(PeerId(7))).as_str(),
            r#"{"t":"error","code":"unknown-peer","message":"Peer 7 is not in this share (it may have left)."}"#
        );
    }
}
