//! The receiver session of a shell that keeps the index in storage (the
//! browser's IndexedDB), sans-IO: [`PersistentReceiver`], and [`rebuild`] of an
//! index from what was stored.
//!
//! ```text
//! shell                                    PersistentReceiver
//!  stored state + batch frames ---------> rebuild() -> Rebuilt -> new(rebuilt, storage)
//!  frame from the data link  -----------> handle_frame(now, frame, given)
//!  storage idle? <----------------------- poll_write() -> StoreWrite {ops, state}
//!  the write committed (or failed) -----> write_done(result)
//!  what happened? <---------------------- poll_event() -> StoredEvent
//!  how far? <---------------------------- progress() -> StoredProgress
//! ```
//!
//! What is stored: the index batch frames exactly as they arrived, keyed by
//! the sequence number of their first operation, plus one [`StoredState`]
//! (epoch, next sequence, complete). The store is always a contiguous prefix of
//! the sharer's log: writes go one at a time, in order, each carrying every
//! batch applied since the previous one and the state after them. A batch is
//! acknowledged to the sharer only after the write holding it committed, so
//! the sharer's window also bounds what is not yet stored.
//!
//! Snapshots: once the index is complete and the log has grown by enough
//! batches since the last snapshot (at least [`SNAPSHOT_MIN_BATCHES`], and at
//! least one per 8,192 entries, so the work is in proportion), and no batch
//! came for [`SNAPSHOT_QUIET_MS`], [`poll_snapshot`](PersistentReceiver::poll_snapshot)
//! asks the shell to store a snapshot of the index (`Index::snapshot_parts`)
//! in place of the batches before it, in one write. Reopening then restores
//! the snapshot (a copy) and replays only the batches after it, and the store
//! of a live share stops growing with every change. The stored state says
//! where the snapshot ends and how many parts it has; [`Rebuilder`] takes the
//! parts first, then the frames after it.
//!
//! When storage fails (full, disabled), the session says so once
//! ([`StoredProgress::storage_problem`]) and goes on in memory: batches are
//! acknowledged anyway, nothing received is lost from the page.
//!
//! The "complete" rule: the index is complete when the sharer said so in this
//! session, or, while no session is open, when the cache was complete.
//!
//! The frame handle `F` is the shell's: a JS `ArrayBuffer` in the browser (a
//! batch is stored from the very buffer that arrived, never copied through
//! wasm memory), bytes in tests.

use std::collections::VecDeque;

use linkfs_proto::{BatchReader, EntryId, Epoch, FRAME_INDEX_BATCH, Generation, Seq};

use crate::Millis;
use crate::index::{Index, IndexError, SnapshotCursor, SnapshotRestorer, StoredPart};
use crate::receiver::{
    BatchBytes, EndReason, ReadEvent, ReadHandle, Receiver, ReceiverConfig, ReceiverEvent,
    StartReadError,
};

/// What the store says about the batches it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredState {
    pub epoch: Epoch,
    /// The sequence number after the last stored batch.
    pub next: Seq,
    /// The sharer's walk had finished and everything it found is stored.
    pub complete: bool,
    /// A stored snapshot of the index, which stands for the batches before it.
    pub snapshot: Option<StoredSnapshot>,
}

/// Where a stored snapshot of the index ends, and its parts (head included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredSnapshot {
    /// The sequence number after the last batch the snapshot holds.
    pub next: Seq,
    pub parts: u32,
}

/// Fewest stored batches after the last snapshot before another is taken.
pub const SNAPSHOT_MIN_BATCHES: u64 = 32;
/// A snapshot waits until no batch came for this long (ms): a share that is
/// changing is not snapshotted at every change.
pub const SNAPSHOT_QUIET_MS: u64 = 1_000;
/// Index batch bytes held back while a snapshot is built, at most: 16 MiB
/// (a sharer's window is 2 MiB).
const SNAPSHOT_DEFERRED_BYTES: usize = 16 << 20;
/// Entries per stored batch that make another snapshot worth it (a snapshot
/// costs in proportion to the index, a replay in proportion to the batches).
const SNAPSHOT_ENTRIES_PER_BATCH: u64 = 8_192;

