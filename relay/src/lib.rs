//! The linkfs relay: WebSocket signaling rooms, and the web app.
//!
//! # What it does
//!
//! A sharer (the *host*) opens a room at `GET /signal/{room}?role=host`; visitors
//! (*guests*) join it with `role=guest`. The relay forwards sealed signaling messages
//! between host and guests until their WebRTC data channel opens peer to peer. It
//! reads nothing it forwards (`data` is ciphertext; it is never logged) and learns
//! no secret: the secret lives in the link's fragment, which browsers never send.
//! The protocol is [`linkfs_proto::signal`]:
//!
//! - every socket first gets `welcome {peer, ice_servers, max_message}`;
//! - the host is peer 0; guests are 1, 2, ... per room, never reused in a room's life;
//! - the host hears `joined`/`left` for guests; when the host leaves, every guest
//!   gets `left {peer: 0}` and is closed: a room lives exactly as long as its host;
//! - guests may send only to peer 0; the host to any guest of its room; anything
//!   else is `unknown-peer` (the socket stays open);
//! - refusals are an `error {code, message}` in plain words, then a close frame
//!   (except `unknown-peer` and `rate-limited`).
//!
//! It also serves the web app at `/` (embedded at build time, see `build.rs`, or
//! from `--web-dir`), `GET /healthz` and `GET /metrics` (Prometheus text).
//!
//! With a TURN secret ([`turn`]), every member of a live room gets short-lived TURN
//! credentials in coturn's REST scheme in its `welcome`, renewed every half
//! lifetime. With `--redis` (the `fleet` module), any number of relay processes
//! serve the same rooms: the room directory lives in Redis keys that expire unless
//! renewed, messages between relays go over Redis pub/sub, and the limits that must
//! hold across the fleet are checked there. `docs/relay.md` is the operator's guide.
//!
//! # Shape
//!
//! [`app`] builds the axum `Router` over a [`RelayState`]; [`spawn`] runs it on a
//! listener and returns a [`RelayHandle`] for graceful shutdown (the native CLI
//! embeds the relay this way; the `linkfs-relay` binary is glue around it). Each
//! WebSocket is one task running `session::run`, an actor generic over
//! `Sink`/`Stream`; rooms are a map behind one mutex that is never held across an
//! await; delivery to a peer is a non-blocking push into its bounded outbox.
//!
//! # Bounds ([`Limits`], defaults)
//!
//! | what | bound | beyond it |
//! | --- | --- | --- |
//! | message size | 16 KiB ([`MAX_SIGNAL_MESSAGE`](linkfs_proto::signal::MAX_SIGNAL_MESSAGE)), checked by the WebSocket reader before buffering | `message-too-large`, close |
//! | guests per room | 64 | `room-full`, close |
//! | rooms | 10,000 | `too-many-rooms`, close |
//! | WebSockets | 20,000 | HTTP 503 before the upgrade |
//! | other TCP connections | 1,024 more | not accepted until one closes |
//! | connections waiting to be accepted | 4,096 ([`LISTEN_BACKLOG`], [`bind`]; capped by the kernel's `somaxconn`) | the kernel drops the SYN; the client retries in 1 s |
//! | connections without a complete first request head, per address | 16 | the oldest of them is dropped |
//! | such connections from everyone | a quarter of the open-file limit (at least 64) | the oldest is dropped; and when `accept` runs out of descriptors, the oldest 16 |
//! | a silent TCP connection (HTTP keep-alive, half-sent request, dead peer) | 90 s without a byte | dropped |
//! | message rate | 50/s, burst 100, per connection | `rate-limited` (dropped, at most one notice a second); after 100 refusals (one forgiven per second) close |
//! | outbound queue | 256 messages and 128 KiB per connection | the slow receiver is disconnected |
//! | writes | 10 s each | disconnected |
//! | idle | ping every 20 s; nothing heard for 60 s | `idle-timeout`, close |
//!
//! # Memory per connection
//!
//! An idle WebSocket holds its task and session state, tungstenite's 4 KiB read
//! buffer, an empty outbox (one tokio channel), its room entry and a kernel socket.
//! Measured here (release build, 2 cores, relay RSS growth divided by connections):
//!
//! | state | bytes per connection |
//! | --- | --- |
//! | 10,000 idle WebSockets (5,000 rooms of host + guest), one relay (an earlier tool, before host proofs) | 9,962 (about 9.7 KiB) |
//! | the same after one 1 KiB message per guest | 10,480 |
//! | 4,000, after one 16,000-byte message per guest | 27,398 |
//! | 10,000 across two relays with Redis, hosts on one, guests on the other (`linkfs-bench-relay`) | 11,351 (about 11.1 KiB) |
//!
//! The last line is the ceiling for a connection that once carried a maximum-size
//! message: tungstenite keeps its read and write buffers at their largest size, and
//! the relay cannot shrink them. Real signaling messages (sealed SDP, candidates)
//! are a few KiB. Worst case under abuse, per connection: 4 KiB read buffer + one
//! message being read (16 KiB) + the outbox (128 KiB) + tungstenite's write buffer
//! (at most 2 x 16 KiB + 1 KiB) + one message being written (16 KiB), about 200 KiB;
//! an outbox fills only while its reader stalls, and then the connection is dropped.
//! Kernel socket buffers come on top and are not counted here.

