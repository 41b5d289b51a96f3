//! A UDP forwarder that delays every datagram, both ways: a round trip longer
//! by twice `--delay-ms`, for measuring linkfs over a distance on a kernel
//! without netem. Put it in front of a TURN server and force relayed paths
//! (`--ice-policy relay`). Forced on both peers, every packet between them
//! crosses it twice (half the delay gives the same round trip); forced on the
//! visitor only, the sharer sends straight to the visitor's relayed address
//! and only the visitor's leg is delayed.
//!
//! ```text
//! linkfs-udp-delay --listen 10.77.0.1:3479 --to 10.77.0.1:3478 --delay-ms 10
//! ```
//!
//! Each client address gets its own socket toward the server (so the server
//! sees distinct clients), created on its first datagram; a client silent for
//! 60 s is forgotten. Datagrams wait in order (the delay is the same for all),
//! at most 64 MiB of them at once; beyond that they are dropped, as a full
//! router queue would. Prints one line when it listens; runs until killed.
//!
//! Datagrams leave at their own due time, to within tens of microseconds (a
//! thread of its own, sleeping on the kernel's high-resolution timers with the
//! timer slack set to 1 ns), as netem's delay does: a forwarder that woke on a
//! 1 ms tick would release each millisecond's datagrams as one burst, and a
//! burst of more than ~56 datagrams overflows a TURN server's 128 KiB relay
//! sockets (coturn sets that size itself): losses the real path would not have.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::net::UdpSocket;

#[derive(Parser)]
struct Args {
    /// Where clients send (the address to give them as the server's).
    #[arg(long)]
    listen: SocketAddr,
    /// The real server.
    #[arg(long)]
    to: SocketAddr,
    /// Added to each direction, ms.
    #[arg(long, default_value_t = 10)]
    delay_ms: u64,
    /// The path's rate, Mbit/s, both directions together (0: unlimited).
    /// Datagrams leave no closer together than their size at this rate, as
    /// on a real link, whose bottleneck spaces a sender's bursts out.
    #[arg(long, default_value_t = 0)]
    rate_mbit: u64,
}

/// Kernel buffer asked for on each socket (the kernel caps it at
/// `net.core.rmem_max`/`wmem_max`): a router's queue, not the 208 KiB default
/// that a burst of a large send window overflows.
const SOCKET_BUFFER: usize = 4 << 20;

/// Bytes of datagrams held back at once, at most.
const MAX_QUEUED_BYTES: usize = 64 << 20;
const FORGET_AFTER: Duration = Duration::from_secs(60);

/// A datagram to send at `due` from `socket` to `to`.
struct Delayed {
    due: Instant,
    socket: Arc<std::net::UdpSocket>,
    to: SocketAddr,
    data: Vec<u8>,
}

/// A socket both halves use: the async one receives, the blocking clone (the
/// same kernel socket) sends from the timing thread.
#[derive(Clone)]
struct Socket {
    recv: Arc<UdpSocket>,
    send: Arc<std::net::UdpSocket>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let delay = Duration::from_millis(args.delay_ms);
    let front = bind(args.listen)?;
    println!(
        "linkfs-udp-delay: {} -> {} with {} ms each way",
        front.recv.local_addr()?,
        args.to,
        args.delay_ms
    );
    let (tx, rx) = mpsc::channel::<Delayed>();
    let rate = args.rate_mbit;
    std::thread::spawn(move || sender(rx, rate));
    let mut clients: HashMap<SocketAddr, (Socket, Instant)> = HashMap::new();
    let mut buf = vec![0u8; 65_536];
    loop {
        let (n, from) = front.recv.recv_from(&mut buf).await?;
        let now = Instant::now();
        clients.retain(|_, (_, seen)| now.duration_since(*seen) < FORGET_AFTER);
        let upstream = match clients.get_mut(&from) {
            Some((s, seen)) => {
                *seen = now;
                s.clone()
            }
            None => {
                let bind: SocketAddr = if args.to.is_ipv4() {
                    "0.0.0.0:0".parse()?
                } else {
                    "[::]:0".parse()?
                };
                let s = self::bind(bind)?;
                clients.insert(from, (s.clone(), now));
                // Answers from the server go back to this client, delayed too.
                tokio::spawn(back(s.clone(), front.clone(), from, tx.clone(), delay));
                s
            }
        };
        let _ = tx.send(Delayed {
            due: now + delay,
            socket: upstream.send,
            to: args.to,
            data: buf[..n].to_vec(),
        });
    }
}

