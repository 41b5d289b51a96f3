//! The native receiver's session: the thin async shell around the core
//! [`Receiver`] (the same code the browser runs), shared with whoever asks
//! (the FUSE threads, `ls`, `get`).
//!
//! One task owns the data link and runs one `select!` loop (STYLE #4): frames
//! in, frames out (waiting for room in the send buffer without blocking the
//! loop), timers, and read commands from any thread. The receiver sits behind a
//! mutex so that lookups and listings read the index in place; the loop holds
//! the lock only for one call at a time.
//!
//! Bounds: at most [`COMMAND_QUEUE`] read commands wait for the loop; a read
//! holds at most its own `len` bytes (callers ask in pieces of at most
//! [`MAX_READ_LEN`]); refused index operations are kept up to
//! [`MAX_REFUSALS_KEPT`] (and counted beyond).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use linkfs_core::{Index, Millis, ReadHandle, Receiver, ReceiverConfig, ReceiverEvent};
use linkfs_proto::EntryId;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::transport::DataLink;

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
    /// Set once the session ended, in words.
    pub ended: Option<String>,
}

/// Why a read failed, in words a user understands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ReadError(pub String);

struct ReadCommand {
    entry: EntryId,
    offset: u64,
    len: u64,
    reply: oneshot::Sender<Result<Vec<u8>, ReadError>>,
}

struct Shared {
    receiver: Mutex<Receiver>,
    refusals: Mutex<(Vec<String>, u64)>,
}

/// A connected receiver. Cloning shares the session.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    commands: mpsc::Sender<ReadCommand>,
    status: watch::Receiver<Status>,
    cancel: CancellationToken,
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
    pub fn start(link: DataLink, config: ReceiverConfig) -> Client {
        let shared = Arc::new(Shared {
            receiver: Mutex::new(Receiver::new(config, Index::new(), None)),
            refusals: Mutex::new((Vec::new(), 0)),
        });
        let (commands, command_rx) = mpsc::channel(COMMAND_QUEUE);
        let (status_tx, status) = watch::channel(Status::default());
        let cancel = CancellationToken::new();
        tokio::spawn(run(
            link,
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
        }
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
    pub async fn wait_complete(&self) -> Result<(), String> {
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
                return Err("the session ended".into());
            }
        }
    }

    /// Waits until the session ends; returns why.
    pub async fn ended(&self) -> String {
        let mut watch = self.status.clone();
        loop {
            if let Some(reason) = &watch.borrow_and_update().ended {
                return reason.clone();
            }
            if watch.changed().await.is_err() {
                return "the session ended".into();
            }
        }
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
                return Err(ReadError(client.end_words()));
            }
            rx.await
                .unwrap_or_else(|_| Err(ReadError(client.end_words())))
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
            return Err(ReadError(self.end_words()));
        }
        rx.blocking_recv()
            .unwrap_or_else(|_| Err(ReadError(self.end_words())))
    }

    fn end_words(&self) -> String {
        self.status
            .borrow()
            .ended
            .clone()
            .unwrap_or_else(|| "the connection to the sharer ended".into())
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
        return Err(ReadError(format!(
            "a read of {len} bytes is over the limit of {MAX_READ_LEN}"
        )));
    }
    Ok(())
}

struct OpenRead {
    data: Vec<u8>,
    reply: oneshot::Sender<Result<Vec<u8>, ReadError>>,
}

async fn run(
    link: DataLink,
    shared: Arc<Shared>,
    mut commands: mpsc::Receiver<ReadCommand>,
    status: watch::Sender<Status>,
    cancel: CancellationToken,
) {
    let start = Instant::now();
    let now = move || Millis(start.elapsed().as_millis() as u64);
    let (tx, mut rx) = link.split();
    let lock = || {
        shared
            .receiver
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    let mut reads: HashMap<ReadHandle, OpenRead> = HashMap::new();
    let mut pending: Option<Bytes> = None;
    let mut ended: Option<String> = None;
    loop {
        // Events and progress, then what to send.
        {
            let mut r = lock();
            while let Some(event) = r.poll_event() {
                match event {
                    ReceiverEvent::Started { .. } => {}
                    ReceiverEvent::Applied { refused, .. } => {
                        if !refused.is_empty() {
                            tracing::warn!(
                                count = refused.len(),
                                first = %refused[0],
                                "the sharer sent entries that are not valid; they were skipped"
                            );
                            if let Ok(mut kept) = shared.refusals.lock() {
                                kept.1 += refused.len() as u64;
                                for e in refused {
                                    if kept.0.len() < MAX_REFUSALS_KEPT {
                                        kept.0.push(e.to_string());
                                    }
                                }
                            }
                        }
                    }
                    ReceiverEvent::ReadData { handle, data, .. } => {
                        if let Some(open) = reads.get_mut(&handle) {
                            open.data.extend_from_slice(&data);
                        }
                    }
                    ReceiverEvent::ReadDone { handle } => {
                        if let Some(open) = reads.remove(&handle) {
                            let _ = open.reply.send(Ok(open.data));
                        }
                    }
                    ReceiverEvent::ReadFailed { handle, error } => {
                        if let Some(open) = reads.remove(&handle) {
                            let _ = open.reply.send(Err(ReadError(error.to_string())));
                        }
                    }
                    ReceiverEvent::Ended { reason } => {
                        ended.get_or_insert_with(|| reason.to_string());
                    }
                }
            }
            let p = r.progress();
            status.send_if_modified(|s| {
                let changed = s.received != p.received
                    || s.announced != p.announced
                    || s.complete != p.complete;
                s.received = p.received;
                s.announced = p.announced;
                s.complete = p.complete;
                changed
            });
            if pending.is_none() && ended.is_none() {
                pending = r.poll_transmit(now()).map(Bytes::from);
            }
        }
        if let Some(reason) = &ended {
            for (_, open) in reads.drain() {
                let _ = open.reply.send(Err(ReadError(reason.clone())));
            }
            break;
        }
        let deadline = lock()
            .poll_timeout()
            .map(|m| start + Duration::from_millis(m.0));
        tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                ended = Some("the session was closed".into());
            }
            permit = tx.reserve(), if pending.is_some() => match permit {
                Ok(p) => {
                    if let Some(frame) = pending.take()
                        && p.send(frame).is_err()
                    {
                        lock().connection_lost();
                    }
                }
                Err(_) => lock().connection_lost(),
            },
            frame = rx.recv() => match frame {
                Some(f) => lock().handle_frame(now(), &f),
                None => lock().connection_lost(),
            },
            Some(cmd) = commands.recv() => {
                let started = lock().start_read(cmd.entry, cmd.offset, cmd.len);
                match started {
                    Ok(handle) => {
                        reads.insert(handle, OpenRead {
                            data: Vec::with_capacity(cmd.len.min(MAX_READ_LEN) as usize),
                            reply: cmd.reply,
                        });
                    }
                    Err(e) => {
                        let _ = cmd.reply.send(Err(ReadError(e.to_string())));
                    }
                }
            }
            _ = tokio::time::sleep_until(deadline.unwrap_or(start)), if deadline.is_some() => {
                lock().handle_timeout(now());
            }
        }
    }
    let reason = ended.unwrap_or_else(|| "the session ended".into());
    tracing::info!(%reason, "the session with the sharer ended");
    commands.close();
    while let Ok(cmd) = commands.try_recv() {
        let _ = cmd.reply.send(Err(ReadError(reason.clone())));
    }
    // Closed before the end is announced: `shutdown` waits for a clean close.
    tx.close().await;
    status.send_modify(|s| s.ended = Some(reason));
}
