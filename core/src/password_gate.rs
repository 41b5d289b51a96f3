//! Guesses at a link's password, sans IO: each guess is counted before it is
//! tried, against the budget of the address it came from and the link's own,
//! so guesses sent at once cannot all slip in before any is counted, and a flood
//! from one address leaves the others their guesses.
//!
//! ```text
//! a visitor's answer (now, source) --> take()  -> Err(wait): told "try again in N s", not tried
//!                                               -> Ok(ticket): the shell runs Argon2 off its loop
//! Argon2's verdict (ticket, right) --> settle() a right guess is given back; a wrong one stays spent
//! ```
//!
//! | budget | holds | refills |
//! | --- | --- | --- |
//! | per source (an address; `None`: one shared by visitors whose address is not known) | [`SOURCE_BURST`] guesses | one per [`SOURCE_REFILL_MS`] |
//! | per link (all sources together) | [`LINK_BURST`] guesses | one per [`LINK_REFILL_MS`] |
//!
//! A guess needs a whole guess in both. The wait told is the longer of the two
//! refills, so it is never more than [`SOURCE_REFILL_MS`] away: twelve wrong
//! guesses at once cost five, the other seven are told to wait, and the right
//! password is taken again within 12 s (not after the sum of all of them).
//!
//! Bounds: at most [`MAX_SOURCES`] sources are remembered. A source whose
//! budget is full again carries nothing and is forgotten first; when every one
//! remembered is still spending, new sources share one budget (and the link's
//! budget bounds them all).

use std::collections::HashMap;

use crate::Millis;

/// Wrong guesses one source may make at once...
pub const SOURCE_BURST: u32 = 5;
/// ...and then one more per this long.
pub const SOURCE_REFILL_MS: u64 = 12_000;
/// Wrong guesses a link takes at once from all its sources together...
pub const LINK_BURST: u32 = 20;
/// ...and then one more per this long.
pub const LINK_REFILL_MS: u64 = 3_000;
/// Sources remembered at once.
pub const MAX_SOURCES: usize = 1024;

/// Where a guess came from: an address the shell knows (an IPv4 address, or
/// the /64 of an IPv6 one, as 16 bytes), or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GuessSource(pub Option<[u8; 16]>);

/// A guess allowed and counted: hand it back with the verdict.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a guess taken is settled with its verdict"]
pub struct GuessTicket {
    source: Bucket,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Bucket {
    Source(GuessSource),
    /// New sources when every remembered one is still spending.
    Overflow,
}

/// A token bucket of guesses, counted in milliseconds of refill (a guess is
/// `every_ms` of them), so time converts to guesses exactly.
#[derive(Debug, Clone, Copy)]
struct Budget {
    ms: u64,
    at: Millis,
}

impl Budget {
    fn full(burst: u32, every_ms: u64, now: Millis) -> Budget {
        Budget {
            ms: u64::from(burst) * every_ms,
            at: now,
        }
    }

    fn refill(&mut self, now: Millis, burst: u32, every_ms: u64) {
        let grown = now.0.saturating_sub(self.at.0);
        self.ms = self
            .ms
            .saturating_add(grown)
            .min(u64::from(burst) * every_ms);
        self.at = Millis(self.at.0.max(now.0));
    }

    /// How long until a whole guess is there (0: now).
    fn wait_ms(&self, every_ms: u64) -> u64 {
        every_ms.saturating_sub(self.ms)
    }

    fn spend(&mut self, every_ms: u64) {
        self.ms -= every_ms;
    }

    fn give_back(&mut self, burst: u32, every_ms: u64) {
        self.ms = (self.ms + every_ms).min(u64::from(burst) * every_ms);
    }

    fn is_full(&self, burst: u32, every_ms: u64) -> bool {
        self.ms >= u64::from(burst) * every_ms
    }
}

/// One link's guesses. See the module docs.
#[derive(Debug)]
pub struct PasswordGate {
    link: Budget,
    sources: HashMap<Bucket, Budget>,
}

impl PasswordGate {
    pub fn new(now: Millis) -> PasswordGate {
        PasswordGate {
            link: Budget::full(LINK_BURST, LINK_REFILL_MS, now),
            sources: HashMap::new(),
        }
    }

    /// A guess from `source` at `now`: counted at once, or the wait before
    /// one is taken, in milliseconds.
    pub fn take(&mut self, now: Millis, source: GuessSource) -> Result<GuessTicket, u64> {
        self.link.refill(now, LINK_BURST, LINK_REFILL_MS);
        let bucket = self.bucket_for(now, source);
        let budget = self
            .sources
            .entry(bucket)
            .or_insert_with(|| Budget::full(SOURCE_BURST, SOURCE_REFILL_MS, now));
        budget.refill(now, SOURCE_BURST, SOURCE_REFILL_MS);
        let wait = budget
            .wait_ms(SOURCE_REFILL_MS)
            .max(self.link.wait_ms(LINK_REFILL_MS));
        if wait > 0 {
            return Err(wait);
        }
        budget.spend(SOURCE_REFILL_MS);
        self.link.spend(LINK_REFILL_MS);
        Ok(GuessTicket { source: bucket })
    }

    /// Argon2's verdict on a guess taken: a right guess costs nothing.
    pub fn settle(&mut self, ticket: GuessTicket, right: bool) {
        if !right {
            return;
        }
        self.link.give_back(LINK_BURST, LINK_REFILL_MS);
        if let Some(b) = self.sources.get_mut(&ticket.source) {
            b.give_back(SOURCE_BURST, SOURCE_REFILL_MS);
        }
    }

