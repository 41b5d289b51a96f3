//! The native receiver's session: the thin async shell around the core
//! [`Receiver`] (the same code the browser runs), shared with whoever asks
//! (the FUSE threads, `ls`, `get`).
//!
//! One task runs the drive loop ([`crate::drive`]) with a [`ClientSession`]:
//! frames in, frames out, timers, and read commands from any thread. The
//! receiver sits behind a mutex so that lookups and listings read the index in
//! place; the loop holds the lock only for one call at a time. Why the session
//! ended is core's typed [`EndReason`], all the way to the commands' exit codes.
//!
//! Bounds: at most [`COMMAND_QUEUE`] read commands wait for the loop; a read
//! holds at most its own `len` bytes (callers ask in pieces of at most
//! [`MAX_READ_LEN`]); refused index operations are kept up to
//! [`MAX_REFUSALS_KEPT`] (and counted beyond).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use std::future::Future;
use std::pin::Pin;

use linkfs_core::{
    Backoff, BackoffConfig, EndReason, FailureKind, Index, IndexChange, Millis, ReadEvent,
    ReadFailure, ReadHandle, Receiver, ReceiverConfig, ReceiverEvent, Retry, StartReadError,
};
use linkfs_proto::EntryId;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::VisitError;
use crate::drive::{DrivenSession, FrameLink, LinkClosed, drive};

/// Read commands waiting for the session loop.
pub const COMMAND_QUEUE: usize = 1024;
/// The most bytes one [`Client::read`] may ask for.
pub const MAX_READ_LEN: u64 = 16 << 20;
/// Refused index operations kept for reporting (the rest are only counted).
pub const MAX_REFUSALS_KEPT: usize = 100;

/// How far the index is, and whether the session is over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub received: u64,
    pub announced: u64,
    pub complete: bool,
    /// Set once the session ended.
    pub ended: Option<EndReason>,
    /// The data link was lost and a new one is being made (reads wait).
    pub reconnecting: bool,
    /// New data links made after the first.
    pub reconnects: u32,
}

/// Makes a new data link to the same sharer after one was lost.
pub type Reconnector<L> =
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
    offset: u64,
    len: u64,
    reply: oneshot::Sender<Result<Vec<u8>, ReadError>>,
}

struct Shared {
    receiver: Mutex<Receiver>,
    refusals: Mutex<(Vec<String>, u64)>,
    /// Where changes to the index go, once someone asked ([`Client::changes`]).
    changes: Mutex<Option<mpsc::Sender<IndexChanges>>>,
}

/// Changes applied to the index (after it was complete), in order. `overflowed`:
/// more changed than this says (anything may have changed).
#[derive(Debug, Clone, Default)]
pub struct IndexChanges {
    pub changes: Vec<IndexChange>,
    pub overflowed: bool,
}

/// Change batches waiting for whoever follows them ([`Client::changes`]).
pub const CHANGES_QUEUE: usize = 64;

/// A connected receiver. Cloning shares the session.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    commands: mpsc::Sender<ReadCommand>,
    status: watch::Receiver<Status>,
    cancel: CancellationToken,
    /// How the first data link travelled (directly or through TURN), if known.
    route: Option<crate::transport::Route>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("status", &*self.status.borrow())
            .finish_non_exhaustive()
    }
}

/// The receiver settings of a native visitor: nothing is persisted (the index
/// lives in memory for the life of the command), reads pipeline 8 MiB.
pub fn native_receiver_config() -> ReceiverConfig {
    ReceiverConfig {
        ack_after_persist: false,
        max_in_flight_bytes: 16 << 20,
        max_job_in_flight_bytes: 8 << 20,
        ..ReceiverConfig::default()
    }
}

impl Client {
    /// Starts the session over an open link. It runs on the current tokio
    /// runtime until the sharer leaves, the link drops or [`Client::close`].
    pub fn start<L: FrameLink>(link: L, config: ReceiverConfig) -> Client {
        Self::start_with(link, config, None)
    }

