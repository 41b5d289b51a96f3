//! A visit: the whole receiving side of one share, sans-IO. The browser's
//! index worker and the native `mount`, `ls` and `get` each drive one; they
//! carry frames, timers, data links and storage IO, and decide nothing.
//!
//! ```text
//! shell                                          Visit
//!  what is stored, first <---------------------- Output::Load(First)        (storage only)
//!  stored state + first parts/frames ----------> loaded(clock, state, parts, frames)
//!  the rest, in chunks <------------------------ Output::Load(Parts | Rest) -> loaded_rest / load_failed
//!  open a data link to the sharer <------------- Output::Connect
//!  the handshake's progress, in words ---------> link_progress(words)
//!  it opened / it failed / it closed ----------> link_opened(now) / link_failed(now, kind, words) / link_closed(now)
//!  frame from the sharer ----------------------> handle_frame(now, frame, handle)
//!  send this frame <---------------------------- Output::Transmit(frame)
//!  send this upload chunk (a lane's if any) <--- Output::TransmitBulk(frame)
//!  close the link, or drop the attempt <-------- Output::CloseLink
//!  write this <--------------------------------- Output::Store(job)  -> stored(now, result)
//!  keep this snapshot part for the next write <- Output::SnapshotPart(bytes)
//!  run a step of background work <------------- Output::Work        -> work(clock), in a later turn
//!  status, reads, changes, refusals <----------- Output::Event(event)
//!  nothing more now; wake me at <--------------- Output::Timeout(at) -> handle_timeout(now)
//!  the user: reads, listings -------------------> start_read / cancel_read / index_mut / listed(now)
//! ```
//!
//! [`Visit::poll_output`] hands out everything in one order; a shell loops on
//! it until [`Output::Timeout`], after every input.
//!
//! # The connection's life
//!
//! ```text
//!   Connecting --first link opens--> Connected <---------- a new link opens ---+
//!     | the first attempt fails,         | the link is lost                     |
//!     | or 30 s pass                     v                                      |
//!     v                            Reconnecting --backoff, then Connect--------+
//!   Ended (NotReached)                   | the link is not valid; 5 minutes of failures;
//!                                        | no sharer for 60 s (it may be restarting)
//!                                        v
//!                                      Ended
//! ```
//!
//! A sharer's goodbye, a protocol error or [`Visit::close`] end the visit from
//! any state. Reads wait while reconnecting and continue at their byte (the
//! receiver asks again for what did not arrive). What was received stays
//! readable in the index after the end.
//!
//! # Storage
//!
//! With [`Storage::Kept`] (the browser's IndexedDB) the index is restored
//! from storage in steps first ([`restore`]): a few parts or frames at once,
//! so the first folders list at once; the rest is read in chunks meanwhile,
//! and applied after the page showed its first screen ([`Visit::listed`],
//! [`Visit::shown`]; at most [`FIRST_SCREEN_WAIT_MS`]), [`RESTORE_STEP_MS`] at a time, each step in
//! its own turn of the shell so queries are answered in between. Reads asked for meanwhile wait for it; frames cannot come (the
//! visit says where it resumes only once restored). Then every batch is
//! written as [`crate::persist`] says, and snapshots of the index are built
//! [`SNAPSHOT_STEP_MS`] at a time. Storage failing loses nothing: the visit
//! says so once and goes on in memory.
//!
//! # Changes
//!
//! From the moment the index is complete, every change to it is recorded and
//! handed out as [`VisitEvent::Changed`]: which entries moved where, and
//! which folders' listings are stale ([`IndexChanges::folders`]).
//!
//! Bounds: the output queue holds what one input produced (frames, events of
//! the reads it touched, at most [`crate::index::JOURNAL_LIMIT`] changes);
//! everything else is the receiver's and the store's, bounded there.

pub mod restore;

use std::collections::VecDeque;

use linkfs_proto::{EntryId, Epoch, Generation};

use crate::Millis;
use crate::backoff::{Backoff, BackoffConfig, Retry};
use crate::index::{Index, IndexChange, IndexError};
use crate::persist::{
    PersistentReceiver, Rebuilt, StorageError, StoreWrite, StoredEvent, StoredFrame, StoredState,
};
use crate::receiver::{
    EndReason, FailureKind, ReadEvent, ReadHandle, ReceiverConfig, StartReadError,
};
use restore::Restore;
pub use restore::{FIRST_FRAMES, FIRST_PARTS, LoadRequest, REST_CHUNK_PARTS};

/// How long the first step of restoring a cached index may take, ms (the
/// first folders, before anything is shown).
pub const RESTORE_FIRST_STEP_MS: u64 = 15;
/// How long each later step of the restore may hold the shell, ms.
pub const RESTORE_STEP_MS: u64 = 12;
/// The rest of a cached index waits at most this long for the first listing
/// to be answered ([`Visit::listed`]), ms…
pub const FIRST_SCREEN_WAIT_MS: u64 = 250;
/// …and after it, this long for it to be painted, ms.
pub const FIRST_PAINT_MS: u64 = 40;
/// How long one step of building a snapshot may hold the shell, ms.
pub const SNAPSHOT_STEP_MS: u64 = 8;

