//! Serving one receiver: [`ServedSession`], the [`SenderSession`] as a
//! [`DrivenSession`] of the drive loop, with file IO beside it.
//!
//! File reads run on a reader thread of the session's own, in the order the
//! session hands them out (at most `max_pending_io` and the short reads' extra
//! at a time), through its [`OpenFiles`]. One thread that goes from read to
//! read, rather than a blocking-pool task woken for each: over 100,000 files of
//! 1 KiB the sharer spent more of its CPU waking threads than reading
//! (docs/benchmarks.md, "Many small files"). When
//! the share index grows (the walk, or later a change), the session is woken to
//! cut new batches.

use std::sync::{Arc, RwLock};

use bytes::Bytes;

use linkfs_core::{
    IoFailure, Millis, ReadIo, SenderConfig, SenderOutput, SenderSession, SenderStats,
    SessionError, ShareIndex,
};
use linkfs_proto::{GoodbyeCode, LaneJoin, LaneToken, ReadErrorCode};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::disk::{OpenFiles, ShareRoot};
use crate::drive::{
    Clock, Drive, DrivenSession, FrameLink, FrameReceiver, FrameSender, LinkClosed, drive,
};
use crate::lanes::{LaneBoard, LanedSender, MAX_LANES, WithLaneUploads, hold_lane};

/// Why serving one receiver ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServeEnd {
    /// The session ended by the protocol: the receiver said goodbye, or broke a rule.
    #[error("{0}")]
    Session(SessionError),
    /// The data link closed under the session.
    #[error("the link closed: {0}")]
    LinkClosed(LinkClosed),
    /// The sharer stopped sharing.
    #[error("the sharer stopped sharing")]
    Stopped,
    /// Its link was withdrawn or expired, or it was sent away: what it was told.
    #[error("told: {0}")]
    SentOff(String),
}

/// What a session ended with.
#[derive(Debug, Clone)]
pub struct ServeOutcome {
    pub end: ServeEnd,
    pub stats: SenderStats,
}

/// What every session shares.
#[derive(Clone, Debug)]
pub struct ServeContext {
    pub index: Arc<RwLock<ShareIndex>>,
    /// Bumped whenever the index grows or the walk finishes.
    pub index_changed: watch::Receiver<u64>,
    pub root: Arc<ShareRoot>,
    pub config: SenderConfig,
    pub cancel: CancellationToken,
    /// Bumped to drop every visitor's data link without a goodbye, as a
    /// network failure would (visitors reconnect and resume; for testing that).
    pub drop_links: Option<watch::Receiver<u64>>,
    /// What the visitor is told when `cancel` fires (set first; unset: the
    /// sharer stopped sharing).
    pub farewell: Farewell,
    /// The visitor's figures and activity log, if anyone watches.
    pub watch: Option<Arc<super::activity::VisitorWatch>>,
    /// Where the visitor's uploads go, if its link takes them.
    pub intake: Option<super::intake::UploadPlace>,
}

/// Why one visitor's session is being ended, told to it in its goodbye: its
/// link withdrawn or expired, or the sharer sent it away. Set once, before
/// the visitor's cancel token fires.
#[derive(Debug, Clone, Default)]
pub struct Farewell(Arc<std::sync::OnceLock<(GoodbyeCode, String)>>);

impl Farewell {
    /// Says why (the first reason given stays).
    pub fn set(&self, code: GoodbyeCode, words: String) {
        let _ = self.0.set((code, words));
    }

    /// Why, if it was said.
    pub fn get(&self) -> Option<&(GoodbyeCode, String)> {
        self.0.get()
    }
}

fn read_index(index: &RwLock<ShareIndex>) -> std::sync::RwLockReadGuard<'_, ShareIndex> {
    // A panic while holding the lock would poison it; the index itself is still
    // consistent (pushes are single calls), so keep serving.
    index
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

type IoDone = (ReadIo, Result<Vec<u8>, IoFailure>);

type UploadDone = (
    linkfs_proto::UploadId,
    linkfs_core::UploadResult,
    Option<super::intake::LandedFile>,
);

/// What wakes a served session besides frames and timers.
#[derive(Debug)]
pub enum ServeInput {
    Io(IoDone),
    Upload(UploadDone),
    IndexChanged,
    /// The index will not change any more (its feed is gone).
    IndexSettled,
    /// Drop the data link without a goodbye.
    DropLink,
}

