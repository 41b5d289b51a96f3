//! [`DataLink`]: frames over one open linkfs data channel.
//!
//! Sending: [`LinkSender`] (cloneable) puts frames into a bounded outbox of
//! [`OUTBOX_FRAMES`] frames; one writer task per link hands them to the data channel
//! while fewer than the link's window of bytes are unacknowledged
//! ([`TransportConfig::send_window`]: fixed, or sized to the path and paced by a
//! [`Pacer`] that measures the rate the other side acknowledges and the round trip
//! ICE measures). So at most `OUTBOX_FRAMES` frames plus the window plus one frame
//! are held per link, and a slow receiver slows the sender down, never piles up
//! memory. The outbox makes sending cancel-safe: [`LinkSender::reserve`] waits
//! for room without committing a frame, so a `select!` loop can wait for room and for
//! incoming frames at once and lose nothing.
//!
//! Receiving: [`LinkReceiver::recv`] reads the data channel's own event queue. webrtc-rs
//! holds at most 256 messages there and 256 more in its pipeline, then leaves data in
//! SCTP's reassembly queue, whose 1 MiB receive window pushes back on the other side.
//! A receiver that stops reading therefore holds the other side's sender back after
//! about 512 messages + 1 MiB + the sender's own buffers: about 33 MiB with full-size
//! frames (measured 31-35 MiB; tested to stay under 40 MiB), far less with small ones.
//! Messages already received are returned before the end is reported.
//!
//! The end: whichever comes first of this side's `close()`, the other side closing the
//! channel, the connection closing, failing or going silent for
//! [`TransportConfig::lost_after`] (4 s by default), or a message over
//! [`MAX_FRAME_LEN`]. `recv` then returns `None`, `send` fails with
//! [`LinkError::Closed`], and [`LinkSender::close_reason`] says why. The peer connection
//! is closed as soon as the link ends (or all handles are dropped).
//!
//! [`TransportConfig::send_window`]: super::TransportConfig::send_window
//! [`TransportConfig::lost_after`]: super::TransportConfig::lost_after

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use linkfs_proto::MAX_FRAME_LEN;
use tokio::sync::{mpsc, oneshot, watch};
use webrtc::data_channel::{DataChannel, DataChannelEvent};

use super::SendWindow;
use super::connection::{Connection, Route, ended, remote_address_of, round_trip_of, route_of};
use super::error::{LinkClosed, LinkError};
use super::pace::{PaceConfig, Pacer};

/// Frames waiting in a link's outbox for the writer task: 4 (up to 240 KiB).
pub const OUTBOX_FRAMES: usize = 4;

/// How long `close()` waits for frames already sent to be acknowledged before it closes
/// the channel anyway: 2 s.
pub const CLOSE_FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// How often `close()` checks whether everything sent was acknowledged.
const FLUSH_POLL: Duration = Duration::from_millis(5);

/// How often a paced link asks ICE for the round trip.
const RTT_EVERY: Duration = Duration::from_secs(1);

/// How often a paced link waiting for room in its window looks again if no
/// buffered-amount-low event wakes it first (on a relayed link the relay pump
/// keeps the threshold where it found it, so there this timer is the wake). (Woken only by this 1 ms timer, a
/// 32 KiB window toward Chromium on one host saved files at 15 MB/s instead
/// of 22.)
const WINDOW_POLL: Duration = Duration::from_millis(1);

/// The round trip from which a paced link's connection lets arriving datagrams gather
/// for [`RECEIVE_COALESCING`] before its driver reads them (the webrtc patch's
/// `set_receive_coalescing`, third_party/PATCHES.md).
const COALESCE_FROM_RTT: Duration = Duration::from_millis(10);

/// How long: a millisecond, the runtime's timer step. Across 20 ms at 100 Mbit/s the
/// sharer was woken by each acknowledgement (11,000 a second); gathered, its CPU per
/// GB fell by a quarter at the same rate. On one host the same wait cut `get` from
/// 170 to 113 MB/s and quadrupled a small file's first byte: a short path never waits.
const RECEIVE_COALESCING: Duration = Duration::from_millis(1);

