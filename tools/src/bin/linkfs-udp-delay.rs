//! A UDP forwarder that delays every datagram, both ways: a round trip longer
//! by twice `--delay-ms`, for measuring linkfs over a distance on a kernel
//! without netem. Put it in front of a TURN server and force relayed paths
//! (`--ice-policy relay`): every packet between the peers then crosses it.
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

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::time::Instant;

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
    socket: Arc<UdpSocket>,
    to: SocketAddr,
    data: Vec<u8>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let delay = Duration::from_millis(args.delay_ms);
    let front = Arc::new(bind(args.listen).await?);
    println!(
        "linkfs-udp-delay: {} -> {} with {} ms each way",
        front.local_addr()?,
        args.to,
        args.delay_ms
    );
    let (tx, rx) = mpsc::unbounded_channel::<Delayed>();
    tokio::spawn(sender(rx));
    let mut clients: HashMap<SocketAddr, (Arc<UdpSocket>, Instant)> = HashMap::new();
    let mut buf = vec![0u8; 65_536];
    loop {
        let (n, from) = front.recv_from(&mut buf).await?;
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
                let s = Arc::new(self::bind(bind).await?);
                clients.insert(from, (s.clone(), now));
                // Answers from the server go back to this client, delayed too.
                tokio::spawn(back(s.clone(), front.clone(), from, tx.clone(), delay));
                s
            }
        };
        let _ = tx.send(Delayed {
            due: now + delay,
            socket: upstream,
            to: args.to,
            data: buf[..n].to_vec(),
        });
    }
}

/// Server -> client for one client.
async fn back(
    upstream: Arc<UdpSocket>,
    front: Arc<UdpSocket>,
    client: SocketAddr,
    tx: mpsc::UnboundedSender<Delayed>,
    delay: Duration,
) {
    let mut buf = vec![0u8; 65_536];
    loop {
        let recv = tokio::time::timeout(FORGET_AFTER, upstream.recv_from(&mut buf)).await;
        let Ok(Ok((n, _))) = recv else { return };
        let sent = tx.send(Delayed {
            due: Instant::now() + delay,
            socket: front.clone(),
            to: client,
            data: buf[..n].to_vec(),
        });
        if sent.is_err() {
            return;
        }
    }
}

/// Sends each datagram when it is due, in arrival order (every delay is the same).
async fn sender(mut rx: mpsc::UnboundedReceiver<Delayed>) {
    let mut queue: VecDeque<Delayed> = VecDeque::new();
    let mut queued = 0usize;
    loop {
        let next_due = queue.front().map(|d| d.due);
        tokio::select! {
            item = rx.recv() => match item {
                Some(d) if queued + d.data.len() <= MAX_QUEUED_BYTES => {
                    queued += d.data.len();
                    queue.push_back(d);
                }
                Some(_) => {} // dropped, as a full queue would
                None => return,
            },
            () = sleep_until(next_due) => {
                let now = Instant::now();
                while queue.front().is_some_and(|d| d.due <= now) {
                    if let Some(d) = queue.pop_front() {
                        queued -= d.data.len();
                        let _ = d.socket.send_to(&d.data, d.to).await;
                    }
                }
            }
        }
    }
}

async fn bind(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    use nix::sys::socket::{setsockopt, sockopt};
    let socket = UdpSocket::bind(addr).await?;
    let _ = setsockopt(&socket, sockopt::RcvBuf, &SOCKET_BUFFER);
    let _ = setsockopt(&socket, sockopt::SndBuf, &SOCKET_BUFFER);
    Ok(socket)
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
