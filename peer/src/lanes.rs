//! Lanes: one session's read chunks over several peer connections (the wire
//! side, and why, is [`linkfs_proto::lane`]).
//!
//! ```text
//! sharer                                        visitor
//!  a session's link: LaneOffer ---------------> LanedReceiver takes it out of the stream;
//!                                               on a long path (round trip >= LANE_MIN_RTT)
//!                                               whose one link moves a bulk read slowly
//!                                               (under LANE_BELOW_RATE), it connects more
//!                                               links in steps while they add up, at most
//!                                               `lanes`, 8 at a time (all of it decided by
//!                                               core::lanes::LaneSet; this half connects
//!                                               and reads what it says)
//!  a link whose first frame is LaneJoin <------ LaneJoin {token}, on each
//!  LaneBoard: token -> that session's LanedSender
//!  LanedSender: a long read's chunk (bulk)      LanedReceiver: the frames of every link,
//!  goes on whichever lane has room first (the    as one stream
//!  session's own link only until a lane
//!  joined); every other frame, a small file's
//!  chunks too, on the session's own link, in
//!  order
//! ```
//!
//! Only `ReadChunk` frames travel down a lane and `UploadChunk` frames up
//! one, and a chunk names its read or upload, offset and hash: the receiving
//! session takes chunks in any order (the sharer's holds an upload's chunks
//! that came early, within its window, and writes them in order), so the
//! sessions on both sides know nothing of lanes (each only marks which
//! chunks are bulk: a long read's on the sharer's side, an upload's on the
//! visitor's).
//!
//! Uploads the same way round: the visitor's [`LanedSender`] puts its upload
//! chunks on its lanes once one joined (its receiving half hands each lane's
//! sending half over as it opens); the sharer's [`hold_lane`] hands what comes
//! up a lane to the session's receiving half ([`WithLaneUploads`], at most
//! [`UP_FRAMES`] waiting). The gate opens lanes for a slow upload as for a
//! slow read, measuring the bytes the sharer acknowledges. Once a lane joined, bulk stays off the
//! session's own link: a link is one ordered stream, so a frame behind a lost
//! packet waits for its repair, and on a lossy path with bulk on it a small
//! file's first byte waited 145 ms p50 where the path takes 45. What it costs: a handshake
//! per lane, once per link, off the path of any read; memory for a peer
//! connection per lane on both sides. Not where one association already
//! fills the path: on one host or a LAN (a round trip under [`LANE_MIN_RTT`]),
//! or where the session's own link moves a bulk read at [`LANE_BELOW_RATE`] or
//! more (there more connections only overflow the bottleneck's queue).
//!
//! Bounds: a sharer takes at most [`MAX_LANES`] per session (and every lane
//! is a visitor slot, under `--max-visitors`, until it joins); a visitor opens
//! at most what it was offered and what it asked for, connecting
//! [`LANES_CONNECTING_AT_ONCE`] at a time.
//!
//! Failure: a lane that ends takes the visitor's whole link with it, after
//! [`LANE_END_GRACE`] for the session link's own end (a goodbye) to arrive
//! first: the chunks the lane carried are lost, and the visit reconnects and
//! asks again for every byte it has not delivered (as after any lost link).
//! On the sharer's side a lane that cannot send is dropped; the visitor sees
//! it end. A lane whose token names no live session is closed at once.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::{join_all, select_all};
use linkfs_proto::{LaneOffer, LaneToken};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::drive::{FrameLink, FrameReceiver, FrameSender, LinkClosed};

use linkfs_core::Millis;
pub use linkfs_core::lanes::{
    FIRST_LANES, LANE_AFTER_BYTES, LANE_BELOW_RATE, LANE_END_GRACE, LANE_MIN_RTT,
    LANE_SAMPLE_BYTES, LANE_SAMPLE_TIME, LANES_CONNECTING_AT_ONCE, MAX_LANES,
};
use linkfs_core::lanes::{FrameIs, LaneDo, LaneNo, LaneSet, lane_may_carry_up};

type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

// ---------------------------------------------------------------- sharer side

struct Door<S> {
    joiner: mpsc::Sender<S>,
    /// Where its lanes' upload chunks go (the session's receiving half).
    up: mpsc::Sender<Bytes>,
    over: CancellationToken,
    /// Lanes this session may still take.
    left: u8,
}

