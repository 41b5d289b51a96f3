//! How much a link keeps in flight and how fast it hands frames to the data
//! channel: a delivery-rate controller on our side of webrtc-rs's SCTP, which
//! has a Reno window and no pacing of its own. Sans-IO: the writer task feeds
//! it samples and asks it when the next frame may go.
//!
//! ```text
//! writer task                           Pacer
//!  acknowledged bytes so far ---------> delivered(now, total, app_limited)
//!  the path's round trip (ICE) -------> round_trip(now, rtt)
//!  may a frame of n bytes go? <-------- window() / ready_at(now, n)
//!  it went ----------------------------> sent(now, n)
//! ```
//!
//! - **The bottleneck rate** is the highest delivery rate measured over the
//!   last [`RATE_WINDOW_ROUNDS`] round trips (at least [`MIN_RATE_WINDOW`]),
//!   one sample per frame acknowledged (see [`Pacer::delivered`]); samples taken
//!   while the writer had nothing to send (app-limited) only ever raise it.
//! - **The round trip** is the lowest seen in the last [`RTT_WINDOW`]: from
//!   how long the bytes of each frame took to be acknowledged (as TCP measures
//!   it; works through TURN and toward browsers, whose ICE checks webrtc-rs does
//!   not time), and from ICE's own checks where it has them.
//! - **The window** (bytes handed to the channel and not yet acknowledged) is
//!   1.25 times the bandwidth-delay product (1.5 while starting, so the rate
//!   can grow by more than a quarter per round trip), within
//!   [`PaceConfig::min_window`] and [`PaceConfig::max_window`]: enough to keep
//!   the path full while an acknowledgement is on its way, with little queue
//!   for a small read's answer to wait behind, bounded by what the other side
//!   buffers.
//! - **The pacing rate** is the bottleneck rate times a gain: 2 while
//!   starting (until the rate stops growing by a quarter for three rounds that
//!   had enough to send; a round ends when the frames sent at its start are
//!   acknowledged), 1/2 for one round trip to empty the queue that built, then
//!   cycling 1.25, 0.75, 1, 1, 1, 1, 1, 1 per round trip to find
//!   more bandwidth and drain the queue it built (the cycle of BBR, RFC draft
//!   `draft-cardwell-iccrg-bbr-congestion-control`). Frames leave no faster
//!   than that, with a burst of what the rate brings in 2 ms (a writer woken
//!   by a 1 ms timer must keep up), within 16 KiB and [`PaceConfig::burst`],
//!   plus one frame, so a window never leaves as one burst that overflows a 128 KiB
//!   socket buffer (coturn's, Chromium's) or a router's queue. A path with a
//!   round trip under [`SHORT_PATH`] (one host, a LAN), or whose
//!   bandwidth-delay product is below the smallest window, keeps the smallest
//!   window and is not paced: the window alone holds its bursts that small.
//!
//! Loss is webrtc-rs's SCTP's to recover; it also shrinks its own window then,
//! and the delivery rate this measures falls with it.

use std::collections::VecDeque;
use std::time::Duration;

