//! When to try again after a lost connection, sans-IO: exponential backoff
//! with a cap and a window after which the shell gives up.
//!
//! ```text
//! the connection was lost / an attempt failed --> failed(now) -> Retry::At(t) | Retry::GiveUp
//! timer <---------------------------------------- poll_timeout()
//! a new connection works ------------------------> succeeded()
//! ```
//!
//! The browser, the native receiver (`mount`, `ls`, `get`) and the sharer's
//! relay connection all reconnect with this one schedule. Attempts are spread by
//! a small deterministic jitter (from a seed the shell gives), so many visitors
//! cut off at once do not all come back in the same millisecond.

use crate::Millis;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffConfig {
    /// The wait before the first retry.
    pub first_ms: u64,
    /// The longest wait between two attempts.
    pub max_ms: u64,
    /// Give up once this long has passed since the connection was lost
    /// (`None`: never give up).
    pub give_up_after_ms: Option<u64>,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            first_ms: 250,
            max_ms: 10_000,
            give_up_after_ms: Some(5 * 60 * 1000),
        }
    }
}

/// What to do after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Try again at this time.
    At(Millis),
    /// The window is over: stop trying.
    GiveUp,
}

/// See the module docs.
#[derive(Debug, Clone)]
pub struct Backoff {
    config: BackoffConfig,
    jitter_state: u64,
    attempt: u32,
    lost_at: Option<Millis>,
    next: Option<Millis>,
}

impl Backoff {
    pub fn new(config: BackoffConfig, seed: u64) -> Self {
        Backoff {
            config,
            jitter_state: seed | 1,
            attempt: 0,
            lost_at: None,
            next: None,
        }
    }

    /// Whether the connection is down (between a failure and a success).
    pub fn is_retrying(&self) -> bool {
        self.lost_at.is_some()
    }

    /// Failed attempts since the connection was lost.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    fn jitter(&mut self, up_to: u64) -> u64 {
        // xorshift64*: deterministic for a seed, good enough to spread retries.
        let mut x = self.jitter_state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.jitter_state = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d) % up_to.max(1)
    }

    /// The connection was lost, or an attempt failed.
    pub fn failed(&mut self, now: Millis) -> Retry {
        let lost_at = *self.lost_at.get_or_insert(now);
        if let Some(window) = self.config.give_up_after_ms
            && now.0.saturating_sub(lost_at.0) >= window
        {
            self.next = None;
            return Retry::GiveUp;
        }
        let shift = self.attempt.min(20);
        let wait = self
            .config
            .first_ms
            .saturating_mul(1 << shift)
            .min(self.config.max_ms);
        self.attempt = self.attempt.saturating_add(1);
        // Up to a quarter more, so retries spread out.
        let wait = wait + self.jitter(wait / 4 + 1);
        let at = Millis(now.0 + wait);
        self.next = Some(at);
        Retry::At(at)
    }

    /// A connection works again: the next failure starts from the shortest wait.
    pub fn succeeded(&mut self) {
        self.attempt = 0;
        self.lost_at = None;
        self.next = None;
    }

    /// When the next attempt is due.
    pub fn poll_timeout(&self) -> Option<Millis> {
        self.next
    }

    /// Whether an attempt is due at `now` (and takes it).
    pub fn due(&mut self, now: Millis) -> bool {
        match self.next {
            Some(t) if now >= t => {
                self.next = None;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_to_the_cap_then_it_gives_up_after_the_window() {
        let mut b = Backoff::new(
            BackoffConfig {
                first_ms: 100,
                max_ms: 1000,
                give_up_after_ms: Some(5000),
            },
            7,
        );
        let mut now = 0;
        let mut waits = Vec::new();
        while let Retry::At(t) = b.failed(Millis(now)) {
            waits.push(t.0 - now);
            assert!(!b.due(Millis(t.0 - 1)));
            assert!(b.due(t));
            now = t.0;
        }
        assert!(waits[0] >= 100 && waits[0] <= 125, "{waits:?}");
        assert!(waits[1] >= 200 && waits[1] <= 250, "{waits:?}");
        assert!(waits.iter().all(|w| *w <= 1250), "capped: {waits:?}");
        assert!(now >= 5000, "gave up only after the window: {now}");
        assert!(b.is_retrying());
    }

    #[test]
    fn a_success_starts_over_from_the_shortest_wait() {
        let mut b = Backoff::new(BackoffConfig::default(), 1);
        b.failed(Millis(0));
        b.failed(Millis(1000));
        b.failed(Millis(3000));
        b.succeeded();
        assert!(!b.is_retrying());
        assert_eq!(b.poll_timeout(), None);
        let Retry::At(t) = b.failed(Millis(10_000)) else {
            panic!("retries again")
        };
        assert!(t.0 - 10_000 <= 250 + 63);
    }

    #[test]
    fn never_give_up_when_told_so() {
        let mut b = Backoff::new(
            BackoffConfig {
                give_up_after_ms: None,
                ..BackoffConfig::default()
            },
            3,
        );
        for n in 0..1000u64 {
            assert!(matches!(b.failed(Millis(n * 60_000)), Retry::At(_)));
        }
    }
}
