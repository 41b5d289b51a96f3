//! Share links: `<relay-origin>/#<room>.<secret>[/<path in the share>]`.
//!
//! The room is what the relay routes on: 10 random bytes as 16 characters of
//! lowercase base32. The secret is 16 random bytes as 22 characters of
//! base64url; it only ever travels in the fragment, which browsers do not send
//! to servers. Anything after the first `/` in the fragment is a path inside
//! the share that the web app uses for navigation.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use linkfs_proto::signal::{Role, SIGNAL_PATH, is_valid_room_id};

/// The secret part of a link.
#[derive(Clone, PartialEq, Eq)]
pub struct ShareSecret([u8; 16]);

impl std::fmt::Debug for ShareSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ShareSecret(..)")
    }
}

impl ShareSecret {
    pub fn from_bytes(b: [u8; 16]) -> Self {
        ShareSecret(b)
    }

    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0)
    }

    /// The secret as [`encode`](Self::encode) wrote it.
    pub fn decode(text: &str) -> Result<Self, LinkError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|_| LinkError::BadKey)?;
        let secret: [u8; 16] = bytes.try_into().map_err(|_| LinkError::BadKey)?;
        Ok(ShareSecret(secret))
    }
}

/// Why a link could not be used, in words for the person holding it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    #[error(
        "this link is not valid: it has no share key after '#' (a link looks like http://host:port/#room.secret); copy the whole link, including everything after '#'"
    )]
    NoFragment,
    #[error(
        "this link is not valid: the share key after '#' is damaged (a link looks like http://host:port/#room.secret); copy the whole link again"
    )]
    BadKey,
    #[error(
        "this link is not valid: it must start with http:// or https:// (a link looks like http://host:port/#room.secret)"
    )]
    BadOrigin,
}

/// A parsed share link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareLink {
    /// Where the relay (and the web app) lives, e.g. `http://127.0.0.1:8080`.
    pub origin: String,
    pub room: String,
    pub secret: ShareSecret,
    /// A path inside the share (without leading `/`), empty for the root.
    pub path: String,
}

impl ShareLink {
    /// A new link for `origin` from 26 fresh random bytes (10 for the room, 16 for the secret).
    pub fn generate(origin: &str, random: [u8; 26]) -> ShareLink {
        let mut room = [0u8; 10];
        room.copy_from_slice(&random[..10]);
        let mut secret = [0u8; 16];
        secret.copy_from_slice(&random[10..]);
        ShareLink {
            origin: origin.trim_end_matches('/').to_owned(),
            room: linkfs_proto::sharer_key::base32_10(&room),
            secret: ShareSecret(secret),
            path: String::new(),
        }
    }

    /// The link of the sharer with `key` (its room is derived from the key,
    /// see `linkfs_proto::sharer_key`) and a fresh `secret`.
    pub fn of_sharer(
        origin: &str,
        key: &linkfs_proto::sharer_key::SharerKey,
        secret: [u8; 16],
    ) -> ShareLink {
        ShareLink {
            origin: origin.trim_end_matches('/').to_owned(),
            room: key.room(),
            secret: ShareSecret(secret),
            path: String::new(),
        }
    }

    /// Parses a whole link (`http://host/#room.secret`).
    pub fn parse(link: &str) -> Result<ShareLink, LinkError> {
        let link = link.trim();
        let (origin, fragment) = link.split_once('#').ok_or(LinkError::NoFragment)?;
        if !(origin.starts_with("http://") || origin.starts_with("https://")) {
            return Err(LinkError::BadOrigin);
        }
        let mut l = Self::parse_fragment(fragment)?;
        l.origin = origin.trim_end_matches('/').to_owned();
        Ok(l)
    }