/// A frame handle the shell can store. `from_held` makes one from bytes the
/// receiver held back (a batch that arrived ahead of its turn); `bytes` reads
/// one back (a copy where the handle is not in this memory: a JS buffer).
pub trait StoredFrame: Clone {
    fn from_held(bytes: Vec<u8>) -> Self;
    fn bytes(&self) -> std::borrow::Cow<'_, [u8]>;
    /// A snapshot part the shell already checked and decompressed
    /// ([`StoredPart::Unsealed`]); false for anything as stored.
    fn unsealed(&self) -> bool {
        false
    }
}

/// A visit that stores nothing (the native receiver) keeps no frames.
impl StoredFrame for () {
    fn from_held(_: Vec<u8>) -> Self {}

    fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(&[])
    }
}

impl StoredFrame for Vec<u8> {
    fn from_held(bytes: Vec<u8>) -> Self {
        bytes
    }

    fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(self)
    }
}

/// One thing to write, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreOp<F> {
    /// Drop everything stored (a fresh snapshot is coming).
    Clear,
    /// Store a batch frame whose first operation is `first`.
    Batch { first: Seq, frame: F },
}

/// One write for the shell: `ops` in order, then `state`, atomically.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreWrite<F> {
    pub ops: Vec<StoreOp<F>>,
    pub state: StoredState,
}

/// An index rebuilt from storage, and where to resume.
#[derive(Debug, Default)]
pub struct Rebuilt {
    pub index: Index,
    /// The epoch and next sequence of the stored index; `None` when nothing
    /// usable was stored (then the shell clears its store).
    pub resume: Option<(Epoch, Seq)>,
    pub complete: bool,
    /// The stored snapshot it started from, if any.
    pub snapshot: Option<StoredSnapshot>,
    /// Batch frames applied after the snapshot (or from the start).
    pub replayed: u64,
}

/// Rebuilds the index from the stored state, the stored snapshot parts (if
/// the state names a snapshot) and the stored batch frames after it, in key
/// order. Anything but a whole snapshot followed by a clean, contiguous part
/// of one log that ends where the state says gives an empty index and no
/// resume point.
pub fn rebuild<P: AsRef<[u8]>, B: AsRef<[u8]>>(
    state: Option<StoredState>,
    parts: impl IntoIterator<Item = P>,
    frames: impl IntoIterator<Item = B>,
) -> Rebuilt {
    let mut r = Rebuilder::new(state);
    for p in parts {
        if !r.push_part(p.as_ref()) {
            break;
        }
    }
    for f in frames {
        if !r.push(f.as_ref()) {
            break;
        }
    }
    r.finish()
}

/// [`rebuild`] a frame at a time, so a shell can answer queries from the part
/// already rebuilt (the first screens of a big cached index) while the rest is
/// applied in short steps.
#[derive(Debug)]
pub struct Rebuilder {
    state: Option<StoredState>,
    index: Index,
    end: Seq,
    failed: bool,
    /// Snapshot parts still expected (they come before any frame).
    parts_left: u32,
    restoring: Option<SnapshotRestorer>,
    replayed: u64,
}

impl Rebuilder {
    pub fn new(state: Option<StoredState>) -> Self {
        let snapshot = state.and_then(|s| s.snapshot);
        Rebuilder {
            // A snapshot has a head at least.
            failed: state.is_none() || snapshot.is_some_and(|s| s.parts == 0),
            state,
            index: Index::new(),
            end: snapshot.map_or(Seq(0), |s| s.next),
            parts_left: snapshot.map_or(0, |s| s.parts),
            restoring: None,
            replayed: 0,
        }
    }

    /// The stored snapshot this rebuild starts from, if the state names one.
    pub fn snapshot(&self) -> Option<StoredSnapshot> {
        self.state.and_then(|s| s.snapshot)
    }

    /// Snapshot parts still to come before the frames.
    pub fn parts_left(&self) -> u32 {
        self.parts_left
    }

    /// Restores the next part of the stored snapshot (they all come before
    /// any frame); false once the store is not usable.
    pub fn push_part(&mut self, part: &[u8]) -> bool {
        self.push_stored_part(StoredPart::Sealed(part))
    }