/// How a visit behaves; the defaults are what the browser and the CLI use.
#[derive(Debug, Clone)]
pub struct VisitConfig {
    pub receiver: ReceiverConfig,
    /// When to try a new link after one was lost, and when to stop trying.
    pub backoff: BackoffConfig,
    /// A lost link is followed by new ones; when false the visit ends with it
    /// (one link only: tests).
    pub reconnect: bool,
    /// An attempt that neither opens nor fails within this long is dropped
    /// and counts as failed, ms (the first one ends the visit).
    pub attempt_timeout_ms: u64,
    /// While reconnecting, a sharer that is not there is waited for this
    /// long (it may be restarting), ms.
    pub sharer_restart_grace_ms: u64,
    /// Where the index is kept between visits.
    pub storage: Storage,
    /// Snapshot parts read at once when restoring, after the first
    /// ([`REST_CHUNK_PARTS`]).
    pub restore_chunk_parts: u32,
    /// Reads of those chunks out at once (1): 2 where the shell does part of
    /// a read's work on another thread (the browser's unseal worker), so that
    /// thread works on the next chunk while this one applies the last.
    pub restore_reads_ahead: u32,
}

impl Default for VisitConfig {
    fn default() -> Self {
        VisitConfig {
            receiver: ReceiverConfig::default(),
            backoff: BackoffConfig::default(),
            reconnect: true,
            attempt_timeout_ms: 30_000,
            sharer_restart_grace_ms: 60_000,
            storage: Storage::Memory,
            restore_chunk_parts: REST_CHUNK_PARTS,
            restore_reads_ahead: 1,
        }
    }
}

/// Where the index is kept between visits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Storage {
    /// Nowhere: it lives in memory for the visit (the native receiver, whose
    /// index of a million entries arrives in seconds).
    Memory,
    /// The shell's storage: restored at the start, written as it arrives.
    Kept,
    /// The shell has storage but could not open it (the words say why): the
    /// visit goes on in memory and says so.
    Unavailable(String),
}

/// What the user sees of the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VisitStatus {
    /// Making the first data link; `step` is the handshake's progress in words.
    Connecting {
        step: String,
    },
    Connected,
    /// The data link is open and the sharer asks for the link's password,
    /// which was not given yet ([`Visit::give_password`]): nothing of the
    /// share comes before it. A link reopened meanwhile stays here (the
    /// sharer asks again); the session opening makes it `Connected`.
    AtPrompt,
    /// The link was lost and new ones are being tried (reads wait).
    /// `attempts` failed so far; `last` says why the last one failed.
    Reconnecting {
        attempts: u32,
        last: Option<String>,
    },
    /// The visit is over. `browsable`: a link had been open, so what was
    /// received is there to browse.
    Ended {
        reason: EndReason,
        browsable: bool,
    },
}

/// Changes applied to the index after it was complete, in order.
/// `overflowed`: more changed than this says (anything may have changed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexChanges {
    pub changes: Vec<IndexChange>,
    pub overflowed: bool,
}

impl IndexChanges {
    /// The folders whose listings changed (entries added, removed, renamed or
    /// moved in or out), and the changed entries themselves (a folder that
    /// moved or went away), sorted, once each.
    pub fn folders(&self) -> Vec<EntryId> {
        let mut dirs: Vec<EntryId> = self
            .changes
            .iter()
            .flat_map(|c| {
                let places = c.before.iter().chain(c.after.iter());
                places.map(|(p, _)| *p).chain(std::iter::once(c.id))
            })
            .collect();
        dirs.sort_unstable();
        dirs.dedup();
        dirs
    }
}

/// What happened, for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VisitEvent {
    Status(VisitStatus),
    /// A read made progress, finished or failed.
    Read(ReadEvent),
    /// The index changed after it was complete.
    Changed(IndexChanges),
    /// The sharer started over with a fresh snapshot: whatever was shown is gone.
    Reset,
    /// An index operation from the sharer was not valid and was skipped.
    Refused(IndexError),
    /// The cached index is restored: queries and searches see all of it.
    Restored,
    /// Storage failed (the words say how); the index stays in memory.
    StorageFailed(String),
    /// The link asks for a password and none was given yet
    /// ([`Visit::give_password`]). Nothing of the share comes before it.
    PasswordNeeded,
    /// An upload was taken on, moved on, landed or was refused.
    Upload(crate::UploadEvent),
}

/// A storage write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreJob<F> {
    /// Batches and the state after them, in one transaction.
    Batches(StoreWrite<F>),
    /// The snapshot parts handed out since the last job
    /// ([`Output::SnapshotPart`], in order) with this state, in one
    /// transaction that also drops the stored batches before
    /// `state.snapshot.next`.
    Snapshot(StoredState),
}