/// Server -> client for one client.
async fn back(
    upstream: Socket,
    front: Socket,
    client: SocketAddr,
    tx: mpsc::Sender<Delayed>,
    delay: Duration,
) {
    let mut buf = vec![0u8; 65_536];
    loop {
        let recv = tokio::time::timeout(FORGET_AFTER, upstream.recv.recv_from(&mut buf)).await;
        let Ok(Ok((n, _))) = recv else { return };
        let sent = tx.send(Delayed {
            due: Instant::now() + delay,
            socket: front.send.clone(),
            to: client,
            data: buf[..n].to_vec(),
        });
        if sent.is_err() {
            return;
        }
    }
}

/// Sends each datagram when it is due, in arrival order (every delay is the
/// same). A thread of its own: its sleeps end on time, not on a runtime's tick.
fn sender(rx: mpsc::Receiver<Delayed>, rate_mbit: u64) {
    let _ = nix::sys::prctl::set_timerslack(1);
    // When the link is free again: a datagram of n bytes holds it n*8/rate.
    let mut link_free = Instant::now();
    let mut queued = 0usize;
    let mut queue = std::collections::VecDeque::<Delayed>::new();
    loop {
        // Take in whatever has arrived (bounded: beyond the cap, dropped as a
        // full queue would), waiting only when nothing is queued.
        let first = if queue.is_empty() {
            rx.recv().ok()
        } else {
            None
        };
        for d in first.into_iter().chain(rx.try_iter()) {
            if queued + d.data.len() <= MAX_QUEUED_BYTES {
                queued += d.data.len();
                queue.push_back(d);
            }
        }
        let Some(next) = queue.front() else {
            if first_closed(&rx) {
                return;
            }
            continue;
        };
        let now = Instant::now();
        let at = next.due.max(link_free);
        if at > now {
            // Datagrams that come meanwhile are due later than this one.
            std::thread::sleep(at - now);
            continue;
        }
        while queue.front().is_some_and(|d| d.due <= now) && link_free <= now {
            if let Some(d) = queue.pop_front() {
                queued -= d.data.len();
                send(&d);
                if let Some(nanos) = (d.data.len() as u64 * 8_000).checked_div(rate_mbit) {
                    link_free = link_free.max(now) + Duration::from_nanos(nanos);
                }
            }
        }
    }
}

/// Whether every sender is gone (the forwarder is shutting down).
fn first_closed(rx: &mpsc::Receiver<Delayed>) -> bool {
    matches!(rx.try_recv(), Err(mpsc::TryRecvError::Disconnected))
}

/// One send; the socket is non-blocking (shared with the async half), so a
/// full send buffer is waited out briefly, then the datagram is dropped.
fn send(d: &Delayed) {
    for _ in 0..1000 {
        match d.socket.send_to(&d.data, d.to) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_micros(20));
            }
            _ => return,
        }
    }
}

fn bind(addr: SocketAddr) -> std::io::Result<Socket> {
    use nix::sys::socket::{setsockopt, sockopt};
    let socket = std::net::UdpSocket::bind(addr)?;
    let _ = setsockopt(&socket, sockopt::RcvBuf, &SOCKET_BUFFER);
    let _ = setsockopt(&socket, sockopt::SndBuf, &SOCKET_BUFFER);
    socket.set_nonblocking(true)?;
    let send = Arc::new(socket.try_clone()?);
    let recv = Arc::new(UdpSocket::from_std(socket)?);
    Ok(Socket { recv, send })
}
