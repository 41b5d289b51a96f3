//! When a receiver opens lanes (more peer connections for one session's read
//! chunks, [`linkfs_proto::lane`]): the rule, once, for the native receiver
//! and the browser page alike. Sans-IO: the shell shows it every frame of the
//! session's own link with the time, and opens what it says when it says so.
//!
//! ```text
//! session link frame --> LaneGate::on_session_frame(now, frame)
//!                          Skip          a lane offer: kept, not for the session
//!                          Pass          give the frame to the session
//!                          Open(offer)   give it, and open lanes now if the
//!                                        path's round trip is >= LANE_MIN_RTT
//! ```
//!
//! The rule: after [`LANE_AFTER_BYTES`] of chunks on the session's link (a
//! bulk read, not a listing or a few small files), watch the next
//! [`LANE_SAMPLE_BYTES`] or [`LANE_SAMPLE_TIME`], whichever comes first; if
//! the link moved them at under [`LANE_BELOW_RATE`], open lanes, up to what
//! the sharer offered and the shell wants. Decided once per link.
//!
//! Why these numbers (measured on `linkfs-wan`, docs/webrtc-notes.md): one
//! association that fills the path is faster alone (at 20 ms and 5 ms without
//! loss, eight connections overflowed the bottleneck's queue and moved 13.4 and
//! 42 MB/s where one moved 21 and 62). One that losses hold back moves far
//! less (2.2 MB/s at 20 ms and 0.1 % random loss; toward Chromium, whose UDP
//! socket overflows when its network thread is busy, 5.5 MB/s at 20 ms with no
//! loss on the line), and there lanes multiply it.

use std::time::Duration;

use linkfs_proto::{FRAME_READ_CHUNK, LaneOffer};

use crate::Millis;

/// Most lanes a sharer takes for one session (so at most this many + 1
/// connections per visitor): at 0.1 % loss one association moves about a
/// tenth of what TCP does (measured: 2.2 MB/s of 23.7 at 20 ms), and N of
/// them about N times that (6 moved 11.7 MB/s).
pub const MAX_LANES: u8 = 7;
/// Lanes open only where the link's round trip is at least this (on one host
/// or a LAN one association fills the path).
pub const LANE_MIN_RTT: Duration = Duration::from_millis(4);
/// ...and only once this many chunk bytes came on the session's link,
pub const LANE_AFTER_BYTES: u64 = 2 << 20;
/// ...and only if the session's link then moves less than this (bytes/s),
/// measured over the next [`LANE_SAMPLE_BYTES`] or [`LANE_SAMPLE_TIME`].
pub const LANE_BELOW_RATE: f64 = 12e6;
pub const LANE_SAMPLE_BYTES: u64 = 6 << 20;
pub const LANE_SAMPLE_TIME: Duration = Duration::from_millis(1500);
/// How long a receiver waits, after a lane ended, for the session link to say
/// why (a goodbye) before it counts the whole link as lost.
pub const LANE_END_GRACE: Duration = Duration::from_millis(500);

/// Enough of a frame's first bytes for [`LaneGate::on_frame_head`] (a lane
/// offer is 18 bytes).
pub const FRAME_HEAD_BYTES: usize = 32;

/// What to do with one frame of the session's link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateSays {
    /// A lane offer (or a malformed one): not for the session.
    Skip,
    /// For the session.
    Pass,
    /// For the session; and open this many lanes joining `offer` now, if the
    /// path's round trip is at least [`LANE_MIN_RTT`].
    Open { offer: LaneOffer, count: u8 },
}

/// The lane rule for one session link (module docs).
#[derive(Debug, Clone)]
pub struct LaneGate {
    /// Most lanes the shell opens (0: never).
    wanted: u8,
    offer: Option<LaneOffer>,
    chunk_bytes: u64,
    /// When the chunk bytes passed [`LANE_AFTER_BYTES`], and how many there were.
    sample_from: Option<(Millis, u64)>,
    decided: bool,
}

impl LaneGate {
    /// A gate for a new link that opens at most `wanted` lanes.
    pub fn new(wanted: u8) -> Self {
        LaneGate {
            wanted,
            offer: None,
            chunk_bytes: 0,
            sample_from: None,
            decided: false,
        }
    }

    /// The sharer's offer, once one came.
    pub fn offer(&self) -> Option<LaneOffer> {
        self.offer
    }

    /// One frame that came on the session's own link at `now`.
    pub fn on_session_frame(&mut self, now: Millis, frame: &[u8]) -> GateSays {
        self.on_frame_head(now, frame, frame.len())
    }

    /// The same from the first bytes of a frame of `len` bytes (at least
    /// [`FRAME_HEAD_BYTES`] of them, or all): a shell whose frames live
    /// outside its memory (the page's) copies only those.
    pub fn on_frame_head(&mut self, now: Millis, head: &[u8], len: usize) -> GateSays {
        match head.first() {
            Some(&linkfs_proto::FRAME_LANE_OFFER) => {
                // A malformed offer (or one longer than its head): no lanes,
                // nothing else changes.
                if head.len() == len
                    && let Ok(Some(offer)) = LaneOffer::decode(head)
                {
                    self.offer = Some(offer);
                }
                GateSays::Skip
            }
            Some(&FRAME_READ_CHUNK) => {
                self.chunk_bytes += len as u64;
                self.decide(now)
            }
            _ => GateSays::Pass,
        }
    }