/// What the shell does next. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output<F> {
    /// Send this frame on the open data link.
    Transmit(Vec<u8>),
    /// Send this chunk of an upload on the open data link: a link of several
    /// connections puts it on one of its lanes (`crate::lanes`), off the
    /// session's own, whose frames it would hold up behind its repairs.
    TransmitBulk(Vec<u8>),
    /// Open a data link to the sharer; report how it went.
    Connect,
    /// Close the data link, or drop the attempt under way.
    CloseLink,
    /// Read this from storage; answer with `loaded`, `loaded_rest` or `load_failed`.
    Load(LoadRequest),
    /// Write this; answer with [`Visit::stored`].
    Store(StoreJob<F>),
    /// One part of the snapshot being built: keep it for the next
    /// [`StoreJob::Snapshot`].
    SnapshotPart(Vec<u8>),
    /// Background work is waiting: call [`Visit::work`] in a later turn
    /// (after other input). Said once per call of `work`.
    Work,
    Event(VisitEvent),
    /// Read these bytes of the file added as `upload`; answer with
    /// [`Visit::upload_bytes`] (or [`Visit::upload_unreadable`]), in order.
    UploadRead {
        upload: linkfs_proto::UploadId,
        offset: u64,
        len: usize,
    },
    /// Nothing more now; call [`Visit::handle_timeout`] at this time, if any.
    Timeout(Option<Millis>),
}

/// How far the index is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VisitProgress {
    /// Entries in the index now (from storage and from the sharer).
    pub received: u64,
    /// Entries the sharer says it found so far.
    pub announced: u64,
    /// Everything the sharer found is here (or, while there is no link, the
    /// stored index was complete).
    pub complete: bool,
    /// Entries written to storage.
    pub persisted: u64,
    /// Entries that came from storage before the sharer answered.
    pub from_cache: u64,
    /// The stored index is still being restored (queries see the part done).
    pub restoring: bool,
    pub storage_problem: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// No link and no attempt (before the first, or waiting to retry).
    None,
    /// An attempt is under way since then.
    Attempt {
        since: Millis,
    },
    Open,
}

/// The write the shell is doing (a snapshot's from the moment its parts
/// are built: no other write starts meanwhile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writing {
    Batches,
    Snapshot(StoredState),
}

/// Snapshots of the index built in a visit: how many, and the last one's
/// bytes and the time building it held the shell (ms).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotFigures {
    pub count: u32,
    pub bytes: u64,
    pub ms: u64,
}

/// See the module docs.
#[derive(Debug)]
pub struct Visit<F> {
    config: VisitConfig,
    receiver: PersistentReceiver<F>,
    restore: Option<Restore<F>>,
    /// The restore waits for the first screen until then.
    restore_held_until: Option<Millis>,
    /// The page said its first screen is shown ([`Visit::shown`]).
    shown: bool,
    /// When the restore began, and how long it took (ms), for figures.
    restore_started: Millis,
    restore_ms: Option<u64>,
    /// Time the restore's steps held the shell, ms (the rest of `restore_ms`
    /// is waiting: for storage, the first screen, other work).
    restore_busy_ms: u64,
    opened_from_snapshot: bool,
    link: Link,
    ever_connected: bool,
    backoff: Backoff,
    retry_at: Option<Millis>,
    /// Since when attempts have found no sharer (it may be restarting).
    gone_since: Option<Millis>,
    status: VisitStatus,
    ended: bool,
    writing: Option<Writing>,
    /// Changes are being recorded (from the moment the index is complete).
    journaling: bool,
    work_said: bool,
    queue: VecDeque<Output<F>>,
    now: Millis,
    /// The snapshot being built (count unused), and those stored.
    building: SnapshotFigures,
    snapshots: SnapshotFigures,
    /// The link's password, once given: sent whenever the sharer asks
    /// (every new link of the visit).
    password: Option<String>,
    /// The sharer asked and no password was given yet.
    password_asked: bool,
    /// Files being added to the share ([`crate::uploads_out`]).
    uploads: crate::UploadsOut,
}

