//! A simulated network for tests of anything that drives a session: a one-way
//! link that loses, duplicates, delays and reorders frames, and a small
//! deterministic PRNG so that a failing run replays exactly. Sans-IO like the
//! rest of this crate: time is whatever the caller says it is.
//!
//! Used by this crate's two-peer tests and by the native peer's drive-loop
//! tests (an in-memory data link over a [`SimLink`] each way).

/// A small deterministic PRNG (xorshift64*), so failures replay exactly.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64) / ((1u64 << 53) as f64) < p
    }
}

/// How a simulated one-way link misbehaves.
#[derive(Debug, Clone, Copy)]
pub struct LinkModel {
    pub latency_ms: u64,
    pub jitter_ms: u64,
    pub loss: f64,
    pub duplicate: f64,
    /// The link's rate in bytes per millisecond (0: unlimited). Frames queue
    /// behind each other at this rate, as on a slow uplink.
    pub bytes_per_ms: u64,
}

impl LinkModel {
    pub const PERFECT: LinkModel = LinkModel {
        latency_ms: 1,
        jitter_ms: 0,
        loss: 0.0,
        duplicate: 0.0,
        bytes_per_ms: 0,
    };
    pub const BAD: LinkModel = LinkModel {
        latency_ms: 20,
        jitter_ms: 30,
        loss: 0.1,
        duplicate: 0.03,
        bytes_per_ms: 0,
    };
}

#[derive(Debug)]
pub struct SimLink {
    model: LinkModel,
    in_flight: Vec<(u64, u64, Vec<u8>)>,
    order: u64,
    /// When the link has sent everything queued (with a rate).
    busy_until: u64,
    pub frames: u64,
    pub bytes: u64,
    pub dropped: u64,
}

impl SimLink {
    pub fn new(model: LinkModel) -> Self {
        SimLink {
            model,
            in_flight: Vec::new(),
            order: 0,
            busy_until: 0,
            frames: 0,
            bytes: 0,
            dropped: 0,
        }
    }

    pub fn send(&mut self, rng: &mut Rng, now: u64, frame: Vec<u8>) {
        self.frames += 1;
        self.bytes += frame.len() as u64;
        if rng.chance(self.model.loss) {
            self.dropped += 1;
            return;
        }
        let copies = if rng.chance(self.model.duplicate) {
            2
        } else {
            1
        };
        let sent = match frame.len() as u64 {
            len if self.model.bytes_per_ms > 0 => {
                self.busy_until = self.busy_until.max(now) + len.div_ceil(self.model.bytes_per_ms);
                self.busy_until
            }
            _ => now,
        };
        for _ in 0..copies {
            let at = sent + self.model.latency_ms + rng.below(self.model.jitter_ms + 1);
            self.order += 1;
            self.in_flight.push((at, self.order, frame.clone()));
        }
    }

    pub fn due(&mut self, now: u64) -> Vec<Vec<u8>> {
        let mut due: Vec<(u64, u64, Vec<u8>)> = Vec::new();
        let mut i = 0;
        while i < self.in_flight.len() {
            if self.in_flight[i].0 <= now {
                due.push(self.in_flight.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|(at, order, _)| (*at, *order));
        due.into_iter().map(|(_, _, f)| f).collect()
    }

    pub fn next_delivery(&self) -> Option<u64> {
        self.in_flight.iter().map(|(at, _, _)| *at).min()
    }

    /// A quiet spell: nothing in flight or sent from now on arrives before
    /// `until`, then everything arrives in order (a transport retransmitting
    /// after timeouts, a radio out of reach for a while).
    pub fn pause_until(&mut self, until: u64) {
        for (at, _, _) in &mut self.in_flight {
            *at = (*at).max(until);
        }
        self.busy_until = self
            .busy_until
            .max(until.saturating_sub(self.model.latency_ms));
    }
}
