//! Signaling: what goes over the relay's WebSocket, and what is sealed inside it.
//!
//! ```text
//! sharer (host)                      relay                        browser / peer (guest)
//!   |-- GET /signal/{room}?role=host -->|                                   |
//!   |<-- welcome {peer: 0, ice_servers} |                                   |
//!   |                                   |<-- GET /signal/{room}?role=guest --|
//!   |                                   |--- welcome {peer: N, ...} ------->|
//!   |<-- joined {peer: N} --------------|                                   |
//!   |-- msg {to: N, data: seal(challenge)} ------------------------------->|
//!   |                                   |<-- msg {to: 0, data: seal(offer)} |
//!   |<-- msg {from: N, data} -----------|                                   |
//!   |-- msg {to: N, data: seal(answer)}>|--- msg {from: 0, data} ---------->|
//!   |<========= candidates both ways, sealed, the same way =================>|
//!   |                 (the data channel opens peer to peer)                 |
//! ```
//!
//! Relay messages are JSON text frames ([`ClientToRelay`], [`RelayToClient`]).
//! `data` is base64url (no padding) of a sealed [`SignalPayload`]; the relay
//! cannot read or alter it. The guest makes the offer; the sharer answers.
//! The host is always peer 0; guests get 1, 2, ... in join order.

use serde::{Deserialize, Serialize};

/// Path prefix of the relay's WebSocket endpoint: `/signal/{room}?role=host|guest`.
pub const SIGNAL_PATH: &str = "/signal/";
/// Largest relay message (a JSON text frame) in bytes, either direction.
pub const MAX_SIGNAL_MESSAGE: usize = 16 * 1024;

/// A peer's number within a room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PeerId(pub u32);

impl PeerId {
    pub const HOST: PeerId = PeerId(0);
}

impl std::fmt::Display for PeerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A peer's number as people write it (`linkfs kick 4`).
impl std::str::FromStr for PeerId {
    type Err = std::num::ParseIntError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(PeerId)
    }
}

/// A room id: 8 to 64 characters of `A-Z a-z 0-9 _ -`.
pub fn is_valid_room_id(room: &str) -> bool {
    (8..=64).contains(&room.len())
        && room
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Which side of a room a WebSocket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Host,
    Guest,
}

/// A STUN or TURN server, in the browser's `RTCIceServer` shape.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IceServer {
    pub urls: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
}

impl IceServer {
    /// Parses an `--ice-server` flag: `URL` or `URL,USERNAME,CREDENTIAL`, where
    /// URL is `stun:`, `stuns:`, `turn:` or `turns:`. The error says what is wrong.
    pub fn parse_flag(spec: &str) -> Result<IceServer, IceServerFlagError> {
        let mut parts = spec.splitn(3, ',');
        let url = parts.next().unwrap_or_default();
        if !["stun:", "stuns:", "turn:", "turns:"]
            .iter()
            .any(|scheme| url.starts_with(scheme))
        {
            return Err(IceServerFlagError::NotStunOrTurn {
                url: url.to_owned(),
            });
        }
        let username = parts.next().map(str::to_owned);
        let credential = parts.next().map(str::to_owned);
        if username.is_some() != credential.is_some() {
            return Err(IceServerFlagError::HalfCredentials {
                url: url.to_owned(),
            });
        }
        Ok(IceServer {
            urls: vec![url.to_owned()],
            username,
            credential,
        })
    }

    /// Whether this is a TURN server (a relayed path), not only STUN.
    pub fn is_turn(&self) -> bool {
        self.urls
            .iter()
            .any(|u| u.starts_with("turn:") || u.starts_with("turns:"))
    }
}

/// Why an `--ice-server` flag could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IceServerFlagError {
    /// The URL is not a STUN or TURN server's.
    #[error("{url:?}: expected a stun:, stuns:, turn: or turns: URL")]
    NotStunOrTurn { url: String },
    /// A username without a credential (or the other way round).
    #[error("{url:?}: give both a username and a credential, or neither")]
    HalfCredentials { url: String },
}

/// What a client sends the relay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ClientToRelay {
    /// Forward `data` to peer `to` (guests may only send to the host).
    Msg { to: PeerId, data: String },
}

/// Why the relay refused something. The relay closes the socket after sending one,
/// except for `UnknownPeer` and `RateLimited`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RelayErrorCode {
    /// No sharer is in this room (the share ended, or the link is wrong).
    NoSuchRoom,
    /// A sharer already holds this room.
    RoomTaken,
    /// The room has as many guests as the relay allows.
    RoomFull,
    /// The relay holds as many rooms as it allows.
    TooManyRooms,
    /// A message was over [`MAX_SIGNAL_MESSAGE`] bytes.
    MessageTooLarge,
    /// Messages came faster than the relay allows.
    RateLimited,
    /// A message was not valid JSON of the expected shape.
    BadMessage,
    /// The request (room id or role) was not valid.
    BadRequest,
    /// The addressed peer is not in the room.
    UnknownPeer,
    /// The connection was idle too long.
    IdleTimeout,
    /// Too many shares, or visitors of one share, from the same address.
    TooManyFromAddress,
    /// The relay cannot serve this now (its room directory is unreachable);
    /// trying again in a few seconds may work.
    Unavailable,
    #[serde(other)]
    Other,
}

