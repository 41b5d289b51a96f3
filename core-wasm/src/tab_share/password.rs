//! A tab share's link passwords, kept only as Argon2id hashes (PHC strings,
//! as `linkfs share` keeps them in `links.json`). Hashing and checking are
//! slow on purpose (tens of milliseconds and 19 MiB each), so the page runs
//! them in a worker of its own (`web/src/tab-share/password-worker.ts`),
//! never on the loop that serves visitors.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use wasm_bindgen::prelude::*;

/// The Argon2id hash of `password`, with a fresh salt.
#[wasm_bindgen(js_name = passwordHash)]
pub fn password_hash(password: &str) -> Result<String, JsError> {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes).map_err(|_| {
        JsError::new("this browser has no secure random numbers (crypto.getRandomValues)")
    })?;
    let salt = SaltString::encode_b64(&bytes)
        .map_err(|e| JsError::new(&format!("cannot keep the password: {e}")))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| JsError::new(&format!("cannot keep the password: {e}")))
}

/// Whether `attempt` matches `hash` (false for a damaged hash).
#[wasm_bindgen(js_name = passwordMatches)]
pub fn password_matches(hash: &str, attempt: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| {
        Argon2::default()
            .verify_password(attempt.as_bytes(), &h)
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_matches_its_hash_and_nothing_else() {
        let hash = password_hash("open sesame").unwrap();
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(password_matches(&hash, "open sesame"));
        assert!(!password_matches(&hash, "open sesame "));
        assert!(!password_matches("not a hash", "open sesame"));
    }
}
