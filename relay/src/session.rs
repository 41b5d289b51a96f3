//! One WebSocket's life: join, welcome, then relay until someone leaves.
//!
//! A thin actor: one `select!` loop (biased, in this order) over
//!
//! 1. the kick token: relay shutdown ("going away") or this peer's queue overflowed
//!    ("too slow"); the connection ends now;
//! 2. the outbox: messages other peers routed here, written in order, each write
//!    bounded by `write_timeout`;
//! 3. the socket: one inbound frame, rate-limited, parsed, routed;
//! 4. the idle deadline: `idle_timeout` after the last inbound frame (pongs count);
//! 5. the ping interval.
//!
//! The session is generic over `Sink`/`Stream` so tests can drive it without a
//! socket. Room membership is an RAII guard: however the session ends (even if its
//! future is dropped), the guest leaves or the host's room closes.
//!
//! Never logged: `data` (sealed ciphertext) and anything else a client sent.

use std::fmt::Display;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes};
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use linkfs_proto::signal::{ClientToRelay, PeerId, RelayErrorCode, RelayToClient, Role};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::Rejection;
use crate::outbox::{Closing, ConnId, Outbound, Outbox, outbox};
use crate::rate_limit::{RateLimiter, RateVerdict};
use crate::rooms::{JoinRefusal, RouteRefusal, Routed};
use crate::state::RelayState;
use crate::wire::{self, SignalText, close_code};

/// After the relay sends a close frame, how long it waits for the client's.
const CLOSE_LINGER: Duration = Duration::from_secs(1);
/// Writes of a close frame to a connection that is being dropped anyway.
const LAST_WRITE_TIMEOUT: Duration = Duration::from_millis(500);

/// Runs one connection of `role` in `room`, from client address `client`, to its end.
pub(crate) async fn run<W, R>(
    state: RelayState,
    room: Box<str>,
    role: Role,
    client: std::net::IpAddr,
    sink: W,
    stream: R,
) where
    W: Sink<Message> + Unpin,
    W::Error: Display,
    R: Stream<Item = Result<Message, axum::Error>> + Unpin,
{
    let conn = state.next_conn();
    let kick = state.shutdown_token().child_token();
    let (link, outbox) = outbox(conn, &state.config().limits, kick);
    let joined = match role {
        Role::Host => state
            .open_room(&room, link, client)
            .await
            .map(|()| PeerId::HOST),
        Role::Guest => state.join_room(&room, link, client).await,
    };
    let mut socket = Socket {
        sink,
        stream,
        write_timeout: state.config().limits.write_timeout,
    };
    let peer = match joined {
        Ok(peer) => peer,
        Err(refusal) => {
            state.metrics().rejected(join_rejection(refusal));
            let (message, closing) = join_refusal_words(&state, refusal);
            socket
                .refuse(refusal.code(), message, closing, &outbox.kick)
                .await;
            return;
        }
    };
    let membership = Membership {
        state: state.clone(),
        room,
        peer,
        conn,
    };
    tracing::debug!(conn = conn.0, peer = peer.0, ?role, "joined");
    let end = Session {
        peer,
        conn,
        membership: Some(membership),
        limiter: {
            let limits = &state.config().limits;
            let factor = if role == Role::Host {
                HOST_RATE_FACTOR
            } else {
                1
            };
            RateLimiter::new(
                limits.rate_per_sec.saturating_mul(factor),
                limits.rate_burst.saturating_mul(factor),
                limits.max_refused,
                Instant::now().into_std(),
            )
        },
        outbox,
        state,
    }
    .relay(&mut socket)
    .await;
    tracing::debug!(conn = conn.0, ?end, "connection ended");
}

/// How a session ended (for the debug log).
#[derive(Debug)]
enum End {
    ClientClosed,
    Refused,
    HostLeft,
    Shutdown,
    TooSlow,
    WriteFailed,
}

struct Session {
    state: RelayState,
    peer: PeerId,
    conn: ConnId,
    /// `None` once the session has left its room, just before it closes the socket:
    /// a client that saw the close can rejoin at once.
    membership: Option<Membership>,
    outbox: Outbox,
    limiter: RateLimiter,
}