impl<F: StoredFrame> Visit<F> {
    /// A visit starting at `now`; `seed` spreads the retries of many visitors.
    /// With [`Storage::Kept`] the first output asks for what is stored; else
    /// the first is [`Output::Connect`].
    pub fn new(now: Millis, config: VisitConfig, seed: u64) -> Self {
        let (receiver, restore) = match &config.storage {
            Storage::Kept => (
                PersistentReceiver::awaiting_restore(config.receiver.clone()),
                true,
            ),
            Storage::Memory => (
                PersistentReceiver::in_memory(config.receiver.clone()),
                false,
            ),
            Storage::Unavailable(why) => (
                PersistentReceiver::new(
                    Rebuilt::default(),
                    config.receiver.clone(),
                    Some(why.clone()),
                ),
                false,
            ),
        };
        let uploads = crate::UploadsOut::with_max_window(config.receiver.max_upload_window);
        let mut visit = Visit {
            backoff: Backoff::new(config.backoff, seed),
            config,
            receiver,
            restore: None,
            restore_held_until: None,
            shown: false,
            restore_started: now,
            restore_ms: None,
            restore_busy_ms: 0,
            opened_from_snapshot: false,
            link: Link::None,
            ever_connected: false,
            retry_at: None,
            gone_since: None,
            status: VisitStatus::Connecting {
                step: String::new(),
            },
            ended: false,
            writing: None,
            journaling: false,
            work_said: false,
            queue: VecDeque::new(),
            now,
            building: SnapshotFigures::default(),
            snapshots: SnapshotFigures::default(),
            password: None,
            password_asked: false,
            uploads,
        };
        if restore {
            visit.queue.push_back(Output::Load(LoadRequest::First {
                parts: FIRST_PARTS,
                frames: FIRST_FRAMES,
            }));
        } else {
            visit.connect(now);
        }
        visit
    }

    // ----- storage: the restore -------------------------------------------

    /// The answer to [`LoadRequest::First`]: the stored state and the first
    /// parts and frames (in key order). Applies the first folders at once
    /// (for [`RESTORE_FIRST_STEP_MS`]); then the visit connects.
    pub fn loaded(
        &mut self,
        clock: &mut dyn FnMut() -> Millis,
        state: Option<StoredState>,
        parts: Vec<F>,
        frames: Vec<F>,
    ) {
        let (chunk, ahead) = (
            self.config.restore_chunk_parts,
            self.config.restore_reads_ahead,
        );
        self.begin_restore(clock, Restore::first(state, parts, frames, chunk, ahead));
    }

    /// The store could not be read: a failed first read starts from nothing;
    /// a failed later read makes what was restored unusable (no resume point,
    /// so the sharer sends everything again and the store starts over).
    pub fn load_failed(&mut self, clock: &mut dyn FnMut() -> Millis) {
        match &mut self.restore {
            Some(r) => {
                r.rest_failed();
                self.finish_restore_if_done();
            }
            None if self.config.storage == Storage::Kept && self.restore_ms.is_none() => {
                self.begin_restore(clock, Restore::nothing());
            }
            None => {}
        }
        self.settle();
    }

    /// The answer to [`LoadRequest::Parts`] or [`LoadRequest::Rest`].
    pub fn loaded_rest(&mut self, parts: Vec<F>, frames: Vec<F>) {
        if let Some(r) = &mut self.restore {
            r.rest(parts, frames);
        }
        self.finish_restore_if_done();
        self.settle();
    }

    fn begin_restore(&mut self, clock: &mut dyn FnMut() -> Millis, mut restore: Restore<F>) {
        let now = clock();
        self.now = now;
        self.restore_started = now;
        self.opened_from_snapshot = restore.opened_from_snapshot();
        restore.step(Millis(now.0 + RESTORE_FIRST_STEP_MS), clock);
        self.now = self.now.max(clock());
        self.restore_busy_ms += self.now.0.saturating_sub(now.0);
        // Shown already (a kept folder, painted before the store was read): no wait.
        let wait = if self.shown { 0 } else { FIRST_SCREEN_WAIT_MS };
        self.restore_held_until = Some(Millis(now.0 + wait));
        self.restore = Some(restore);
        self.finish_restore_if_done();
        self.connect(self.now);
        self.settle();
    }

    /// The shell answered a listing (the first screen): the rest of the
    /// restore may start once it is painted.
    pub fn listed(&mut self, now: Millis) {
        self.now = self.now.max(now);
        if let Some(until) = &mut self.restore_held_until {
            *until = (*until).min(Millis(now.0 + FIRST_PAINT_MS));
        }
    }

    /// The page showed its first screen without asking the index (it drew a
    /// folder kept from an earlier visit): the rest of the restore goes on now.
    pub fn shown(&mut self, now: Millis) {
        self.now = self.now.max(now);
        self.shown = true;
        if let Some(until) = &mut self.restore_held_until {
            *until = (*until).min(now);
        }
    }

    fn restore_held(&self) -> bool {
        self.restore_held_until.is_some_and(|t| self.now < t)
    }

    fn finish_restore_if_done(&mut self) {
        if !self.restore.as_ref().is_some_and(Restore::is_done) {
            return;
        }
        let Some(r) = self.restore.take() else {
            return;
        };
        self.restore_ms = Some(self.now.0.saturating_sub(self.restore_started.0));
        self.restore_held_until = None;
        // An unusable store needs no clearing here: without a resume point
        // the sharer starts over, and the fresh start clears the store.
        self.receiver.restored(r.finish());
        self.queue.push_back(Output::Event(VisitEvent::Restored));
        if self.link == Link::Open {
            self.receiver.channel_opened();
        }
    }