    /// [`push_part`](Self::push_part) for a part sealed or already unsealed.
    pub fn push_stored_part(&mut self, part: StoredPart<'_>) -> bool {
        if self.failed || self.parts_left == 0 {
            self.failed = true;
            return false;
        }
        let restored = match self.restoring.as_mut() {
            None => SnapshotRestorer::from_head(part).and_then(|r| {
                let want = self.state.and_then(|s| s.snapshot).map_or(0, |s| s.parts);
                if r.parts() == want {
                    self.restoring = Some(r);
                    Ok(())
                } else {
                    Err(crate::index::SnapshotError::Incomplete {
                        got: want,
                        want: r.parts(),
                    })
                }
            }),
            Some(r) => r.push_part(part),
        };
        self.parts_left -= 1;
        if restored.is_ok()
            && self.parts_left == 0
            && let Some(r) = self.restoring.take()
        {
            match r.finish() {
                Ok(index) => self.index = index,
                Err(_) => self.failed = true,
            }
        }
        if restored.is_err() {
            self.failed = true;
            self.restoring = None;
        }
        !self.failed
    }

    /// Applies the next stored frame; false once the stored batches are not
    /// usable (then [`finish`](Self::finish) gives an empty index).
    pub fn push(&mut self, frame: &[u8]) -> bool {
        if self.parts_left > 0 {
            // Frames before the whole snapshot: the store is not what it says.
            self.failed = true;
        }
        if self.failed {
            return false;
        }
        let Ok(header) = BatchReader::new(frame).map(|r| r.header()) else {
            self.failed = true;
            return false;
        };
        if header.first != self.end || self.index.apply_batch(frame).is_err() {
            self.failed = true;
            return false;
        }
        self.end = header.end();
        self.replayed += 1;
        true
    }

    /// The index rebuilt so far (after a failure, what was applied before it;
    /// [`finish`](Self::finish) then drops it).
    pub fn index(&self) -> &Index {
        match &self.restoring {
            Some(r) => r.index(),
            None => &self.index,
        }
    }

    /// For lookups and listings while rebuilding (they sort lazily).
    pub fn index_mut(&mut self) -> &mut Index {
        match &mut self.restoring {
            Some(r) => r.index_mut(),
            None => &mut self.index,
        }
    }

    pub fn failed(&self) -> bool {
        self.failed
    }

    /// What is stored cannot be read whole: [`finish`](Self::finish) gives an
    /// empty index and no resume point.
    pub fn abandon(&mut self) {
        self.failed = true;
    }

    pub fn finish(self) -> Rebuilt {
        match self.state {
            Some(state) if !self.failed && self.parts_left == 0 && self.end == state.next => {
                Rebuilt {
                    index: self.index,
                    resume: Some((state.epoch, self.end)),
                    complete: state.complete,
                    snapshot: state.snapshot,
                    replayed: self.replayed,
                }
            }
            _ => Rebuilt::default(),
        }
    }
}

/// What the shell hands on to its user interface.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoredEvent {
    /// The sharer started a fresh snapshot: whatever was shown is gone.
    Reset,
    /// A read made progress, finished or failed.
    Read(ReadEvent),
    /// An index operation from the sharer was not valid and was skipped.
    Refused(IndexError),
    /// The data link was lost; the session waits for a new one.
    LinkLost,
    /// The sharer asks for the link's password.
    PasswordNeeded,
    /// A session with the sharer opened (after its welcome).
    Opened,
    /// The sharer said something about uploads.
    Upload(crate::UploadNews),
    Ended {
        reason: EndReason,
    },
}

/// How far the index is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredProgress {
    /// Entries in the index now (from the cache and from the sharer).
    pub received: u64,
    /// Entries the sharer says it has found so far.
    pub announced: u64,
    /// See the module docs ("the complete rule").
    pub complete: bool,
    /// Entries committed to storage.
    pub persisted: u64,
    /// Entries rebuilt from storage before the sharer answered.
    pub from_cache: u64,
    /// Set once storage failed; the index then lives in memory only.
    pub storage_problem: Option<String>,
}

/// Why the shell's storage did not take a write, in the shell's words (the
/// browser's, for IndexedDB: storage is on the other side of the sans-IO
/// boundary, so its words are all this side learns).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{words}")]
pub struct StorageError {
    pub words: String,
}

impl StorageError {
    pub fn new(words: impl Into<String>) -> Self {
        StorageError {
            words: words.into(),
        }
    }
}