impl Session {
    async fn relay<W, R>(mut self, socket: &mut Socket<W, R>) -> End
    where
        W: Sink<Message> + Unpin,
        W::Error: Display,
        R: Stream<Item = Result<Message, axum::Error>> + Unpin,
    {
        let limits = self.state.config().limits.clone();
        let welcome = wire::encode(&RelayToClient::Welcome {
            peer: self.peer,
            ice_servers: self.ice_servers(),
            max_message: limits.max_message,
        });
        if socket.send_text(welcome, &self.outbox.kick).await.is_err() {
            return End::WriteFailed;
        }
        let mut last_heard = Instant::now();
        let idle = tokio::time::sleep_until(last_heard + limits.idle_timeout);
        tokio::pin!(idle);
        let mut ping =
            tokio::time::interval_at(last_heard + limits.ping_interval, limits.ping_interval);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Fresh TURN credentials every half lifetime, while a member.
        let mut refresh =
            self.state.config().turn.as_ref().map(|t| {
                tokio::time::interval_at(last_heard + t.refresh_every(), t.refresh_every())
            });

        let kick = self.outbox.kick.clone();
        loop {
            tokio::select! {
                biased;
                () = kick.cancelled() => {
                    return self.kicked(socket).await;
                }
                item = self.outbox.next() => match item {
                    Some(Outbound::Text(text)) => {
                        if socket.send_text(text, &self.outbox.kick).await.is_err() {
                            return self.write_failed();
                        }
                    }
                    Some(Outbound::Close(closing)) => {
                        socket.close(closing, &self.outbox.kick).await;
                        return End::HostLeft;
                    }
                    // The registry dropped our link without a close: our room is gone.
                    None => {
                        socket.close(Closing { code: close_code::NORMAL, reason: wire::HOST_LEFT }, &self.outbox.kick).await;
                        return End::HostLeft;
                    }
                },
                inbound = socket.stream.next() => {
                    last_heard = Instant::now();
                    if let Some(end) = self.inbound(inbound, socket).await {
                        return end;
                    }
                }
                () = &mut idle => {
                    let deadline = last_heard + limits.idle_timeout;
                    if deadline > Instant::now() {
                        idle.as_mut().reset(deadline);
                        continue;
                    }
                    self.membership = None;
                    self.state.metrics().rejected(Rejection::IdleTimeout);
                    let closing = Closing { code: close_code::POLICY, reason: "idle timeout" };
                    socket
                        .refuse(RelayErrorCode::IdleTimeout, wire::idle_timeout(&limits), closing, &self.outbox.kick)
                        .await;
                    return End::Refused;
                }
                _ = ping.tick() => {
                    if socket.send(Message::Ping(Default::default()), &self.outbox.kick).await.is_err() {
                        return self.write_failed();
                    }
                }
                () = tick_if_some(&mut refresh) => {
                    let fresh = wire::encode(&RelayToClient::IceServers { ice_servers: self.ice_servers() });
                    if socket.send_text(fresh, &self.outbox.kick).await.is_err() {
                        return self.write_failed();
                    }
                }
            }
        }
    }

    /// The ICE servers for this member: the configured ones, and fresh TURN
    /// credentials when the relay has a TURN secret.
    fn ice_servers(&self) -> Vec<linkfs_proto::signal::IceServer> {
        let config = self.state.config();
        let mut servers = config.ice_servers.clone();
        if let (Some(turn), Some(m)) = (&config.turn, &self.membership) {
            let room_prefix: String = m.room.chars().take(8).collect();
            servers.push(turn.credentials_now(&format!("{room_prefix}.{}", self.peer.0)));
        }
        servers
    }

