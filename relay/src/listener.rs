//! A TCP listener that stops accepting at a connection cap, and drops sockets that
//! stay silent.
//!
//! `axum::serve` accepts without limit and sets no read timeouts. This listener takes
//! a permit from a semaphore before each `accept`, and the permit lives as long as
//! the socket (through the WebSocket upgrade, since the upgraded stream is this same
//! socket). At the cap, new connections wait in the kernel's accept backlog instead
//! of costing the relay memory.
//!
//! Each socket also fails its reads once nothing has arrived for `silence`
//! (`Limits::silence_timeout`, 90 s by default). That ends idle HTTP keep-alive
//! connections, half-sent requests (slowloris) and dead peers; a WebSocket answers
//! the relay's pings well within it, and one that does not meets its session's own
//! idle timeout (60 s) first, with an `idle-timeout` message.
//!
//! # Unfinished connections
//!
//! A connection whose first request head has not arrived (up to its blank line)
//! is *unfinished*: it costs a descriptor and has shown nothing. A slow flood
//! opens thousands of them and sends half a head each; on a desktop's open-file
//! limit (1,024) that used to leave `accept` failing with "Too many open files"
//! while every other client waited. So [`Unfinished`] tracks them, oldest first:
//!
//! - at most `max_unfinished_per_address` per client address (16): a new one
//!   from an address at its cap drops that address's oldest (a flood from one
//!   address churns its own connections, and a real client there still gets in);
//!   trusted proxies are exempt;
//! - at most a quarter of the open-file limit from everyone together (at least
//!   64), so reads of shared files and WebRTC sockets in the same process keep
//!   their descriptors: beyond it, the oldest of all is dropped;
//! - when `accept` fails for want of descriptors, the oldest few are dropped
//!   and accepting resumes within milliseconds instead of a second.
//!
//! Dropping one wakes its reader, which fails; the HTTP server then closes it.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures_util::task::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// The accept backlog asked of the kernel (Linux caps it at
/// `net.core.somaxconn`, 4,096 by default since 5.4).
///
/// Tokio's `TcpListener::bind` asks for 1,024. While the relay admits and drops a
/// flood's connections, the flood's reconnects wait in this queue; once it is
/// full the kernel drops new SYNs, and a real visitor's connect then waits for
/// TCP's first SYN retransmission, a whole second. A queue longer than a flood
/// that keeps about a thousand sockets going keeps every visitor's SYN.
pub const LISTEN_BACKLOG: u32 = 4096;

/// A listening socket on `addr` with [`LISTEN_BACKLOG`] (address reuse on, as
/// tokio's own `bind` sets it).
pub async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// How the listener bounds its sockets (from `Limits`).
#[derive(Debug, Clone)]
pub(crate) struct ListenerLimits {
    /// Open sockets at most.
    pub cap: usize,
    /// A socket with no input for this long is dropped.
    pub silence: Duration,
    /// A socket whose first request head is not complete this long after it was
    /// accepted is dropped.
    pub header: Duration,
    /// Unfinished sockets per client address (see the module docs).
    pub unfinished_per_address: usize,
    /// Unfinished sockets from everyone together.
    pub unfinished_total: usize,
    /// Addresses exempt from the per-address cap (trusted proxies).
    pub exempt: Vec<crate::IpNetwork>,
}

/// A listener admitting at most `cap` open sockets.
#[derive(Debug)]
pub(crate) struct CappedListener {
    inner: TcpListener,
    slots: Arc<Semaphore>,
    limits: ListenerLimits,
    unfinished: Arc<Unfinished>,
    metrics: crate::RelayState,
    /// When "out of descriptors" was last logged (at most once a minute).
    last_warned: Option<Instant>,
}

impl CappedListener {
    pub fn new(inner: TcpListener, limits: ListenerLimits, state: crate::RelayState) -> Self {
        CappedListener {
            inner,
            slots: Arc::new(Semaphore::new(limits.cap)),
            unfinished: Arc::new(Unfinished::default()),
            limits,
            metrics: state,
            last_warned: None,
        }
    }

    /// The oldest unfinished sockets dropped when descriptors ran out.
    const SHED_WHEN_OUT: usize = 16;

