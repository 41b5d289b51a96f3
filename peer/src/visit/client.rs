//! The native receiver's shell around core's [`Visit`] (the same machine the
//! browser's worker drives), shared with whoever asks (the FUSE threads,
//! `ls`, `get`).
//!
//! ```text
//!  Visit output          this shell
//!  Connect          -->  the connector makes a data link (racing the visit's timers)
//!  Transmit         -->  the drive loop sends it (one frame waits for room at most)
//!  CloseLink        -->  the link (or the attempt) is dropped
//!  Event            -->  read replies, the status watch, the change follower, refusals
//!  Timeout          -->  sleep until then
//!  frames, link opened/failed/closed, read commands, cancel --> the visit's inputs
//! ```
//!
//! One task runs it: the drive loop ([`crate::drive`]) while a link is open,
//! and a short wait for the visit's next request between links. Every
//! decision (when to connect, how long to wait for a sharer that is
//! restarting, when to give up and why) is the visit's. The visit sits
//! behind a mutex so that lookups and listings read the index in place; the
//! loop holds the lock only for one call at a time.
//!
//! Bounds: at most [`COMMAND_QUEUE`] read commands wait for the loop; a read
//! holds at most its own `len` bytes (callers ask in pieces of at most
//! [`MAX_READ_LEN`]); refused index operations are kept up to
//! [`MAX_REFUSALS_KEPT`] (and counted beyond).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use linkfs_core::{
    EndReason, Index, IndexChanges, Millis, Output, ReadEvent, ReadFailure, ReadHandle,
    ReceiverConfig, StartReadError, Storage, UploadEvent, Visit, VisitConfig, VisitEvent,
    VisitStatus,
};
use linkfs_proto::{EntryId, Generation, UploadId};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::VisitError;
use crate::drive::{Clock, Drive, DrivenSession, FrameLink, LinkClosed, drive};

/// Read commands waiting for the session loop.
pub const COMMAND_QUEUE: usize = 1024;
/// The most bytes one [`Client::read`] may ask for.
pub const MAX_READ_LEN: u64 = 16 << 20;
/// Refused index operations kept for reporting (the rest are only counted).
pub const MAX_REFUSALS_KEPT: usize = 100;
/// Change batches waiting for whoever follows them ([`Client::changes`]).
pub const CHANGES_QUEUE: usize = 64;

/// How far the index is, and how the connection is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub received: u64,
    pub announced: u64,
    pub complete: bool,
    /// Folders known whole before the index is complete (it moves as they
    /// come: [`Client::folder_listed`] says which).
    pub listed: u64,
    /// A data link is open now.
    pub connected: bool,
    /// Set once the session ended (and its link is closed).
    pub ended: Option<EndReason>,
    /// The data link was lost and a new one is being made (reads wait).
    pub reconnecting: bool,
    /// New data links made after the first.
    pub reconnects: u32,
    /// Changes applied to the whole index so far (batches of them): it moves
    /// when an entry changes, for whoever waits on one.
    pub changes: u64,
}

/// Makes a data link to the sharer, each time the visit asks for one.
pub type Connector<L> =
    Box<dyn FnMut() -> Pin<Box<dyn Future<Output = Result<L, VisitError>> + Send>> + Send>;

/// Why a read failed, in words a user understands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The read started and failed (refused, changed, corrupt, timed out, ...).
    #[error(transparent)]
    Failed(ReadFailure),
    /// The read could not start (no such file, past its end, ...).
    #[error(transparent)]
    NotStarted(StartReadError),
    #[error("a read of {len} bytes is over the limit of {max}")]
    TooLong { len: u64, max: u64 },
    /// The session with the sharer has ended.
    #[error("{0}")]
    Ended(EndReason),
}

struct ReadCommand {
    entry: EntryId,
    /// Only this version of the file (see [`Client::start_read`]).
    version: Option<Generation>,
    offset: u64,
    len: u64,
    reply: oneshot::Sender<Result<Vec<u8>, ReadError>>,
}

/// A file to add to the share, from [`Client::upload`].
struct UploadCommand {
    path: Vec<u8>,
    size: u64,
    hash: [u8; 32],
    file: std::fs::File,
    events: mpsc::UnboundedSender<UploadEvent>,
    reply: oneshot::Sender<UploadId>,
}