/// What a link to a browser must have sent over the last second for its
/// arriving datagrams to gather ([`PathRtt::measured`]): 1 MB/s. Toward a
/// browser, gathering is for the sender, whom acknowledgements wake; a link
/// that mostly receives (a sharer taking a page's upload, with only
/// acknowledgements of its own to send) reads what comes at once. Gathered,
/// Chromium's uploads across 20 ms moved 1.1-1.4 MB/s, against 12.4-15 read
/// at once. A native peer's sender is not held back by it, and a native
/// receiver gathers (`get` at 20 ms, 100 Mbit/s: the receiver's CPU per GB
/// 17 s gathering, 30 s not).
const BROWSER_COALESCE_FROM_SENT_PER_S: f64 = 1e6;

/// The path's round trip for [`receive_coalescing`]: the lowest ICE measured
/// over the link's life, the first measure taken at its first frame, before
/// bulk fills any queue. ICE's current figure counts the queues: on one host,
/// with Chromium busy, it read 20-87 ms for a path of well under one, and the
/// wait it turned on halved the page's uploads (5.5 -> 9.8 MB/s without it).
#[derive(Debug)]
struct PathRtt {
    lowest: Option<Duration>,
    /// Gather only while this link sends at least this much a second (0 for
    /// a native peer; [`BROWSER_COALESCE_FROM_SENT_PER_S`] for a browser).
    gather_from_sent_per_s: f64,
}

impl PathRtt {
    fn toward(native_peer: bool) -> PathRtt {
        PathRtt {
            lowest: None,
            gather_from_sent_per_s: if native_peer {
                0.0
            } else {
                BROWSER_COALESCE_FROM_SENT_PER_S
            },
        }
    }

    /// Takes one measure; says the coalescing the link now calls for, given
    /// what it sent per second since the last measure.
    fn measured(&mut self, rtt: Duration, sent_per_s: f64) -> Duration {
        let lowest = self.lowest.map_or(rtt, |lowest| lowest.min(rtt));
        self.lowest = Some(lowest);
        if sent_per_s < self.gather_from_sent_per_s {
            return Duration::ZERO;
        }
        receive_coalescing(lowest)
    }
}

/// The receive coalescing for a link whose round trip is `rtt`.
fn receive_coalescing(rtt: Duration) -> Duration {
    if rtt >= COALESCE_FROM_RTT {
        RECEIVE_COALESCING
    } else {
        Duration::ZERO
    }
}

/// What goes through the outbox.
enum Outgoing {
    Frame(Bytes),
    /// Flush what came before, then close; answer when done.
    Close(oneshot::Sender<()>),
}

struct Shared {
    connection: Arc<Connection>,
    channel: Arc<dyn DataChannel>,
    /// Told when the channel's buffered amount falls below its low threshold
    /// (the paced writer sets that to its window): there is room again.
    room: tokio::sync::Notify,
}

impl Shared {
    fn close_reason(&self) -> Option<LinkClosed> {
        self.connection.ending.reason()
    }

    /// Closes the channel and the connection now (no flush).
    async fn shut(&self, reason: LinkClosed) {
        self.connection.ending.end(reason);
        if let Err(error) = self.channel.close().await {
            tracing::debug!(%error, "closing the data channel");
        }
        if let Err(error) = self.connection.pc.close().await {
            tracing::debug!(%error, "closing the peer connection");
        }
    }
}

/// An open data channel carrying linkfs frames, both ways.
///
/// For one task that both sends and receives in a `select!` loop, [`split`](Self::split)
/// it: `recv(&mut receiver)` and `reserve(&sender)` can then wait side by side.
pub struct DataLink {
    sender: LinkSender,
    receiver: LinkReceiver,
}

impl std::fmt::Debug for DataLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataLink")
            .field("close_reason", &self.close_reason())
            .finish_non_exhaustive()
    }
}

impl DataLink {
    /// The route of the selected candidate pair, once ICE has chosen one.
    pub async fn route(&self) -> Option<Route> {
        route_of(self.sender.shared.connection.pc.as_ref()).await
    }

    /// Lets datagrams arriving on this link's connection gather for `wait` after one
    /// woke its driver (a paced link sets this itself from its round trip: see
    /// `receive_coalescing`).
    pub fn set_receive_coalescing(&self, wait: Duration) {
        self.sender
            .shared
            .connection
            .pc
            .set_receive_coalescing(wait);
    }