/// The sharer's sessions that take lanes, by token. Cloning shares it.
pub struct LaneBoard<S> {
    doors: Arc<Mutex<HashMap<LaneToken, Door<S>>>>,
}

impl<S> Clone for LaneBoard<S> {
    fn clone(&self) -> Self {
        LaneBoard {
            doors: self.doors.clone(),
        }
    }
}

impl<S> Default for LaneBoard<S> {
    fn default() -> Self {
        LaneBoard {
            doors: Arc::default(),
        }
    }
}

impl<S> std::fmt::Debug for LaneBoard<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let open = self.doors.lock().map(|d| d.len()).unwrap_or(0);
        f.debug_struct("LaneBoard").field("open", &open).finish()
    }
}

/// A lane that found its session: hand the lane's sending half to `joiner`,
/// the upload chunks that come on it to `up`; `over` fires when the session
/// ends.
pub struct LaneAdmission<S> {
    pub joiner: mpsc::Sender<S>,
    pub up: mpsc::Sender<Bytes>,
    pub over: CancellationToken,
}

/// Upload chunks from a session's lanes that wait for the session: at most
/// this many frames (each at most `MAX_FRAME_LEN`, so under 4 MiB). A full
/// queue stops reading the lanes, and their flow control the visitor.
pub const UP_FRAMES: usize = 64;

impl<S: Send + 'static> LaneBoard<S> {
    pub fn new() -> Self {
        Self::default()
    }

    /// A session takes up to `lanes` lanes from now on, until the returned
    /// door is dropped; the offer tells its visitor how to join.
    pub fn open(&self, token: LaneToken, lanes: u8) -> (LaneOffer, LaneDoor<S>) {
        let (joiner, joined) = mpsc::channel(usize::from(lanes.max(1)));
        let (up, uploads) = mpsc::channel(UP_FRAMES);
        let over = CancellationToken::new();
        if let Ok(mut doors) = self.doors.lock() {
            doors.insert(
                token,
                Door {
                    joiner,
                    up,
                    over: over.clone(),
                    left: lanes,
                },
            );
        }
        let door = LaneDoor {
            doors: self.doors.clone(),
            token,
            joined,
            uploads: Some(uploads),
            _over: over.drop_guard(),
        };
        (LaneOffer { token, lanes }, door)
    }

    /// The session a lane names, if it is live and takes one more.
    pub fn admit(&self, token: &LaneToken) -> Option<LaneAdmission<S>> {
        let mut doors = self.doors.lock().ok()?;
        let door = doors.get_mut(token)?;
        if door.left == 0 {
            return None;
        }
        door.left -= 1;
        Some(LaneAdmission {
            joiner: door.joiner.clone(),
            up: door.up.clone(),
            over: door.over.clone(),
        })
    }
}

/// A session's registration on the [`LaneBoard`]: lanes arrive through it;
/// dropping it closes the door and ends the session's lanes.
pub struct LaneDoor<S> {
    doors: Arc<Mutex<HashMap<LaneToken, Door<S>>>>,
    token: LaneToken,
    joined: mpsc::Receiver<S>,
    uploads: Option<mpsc::Receiver<Bytes>>,
    _over: DropGuard,
}

impl<S> LaneDoor<S> {
    /// The upload chunks the session's lanes carry, for its receiving half
    /// ([`WithLaneUploads`]); once.
    pub fn take_uploads(&mut self) -> Option<mpsc::Receiver<Bytes>> {
        self.uploads.take()
    }
}

impl<S> Drop for LaneDoor<S> {
    fn drop(&mut self) {
        if let Ok(mut doors) = self.doors.lock() {
            doors.remove(&self.token);
        }
    }
}

/// Serves a lane the sharer admitted: hands its sending half to the session,
/// its upload chunks to the session's receiving half (anything else that
/// comes on it is dropped), and holds it open until it ends, the session ends
/// or `cancel` fires.
pub async fn hold_lane<L: FrameLink>(
    link: L,
    admission: LaneAdmission<L::Sender>,
    cancel: CancellationToken,
) -> Option<LinkClosed> {
    let (tx, mut rx) = link.split();
    if admission.joiner.send(tx).await.is_err() {
        return None;
    }
    let up = admission.up;
    let carry = async {
        while let Some(frame) = rx.recv().await {
            if !lane_may_carry_up(&frame) {
                tracing::debug!("a lane sent what lanes do not carry: dropped");
                continue;
            }
            // Nobody takes them (a session whose link takes no files, or one
            // ending): dropped, as on the session's own link.
            let _ = up.send(frame).await;
        }
    };
    tokio::select! {
        () = carry => Some(rx.closed_reason()),
        () = admission.over.cancelled() => None,
        () = cancel.cancelled() => None,
    }
}