    /// Like [`Client::start`]; when the link is lost, `reconnect` makes new
    /// ones (with core's backoff, for up to five minutes; a sharer that is not
    /// there is waited for one minute, in case it is restarting), and the
    /// session resumes where the index was. Reads wait meanwhile.
    pub fn start_with<L: FrameLink>(
        link: L,
        config: ReceiverConfig,
        reconnect: Option<Reconnector<L>>,
    ) -> Client {
        let shared = Arc::new(Shared {
            receiver: Mutex::new(Receiver::new(config, Index::new(), None)),
            refusals: Mutex::new((Vec::new(), 0)),
            changes: Mutex::new(None),
        });
        let (commands, command_rx) = mpsc::channel(COMMAND_QUEUE);
        let (status_tx, status) = watch::channel(Status::default());
        let cancel = CancellationToken::new();
        tokio::spawn(run(
            link,
            reconnect,
            shared.clone(),
            command_rx,
            status_tx,
            cancel.clone(),
        ));
        Client {
            shared,
            commands,
            status,
            cancel,
            route: None,
        }
    }

    /// How the first data link travelled (directly or through TURN), if known.
    pub fn route(&self) -> Option<&crate::transport::Route> {
        self.route.as_ref()
    }

    /// Records how the first data link travelled.
    pub fn with_route(mut self, route: Option<crate::transport::Route>) -> Self {
        self.route = route;
        self
    }

    fn receiver(&self) -> MutexGuard<'_, Receiver> {
        // The receiver stays consistent between calls; a panic elsewhere must not
        // take every reader down with it.
        self.shared
            .receiver
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `f` on the index as it is now.
    pub fn with_index<R>(&self, f: impl FnOnce(&Index) -> R) -> R {
        f(self.receiver().index())
    }

    pub fn status(&self) -> Status {
        self.status.borrow().clone()
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
        self.start_read(entry, offset, len).await
    }

