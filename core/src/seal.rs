//! Sealing of signaling payloads.
//!
//! The relay forwards signaling between a sharer and its visitors; it must not
//! be able to read or alter it. Both sides hold the share secret from the link's
//! fragment and derive one key from it:
//!
//! ```text
//! key    = BLAKE3 derive_key("linkfs 2026-11 signaling key v1", secret)
//! sealed = 0x01 || nonce[24] || XChaCha20-Poly1305(key, nonce, aad, payload JSON)
//! aad    = "linkfs/1|" || room || "|h2g" or "|g2h" [ || "|" || hex(binding) ]
//! ```
//!
//! The associated data binds the room and the direction, so a sealed message
//! cannot be replayed into another room or reflected back to its sender. The
//! signaling handshake adds a *binding* ([`SignalKey::seal_bound`]): the
//! guest's peer number and the challenge the sharer sent that guest, so a
//! captured message cannot be replayed from another connection either (see
//! `crate::signaling`).
//! Nonces come from a [`NonceSequence`] (a random prefix the shell supplies,
//! then a counter): this crate does no IO, and that includes the system's
//! random source.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use linkfs_proto::signal::SignalPayload;

use crate::link::ShareSecret;

const SEAL_VERSION: u8 = 1;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
const KEY_CONTEXT: &str = "linkfs 2026-11 signaling key v1";

/// Which way a sealed message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    HostToGuest,
    GuestToHost,
}

impl Direction {
    fn tag(self) -> &'static str {
        match self {
            Direction::HostToGuest => "h2g",
            Direction::GuestToHost => "g2h",
        }
    }
}

/// Why a sealed message could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    #[error("the sealed message is not valid base64url")]
    NotBase64,
    #[error("the sealed message is too short to be valid")]
    TooShort,
    #[error("the sealed message has unknown format version {0}")]
    UnknownVersion(u8),
    /// Wrong secret, wrong room or direction, or the bytes were altered.
    #[error("the sealed message does not open with this link's secret")]
    WrongKey,
    #[error("the opened message is not a valid signaling payload: {0}")]
    BadPayload(String),
}

/// Nonces for one sealing party: a random 16-byte prefix chosen once, then a
/// counter. XChaCha20's 24-byte nonce leaves room for both, so every nonce of
/// one party is distinct and two parties collide only if their random prefixes
/// do (2^-64 after 2^32 parties). The shell supplies the prefix (this crate
/// reads no random source); it is the only place nonces are made.
#[derive(Clone)]
pub struct NonceSequence {
    prefix: [u8; 16],
    counter: u64,
}

impl std::fmt::Debug for NonceSequence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NonceSequence")
            .field("counter", &self.counter)
            .finish_non_exhaustive()
    }
}

impl NonceSequence {
    /// `seed` must be fresh random bytes.
    pub fn new(seed: [u8; 16]) -> Self {
        NonceSequence {
            prefix: seed,
            counter: 0,
        }
    }

    /// The next nonce.
    pub fn next_nonce(&mut self) -> [u8; NONCE_LEN] {
        let mut n = [0u8; NONCE_LEN];
        n[..16].copy_from_slice(&self.prefix);
        n[16..].copy_from_slice(&self.counter.to_le_bytes());
        self.counter = self.counter.wrapping_add(1);
        n
    }
}

/// The key both sides derive from the share secret.
#[derive(Clone)]
pub struct SignalKey {
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for SignalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignalKey(..)")
    }
}

fn aad(room: &str, dir: Direction, binding: &[u8]) -> Vec<u8> {
    let mut aad = format!("linkfs/1|{room}|{}", dir.tag()).into_bytes();
    if !binding.is_empty() {
        aad.push(b'|');
        for b in binding {
            aad.extend_from_slice(format!("{b:02x}").as_bytes());
        }
    }
    aad
}

impl SignalKey {
    pub fn from_secret(secret: &ShareSecret) -> Self {
        let key = blake3::derive_key(KEY_CONTEXT, secret.as_bytes());
        SignalKey {
            cipher: XChaCha20Poly1305::new(&key.into()),
        }
    }

    /// Seals `plaintext`. `nonce` must be fresh random bytes for every message.
    pub fn seal(
        &self,
        room: &str,
        dir: Direction,
        nonce: [u8; NONCE_LEN],
        plaintext: &[u8],
    ) -> Vec<u8> {
        self.seal_bound(room, dir, &[], nonce, plaintext)
    }

