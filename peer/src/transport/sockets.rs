//! Larger kernel buffers for the UDP sockets webrtc-rs binds.
//!
//! webrtc-rs binds its sockets itself and hands each to its runtime to wrap; this
//! runtime wraps webrtc-rs's own tokio runtime and, on the way, asks the kernel for
//! bigger receive and send buffers. A burst that overflows a socket's receive buffer
//! (208 KiB by default on Linux, and every datagram is charged in full however small)
//! is lost, and webrtc-rs's SCTP recovers from losses slowly.
//!
//! The kernel caps the request at `net.core.rmem_max` / `wmem_max` (and doubles it for
//! its own bookkeeping); a refused request is logged and the socket used as it is.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::socket::{setsockopt, sockopt};
use webrtc::runtime::{
    AsyncInterval, AsyncTcpListener, AsyncTcpStream, AsyncUdpSocket, JoinHandle, Runtime,
    TokioRuntime,
};

/// webrtc-rs's tokio runtime with UDP socket buffers of a chosen size.
#[derive(Debug)]
pub(crate) struct SizedSockets {
    inner: TokioRuntime,
    buffer_bytes: usize,
}

impl SizedSockets {
    pub(crate) fn runtime(buffer_bytes: usize) -> Arc<dyn Runtime> {
        Arc::new(Self {
            inner: TokioRuntime,
            buffer_bytes,
        })
    }
}

impl Runtime for SizedSockets {
    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) -> Box<dyn JoinHandle> {
        self.inner.spawn(future)
    }

    fn spawn_reactor(
        &self,
        reactor_pool_size: usize,
        future: Pin<Box<dyn Future<Output = ()> + Send>>,
    ) -> Box<dyn JoinHandle> {
        self.inner.spawn_reactor(reactor_pool_size, future)
    }

    fn wrap_udp_socket(&self, socket: std::net::UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        if let Err(error) = setsockopt(&socket, sockopt::RcvBuf, &self.buffer_bytes) {
            tracing::debug!(%error, "cannot enlarge a UDP receive buffer");
        }
        if let Err(error) = setsockopt(&socket, sockopt::SndBuf, &self.buffer_bytes) {
            tracing::debug!(%error, "cannot enlarge a UDP send buffer");
        }
        self.inner.wrap_udp_socket(socket)
    }

    fn wrap_tcp_listener(
        &self,
        listener: std::net::TcpListener,
    ) -> io::Result<Arc<dyn AsyncTcpListener>> {
        self.inner.wrap_tcp_listener(listener)
    }

    fn connect_tcp<'a>(
        &'a self,
        remote_addr: SocketAddr,
    ) -> Pin<Box<dyn Future<Output = io::Result<Arc<dyn AsyncTcpStream>>> + Send + 'a>> {
        self.inner.connect_tcp(remote_addr)
    }

    fn resolve_host<'a>(
        &'a self,
        host: &'a str,
    ) -> Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + Send + 'a>> {
        self.inner.resolve_host(host)
    }

    fn now(&self) -> Instant {
        self.inner.now()
    }

    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        self.inner.sleep(duration)
    }

    fn interval(&self, period: Duration) -> Box<dyn AsyncInterval> {
        self.inner.interval(period)
    }

    fn block_on(&self, future: Pin<Box<dyn Future<Output = ()> + '_>>) {
        self.inner.block_on(future)
    }

    fn yield_now(&self) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        self.inner.yield_now()
    }

    fn name(&self) -> &'static str {
        "tokio (sized UDP buffers)"
    }
}