/// One receiver's session on the sharer's side. See the module docs.
#[derive(Debug)]
pub struct ServedSession {
    session: SenderSession,
    index: Arc<RwLock<ShareIndex>>,
    index_changed: watch::Receiver<u64>,
    watching: bool,
    root: Arc<ShareRoot>,
    /// The reader thread's queue (started with the first read).
    reads: Option<std::sync::mpsc::Sender<ReadIo>>,
    io_tx: mpsc::Sender<IoDone>,
    io_rx: mpsc::Receiver<IoDone>,
    drop_links: Option<watch::Receiver<u64>>,
    farewell: Farewell,
    watch: Option<Arc<super::activity::VisitorWatch>>,
    end: Option<ServeEnd>,
    /// The upload worker (started with the first upload) and its answers.
    intake: Option<super::intake::UploadPlace>,
    upload_tx: Option<mpsc::UnboundedSender<linkfs_core::UploadIo>>,
    upload_done_tx: mpsc::UnboundedSender<UploadDone>,
    upload_done_rx: mpsc::UnboundedReceiver<UploadDone>,
}

impl ServedSession {
    pub fn new(ctx: &ServeContext) -> Self {
        let (io_tx, io_rx) = mpsc::channel(ctx.config.max_pending_io + 1);
        let (upload_done_tx, upload_done_rx) = mpsc::unbounded_channel();
        ServedSession {
            session: SenderSession::new(ctx.config.clone()),
            index: ctx.index.clone(),
            index_changed: ctx.index_changed.clone(),
            watching: true,
            root: ctx.root.clone(),
            reads: None,
            io_tx,
            io_rx,
            drop_links: ctx.drop_links.clone().map(|mut w| {
                w.mark_unchanged();
                w
            }),
            farewell: ctx.farewell.clone(),
            watch: ctx.watch.clone(),
            end: None,
            intake: ctx.intake.clone(),
            upload_tx: None,
            upload_done_tx,
            upload_done_rx,
        }
    }

    /// Hands a read to the reader thread (started on the first); the result
    /// comes back as an input.
    fn read(&mut self, io: ReadIo) {
        let reads = self.reads.get_or_insert_with(|| {
            let (tx, rx) = std::sync::mpsc::channel::<ReadIo>();
            let (root, io_tx) = (self.root.clone(), self.io_tx.clone());
            let started = std::thread::Builder::new()
                .name("linkfs-reads".into())
                .spawn(move || {
                    let mut files = OpenFiles::default();
                    // Ends when the session drops its sender, or stops listening.
                    while let Ok(io) = rx.recv() {
                        let result = files.read(&root, &io);
                        if io_tx.blocking_send((io, result)).is_err() {
                            break;
                        }
                    }
                });
            if let Err(e) = started {
                tracing::error!(error = %e, "cannot start a reader thread; reads fail");
            }
            tx
        });
        if let Err(std::sync::mpsc::SendError(io)) = reads.send(io) {
            // No reader thread: the read fails in words rather than hanging.
            self.reads = None;
            self.session.handle_io(
                &io,
                Err(IoFailure {
                    code: ReadErrorCode::Io,
                    message: "the sharer's file reader failed".into(),
                }),
            );
        }
    }

    /// Hands an upload step to the intake (started on the first); a link
    /// that takes no files refuses it.
    fn upload_step(&mut self, io: linkfs_core::UploadIo) {
        let upload = match &io {
            linkfs_core::UploadIo::Begin { upload, .. }
            | linkfs_core::UploadIo::Write { upload, .. }
            | linkfs_core::UploadIo::Finish { upload }
            | linkfs_core::UploadIo::Cancel { upload } => *upload,
        };
        if self.upload_tx.is_none()
            && let Some(place) = self.intake.clone()
        {
            self.upload_tx = Some(super::intake::start(place, self.upload_done_tx.clone()));
        }
        let sent = self
            .upload_tx
            .as_ref()
            .is_some_and(|tx| tx.send(io).is_ok());
        if !sent {
            self.session.handle_upload_io(
                upload,
                linkfs_core::UploadResult::Refused {
                    code: linkfs_proto::UploadRefusal::Failed,
                    message: "the sharer cannot take files on this link".into(),
                },
            );
        }
    }

