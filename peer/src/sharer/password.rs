//! A link's password, on the sharer's side: kept only as an Argon2id hash
//! (`links.json`), checked for each visitor before anything of the share is
//! sent, with the guesses against one link rate-limited.
//!
//! ```text
//! visitor                                   sharer (a password link)
//!   Hello ------------------------------->  held
//!         <-----------------------------  PasswordNeeded
//!   Password(text) ---------------------->  too many wrong lately?  Goodbye(TooManyTries, "wait N s")
//!                                           wrong?                  Goodbye(WrongPassword), one guess spent
//!                                           right: the held Hello goes to the session (Welcome, index...)
//! ```
//!
//! Why it is safe to send the password itself: it travels on the data
//! channel (DTLS) to the sharer the handshake authenticated (the sharer signs
//! its answer, fingerprint included, with the key the room is derived from),
//! so neither the relay nor anyone holding only the link sees it or can test
//! a guess without asking the sharer. Each visitor's connection gets one
//! guess; each link [`GUESSES`] wrong guesses at once, then one more every
//! [`GUESS_EVERY`].

use std::sync::Mutex;
use std::time::{Duration, Instant};

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

/// Wrong guesses a link takes at once...
pub const GUESSES: u32 = 5;
/// ...and then one more per this long.
pub const GUESS_EVERY: Duration = Duration::from_secs(12);
/// How long a visitor may take to give the password.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(600);

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

/// One link's password and its guesses (shared by the link's visitors).
#[derive(Debug)]
pub struct LinkPassword {
    hash: String,
    /// Wrong guesses it may take now, and when that was counted.
    left: Mutex<(f64, Instant)>,
}

impl LinkPassword {
    pub fn new(hash: String) -> LinkPassword {
        LinkPassword {
            hash,
            left: Mutex::new((f64::from(GUESSES), Instant::now())),
        }
    }

    fn refill(&self, now: Instant) -> (f64, Instant) {
        let Ok(mut left) = self.left.lock() else {
            return (0.0, now);
        };
        let grown = now.saturating_duration_since(left.1).as_secs_f64() / GUESS_EVERY.as_secs_f64();
        *left = ((left.0 + grown).min(f64::from(GUESSES)), now);
        *left
    }

    /// Checks a guess (Argon2 off the runtime's workers).
    pub async fn guess(&self, attempt: String) -> Guess {
        let (left, _) = self.refill(Instant::now());
        if left < 1.0 {
            return Guess::TooMany(GUESS_EVERY.mul_f64(1.0 - left));
        }
        let hash = self.hash.clone();
        let right = tokio::task::spawn_blocking(move || matches(&hash, &attempt))
            .await
            .unwrap_or(false);
        if right {
            return Guess::Right;
        }
        if let Ok(mut left) = self.left.lock() {
            left.0 -= 1.0;
        }
        Guess::Wrong
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

    #[tokio::test]
    async fn wrong_guesses_against_a_link_are_rate_limited_then_allowed_again() {
        let p = LinkPassword::new(hash("right").unwrap());
        for _ in 0..GUESSES {
            assert_eq!(p.guess("wrong".into()).await, Guess::Wrong);
        }
        // Even the right one waits now.
        match p.guess("right".into()).await {
            Guess::TooMany(wait) => assert!(wait <= GUESS_EVERY, "{wait:?}"),
            other => panic!("{other:?}"),
        }
        // A guess's worth of time later, one more is taken.
        if let Ok(mut left) = p.left.lock() {
            left.1 -= GUESS_EVERY;
        }
        assert_eq!(p.guess("right".into()).await, Guess::Right);
        assert!(too_many(Duration::from_millis(300)).contains("1 s"));
    }
}