    /// Handles one frame from the client; `Some` ends the session.
    async fn inbound<W, R>(
        &mut self,
        inbound: Option<Result<Message, axum::Error>>,
        socket: &mut Socket<W, R>,
    ) -> Option<End>
    where
        W: Sink<Message> + Unpin,
        W::Error: Display,
        R: Stream<Item = Result<Message, axum::Error>> + Unpin,
    {
        let limits = &self.state.config().limits;
        let frame = match inbound {
            None | Some(Ok(Message::Close(_))) => return Some(End::ClientClosed),
            Some(Err(err)) if is_too_large(&err) => {
                return Some(self.too_large(socket).await);
            }
            Some(Err(err)) => {
                tracing::debug!(conn = self.conn.0, %err, "read failed");
                return Some(End::ClientClosed);
            }
            Some(Ok(frame)) => frame,
        };
        match self.limiter.check(Instant::now().into_std()) {
            RateVerdict::Accept => {}
            RateVerdict::Refuse { notify } => {
                self.state.metrics().rejected(Rejection::RateLimited);
                if notify {
                    let text = wire::error(RelayErrorCode::RateLimited, wire::rate_limited(limits));
                    if socket.send_text(text, &self.outbox.kick).await.is_err() {
                        return Some(self.write_failed());
                    }
                }
                return None;
            }
            RateVerdict::Abuse => {
                self.membership = None;
                self.state.metrics().rejected(Rejection::RateAbuse);
                let closing = Closing {
                    code: close_code::POLICY,
                    reason: "rate limit",
                };
                socket
                    .refuse(
                        RelayErrorCode::RateLimited,
                        wire::rate_abuse(limits),
                        closing,
                        &self.outbox.kick,
                    )
                    .await;
                return Some(End::Refused);
            }
        }
        let text = match frame {
            Message::Text(text) => text,
            Message::Binary(_) => {
                return Some(self.bad_message(socket, wire::BINARY_FRAME.into()).await);
            }
            // Pings are answered by the WebSocket layer; pongs only prove liveness.
            Message::Ping(_) | Message::Pong(_) | Message::Close(_) => return None,
        };
        if text.len() > limits.max_message {
            return Some(self.too_large(socket).await);
        }
        let (to, data) = match serde_json::from_str::<ClientToRelay>(&text) {
            Ok(ClientToRelay::Msg { to, data }) => (to, data),
            Ok(_) => {
                let detail = wire::bad_message("a message type this relay does not know");
                return Some(self.bad_message(socket, detail).await);
            }
            Err(err) => {
                // serde_json's words (e.g. "missing field `to` at line 1 column 9") name
                // fields, never echo values at length; they go to the sender only.
                let detail = wire::bad_message(&err.to_string());
                return Some(self.bad_message(socket, detail).await);
            }
        };
        let Some(membership) = &self.membership else {
            return Some(End::ClientClosed);
        };
        let from = self.peer;
        let forwarded = wire::forwarded(from, &data);
        let len = forwarded.len();
        let refusal = match self
            .state
            .rooms()
            .route(&membership.room, from, to, forwarded.clone())
        {
            Ok(Routed::Delivered) => {
                self.state.metrics().forwarded(len);
                return None;
            }
            Ok(Routed::Forward(relay)) => {
                // Connected to another relay of the fleet: it delivers there.
                match self.state.fleet() {
                    Some(fleet) if fleet.forward(&relay, &membership.room, to, &forwarded) => {
                        self.state.metrics().forwarded(len);
                    }
                    _ => self.state.metrics().rejected(Rejection::SlowConsumer),
                }
                return None;
            }
            Err(RouteRefusal::TargetTooSlow) => {
                self.state.metrics().rejected(Rejection::SlowConsumer);
                return None;
            }
            Err(RouteRefusal::UnknownPeer) => wire::unknown_peer(to),
            Err(RouteRefusal::GuestToGuest) => wire::GUEST_TO_GUEST.to_owned(),
        };
        self.state.metrics().rejected(Rejection::UnknownPeer);
        let text = wire::error(RelayErrorCode::UnknownPeer, refusal);
        if socket.send_text(text, &self.outbox.kick).await.is_err() {
            return Some(self.write_failed());
        }
        None
    }

    async fn too_large<W, R>(&mut self, socket: &mut Socket<W, R>) -> End
    where
        W: Sink<Message> + Unpin,
        W::Error: Display,
        R: Stream<Item = Result<Message, axum::Error>> + Unpin,
    {
        self.membership = None;
        let limits = &self.state.config().limits;
        self.state.metrics().rejected(Rejection::MessageTooLarge);
        let closing = Closing {
            code: close_code::TOO_BIG,
            reason: "message too large",
        };
        socket
            .refuse(
                RelayErrorCode::MessageTooLarge,
                wire::message_too_large(limits),
                closing,
                &self.outbox.kick,
            )
            .await;
        End::Refused
    }

    async fn bad_message<W, R>(&mut self, socket: &mut Socket<W, R>, message: String) -> End
    where
        W: Sink<Message> + Unpin,
        W::Error: Display,
        R: Stream<Item = Result<Message, axum::Error>> + Unpin,
    {
        self.membership = None;
        self.state.metrics().rejected(Rejection::BadMessage);
        let closing = Closing {
            code: close_code::POLICY,
            reason: "bad message",
        };
        socket
            .refuse(
                RelayErrorCode::BadMessage,
                message,
                closing,
                &self.outbox.kick,
            )
            .await;
        End::Refused
    }