/// A snapshot whose parts are being built, the index batches held back
/// meanwhile (time, bytes, the shell's handle), and their bytes in all.
#[derive(Debug)]
struct Building<F> {
    cursor: SnapshotCursor,
    deferred: Vec<(Millis, Vec<u8>, F)>,
    deferred_bytes: usize,
}

/// See the module docs.
#[derive(Debug)]
pub struct PersistentReceiver<F> {
    receiver: Receiver,
    config: ReceiverConfig,
    storing: bool,
    channel_open: bool,
    queue: Vec<StoreOp<F>>,
    /// The sequence and entry count after the last queued batch.
    queue_end: Option<(Seq, u64)>,
    /// The write the shell is doing, and where it ends.
    writing: Option<Option<(Seq, u64)>>,
    stored: StoredState,
    persisted_entries: u64,
    from_cache: u64,
    cache_complete: bool,
    storage_problem: Option<String>,
    refused_ops: u64,
    events: VecDeque<StoredEvent>,
    /// Batches stored (or queued) since the last snapshot.
    batches_since_snapshot: u64,
    /// When the last batch was applied.
    last_batch_at: Option<Millis>,
    /// A snapshot write under way (no other write starts meanwhile), and the
    /// number of fresh starts when it began (a fresh start makes it moot).
    snapshot_writing: Option<(StoredState, u64)>,
    fresh_starts: u64,
    /// The time of the frame being handled.
    now: Millis,
    /// A snapshot whose parts are being built, and the index batches that
    /// arrived meanwhile (applied once it is built: the index must not change
    /// under it).
    building: Option<Building<F>>,
    /// After a failed snapshot write, how many batches to wait for before the next try.
    snapshot_retry_after: u64,
}

impl<F: StoredFrame> PersistentReceiver<F> {
    /// A session over `rebuilt` (empty on a first visit). `storage_problem` is
    /// set when the shell has no storage at all; then nothing is written and
    /// batches are acknowledged as soon as they are applied.
    pub fn new(rebuilt: Rebuilt, config: ReceiverConfig, storage_problem: Option<String>) -> Self {
        let storing = storage_problem.is_none();
        let from_cache = rebuilt.index.len() as u64;
        let stored = StoredState {
            epoch: rebuilt.resume.map_or(Epoch(0), |(e, _)| e),
            next: rebuilt.resume.map_or(Seq(0), |(_, s)| s),
            complete: rebuilt.complete,
            snapshot: rebuilt.snapshot,
        };
        let batches_since_snapshot = rebuilt.replayed;
        let receiver_config = ReceiverConfig {
            ack_after_persist: storing,
            ..config.clone()
        };
        PersistentReceiver {
            receiver: Receiver::new(receiver_config, rebuilt.index, rebuilt.resume),
            config,
            storing,
            channel_open: false,
            queue: Vec::new(),
            queue_end: None,
            writing: None,
            stored,
            persisted_entries: from_cache,
            from_cache,
            cache_complete: rebuilt.complete,
            storage_problem,
            refused_ops: 0,
            events: VecDeque::new(),
            batches_since_snapshot,
            last_batch_at: None,
            snapshot_writing: None,
            fresh_starts: 0,
            now: Millis(0),
            building: None,
            snapshot_retry_after: 0,
        }
    }

    /// A session that keeps nothing: batches are acknowledged as soon as they
    /// are applied, nothing is written, and no storage problem is reported.
    pub fn in_memory(config: ReceiverConfig) -> Self {
        let mut r = Self::new(Rebuilt::default(), config, None);
        r.storing = false;
        r.receiver = Receiver::new(r.receiver_config(), Index::new(), None);
        r
    }

    /// Ends the session from this side: a goodbye goes out on an open link
    /// (take it with [`poll_transmit`](Self::poll_transmit)), reads fail.
    pub fn close(&mut self) {
        self.receiver.close();
        self.drain();
    }

    /// Ends the session with `reason`: reads fail with it, an `Ended` event
    /// follows.
    pub fn end(&mut self, reason: EndReason) {
        self.receiver.end(reason);
        self.drain();
    }

    /// A session whose index is being restored from storage: it takes reads
    /// (they wait) and no frame until [`restored`](Self::restored).
    pub fn awaiting_restore(config: ReceiverConfig) -> Self {
        let mut r = Self::new(Rebuilt::default(), config, None);
        r.receiver = Receiver::awaiting_index(r.receiver_config());
        r
    }