/// Asks the person for the link's password when the sharer wants one (a
/// terminal prompt, a file); `None`: there is none to give.
pub type PasswordSource = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// What a visit says when a link needs a password and none can be given.
pub const NO_PASSWORD: &str = "this link needs a password: run again in a terminal to be asked for it, or give it with --password-file FILE";

struct Shared {
    visit: Mutex<Visit<()>>,
    refusals: Mutex<(Vec<String>, u64)>,
    /// Where changes to the index go, once someone asked ([`Client::changes`]).
    changes: Mutex<Option<mpsc::Sender<IndexChanges>>>,
    /// Why the last attempt at a link failed, in the connector's own words.
    last_failure: Mutex<Option<VisitError>>,
}

/// A receiver of one share. Cloning shares the session.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    commands: mpsc::Sender<ReadCommand>,
    uploads: mpsc::UnboundedSender<UploadCommand>,
    status: watch::Receiver<Status>,
    cancel: CancellationToken,
    /// How the first data link travelled (directly or through TURN): `None`
    /// until ICE says (a moment after the link opens), then what it said.
    route: RouteCell,
    /// Lanes the link has open now.
    lanes_open: crate::lanes::LanesOpen,
}

/// Where the first link's route lands once known (see [`Client::settled_route`]).
pub type RouteCell = Arc<std::sync::Mutex<Option<Option<crate::transport::Route>>>>;

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("status", &*self.status.borrow())
            .finish_non_exhaustive()
    }
}

/// The receiver settings of a native visitor: nothing is persisted (the index
/// lives in memory for the life of the command); up to 32 MiB of requests in
/// flight, 8 MiB for any one read (enough to keep the other lanes busy while
/// one waits out a loss: see [`crate::lanes`]).
pub fn native_receiver_config() -> ReceiverConfig {
    ReceiverConfig {
        ack_after_persist: false,
        max_in_flight_bytes: 64 << 20,
        max_job_in_flight_bytes: 8 << 20,
        // Sends wait for room in the link, and uploads go on lanes.
        max_upload_window: u64::MAX,
        ..ReceiverConfig::default()
    }
}

impl Client {
    /// A session over one open link: when it is lost, the session ends.
    pub fn start<L: FrameLink>(link: L, config: ReceiverConfig) -> Client {
        Self::spawn(Some(link), None, config, None)
    }

    /// A session over an open link; when it is lost, `reconnect` makes new
    /// ones whenever the visit asks (core's backoff, the grace for a
    /// restarting sharer, the give-up) and the session resumes where the
    /// index was. Reads wait meanwhile.
    pub fn start_with<L: FrameLink>(
        link: L,
        config: ReceiverConfig,
        reconnect: Option<Connector<L>>,
    ) -> Client {
        Self::spawn(Some(link), reconnect, config, None)
    }

    /// A session whose every link, the first included, `connect` makes;
    /// returns once the first is open, or with why it could not be made.
    pub async fn connect<L: FrameLink>(
        connect: Connector<L>,
        config: ReceiverConfig,
    ) -> Result<Client, VisitError> {
        Self::connect_with_password(connect, config, None).await
    }

    /// [`Client::connect`], with where the link's password comes from if
    /// the sharer asks for one.
    pub async fn connect_with_password<L: FrameLink>(
        connect: Connector<L>,
        config: ReceiverConfig,
        password: Option<PasswordSource>,
    ) -> Result<Client, VisitError> {
        let client = Self::spawn(None, Some(connect), config, password);
        let mut watch = client.status.clone();
        loop {
            {
                let s = watch.borrow_and_update();
                if s.connected {
                    return Ok(client);
                }
                if let Some(reason) = &s.ended {
                    let failure = client
                        .shared
                        .last_failure
                        .lock()
                        .ok()
                        .and_then(|mut f| f.take());
                    return Err(failure.unwrap_or_else(|| VisitError::Ended(reason.clone())));
                }
            }
            if watch.changed().await.is_err() {
                return Err(VisitError::Ended(EndReason::ClosedHere));
            }
        }
    }

