//! A link's password, on the sharer's side: kept only as an Argon2id hash
//! (`links.json`) and checked off the share loop when the share machine asks
//! (`linkfs_core::share`: its prompt, and the gate that counts guesses per
//! address and per link before they are tried).
//!
//! ```text
//! visitor                                   sharer (a password link)
//!   Hello ------------------------------->  held; no visitor slot yet (one of those at a prompt)
//!         <-----------------------------  PasswordNeeded
//!   Password(text) ---------------------->  the gate: no guess left?  Goodbye(TooManyTries, "wait N s")
//!                                           counted, then Argon2 (here): wrong? Goodbye(WrongPassword)
//!                                           right: a visitor slot (or Goodbye: the share is full),
//!                                           then the held Hello goes to the session (Welcome, index...)
//! ```
//!
//! Why it is safe to send the password itself: it travels on the data
//! channel (DTLS) to the sharer the handshake authenticated (the sharer signs
//! its answer, fingerprint included, with the key the room is derived from),
//! so neither the relay nor anyone holding only the link sees it or can test
//! a guess without asking the sharer. Each visitor's connection gets one
//! guess; how many the link takes is the gate's.

use std::net::IpAddr;

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use linkfs_core::GuessSource;

/// Why a password cannot be kept.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HashError {
    #[error("cannot keep the password: {0}")]
    Argon2(argon2::password_hash::Error),
    #[error("cannot keep the password: hashing it failed ({0})")]
    Task(#[from] tokio::task::JoinError),
}

/// The Argon2id hash (PHC string) of `password`, with a fresh salt.
pub fn hash(password: &str) -> Result<String, HashError> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(HashError::Argon2)
}

/// Whether `password` matches `hash` (in constant time; false for a damaged hash).
pub fn matches(hash: &str, password: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| {
        Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

/// Where a guess came from, for the gate: the address the visitor's data link
/// comes from (an IPv6 address by its /64), if known. Every address of this
/// machine (loopback included) is one source: a visitor on the sharer's own
/// host, whichever of its addresses ICE picked, has one budget.
pub fn source_of(addr: Option<IpAddr>) -> GuessSource {
    let this_host =
        addr.is_some_and(|a| a.is_loopback() || crate::local_addrs::interface_addrs().contains(&a));
    if this_host {
        return GuessSource(Some([0xff; 16]));
    }
    GuessSource(addr.map(|a| match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => {
            let mut o = v6.octets();
            o[8..].fill(0);
            o
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_matches_its_password_only() {
        let h = hash("open sesame").unwrap();
        assert!(h.starts_with("$argon2id$"), "{h}");
        assert!(!h.contains("open sesame"));
        assert!(matches(&h, "open sesame"));
        assert!(!matches(&h, "open sesame "));
        assert!(!matches("not a hash", "open sesame"));
        assert_ne!(hash("open sesame").unwrap(), h, "salted");
    }

    #[test]
    fn an_ipv6_source_is_its_64() {
        let a = source_of(Some("2001:db8:1:2:aaaa::1".parse().unwrap()));
        let b = source_of(Some("2001:db8:1:2:bbbb::2".parse().unwrap()));
        let c = source_of(Some("2001:db8:1:3::1".parse().unwrap()));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(source_of(None), GuessSource(None));
        // This machine's addresses are one source, whichever ICE picked.
        let here = source_of(Some("127.0.0.1".parse().unwrap()));
        assert_eq!(here, source_of(Some("::1".parse().unwrap())));
        for a in crate::local_addrs::interface_addrs() {
            assert_eq!(source_of(Some(a)), here, "{a}");
        }
    }
}