    /// [`seal`](Self::seal), bound to `binding` as well: it opens only with
    /// the same binding.
    pub fn seal_bound(
        &self,
        room: &str,
        dir: Direction,
        binding: &[u8],
        nonce: [u8; NONCE_LEN],
        plaintext: &[u8],
    ) -> Vec<u8> {
        let aad = aad(room, dir, binding);
        let ct = self
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: &aad,
                },
            )
            // Encryption fails only for inputs over ~256 GiB; signaling payloads are bounded by the relay.
            .expect("XChaCha20-Poly1305 cannot fail for a bounded message");
        let mut out = Vec::with_capacity(1 + NONCE_LEN + ct.len());
        out.push(SEAL_VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ct);
        out
    }

    pub fn open(&self, room: &str, dir: Direction, sealed: &[u8]) -> Result<Vec<u8>, SealError> {
        self.open_bound(room, dir, &[], sealed)
    }

    /// Opens what [`seal_bound`](Self::seal_bound) sealed with the same binding.
    pub fn open_bound(
        &self,
        room: &str,
        dir: Direction,
        binding: &[u8],
        sealed: &[u8],
    ) -> Result<Vec<u8>, SealError> {
        if sealed.len() < 1 + NONCE_LEN + TAG_LEN {
            return Err(SealError::TooShort);
        }
        if sealed[0] != SEAL_VERSION {
            return Err(SealError::UnknownVersion(sealed[0]));
        }
        let nonce = XNonce::from_slice(&sealed[1..1 + NONCE_LEN]);
        let aad = aad(room, dir, binding);
        self.cipher
            .decrypt(
                nonce,
                Payload {
                    msg: &sealed[1 + NONCE_LEN..],
                    aad: &aad,
                },
            )
            .map_err(|_| SealError::WrongKey)
    }

    /// Seals a signaling payload into the relay message's `data` string.
    pub fn seal_payload(
        &self,
        room: &str,
        dir: Direction,
        nonce: [u8; NONCE_LEN],
        payload: &SignalPayload,
    ) -> String {
        self.seal_payload_bound(room, dir, &[], nonce, payload)
    }

    /// [`seal_payload`](Self::seal_payload) with a binding (see [`seal_bound`](Self::seal_bound)).
    pub fn seal_payload_bound(
        &self,
        room: &str,
        dir: Direction,
        binding: &[u8],
        nonce: [u8; NONCE_LEN],
        payload: &SignalPayload,
    ) -> String {
        // Serializing these plain enums of strings cannot fail.
        let json = serde_json::to_vec(payload).expect("signaling payload serializes");
        URL_SAFE_NO_PAD.encode(self.seal_bound(room, dir, binding, nonce, &json))
    }

    /// Opens the `data` string of a relay message.
    pub fn open_payload(
        &self,
        room: &str,
        dir: Direction,
        data: &str,
    ) -> Result<SignalPayload, SealError> {
        self.open_payload_bound(room, dir, &[], data)
    }

    /// [`open_payload`](Self::open_payload) with a binding.
    pub fn open_payload_bound(
        &self,
        room: &str,
        dir: Direction,
        binding: &[u8],
        data: &str,
    ) -> Result<SignalPayload, SealError> {
        let sealed = URL_SAFE_NO_PAD
            .decode(data)
            .map_err(|_| SealError::NotBase64)?;
        let plain = self.open_bound(room, dir, binding, &sealed)?;
        serde_json::from_slice(&plain).map_err(|e| SealError::BadPayload(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> SignalKey {
        SignalKey::from_secret(&ShareSecret::from_bytes([b; 16]))
    }

    #[test]
    fn round_trip() {
        let k = key(7);
        let p = SignalPayload::Offer {
            sdp: "v=0\r\n".into(),
        };
        let data = k.seal_payload("room0001", Direction::GuestToHost, [1; 24], &p);
        assert_eq!(
            k.open_payload("room0001", Direction::GuestToHost, &data)
                .unwrap(),
            p
        );
    }

    #[test]
    fn wrong_secret_is_rejected() {
        let data = key(7).seal_payload(
            "room0001",
            Direction::GuestToHost,
            [1; 24],
            &SignalPayload::Answer {
                sdp: "x".into(),
                sig: String::new(),
            },
        );
        assert_eq!(
            key(8).open_payload("room0001", Direction::GuestToHost, &data),
            Err(SealError::WrongKey)
        );
    }

    #[test]
    fn tampered_ciphertext_is_rejected() {
        let k = key(7);
        let mut sealed = k.seal("room0001", Direction::HostToGuest, [2; 24], b"hello");
        for i in [0usize, 1, 30, sealed.len() - 1] {
            let mut t = sealed.clone();
            t[i] ^= 0x40;
            assert!(
                k.open("room0001", Direction::HostToGuest, &t).is_err(),
                "flip at {i} accepted"
            );
        }
        sealed.truncate(20);
        assert_eq!(
            k.open("room0001", Direction::HostToGuest, &sealed),
            Err(SealError::TooShort)
        );
    }

    #[test]
    fn room_and_direction_are_bound() {
        let k = key(7);
        let sealed = k.seal("room0001", Direction::HostToGuest, [3; 24], b"hi");
        assert_eq!(
            k.open("room0002", Direction::HostToGuest, &sealed),
            Err(SealError::WrongKey)
        );
        assert_eq!(
            k.open("room0001", Direction::GuestToHost, &sealed),
            Err(SealError::WrongKey)
        );
    }

    #[test]
    fn a_binding_must_match_to_open() {
        let k = key(7);
        let sealed = k.seal_bound(
            "room0001",
            Direction::GuestToHost,
            b"\x01abc",
            [4; 24],
            b"hi",
        );
        assert_eq!(
            k.open_bound("room0001", Direction::GuestToHost, b"\x01abc", &sealed),
            Ok(b"hi".to_vec())
        );
        for other in [&b"\x02abc"[..], b"\x01abd", b""] {
            assert_eq!(
                k.open_bound("room0001", Direction::GuestToHost, other, &sealed),
                Err(SealError::WrongKey)
            );
        }
    }

    #[test]
    fn a_nonce_sequence_never_repeats_and_keeps_its_prefix() {
        let mut n = NonceSequence::new([9; 16]);
        let a = n.next_nonce();
        let b = n.next_nonce();
        assert_ne!(a, b);
        assert_eq!(&a[..16], &[9; 16]);
        assert_eq!(&b[16..], &1u64.to_le_bytes());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let k = key(1);
        assert_eq!(
            k.open_payload("room0001", Direction::HostToGuest, "!!!"),
            Err(SealError::NotBase64)
        );
        assert_eq!(
            k.open_payload("room0001", Direction::HostToGuest, ""),
            Err(SealError::TooShort)
        );
    }
}
