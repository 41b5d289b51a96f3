//! The numbering thread: the single place ids are given, so they are dense and
//! in emission order. It turns listers' chunks into the consumer's batches,
//! decides which folders get entered (never one already entered: bind-mount
//! loops; optionally none on another filesystem), keeps the counts, and knows
//! when the walk is over: when every folder it put on the stack has been
//! listed to the end.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linkfs_proto::{EntryId, EntryKind};

use super::found::{WalkBatch, WalkOptions, WalkSummary, WalkedEntry};
use super::lister::{Chunk, Found};
use super::problems::ProblemLog;
use super::shared::Shared;
use super::stack::FolderJob;

/// How often the numbering thread looks at the cancel flag while it waits.
const CANCEL_POLL: Duration = Duration::from_millis(50);

pub(super) struct Numbering {
    options: WalkOptions,
    batches: SyncSender<WalkBatch>,
    batch: Vec<WalkedEntry>,
    /// Folders whose listing ended since the last batch went.
    listed: Vec<EntryId>,
    root: WalkedEntry,
    next_id: u32,
    /// Folders put on the stack whose listing has not ended yet.
    outstanding: u64,
    /// Folders being listed (at most one per lister): the sub-folders found
    /// in each so far, which go on the stack together when its last chunk is
    /// numbered (see [`Numbering::number_all`]). Each job held here would
    /// otherwise be on the stack, so this holds nothing the walk did not
    /// hold before.
    waiting: HashMap<EntryId, Listing>,
    /// (device, inode) of every folder entered.
    entered: HashSet<(u64, u64), BuildHasherDefault<InodeHasher>>,
    summary: WalkSummary,
    started: Instant,
}

/// The consumer went away: stop the walk.
struct ConsumerGone;

/// A folder being listed, as far as its chunks have come.
#[derive(Default)]
struct Listing {
    /// Its sub-folders found so far, in the order found (their ids' order).
    subs: Vec<FolderJob>,
    /// Its names so far.
    names: usize,
}

/// `find`, `du`, `rm -r` and the other tools built on gnulib's fts go through
/// a folder of more than this many names in the order of their inode numbers
/// (`FTS_INODE_SORT_DIR_ENTRIES_THRESHOLD`; on disks that sort helps), and
/// in the order listed below it. A mount's inode numbers follow the ids, so
/// the walk lists such a folder's sub-folders in the order it found them.
const FTS_INODE_SORT_NAMES: usize = 10_000;

impl Numbering {
    pub(super) fn new(
        root: WalkedEntry,
        options: WalkOptions,
        batches: SyncSender<WalkBatch>,
        started: Instant,
    ) -> Self {
        Numbering {
            batch: Vec::with_capacity(options.batch_len.max(1)),
            listed: Vec::new(),
            options,
            batches,
            root,
            next_id: 0,
            outstanding: 0,
            waiting: HashMap::new(),
            entered: HashSet::default(),
            summary: WalkSummary::default(),
            started,
        }
    }

    pub(super) fn run(
        mut self,
        shared: &Shared,
        root_job: FolderJob,
        chunks: Receiver<Chunk>,
        listers: Vec<JoinHandle<()>>,
    ) -> WalkSummary {
        let finished = self.number_all(shared, root_job, &chunks);
        // Wake the listers waiting for work and unblock those sending chunks.
        shared.stack.close();
        drop(chunks);
        if finished {
            for lister in listers {
                // A lister never panics; a panicked one has nothing left to report.
                let _ = lister.join();
            }
        }
        // When cancelled, the listers are left to end on their own: one may be
        // stuck in a system call on a dead network mount, and stopping the share
        // must not wait for it.
        let mut summary = self.summary;
        summary.cancelled = !finished;
        (summary.error_count, summary.errors) = ProblemLog::take(&shared.problems);
        summary.elapsed = self.started.elapsed();
        summary
    }