    fn receiver_config(&self) -> ReceiverConfig {
        ReceiverConfig {
            ack_after_persist: self.storing,
            ..self.config.clone()
        }
    }

    /// The index restored from storage (empty when nothing usable was
    /// stored): the session resumes from it.
    pub fn restored(&mut self, rebuilt: Rebuilt) {
        let from_cache = rebuilt.index.len() as u64;
        self.stored = StoredState {
            epoch: rebuilt.resume.map_or(Epoch(0), |(e, _)| e),
            next: rebuilt.resume.map_or(Seq(0), |(_, s)| s),
            complete: rebuilt.complete,
            snapshot: rebuilt.snapshot,
        };
        self.batches_since_snapshot = rebuilt.replayed;
        self.persisted_entries = from_cache;
        self.from_cache = from_cache;
        self.cache_complete = rebuilt.complete;
        self.receiver.install_index(rebuilt.index, rebuilt.resume);
        self.drain();
    }

    /// Whether the index is still being restored from storage.
    pub fn is_restoring(&self) -> bool {
        self.receiver.is_awaiting_index()
    }

    /// A data link opened: frames may flow (after a lost one, the session
    /// resumes where the index is).
    pub fn channel_opened(&mut self) {
        self.channel_open = true;
        self.receiver.link_ready();
    }

    /// The data link closed; the shell tries a new one (reads wait meanwhile).
    pub fn channel_closed(&mut self) {
        self.channel_open = false;
        self.receiver.link_lost();
        self.drain();
    }

    /// No new data link will come: the session ends (reads fail with the reason).
    pub fn give_up(&mut self) {
        self.channel_open = false;
        self.receiver.connection_lost();
        self.drain();
    }

    /// One frame from the sharer; `given` is the shell's handle of this very
    /// frame, stored if the frame is a batch to keep.
    pub fn handle_frame(&mut self, now: Millis, frame: &[u8], given: &F) {
        if let Some(b) = &mut self.building
            && frame.first() == Some(&FRAME_INDEX_BATCH)
        {
            // An honest sharer has at most its window unacknowledged; beyond
            // this bound a frame is dropped (and would be sent again).
            if b.deferred_bytes + frame.len() <= SNAPSHOT_DEFERRED_BYTES {
                b.deferred_bytes += frame.len();
                b.deferred.push((now, frame.to_vec(), given.clone()));
            }
            return;
        }
        self.now = now;
        self.receiver.handle_frame(now, frame);
        self.drain_with(Some(given));
    }

    /// See [`Receiver::give_password`].
    pub fn give_password(&mut self, password: &str) {
        self.receiver.give_password(password);
    }

    pub fn handle_timeout(&mut self, now: Millis) {
        if self.channel_open {
            self.receiver.handle_timeout(now);
        }
        self.drain();
    }