    fn spawn<L: FrameLink>(
        first: Option<L>,
        connector: Option<Connector<L>>,
        receiver: ReceiverConfig,
        password: Option<PasswordSource>,
    ) -> Client {
        let clock = Clock::start();
        let config = VisitConfig {
            receiver,
            reconnect: connector.is_some(),
            storage: Storage::Memory,
            ..VisitConfig::default()
        };
        let seed = crate::random::random_bytes::<8>().map_or(7, u64::from_le_bytes);
        let shared = Arc::new(Shared {
            visit: Mutex::new(Visit::new(clock.now(), config, seed)),
            refusals: Mutex::new((Vec::new(), 0)),
            changes: Mutex::new(None),
            last_failure: Mutex::new(None),
        });
        let (commands, command_rx) = mpsc::channel(COMMAND_QUEUE);
        let (uploads, upload_rx) = mpsc::unbounded_channel();
        let (status_tx, status) = watch::channel(Status::default());
        let cancel = CancellationToken::new();
        let shell = VisitShell {
            shared: shared.clone(),
            clock,
            commands: command_rx,
            upload_commands: upload_rx,
            sources: HashMap::new(),
            commands_open: true,
            reads: HashMap::new(),
            status: status_tx,
            connected: false,
            reconnecting: false,
            reconnects: 0,
            end: None,
            changes_lost: false,
            changes_applied: 0,
            deadline: None,
            asked_connect: false,
            asked_close: false,
            link_lost: false,
            password,
        };
        tokio::spawn(run(shell, first, connector, cancel.clone()));
        Client {
            shared,
            commands,
            uploads,
            status,
            cancel,
            route: RouteCell::default(),
            lanes_open: crate::lanes::LanesOpen::default(),
        }
    }