    /// The address the other end's packets come from, as ICE proved it (see
    /// `remote_address_of`); `None` until a pair is selected.
    pub async fn remote_address(&self) -> Option<std::net::IpAddr> {
        remote_address_of(self.sender.shared.connection.pc.as_ref()).await
    }

    pub(crate) fn new(connection: Arc<Connection>, channel: Arc<dyn DataChannel>) -> Self {
        let shared = Arc::new(Shared {
            connection,
            channel,
            room: tokio::sync::Notify::new(),
        });
        let (outbox, queued) = mpsc::channel(OUTBOX_FRAMES);
        tokio::spawn(write_frames(shared.clone(), queued));
        let ending = shared.connection.ending.subscribe();
        Self {
            sender: LinkSender {
                outbox,
                shared: shared.clone(),
            },
            receiver: LinkReceiver {
                shared,
                ending,
                finished: false,
            },
        }
    }

    /// The sending and receiving halves.
    pub fn split(self) -> (LinkSender, LinkReceiver) {
        (self.sender, self.receiver)
    }

    /// Asks this link's connection for its round trip, also after the link
    /// is split (it does not keep the connection open).
    pub fn path_probe(&self) -> PathProbe {
        PathProbe(Arc::downgrade(&self.sender.shared.connection))
    }

    /// See [`LinkSender::send`].
    pub async fn send(&self, frame: impl Into<Bytes>) -> Result<(), LinkError> {
        self.sender.send(frame).await
    }

    /// See [`LinkReceiver::recv`].
    pub async fn recv(&mut self) -> Option<Bytes> {
        self.receiver.recv().await
    }

    /// Why the link ended, or `None` while it is open.
    pub fn close_reason(&self) -> Option<LinkClosed> {
        self.sender.close_reason()
    }

    /// See [`LinkSender::close`].
    pub async fn close(self) {
        self.sender.close().await;
    }
}

/// See [`DataLink::path_probe`].
#[derive(Debug, Clone)]
pub struct PathProbe(std::sync::Weak<Connection>);

impl PathProbe {
    /// Whether the connection is still there to ask.
    pub fn is_open(&self) -> bool {
        self.0.strong_count() > 0
    }

    /// The round trip ICE last measured on the selected pair; `None` while
    /// unknown or once the connection is gone.
    pub async fn round_trip(&self) -> Option<Duration> {
        let connection = self.0.upgrade()?;
        round_trip_of(connection.pc.as_ref()).await
    }

    /// The route of the selected candidate pair, once ICE has chosen one.
    pub async fn route(&self) -> Option<Route> {
        let connection = self.0.upgrade()?;
        route_of(connection.pc.as_ref()).await
    }
}

/// The sending half of a [`DataLink`]. Clones share one outbox.
#[derive(Clone)]
pub struct LinkSender {
    outbox: mpsc::Sender<Outgoing>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LinkSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkSender")
            .field("close_reason", &self.close_reason())
            .finish_non_exhaustive()
    }
}

/// Room for one frame in a link's outbox, from [`LinkSender::reserve`].
#[derive(Debug)]
pub struct SendPermit<'a> {
    permit: mpsc::Permit<'a, Outgoing>,
    shared: &'a Shared,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

impl SendPermit<'_> {
    /// Queues `frame` in the reserved place. A frame over [`MAX_FRAME_LEN`] is refused
    /// (and the place given back).
    pub fn send(self, frame: impl Into<Bytes>) -> Result<(), LinkError> {
        let frame = checked(frame.into())?;
        if let Some(reason) = self.shared.close_reason() {
            return Err(LinkError::Closed(reason));
        }
        self.permit.send(Outgoing::Frame(frame));
        Ok(())
    }
}

