//! Per-connection message rate limit: a token bucket, plus patience for refusals.
//!
//! Sans-IO: the caller passes the time in. Each message takes one token; the bucket
//! holds `burst` tokens and refills at `rate` per second. A message that finds the
//! bucket empty is refused (dropped, the sender told `rate-limited`, the connection
//! kept). Refusals draw on a second bucket, *patience*, of `max_refused` that refills
//! at one per second; when patience runs out the abuse is sustained and the
//! connection is closed. The sender is told about refusals at most once per second,
//! so refusing costs the relay no more writes than it saves.

use std::time::{Duration, Instant};

/// What to do with one incoming message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateVerdict {
    /// Within the rate: handle it.
    Accept,
    /// Over the rate: drop it; tell the sender if `notify`.
    Refuse { notify: bool },
    /// Over the rate for too long: close the connection.
    Abuse,
}

/// The rate state of one connection (about 48 bytes).
#[derive(Debug, Clone)]
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    tokens: f64,
    patience_max: f64,
    patience: f64,
    last: Instant,
    last_notice: Option<Instant>,
}

/// Refusals forgiven per second.
const PATIENCE_REFILL_PER_SEC: f64 = 1.0;
/// Least time between two `rate-limited` notices to one connection.
const NOTICE_INTERVAL: Duration = Duration::from_secs(1);

impl RateLimiter {
    /// A full bucket at `now`.
    pub fn new(rate_per_sec: u32, burst: u32, max_refused: u32, now: Instant) -> Self {
        RateLimiter {
            rate: f64::from(rate_per_sec),
            burst: f64::from(burst),
            tokens: f64::from(burst),
            patience_max: f64::from(max_refused),
            patience: f64::from(max_refused),
            last: now,
            last_notice: None,
        }
    }

    /// Accounts for one message arriving at `now`.
    pub fn check(&mut self, now: Instant) -> RateVerdict {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.patience = (self.patience + elapsed * PATIENCE_REFILL_PER_SEC).min(self.patience_max);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return RateVerdict::Accept;
        }
        if self.patience < 1.0 {
            return RateVerdict::Abuse;
        }
        self.patience -= 1.0;
        let notify = self
            .last_notice
            .is_none_or(|t| now.saturating_duration_since(t) >= NOTICE_INTERVAL);
        if notify {
            self.last_notice = Some(now);
        }
        RateVerdict::Refuse { notify }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(now: Instant) -> RateLimiter {
        RateLimiter::new(50, 100, 100, now)
    }

    #[test]
    fn a_burst_is_accepted_then_refused_with_one_notice() {
        let t0 = Instant::now();
        let mut r = limiter(t0);
        for _ in 0..100 {
            assert_eq!(r.check(t0), RateVerdict::Accept);
        }
        assert_eq!(r.check(t0), RateVerdict::Refuse { notify: true });
        assert_eq!(r.check(t0), RateVerdict::Refuse { notify: false });
    }

    #[test]
    fn the_rate_refills_over_time() {
        let t0 = Instant::now();
        let mut r = limiter(t0);
        for _ in 0..100 {
            r.check(t0);
        }
        // 50 per second: after 100 ms, five more are allowed.
        let t1 = t0 + Duration::from_millis(100);
        for _ in 0..5 {
            assert_eq!(r.check(t1), RateVerdict::Accept);
        }
        assert!(matches!(r.check(t1), RateVerdict::Refuse { .. }));
    }

    #[test]
    fn a_steady_sender_at_the_rate_is_never_refused() {
        let t0 = Instant::now();
        let mut r = limiter(t0);
        for i in 0..10_000u64 {
            let t = t0 + Duration::from_millis(20 * i);
            assert_eq!(r.check(t), RateVerdict::Accept, "message {i}");
        }
    }

    #[test]
    fn sustained_abuse_is_closed_after_the_patience_runs_out() {
        let t0 = Instant::now();
        let mut r = limiter(t0);
        let mut verdicts = Vec::new();
        for _ in 0..(100 + 100 + 1) {
            verdicts.push(r.check(t0));
        }
        assert!(verdicts[..100].iter().all(|v| *v == RateVerdict::Accept));
        assert!(
            verdicts[100..200]
                .iter()
                .all(|v| matches!(v, RateVerdict::Refuse { .. }))
        );
        assert_eq!(verdicts[200], RateVerdict::Abuse);
    }

    #[test]
    fn twice_the_rate_for_a_few_seconds_is_abuse() {
        let t0 = Instant::now();
        let mut r = limiter(t0);
        // 100 messages per second, 1 every 10 ms.
        let closed_at = (0..100_000u64)
            .find(|i| r.check(t0 + Duration::from_millis(10 * i)) == RateVerdict::Abuse)
            .map(|i| Duration::from_millis(10 * i));
        let closed_at = closed_at.expect("sustained abuse must be closed");
        assert!(
            closed_at > Duration::from_secs(2) && closed_at < Duration::from_secs(6),
            "closed after {closed_at:?}"
        );
    }

    #[test]
    fn time_going_backwards_does_not_panic_or_refill() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let mut r = limiter(t0);
        for _ in 0..100 {
            r.check(t0);
        }
        assert!(matches!(
            r.check(t0 - Duration::from_secs(5)),
            RateVerdict::Refuse { .. }
        ));
    }
}