/// A session's receiving half with the upload chunks its lanes carry: the
/// frames of its own link, and those. It ends when its own link does.
pub struct WithLaneUploads<R> {
    primary: R,
    uploads: Option<mpsc::Receiver<Bytes>>,
}

impl<R: FrameReceiver> WithLaneUploads<R> {
    pub fn new(primary: R, uploads: Option<mpsc::Receiver<Bytes>>) -> Self {
        WithLaneUploads { primary, uploads }
    }
}

impl<R: FrameReceiver> FrameReceiver for WithLaneUploads<R> {
    async fn recv(&mut self) -> Option<Bytes> {
        loop {
            let Some(uploads) = self.uploads.as_mut() else {
                return self.primary.recv().await;
            };
            tokio::select! {
                frame = self.primary.recv() => return frame,
                up = uploads.recv() => match up {
                    Some(frame) => return Some(frame),
                    None => self.uploads = None,
                },
            }
        }
    }

    fn closed_reason(&self) -> LinkClosed {
        self.primary.closed_reason()
    }
}

/// Where lanes come to a [`LanedSender`] from.
enum Joining<S> {
    /// The sharer's door: visitors' lanes join through the board.
    Door(LaneDoor<S>),
    /// A visitor's own lanes, as its receiving half connects them.
    Own(mpsc::Receiver<S>),
}

impl<S> Joining<S> {
    fn joined(&mut self) -> &mut mpsc::Receiver<S> {
        match self {
            Joining::Door(door) => &mut door.joined,
            Joining::Own(joined) => joined,
        }
    }
}

/// The sending half of a session's link with its lanes: bulk (a long read's
/// chunks on the sharer's side, upload chunks on a visitor's) goes on the
/// lanes once one joined, everything else on the session's own link. See the
/// module docs.
pub struct LanedSender<S> {
    primary: S,
    lanes: Vec<S>,
    joining: Option<Joining<S>>,
    /// The offer, until it went out (first, on the session's link).
    offer: Option<Bytes>,
    /// Where the next `send` goes: a lane, or the session's link.
    pick: Option<usize>,
}

impl<S: FrameSender> LanedSender<S> {
    /// `primary` alone, or with lanes through `door` (its offer is sent first).
    pub fn new(primary: S, lanes: Option<(LaneOffer, LaneDoor<S>)>) -> Self {
        let (offer, joining) = match lanes {
            Some((offer, door)) => (Some(Bytes::from(offer.encode())), Some(Joining::Door(door))),
            None => (None, None),
        };
        LanedSender {
            primary,
            lanes: Vec::new(),
            joining,
            offer,
            pick: None,
        }
    }

    /// A visitor's `primary`, with the lanes its receiving half connects
    /// sent to it through `joined`.
    pub fn joined_by(primary: S, joined: mpsc::Receiver<S>) -> Self {
        LanedSender {
            primary,
            lanes: Vec::new(),
            joining: Some(Joining::Own(joined)),
            offer: None,
            pick: None,
        }
    }

    /// Lanes joined so far and still open.
    pub fn lanes(&self) -> usize {
        self.lanes.len()
    }

    fn take_joined(&mut self) {
        if let Some(joining) = self.joining.as_mut() {
            while let Ok(lane) = joining.joined().try_recv() {
                self.lanes.push(lane);
            }
        }
    }

    async fn send_offer(&mut self) -> Result<(), LinkClosed> {
        if let Some(offer) = self.offer.take() {
            self.primary.ready().await?;
            self.primary.send(offer)?;
        }
        Ok(())
    }
}

enum Ready<S> {
    Link(usize, Result<(), LinkClosed>),
    Joined(S),
    DoorShut,
}

impl<S: FrameSender> FrameSender for LanedSender<S> {
    async fn ready(&mut self) -> Result<(), LinkClosed> {
        self.ready_for(false).await
    }

