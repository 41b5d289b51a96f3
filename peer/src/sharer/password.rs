//! A link's password, on the sharer's side: kept only as an Argon2id hash
//! (`links.json`), checked for each visitor before anything of the share is
//! sent, with the guesses against one link counted before they are tried
//! ([`linkfs_core::PasswordGate`]: per address and per link).
//!
//! ```text
//! visitor                                   sharer (a password link)
//!   Hello ------------------------------->  held; no visitor slot yet (one of those at a prompt)
//!         <-----------------------------  PasswordNeeded
//!   Password(text) ---------------------->  the gate: no guess left?  Goodbye(TooManyTries, "wait N s")
//!                                           counted, then Argon2: wrong? Goodbye(WrongPassword)
//!                                           right: a visitor slot (or Goodbye: the share is full),
//!                                           then the held Hello goes to the session (Welcome, index...)
//! ```
//!
//! Why it is safe to send the password itself: it travels on the data
//! channel (DTLS) to the sharer the handshake authenticated (the sharer signs
//! its answer, fingerprint included, with the key the room is derived from),
//! so neither the relay nor anyone holding only the link sees it or can test
//! a guess without asking the sharer. Each visitor's connection gets one
//! guess; how many the link takes is the gate's (see its docs).

use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use linkfs_core::{GuessSource, Millis, PasswordGate};

/// How long a visitor at the prompt may take to give the password before its
/// connection is closed (it holds no visitor slot meanwhile, only one of the
/// few at a prompt; the page connects again when its person answers).
pub const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// What a visitor is told.
pub const WRONG: &str = "The password is wrong.";

/// The Argon2id hash (PHC string) of `password`, with a fresh salt.
pub fn hash(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("cannot keep the password: {e}"))
}

/// Whether `password` matches `hash` (in constant time; false for a damaged hash).
pub fn matches(hash: &str, password: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| {
        Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

/// What a guess came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guess {
    Right,
    Wrong,
    /// Not even checked: too many wrong ones lately; a guess is taken again in this long.
    TooMany(Duration),
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

/// One link's password and its guesses (shared by the link's visitors).
#[derive(Debug)]
pub struct LinkPassword {
    hash: String,
    gate: Mutex<PasswordGate>,
    /// The gate's clock starts here.
    since: Instant,
}

impl LinkPassword {
    pub fn new(hash: String) -> LinkPassword {
        LinkPassword {
            hash,
            gate: Mutex::new(PasswordGate::new(Millis(0))),
            since: Instant::now(),
        }
    }

    fn now(&self) -> Millis {
        Millis(self.since.elapsed().as_millis() as u64)
    }

    /// Checks a guess from `source`: counted first, then Argon2 off the
    /// runtime's workers, then settled (a right guess costs nothing).
    pub async fn guess(&self, attempt: String, source: GuessSource) -> Guess {
        let now = self.now();
        let taken = self
            .gate
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(now, source);
        let ticket = match taken {
            Ok(ticket) => ticket,
            Err(wait_ms) => return Guess::TooMany(Duration::from_millis(wait_ms)),
        };
        let hash = self.hash.clone();
        let right = tokio::task::spawn_blocking(move || matches(&hash, &attempt))
            .await
            .unwrap_or(false);
        self.gate
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .settle(ticket, right);
        if right { Guess::Right } else { Guess::Wrong }
    }
}

/// The words for too many wrong guesses.
pub fn too_many(wait: Duration) -> String {
    format!(
        "Too many wrong passwords for this link lately. Try again in {} s.",
        wait.as_secs().max(1)
    )
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn twelve_guesses_sent_at_once_cost_five_and_the_right_password_waits_one_refill() {
        // Regression: the budget was checked before Argon2 ran and taken after,
        // so twelve wrong guesses at once all got "wrong", and the right
        // password was then refused for 89 s.
        let p = std::sync::Arc::new(LinkPassword::new(hash("right").unwrap()));
        let from = source_of(Some("10.0.0.9".parse().unwrap()));
        let guesses: Vec<_> = (0..12)
            .map(|_| {
                let p = p.clone();
                tokio::spawn(async move { p.guess("wrong".into(), from).await })
            })
            .collect();
        let mut wrong = 0;
        for g in guesses {
            match g.await.unwrap() {
                Guess::Wrong => wrong += 1,
                Guess::TooMany(wait) => assert!(wait <= Duration::from_secs(12), "{wait:?}"),
                Guess::Right => panic!("a wrong guess was right"),
            }
        }
        assert_eq!(wrong, 5, "guesses tried");
        match p.guess("right".into(), from).await {
            Guess::TooMany(wait) => assert!(wait <= Duration::from_secs(12), "{wait:?}"),
            other => panic!("{other:?}"),
        }
        // Another address is not locked out by this one's flood.
        let other = source_of(Some("192.168.1.20".parse().unwrap()));
        assert_eq!(p.guess("right".into(), other).await, Guess::Right);
        assert!(too_many(Duration::from_millis(300)).contains("1 s"));
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
