//! Per-packet pacing of a connection's UDP datagrams, under webrtc-rs.
//!
//! The link's writer ([`super::link`]) hands frames to the data channel at its
//! [`Pacer`](super::pace::Pacer)'s rate, but a 60 KiB frame becomes about 50
//! SCTP packets that webrtc-rs's driver writes at once, as one UDP GSO batch of
//! up to 64 KB. A receiver whose socket is small (Chromium asks for 64 KiB; a
//! TURN server on a busy machine drains its socket late) loses the end of such
//! a burst, and every loss costs SCTP a cut of its window. So the sockets of a
//! connection that is paced send their datagrams no faster than
//! [`SOCKET_PACE_GAIN`] times the link's pacing rate, in runs of at most
//! [`PACED_GSO_SEGMENTS`] datagrams and bursts of at most [`SOCKET_BURST`]
//! bytes (tokio's timer ticks in milliseconds, so a burst is what about a
//! millisecond brings at these rates).
//!
//! ```text
//! link writer (busy, paced) --> SocketPace::set(rate)   one cell per connection
//! link writer (idle)        --> SocketPace::set(0)      unpaced: acknowledgements,
//!                                                       requests, handshakes
//! webrtc-rs driver --> PacedSocket::poll_send --> SendBudget::wait(now, rate, len)
//!                                                   None: send now, then charge
//!                                                   Some(d): Pending for d
//! ```
//!
//! While a datagram waits, webrtc-rs's driver waits with it (it awaits each
//! send): what it received meanwhile stays in the kernel's socket buffer for
//! at most a millisecond or two. The gain keeps this stage from setting the
//! average rate: the writer's pacer does that, this stage only spreads bursts.

use std::future::Future;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use webrtc::runtime::{AsyncUdpSocket, RecvMeta, Transmit};

/// Datagrams leave at most this many times the link's pacing rate.
pub const SOCKET_PACE_GAIN: f64 = 1.5;
/// The most bytes that leave at once.
pub const SOCKET_BURST: usize = 16 * 1024;
/// The most datagrams in one GSO send while paced (about 10 KB).
pub const PACED_GSO_SEGMENTS: usize = 8;

/// A connection's pacing rate for its sockets: bytes per second, 0 for none.
#[derive(Debug, Default)]
pub struct SocketPace {
    rate: AtomicU64,
}

impl SocketPace {
    /// Datagrams leave at most at `rate` bytes/s from now on (0: unpaced).
    pub fn set(&self, rate: u64) {
        self.rate.store(rate, Ordering::Relaxed);
    }

    pub fn rate(&self) -> u64 {
        self.rate.load(Ordering::Relaxed)
    }
}

/// A token bucket in bytes (sans-IO: time comes in).
#[derive(Debug, Clone)]
pub struct SendBudget {
    /// Bytes that may leave now; below zero after a send larger than what
    /// was there (a datagram or GSO run is never split).
    tokens: f64,
    at: Duration,
}

impl Default for SendBudget {
    fn default() -> Self {
        SendBudget {
            tokens: SOCKET_BURST as f64,
            at: Duration::ZERO,
        }
    }
}

impl SendBudget {
    fn refill(&mut self, now: Duration, rate: u64) {
        let elapsed = now.saturating_sub(self.at).as_secs_f64();
        self.at = now.max(self.at);
        self.tokens = (self.tokens + elapsed * rate as f64).min(SOCKET_BURST as f64);
    }

    /// How long to wait before the next send at `rate` bytes/s (`None`: it
    /// may go now).
    pub fn wait(&mut self, now: Duration, rate: u64) -> Option<Duration> {
        if rate == 0 {
            return None;
        }
        self.refill(now, rate);
        if self.tokens > 0.0 {
            return None;
        }
        Some(Duration::from_secs_f64(-self.tokens / rate as f64 + 1e-6))
    }

    /// `len` bytes left at `now`.
    pub fn charge(&mut self, now: Duration, rate: u64, len: usize) {
        if rate == 0 {
            // Unpaced: start the next paced stretch with a full bucket.
            self.tokens = SOCKET_BURST as f64;
            self.at = now;
            return;
        }
        self.refill(now, rate);
        self.tokens -= len as f64;
    }
}

struct Waiting {
    budget: SendBudget,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Every task that found the budget spent (webrtc-rs sends from its
    /// driver, but a socket must not strand a second sender): all are woken
    /// when the wait ends, whichever of them the timer wakes.
    wakers: Vec<Waker>,
}

/// A UDP socket whose sends follow its connection's [`SocketPace`].
pub(crate) struct PacedSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    pace: Arc<SocketPace>,
    start: tokio::time::Instant,
    waiting: Mutex<Waiting>,
}

impl std::fmt::Debug for PacedSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacedSocket")
            .field("inner", &self.inner)
            .field("rate", &self.pace.rate())
            .finish()
    }
}

impl PacedSocket {
    pub(crate) fn new(inner: Arc<dyn AsyncUdpSocket>, pace: Arc<SocketPace>) -> PacedSocket {
        PacedSocket {
            inner,
            pace,
            start: tokio::time::Instant::now(),
            waiting: Mutex::new(Waiting {
                budget: SendBudget::default(),
                sleep: None,
                wakers: Vec::new(),
            }),
        }
    }
}