    /// Sources remembered now (at most [`MAX_SOURCES`], and the shared one).
    pub fn sources(&self) -> usize {
        self.sources.len()
    }

    /// The bucket `source` spends from: its own, made room for if need be.
    fn bucket_for(&mut self, now: Millis, source: GuessSource) -> Bucket {
        let own = Bucket::Source(source);
        if self.sources.contains_key(&own) || self.remembered() < MAX_SOURCES {
            return own;
        }
        // Forget the sources whose budgets are full again: they carry nothing.
        self.sources.retain(|b, budget| {
            let mut b2 = *budget;
            b2.refill(now, SOURCE_BURST, SOURCE_REFILL_MS);
            matches!(b, Bucket::Overflow) || !b2.is_full(SOURCE_BURST, SOURCE_REFILL_MS)
        });
        if self.remembered() < MAX_SOURCES {
            own
        } else {
            Bucket::Overflow
        }
    }

    /// Sources with a budget of their own (the shared one aside).
    fn remembered(&self) -> usize {
        self.sources
            .keys()
            .filter(|b| matches!(b, Bucket::Source(_)))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: GuessSource = GuessSource(Some([10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]));
    const B: GuessSource = GuessSource(Some([10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]));

    fn source(n: u32) -> GuessSource {
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&n.to_be_bytes());
        GuessSource(Some(a))
    }

    #[test]
    fn twelve_guesses_at_once_are_counted_before_any_is_tried_and_the_right_one_waits_one_refill() {
        let mut g = PasswordGate::new(Millis(0));
        // Twelve answers arrive before any Argon2 verdict.
        let results: Vec<_> = (0..12).map(|_| g.take(Millis(0), A)).collect();
        let tried = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(tried, SOURCE_BURST as usize, "{results:?}");
        for r in &results[SOURCE_BURST as usize..] {
            assert_eq!(*r, Err(SOURCE_REFILL_MS));
        }
        for r in results.into_iter().flatten() {
            g.settle(r, false);
        }
        // The right password: one refill later, not the sum of the floods.
        assert_eq!(g.take(Millis(11_999), A), Err(1), "a millisecond short");
        let t = g
            .take(Millis(SOURCE_REFILL_MS), A)
            .expect("taken after one refill");
        g.settle(t, true);
    }

    #[test]
    fn a_right_guess_is_given_back() {
        let mut g = PasswordGate::new(Millis(0));
        for _ in 0..50 {
            let t = g.take(Millis(0), A).expect("a right guess costs nothing");
            g.settle(t, true);
        }
    }

    #[test]
    fn a_flood_from_one_address_leaves_another_its_guesses() {
        let mut g = PasswordGate::new(Millis(0));
        for _ in 0..100 {
            if let Ok(t) = g.take(Millis(0), A) {
                g.settle(t, false);
            }
        }
        let t = g.take(Millis(0), B).expect("another address still guesses");
        g.settle(t, true);
    }

    #[test]
    fn the_link_as_a_whole_takes_at_most_its_burst_then_one_per_refill() {
        let mut g = PasswordGate::new(Millis(0));
        let mut tried = 0;
        for n in 0..100 {
            if let Ok(t) = g.take(Millis(0), source(n)) {
                tried += 1;
                g.settle(t, false);
            }
        }
        assert_eq!(tried, LINK_BURST);
        assert_eq!(g.take(Millis(0), source(500)), Err(LINK_REFILL_MS));
        // An hour of such guessing: at most one per LINK_REFILL_MS.
        let mut tried = 0;
        for s in 0..3600u64 {
            for n in 0..10 {
                if let Ok(t) = g.take(Millis(s * 1000), source(1000 + n)) {
                    tried += 1;
                    g.settle(t, false);
                }
            }
        }
        assert!(
            tried <= 3600 / (LINK_REFILL_MS / 1000) as u32 + 1,
            "{tried}"
        );
    }

    #[test]
    fn sources_are_bounded_and_those_still_spending_are_not_forgotten() {
        let mut g = PasswordGate::new(Millis(0));
        // Many sources, each one wrong guess, spread over time (the link's refill allows them).
        for n in 0..(MAX_SOURCES as u32 + 200) {
            let now = Millis(u64::from(n) * LINK_REFILL_MS);
            if let Ok(t) = g.take(now, source(n)) {
                g.settle(t, false);
            }
            assert!(g.sources() <= MAX_SOURCES + 1, "{} sources", g.sources());
        }
        // A source that spent its budget recently is still held to it.
        let now = Millis(u64::from(MAX_SOURCES as u32 + 200) * LINK_REFILL_MS);
        let mut g = PasswordGate::new(now);
        for _ in 0..SOURCE_BURST {
            let t = g.take(now, A).expect("burst");
            g.settle(t, false);
        }
        for n in 0..(MAX_SOURCES as u32 * 2) {
            let _ = g.take(Millis(now.0 + u64::from(n)), source(n + 10));
        }
        assert!(
            g.take(Millis(now.0 + 5_000), A).is_err(),
            "a spent source was forgotten and got a fresh budget"
        );
    }

    #[test]
    fn the_wait_is_never_longer_than_a_source_refill() {
        let mut g = PasswordGate::new(Millis(0));
        for i in 0..10_000u64 {
            match g.take(Millis(i * 7), A) {
                Ok(t) => g.settle(t, false),
                Err(wait) => assert!(wait <= SOURCE_REFILL_MS, "{wait}"),
            }
        }
    }
}
