//! The sharer's key: who may hold a room, and how a visitor tells the sharer
//! from anyone else who knows the link.
//!
//! A sharer has an Ed25519 key pair (kept per shared folder, next to the link).
//! Its room id is derived from the public key:
//!
//! ```text
//! room = base32(BLAKE3 derive_key("linkfs 2026-11 room of a sharer key", public)[..10])
//! ```
//!
//! so the room id itself says which key may hold it (an 80-bit binding). What
//! the key signs, each message prefixed by its purpose so no signature can be
//! taken for another:
//!
//! | where | signed message |
//! | --- | --- |
//! | the relay, when a host opens a room | `"linkfs host\|" room "\|" unix_seconds "\|" nonce` |
//! | a visitor, with the sharer's challenge | `"linkfs challenge\|" room "\|" peer "\|" challenge` |
//! | a visitor, with the sharer's answer | `"linkfs answer\|" room "\|" peer "\|" challenge "\|" sdp` |
//!
//! The relay admits a host only with a valid signature over a recent time
//! (and each signature only once); a visitor accepts a challenge and an answer
//! only if they are signed by the key its room id was derived from. Someone
//! who knows the link (the secret) but not the key can neither hold the room
//! nor pose as the sharer to a visitor.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};

const ROOM_CONTEXT: &str = "linkfs 2026-11 room of a sharer key";
const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// How far a host's signed time may be from the relay's clock: 5 minutes.
pub const HOST_PROOF_WINDOW_SECS: u64 = 300;

/// The sharer's key pair.
#[derive(Clone)]
pub struct SharerKey(SigningKey);

impl std::fmt::Debug for SharerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharerKey({})", self.room())
    }
}

/// A 10-byte value as 16 characters of lowercase base32 (a room id).
pub fn base32_10(bytes: &[u8; 10]) -> String {
    let mut out = String::with_capacity(16);
    let mut acc: u64 = 0;
    let mut bits = 0;
    for b in bytes {
        acc = (acc << 8) | u64::from(*b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(BASE32[((acc >> bits) & 31) as usize] as char);
        }
    }
    out
}

/// The room id a public key may hold.
pub fn room_of(public: &[u8; 32]) -> String {
    let derived = blake3::derive_key(ROOM_CONTEXT, public);
    let mut ten = [0u8; 10];
    ten.copy_from_slice(&derived[..10]);
    base32_10(&ten)
}

/// The message a host signs to open `room` at `unix_secs` (`nonce`: fresh
/// random text, so that every proof differs and each can be used once).
pub fn host_message(room: &str, unix_secs: u64, nonce: &str) -> Vec<u8> {
    format!("linkfs host|{room}|{unix_secs}|{nonce}").into_bytes()
}

/// The query a host adds to its signaling URL to prove it holds the room's
/// key: `&key=..&t=..&n=..&sig=..` (all URL-safe).
pub fn host_query(key: &SharerKey, unix_secs: u64, nonce: &str) -> String {
    let room = key.room();
    let sig = key.sign_text(&host_message(&room, unix_secs, nonce));
    format!(
        "&key={}&t={unix_secs}&n={nonce}&sig={sig}",
        key.public_text()
    )
}

/// Why a host's proof was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HostProofError {
    #[error("the sharer's proof of its key is missing (this relay needs a newer linkfs share)")]
    Missing,
    #[error("the sharer's clock is more than 5 minutes off the relay's; set the clock right")]
    Clock,
    #[error("the sharer's key does not hold this room")]
    WrongKey,
}

/// Checks a host's query (see [`host_query`]) for `room` at the relay's
/// `now_secs`; returns the signature (for the relay's one-use check).
pub fn check_host_query(room: &str, query: &str, now_secs: u64) -> Result<String, HostProofError> {
    let field = |name: &str| {
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
    };
    let (Some(key), Some(t), Some(nonce), Some(sig)) =
        (field("key"), field("t"), field("n"), field("sig"))
    else {
        return Err(HostProofError::Missing);
    };
    let t: u64 = t.parse().map_err(|_| HostProofError::Missing)?;
    if t.abs_diff(now_secs) > HOST_PROOF_WINDOW_SECS {
        return Err(HostProofError::Clock);
    }
    if nonce.len() > 64 || !verify_for_room(room, key, &host_message(room, t, nonce), sig) {
        return Err(HostProofError::WrongKey);
    }
    Ok(sig.to_owned())
}