    /// Runs one step of background work (restoring the stored index, or
    /// building a snapshot) until `clock` says its time is up.
    pub fn work(&mut self, clock: &mut dyn FnMut() -> Millis) {
        self.work_said = false;
        let now = clock();
        self.now = self.now.max(now);
        let held = self.restore_held();
        if let Some(r) = &mut self.restore {
            if !held {
                r.step(Millis(now.0 + RESTORE_STEP_MS), clock);
                let end = clock();
                self.restore_busy_ms += end.0.saturating_sub(now.0);
                self.now = self.now.max(end);
                self.finish_restore_if_done();
            }
        } else if let Some(Writing::Snapshot(state)) = self.writing {
            let until = Millis(now.0 + SNAPSHOT_STEP_MS);
            let built = loop {
                match self.receiver.snapshot_part() {
                    Some(part) => {
                        self.building.bytes += part.len() as u64;
                        self.queue.push_back(Output::SnapshotPart(part));
                        if clock() >= until {
                            break false;
                        }
                    }
                    None => break true,
                }
            };
            self.building.ms += clock().0.saturating_sub(now.0);
            if built {
                self.queue
                    .push_back(Output::Store(StoreJob::Snapshot(state)));
                self.snapshots.count += 1;
                self.snapshots.bytes = self.building.bytes;
                self.snapshots.ms = self.building.ms;
                self.building = SnapshotFigures::default();
            }
        }
        self.settle();
    }

    fn work_waiting(&self) -> bool {
        match &self.restore {
            Some(r) => !self.restore_held() && r.has_work(),
            None => {
                self.receiver.snapshot_building()
                    && matches!(self.writing, Some(Writing::Snapshot(_)))
            }
        }
    }

    /// The write from [`Output::Store`] committed, or failed (the words say
    /// why; nothing is lost: what was received stays in memory).
    pub fn stored(&mut self, now: Millis, result: Result<(), StorageError>) {
        self.now = self.now.max(now);
        match self.writing.take() {
            Some(Writing::Batches) => {
                let first_failure = self.receiver.progress().storage_problem.is_none();
                if let (Err(e), true) = (&result, first_failure) {
                    self.queue
                        .push_back(Output::Event(VisitEvent::StorageFailed(e.words.clone())));
                }
                self.receiver.write_done(result);
            }
            Some(Writing::Snapshot(_)) => self.receiver.snapshot_done(result),
            None => {}
        }
        self.settle();
    }

    // ----- the data link ---------------------------------------------------

    fn connect(&mut self, now: Millis) {
        if self.ended || self.link != Link::None {
            return;
        }
        self.link = Link::Attempt { since: now };
        self.queue.push_back(Output::Connect);
    }

    /// The handshake of the first link made progress (the words say how far).
    pub fn link_progress(&mut self, words: &str) {
        if let VisitStatus::Connecting { step } = &self.status
            && step != words
        {
            self.set_status(VisitStatus::Connecting {
                step: words.to_owned(),
            });
        }
    }

    /// The link asked for by [`Output::Connect`] is open.
    pub fn link_opened(&mut self, now: Millis) {
        self.now = self.now.max(now);
        if self.ended {
            self.queue.push_back(Output::CloseLink);
            return;
        }
        self.link = Link::Open;
        self.ever_connected = true;
        self.backoff.succeeded();
        self.gone_since = None;
        self.retry_at = None;
        if !self.receiver.is_restoring() {
            self.receiver.channel_opened();
        }
        // The sharer asked for a password no one gave yet: it will ask again.
        self.set_status(if self.password_asked {
            VisitStatus::AtPrompt
        } else {
            VisitStatus::Connected
        });
        self.settle();
    }

    /// The attempt asked for by [`Output::Connect`] failed: what kind of
    /// failure, in words.
    pub fn link_failed(&mut self, now: Millis, kind: FailureKind, words: String) {
        self.now = self.now.max(now);
        if !matches!(self.link, Link::Attempt { .. }) || self.ended {
            return;
        }
        self.attempt_failed(kind, words);
        self.settle();
    }

    /// The open link closed (the words of the shell's transport are only
    /// logged by it): reads wait and the visit reconnects, unless the
    /// sharer had said goodbye.
    pub fn link_closed(&mut self, now: Millis) {
        self.now = self.now.max(now);
        if self.link != Link::Open {
            return;
        }
        self.link = Link::None;
        self.uploads.session_lost();
        if self.ended {
            return;
        }
        if !self.config.reconnect {
            self.receiver.give_up();
            self.settle();
            return;
        }
        self.receiver.channel_closed();
        self.settle();
        if !self.ended {
            self.schedule_retry(None);
            self.settle();
        }
    }