    async fn ready_for(&mut self, bulk: bool) -> Result<(), LinkClosed> {
        self.pick = None;
        self.send_offer().await?;
        self.take_joined();
        if !bulk || (self.lanes.is_empty() && self.joining.is_none()) {
            return self.primary.ready().await;
        }
        loop {
            let ready = {
                let (primary, lanes, joining) =
                    (&mut self.primary, &mut self.lanes, &mut self.joining);
                let mut waits: Vec<Boxed<'_, Ready<S>>> = Vec::with_capacity(lanes.len() + 2);
                // The session's own link takes bulk only while no lane joined.
                if lanes.is_empty() {
                    waits.push(Box::pin(
                        async move { Ready::Link(0, primary.ready().await) },
                    ));
                }
                for (i, lane) in lanes.iter_mut().enumerate() {
                    waits.push(Box::pin(
                        async move { Ready::Link(i + 1, lane.ready().await) },
                    ));
                }
                if let Some(joining) = joining.as_mut() {
                    waits.push(Box::pin(async move {
                        match joining.joined().recv().await {
                            Some(lane) => Ready::Joined(lane),
                            None => Ready::DoorShut,
                        }
                    }));
                }
                select_all(waits).await.0
            };
            match ready {
                Ready::Link(0, result) => return result,
                Ready::Link(i, Ok(())) => {
                    self.pick = Some(i - 1);
                    return Ok(());
                }
                Ready::Link(i, Err(reason)) => {
                    tracing::debug!(%reason, "a lane ended; its chunks go on the others");
                    self.lanes.remove(i - 1);
                }
                Ready::Joined(lane) => self.lanes.push(lane),
                Ready::DoorShut => self.joining = None,
            }
            if self.lanes.is_empty() && self.joining.is_none() {
                return self.primary.ready().await;
            }
        }
    }

    fn send(&mut self, frame: Bytes) -> Result<(), LinkClosed> {
        match self.pick.take() {
            Some(i) if i < self.lanes.len() => {
                if let Err(reason) = self.lanes[i].send(frame) {
                    // Lost with the lane; the visitor asks again for it.
                    tracing::debug!(%reason, "a lane failed to take a chunk");
                    self.lanes.remove(i);
                }
                Ok(())
            }
            _ => self.primary.send(frame),
        }
    }

    async fn close(self) {
        // The door first: no lane joins a session that is closing.
        drop(self.joining);
        join_all(self.lanes.into_iter().map(|l| l.close())).await;
        self.primary.close().await;
    }
}

// --------------------------------------------------------------- visitor side

/// Why a lane's link could not be made: the connecting side's own error
/// (the visitor's [`VisitError`](crate::visit::VisitError)), in its words.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct LaneConnectError(Box<dyn std::error::Error + Send + Sync>);

impl LaneConnectError {
    pub fn new(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        LaneConnectError(Box::new(e))
    }
}

/// How a visitor makes its lanes.
pub struct LaneMaker<L> {
    /// One more link to the same sharer (its handshake through the relay).
    pub connect: Arc<dyn Fn() -> Boxed<'static, Result<L, LaneConnectError>> + Send + Sync>,
    /// The session link's round trip, as ICE measured it.
    pub round_trip: Arc<dyn Fn() -> Boxed<'static, Option<Duration>> + Send + Sync>,
    /// Most lanes to open (fewer if the sharer offers fewer; 0: none).
    pub lanes: u8,
    /// Where the receiving half says how many lanes are open now, for readers
    /// that fetch ahead by them (the mount).
    pub open: LanesOpen,
}

/// How many lanes a visitor's link has open now (0 before any opened, and
/// again from a new link's start).
pub type LanesOpen = Arc<AtomicUsize>;

impl<L> Clone for LaneMaker<L> {
    fn clone(&self) -> Self {
        LaneMaker {
            connect: self.connect.clone(),
            round_trip: self.round_trip.clone(),
            lanes: self.lanes,
            open: self.open.clone(),
        }
    }
}

/// A visitor's session link that opens lanes when they help: a
/// [`FrameLink`] whose receiving half reads every lane too.
pub struct LanedLink<L> {
    link: L,
    maker: Option<LaneMaker<L>>,
}

impl<L: FrameLink> LanedLink<L> {
    /// `link`, with lanes from `maker` (none without one).
    pub fn new(link: L, maker: Option<LaneMaker<L>>) -> Self {
        LanedLink { link, maker }
    }

    pub fn link(&self) -> &L {
        &self.link
    }
}