    /// How the first data link travelled (directly or through TURN), once ICE
    /// has said (`None` if it does not within about a second of the link
    /// opening). The session does not wait for it.
    pub async fn settled_route(&self) -> Option<crate::transport::Route> {
        loop {
            if let Some(route) = self.route.lock().ok().and_then(|r| r.clone()) {
                return route;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// The route, if ICE has said by now (see [`Client::settled_route`]).
    pub fn route_now(&self) -> Option<Option<crate::transport::Route>> {
        self.route.lock().ok().and_then(|r| r.clone())
    }

    /// Where the first data link's route will land.
    pub fn with_route(mut self, route: RouteCell) -> Self {
        self.route = route;
        self
    }

    /// Where the links say how many lanes they have open.
    pub fn with_lanes_open(mut self, lanes_open: crate::lanes::LanesOpen) -> Self {
        self.lanes_open = lanes_open;
        self
    }

    /// Lanes the link has open now (0 on one connection).
    pub fn lanes_open(&self) -> usize {
        self.lanes_open.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn visit(&self) -> MutexGuard<'_, Visit<()>> {
        // The visit stays consistent between calls; a panic elsewhere must not
        // take every reader down with it.
        self.shared
            .visit
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `f` on the visit as it is now (figures).
    pub fn with_visit<R>(&self, f: impl FnOnce(&Visit<()>) -> R) -> R {
        f(&self.visit())
    }

    /// Runs `f` on the index as it is now.
    pub fn with_index<R>(&self, f: impl FnOnce(&Index) -> R) -> R {
        f(self.visit().index())
    }

    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// The epoch of the sharer's index (see [`linkfs_core::Visit::epoch`]).
    pub fn epoch(&self) -> linkfs_proto::Epoch {
        self.with_visit(|v| v.epoch())
    }

    /// Whether the index holds every child of folder `dir` (the whole index
    /// is here, or the sharer said this folder is whole): a listing of it can
    /// be answered now.
    pub fn folder_listed(&self, dir: EntryId) -> bool {
        self.with_visit(|v| v.folder_listed(dir))
    }

    /// Waits until folder `dir` is whole ([`Client::folder_listed`]), the
    /// session ends, or `within` passes; whether it is whole.
    pub async fn wait_folder_listed(&self, dir: EntryId, within: Duration) -> bool {
        let mut watch = self.status.clone();
        let deadline = tokio::time::Instant::now() + within;
        loop {
            // Marked seen before the look, so a change after it wakes us.
            let ended = watch.borrow_and_update().ended.is_some();
            if self.folder_listed(dir) {
                return true;
            }
            if ended {
                return false;
            }
            match tokio::time::timeout_at(deadline, watch.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return self.folder_listed(dir),
            }
        }
    }

    /// [`Client::wait_folder_listed`] for threads outside the runtime (the mount's).
    pub fn wait_folder_listed_blocking(
        &self,
        runtime: &tokio::runtime::Handle,
        dir: EntryId,
        within: Duration,
    ) -> bool {
        runtime.block_on(self.wait_folder_listed(dir, within))
    }

    /// A watch on the status (progress, the end).
    pub fn watch(&self) -> watch::Receiver<Status> {
        self.status.clone()
    }

    /// Waits until the whole index has arrived. Fails with the reason if the
    /// session ends first.
    pub async fn wait_complete(&self) -> Result<(), EndReason> {
        let mut watch = self.status.clone();
        loop {
            {
                let s = watch.borrow_and_update();
                if s.complete {
                    return Ok(());
                }
                if let Some(reason) = &s.ended {
                    return Err(reason.clone());
                }
            }
            if watch.changed().await.is_err() {
                return Err(EndReason::ClosedHere);
            }
        }
    }

    /// Waits until the session ends; returns why.
    pub async fn ended(&self) -> EndReason {
        let mut watch = self.status.clone();
        loop {
            if let Some(reason) = &watch.borrow_and_update().ended {
                return reason.clone();
            }
            if watch.changed().await.is_err() {
                return EndReason::ClosedHere;
            }
        }
    }

    /// The changes applied to the index from now on (a new call replaces the
    /// previous follower). A follower that falls behind by more than
    /// [`CHANGES_QUEUE`] batches gets one with `overflowed` set.
    pub fn changes(&self) -> mpsc::Receiver<IndexChanges> {
        let (tx, rx) = mpsc::channel(CHANGES_QUEUE);
        if let Ok(mut c) = self.shared.changes.lock() {
            *c = Some(tx);
        }
        rx
    }

    /// Index operations the sharer sent that were not valid (unsafe names,
    /// unknown parents) and were skipped: the first few in words, and how many.
    pub fn refusals(&self) -> (Vec<String>, u64) {
        self.shared
            .refusals
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// Reads `len` bytes at `offset` of file `entry`, verified chunk by chunk.
    pub async fn read(&self, entry: EntryId, offset: u64, len: u64) -> Result<Vec<u8>, ReadError> {
        self.start_read(entry, None, offset, len).await
    }

    /// [`Client::read`] as a future that owns what it needs, so several can be
    /// in flight at once (pipelining). With `Some(generation)`, of that version
    /// only: if the index holds another now, the read fails at once with
    /// [`StartReadError::Changed`], so a download never mixes two versions.
    pub fn start_read(
        &self,
        entry: EntryId,
        version: Option<Generation>,
        offset: u64,
        len: u64,
    ) -> impl std::future::Future<Output = Result<Vec<u8>, ReadError>> + Send + 'static {
        let client = self.clone();
        async move {
            check_len(len)?;
            let (reply, rx) = oneshot::channel();
            let cmd = ReadCommand {
                entry,
                version,
                offset,
                len,
                reply,
            };
            if client.commands.send(cmd).await.is_err() {
                return Err(client.ended_error());
            }
            rx.await.unwrap_or_else(|_| Err(client.ended_error()))
        }
    }

    /// Adds `file` to the share at `path` (relative to the link's folder;
    /// `size` and whole-file BLAKE3 `hash` as read before): what happens to
    /// it comes on the returned receiver, which ends after `Done` or
    /// `Refused`. A lost connection is resumed at the byte the sharer holds.
    pub async fn upload(
        &self,
        file: std::fs::File,
        path: &str,
        size: u64,
        hash: [u8; 32],
    ) -> Result<(UploadId, mpsc::UnboundedReceiver<UploadEvent>), ReadError> {
        let (events, rx) = mpsc::unbounded_channel();
        let (reply, id) = oneshot::channel();
        let cmd = UploadCommand {
            path: path.as_bytes().to_vec(),
            size,
            hash,
            file,
            events,
            reply,
        };
        if self.uploads.send(cmd).is_err() {
            return Err(self.ended_error());
        }
        let id = id.await.map_err(|_| self.ended_error())?;
        Ok((id, rx))
    }

    /// What the link lets this visitor do, once the sharer said.
    pub fn rights(&self) -> Option<linkfs_proto::Rights> {
        self.visit().rights()
    }

    /// [`Client::read`] from a thread outside the runtime (the FUSE threads).
    pub fn read_blocking(
        &self,
        entry: EntryId,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, ReadError> {
        check_len(len)?;
        let (reply, rx) = oneshot::channel();
        let cmd = ReadCommand {
            entry,
            version: None,
            offset,
            len,
            reply,
        };
        if self.commands.blocking_send(cmd).is_err() {
            return Err(self.ended_error());
        }
        rx.blocking_recv()
            .unwrap_or_else(|_| Err(self.ended_error()))
    }

    fn ended_error(&self) -> ReadError {
        ReadError::Ended(
            self.status
                .borrow()
                .ended
                .clone()
                .unwrap_or(EndReason::ConnectionLost),
        )
    }

    /// Ends the session (the link closes).
    pub fn close(&self) {
        self.cancel.cancel();
    }

    /// Ends the session and waits (at most 2 s) until the link is closed, so
    /// the sharer sees a clean goodbye rather than a lost peer.
    pub async fn shutdown(&self) {
        self.close();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.ended()).await;
    }
}

fn check_len(len: u64) -> Result<(), ReadError> {
    if len > MAX_READ_LEN {
        return Err(ReadError::TooLong {
            len,
            max: MAX_READ_LEN,
        });
    }
    Ok(())
}

struct OpenRead {
    data: Vec<u8>,
    reply: oneshot::Sender<Result<Vec<u8>, ReadError>>,
}

/// What wakes the visit besides frames and timers.
#[derive(Debug)]
pub enum ClientInput {
    Read(ReadCommandHandle),
    Upload(UploadCommandHandle),
    /// Every [`Client`] is gone: nobody will ask for anything again.
    AllClientsGone,
}

/// An upload command in flight to the session (opaque outside this module).
pub struct UploadCommandHandle(UploadCommand);

impl std::fmt::Debug for UploadCommandHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadCommand")
            .field("size", &self.0.size)
            .finish_non_exhaustive()
    }
}

/// A read command in flight to the session (opaque outside this module).
pub struct ReadCommandHandle(ReadCommand);

impl std::fmt::Debug for ReadCommandHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadCommand")
            .field("entry", &self.0.entry)
            .field("offset", &self.0.offset)
            .field("len", &self.0.len)
            .finish()
    }
}