/// Round trips the bottleneck rate is the maximum over.
pub const RATE_WINDOW_ROUNDS: u32 = 10;
/// The bottleneck rate is the maximum over at least this long.
pub const MIN_RATE_WINDOW: Duration = Duration::from_secs(1);
/// The round trip is the minimum over this long.
pub const RTT_WINDOW: Duration = Duration::from_secs(10);
/// The gains of one probing cycle, one round trip each.
const CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// The pacing gain while starting: the delivery rate may double every round
/// trip. (BBR's 2.89 overshot a queue of one BDP at the end of startup here,
/// and every loss costs webrtc-rs's Reno SCTP many round trips.)
const STARTUP_GAIN: f64 = 2.0;
/// The window in bandwidth-delay products: room for acknowledgements that come
/// late or in clumps, and a queue at the bottleneck of at most a quarter of a
/// BDP, which a small read's answer waits behind. (2, or BBR's 2.89 while
/// starting, overflowed a queue of one BDP here: on a 20 ms, 200 Mbit/s line
/// `linkfs get` moved 9-14 MB/s with 72-416 drops, against 21 MB/s and none
/// with 1.5. 1.25 moved as much, 21.2, and a small file's first byte during
/// the bulk read came in 44 / 47 ms (p50 / p99) instead of 54 / 60.)
const WINDOW_GAIN: f64 = 1.25;
/// The window while starting: 1.25 would let the delivery rate grow by at most
/// a quarter per round trip, which ends startup (it waits for growth of more
/// than a quarter) at a fraction of the path; 1.5 was the window before.
const STARTUP_WINDOW_GAIN: f64 = 1.5;
/// Round trips below this (one host, a LAN) keep the smallest window, unpaced:
/// measured toward Chromium on one host, a window grown from a few milliseconds
/// of acknowledgement delay lost 56-669 datagrams per 192 MiB at 15-18 MB/s,
/// against none at 19-22 MB/s with the fixed 32 KiB.
pub const SHORT_PATH: Duration = Duration::from_millis(4);
/// The smallest pacing budget (a paced writer may always send this at once).
const MIN_BURST: usize = 16 * 1024;
/// How late a sleeping writer may wake (tokio's timer has 1 ms ticks).
const TIMER_SLACK: Duration = Duration::from_millis(2);

/// A pacer's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaceConfig {
    /// The window never shrinks below this (and starts here).
    pub min_window: usize,
    /// Nor grows beyond this (what the other side's SCTP receive window holds).
    pub max_window: usize,
    /// Bytes that may leave at once beyond the pacing rate, at most (plus one
    /// frame): what the rate brings in 2 ms, within 16 KiB and this.
    pub burst: usize,
    /// The round trip assumed until one is measured.
    pub initial_rtt: Duration,
}