    fn attempt_failed(&mut self, kind: FailureKind, words: String) {
        self.link = Link::None;
        if !self.ever_connected {
            return self.end(EndReason::NotReached { kind, words });
        }
        match kind {
            FailureKind::InvalidLink | FailureKind::LinkEnded | FailureKind::PasswordRefused => {
                return self.end(EndReason::NotReached { kind, words });
            }
            FailureKind::SharerGone => {
                let since = *self.gone_since.get_or_insert(self.now);
                if self.now.0.saturating_sub(since.0) >= self.config.sharer_restart_grace_ms {
                    return self.end(EndReason::SharerGoodbye(String::new()));
                }
            }
            _ => {}
        }
        self.schedule_retry(Some(words));
    }

    fn schedule_retry(&mut self, last: Option<String>) {
        match self.backoff.failed(self.now) {
            Retry::At(t) => {
                self.retry_at = Some(t);
                self.set_status(VisitStatus::Reconnecting {
                    attempts: self.backoff.attempts().saturating_sub(1),
                    last,
                });
            }
            Retry::GiveUp => {
                let words = match last {
                    Some(w) => format!("could not reconnect to the sharer ({w})"),
                    None => "could not reconnect to the sharer".to_owned(),
                };
                self.end(EndReason::NotReached {
                    kind: FailureKind::Unreachable,
                    words,
                });
            }
        }
    }

    /// Ends the visit (reads fail with the reason; the index stays).
    fn end(&mut self, reason: EndReason) {
        if self.ended {
            return;
        }
        self.ended = true;
        self.retry_at = None;
        // Uploads not finished end, saying why; what the sharer holds of
        // them stays for a later visit.
        self.uploads.end(&reason.to_string());
        while let Some(e) = self.uploads.poll_event() {
            self.queue.push_back(Output::Event(VisitEvent::Upload(e)));
        }
        // The receiver fails its reads with the reason; its own end event is
        // taken as already said.
        self.receiver.end(reason.clone());
        self.drain_receiver();
        if self.link != Link::None {
            self.link = Link::None;
            self.queue.push_back(Output::CloseLink);
        }
        self.set_status(VisitStatus::Ended {
            reason,
            browsable: self.ever_connected,
        });
    }

    /// Ends the visit from this side: a goodbye goes out on an open link
    /// first, then the link closes.
    pub fn close(&mut self, now: Millis) {
        self.now = self.now.max(now);
        if self.ended {
            return;
        }
        self.receiver.close();
        self.settle();
        self.end(EndReason::ClosedHere);
    }

    // ----- frames and timers ----------------------------------------------

    /// One frame from the sharer; `given` is the shell's handle of this very
    /// frame (a batch to store is stored from it).
    pub fn handle_frame(&mut self, now: Millis, frame: &[u8], given: &F) {
        self.now = self.now.max(now);
        // Before the visit said where it resumes, the sharer has nothing to
        // send: such frames are not the protocol's.
        if self.link != Link::Open || self.receiver.is_restoring() {
            return;
        }
        self.receiver.handle_frame(self.now, frame, given);
        self.settle();
    }

    pub fn handle_timeout(&mut self, now: Millis) {
        self.now = self.now.max(now);
        if let Link::Attempt { since } = self.link
            && now.0 >= since.0.saturating_add(self.config.attempt_timeout_ms)
            && !self.ended
        {
            self.queue.push_back(Output::CloseLink);
            let secs = self.config.attempt_timeout_ms / 1000;
            self.attempt_failed(
                FailureKind::Unreachable,
                format!(
                    "could not reach the sharer within {secs} seconds: they may have stopped sharing, or your networks do not allow a direct connection (the relay needs a TURN server then)"
                ),
            );
        }
        if self.retry_at.is_some_and(|t| now >= t) {
            self.retry_at = None;
            self.connect(now);
        }
        self.receiver.handle_timeout(now);
        self.settle();
    }

    /// The next thing for the shell to do. See the module docs.
    pub fn poll_output(&mut self) -> Output<F> {
        // The receiver sends only while it has a link (a goodbye before a
        // CloseLink included).
        if let Some(frame) = self.receiver.poll_transmit(self.now) {
            self.settle();
            return Output::Transmit(frame);
        }
        if self.link == Link::Open
            && let Some(frame) = self.uploads.poll_frame()
        {
            if frame.first() == Some(&linkfs_proto::FRAME_UPLOAD_CHUNK) {
                return Output::TransmitBulk(frame);
            }
            return Output::Transmit(frame);
        }
        if let Some(out) = self.queue.pop_front() {
            return out;
        }
        if self.link == Link::Open
            && let Some((upload, offset, len)) = self.uploads.poll_read()
        {
            return Output::UploadRead {
                upload,
                offset,
                len,
            };
        }
        if self.writing.is_none() {
            if let Some(write) = self.receiver.poll_write() {
                self.writing = Some(Writing::Batches);
                return Output::Store(StoreJob::Batches(write));
            }
            if let Some(state) = self.receiver.poll_snapshot(self.now) {
                self.writing = Some(Writing::Snapshot(state));
            }
        }
        if !self.work_said && self.work_waiting() {
            self.work_said = true;
            return Output::Work;
        }
        // Reads go on while applying is held for the first screen: storage
        // reads them elsewhere (IndexedDB in its own process).
        if let Some(rest) = self.restore.as_mut().and_then(Restore::rest_request) {
            return Output::Load(rest);
        }
        Output::Timeout(self.next_timeout())
    }