mod config;
mod error;
mod fleet;
mod host_proofs;
mod http;
mod listener;
mod metrics;
mod outbox;
mod rate_limit;
mod rooms;
mod session;
mod state;
pub mod turn;
mod web;
mod wire;

use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use config::{BadRedisUrl, ConfigError, IpNetwork, Limits, NotAnIpNetwork, RelayConfig};
pub use error::{AppError, RelayError};
pub use fleet::RedisUnreachable;
pub use http::{CONTENT_SECURITY_POLICY, app};
pub use listener::{LISTEN_BACKLOG, bind};
pub use metrics::{Metrics, Rejection};
pub use state::RelayState;
pub use turn::{DEFAULT_TURN_LIFETIME, TurnConfig};

/// A relay running in this process.
///
/// Dropping the handle stops the relay without waiting; [`RelayHandle::shutdown`]
/// stops it and waits for connections to close.
#[derive(Debug)]
pub struct RelayHandle {
    local_addr: SocketAddr,
    state: RelayState,
    server: Option<JoinHandle<()>>,
}

/// Serves the relay on `listener` until the handle is shut down or dropped.
pub async fn spawn(listener: TcpListener, config: RelayConfig) -> Result<RelayHandle, RelayError> {
    let state = RelayState::new(config)?;
    let local_addr = listener.local_addr().map_err(RelayError::Listener)?;
    let limits = &state.config().limits;
    // Unfinished connections may hold a quarter of the descriptors (see `listener`).
    let descriptors = linkfs_process::open_file_limit();
    let listener = listener::CappedListener::new(
        listener,
        listener::ListenerLimits {
            cap: limits
                .max_connections
                .saturating_add(limits.max_http_connections),
            silence: limits.silence_timeout,
            header: limits.header_timeout,
            unfinished_per_address: limits.max_unfinished_per_address,
            unfinished_total: usize::try_from(descriptors / 4)
                .unwrap_or(usize::MAX)
                .max(64),
            exempt: state.config().trusted_proxies.clone(),
        },
        state.clone(),
    );
    let router = app(state.clone());
    let stop = state.shutdown_token().clone();
    let server = tokio::spawn(async move {
        // `serve` retries failed accepts itself; it ends only on shutdown.
        let router = router.into_make_service_with_connect_info::<listener::PeerAddr>();
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
    });
    tracing::info!(%local_addr, "relay listening");
    Ok(RelayHandle {
        local_addr,
        state,
        server: Some(server),
    })
}

impl RelayHandle {
    /// The address the relay listens on (useful after binding port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The relay's state: config and metrics.
    pub fn state(&self) -> &RelayState {
        &self.state
    }

    /// Stops accepting, tells every WebSocket "going away" (close code 1001), and
    /// waits up to `shutdown_grace` for connections to close.
    pub async fn shutdown(mut self) {
        self.state.shutdown_token().cancel();
        let grace = self.state.config().limits.shutdown_grace;
        let sessions = self.state.sessions().clone();
        sessions.close();
        let server = self.server.take();
        let drained = tokio::time::timeout(grace, async move {
            if let Some(server) = server {
                let _ = server.await;
            }
            sessions.wait().await;
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                open = self.state.metrics().connections_open(),
                "connections still open after the shutdown grace period; dropping them"
            );
        }
    }
}

impl Drop for RelayHandle {
    fn drop(&mut self) {
        self.state.shutdown_token().cancel();
    }
}