    /// [`Client::read`] as a future that owns what it needs, so several can be
    /// in flight at once (pipelining).
    pub fn start_read(
        &self,
        entry: EntryId,
        offset: u64,
        len: u64,
    ) -> impl std::future::Future<Output = Result<Vec<u8>, ReadError>> + Send + 'static {
        let client = self.clone();
        async move {
            check_len(len)?;
            let (reply, rx) = oneshot::channel();
            let cmd = ReadCommand {
                entry,
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

/// What wakes the receiver's session besides frames and timers.
#[derive(Debug)]
pub enum ClientInput {
    Read(ReadCommandHandle),
    /// Every [`Client`] is gone: nobody will ask for anything again.
    AllClientsGone,
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

/// The core receiver as a [`DrivenSession`]: read commands in, read replies,
/// refusals and progress out.
struct ClientSession {
    shared: Arc<Shared>,
    commands: mpsc::Receiver<ReadCommand>,
    commands_open: bool,
    reads: HashMap<ReadHandle, OpenRead>,
    status: watch::Sender<Status>,
    ended: Option<EndReason>,
    journaling: bool,
    /// Changes that could not be handed over (the follower was behind).
    changes_lost: bool,
    /// A lost link is followed by a new one (else the session ends).
    may_reconnect: bool,
    /// The link was lost; the drive loop hands over to reconnecting.
    link_gone: bool,
}

/// How one drive of the session over one link ended.
#[derive(Debug)]
enum ClientEnd {
    /// The link was lost; the session waits for a new one.
    LinkLost,
    Ended(EndReason),
}

impl ClientSession {
    /// Hands the changes the index recorded to the follower, if any.
    fn forward_changes(&mut self, changes: Vec<IndexChange>, overflowed: bool) {
        if changes.is_empty() && !overflowed && !self.changes_lost {
            return;
        }
        let Ok(follower) = self.shared.changes.lock() else {
            return;
        };
        let Some(tx) = follower.as_ref() else {
            return;
        };
        let batch = IndexChanges {
            changes,
            overflowed: overflowed || self.changes_lost,
        };
        self.changes_lost = tx.try_send(batch).is_err();
    }

    fn lock(&self) -> MutexGuard<'_, Receiver> {
        self.shared
            .receiver
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn keep_refusals(&self, refused: Vec<linkfs_core::IndexError>) {
        tracing::warn!(
            count = refused.len(),
            first = %refused[0],
            "the sharer sent entries that are not valid; they were skipped"
        );
        if let Ok(mut kept) = self.shared.refusals.lock() {
            kept.1 += refused.len() as u64;
            for e in refused {
                if kept.0.len() < MAX_REFUSALS_KEPT {
                    kept.0.push(e.to_string());
                }
            }
        }
    }
}

impl DrivenSession for ClientSession {
    type Input = ClientInput;
    type Outcome = ClientEnd;

    fn handle_frame(&mut self, now: Millis, frame: &[u8]) {
        self.lock().handle_frame(now, frame);
    }

    fn poll_transmit(&mut self, now: Millis) -> Option<Vec<u8>> {
        self.lock().poll_transmit(now)
    }

    fn poll_timeout(&mut self) -> Option<Millis> {
        self.lock().poll_timeout()
    }

    fn handle_timeout(&mut self, now: Millis) {
        self.lock().handle_timeout(now);
    }

    async fn next_input(&mut self) -> ClientInput {
        if !self.commands_open {
            return std::future::pending().await;
        }
        match self.commands.recv().await {
            Some(cmd) => ClientInput::Read(ReadCommandHandle(cmd)),
            None => ClientInput::AllClientsGone,
        }
    }

    fn handle_input(&mut self, _now: Millis, input: ClientInput) {
        match input {
            ClientInput::Read(ReadCommandHandle(cmd)) => {
                let started = self.lock().start_read(cmd.entry, cmd.offset, cmd.len);
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
            ClientInput::AllClientsGone => {
                self.commands_open = false;
                self.lock().close();
            }
        }
    }

    fn poll_end(&mut self, _now: Millis) -> Option<ClientEnd> {
        let mut refusals = Vec::new();
        let shared = self.shared.clone();
        let progress = {
            let mut r = shared
                .receiver
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            while let Some(event) = r.poll_event() {
                match event {
                    ReceiverEvent::Applied { refused, .. } => refusals.extend(refused),
                    ReceiverEvent::Read(ReadEvent::Data { handle, data, .. }) => {
                        if let Some(open) = self.reads.get_mut(&handle) {
                            open.data.extend_from_slice(&data);
                        }
                    }
                    ReceiverEvent::Read(ReadEvent::Done { handle }) => {
                        if let Some(open) = self.reads.remove(&handle) {
                            let _ = open.reply.send(Ok(open.data));
                        }
                    }
                    ReceiverEvent::Read(ReadEvent::Failed { handle, error }) => {
                        if let Some(open) = self.reads.remove(&handle) {
                            let _ = open.reply.send(Err(ReadError::Failed(error)));
                        }
                    }
                    ReceiverEvent::Ended { reason } => {
                        self.ended.get_or_insert(reason);
                    }
                    _ => {}
                }
            }
            if !self.journaling && r.progress().complete {
                // From here on every change is recorded, for the mount's caches.
                self.journaling = true;
                r.index_mut().record_changes(true);
            }
            let journal = r.index_mut().take_changes();
            (r.progress(), journal)
        };
        let (progress, (changes, overflowed)) = progress;
        self.forward_changes(changes, overflowed);
        if !refusals.is_empty() {
            self.keep_refusals(refusals);
        }
        self.status.send_if_modified(|s| {
            let changed = s.received != progress.received
                || s.announced != progress.announced
                || s.complete != progress.complete;
            s.received = progress.received;
            s.announced = progress.announced;
            s.complete = progress.complete;
            changed
        });
        if let Some(reason) = self.ended.clone() {
            for (_, open) in self.reads.drain() {
                let _ = open.reply.send(Err(ReadError::Ended(reason.clone())));
            }
            return Some(ClientEnd::Ended(reason));
        }
        self.link_gone.then_some(ClientEnd::LinkLost)
    }

    fn link_closed(&mut self, reason: LinkClosed) {
        if self.may_reconnect {
            tracing::info!(%reason, "the link to the sharer was lost; reconnecting");
            self.lock().link_lost();
            self.link_gone = true;
        } else {
            self.lock().connection_lost();
        }
    }

    fn stop(&mut self) {
        self.lock().close();
    }

    fn gave_up(&mut self) -> ClientEnd {
        ClientEnd::Ended(self.ended.clone().unwrap_or(EndReason::ClosedHere))
    }
}

/// How long a sharer that is not there is waited for while reconnecting (it
/// may be restarting).
const SHARER_RESTART_GRACE_MS: u64 = 60_000;

/// Makes a new link with backoff; the reason the session ends otherwise.
async fn relink<L: FrameLink>(
    reconnect: &mut Reconnector<L>,
    backoff: &mut Backoff,
    cancel: &CancellationToken,
) -> Result<L, EndReason> {
    let start = tokio::time::Instant::now();
    let now = || Millis(start.elapsed().as_millis() as u64);
    let mut gone_since: Option<Millis> = None;
    loop {
        match backoff.failed(now()) {
            Retry::GiveUp => return Err(EndReason::ConnectionLost),
            Retry::At(t) => {
                let at = start + Duration::from_millis(t.0);
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = cancel.cancelled() => return Err(EndReason::ClosedHere),
                }
            }
        }
        match reconnect().await {
            Ok(link) => {
                backoff.succeeded();
                return Ok(link);
            }
            Err(e) => match e.kind() {
                FailureKind::InvalidLink => return Err(EndReason::ConnectionLost),
                FailureKind::SharerGone => {
                    let since = *gone_since.get_or_insert(now());
                    if now().0.saturating_sub(since.0) >= SHARER_RESTART_GRACE_MS {
                        return Err(EndReason::SharerGoodbye(String::new()));
                    }
                    tracing::info!(error = %e, "the sharer is not there (yet); trying again");
                }
                _ => tracing::info!(error = %e, "reconnecting failed; trying again"),
            },
        }
    }
}

async fn run<L: FrameLink>(
    link: L,
    mut reconnect: Option<Reconnector<L>>,
    shared: Arc<Shared>,
    commands: mpsc::Receiver<ReadCommand>,
    status: watch::Sender<Status>,
    cancel: CancellationToken,
) {
    let mut session = ClientSession {
        shared,
        commands,
        commands_open: true,
        reads: HashMap::new(),
        status: status.clone(),
        ended: None,
        journaling: false,
        changes_lost: false,
        may_reconnect: reconnect.is_some(),
        link_gone: false,
    };
    let seed = crate::random::random_bytes::<8>().map_or(7, u64::from_le_bytes);
    let mut backoff = Backoff::new(BackoffConfig::default(), seed);
    let mut link = link;
    let reason = loop {
        match drive(&mut session, link, cancel.clone()).await {
            ClientEnd::Ended(reason) => break reason,
            ClientEnd::LinkLost => {
                session.link_gone = false;
                let Some(reconnect) = reconnect.as_mut() else {
                    session.lock().connection_lost();
                    break EndReason::ConnectionLost;
                };
                status.send_modify(|s| s.reconnecting = true);
                match relink(reconnect, &mut backoff, &cancel).await {
                    Ok(new) => {
                        link = new;
                        session.lock().link_ready();
                        status.send_modify(|s| {
                            s.reconnecting = false;
                            s.reconnects += 1;
                        });
                        tracing::info!("reconnected to the sharer");
                    }
                    Err(reason) => {
                        {
                            let mut r = session.lock();
                            r.connection_lost();
                            while r.poll_event().is_some() {}
                        }
                        for (_, open) in session.reads.drain() {
                            let _ = open.reply.send(Err(ReadError::Ended(reason.clone())));
                        }
                        break reason;
                    }
                }
            }
        }
    };
    tracing::info!(%reason, "the session with the sharer ended");
    session.commands.close();
    while let Ok(cmd) = session.commands.try_recv() {
        let _ = cmd.reply.send(Err(ReadError::Ended(reason.clone())));
    }
    // The link is closed before the end is announced: `shutdown` waits for a clean close.
    status.send_modify(|s| {
        s.reconnecting = false;
        s.ended = Some(reason);
    });
}