    fn out_of_descriptors(&mut self, err: &io::Error) -> Duration {
        let shed = self.unfinished.shed_oldest(Self::SHED_WHEN_OUT);
        for _ in 0..shed {
            self.metrics
                .metrics()
                .rejected(crate::Rejection::OutOfDescriptors);
        }
        let now = Instant::now();
        if self
            .last_warned
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(60))
        {
            self.last_warned = Some(now);
            tracing::warn!(%err, shed, "out of file descriptors: dropping the oldest connections that have not sent a request yet");
        }
        // Dropped sockets close once their tasks run: a moment, not a second.
        if shed > 0 {
            Duration::from_millis(5)
        } else {
            Duration::from_millis(100)
        }
    }
}

/// Why an unfinished socket was dropped.
fn shed_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "dropped before its request head arrived: too many such connections",
    )
}

/// One unfinished socket, as the registry and the socket both see it.
#[derive(Debug)]
struct UnfinishedMark {
    addr: IpAddr,
    dropped: AtomicBool,
    waker: AtomicWaker,
}

#[derive(Debug, Default)]
struct UnfinishedSet {
    next: u64,
    /// By arrival (oldest first).
    by_age: BTreeMap<u64, Arc<UnfinishedMark>>,
    /// Per address: its sockets' keys, oldest first.
    by_addr: HashMap<IpAddr, std::collections::VecDeque<u64>>,
}

/// The unfinished sockets (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Unfinished {
    set: Mutex<UnfinishedSet>,
}

impl Unfinished {
    fn lock(&self) -> std::sync::MutexGuard<'_, UnfinishedSet> {
        // Nothing panics while holding it; a poisoned set is still consistent.
        self.set.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a new socket from `addr`; first drops the oldest one of that
    /// address if it holds `per_address` already (`None`: no cap), and the
    /// oldest of all if there are `total`. Returns its key and mark, and how
    /// many were dropped for the address and for the total.
    fn admit(
        &self,
        addr: IpAddr,
        per_address: Option<usize>,
        total: usize,
    ) -> (u64, Arc<UnfinishedMark>, usize, usize) {
        let mut set = self.lock();
        let mut for_addr = 0;
        if let Some(cap) = per_address {
            while set.by_addr.get(&addr).is_some_and(|q| q.len() >= cap) {
                let Some(key) = set.by_addr.get_mut(&addr).and_then(|q| q.pop_front()) else {
                    break;
                };
                if let Some(m) = set.by_age.remove(&key) {
                    m.drop_now();
                    for_addr += 1;
                }
            }
        }
        let mut for_total = 0;
        while set.by_age.len() >= total.max(1) {
            if Self::shed_one(&mut set).is_none() {
                break;
            }
            for_total += 1;
        }
        let key = set.next;
        set.next += 1;
        let mark = Arc::new(UnfinishedMark {
            addr,
            dropped: AtomicBool::new(false),
            waker: AtomicWaker::new(),
        });
        set.by_age.insert(key, mark.clone());
        set.by_addr.entry(addr).or_default().push_back(key);
        (key, mark, for_addr, for_total)
    }

    /// Drops the oldest socket of all; returns its key.
    fn shed_one(set: &mut UnfinishedSet) -> Option<u64> {
        let (key, mark) = set.by_age.pop_first()?;
        mark.drop_now();
        Self::unlink(set, key, mark.addr);
        Some(key)
    }

    fn unlink(set: &mut UnfinishedSet, key: u64, addr: IpAddr) {
        if let Some(q) = set.by_addr.get_mut(&addr) {
            q.retain(|k| *k != key);
            if q.is_empty() {
                set.by_addr.remove(&addr);
            }
        }
    }

    /// Drops up to `n` of the oldest sockets; returns how many.
    fn shed_oldest(&self, n: usize) -> usize {
        let mut set = self.lock();
        (0..n)
            .take_while(|_| Self::shed_one(&mut set).is_some())
            .count()
    }

    /// The socket `key` finished its head or closed.
    fn finished(&self, key: u64, addr: IpAddr) {
        let mut set = self.lock();
        if set.by_age.remove(&key).is_some() {
            Self::unlink(&mut set, key, addr);
        }
    }

    /// Unfinished sockets now (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().by_age.len()
    }
}

impl UnfinishedMark {
    fn drop_now(&self) {
        self.dropped.store(true, Ordering::Release);
        self.waker.wake();
    }
}

/// A socket's place among the unfinished; leaving it (head done, or the socket
/// closed) takes it out.
#[derive(Debug)]
struct UnfinishedTicket {
    key: u64,
    mark: Arc<UnfinishedMark>,
    set: Arc<Unfinished>,
}