/// The shell's state: the visit's IO and what the users of the [`Client`] see.
struct VisitShell {
    shared: Arc<Shared>,
    clock: Clock,
    commands: mpsc::Receiver<ReadCommand>,
    upload_commands: mpsc::UnboundedReceiver<UploadCommand>,
    /// The files being added, and where their events go.
    sources: HashMap<UploadId, (std::fs::File, mpsc::UnboundedSender<UploadEvent>)>,
    commands_open: bool,
    /// Where the link's password comes from, when the sharer asks.
    password: Option<PasswordSource>,
    reads: HashMap<ReadHandle, OpenRead>,
    status: watch::Sender<Status>,
    connected: bool,
    reconnecting: bool,
    reconnects: u32,
    /// Why the visit ended, once it has (published when the link is closed).
    end: Option<EndReason>,
    /// Changes that could not be handed over (the follower was behind).
    changes_lost: bool,
    /// Change batches applied to the whole index ([`Status::changes`]).
    changes_applied: u64,
    /// When the visit wants to be woken.
    deadline: Option<Millis>,
    /// The visit asked for a link / for the link to close, and the shell has
    /// not acted on it yet.
    asked_connect: bool,
    asked_close: bool,
    /// The open link ended under the visit.
    link_lost: bool,
}

/// How one drive of the visit over one link ended.
#[derive(Debug)]
enum LinkEnd {
    /// The link ended under the visit, or the visit closed it.
    Over,
}