impl LinkSender {
    /// Queues one frame, waiting while the outbox is full.
    ///
    /// `Ok` means the frame is queued for the data channel, which delivers reliably and
    /// in order unless the link ends first; the protocol's own acknowledgements confirm
    /// arrival. A frame over [`MAX_FRAME_LEN`] is refused with
    /// [`LinkError::FrameTooLarge`] and nothing is sent. Cancelling the call drops the
    /// frame unsent; to wait for room without giving up a frame, use
    /// [`reserve`](Self::reserve).
    pub async fn send(&self, frame: impl Into<Bytes>) -> Result<(), LinkError> {
        let frame = checked(frame.into())?;
        if let Some(reason) = self.close_reason() {
            return Err(LinkError::Closed(reason));
        }
        self.outbox
            .send(Outgoing::Frame(frame))
            .await
            .map_err(|_| self.closed_error())
    }

    /// Waits for room for one frame. Cancel-safe.
    pub async fn reserve(&self) -> Result<SendPermit<'_>, LinkError> {
        if let Some(reason) = self.close_reason() {
            return Err(LinkError::Closed(reason));
        }
        let permit = self
            .outbox
            .reserve()
            .await
            .map_err(|_| self.closed_error())?;
        Ok(SendPermit {
            permit,
            shared: &self.shared,
        })
    }

    /// Why the link ended, or `None` while it is open.
    pub fn close_reason(&self) -> Option<LinkClosed> {
        self.shared.close_reason()
    }

    /// Resolves when the link ends, with the reason. Cancel-safe.
    pub async fn closed(&self) -> LinkClosed {
        ended(&mut self.shared.connection.ending.subscribe()).await
    }

    /// Closes the link: frames queued before this call are sent and, for up to
    /// [`CLOSE_FLUSH_TIMEOUT`], acknowledged first; then the data channel and the
    /// connection close. The other side's `recv` then returns `None`.
    pub async fn close(&self) {
        let (done_tx, done_rx) = oneshot::channel();
        let queued = tokio::select! {
            sent = self.outbox.send(Outgoing::Close(done_tx)) => sent.is_ok(),
            _ = tokio::time::sleep(CLOSE_FLUSH_TIMEOUT) => false,
        };
        if queued
            && tokio::time::timeout(CLOSE_FLUSH_TIMEOUT * 2, done_rx)
                .await
                .is_ok()
        {
            return;
        }
        // The writer is gone or stuck: close without flushing.
        self.shared.shut(LinkClosed::ClosedHere).await;
    }

    fn closed_error(&self) -> LinkError {
        LinkError::Closed(self.close_reason().unwrap_or(LinkClosed::ConnectionClosed))
    }
}

/// The receiving half of a [`DataLink`].
pub struct LinkReceiver {
    shared: Arc<Shared>,
    ending: watch::Receiver<Option<LinkClosed>>,
    finished: bool,
}

impl std::fmt::Debug for LinkReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkReceiver")
            .field("finished", &self.finished)
            .field("close_reason", &self.close_reason())
            .finish_non_exhaustive()
    }
}

impl LinkReceiver {
    /// The next frame, or `None` once the link has ended (see [`close_reason`]).
    /// Frames that arrived before the end are returned first. Cancel-safe.
    ///
    /// [`close_reason`]: Self::close_reason
    pub async fn recv(&mut self) -> Option<Bytes> {
        if self.finished {
            return None;
        }
        loop {
            let event = tokio::select! {
                biased;
                event = self.shared.channel.poll() => event,
                _ = ended(&mut self.ending) => {
                    self.finished = true;
                    return None;
                }
            };
            let ended_by = match event {
                Some(DataChannelEvent::OnMessage(message)) => {
                    let len = message.data.len();
                    if len <= MAX_FRAME_LEN {
                        return Some(message.data.freeze());
                    }
                    LinkClosed::OversizedFrame {
                        len,
                        max: MAX_FRAME_LEN,
                    }
                }
                Some(DataChannelEvent::OnClose) => LinkClosed::PeerClosed,
                Some(DataChannelEvent::OnBufferedAmountLow) => {
                    self.shared.room.notify_one();
                    continue;
                }
                None => LinkClosed::ConnectionClosed,
                Some(_) => continue,
            };
            self.finished = true;
            self.shared.connection.ending.end(ended_by);
            return None;
        }
    }

    /// Why the link ended, or `None` while it is open.
    pub fn close_reason(&self) -> Option<LinkClosed> {
        self.shared.close_reason()
    }
}