impl Drop for UnfinishedTicket {
    fn drop(&mut self) {
        self.set.finished(self.key, self.mark.addr);
    }
}

/// An accepted socket holding one of the listener's slots.
#[derive(Debug)]
pub(crate) struct CappedStream {
    stream: TcpStream,
    _slot: OwnedSemaphorePermit,
    silence: Duration,
    last_input: Instant,
    /// Fires at or after `last_input + silence`; re-armed lazily, so a read costs
    /// one clock read and no timer update.
    deadline: Pin<Box<Sleep>>,
    /// Until the first request head is complete: when it must be, and the last
    /// bytes seen (to find the blank line across reads).
    head: Option<(Instant, u32)>,
    /// Until the first request head is complete: its place among the unfinished.
    unfinished: Option<UnfinishedTicket>,
}

impl axum::serve::Listener for CappedListener {
    type Io = CappedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (CappedStream, SocketAddr) {
        let slot = match self.slots.clone().acquire_owned().await {
            Ok(slot) => slot,
            // The semaphore is never closed, so this cannot happen; if it did,
            // accepting nothing is the safe reading of "no slots".
            Err(_closed) => std::future::pending().await,
        };
        loop {
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    // Signaling is small messages where latency matters.
                    let _ = stream.set_nodelay(true);
                    let now = Instant::now();
                    let ip = canonical(addr.ip());
                    let per_address = (!self.limits.exempt.iter().any(|n| n.contains(ip)))
                        .then_some(self.limits.unfinished_per_address);
                    let (key, mark, for_addr, for_total) =
                        self.unfinished
                            .admit(ip, per_address, self.limits.unfinished_total);
                    let metrics = self.metrics.metrics();
                    for _ in 0..for_addr {
                        metrics.rejected(crate::Rejection::UnfinishedFromOneAddress);
                    }
                    for _ in 0..for_total {
                        metrics.rejected(crate::Rejection::OutOfDescriptors);
                    }
                    let header = self.limits.header;
                    let stream = CappedStream {
                        stream,
                        _slot: slot,
                        silence: self.limits.silence,
                        last_input: now,
                        deadline: Box::pin(tokio::time::sleep_until(
                            now + self.limits.silence.min(header),
                        )),
                        head: Some((now + header, 0)),
                        unfinished: Some(UnfinishedTicket {
                            key,
                            mark,
                            set: self.unfinished.clone(),
                        }),
                    };
                    return (stream, addr);
                }
                // The peer gave up before we accepted: try the next one.
                Err(err) if is_connection_error(&err) => {}
                // Out of file descriptors: drop the oldest unfinished sockets.
                Err(err) if is_out_of_descriptors(&err) => {
                    let wait = self.out_of_descriptors(&err);
                    tokio::time::sleep(wait).await;
                }
                // Anything else: wait a moment and go on.
                Err(err) => {
                    tracing::error!(%err, "accept failed; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

fn head_too_slow() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the request head did not arrive in time",
    )
}

/// EMFILE (this process) or ENFILE (the whole system).
fn is_out_of_descriptors(err: &io::Error) -> bool {
    const EMFILE: i32 = 24;
    const ENFILE: i32 = 23;
    matches!(err.raw_os_error(), Some(EMFILE | ENFILE))
}

/// An IPv4 client on an IPv6 socket counts as its IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn is_connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

impl AsyncRead for CappedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(t) = &self.unfinished {
            t.mark.waker.register(cx.waker());
            if t.mark.dropped.load(Ordering::Acquire) {
                return Poll::Ready(Err(shed_error()));
            }
        }
        let before = buf.filled().len();
        if let Poll::Ready(read) = Pin::new(&mut self.stream).poll_read(cx, buf) {
            let now = Instant::now();
            self.last_input = now;
            if let Some((due, mut tail)) = self.head {
                if now > due {
                    return Poll::Ready(Err(head_too_slow()));
                }
                for b in &buf.filled()[before..] {
                    tail = (tail << 8) | u32::from(*b);
                    if tail == u32::from_be_bytes(*b"\r\n\r\n") {
                        self.head = None;
                        self.unfinished = None;
                        break;
                    }
                }
                if let Some(head) = self.head.as_mut() {
                    head.1 = tail;
                }
            }
            return Poll::Ready(read);
        }
        loop {
            ready!(self.deadline.as_mut().poll(cx));
            let now = Instant::now();
            if let Some((due, _)) = self.head
                && due <= now
            {
                return Poll::Ready(Err(head_too_slow()));
            }
            let due = self.last_input + self.silence;
            if due <= now {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("nothing received for {:?}", self.silence),
                )));
            }
            let next = match self.head {
                Some((head_due, _)) => due.min(head_due),
                None => due,
            };
            self.deadline.as_mut().reset(next);
        }
    }
}