impl VisitShell {
    fn lock(&self) -> MutexGuard<'_, Visit<()>> {
        self.shared
            .visit
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Does what the visit says until it has a frame to send (returned, as
    /// the drive loop takes it) or says to wait.
    fn pump(&mut self) -> Option<Drive<LinkEnd>> {
        loop {
            let out = self.lock().poll_output();
            match out {
                Output::Transmit(frame) => return Some(Drive::Transmit(frame)),
                Output::TransmitBulk(frame) => return Some(Drive::TransmitBulk(frame)),
                Output::Connect => self.asked_connect = true,
                Output::CloseLink => self.asked_close = true,
                Output::Event(e) => self.event(e),
                Output::UploadRead {
                    upload,
                    offset,
                    len,
                } => self.upload_read(upload, offset, len),
                Output::Timeout(at) => {
                    self.deadline = at;
                    self.publish();
                    return None;
                }
                // A visit kept in memory never loads, stores or works in steps.
                Output::Load(_) | Output::Store(_) | Output::SnapshotPart(_) | Output::Work => {}
            }
        }
    }

    fn event(&mut self, event: VisitEvent) {
        match event {
            VisitEvent::Read(ReadEvent::Data { handle, data, .. }) => {
                if let Some(open) = self.reads.get_mut(&handle) {
                    open.data.extend_from_slice(&data);
                }
            }
            VisitEvent::Read(ReadEvent::Done { handle }) => {
                if let Some(open) = self.reads.remove(&handle) {
                    let _ = open.reply.send(Ok(open.data));
                }
            }
            VisitEvent::Read(ReadEvent::Failed { handle, error }) => {
                if let Some(open) = self.reads.remove(&handle) {
                    let _ = open.reply.send(Err(ReadError::Failed(error)));
                }
            }
            VisitEvent::Status(status) => self.status_changed(status),
            VisitEvent::Changed(changes) => {
                self.changes_applied += 1;
                self.forward_changes(changes);
            }
            // The sharer started over: to whoever follows, anything may have changed.
            VisitEvent::Reset => {
                self.changes_applied += 1;
                self.forward_changes(IndexChanges {
                    changes: Vec::new(),
                    overflowed: true,
                });
            }
            VisitEvent::Refused(e) => self.keep_refusal(e),
            VisitEvent::Upload(e) => {
                let upload = match &e {
                    UploadEvent::Ready { upload, .. }
                    | UploadEvent::Progress { upload, .. }
                    | UploadEvent::Done { upload, .. }
                    | UploadEvent::Refused { upload, .. }
                    | UploadEvent::Interrupted { upload, .. } => *upload,
                };
                let over = matches!(
                    e,
                    UploadEvent::Done { .. }
                        | UploadEvent::Refused { .. }
                        | UploadEvent::Interrupted { .. }
                );
                if let Some((_, events)) = self.sources.get(&upload) {
                    let _ = events.send(e);
                }
                if over {
                    self.sources.remove(&upload);
                }
            }
            VisitEvent::PasswordNeeded => {
                let given = self.password.clone().and_then(|ask| {
                    // A prompt waits for a person: off the runtime's workers.
                    tokio::task::block_in_place(|| ask())
                });
                let now = self.clock.now();
                match given {
                    Some(p) => self.lock().give_password(&p),
                    None => self.lock().no_password(now, NO_PASSWORD.into()),
                }
            }
            _ => {}
        }
    }

    fn status_changed(&mut self, status: VisitStatus) {
        match status {
            VisitStatus::Connected => {
                if self.reconnecting {
                    self.reconnects += 1;
                    tracing::info!("reconnected to the sharer");
                }
                self.connected = true;
                self.reconnecting = false;
            }
            VisitStatus::Reconnecting { last, .. } => {
                self.connected = false;
                match last {
                    Some(words) => tracing::info!(%words, "reconnecting failed; trying again"),
                    None => tracing::info!("the link to the sharer was lost; reconnecting"),
                }
                self.reconnecting = true;
            }
            VisitStatus::Ended { reason, .. } => {
                tracing::info!(%reason, "the session with the sharer ended");
                self.connected = false;
                self.reconnecting = false;
                for (_, open) in self.reads.drain() {
                    let _ = open.reply.send(Err(ReadError::Ended(reason.clone())));
                }
                self.end = Some(reason);
            }
            VisitStatus::Connecting { .. } | VisitStatus::AtPrompt => {}
        }
    }

    /// Hands the changes the index recorded to the follower, if any.
    fn forward_changes(&mut self, changes: IndexChanges) {
        let Ok(follower) = self.shared.changes.lock() else {
            return;
        };
        let Some(tx) = follower.as_ref() else {
            return;
        };
        let batch = IndexChanges {
            overflowed: changes.overflowed || self.changes_lost,
            changes: changes.changes,
        };
        self.changes_lost = tx.try_send(batch).is_err();
    }

    fn keep_refusal(&self, refused: linkfs_core::IndexError) {
        tracing::warn!(
            first = %refused,
            "the sharer sent an entry that is not valid; it was skipped"
        );
        if let Ok(mut kept) = self.shared.refusals.lock() {
            kept.1 += 1;
            if kept.0.len() < MAX_REFUSALS_KEPT {
                kept.0.push(refused.to_string());
            }
        }
    }

    /// Publishes progress and the connection's state to the watch.
    fn publish(&self) {
        let (p, listed) = {
            let v = self.lock();
            (v.progress(), v.folders_listed())
        };
        self.status.send_if_modified(|s| {
            let next = Status {
                received: p.received,
                announced: p.announced,
                complete: p.complete,
                listed,
                connected: self.connected,
                ended: s.ended.clone(),
                reconnecting: self.reconnecting,
                reconnects: self.reconnects,
                changes: self.changes_applied,
            };
            let changed = *s != next;
            *s = next;
            changed
        });
    }

    fn read_command(&mut self, cmd: ReadCommand) {
        let started = self
            .lock()
            .start_read(cmd.entry, cmd.version, cmd.offset, cmd.len);
        match started {
            Ok(handle) => {
                self.reads.insert(
                    handle,
                    OpenRead {
                        data: Vec::with_capacity(cmd.len.min(MAX_READ_LEN) as usize),
                        reply: cmd.reply,
                    },
                );
            }
            Err(e) => {
                let _ = cmd.reply.send(Err(ReadError::NotStarted(e)));
            }
        }
    }

    async fn next_command(&mut self) -> ClientInput {
        if !self.commands_open {
            return std::future::pending().await;
        }
        tokio::select! {
            cmd = self.commands.recv() => match cmd {
                Some(cmd) => ClientInput::Read(ReadCommandHandle(cmd)),
                None => ClientInput::AllClientsGone,
            },
            Some(cmd) = self.upload_commands.recv() => ClientInput::Upload(UploadCommandHandle(cmd)),
        }
    }

    /// Bytes of a file being added, as the visit asks for them (read here:
    /// at most a chunk, from the page cache most often).
    fn upload_read(&mut self, upload: UploadId, offset: u64, len: usize) {
        use std::os::unix::fs::FileExt;
        let Some((file, _)) = self.sources.get(&upload) else {
            return;
        };
        let mut buf = vec![0u8; len];
        match file.read_exact_at(&mut buf, offset) {
            Ok(()) => self.lock().upload_bytes(upload, offset, &buf),
            Err(e) => self.lock().upload_unreadable(
                upload,
                format!("cannot read the file being sent at byte {offset}: {e} (did it change?)"),
            ),
        }
    }

    fn command(&mut self, input: ClientInput) {
        match input {
            ClientInput::Read(ReadCommandHandle(cmd)) => self.read_command(cmd),
            ClientInput::Upload(UploadCommandHandle(cmd)) => {
                let upload = self.lock().upload(cmd.path, cmd.size, cmd.hash);
                self.sources.insert(upload, (cmd.file, cmd.events));
                let _ = cmd.reply.send(upload);
            }
            ClientInput::AllClientsGone => {
                self.commands_open = false;
                let now = self.clock.now();
                self.lock().close(now);
            }
        }
    }
}

impl DrivenSession for VisitShell {
    type Input = ClientInput;
    type Outcome = LinkEnd;