/// The message the sharer signs with its challenge to guest `peer`.
pub fn challenge_message(room: &str, peer: u32, challenge: &[u8]) -> Vec<u8> {
    let mut m = format!("linkfs challenge|{room}|{peer}|").into_bytes();
    m.extend_from_slice(challenge);
    m
}

/// The message the sharer signs with its answer to guest `peer`.
pub fn answer_message(room: &str, peer: u32, challenge: &[u8], sdp: &str) -> Vec<u8> {
    let mut m = format!("linkfs answer|{room}|{peer}|").into_bytes();
    m.extend_from_slice(challenge);
    m.push(b'|');
    m.extend_from_slice(sdp.as_bytes());
    m
}

impl SharerKey {
    /// The key pair of a 32-byte secret seed (fresh random bytes, or kept ones).
    pub fn from_seed(seed: [u8; 32]) -> Self {
        SharerKey(SigningKey::from_bytes(&seed))
    }

    /// The seed, to keep it.
    pub fn seed(&self) -> [u8; 32] {
        self.0.to_bytes()
    }

    pub fn public(&self) -> [u8; 32] {
        self.0.verifying_key().to_bytes()
    }

    /// The public key as base64url (no padding), as it travels.
    pub fn public_text(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.public())
    }

    /// The room this key holds.
    pub fn room(&self) -> String {
        room_of(&self.public())
    }

    /// A signature, as base64url (no padding).
    pub fn sign_text(&self, message: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(self.0.sign(message).to_bytes())
    }
}

/// Whether `signature` (base64url) over `message` is by `public` (base64url),
/// and `public` is the key of `room`.
pub fn verify_for_room(room: &str, public: &str, message: &[u8], signature: &str) -> bool {
    let Some(public) = URL_SAFE_NO_PAD
        .decode(public)
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
    else {
        return false;
    };
    if room_of(&public) != room {
        return false;
    }
    let Some(signature) = URL_SAFE_NO_PAD
        .decode(signature)
        .ok()
        .and_then(|b| <[u8; 64]>::try_from(b).ok())
    else {
        return false;
    };
    let Ok(key) = VerifyingKey::from_bytes(&public) else {
        return false;
    };
    key.verify(message, &Signature::from_bytes(&signature))
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_counts_only_for_the_room_of_its_key_and_its_message() {
        let key = SharerKey::from_seed([7; 32]);
        let other = SharerKey::from_seed([8; 32]);
        let room = key.room();
        assert_eq!(room.len(), 16);
        assert_ne!(room, other.room());
        let m = host_message(&room, 1000, "n1");
        let sig = key.sign_text(&m);
        assert!(verify_for_room(&room, &key.public_text(), &m, &sig));
        assert!(!verify_for_room(
            &room,
            &key.public_text(),
            &host_message(&room, 1001, "n1"),
            &sig
        ));
        assert!(
            !verify_for_room(&other.room(), &key.public_text(), &m, &sig),
            "another room"
        );
        let forged = other.sign_text(&m);
        assert!(
            !verify_for_room(&room, &other.public_text(), &m, &forged),
            "another key"
        );
        assert!(!verify_for_room(&room, &key.public_text(), &m, "garbage"));
        assert!(!verify_for_room(&room, "garbage", &m, &sig));
        assert_eq!(SharerKey::from_seed(key.seed()).room(), room);
    }

    #[test]
    fn a_host_query_proves_the_key_within_the_clock_window() {
        let key = SharerKey::from_seed([7; 32]);
        let room = key.room();
        let q = format!("role=host{}", host_query(&key, 10_000, "abc"));
        assert!(check_host_query(&room, &q, 10_100).is_ok());
        assert_eq!(
            check_host_query(&room, &q, 10_000 + 301),
            Err(HostProofError::Clock)
        );
        assert_eq!(
            check_host_query(&SharerKey::from_seed([8; 32]).room(), &q, 10_000),
            Err(HostProofError::WrongKey)
        );
        assert_eq!(
            check_host_query(&room, "role=host", 10_000),
            Err(HostProofError::Missing)
        );
        let tampered = q.replace("n=abc", "n=abd");
        assert_eq!(
            check_host_query(&room, &tampered, 10_000),
            Err(HostProofError::WrongKey)
        );
    }
}
