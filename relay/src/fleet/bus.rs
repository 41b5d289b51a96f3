//! What relays of one fleet tell each other, over Redis pub/sub: each relay
//! process subscribes to its own channel (`linkfs:relay:<id>`) and publishes to
//! the channel of the relay a message is for.
//!
//! Pub/sub, not streams: signaling is latency-bound and worthless when late,
//! and both ends retry a handshake that loses a message (as when a WebSocket
//! drops), so at-most-once delivery with nothing stored is the right trade.

use serde::{Deserialize, Serialize};

/// One message between relays, JSON on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "kebab-case")]
pub enum BusMessage {
    /// Deliver `text` (an encoded `RelayToClient::Msg`) to peer `to` of `room`.
    Msg { room: String, to: u32, text: String },
    /// To the host's relay: guest `peer` of `room` joined at `relay`.
    Joined {
        room: String,
        peer: u32,
        relay: String,
    },
    /// To the host's relay: guest `peer` of `room` left.
    Left { room: String, peer: u32 },
    /// To a relay with guests of `room`: its host is gone.
    HostLeft { room: String },
    /// To the relay of `room`'s previous host connection `conn`: the sharer
    /// took the room over through another relay.
    Taken { room: String, conn: u64 },
}

impl BusMessage {
    pub fn encode(&self) -> String {
        // Strings and numbers only: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// `None` for anything that is not a message of this version.
    pub fn decode(text: &[u8]) -> Option<BusMessage> {
        serde_json::from_slice(text).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_messages_round_trip_and_junk_is_ignored() {
        for m in [
            BusMessage::Msg {
                room: "room-0001".into(),
                to: 0,
                text: r#"{"t":"msg","from":3,"data":"x"}"#.into(),
            },
            BusMessage::Joined {
                room: "room-0001".into(),
                peer: 3,
                relay: "abc".into(),
            },
            BusMessage::Left {
                room: "room-0001".into(),
                peer: 3,
            },
            BusMessage::HostLeft {
                room: "room-0001".into(),
            },
            BusMessage::Taken {
                room: "room-0001".into(),
                conn: 7,
            },
        ] {
            assert_eq!(BusMessage::decode(m.encode().as_bytes()), Some(m));
        }
        assert_eq!(BusMessage::decode(b"{\"k\":\"nope\"}"), None);
        assert_eq!(BusMessage::decode(b"\xff"), None);
    }
}