impl Default for PaceConfig {
    fn default() -> Self {
        PaceConfig {
            min_window: 64 * 1024,
            max_window: 4 * 1024 * 1024,
            burst: 64 * 1024,
            initial_rtt: Duration::from_millis(10),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Doubling every round trip until the rate stops growing.
    Startup { flat_rounds: u32, best: u64 },
    /// One round trip below the rate, to empty the queue startup built.
    Drain,
    /// Cycling the gain; the index of this round trip in [`CYCLE`].
    Probing { index: usize },
}

/// One frame in flight: what was acknowledged when it left, for its rate sample.
#[derive(Debug, Clone, Copy)]
struct Mark {
    /// Bytes sent in all once it had left.
    end: u64,
    sent_at: Duration,
    /// Bytes acknowledged in all when it left, and when that was reached.
    delivered: u64,
    delivered_at: Duration,
    /// When the frame acknowledged last (at the time this one left) had left.
    first_sent_at: Duration,
}

/// See the module docs. Times are offsets from any fixed instant.
#[derive(Debug)]
pub struct Pacer {
    config: PaceConfig,
    /// (time, rate in bytes per second): rate samples for the maximum.
    rates: VecDeque<(Duration, u64)>,
    /// (time, round trip): for the minimum.
    rtts: VecDeque<(Duration, Duration)>,
    phase: Phase,
    /// When the pacing budget was last topped up, and what it holds (bytes;
    /// negative after a frame larger than what was left).
    budget_at: Duration,
    budget: f64,
    /// Bytes sent in all, and the frames not yet acknowledged (the newest
    /// [`MAX_MARKS`]).
    sent_total: u64,
    marks: VecDeque<Mark>,
    /// Bytes acknowledged in all, and when that total was reached.
    delivered: u64,
    delivered_at: Duration,
    /// When the frame acknowledged last had left.
    first_sent_at: Duration,
    /// A round (one flight acknowledged) ends once this much is acknowledged.
    round_end: u64,
    /// Frames up to this many bytes sent in all left while the writer had
    /// nothing else to send: their samples and rounds say little about the path.
    app_limited_until: u64,
    round_app_limited: bool,
    /// The next frame to leave is app-limited ([`Pacer::idle`]).
    next_app_limited: bool,
}

/// Frames whose acknowledgement is timed, at most (older ones are not).
const MAX_MARKS: usize = 4096;

impl Pacer {
    pub fn new(config: PaceConfig) -> Pacer {
        Pacer {
            config,
            rates: VecDeque::new(),
            rtts: VecDeque::new(),
            phase: Phase::Startup {
                flat_rounds: 0,
                best: 0,
            },
            budget_at: Duration::ZERO,
            budget: config.burst as f64,
            sent_total: 0,
            marks: VecDeque::new(),
            delivered: 0,
            delivered_at: Duration::ZERO,
            first_sent_at: Duration::ZERO,
            round_end: 0,
            app_limited_until: 0,
            round_app_limited: false,
            next_app_limited: false,
        }
    }

    /// The writer had to wait for the frame it is about to send: if less than
    /// the window is in flight, the frames it sends now measure its own pace,
    /// not the path's (until the window fills).
    pub fn idle(&mut self) {
        let in_flight = self.sent_total.saturating_sub(self.delivered);
        self.next_app_limited = (in_flight as usize) < self.window();
    }

    /// The round trip now: the least of the recent ones.
    pub fn rtt(&self) -> Duration {
        self.rtts
            .iter()
            .map(|(_, r)| *r)
            .min()
            .unwrap_or(self.config.initial_rtt)
            .max(Duration::from_micros(100))
    }

    /// The bottleneck rate now, bytes per second (0 before any sample).
    pub fn bottleneck_rate(&self) -> u64 {
        self.rates.iter().map(|(_, r)| *r).max().unwrap_or(0)
    }

    /// A round trip measured at `now` (ICE's, from its connectivity checks).
    pub fn round_trip(&mut self, now: Duration, rtt: Duration) {
        if rtt.is_zero() {
            return;
        }
        self.rtts.push_back((now, rtt));
        while self
            .rtts
            .front()
            .is_some_and(|(t, _)| now.saturating_sub(*t) > RTT_WINDOW)
            && self.rtts.len() > 1
        {
            self.rtts.pop_front();
        }
    }

    /// At `now`, the other side has acknowledged `total` bytes in all.
    /// `app_limited`: the writer had nothing more to send (a rate measured
    /// then says little about the path, unless it is higher).
    ///
    /// Each frame acknowledged whole gives a rate sample as BBR takes them:
    /// the bytes acknowledged since it left, over the longer of the time they
    /// took to be acknowledged and the time they took to be sent (so a clump
    /// of late acknowledgements never reads as a faster path than the data
    /// was sent at), and a round trip (how long the frame took).
    pub fn delivered(&mut self, now: Duration, total: u64, app_limited: bool) {
        if total > self.delivered {
            self.delivered = total;
            self.delivered_at = now;
        }
        let mut newest = None;
        while self.marks.front().is_some_and(|m| m.end <= total) {
            newest = self.marks.pop_front();
        }
        let Some(m) = newest else {
            return;
        };
        self.first_sent_at = m.sent_at;
        self.round_trip(now, now.saturating_sub(m.sent_at));
        let app_limited = app_limited || m.end <= self.app_limited_until;
        self.round_app_limited |= app_limited;
        let interval = now
            .saturating_sub(m.delivered_at)
            .max(m.sent_at.saturating_sub(m.first_sent_at));
        if !interval.is_zero() {
            let rate = ((total - m.delivered) as f64 / interval.as_secs_f64()) as u64;
            if !app_limited || rate > self.bottleneck_rate() {
                self.rates.push_back((now, rate));
            }
        }
        let horizon = MIN_RATE_WINDOW.max(self.rtt() * RATE_WINDOW_ROUNDS);
        while self
            .rates
            .front()
            .is_some_and(|(t, _)| now.saturating_sub(*t) > horizon)
            && self.rates.len() > 1
        {
            self.rates.pop_front();
        }
        if total >= self.round_end {
            self.round_end = self.sent_total;
            self.next_round();
            self.round_app_limited = false;
        }
    }

    fn next_round(&mut self) {
        let rate = self.bottleneck_rate();
        self.phase = match self.phase {
            Phase::Startup { flat_rounds, best } => {
                // A round with no rate measured yet, or with nothing much to
                // send, says nothing about whether the path is full.
                if rate == 0 || self.round_app_limited || rate > best + best / 4 {
                    Phase::Startup {
                        flat_rounds: 0,
                        best: rate.max(best),
                    }
                } else if flat_rounds + 1 >= 3 {
                    Phase::Drain
                } else {
                    Phase::Startup {
                        flat_rounds: flat_rounds + 1,
                        best,
                    }
                }
            }
            Phase::Drain => Phase::Probing { index: 2 },
            Phase::Probing { index } => Phase::Probing {
                index: (index + 1) % CYCLE.len(),
            },
        };
    }

    fn gain(&self) -> f64 {
        match self.phase {
            Phase::Startup { .. } => STARTUP_GAIN,
            Phase::Drain => 1.0 / STARTUP_GAIN,
            Phase::Probing { index } => CYCLE[index],
        }
    }

    /// Whether it is still finding the path's rate.
    pub fn starting(&self) -> bool {
        matches!(self.phase, Phase::Startup { .. })
    }

    /// Bytes that may be handed to the channel and not yet acknowledged.
    pub fn window(&self) -> usize {
        // Within a host or a LAN the smallest window is enough, and a larger one
        // only lets a receiver that pauses (Chromium's network thread, with its
        // 128 KiB socket) lose datagrams.
        if self.rtt() < SHORT_PATH {
            return self.config.min_window;
        }
        let bdp = self.bottleneck_rate() as f64 * self.rtt().as_secs_f64();
        // While starting, the rate must be able to grow by more than a
        // quarter per round trip (or startup ends at once): a bigger window.
        let gain = if self.starting() {
            STARTUP_WINDOW_GAIN
        } else {
            WINDOW_GAIN
        };
        ((bdp * gain) as usize).clamp(self.config.min_window, self.config.max_window)
    }

    /// Bytes per second frames may leave at now (`None`: no measure yet, no
    /// limit beyond the window).
    pub fn pacing_rate(&self) -> Option<f64> {
        let rate = self.bottleneck_rate();
        (rate > 0).then(|| rate as f64 * self.gain())
    }

    /// The most the budget holds: what the rate brings in [`TIMER_SLACK`] (a
    /// writer sleeping on a 1 ms timer must be able to keep up with the rate),
    /// at least [`MIN_BURST`] and at most [`PaceConfig::burst`].
    fn budget_cap(&self, rate: f64) -> f64 {
        (rate * TIMER_SLACK.as_secs_f64())
            .max(MIN_BURST as f64)
            .min(self.config.burst as f64)
    }

    fn top_up(&mut self, now: Duration) {
        if let Some(rate) = self.pacing_rate() {
            let elapsed = now.saturating_sub(self.budget_at).as_secs_f64();
            self.budget = (self.budget + elapsed * rate).min(self.budget_cap(rate));
        } else {
            self.budget = self.config.burst as f64;
        }
        self.budget_at = now;
    }

    /// When a frame of `len` bytes may leave (now or later), as far as pacing
    /// goes (the window is the caller's to check).
    pub fn ready_at(&mut self, now: Duration, len: usize) -> Duration {
        self.top_up(now);
        let Some(rate) = self.pacing_rate() else {
            return now;
        };
        // A path whose bandwidth-delay product is below the smallest window
        // (loopback, a LAN) is held by the window alone: bursts are that small.
        if self.window() <= self.config.min_window {
            return now;
        }
        // A frame needs a positive budget, not a whole frame's worth: frames are
        // larger than the burst on slow paths.
        let _ = len;
        if self.budget > 0.0 {
            return now;
        }
        now + Duration::from_secs_f64(-self.budget / rate)
    }

    /// A frame of `len` bytes left at `now`.
    pub fn sent(&mut self, now: Duration, len: usize) {
        self.top_up(now);
        self.budget -= len as f64;
        if self.marks.is_empty() {
            // Nothing in flight: the flight starts now.
            self.first_sent_at = now;
            self.delivered_at = now;
        }
        self.sent_total += len as u64;
        if std::mem::take(&mut self.next_app_limited) {
            self.app_limited_until = self.sent_total;
        }
        if self.marks.len() == MAX_MARKS {
            self.marks.pop_front();
        }
        self.marks.push_back(Mark {
            end: self.sent_total,
            sent_at: now,
            delivered: self.delivered,
            delivered_at: self.delivered_at,
            first_sent_at: self.first_sent_at,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path of `rate` bytes per second and `rtt`, driven by a sender that
    /// always has data and obeys the pacer; returns the pacer and what was
    /// delivered after `secs`.
    /// (The queue figure is the largest after the first second: startup's.)
    fn run_path(rate: f64, rtt: Duration, secs: f64) -> (Pacer, u64, usize) {
        // No round trip is given: it is measured from the acknowledgements.
        let mut p = Pacer::new(PaceConfig::default());
        let frame = 60 * 1024;
        let step = Duration::from_micros(500);
        let (mut sent, mut delivered) = (0u64, 0u64);
        // Bytes in flight with when they will be acknowledged; the bottleneck
        // serves one at a time at `rate`.
        let mut flight: VecDeque<(Duration, u64)> = VecDeque::new();
        let mut link_free = Duration::ZERO;
        let mut max_queue = 0usize;
        let mut now = Duration::ZERO;
        while now.as_secs_f64() < secs {
            while flight.front().is_some_and(|(t, _)| *t <= now) {
                let (_, n) = flight.pop_front().unwrap_or_default();
                delivered += n;
            }
            p.delivered(now, delivered, false);
            while (sent - delivered) as usize + frame <= p.window() && p.ready_at(now, frame) <= now
            {
                p.sent(now, frame);
                sent += frame as u64;
                // The frame crosses the bottleneck as packets of 1,200 bytes,
                // each acknowledged a round trip after it is through.
                for _ in 0..frame / 1200 {
                    let done = link_free.max(now) + Duration::from_secs_f64(1200.0 / rate);
                    link_free = done;
                    flight.push_back((done + rtt, 1200));
                }
                let rest = (frame % 1200) as u64;
                flight.push_back((link_free + rtt, rest));
                let queued = link_free.saturating_sub(now).as_secs_f64() * rate;
                if now > Duration::from_secs(1) {
                    max_queue = max_queue.max(queued as usize);
                }
            }
            now += step;
        }
        (p, delivered, max_queue)
    }

    #[test]
    fn on_a_clean_path_the_rate_and_window_settle_near_the_path_s() {
        let rate = 25e6; // 200 Mbit/s
        let rtt = Duration::from_millis(20);
        let (p, delivered, max_queue) = run_path(rate, rtt, 5.0);
        let got = delivered as f64 / 5.0;
        assert!(got > 0.8 * rate, "delivered {:.1} MB/s of 25", got / 1e6);
        let bw = p.bottleneck_rate() as f64;
        assert!(
            (0.9 * rate..1.3 * rate).contains(&bw),
            "bottleneck {:.1} MB/s",
            bw / 1e6
        );
        let bdp = rate * rtt.as_secs_f64();
        assert!(
            (p.window() as f64) < 2.5 * bdp,
            "window {} against a BDP of {bdp}",
            p.window()
        );
        assert!(!p.starting(), "out of startup after 5 s");
        let measured = p.rtt();
        assert!(
            measured >= rtt && measured < rtt + Duration::from_millis(5),
            "round trip measured {measured:?} on a path of {rtt:?}"
        );
        // Once started, the queue it builds at the bottleneck stays within
        // what a router of one BDP holds.
        assert!(
            (max_queue as f64) < bdp,
            "queue {max_queue} B of a BDP of {bdp}"
        );
    }

    /// A pacer that has measured `bytes` acknowledged 20 ms after they all
    /// left at time zero (a rate of bytes / 20 ms), with a round trip of 20 ms.
    fn measured(bytes: u64) -> Pacer {
        let mut p = Pacer::new(PaceConfig::default());
        let frame = bytes / 4;
        for _ in 0..4 {
            p.sent(Duration::ZERO, frame as usize);
        }
        p.delivered(Duration::from_millis(20), 4 * frame, false);
        p
    }

    #[test]
    fn startup_outlasts_a_beginning_with_little_to_send() {
        // First a trickle (the index of a small share, a few batches), with the
        // writer idle in between: rounds with nothing much to send.
        let mut p = Pacer::new(PaceConfig::default());
        let mut now = Duration::ZERO;
        let mut sent = 0u64;
        for _ in 0..10 {
            p.idle();
            p.sent(now, 2000);
            sent += 2000;
            now += Duration::from_millis(20);
            p.delivered(now, sent, false);
            now += Duration::from_millis(10);
        }
        assert!(p.starting(), "a trickle ended startup");
        // Then bulk: still starting after 6 round trips of it.
        let frame = 60 * 1024;
        for _ in 0..6 {
            let flight = p.window() / frame + 1;
            for _ in 0..flight {
                p.sent(now, frame);
                sent += frame as u64;
            }
            now += Duration::from_millis(20);
            p.delivered(now, sent, false);
        }
        assert!(p.starting(), "left startup at {} B/s", p.bottleneck_rate());
    }

    #[test]
    fn frames_leave_no_faster_than_the_pacing_rate() {
        let mut p = measured(200_000);
        assert_eq!(p.bottleneck_rate(), 10_000_000);
        let rate = p.pacing_rate().expect("a rate");
        let mut now = Duration::from_millis(20);
        let mut sent = 0usize;
        let until = now + Duration::from_secs(1);
        while now < until {
            if p.ready_at(now, 60 * 1024) <= now {
                p.sent(now, 60 * 1024);
                sent += 60 * 1024;
            }
            now += Duration::from_micros(100);
        }
        let burst = PaceConfig::default().burst as f64;
        assert!(
            (sent as f64) <= rate + burst + 60.0 * 1024.0,
            "{sent} bytes in 1 s at {rate:.0} B/s"
        );
        assert!(
            (sent as f64) >= 0.9 * rate,
            "{sent} bytes in 1 s at {rate:.0} B/s"
        );
    }

    #[test]
    fn the_window_stays_within_its_bounds() {
        let config = PaceConfig::default();
        let p = Pacer::new(config);
        assert_eq!(p.window(), config.min_window, "before any sample");
        // 5 GB/s measured over a round trip of 20 ms.
        let p = measured(100_000_000);
        assert_eq!(p.window(), config.max_window);
    }

    #[test]
    fn a_clump_of_late_acknowledgements_is_not_read_as_a_faster_path() {
        let mut p = Pacer::new(PaceConfig::default());
        // 1 MB sent evenly over 100 ms (10 MB/s), acknowledged all at once at 101 ms.
        for i in 0..100u64 {
            p.sent(Duration::from_millis(i), 10_000);
        }
        p.delivered(Duration::from_millis(101), 1_000_000, false);
        let rate = p.bottleneck_rate();
        assert!(rate <= 10_200_000, "{rate} B/s from data sent at 10 MB/s");
    }

    #[test]
    fn app_limited_samples_never_lower_the_rate() {
        let mut p = measured(1_000_000);
        let before = p.bottleneck_rate();
        assert_eq!(before, 50_000_000);
        // Then a little, slowly: a writer with little to send.
        for ms in (30..400).step_by(10) {
            p.sent(Duration::from_millis(ms), 1000);
            p.delivered(Duration::from_millis(ms + 9), p.sent_total, true);
        }
        assert_eq!(p.bottleneck_rate(), before);
    }
}