fn checked(frame: Bytes) -> Result<Bytes, LinkError> {
    if frame.len() > MAX_FRAME_LEN {
        return Err(LinkError::FrameTooLarge {
            len: frame.len(),
            max: MAX_FRAME_LEN,
        });
    }
    Ok(frame)
}

/// The writer task: outbox -> data channel, until the link ends or every sender is
/// gone. Closes the connection when the link has ended, so its sockets go at once.
async fn write_frames(shared: Arc<Shared>, mut queued: mpsc::Receiver<Outgoing>) {
    let mut ending = shared.connection.ending.subscribe();
    let mut pacing = match shared.connection.send_window {
        SendWindow::Paced(config) => Some(Pacing::new(config, shared.connection.native_peer)),
        // The channel's own send-buffer limit is the window.
        SendWindow::Fixed(_) => None,
    };
    loop {
        let outgoing = match queued.try_recv() {
            Ok(outgoing) => Some(outgoing),
            Err(mpsc::error::TryRecvError::Disconnected) => None,
            Err(mpsc::error::TryRecvError::Empty) => {
                // Nothing to send: what goes next measures this side's pace.
                let idle_since = tokio::time::Instant::now();
                if let Some(p) = &mut pacing {
                    p.pacer.idle();
                }
                let outgoing = tokio::select! {
                    biased;
                    outgoing = queued.recv() => outgoing,
                    reason = ended(&mut ending) => {
                        shared.shut(reason).await;
                        return;
                    }
                };
                if let Some(p) = &mut pacing {
                    p.idle += idle_since.elapsed();
                }
                outgoing
            }
        };
        if shared.close_reason().is_some() {
            if let Some(reason) = shared.close_reason() {
                shared.shut(reason).await;
            }
            return;
        }
        match outgoing {
            Some(Outgoing::Frame(frame)) => {
                if let Some(p) = &mut pacing {
                    tokio::select! {
                        () = p.wait_for_room(&shared, frame.len()) => {}
                        reason = ended(&mut ending) => {
                            shared.shut(reason).await;
                            return;
                        }
                    }
                }
                let len = frame.len();
                let sent = tokio::select! {
                    sent = shared.channel.send(BytesMut::from(frame)) => sent,
                    reason = ended(&mut ending) => {
                        shared.shut(reason).await;
                        return;
                    }
                };
                if let Err(error) = sent {
                    shared.shut(LinkClosed::SendFailed(error.to_string())).await;
                    return;
                }
                if let Some(p) = &mut pacing {
                    p.sent(len);
                }
            }
            Some(Outgoing::Close(done)) => {
                flush(&shared).await;
                shared.shut(LinkClosed::ClosedHere).await;
                let _ = done.send(());
                return;
            }
            // Every sender is gone; the receiver (if any) keeps the connection.
            None => return,
        }
    }
}

/// A paced link's writer state: the [`Pacer`] and what it is fed.
struct Pacing {
    pacer: Pacer,
    start: tokio::time::Instant,
    /// Bytes handed to the channel in all.
    sent: u64,
    next_rtt: tokio::time::Instant,
    /// `sent`, and when (since `start`), at the last round-trip measure.
    sent_at_measure: (u64, Duration),
    /// Time spent waiting for frames, and for room (figures for the log).
    idle: Duration,
    held: Duration,
    /// The channel's buffered-amount-low threshold as last set (the window).
    threshold: usize,
    path_rtt: PathRtt,
}