    fn decide(&mut self, now: Millis) -> GateSays {
        if self.decided || self.chunk_bytes < LANE_AFTER_BYTES {
            return GateSays::Pass;
        }
        let Some(offer) = self.offer else {
            return GateSays::Pass;
        };
        let (since, from) = *self.sample_from.get_or_insert((now, self.chunk_bytes));
        let bytes = self.chunk_bytes - from;
        let elapsed = Duration::from_millis(now.0.saturating_sub(since.0));
        if bytes < LANE_SAMPLE_BYTES && elapsed < LANE_SAMPLE_TIME {
            return GateSays::Pass;
        }
        self.decided = true;
        let rate = bytes as f64 / elapsed.as_secs_f64().max(0.001);
        let count = offer.lanes.min(self.wanted).min(MAX_LANES);
        if rate >= LANE_BELOW_RATE || count == 0 {
            return GateSays::Pass;
        }
        GateSays::Open { offer, count }
    }
}

/// Whether a frame that came on a lane is one a lane may carry (a read
/// chunk); anything else on a lane is dropped.
pub fn lane_may_carry(frame: &[u8]) -> bool {
    frame.first() == Some(&FRAME_READ_CHUNK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkfs_proto::LaneToken;

    const OFFER: LaneOffer = LaneOffer {
        token: LaneToken([7; 16]),
        lanes: 7,
    };

    fn chunk(len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[0] = FRAME_READ_CHUNK;
        f
    }

    /// Feeds 60 KiB chunks at `rate` bytes/s from t=0 until the gate says
    /// something other than Pass, or `limit` bytes went by.
    fn feed(gate: &mut LaneGate, rate: f64, limit: u64) -> Option<GateSays> {
        let frame = chunk(60 * 1024);
        let mut sent = 0u64;
        while sent < limit {
            sent += frame.len() as u64;
            let now = Millis((sent as f64 / rate * 1000.0) as u64);
            match gate.on_session_frame(now, &frame) {
                GateSays::Pass => {}
                other => return Some(other),
            }
        }
        None
    }

    #[test]
    fn a_slow_bulk_read_opens_what_was_offered_and_wanted() {
        let mut gate = LaneGate::new(3);
        assert_eq!(
            gate.on_session_frame(Millis(0), &OFFER.encode()),
            GateSays::Skip
        );
        let says = feed(&mut gate, 5e6, 64 << 20);
        assert_eq!(
            says,
            Some(GateSays::Open {
                offer: OFFER,
                count: 3
            })
        );
        // Decided once: more slow chunks open nothing more.
        assert_eq!(feed(&mut gate, 5e6, 64 << 20), None);
    }

    #[test]
    fn a_link_that_fills_the_path_opens_none() {
        let mut gate = LaneGate::new(7);
        gate.on_session_frame(Millis(0), &OFFER.encode());
        assert_eq!(feed(&mut gate, 30e6, 256 << 20), None);
    }

    #[test]
    fn no_offer_no_lanes() {
        let mut gate = LaneGate::new(7);
        assert_eq!(feed(&mut gate, 1e6, 64 << 20), None);
    }

    #[test]
    fn a_few_small_reads_decide_nothing() {
        let mut gate = LaneGate::new(7);
        gate.on_session_frame(Millis(0), &OFFER.encode());
        assert_eq!(feed(&mut gate, 1e6, LANE_AFTER_BYTES - 64 * 1024), None);
    }

    #[test]
    fn a_malformed_offer_is_skipped_and_opens_nothing() {
        let mut gate = LaneGate::new(7);
        assert_eq!(
            gate.on_session_frame(Millis(0), &[linkfs_proto::FRAME_LANE_OFFER, 1]),
            GateSays::Skip
        );
        assert_eq!(gate.offer(), None);
        assert_eq!(feed(&mut gate, 1e6, 64 << 20), None);
    }

    #[test]
    fn a_shell_that_wants_no_lanes_opens_none() {
        let mut gate = LaneGate::new(0);
        gate.on_session_frame(Millis(0), &OFFER.encode());
        assert_eq!(feed(&mut gate, 1e6, 64 << 20), None);
    }

    #[test]
    fn a_head_counts_the_whole_chunk_and_reads_a_whole_offer() {
        let mut by_head = LaneGate::new(7);
        let offer = OFFER.encode();
        assert_eq!(
            by_head.on_frame_head(Millis(0), &offer, offer.len()),
            GateSays::Skip
        );
        assert_eq!(by_head.offer(), Some(OFFER));
        // An offer cut short by its head is not read.
        let mut cut = LaneGate::new(7);
        cut.on_frame_head(
            Millis(0),
            &offer[..FRAME_HEAD_BYTES.min(offer.len())],
            offer.len() + 1,
        );
        assert_eq!(cut.offer(), None);
        // 60 KiB chunks seen by their heads only, at 5 MB/s: lanes open.
        let frame = chunk(60 * 1024);
        let mut sent = 0u64;
        let says = loop {
            sent += frame.len() as u64;
            let now = Millis(sent / 5_000);
            match by_head.on_frame_head(now, &frame[..FRAME_HEAD_BYTES], frame.len()) {
                GateSays::Pass => assert!(sent < 64 << 20, "no decision after 64 MiB"),
                other => break other,
            }
        };
        assert_eq!(
            says,
            GateSays::Open {
                offer: OFFER,
                count: 7
            }
        );
    }

    #[test]
    fn only_chunks_may_travel_on_a_lane() {
        assert!(lane_may_carry(&chunk(10)));
        assert!(!lane_may_carry(&OFFER.encode()));
        assert!(!lane_may_carry(&[]));
    }
}