    async fn kicked<W, R>(&mut self, socket: &mut Socket<W, R>) -> End
    where
        W: Sink<Message> + Unpin,
        W::Error: Display,
        R: Stream<Item = Result<Message, axum::Error>> + Unpin,
    {
        self.membership = None;
        // The kick token is already cancelled; these last writes get their own short
        // timeout instead.
        let never = CancellationToken::new();
        socket.write_timeout = LAST_WRITE_TIMEOUT;
        if self.state.shutdown_token().is_cancelled() {
            let closing = Closing {
                code: close_code::GOING_AWAY,
                reason: wire::SHUTTING_DOWN,
            };
            socket.close(closing, &never).await;
            End::Shutdown
        } else {
            self.state.metrics().rejected(Rejection::SlowConsumer);
            let closing = Closing {
                code: close_code::POLICY,
                reason: wire::TOO_SLOW,
            };
            let _ = socket.send_close(closing, &never).await;
            End::TooSlow
        }
    }

    fn write_failed(&self) -> End {
        if !self.outbox.kick.is_cancelled() {
            // A write that timed out or failed: this peer is not reading.
            self.state.metrics().rejected(Rejection::SlowConsumer);
        }
        End::WriteFailed
    }
}

/// Waits for the next tick of `interval`, or forever if there is none.
async fn tick_if_some(interval: &mut Option<tokio::time::Interval>) {
    match interval {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// The socket halves plus the write bound.
struct Socket<W, R> {
    sink: W,
    stream: R,
    write_timeout: Duration,
}

/// A write did not complete (error, timeout, or the connection was kicked).
#[derive(Debug)]
struct WriteFailed;

impl<W, R> Socket<W, R>
where
    W: Sink<Message> + Unpin,
    W::Error: Display,
    R: Stream<Item = Result<Message, axum::Error>> + Unpin,
{
    async fn send(
        &mut self,
        message: Message,
        kick: &CancellationToken,
    ) -> Result<(), WriteFailed> {
        tokio::select! {
            biased;
            () = kick.cancelled() => Err(WriteFailed),
            sent = tokio::time::timeout(self.write_timeout, self.sink.send(message)) => match sent {
                Ok(Ok(())) => Ok(()),
                Ok(Err(err)) => {
                    tracing::debug!(%err, "write failed");
                    Err(WriteFailed)
                }
                Err(_elapsed) => Err(WriteFailed),
            },
        }
    }

    async fn send_text(
        &mut self,
        text: SignalText,
        kick: &CancellationToken,
    ) -> Result<(), WriteFailed> {
        self.send(Message::Text(Utf8Bytes::from(text.as_str())), kick)
            .await
    }

    async fn send_close(
        &mut self,
        closing: Closing,
        kick: &CancellationToken,
    ) -> Result<(), WriteFailed> {
        let frame = CloseFrame {
            code: closing.code,
            reason: closing.reason.into(),
        };
        self.send(Message::Close(Some(frame)), kick).await
    }

    /// Sends a close frame, then waits briefly for the client's close (so a browser
    /// sees a clean close with our code) while ignoring anything else it sends.
    async fn close(&mut self, closing: Closing, kick: &CancellationToken) {
        if self.send_close(closing, kick).await.is_err() {
            return;
        }
        let _ = tokio::time::timeout(CLOSE_LINGER, async {
            while let Some(Ok(frame)) = self.stream.next().await {
                if matches!(frame, Message::Close(_)) {
                    break;
                }
            }
        })
        .await;
    }

    /// Sends an `error` frame, then closes.
    async fn refuse(
        &mut self,
        code: RelayErrorCode,
        message: String,
        closing: Closing,
        kick: &CancellationToken,
    ) {
        let text = wire::error(code, message);
        if self.send_text(text, kick).await.is_ok() {
            self.close(closing, kick).await;
        }
    }
}

/// Membership of a room, undone on drop.
struct Membership {
    state: RelayState,
    room: Box<str>,
    peer: PeerId,
    conn: ConnId,
}

impl Drop for Membership {
    fn drop(&mut self) {
        if self.peer == PeerId::HOST {
            self.state.close_room(&self.room, self.conn);
        } else {
            self.state.leave_room(&self.room, self.peer, self.conn);
        }
    }
}

fn join_rejection(refusal: JoinRefusal) -> Rejection {
    match refusal {
        JoinRefusal::TooManyRooms => Rejection::TooManyRooms,
        JoinRefusal::NoSuchRoom => Rejection::NoSuchRoom,
        JoinRefusal::RoomFull => Rejection::RoomFull,
        JoinRefusal::JoiningTooFast => Rejection::RateLimited,
        JoinRefusal::TooManyFromAddress => Rejection::TooManyConnections,
        JoinRefusal::Unavailable => Rejection::Unavailable,
    }
}

fn join_refusal_words(state: &RelayState, refusal: JoinRefusal) -> (String, Closing) {
    let limits = &state.config().limits;
    match refusal {
        JoinRefusal::NoSuchRoom => (
            wire::NO_SUCH_ROOM.to_owned(),
            Closing {
                code: close_code::NORMAL,
                reason: "no such room",
            },
        ),
        JoinRefusal::RoomFull => (
            wire::room_full(limits),
            Closing {
                code: close_code::TRY_AGAIN_LATER,
                reason: "room full",
            },
        ),
        JoinRefusal::TooManyRooms => (
            wire::too_many_rooms(limits),
            Closing {
                code: close_code::TRY_AGAIN_LATER,
                reason: "too many rooms",
            },
        ),
        JoinRefusal::JoiningTooFast => (
            "Too many visitors are arriving at this share at once; try again in a few seconds."
                .to_owned(),
            Closing {
                code: close_code::TRY_AGAIN_LATER,
                reason: "joining too fast",
            },
        ),
        JoinRefusal::TooManyFromAddress => (
            format!(
                "Too many shares ({}), or visitors of this share ({}), from your address at once. Close some and try again.",
                limits.max_rooms_per_address, limits.max_guests_per_address
            ),
            Closing {
                code: close_code::TRY_AGAIN_LATER,
                reason: "too many from this address",
            },
        ),
        JoinRefusal::Unavailable => (
            "The relay cannot reach its room directory right now; try again in a few seconds."
                .to_owned(),
            Closing {
                code: close_code::TRY_AGAIN_LATER,
                reason: "room directory unavailable",
            },
        ),
    }
}

/// The host's message rate is this many times a guest's: it answers every
/// guest (a challenge each, then an answer and candidates for those admitted),
/// and guests arrive at most `rooms::JOINS_PER_SEC` a second.
const HOST_RATE_FACTOR: u32 = 8;

/// Whether a read failed because a frame or message was over the size limit (the
/// WebSocket layer refuses it before buffering it).
fn is_too_large(err: &axum::Error) -> bool {
    use std::error::Error as _;
    matches!(
        err.source()
            .and_then(|e| e.downcast_ref::<tungstenite::Error>()),
        Some(tungstenite::Error::Capacity(_))
    )
}

/// Sessions driven through in-memory channels: no sockets, and (with tokio's paused
/// clock) the real default timeouts without waiting for them.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RelayConfig;
    use tokio::sync::mpsc;
    use tokio_util::sync::PollSender;

    /// The client's end of an in-memory session.
    struct Peer {
        to_relay: mpsc::Sender<Result<Message, axum::Error>>,
        from_relay: mpsc::Receiver<Message>,
        done: tokio::task::JoinHandle<()>,
    }

    fn start(state: &RelayState, room: &str, role: Role) -> Peer {
        let (to_relay, mut inbound) = mpsc::channel(16);
        let (outbound, from_relay) = mpsc::channel(16);
        let stream = futures_util::stream::poll_fn(move |cx| inbound.poll_recv(cx));
        let done = tokio::spawn(run(
            state.clone(),
            room.into(),
            role,
            std::net::Ipv4Addr::LOCALHOST.into(),
            PollSender::new(outbound),
            Box::pin(stream),
        ));
        Peer {
            to_relay,
            from_relay,
            done,
        }
    }

    impl Peer {
        async fn recv(&mut self) -> RelayToClient {
            loop {
                match self.from_relay.recv().await {
                    Some(Message::Text(t)) => {
                        return serde_json::from_str(t.as_str()).expect("relay JSON");
                    }
                    Some(Message::Ping(_)) => continue,
                    other => panic!("expected a text frame, got {other:?}"),
                }
            }
        }

        /// The next frame must be a close with `code`.
        async fn closed_with(&mut self, code: u16) {
            loop {
                match self.from_relay.recv().await {
                    Some(Message::Close(Some(f))) => {
                        assert_eq!(f.code, code, "{f:?}");
                        return;
                    }
                    Some(Message::Ping(_)) => continue,
                    other => panic!("expected close {code}, got {other:?}"),
                }
            }
        }

        async fn send(&self, frame: Result<Message, axum::Error>) {
            self.to_relay.send(frame).await.expect("session is reading");
        }
    }

    fn state() -> RelayState {
        RelayState::new(RelayConfig::default()).expect("default config")
    }

    #[tokio::test]
    async fn a_guest_reaches_the_host_without_any_socket() {
        let state = state();
        let mut host = start(&state, "mem-room-1", Role::Host);
        assert!(matches!(
            host.recv().await,
            RelayToClient::Welcome {
                peer: PeerId::HOST,
                ..
            }
        ));
        let mut guest = start(&state, "mem-room-1", Role::Guest);
        assert!(matches!(
            guest.recv().await,
            RelayToClient::Welcome {
                peer: PeerId(1),
                ..
            }
        ));
        assert_eq!(host.recv().await, RelayToClient::Joined { peer: PeerId(1) });
        guest
            .send(Ok(Message::Text(
                r#"{"t":"msg","to":0,"data":"b2ZmZXI"}"#.into(),
            )))
            .await;
        assert_eq!(
            host.recv().await,
            RelayToClient::Msg {
                from: PeerId(1),
                data: "b2ZmZXI".into()
            }
        );
        // The guest's stream ends: the host hears it left.
        drop(guest.to_relay);
        guest.done.await.expect("guest session");
        assert_eq!(host.recv().await, RelayToClient::Left { peer: PeerId(1) });
    }

    #[tokio::test]
    async fn an_oversize_read_error_becomes_message_too_large() {
        let state = state();
        let mut host = start(&state, "mem-room-2", Role::Host);
        host.recv().await;
        let too_long =
            tungstenite::Error::Capacity(tungstenite::error::CapacityError::MessageTooLong {
                size: 1 << 20,
                max_size: 16 << 10,
            });
        host.send(Err(axum::Error::new(too_long))).await;
        assert!(matches!(
            host.recv().await,
            RelayToClient::Error {
                code: RelayErrorCode::MessageTooLarge,
                ..
            }
        ));
        host.closed_with(close_code::TOO_BIG).await;
        assert_eq!(state.metrics().rejections(Rejection::MessageTooLarge), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_default_idle_timeout_closes_a_silent_peer_after_60_s_with_pings_before() {
        let state = state();
        let mut host = start(&state, "mem-room-3", Role::Host);
        host.recv().await;
        let started = Instant::now();
        let mut pings = 0;
        let error = loop {
            match host.from_relay.recv().await {
                Some(Message::Ping(_)) => pings += 1,
                Some(Message::Text(t)) => break t,
                other => panic!("expected pings then an error, got {other:?}"),
            }
        };
        assert_eq!(started.elapsed(), Duration::from_secs(60));
        assert_eq!(pings, 2, "pings at 20 s and 40 s");
        assert!(error.as_str().contains("idle-timeout"), "{error}");
        host.closed_with(close_code::POLICY).await;
        // The room closed with its host.
        assert_eq!(state.rooms().gauges().rooms, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn pongs_keep_a_peer_alive() {
        let state = state();
        let mut host = start(&state, "mem-room-4", Role::Host);
        host.recv().await;
        for _ in 0..10 {
            match host.from_relay.recv().await {
                Some(Message::Ping(_)) => host.send(Ok(Message::Pong(Default::default()))).await,
                other => panic!("expected a ping, got {other:?}"),
            }
        }
        // 200 s later the host is still there.
        assert_eq!(state.rooms().gauges().rooms, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn members_get_fresh_turn_credentials_every_half_lifetime() {
        let state = RelayState::new(RelayConfig {
            turn: Some(crate::turn::TurnConfig {
                secret: "s".into(),
                urls: vec!["turn:t.example.org:3478".into()],
                lifetime: Duration::from_secs(120),
            }),
            ..RelayConfig::default()
        })
        .expect("config");
        let mut host = start(&state, "mem-room-5", Role::Host);
        assert!(matches!(host.recv().await, RelayToClient::Welcome { .. }));
        let started = Instant::now();
        let fresh = loop {
            match host.from_relay.recv().await {
                Some(Message::Ping(_)) => host.send(Ok(Message::Pong(Default::default()))).await,
                Some(Message::Text(t)) => {
                    break serde_json::from_str::<RelayToClient>(t.as_str()).expect("JSON");
                }
                other => panic!("expected pings then fresh servers, got {other:?}"),
            }
        };
        assert_eq!(started.elapsed(), Duration::from_secs(60), "half of 120 s");
        let RelayToClient::IceServers { ice_servers } = fresh else {
            panic!("expected ice-servers, got {fresh:?}");
        };
        assert!(
            ice_servers[0]
                .username
                .as_deref()
                .is_some_and(|u| u.contains(':'))
        );
    }
}