impl Pacing {
    fn new(config: PaceConfig, native_peer: bool) -> Pacing {
        let now = tokio::time::Instant::now();
        Pacing {
            pacer: Pacer::new(config),
            start: now,
            sent: 0,
            next_rtt: now,
            sent_at_measure: (0, Duration::ZERO),
            idle: Duration::ZERO,
            held: Duration::ZERO,
            threshold: 0,
            path_rtt: PathRtt::toward(native_peer),
        }
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Waits until a frame of `len` bytes fits the window and the pacing rate.
    /// Cancel-safe (nothing is committed until `sent`).
    async fn wait_for_room(&mut self, shared: &Shared, len: usize) {
        loop {
            if tokio::time::Instant::now() >= self.next_rtt {
                self.next_rtt = tokio::time::Instant::now() + RTT_EVERY;
                if let Some(rtt) = round_trip_of(shared.connection.pc.as_ref()).await {
                    let now = self.now();
                    self.pacer.round_trip(now, rtt);
                    let (sent_then, then) = self.sent_at_measure;
                    let seconds = now.saturating_sub(then).as_secs_f64().max(1e-3);
                    let sent_per_s = self.sent.saturating_sub(sent_then) as f64 / seconds;
                    self.sent_at_measure = (self.sent, now);
                    shared
                        .connection
                        .pc
                        .set_receive_coalescing(self.path_rtt.measured(rtt, sent_per_s));
                }
                tracing::debug!(
                    rate = self.pacer.bottleneck_rate(),
                    rtt_us = self.pacer.rtt().as_micros() as u64,
                    window = self.pacer.window(),
                    starting = self.pacer.starting(),
                    sent = self.sent,
                    idle_ms = self.idle.as_millis() as u64,
                    held_ms = self.held.as_millis() as u64,
                    "pacing"
                );
                self.idle = Duration::ZERO;
                self.held = Duration::ZERO;
            }
            // Set before looking, so an acknowledgement that makes room after
            // the look still wakes the wait below.
            let window = self.pacer.window();
            if window != self.threshold {
                let threshold = u32::try_from(window).unwrap_or(u32::MAX);
                if shared
                    .channel
                    .set_buffered_amount_low_threshold(threshold)
                    .await
                    .is_ok()
                {
                    self.threshold = window;
                }
            }
            let outstanding = shared.channel.outstanding_bytes().await.unwrap_or(0) as u64;
            let now = self.now();
            self.pacer
                .delivered(now, self.sent.saturating_sub(outstanding), false);
            // A frame goes while less than the window is unacknowledged (so at
            // most a window and a frame are): a window smaller than a frame must
            // not leave a single frame in flight, whose last packets the other
            // side acknowledges only after its delayed-ack timer (200 ms).
            let room = (outstanding as usize) < self.pacer.window();
            let at = self.pacer.ready_at(now, len);
            if room && at <= now {
                return;
            }
            let t0 = tokio::time::Instant::now();
            if room {
                tokio::time::sleep((at - now).max(WINDOW_POLL)).await;
            } else {
                tokio::select! {
                    () = shared.room.notified() => {}
                    () = tokio::time::sleep(WINDOW_POLL) => {}
                }
            }
            self.held += t0.elapsed();
        }
    }

    fn sent(&mut self, len: usize) {
        let now = self.now();
        self.pacer.sent(now, len);
        self.sent += len as u64;
    }
}

/// Waits until everything handed to the channel is acknowledged, at most
/// [`CLOSE_FLUSH_TIMEOUT`].
async fn flush(shared: &Shared) {
    let deadline = tokio::time::Instant::now() + CLOSE_FLUSH_TIMEOUT;
    while tokio::time::Instant::now() < deadline {
        match shared.channel.outstanding_bytes().await {
            Ok(0) | Err(_) => return,
            Ok(_) => tokio::time::sleep(FLUSH_POLL).await,
        }
        if shared.close_reason().is_some() {
            return;
        }
    }
}

/// The sending half of a [`DataLink`] as the drive loop uses it: waits for room
/// (an owned place in the outbox), then queues the frame in it.
pub struct DataLinkSender {
    sender: LinkSender,
    permit: Option<mpsc::OwnedPermit<Outgoing>>,
}

impl std::fmt::Debug for DataLinkSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataLinkSender")
            .field("sender", &self.sender)
            .finish_non_exhaustive()
    }
}

fn link_closed(reason: Option<LinkClosed>) -> LinkClosed {
    reason.unwrap_or(LinkClosed::ConnectionClosed)
}

impl crate::drive::FrameSender for DataLinkSender {
    async fn ready(&mut self) -> Result<(), LinkClosed> {
        if self.permit.is_none() {
            if let Some(reason) = self.sender.close_reason() {
                return Err(link_closed(Some(reason)));
            }
            let permit = self
                .sender
                .outbox
                .clone()
                .reserve_owned()
                .await
                .map_err(|_| link_closed(self.sender.close_reason()))?;
            self.permit = Some(permit);
        }
        Ok(())
    }