    /// Numbers everything; false if the walk was cancelled.
    fn number_all(
        &mut self,
        shared: &Shared,
        root_job: FolderJob,
        chunks: &Receiver<Chunk>,
    ) -> bool {
        let root = self.root.clone();
        self.entered.insert((root.disk.dev, root.disk.ino));
        if self.emit(root).is_err() {
            return false;
        }
        self.outstanding = 1;
        shared.stack.push_all(&mut vec![root_job]);
        let mut jobs = Vec::new();
        while self.outstanding > 0 {
            if shared.cancelled() {
                return false;
            }
            let chunk = match chunks.recv_timeout(CANCEL_POLL) {
                Ok(chunk) => chunk,
                Err(RecvTimeoutError::Timeout) => {
                    // The listers are slow (a slow disk, a stalled mount):
                    // hand on what was found so far rather than hold it.
                    if (!self.batch.is_empty() || !self.listed.is_empty())
                        && self.send_batch().is_err()
                    {
                        return false;
                    }
                    continue;
                }
                // Every lister stopped: only on cancel.
                Err(RecvTimeoutError::Disconnected) => return false,
            };
            self.summary.skipped_special += chunk.skipped_special;
            let names = chunk.found.len();
            for found in chunk.found {
                if self.number(shared, chunk.parent, found, &mut jobs).is_err() {
                    return false;
                }
            }
            let listing = self.waiting.entry(chunk.parent).or_default();
            listing.names += names;
            listing.subs.append(&mut jobs);
            if !chunk.last {
                continue;
            }
            self.outstanding -= 1;
            self.listed.push(chunk.parent);
            // A folder's sub-folders go on the stack once its listing has
            // ended, all at once, in the reverse of the order they are to be
            // listed in (the stack pops the last pushed): the order a mount
            // lists them in (display order), or for a folder of more than
            // FTS_INODE_SORT_NAMES names the order `find` takes them in. So
            // `find` over a mount of a share still being walked, or a person
            // opening the first folders in the page, finds them whole early.
            // Pushed chunk by chunk, a big folder's last chunk was listed
            // first, and `find` waited most of the walk for its first folder.
            if let Some(Listing { mut subs, names }) = self.waiting.remove(&chunk.parent) {
                self.outstanding += subs.len() as u64;
                if names > FTS_INODE_SORT_NAMES {
                    subs.reverse();
                } else {
                    subs.sort_unstable_by(|a, b| {
                        linkfs_core::display_cmp(job_name(b), job_name(a))
                    });
                }
                shared.stack.push_all(&mut subs);
            }
        }
        if (!self.batch.is_empty() || !self.listed.is_empty()) && self.send_batch().is_err() {
            return false;
        }
        true
    }

    /// Hands on the batch so far and the folders listed with it.
    fn send_batch(&mut self) -> Result<(), ConsumerGone> {
        let entries = std::mem::replace(
            &mut self.batch,
            Vec::with_capacity(self.options.batch_len.max(1)),
        );
        let listed = std::mem::take(&mut self.listed);
        self.batches
            .send(WalkBatch { entries, listed })
            .map_err(|_| ConsumerGone)
    }

    fn number(
        &mut self,
        shared: &Shared,
        parent: EntryId,
        found: Found,
        jobs: &mut Vec<FolderJob>,
    ) -> Result<(), ConsumerGone> {
        let Found {
            mut entry,
            folder_path,
        } = found;
        entry.parent = parent;
        if let Some(path) = folder_path {
            if self.options.one_file_system && entry.disk.dev != self.root.disk.dev {
                shared.problem(
                    &path,
                    "not entered: another filesystem is mounted here".into(),
                );
            } else if !self.entered.insert((entry.disk.dev, entry.disk.ino)) {
                shared.problem(
                    &path,
                    "not entered: it is a folder already shared under another path (a bind mount)"
                        .into(),
                );
            } else {
                jobs.push(FolderJob {
                    id: EntryId(self.next_id),
                    path,
                    dev: entry.disk.dev,
                    ino: entry.disk.ino,
                });
            }
        }
        self.emit(entry)
    }

    /// Gives `entry` the next id and adds it to the batch, sending the batch when full.
    fn emit(&mut self, mut entry: WalkedEntry) -> Result<(), ConsumerGone> {
        let Some(after) = self.next_id.checked_add(1) else {
            // More than 4 billion entries (far more than fits in memory
            // anyway): the id space is full; end the walk here.
            return Err(ConsumerGone);
        };
        entry.id = EntryId(self.next_id);
        self.next_id = after;
        let s = &mut self.summary;
        s.entries += 1;
        match entry.disk.kind {
            EntryKind::File => {
                s.files += 1;
                s.bytes += entry.disk.size;
            }
            EntryKind::Dir => s.dirs += 1,
            EntryKind::Symlink => s.symlinks += 1,
        }
        self.batch.push(entry);
        if self.batch.len() >= self.options.batch_len.max(1) {
            self.send_batch()?;
        }
        Ok(())
    }
}

/// The name of the folder a job lists (the last part of its path).
fn job_name(job: &FolderJob) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    job.path.file_name().map_or(&[], |n| n.as_bytes())
}

/// Hashes (device, inode) pairs: they are not attacker-chosen keys, so a fast
/// multiplicative mix is enough.
#[derive(Debug, Default)]
pub(super) struct InodeHasher(u64);

impl Hasher for InodeHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}