    pub fn poll_timeout(&self) -> Option<Millis> {
        // The receiver's timers are the link's (a Hello asked again, a stalled
        // read): none while there is no link. A snapshot's only while one
        // could be taken: a write under way would make the shell wake up for
        // nothing (it asks again after each write).
        let link = self
            .channel_open
            .then(|| self.receiver.poll_timeout())
            .flatten();
        let snapshot = self.snapshot_ready().then(|| self.snapshot_due());
        match (link, snapshot) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next frame to send, while the link is open.
    pub fn poll_transmit(&mut self, now: Millis) -> Option<Vec<u8>> {
        if !self.channel_open {
            return None;
        }
        let frame = self.receiver.poll_transmit(now);
        // Sending may start reads that fail at once.
        self.drain();
        frame
    }

    pub fn poll_event(&mut self) -> Option<StoredEvent> {
        self.events.pop_front()
    }

    /// The next write, if storage is idle and something waits to be written.
    pub fn poll_write(&mut self) -> Option<StoreWrite<F>> {
        if self.writing.is_some() || self.snapshot_writing.is_some() || self.queue.is_empty() {
            return None;
        }
        let end = self.queue_end.take();
        if let Some((seq, _)) = end {
            self.stored.next = seq;
        }
        self.writing = Some(end);
        Some(StoreWrite {
            ops: std::mem::take(&mut self.queue),
            state: self.stored,
        })
    }

    /// The write from [`poll_write`](Self::poll_write) committed, or failed
    /// (the words say why). Either way its batches are acknowledged: the page
    /// still has the entries.
    pub fn write_done(&mut self, result: Result<(), StorageError>) {
        let Some(end) = self.writing.take() else {
            return;
        };
        if let Err(problem) = result
            && self.storage_problem.is_none()
        {
            self.storage_problem = Some(problem.words);
        }
        if let Some((seq, entries)) = end {
            self.receiver.persisted(seq);
            if self.storage_problem.is_none() {
                self.persisted_entries = entries;
            }
        }
    }

    /// Whether the log has grown enough for a snapshot (see the module docs),
    /// whatever the time.
    fn snapshot_wanted(&self) -> bool {
        let entries = self.receiver.index().len() as u64;
        let enough = SNAPSHOT_MIN_BATCHES
            .max(entries / SNAPSHOT_ENTRIES_PER_BATCH)
            .max(self.snapshot_retry_after);
        self.storing
            && self.storage_problem.is_none()
            && self.stored.complete
            && self.batches_since_snapshot >= enough
    }

    /// Wanted, and nothing else is being written or waits to be (so the
    /// index is exactly what the store holds).
    fn snapshot_ready(&self) -> bool {
        self.writing.is_none()
            && self.snapshot_writing.is_none()
            && self.building.is_none()
            && self.queue.is_empty()
            && self.snapshot_wanted()
    }

    /// When a wanted snapshot may be taken: once the batches have paused.
    fn snapshot_due(&self) -> Millis {
        Millis(self.last_batch_at.map_or(0, |t| t.0) + SNAPSHOT_QUIET_MS)
    }

    /// A snapshot is due: the shell takes its parts from
    /// [`snapshot_part`](Self::snapshot_part) until it says there are no more
    /// (as many turns as it likes: index batches that arrive meanwhile wait),
    /// stores them with the returned state in one write that also deletes the
    /// stored batches before `state.next`, then calls
    /// [`snapshot_done`](Self::snapshot_done).
    pub fn poll_snapshot(&mut self, now: Millis) -> Option<StoredState> {
        if !self.snapshot_ready() || now < self.snapshot_due() {
            return None;
        }
        let cursor = self.receiver.index_mut().snapshot_cursor();
        let parts = cursor.count();
        self.building = Some(Building {
            cursor,
            deferred: Vec::new(),
            deferred_bytes: 0,
        });
        let state = StoredState {
            snapshot: Some(StoredSnapshot {
                next: self.stored.next,
                parts,
            }),
            ..self.stored
        };
        self.snapshot_writing = Some((state, self.fresh_starts));
        Some(state)
    }

    /// The next part of the snapshot [`poll_snapshot`](Self::poll_snapshot)
    /// began; `None` once all are built (then the index batches that waited
    /// are applied).
    pub fn snapshot_part(&mut self) -> Option<Vec<u8>> {
        let b = self.building.as_mut()?;
        if let Some(part) = b.cursor.next_part(self.receiver.index()) {
            return Some(part);
        }
        if let Some(b) = self.building.take() {
            for (now, frame, given) in b.deferred {
                self.handle_frame(now, &frame, &given);
            }
        }
        None
    }

    /// Whether a snapshot's parts are being built.
    pub fn snapshot_building(&self) -> bool {
        self.building.is_some()
    }

    /// The snapshot write from [`poll_snapshot`](Self::poll_snapshot) committed
    /// or failed. A failure loses nothing (the batches are still stored); the
    /// next try waits for twice as many batches.
    pub fn snapshot_done(&mut self, result: Result<(), StorageError>) {
        let Some((state, fresh_starts)) = self.snapshot_writing.take() else {
            return;
        };
        match result {
            // The sharer started over meanwhile: the Clear queued since drops it.
            Ok(()) if fresh_starts != self.fresh_starts => {}
            Ok(()) => {
                self.stored.snapshot = state.snapshot;
                self.batches_since_snapshot = 0;
                self.snapshot_retry_after = 0;
            }
            Err(_) => self.snapshot_retry_after = self.batches_since_snapshot.saturating_mul(2),
        }
    }

    fn drain(&mut self) {
        self.drain_with(None);
    }

    fn drain_with(&mut self, given: Option<&F>) {
        while let Some(event) = self.receiver.poll_event() {
            match event {
                ReceiverEvent::Started { epoch, fresh } => {
                    if fresh {
                        self.queue.push(StoreOp::Clear);
                        self.from_cache = 0;
                        self.persisted_entries = 0;
                        self.cache_complete = false;
                        // What is stored from now on is a new log: not complete
                        // until the sharer says so again, and no snapshot of it yet.
                        self.stored.complete = false;
                        self.stored.snapshot = None;
                        self.stored.next = Seq(0);
                        self.batches_since_snapshot = 0;
                        self.fresh_starts += 1;
                        self.events.push_back(StoredEvent::Reset);
                    }
                    self.stored.epoch = epoch;
                    self.events.push_back(StoredEvent::Opened);
                }
                ReceiverEvent::Applied {
                    header,
                    persist,
                    refused,
                } => {
                    self.refused_ops += refused.len() as u64;
                    self.events
                        .extend(refused.into_iter().map(StoredEvent::Refused));
                    let frame = match persist {
                        Some(BatchBytes::Given) => given.cloned(),
                        Some(BatchBytes::Held(bytes)) => Some(F::from_held(bytes)),
                        _ => None,
                    };
                    self.last_batch_at = Some(self.now);
                    if let Some(frame) = frame
                        && self.storing
                    {
                        self.batches_since_snapshot += 1;
                        self.queue.push(StoreOp::Batch {
                            first: header.first,
                            frame,
                        });
                        self.queue_end = Some((header.end(), self.receiver.index().len() as u64));
                        if header.snapshot_complete {
                            self.stored.complete = true;
                        }
                    }
                }
                ReceiverEvent::Read(r) => self.events.push_back(StoredEvent::Read(r)),
                ReceiverEvent::LinkLost => self.events.push_back(StoredEvent::LinkLost),
                ReceiverEvent::PasswordNeeded => self.events.push_back(StoredEvent::PasswordNeeded),
                ReceiverEvent::Upload(news) => self.events.push_back(StoredEvent::Upload(news)),
                ReceiverEvent::Ended { reason } => {
                    self.events.push_back(StoredEvent::Ended { reason })
                }
            }
        }
    }

    pub fn progress(&self) -> StoredProgress {
        let p = self.receiver.progress();
        StoredProgress {
            received: p.received,
            announced: p.announced,
            complete: p.complete
                || (self.cache_complete && !self.channel_open && !self.receiver.is_open()),
            persisted: self.persisted_entries,
            from_cache: self.from_cache,
            storage_problem: self.storage_problem.clone(),
        }
    }

    /// Index operations from the sharer that were not valid and were skipped.
    pub fn refused_ops(&self) -> u64 {
        self.refused_ops
    }

    /// Bytes of index batches received from the sharer in this session.
    pub fn index_wire_bytes(&self) -> u64 {
        self.receiver.index_wire_bytes()
    }

    /// Whether the index holds every child of folder `dir`
    /// ([`Receiver::folder_listed`], or a complete stored index).
    pub fn folder_listed(&self, dir: EntryId) -> bool {
        self.receiver.folder_listed(dir) || self.progress().complete
    }

    /// Folders known whole before the index is complete.
    pub fn folders_listed(&self) -> u64 {
        self.receiver.folders_listed()
    }

    /// The epoch of the index held ([`Receiver::position`]).
    pub fn epoch(&self) -> Epoch {
        self.receiver.position().0
    }

    pub fn index(&self) -> &Index {
        self.receiver.index()
    }

    /// Mutable access for lookups and listings (they sort lazily).
    pub fn index_mut(&mut self) -> &mut Index {
        self.receiver.index_mut()
    }

    /// Starts reading `len` bytes at `offset` of a file in the index (of
    /// `version` only, if given: [`crate::receiver::Receiver::start_read`]).
    pub fn start_read(
        &mut self,
        entry: EntryId,
        version: Option<Generation>,
        offset: u64,
        len: u64,
    ) -> Result<ReadHandle, StartReadError> {
        let handle = self.receiver.start_read(entry, version, offset, len);
        self.drain();
        handle
    }

    /// Stops a read; no more events come for it.
    pub fn cancel_read(&mut self, handle: ReadHandle) {
        self.receiver.cancel_read(handle);
    }
}

#[cfg(test)]
mod tests;