impl<L: FrameLink> FrameLink for LanedLink<L> {
    type Sender = LanedSender<L::Sender>;
    type Receiver = LanedReceiver<L>;

    fn split(self) -> (LanedSender<L::Sender>, LanedReceiver<L>) {
        let (tx, rx) = self.link.split();
        // Each lane's sending half goes to the sending half as it opens (at
        // most MAX_LANES of them, ever).
        let (hand_over, joined) = mpsc::channel(usize::from(MAX_LANES) + 1);
        // At most one round trip and LANES_CONNECTING_AT_ONCE connects are
        // outstanding (the set's bounds).
        let (told, news) = mpsc::channel(LANES_CONNECTING_AT_ONCE + 1);
        let opening = CancellationToken::new();
        (
            LanedSender::joined_by(tx, joined),
            LanedReceiver {
                primary: rx,
                lanes: Vec::new(),
                hand_over,
                news,
                told,
                set: LaneSet::new(self.maker.as_ref().map_or(0, |m| m.lanes)).with_uploads(),
                clock: tokio::time::Instant::now(),
                maker: self.maker,
                opening: opening.clone(),
                _stop_opening: opening.drop_guard(),
                lane_end: None,
                ended: None,
                turn: 0,
            },
        )
    }
}

/// What the tasks this half started report back.
enum LaneNews<L: FrameLink> {
    RoundTrip(Option<Duration>),
    /// A lane's link opened and took its join frame (or did not).
    Connected(LaneNo, Option<(L::Sender, L::Receiver)>),
}

/// The receiving half of a [`LanedLink`]: a shell for [`LaneSet`], which
/// decides everything about lanes; this half connects and reads them.
pub struct LanedReceiver<L: FrameLink> {
    primary: L::Receiver,
    /// Open lanes.
    lanes: Vec<(LaneNo, L::Receiver)>,
    /// Their sending halves go to the link's sending half (uploads go on them).
    hand_over: mpsc::Sender<L::Sender>,
    news: mpsc::Receiver<LaneNews<L>>,
    /// A clone goes to each task.
    told: mpsc::Sender<LaneNews<L>>,
    maker: Option<LaneMaker<L>>,
    set: LaneSet,
    /// The set's clock starts with the link.
    clock: tokio::time::Instant,
    /// Stops the tasks...
    opening: CancellationToken,
    /// ...when this half goes.
    _stop_opening: DropGuard,
    /// Why the first lane that ended did (the link's reason if it ends for it).
    lane_end: Option<LinkClosed>,
    ended: Option<LinkClosed>,
    /// Which link is looked at first, in turn (a busy one must not starve
    /// the others: their windows would close).
    turn: usize,
}

enum Got<L: FrameLink> {
    Primary(Option<Bytes>),
    Lane(usize, Option<Bytes>),
    News(LaneNews<L>),
    Timeout,
}

impl<L: FrameLink> LanedReceiver<L> {
    /// Lanes open now.
    pub fn lanes(&self) -> usize {
        self.lanes.len()
    }

    fn now(&self) -> Millis {
        Millis(self.clock.elapsed().as_millis() as u64)
    }

    /// Carries out what the set says; false once it ended the link.
    fn obey(&mut self) -> bool {
        if let Some(maker) = &self.maker {
            maker.open.store(self.set.open(), Ordering::Relaxed);
        }
        while let Some(todo) = self.set.poll_output() {
            match (todo, self.maker.clone()) {
                (LaneDo::EndLink, _) => {
                    self.ended = Some(self.lane_end.take().unwrap_or(LinkClosed::ConnectionLost));
                    return false;
                }
                // Without a maker the set wants no lanes: it never asks these.
                (_, None) => {}
                (LaneDo::MeasureRoundTrip, Some(maker)) => self.measure(maker),
                (LaneDo::Connect { lane, join }, Some(maker)) => {
                    tracing::debug!(?lane, at = ?self.clock.elapsed(), "a lane connects");
                    self.connect(maker, lane, Bytes::from(join))
                }
            }
        }
        true
    }

    fn spawn(&self, task: impl Future<Output = LaneNews<L>> + Send + 'static) {
        let (told, cancel) = (self.told.clone(), self.opening.clone());
        tokio::spawn(async move {
            tokio::select! {
                news = task => { let _ = told.send(news).await; }
                () = cancel.cancelled() => {}
            }
        });
    }