    fn handle_frame(&mut self, now: Millis, frame: &[u8]) {
        self.lock().handle_frame(now, frame, &());
    }

    fn handle_timeout(&mut self, now: Millis) {
        self.lock().handle_timeout(now);
    }

    async fn next_input(&mut self) -> ClientInput {
        self.next_command().await
    }

    fn handle_input(&mut self, _now: Millis, input: ClientInput) {
        self.command(input);
    }

    fn poll_output(&mut self, _now: Millis, room: bool) -> Drive<LinkEnd> {
        // The visit's frames wait in it while the loop has no room.
        if room && let Some(transmit) = self.pump() {
            return transmit;
        }
        if self.asked_close || self.link_lost {
            return Drive::End(LinkEnd::Over);
        }
        Drive::Wait(self.deadline)
    }

    fn link_closed(&mut self, reason: LinkClosed) {
        tracing::info!(%reason, "the link to the sharer ended");
        self.link_lost = true;
        let now = self.clock.now();
        self.lock().link_closed(now);
    }

    fn stop(&mut self) {
        let now = self.clock.now();
        self.lock().close(now);
    }

    fn gave_up(&mut self) -> LinkEnd {
        LinkEnd::Over
    }
}

/// Runs the visit until it ends: links while it asks for them, the drive loop
/// over each, its timers in between.
async fn run<L: FrameLink>(
    mut shell: VisitShell,
    mut first: Option<L>,
    mut connector: Option<Connector<L>>,
    cancel: CancellationToken,
) {
    let mut stopping = false;
    loop {
        // Between links: frames cannot go anywhere (the visit sends none).
        while shell.pump().is_some() {}
        if shell.asked_connect {
            shell.asked_connect = false;
            shell.asked_close = false;
            let attempt = match (first.take(), connector.as_mut()) {
                (Some(link), _) => Ok(link),
                (None, Some(connect)) => {
                    attempt(&mut shell, connect(), &cancel, &mut stopping).await
                }
                (None, None) => Err(None),
            };
            let now = shell.clock.now();
            match attempt {
                Ok(link) => {
                    shell.lock().link_opened(now);
                    shell.link_lost = false;
                    let clock = shell.clock;
                    let _ = drive(&mut shell, link, cancel.clone(), clock).await;
                    if cancel.is_cancelled() {
                        stopping = true;
                    }
                }
                Err(Some(e)) => {
                    shell.lock().link_failed(now, e.kind(), e.to_string());
                    if let Ok(mut f) = shell.shared.last_failure.lock() {
                        *f = Some(e);
                    }
                }
                // Dropped: the visit asked to close it, or the user stopped.
                Err(None) => {}
            }
            continue;
        }
        if shell.lock().is_ended() {
            break;
        }
        let deadline = shell.deadline.map(|at| shell.clock.instant(at));
        tokio::select! {
            biased;
            () = cancel.cancelled(), if !stopping => {
                stopping = true;
                let now = shell.clock.now();
                shell.lock().close(now);
            }
            input = shell.next_command() => shell.command(input),
            () = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                let now = shell.clock.now();
                shell.lock().handle_timeout(now);
            }
        }
    }
    let reason = shell.end.clone().unwrap_or(EndReason::ClosedHere);
    shell.commands.close();
    while let Ok(cmd) = shell.commands.try_recv() {
        let _ = cmd.reply.send(Err(ReadError::Ended(reason.clone())));
    }
    // The link is closed before the end is announced: `shutdown` waits for a clean close.
    shell.status.send_modify(|s| {
        s.connected = false;
        s.reconnecting = false;
        s.ended = Some(reason);
    });
}

/// Waits for one attempt at a link while the visit's timers, read commands
/// and a stop keep being served. `Err(None)`: the attempt was dropped (the
/// visit gave up on it, or the user stopped).
async fn attempt<L>(
    shell: &mut VisitShell,
    mut connecting: Pin<Box<dyn Future<Output = Result<L, VisitError>> + Send>>,
    cancel: &CancellationToken,
    stopping: &mut bool,
) -> Result<L, Option<VisitError>> {
    loop {
        let deadline = shell.deadline.map(|at| shell.clock.instant(at));
        tokio::select! {
            biased;
            () = cancel.cancelled(), if !*stopping => {
                *stopping = true;
                let now = shell.clock.now();
                shell.lock().close(now);
                return Err(None);
            }
            result = &mut connecting => return result.map_err(Some),
            input = shell.next_command() => shell.command(input),
            () = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                let now = shell.clock.now();
                shell.lock().handle_timeout(now);
            }
        }
        while shell.pump().is_some() {}
        if shell.asked_close {
            shell.asked_close = false;
            return Err(None);
        }
    }
}
