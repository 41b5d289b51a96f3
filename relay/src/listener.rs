//! A TCP listener that stops accepting at a connection cap.
//!
//! `axum::serve` accepts without limit. This listener takes a permit from a
//! semaphore before each `accept`, and the permit lives as long as the socket
//! (through the WebSocket upgrade, since the upgraded stream is this same socket).
//! At the cap, new connections wait in the kernel's accept backlog instead of
//! costing the relay memory.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A listener admitting at most `cap` open sockets.
#[derive(Debug)]
pub(crate) struct CappedListener {
    inner: TcpListener,
    slots: Arc<Semaphore>,
}

impl CappedListener {
    pub fn new(inner: TcpListener, cap: usize) -> Self {
        CappedListener {
            inner,
            slots: Arc::new(Semaphore::new(cap)),
        }
    }
}

/// An accepted socket holding one of the listener's slots.
#[derive(Debug)]
pub(crate) struct CappedStream {
    stream: TcpStream,
    _slot: OwnedSemaphorePermit,
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
                    return (
                        CappedStream {
                            stream,
                            _slot: slot,
                        },
                        addr,
                    );
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
        Pin::new(&mut self.stream).poll_read(cx, buf)
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