    fn send(&mut self, frame: Bytes) -> Result<(), LinkClosed> {
        let frame = checked(frame).map_err(|e| LinkClosed::SendFailed(e.to_string()))?;
        if let Some(reason) = self.sender.close_reason() {
            return Err(link_closed(Some(reason)));
        }
        match self.permit.take() {
            Some(p) => {
                p.send(Outgoing::Frame(frame));
                Ok(())
            }
            None => self
                .sender
                .outbox
                .try_send(Outgoing::Frame(frame))
                .map_err(|_| link_closed(self.sender.close_reason())),
        }
    }

    async fn close(self) {
        drop(self.permit);
        self.sender.close().await;
    }
}

impl crate::drive::FrameReceiver for LinkReceiver {
    async fn recv(&mut self) -> Option<Bytes> {
        LinkReceiver::recv(self).await
    }

    fn closed_reason(&self) -> LinkClosed {
        link_closed(self.close_reason())
    }
}

impl crate::drive::FrameLink for DataLink {
    type Sender = DataLinkSender;
    type Receiver = LinkReceiver;
    fn split(self) -> (DataLinkSender, LinkReceiver) {
        let (sender, receiver) = DataLink::split(self);
        (
            DataLinkSender {
                sender,
                permit: None,
            },
            receiver,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_path_never_lets_datagrams_gather_and_a_long_one_does() {
        // One host and a LAN: every wait would add to a round trip of a millisecond or less.
        assert_eq!(
            receive_coalescing(Duration::from_micros(200)),
            Duration::ZERO
        );
        assert_eq!(receive_coalescing(Duration::from_millis(5)), Duration::ZERO);
        // 20 ms and more: a millisecond is a twentieth of the round trip at most.
        assert_eq!(
            receive_coalescing(Duration::from_millis(10)),
            RECEIVE_COALESCING
        );
        assert_eq!(
            receive_coalescing(Duration::from_millis(100)),
            RECEIVE_COALESCING
        );
        assert!(RECEIVE_COALESCING * 10 <= COALESCE_FROM_RTT);
    }

    /// A link sending bulk: 10 MB/s.
    const SENDING: f64 = 10e6;

    #[test]
    fn a_short_path_measured_long_under_load_lets_nothing_gather() {
        let mut path = PathRtt::toward(false);
        assert_eq!(
            path.measured(Duration::from_micros(600), SENDING),
            Duration::ZERO
        );
        // Chromium busy receiving: ICE's figure counts its queues.
        assert_eq!(
            path.measured(Duration::from_millis(87), SENDING),
            Duration::ZERO
        );
        let mut far = PathRtt::toward(true);
        assert_eq!(
            far.measured(Duration::from_millis(20), SENDING),
            RECEIVE_COALESCING
        );
        assert_eq!(
            far.measured(Duration::from_millis(45), SENDING),
            RECEIVE_COALESCING
        );
    }

    /// Regression: the sharer's link to a page that adds a file sends only
    /// acknowledgements, and gathering what arrived held Chromium's upload
    /// across 20 ms to 1.1-1.4 MB/s (12.4-15 read at once).
    #[test]
    fn a_link_to_a_browser_that_mostly_receives_reads_what_arrives_at_once() {
        let mut page = PathRtt::toward(false);
        assert_eq!(
            page.measured(Duration::from_millis(20), SENDING),
            RECEIVE_COALESCING
        );
        // Acknowledging an upload: some hundreds of small frames a second.
        assert_eq!(
            page.measured(Duration::from_millis(20), 40e3),
            Duration::ZERO
        );
        assert_eq!(
            page.measured(Duration::from_millis(20), 0.0),
            Duration::ZERO
        );
        // Sending bulk again.
        assert_eq!(
            page.measured(Duration::from_millis(20), SENDING),
            RECEIVE_COALESCING
        );
        // A native peer gathers whichever way the bytes go (its sender is not
        // held back, and a receiver is woken by every packet otherwise).
        let mut native = PathRtt::toward(true);
        assert_eq!(
            native.measured(Duration::from_millis(20), 0.0),
            RECEIVE_COALESCING
        );
    }
}