impl AsyncUdpSocket for PacedSocket {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn poll_send(&self, cx: &mut Context<'_>, transmit: &Transmit<'_>) -> Poll<io::Result<usize>> {
        let rate = self.pace.rate();
        let Ok(mut w) = self.waiting.lock() else {
            return self.inner.poll_send(cx, transmit);
        };
        loop {
            if let Some(sleep) = w.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    if !w.wakers.iter().any(|k| k.will_wake(cx.waker())) {
                        w.wakers.push(cx.waker().clone());
                    }
                    return Poll::Pending;
                }
                w.sleep = None;
                for k in w.wakers.drain(..) {
                    k.wake();
                }
            }
            match w.budget.wait(self.start.elapsed(), rate) {
                None => break,
                Some(d) => {
                    w.sleep = Some(Box::pin(tokio::time::sleep(d)));
                }
            }
        }
        let sent = self.inner.poll_send(cx, transmit);
        if let Poll::Ready(Ok(_)) = &sent {
            w.budget
                .charge(self.start.elapsed(), rate, transmit.contents.len());
        }
        sent
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        self.inner.poll_recv(cx, bufs, meta)
    }

    fn max_gso_segments(&self) -> usize {
        let inner = self.inner.max_gso_segments();
        if self.pace.rate() == 0 {
            inner
        } else {
            inner.min(PACED_GSO_SEGMENTS)
        }
    }

    fn max_gro_segments(&self) -> usize {
        self.inner.max_gro_segments()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `n` datagrams of `len` bytes at `rate` through a budget in
    /// virtual time, the sender always ready: the instants each one left.
    fn leave_times(rate: u64, n: usize, len: usize) -> Vec<Duration> {
        let mut b = SendBudget::default();
        let mut now = Duration::ZERO;
        let mut out = Vec::new();
        for _ in 0..n {
            while let Some(d) = b.wait(now, rate) {
                // tokio's timer: a millisecond at least.
                now += d.max(Duration::from_millis(1));
            }
            b.charge(now, rate, len);
            out.push(now);
        }
        out
    }

    #[test]
    fn datagrams_leave_no_faster_than_the_rate_after_the_first_burst() {
        let rate = 10_000_000; // 10 MB/s
        let times = leave_times(rate, 2_000, 1_200);
        let total = 2_000.0 * 1_200.0;
        let took = times.last().unwrap().as_secs_f64();
        let least = (total - SOCKET_BURST as f64 - 1_200.0) / rate as f64;
        assert!(
            took >= least,
            "2.4 MB at 10 MB/s left in {took} s, under {least}"
        );
        assert!(
            took <= least * 1.15 + 0.002,
            "and not much slower: {took} s"
        );
    }

    #[test]
    fn no_millisecond_carries_more_than_a_burst_and_a_datagram() {
        // Whatever the rate, and however late the timer wakes the sender.
        for rate in [1_000_000u64, 12_000_000, 100_000_000] {
            let times = leave_times(rate, 5_000, 1_200);
            let mut i = 0;
            for (j, t) in times.iter().enumerate() {
                while times[i] + Duration::from_millis(1) <= *t {
                    i += 1;
                }
                let bytes = (j - i + 1) * 1_200;
                let most = SOCKET_BURST + 1_200 + (rate / 1_000) as usize;
                assert!(
                    bytes <= most,
                    "{bytes} bytes within 1 ms at {rate} B/s (most {most})"
                );
            }
        }
    }

    #[test]
    fn unpaced_never_waits_and_refills_for_the_next_paced_stretch() {
        let mut b = SendBudget::default();
        for i in 0..1_000 {
            assert_eq!(b.wait(Duration::from_micros(i), 0), None);
            b.charge(Duration::from_micros(i), 0, 64 * 1024);
        }
        // Paced again: a whole burst may go at once, then it waits.
        let now = Duration::from_millis(2);
        assert_eq!(b.wait(now, 1_000_000), None);
        b.charge(now, 1_000_000, SOCKET_BURST + 100);
        let wait = b.wait(now, 1_000_000).expect("spent");
        assert!(wait >= Duration::from_micros(100), "{wait:?}");
    }

    /// Real sockets: 400 KB through a socket paced at 4 MB/s take at least
    /// 96 ms, and arrive whole and in order.
    #[tokio::test(flavor = "current_thread")]
    async fn a_paced_socket_spreads_its_datagrams_and_loses_none() {
        use webrtc::runtime::{Runtime, TokioRuntime};
        let to = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        to.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let from = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        from.set_nonblocking(true).unwrap();
        let pace = Arc::new(SocketPace::default());
        pace.set(4_000_000);
        let socket = PacedSocket::new(TokioRuntime.wrap_udp_socket(from).unwrap(), pace.clone());
        let target = to.local_addr().unwrap();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            let mut got = Vec::new();
            while got.len() < 400 {
                let n = to.recv(&mut buf).expect("every datagram within 5 s");
                got.push(buf[..n].to_vec());
            }
            got
        });
        let t0 = std::time::Instant::now();
        for i in 0..400u32 {
            let mut d = vec![(i % 251) as u8; 1_000];
            d[..4].copy_from_slice(&i.to_be_bytes());
            socket.send_to(&d, target).await.unwrap();
        }
        let took = t0.elapsed();
        let least = Duration::from_secs_f64((400_000.0 - SOCKET_BURST as f64 - 1_000.0) / 4e6);
        assert!(
            took >= least,
            "400 KB at 4 MB/s took {took:?}, under {least:?}"
        );
        let got = reader.join().unwrap();
        for (i, d) in got.iter().enumerate() {
            assert_eq!(d.len(), 1_000);
            assert_eq!(
                u32::from_be_bytes(d[..4].try_into().unwrap()),
                i as u32,
                "in order"
            );
        }
        // While paced a GSO run is at most PACED_GSO_SEGMENTS datagrams.
        assert!(socket.max_gso_segments() <= PACED_GSO_SEGMENTS);
    }
}