    fn outcome(&mut self, end: ServeEnd) -> ServeOutcome {
        ServeOutcome {
            end,
            stats: self.session.stats(),
        }
    }
}

impl DrivenSession for ServedSession {
    type Input = ServeInput;
    type Outcome = ServeOutcome;

    fn handle_frame(&mut self, now: Millis, frame: &[u8]) {
        if let Err(e) = self
            .session
            .handle_frame(now, frame, &read_index(&self.index))
        {
            tracing::warn!(error = %e, "a receiver broke the protocol; its session ends");
        }
    }

    fn handle_timeout(&mut self, now: Millis) {
        self.session.handle_timeout(now);
    }

    async fn next_input(&mut self) -> ServeInput {
        let drop_link = async {
            match self.drop_links.as_mut() {
                Some(w) => match w.changed().await {
                    Ok(()) => ServeInput::DropLink,
                    Err(_) => std::future::pending().await,
                },
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            Some(done) = self.io_rx.recv() => ServeInput::Io(done),
            Some(done) = self.upload_done_rx.recv() => ServeInput::Upload(done),
            changed = self.index_changed.changed(), if self.watching => match changed {
                Ok(()) => ServeInput::IndexChanged,
                Err(_) => ServeInput::IndexSettled,
            },
            input = drop_link => input,
        }
    }

    fn handle_input(&mut self, _now: Millis, input: ServeInput) {
        match input {
            ServeInput::Io((io, result)) => {
                if let (Some(w), Ok(_)) = (&self.watch, &result) {
                    let ix = read_index(&self.index);
                    let size = ix.view(io.entry).map_or(0, |v| v.size);
                    w.served(io.entry, u64::from(io.len), size, || {
                        ix.relative_path(io.entry)
                            .map(|p| String::from_utf8_lossy(&p).into_owned())
                    });
                }
                self.session.handle_io(&io, result)
            }
            ServeInput::Upload((upload, result, landed)) => {
                if let (Some(w), Some(f)) = (&self.watch, landed) {
                    w.uploaded(&f.path, f.size);
                }
                self.session.handle_upload_io(upload, result);
            }
            ServeInput::IndexChanged => {}
            ServeInput::IndexSettled => self.watching = false,
            ServeInput::DropLink => {
                self.end
                    .get_or_insert(ServeEnd::LinkClosed(LinkClosed::DroppedOnRequest));
            }
        }
    }

    fn poll_output(&mut self, now: Millis, room: bool) -> Drive<ServeOutcome> {
        loop {
            if let Some(end) = self.end.clone() {
                return Drive::End(self.outcome(end));
            }
            let out = self
                .session
                .poll_output(now, &read_index(&self.index), room);
            match out {
                SenderOutput::Read(io) => self.read(io),
                SenderOutput::Upload(io) => self.upload_step(io),
                SenderOutput::Transmit(frame) => return Drive::Transmit(frame),
                SenderOutput::TransmitBulk(frame) => return Drive::TransmitBulk(frame),
                SenderOutput::Ended(why) => {
                    let end = match why {
                        Some(SessionError::ClosedHere(_)) => match self.farewell.get() {
                            Some((_, words)) => ServeEnd::SentOff(words.clone()),
                            None => ServeEnd::Stopped,
                        },
                        Some(e) => ServeEnd::Session(e),
                        None => ServeEnd::Stopped,
                    };
                    return Drive::End(self.outcome(end));
                }
                SenderOutput::Wait(at) => return Drive::Wait(at),
            }
        }
    }

    fn link_closed(&mut self, reason: LinkClosed) {
        self.end.get_or_insert(ServeEnd::LinkClosed(reason));
    }

    fn stop(&mut self) {
        match self.farewell.get() {
            Some((code, words)) => self.session.close_with(*code, words),
            None => self.session.close(STOPPED),
        }
    }

    fn gave_up(&mut self) -> ServeOutcome {
        self.outcome(ServeEnd::Stopped)
    }
}

/// What a stopping sharer tells its receivers.
const STOPPED: &str = "the sharer stopped sharing";

/// Serves one receiver over `link` until it leaves, the link drops or
/// `ctx.cancel` fires.
pub async fn serve(link: impl FrameLink, ctx: ServeContext) -> ServeOutcome {
    let mut session = ServedSession::new(&ctx);
    drive(&mut session, link, ctx.cancel.clone(), Clock::start()).await
}

/// What a visitor's link turned out to be.
#[derive(Debug)]
pub enum Served {
    /// A session (the visitor's own link), and how it ended.
    Session(ServeOutcome),
    /// A lane of another link's session ([`crate::lanes`]); why it ended,
    /// if it did before its session.
    Lane(Option<LinkClosed>),
}

/// Serves a data link whose first frame decides what it is: a lane of a
/// session on `board`, or a session of its own that offers lanes there. (The
/// share's visitors go through [`super::visitors`], where the share machine
/// decides between the first frame and the session.)
pub async fn serve_link<L: FrameLink>(
    link: L,
    ctx: ServeContext,
    board: Option<&LaneBoard<L::Sender>>,
) -> Served {
    let (tx, mut rx) = link.split();
    let first = tokio::select! {
        first = rx.recv() => first,
        () = ctx.cancel.cancelled() => None,
    };
    if let Some(join) = first.as_deref().and_then(lane_join) {
        return Served::Lane(serve_lane(tx, rx, &join, board, ctx.cancel.clone()).await);
    }
    Served::Session(serve_session(tx, rx, first, &ctx, board).await)
}

/// The lane a link's first frame asks to join, if it is a lane's.
pub fn lane_join(first: &[u8]) -> Option<LaneJoin> {
    LaneJoin::decode(first).ok().flatten()
}

/// Holds a lane `board` admits (or closes one that names no session taking
/// lanes there) until it ends: why it ended, if it did on its own.
pub async fn serve_lane<S: FrameSender, R: FrameReceiver>(
    tx: S,
    rx: R,
    join: &LaneJoin,
    board: Option<&LaneBoard<S>>,
    cancel: CancellationToken,
) -> Option<LinkClosed> {
    match board.and_then(|b| b.admit(&join.token)) {
        Some(admission) => hold_lane(Halves(tx, rx), admission, cancel).await,
        None => {
            tracing::debug!("a lane named no session that takes one: closed");
            tx.close().await;
            None
        }
    }
}

/// Serves one session over the link's halves, `first` being a frame it sent
/// already; it offers lanes on `board`.
pub async fn serve_session<S: FrameSender, R: FrameReceiver>(
    tx: S,
    rx: R,
    first: Option<Bytes>,
    ctx: &ServeContext,
    board: Option<&LaneBoard<S>>,
) -> ServeOutcome {
    let mut lanes = board.and_then(|b| {
        let token = crate::random::random_bytes::<16>().ok()?;
        Some(b.open(LaneToken(token), MAX_LANES))
    });
    // Upload chunks from lanes only where the link takes files: elsewhere
    // nothing waits for them (they are dropped at the lane).
    let uploads = lanes
        .as_mut()
        .and_then(|(_, door)| door.take_uploads())
        .filter(|_| ctx.config.rights.upload);
    let rx = WithLaneUploads::new(FirstThen { first, rest: rx }, uploads);
    let link = Halves(LanedSender::new(tx, lanes), rx);
    let mut session = ServedSession::new(ctx);
    drive(&mut session, link, ctx.cancel.clone(), Clock::start()).await
}

/// A link from its two halves.
struct Halves<S, R>(S, R);

impl<S: FrameSender, R: FrameReceiver> FrameLink for Halves<S, R> {
    type Sender = S;
    type Receiver = R;
    fn split(self) -> (S, R) {
        (self.0, self.1)
    }
}

/// A receiving half whose first frame was already read.
struct FirstThen<R> {
    first: Option<Bytes>,
    rest: R,
}

impl<R: FrameReceiver> FrameReceiver for FirstThen<R> {
    async fn recv(&mut self) -> Option<Bytes> {
        match self.first.take() {
            Some(frame) => Some(frame),
            None => self.rest.recv().await,
        }
    }

    fn closed_reason(&self) -> LinkClosed {
        self.rest.closed_reason()
    }
}

/// Tells the visitor why it goes (before any session), then closes its link.
pub async fn say_goodbye<S: FrameSender>(mut tx: S, code: GoodbyeCode, words: &str) {
    let goodbye = linkfs_proto::SenderToReceiver::Goodbye(linkfs_proto::Goodbye {
        code,
        message: words.to_owned(),
    });
    if tx.ready().await.is_ok() {
        let _ = tx.send(Bytes::from(goodbye.encode()));
    }
    tx.close().await;
}