impl AsyncWrite for CappedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The address a connection came from, for per-address limits (see `http`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PeerAddr(pub SocketAddr);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, CappedListener>>
    for PeerAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, CappedListener>) -> Self {
        PeerAddr(*stream.remote_addr())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn a_visitor_connects_at_once_while_1100_connections_wait_to_be_accepted() {
        // A flood's reconnects queue while the relay admits and drops; with
        // tokio's backlog of 1,024 the kernel dropped the SYNs past it, and a
        // visitor's connect waited a whole second for TCP to send its SYN again.
        linkfs_process::raise_open_file_limit();
        // The kernel caps any backlog at somaxconn (4,096 on Linux since 5.4).
        let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(4096);
        let waiting = 1100.min(somaxconn.saturating_sub(2));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(bind("127.0.0.1:0".parse().unwrap()))
            .unwrap();
        let to = listener.local_addr().unwrap();
        let within = Duration::from_millis(500);
        let mut held = Vec::with_capacity(waiting + 1);
        for n in 0..=waiting {
            let started = std::time::Instant::now();
            let connected = std::net::TcpStream::connect_timeout(&to, within);
            assert!(
                connected.is_ok(),
                "connection {n} (of {waiting} left waiting, then a visitor's) was not taken \
                 within {within:?} ({:?}, after {:?}): the listen backlog is shorter than \
                 LISTEN_BACKLOG",
                connected.err(),
                started.elapsed()
            );
            held.push(connected.unwrap());
        }
        drop(listener);
    }

    #[test]
    fn an_address_at_its_cap_loses_its_oldest_unfinished_socket_and_no_one_elses() {
        let set = Arc::new(Unfinished::default());
        let other = set.admit(ip(1), Some(2), 100);
        let a = set.admit(ip(2), Some(2), 100);
        let b = set.admit(ip(2), Some(2), 100);
        assert_eq!((a.2, b.2), (0, 0));
        let c = set.admit(ip(2), Some(2), 100);
        assert_eq!(c.2, 1, "one dropped for the address");
        assert!(
            a.1.dropped.load(Ordering::Acquire),
            "the oldest of that address"
        );
        assert!(!b.1.dropped.load(Ordering::Acquire));
        assert!(
            !other.1.dropped.load(Ordering::Acquire),
            "another address keeps its own"
        );
        assert_eq!(set.len(), 3);
        // Exempt (a trusted proxy): no cap.
        for _ in 0..10 {
            assert_eq!(set.admit(ip(9), None, 100).2, 0);
        }
        assert_eq!(set.len(), 13);
    }

    #[test]
    fn beyond_the_total_the_oldest_of_all_goes_and_finished_ones_leave() {
        let set = Arc::new(Unfinished::default());
        let first = set.admit(ip(1), Some(16), 3);
        let second = set.admit(ip(2), Some(16), 3);
        set.admit(ip(3), Some(16), 3);
        let fourth = set.admit(ip(4), Some(16), 3);
        assert_eq!(fourth.3, 1);
        assert!(first.1.dropped.load(Ordering::Acquire));
        assert_eq!(set.len(), 3);
        set.finished(second.0, ip(2));
        assert_eq!(set.len(), 2);
        // Dropping a ticket is finishing.
        let ticket = UnfinishedTicket {
            key: fourth.0,
            mark: fourth.1,
            set: set.clone(),
        };
        drop(ticket);
        assert_eq!(set.len(), 1);
        assert_eq!(
            set.shed_oldest(16),
            1,
            "the last one, when descriptors ran out"
        );
        assert_eq!(set.len(), 0);
        assert!(
            set.lock().by_addr.is_empty(),
            "nothing left behind per address"
        );
    }

    #[test]
    fn an_ipv4_client_on_an_ipv6_socket_counts_as_its_ipv4_address() {
        let mapped: IpAddr = "::ffff:127.0.0.2".parse().unwrap();
        assert_eq!(canonical(mapped), ip(2));
        let v6: IpAddr = "fd00::1".parse().unwrap();
        assert_eq!(canonical(v6), v6);
    }
}