    fn next_timeout(&self) -> Option<Millis> {
        let attempt = match self.link {
            Link::Attempt { since } => Some(Millis(
                since.0.saturating_add(self.config.attempt_timeout_ms),
            )),
            _ => None,
        };
        let held = self
            .restore
            .as_ref()
            .and(self.restore_held_until)
            .filter(|t| self.now < *t);
        [attempt, self.retry_at, held, self.receiver.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    // ----- after every input ----------------------------------------------

    /// Moves what the receiver and the index produced into the output queue.
    fn settle(&mut self) {
        self.drain_receiver();
        if self.restore.is_some() {
            return;
        }
        if !self.journaling && self.receiver.progress().complete {
            self.journaling = true;
            self.receiver.index_mut().record_changes(true);
        }
        if self.journaling {
            let (changes, overflowed) = self.receiver.index_mut().take_changes();
            if overflowed || !changes.is_empty() {
                self.queue
                    .push_back(Output::Event(VisitEvent::Changed(IndexChanges {
                        changes,
                        overflowed,
                    })));
            }
        }
    }

    fn drain_receiver(&mut self) {
        while let Some(event) = self.receiver.poll_event() {
            let event = match event {
                StoredEvent::Reset => VisitEvent::Reset,
                StoredEvent::Read(r) => VisitEvent::Read(r),
                StoredEvent::Refused(e) => VisitEvent::Refused(e),
                StoredEvent::PasswordNeeded => match &self.password {
                    Some(p) => {
                        let p = p.clone();
                        self.receiver.give_password(&p);
                        continue;
                    }
                    None => {
                        self.password_asked = true;
                        self.set_status(VisitStatus::AtPrompt);
                        VisitEvent::PasswordNeeded
                    }
                },
                StoredEvent::Ended { reason } => {
                    // The sharer's goodbye, a protocol error, or a close here.
                    self.end(reason);
                    continue;
                }
                StoredEvent::Opened => {
                    self.uploads.session_opened();
                    // Past any prompt: the session is open.
                    self.set_status(VisitStatus::Connected);
                    continue;
                }
                StoredEvent::Upload(news) => {
                    self.uploads.handle(news);
                    while let Some(e) = self.uploads.poll_event() {
                        self.queue.push_back(Output::Event(VisitEvent::Upload(e)));
                    }
                    continue;
                }
                // The status says it (the link's loss is the shell's report).
                _ => continue,
            };
            self.queue.push_back(Output::Event(event));
        }
    }

    fn set_status(&mut self, status: VisitStatus) {
        if self.status != status {
            self.status = status.clone();
            self.queue
                .push_back(Output::Event(VisitEvent::Status(status)));
        }
    }

    // ----- queries and the user's reads -------------------------------------

    /// What the link lets this visitor do, once the sharer said.
    pub fn rights(&self) -> Option<linkfs_proto::Rights> {
        self.uploads.rights()
    }

    /// Adds a file to the share: `path` relative to the link's folder, its
    /// size and whole-file BLAKE3 hash. Its bytes are asked for with
    /// [`Output::UploadRead`]; what happens comes as [`VisitEvent::Upload`].
    pub fn upload(&mut self, path: Vec<u8>, size: u64, hash: [u8; 32]) -> linkfs_proto::UploadId {
        self.uploads.start(path, size, hash)
    }

    /// Bytes asked for by [`Output::UploadRead`].
    pub fn upload_bytes(&mut self, upload: linkfs_proto::UploadId, offset: u64, data: &[u8]) {
        self.uploads.bytes(upload, offset, data);
    }

    /// The file of `upload` could not be read (`words` say why): it ends.
    pub fn upload_unreadable(&mut self, upload: linkfs_proto::UploadId, words: String) {
        self.uploads.unreadable(upload, words);
        while let Some(e) = self.uploads.poll_event() {
            self.queue.push_back(Output::Event(VisitEvent::Upload(e)));
        }
    }

    pub fn cancel_upload(&mut self, upload: linkfs_proto::UploadId) {
        self.uploads.cancel(upload);
    }

    /// Uploads not finished yet.
    pub fn uploads_pending(&self) -> usize {
        self.uploads.pending()
    }

    /// The sharer asked for a password and there is none to give: the visit
    /// ends with `words` (say how to give one).
    pub fn no_password(&mut self, now: Millis, words: String) {
        self.now = self.now.max(now);
        self.end(EndReason::PasswordRefused(words));
        self.receiver.close();
    }

    /// The link's password (before or after the sharer asked): kept for
    /// the visit's later links too.
    pub fn give_password(&mut self, password: &str) {
        self.password = Some(password.to_owned());
        if std::mem::take(&mut self.password_asked) {
            self.receiver.give_password(password);
        }
    }

    pub fn status(&self) -> &VisitStatus {
        &self.status
    }

    pub fn is_ended(&self) -> bool {
        self.ended
    }

    pub fn progress(&self) -> VisitProgress {
        if let Some(r) = &self.restore {
            let n = r.index().len() as u64;
            return VisitProgress {
                received: n,
                announced: n,
                complete: false,
                persisted: n,
                from_cache: n,
                restoring: true,
                storage_problem: None,
            };
        }
        let p = self.receiver.progress();
        VisitProgress {
            received: p.received,
            announced: p.announced,
            complete: p.complete,
            persisted: p.persisted,
            from_cache: p.from_cache,
            restoring: false,
            storage_problem: p.storage_problem.filter(|w| !w.is_empty()),
        }
    }

    /// The epoch of the sharer's index this one follows (a sharer that started
    /// over numbers its entries anew under a new epoch).
    pub fn epoch(&self) -> Epoch {
        self.receiver.epoch()
    }

    /// The index as far as it is (while restoring: the part restored so far).
    pub fn index(&self) -> &Index {
        match &self.restore {
            Some(r) => r.index(),
            None => self.receiver.index(),
        }
    }

    /// For lookups and listings (they sort lazily).
    pub fn index_mut(&mut self) -> &mut Index {
        match &mut self.restore {
            Some(r) => r.index_mut(),
            None => self.receiver.index_mut(),
        }
    }

    /// The index to search, once it is whole: a search over a partly
    /// restored index would miss names without knowing it.
    pub fn searchable_index(&self) -> Option<&Index> {
        self.restore.is_none().then(|| self.receiver.index())
    }

    /// Starts reading `len` bytes at `offset` of a file (of `version` only,
    /// if given: [`Receiver::start_read`]); events name the handle. While the
    /// stored index is restored the read waits for it.
    pub fn start_read(
        &mut self,
        entry: EntryId,
        version: Option<Generation>,
        offset: u64,
        len: u64,
    ) -> Result<ReadHandle, StartReadError> {
        let handle = self.receiver.start_read(entry, version, offset, len);
        self.settle();
        handle
    }

    /// Stops a read; no more events come for it.
    pub fn cancel_read(&mut self, handle: ReadHandle) {
        self.receiver.cancel_read(handle);
        self.settle();
    }

    // ----- figures ---------------------------------------------------------

    /// Index operations from the sharer that were not valid and were skipped.
    pub fn refused_ops(&self) -> u64 {
        self.receiver.refused_ops()
    }

    /// Bytes of index batches received from the sharer in this visit.
    pub fn index_wire_bytes(&self) -> u64 {
        self.receiver.index_wire_bytes()
    }

    /// Whether the index holds every child of folder `dir`, so a listing of
    /// it is whole before the rest of the index is here (a mount answers it
    /// then; see [`linkfs_proto::listed`]). False while a stored index is
    /// still being restored.
    pub fn folder_listed(&self, dir: EntryId) -> bool {
        self.restore.is_none() && self.receiver.folder_listed(dir)
    }

    /// Folders known whole before the index is complete (for a shell that
    /// waits on one: it changes when one comes).
    pub fn folders_listed(&self) -> u64 {
        self.receiver.folders_listed()
    }

    /// How long restoring the stored index took, ms, once it is done.
    pub fn restore_ms(&self) -> Option<u64> {
        self.restore_ms
    }

    /// How long the restore's steps held the shell so far, ms.
    pub fn restore_busy_ms(&self) -> u64 {
        self.restore_busy_ms
    }

    /// Whether the stored index started from a snapshot.
    pub fn opened_from_snapshot(&self) -> bool {
        self.opened_from_snapshot
    }

    /// Snapshots built so far, and the last one's size and time.
    pub fn snapshot_figures(&self) -> SnapshotFigures {
        self.snapshots
    }
}

// The lifecycle's tests drive a whole visit against a sharer in simulated
// time: `core/tests/visit.rs`.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folders_of_changes_are_both_places_and_the_entry_itself_once_each() {
        let changes = IndexChanges {
            changes: vec![
                IndexChange {
                    id: EntryId(9),
                    before: Some((EntryId(2), b"a".to_vec().into())),
                    after: Some((EntryId(3), b"a".to_vec().into())),
                },
                IndexChange {
                    id: EntryId(10),
                    before: None,
                    after: Some((EntryId(3), b"b".to_vec().into())),
                },
            ],
            overflowed: false,
        };
        assert_eq!(
            changes.folders(),
            vec![EntryId(2), EntryId(3), EntryId(9), EntryId(10)]
        );
    }
}
