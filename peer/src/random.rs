//! The system's random source, in one place: link secrets, epochs and the seeds
//! of the signaling machines' nonce sequences.

/// Why the system's random source could not be read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the system's random source failed: {0}")]
pub struct RandomError(String);

/// `N` fresh random bytes.
pub fn random_bytes<const N: usize>() -> Result<[u8; N], RandomError> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| RandomError(e.to_string()))?;
    Ok(b)
}