/// What the relay sends a client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RelayToClient {
    /// First message on every socket.
    Welcome {
        peer: PeerId,
        #[serde(default)]
        ice_servers: Vec<IceServer>,
        max_message: usize,
    },
    /// To the host: a guest arrived.
    Joined {
        peer: PeerId,
    },
    /// To the host: a guest left. To a guest: the host left (`peer` 0).
    Left {
        peer: PeerId,
    },
    Msg {
        from: PeerId,
        data: String,
    },
    Error {
        code: RelayErrorCode,
        message: String,
    },
    /// Fresh ICE servers for a member of a live room (a relay that hands out
    /// short-lived TURN credentials sends them every half lifetime).
    IceServers {
        ice_servers: Vec<IceServer>,
    },
}

/// What travels sealed between guest and host, as JSON inside the seal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SignalPayload {
    Offer {
        sdp: String,
    },
    Answer {
        sdp: String,
        /// The sharer's signature over the answer (see `crate::sharer_key`).
        #[serde(default)]
        sig: String,
    },
    Candidate {
        candidate: String,
        #[serde(rename = "sdpMid", default)]
        sdp_mid: Option<String>,
        #[serde(rename = "sdpMLineIndex", default)]
        sdp_mline_index: Option<u16>,
    },
    /// The host will not connect this guest; `reason` says why in words, and
    /// `code` (when the link itself no longer admits anyone) what kind.
    Reject {
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<RejectCode>,
    },
    /// A guest's first message, sealed with its link's key and bound to its
    /// peer number: by the key it opens with, the host knows which of the
    /// share's links the guest holds (the relay cannot tell). `pad` is
    /// nothing but padding.
    Knock {
        #[serde(default)]
        pad: String,
    },
    /// The host's fresh challenge for one guest (16 random bytes, base64url):
    /// everything the guest seals from then on is bound to it. `key` is the
    /// sharer's public key and `sig` its signature over the challenge (see
    /// `crate::sharer_key`): the guest checks the room id was derived from
    /// that key, so only the sharer can make a valid challenge.
    Challenge {
        nonce: String,
        key: String,
        sig: String,
    },
}

/// Why a link no longer admits anyone (in a [`SignalPayload::Reject`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RejectCode {
    /// The sharer withdrew the link.
    LinkWithdrawn,
    /// The link's time ran out.
    LinkExpired,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ice_server_flags_parse_or_say_what_is_wrong() {
        let turn = IceServer::parse_flag("turn:t.example.org:3478,u,p").unwrap();
        assert_eq!(turn.username.as_deref(), Some("u"));
        assert!(turn.is_turn());
        assert!(
            !IceServer::parse_flag("stun:s.example.org")
                .unwrap()
                .is_turn()
        );
        assert!(
            IceServer::parse_flag("http://x")
                .unwrap_err()
                .to_string()
                .contains("stun:")
        );
        assert!(
            IceServer::parse_flag("turn:x,u")
                .unwrap_err()
                .to_string()
                .contains("both")
        );
    }

    #[test]
    fn relay_messages_have_the_documented_json() {
        let m = RelayToClient::Msg {
            from: PeerId(3),
            data: "abc".into(),
        };
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"t":"msg","from":3,"data":"abc"}"#
        );
        let e = RelayToClient::Error {
            code: RelayErrorCode::NoSuchRoom,
            message: "x".into(),
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"t":"error","code":"no-such-room","message":"x"}"#
        );
        let i = RelayToClient::IceServers {
            ice_servers: vec![IceServer {
                urls: vec!["turn:127.0.0.1:3478".into()],
                username: Some("1700003600:r".into()),
                credential: Some("c2VjcmV0".into()),
            }],
        };
        assert_eq!(
            serde_json::to_string(&i).unwrap(),
            r#"{"t":"ice-servers","ice_servers":[{"urls":["turn:127.0.0.1:3478"],"username":"1700003600:r","credential":"c2VjcmV0"}]}"#
        );
        let c: ClientToRelay = serde_json::from_str(r#"{"t":"msg","to":0,"data":"zz"}"#).unwrap();
        assert_eq!(
            c,
            ClientToRelay::Msg {
                to: PeerId::HOST,
                data: "zz".into()
            }
        );
        let p: SignalPayload = serde_json::from_str(
            r#"{"type":"candidate","candidate":"candidate:1 1 udp 1 127.0.0.1 5000 typ host","sdpMLineIndex":0}"#,
        )
        .unwrap();
        assert!(matches!(
            p,
            SignalPayload::Candidate {
                sdp_mid: None,
                sdp_mline_index: Some(0),
                ..
            }
        ));
    }

    #[test]
    fn unknown_error_codes_still_parse() {
        let e: RelayToClient =
            serde_json::from_str(r#"{"t":"error","code":"from-the-future","message":"m"}"#)
                .unwrap();
        assert!(matches!(
            e,
            RelayToClient::Error {
                code: RelayErrorCode::Other,
                ..
            }
        ));
    }

    #[test]
    fn room_ids() {
        assert!(is_valid_room_id("abcdEFGH12_-"));
        assert!(!is_valid_room_id("short"));
        assert!(!is_valid_room_id("has/slash123"));
        assert!(!is_valid_room_id(&"a".repeat(65)));
    }
}
