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

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// A listener admitting at most `cap` open sockets.
#[derive(Debug)]
pub(crate) struct CappedListener {
    inner: TcpListener,
    slots: Arc<Semaphore>,
    silence: Duration,
    header: Duration,
}

impl CappedListener {
    /// Admits at most `cap` sockets; each is dropped after `silence` without
    /// input, or if its first request head is not complete `header` after it
    /// was accepted.
    pub fn new(inner: TcpListener, cap: usize, silence: Duration, header: Duration) -> Self {
        CappedListener {
            inner,
            slots: Arc::new(Semaphore::new(cap)),
            silence,
            header,
        }
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
                    let stream = CappedStream {
                        stream,
                        _slot: slot,
                        silence: self.silence,
                        last_input: now,
                        deadline: Box::pin(tokio::time::sleep_until(
                            now + self.silence.min(self.header),
                        )),
                        head: Some((now + self.header, 0)),
                    };
                    return (stream, addr);
                }
                // The peer gave up before we accepted: try the next one.
                Err(err) if is_connection_error(&err) => {}
                // Out of file descriptors and the like: wait for some to free up.
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