    fn measure(&self, maker: LaneMaker<L>) {
        self.spawn(async move { LaneNews::RoundTrip((maker.round_trip)().await) });
    }

    fn connect(&self, maker: LaneMaker<L>, lane: LaneNo, join: Bytes) {
        self.spawn(async move {
            let link = match (maker.connect)().await {
                Ok(link) => link,
                Err(why) => {
                    tracing::debug!(%why, "a lane could not connect");
                    return LaneNews::Connected(lane, None);
                }
            };
            let (mut tx, rx) = link.split();
            let sent = match tx.ready().await {
                Ok(()) => tx.send(join),
                Err(e) => Err(e),
            };
            match sent {
                Ok(()) => LaneNews::Connected(lane, Some((tx, rx))),
                Err(reason) => {
                    tracing::debug!(%reason, "a lane closed before it joined");
                    LaneNews::Connected(lane, None)
                }
            }
        });
    }
}

impl<L: FrameLink> FrameReceiver for LanedReceiver<L> {
    async fn recv(&mut self) -> Option<Bytes> {
        loop {
            if self.ended.is_some() {
                return None;
            }
            let due = self
                .set
                .poll_timeout()
                .map(|t| self.clock + Duration::from_millis(t.0));
            let turn = self.turn;
            self.turn = self.turn.wrapping_add(1);
            let got = {
                let (primary, lanes, news) = (&mut self.primary, &mut self.lanes, &mut self.news);
                let mut waits: Vec<Boxed<'_, Got<L>>> = Vec::with_capacity(lanes.len() + 3);
                waits.push(Box::pin(async move { Got::Primary(primary.recv().await) }));
                for (i, (_, lane)) in lanes.iter_mut().enumerate() {
                    waits.push(Box::pin(async move { Got::Lane(i, lane.recv().await) }));
                }
                // Never ends: this half keeps a sender.
                waits.push(Box::pin(async move {
                    match news.recv().await {
                        Some(n) => Got::News(n),
                        None => std::future::pending().await,
                    }
                }));
                if let Some(t) = due {
                    waits.push(Box::pin(async move {
                        tokio::time::sleep_until(t).await;
                        Got::Timeout
                    }));
                }
                let n = waits.len();
                waits.rotate_left(turn % n);
                select_all(waits).await.0
            };
            let now = self.now();
            let deliver = match got {
                Got::Primary(Some(frame)) => {
                    match self.set.on_session_frame(now, &frame, frame.len()) {
                        FrameIs::Deliver => Some(frame),
                        FrameIs::Drop => None,
                    }
                }
                Got::Primary(None) => {
                    self.ended = Some(self.primary.closed_reason());
                    return None;
                }
                Got::Lane(i, Some(frame)) => {
                    match self
                        .set
                        .on_lane_frame(now, self.lanes[i].0, &frame, frame.len())
                    {
                        FrameIs::Deliver => Some(frame),
                        FrameIs::Drop => None,
                    }
                }
                Got::Lane(i, None) => {
                    let (lane, rx) = self.lanes.remove(i);
                    let reason = rx.closed_reason();
                    tracing::debug!(%reason, "a lane ended; the link follows unless the sharer says why");
                    self.lane_end.get_or_insert(reason);
                    self.set.lane_closed(now, lane);
                    None
                }
                Got::News(LaneNews::RoundTrip(rtt)) => {
                    tracing::debug!(?rtt, "the session link's round trip, for lanes");
                    self.set.round_trip(now, rtt);
                    None
                }
                Got::News(LaneNews::Connected(lane, Some((tx, rx)))) => {
                    tracing::debug!(?lane, at = ?self.clock.elapsed(), "a lane joined");
                    if self.hand_over.try_send(tx).is_err() {
                        tracing::debug!("a lane's sending half had nowhere to go: it only reads");
                    }
                    self.lanes.push((lane, rx));
                    self.set.lane_opened(now, lane);
                    None
                }
                Got::News(LaneNews::Connected(lane, None)) => {
                    self.set.lane_closed(now, lane);
                    None
                }
                Got::Timeout => {
                    self.set.handle_timeout(now);
                    None
                }
            };
            if !self.obey() {
                return None;
            }
            if deliver.is_some() {
                return deliver;
            }
        }
    }

    fn closed_reason(&self) -> LinkClosed {
        match &self.ended {
            Some(reason) => reason.clone(),
            None => self.primary.closed_reason(),
        }
    }
}
