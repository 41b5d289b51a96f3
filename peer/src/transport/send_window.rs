//! How many bytes one link may have unacknowledged: a window that grows with the
//! path's round trip.
//!
//! A fixed send-buffer limit caps a link at `limit / round trip`: 64 KiB over a
//! 20 ms path is 3.2 MB/s however fast the path is. The limit is small on
//! purpose: on a host or a LAN a large one sends bursts that overflow the
//! receiving socket (a desktop's 208 KiB; Chromium's 128 KiB), and SCTP
//! recovers from those losses slowly. Over a long path the bursts arrive spread
//! out by the path itself, so the window can safely grow there, and must, to
//! fill the path.
//!
//! So the window is the configured limit ([`TransportConfig::send_buffer_limit`]
//! or the tuning's) on paths shorter than [`LONG_PATH`], and on longer ones that
//! plus [`WINDOW_RATE`] × the round trip, at most [`WINDOW_MAX`] (what SCTP's
//! 1 MiB receive window lets be in flight anyway). The round trip is the
//! smallest of the last [`RTT_SAMPLES`] ICE measurements of the chosen
//! candidate pair (one a second): a busy host's slow answer does not count as
//! distance. Until the first one comes, the window is the configured limit.
//!
//! webrtc-rs's own limit is set to the largest window the link may reach; the
//! link's writer waits below the current one here, woken when the channel's
//! buffered amount drops under a low-water mark (a data-channel event, which
//! arrives with the messages, so the link's receiving half passes it on while
//! it is polled, as linkfs's drive loop always does) or, as a backstop, after
//! [`RECHECK`].
//!
//! [`TransportConfig::send_buffer_limit`]: super::TransportConfig::send_buffer_limit

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use webrtc::data_channel::DataChannel;

/// Round trips from this up count as a long path: 4 ms (a LAN's is well under
/// 1 ms; a loaded host's loopback can reach a few).
pub const LONG_PATH: Duration = Duration::from_millis(4);
/// The rate a long path's window is sized for: 100 MB/s.
pub const WINDOW_RATE: u64 = 100_000_000;
/// The largest window: 1 MiB.
pub const WINDOW_MAX: usize = 1 << 20;
/// Round-trip samples the estimate is the smallest of.
pub const RTT_SAMPLES: usize = 5;
/// How often the round trip is sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// How long a waiting writer waits for the low-water event before it looks again:
/// 1 ms (the event comes through the link's receiving half; a program that
/// never polls it still gets a window that reopens within this).
const RECHECK: Duration = Duration::from_millis(1);

/// The window for a path with this round trip, from the configured limit `base`.
pub fn window_for(base: usize, rtt: Option<Duration>) -> usize {
    match rtt {
        Some(rtt) if rtt >= LONG_PATH => {
            let extra = (WINDOW_RATE as u128 * rtt.as_micros() / 1_000_000) as usize;
            base.saturating_add(extra).min(WINDOW_MAX.max(base))
        }
        _ => base,
    }
}

/// One connection's window: its base, the round trips seen, and the wake-up of
/// a writer waiting for room.
#[derive(Debug)]
pub(crate) struct SendWindow {
    base: usize,
    /// Latest round trips, microseconds (0: none yet).
    samples: Mutex<[u32; RTT_SAMPLES]>,
    next_sample: AtomicU32,
    /// The low-water mark the channel should have (the relay pump re-applies it).
    low_water: AtomicU32,
    room: Notify,
}

impl SendWindow {
    pub(crate) fn new(base: usize) -> Self {
        Self {
            base,
            samples: Mutex::new([0; RTT_SAMPLES]),
            next_sample: AtomicU32::new(0),
            low_water: AtomicU32::new(0),
            room: Notify::new(),
        }
    }

    /// The most a window of this base can grow to: webrtc-rs's hard limit.
    pub(crate) fn ceiling(base: usize) -> usize {
        WINDOW_MAX.max(base)
    }

    /// The path's round trip as estimated now.
    pub(crate) fn rtt(&self) -> Option<Duration> {
        let samples = self.samples.lock().ok()?;
        samples
            .iter()
            .filter(|&&us| us > 0)
            .min()
            .map(|&us| Duration::from_micros(u64::from(us)))
    }

    /// The window now.
    pub(crate) fn bytes(&self) -> usize {
        window_for(self.base, self.rtt())
    }

    /// Records a round-trip measurement.
    pub(crate) fn sample(&self, rtt: Duration) {
        let us = u32::try_from(rtt.as_micros()).unwrap_or(u32::MAX).max(1);
        let i = self.next_sample.fetch_add(1, Ordering::Relaxed) as usize % RTT_SAMPLES;
        if let Ok(mut samples) = self.samples.lock() {
            samples[i] = us;
        }
    }

    /// The low-water mark to keep on the channel.
    pub(crate) fn low_water(&self) -> u32 {
        self.low_water.load(Ordering::Relaxed)
    }

    /// The channel's buffered amount dropped under the low-water mark.
    pub(crate) fn drained(&self) {
        self.room.notify_one();
    }

    /// Waits until `channel` has fewer bytes unacknowledged than the window.
    pub(crate) async fn wait_for_room(
        &self,
        channel: &dyn DataChannel,
    ) -> Result<(), webrtc::error::Error> {
        loop {
            let window = self.bytes();
            if channel.outstanding_bytes().await? < window {
                return Ok(());
            }
            // Wake when a quarter of the window has drained.
            let mark = u32::try_from(window - window / 4).unwrap_or(u32::MAX);
            if self.low_water.swap(mark, Ordering::Relaxed) != mark {
                channel.set_buffered_amount_low_threshold(mark).await?;
            }
            // Acknowledgements that came meanwhile fired no event for this mark.
            if channel.outstanding_bytes().await? < window {
                return Ok(());
            }
            let _ = tokio::time::timeout(RECHECK, self.room.notified()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_path_keeps_the_configured_limit() {
        assert_eq!(window_for(65_536, None), 65_536);
        assert_eq!(window_for(65_536, Some(Duration::from_micros(200))), 65_536);
        assert_eq!(window_for(32_768, Some(Duration::from_millis(3))), 32_768);
    }

    #[test]
    fn a_long_path_grows_the_window_with_its_round_trip_up_to_the_ceiling() {
        // 5 ms at 100 MB/s: 500,000 bytes more.
        assert_eq!(window_for(65_536, Some(Duration::from_millis(5))), 565_536);
        assert_eq!(
            window_for(65_536, Some(Duration::from_millis(20))),
            WINDOW_MAX
        );
        assert_eq!(
            window_for(65_536, Some(Duration::from_secs(3600))),
            WINDOW_MAX
        );
        // A base above the ceiling is never cut.
        assert_eq!(
            window_for(2 << 20, Some(Duration::from_millis(20))),
            2 << 20
        );
    }

    #[test]
    fn the_estimate_is_the_smallest_recent_round_trip() {
        let w = SendWindow::new(65_536);
        assert_eq!(w.rtt(), None);
        assert_eq!(w.bytes(), 65_536);
        w.sample(Duration::from_millis(30));
        w.sample(Duration::from_millis(20));
        w.sample(Duration::from_millis(45));
        assert_eq!(w.rtt(), Some(Duration::from_millis(20)));
        // One busy moment on a host (a slow answer) does not make a path long;
        // a path that really became short shows within RTT_SAMPLES samples.
        for _ in 0..RTT_SAMPLES {
            w.sample(Duration::from_micros(300));
        }
        assert_eq!(w.rtt(), Some(Duration::from_micros(300)));
        assert_eq!(w.bytes(), 65_536);
    }
}