    /// Parses just the fragment (what follows `#`); `origin` is left empty.
    pub fn parse_fragment(fragment: &str) -> Result<ShareLink, LinkError> {
        let fragment = fragment.strip_prefix('#').unwrap_or(fragment);
        if fragment.is_empty() {
            return Err(LinkError::NoFragment);
        }
        let (key, path) = fragment.split_once('/').unwrap_or((fragment, ""));
        let (room, secret) = key.split_once('.').ok_or(LinkError::BadKey)?;
        if !is_valid_room_id(room) {
            return Err(LinkError::BadKey);
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(secret)
            .map_err(|_| LinkError::BadKey)?;
        let secret: [u8; 16] = bytes.try_into().map_err(|_| LinkError::BadKey)?;
        Ok(ShareLink {
            origin: String::new(),
            room: room.to_owned(),
            secret: ShareSecret(secret),
            path: path.to_owned(),
        })
    }

    /// The name a receiver stores this share's index under: the room and a
    /// value derived from the secret (`linkfs-<room>-<16 hex>`). A share that
    /// reuses a room id with another secret gets another store, so two shares
    /// never mix; the secret itself cannot be read back from the name.
    pub fn store_name(&self) -> String {
        let derived = blake3::derive_key("linkfs 2026-11 receiver store name", &self.secret.0);
        let hex: String = derived[..8].iter().map(|b| format!("{b:02x}")).collect();
        format!("linkfs-{}-{hex}", self.room)
    }

    /// The link as people share it.
    pub fn to_url(&self) -> String {
        let mut s = format!("{}/#{}.{}", self.origin, self.room, self.secret.encode());
        if !self.path.is_empty() {
            s.push('/');
            s.push_str(&self.path);
        }
        s
    }

    /// The relay's host as written in the link: a name, an IPv4 address, or an
    /// IPv6 address without its brackets; no port.
    pub fn relay_host(&self) -> &str {
        let rest = self
            .origin
            .strip_prefix("https://")
            .or_else(|| self.origin.strip_prefix("http://"))
            .unwrap_or(&self.origin);
        let authority = rest.split(['/', '?']).next().unwrap_or("");
        let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        if let Some(v6) = authority.strip_prefix('[') {
            return v6.split(']').next().unwrap_or("");
        }
        authority.split(':').next().unwrap_or("")
    }

    /// Whether the relay is on this host (`localhost` or a loopback address):
    /// then the sharer is too.
    pub fn relay_is_loopback(&self) -> bool {
        let host = self.relay_host();
        host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// The relay's WebSocket URL for this room in the given role.
    pub fn signal_url(&self, role: Role) -> String {
        let ws = if let Some(rest) = self.origin.strip_prefix("https://") {
            format!("wss://{rest}")
        } else {
            format!("ws://{}", self.origin.trim_start_matches("http://"))
        };
        let role = match role {
            Role::Host => "host",
            Role::Guest => "guest",
        };
        format!("{ws}{SIGNAL_PATH}{}?role={role}", self.room)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_parse_round_trip() {
        let mut r = [0u8; 26];
        for (i, b) in r.iter_mut().enumerate() {
            *b = (i * 37 + 11) as u8;
        }
        let l = ShareLink::generate("http://127.0.0.1:8080/", r);
        assert_eq!(l.room.len(), 16);
        let url = l.to_url();
        assert!(url.starts_with("http://127.0.0.1:8080/#"), "{url}");
        assert_eq!(ShareLink::parse(&url).unwrap(), l);
        assert_eq!(
            l.signal_url(Role::Guest),
            format!("ws://127.0.0.1:8080/signal/{}?role=guest", l.room)
        );
    }

    #[test]
    fn known_vector() {
        let l = ShareLink::generate("https://relay.example", [0u8; 26]);
        assert_eq!(
            l.to_url(),
            "https://relay.example/#aaaaaaaaaaaaaaaa.AAAAAAAAAAAAAAAAAAAAAA"
        );
        assert_eq!(
            l.signal_url(Role::Host),
            "wss://relay.example/signal/aaaaaaaaaaaaaaaa?role=host"
        );
    }

    #[test]
    fn the_relay_host_comes_from_the_origin() {
        let at = |origin: &str| ShareLink {
            origin: origin.into(),
            ..ShareLink::generate("http://x", [0; 26])
        };
        assert_eq!(at("http://127.0.0.1:8080").relay_host(), "127.0.0.1");
        assert_eq!(
            at("https://relay.example.org").relay_host(),
            "relay.example.org"
        );
        assert_eq!(at("http://[::1]:9").relay_host(), "::1");
        assert_eq!(at("http://user@host:1/p").relay_host(), "host");
        assert!(at("http://127.0.0.1:8080").relay_is_loopback());
        assert!(at("http://127.9.9.9").relay_is_loopback());
        assert!(at("http://[::1]:9").relay_is_loopback());
        assert!(at("http://LocalHost:9").relay_is_loopback());
        assert!(!at("http://10.0.0.1:9").relay_is_loopback());
        assert!(!at("https://relay.example.org").relay_is_loopback());
    }

    #[test]
    fn path_after_the_key_is_kept() {
        let l = ShareLink::parse("http://h/#aaaaaaaaaaaaaaaa.AAAAAAAAAAAAAAAAAAAAAA/photos/2024")
            .unwrap();
        assert_eq!(l.path, "photos/2024");
    }

    #[test]
    fn bad_links_say_what_is_wrong() {
        assert_eq!(ShareLink::parse("http://h/"), Err(LinkError::NoFragment));
        assert_eq!(ShareLink::parse("http://h/#"), Err(LinkError::NoFragment));
        assert_eq!(
            ShareLink::parse("http://h/#aaaaaaaaaaaaaaaa"),
            Err(LinkError::BadKey)
        );
        assert_eq!(
            ShareLink::parse("http://h/#aaaaaaaaaaaaaaaa.AAAA"),
            Err(LinkError::BadKey)
        );
        assert_eq!(
            ShareLink::parse("http://h/#a.AAAAAAAAAAAAAAAAAAAAAA"),
            Err(LinkError::BadKey)
        );
        assert_eq!(
            ShareLink::parse("ftp://h/#aaaaaaaaaaaaaaaa.AAAAAAAAAAAAAAAAAAAAAA"),
            Err(LinkError::BadOrigin)
        );
    }
}
