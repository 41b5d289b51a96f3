//! What a walk is asked and what it finds: its options, the entries it
//! numbers, its summary (shared by the walk, its listers and its numbering).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use linkfs_core::NewEntry;
use linkfs_proto::{Entry, EntryId, Generation};

use super::problems::WalkProblem;
use crate::disk_entry::DiskEntry;

/// Most entries a lister sends to the numbering thread in one message.
pub const CHUNK_LEN: usize = 1024;
/// Batches the numbering thread may have waiting for the consumer.
pub const OUTPUT_BATCHES: usize = 16;

/// What the walk hands on at a time: entries numbered one after another, and
/// the folders whose listing ended with them (every child of such a folder is
/// in this batch or an earlier one), so a share can say a folder is whole
/// long before the walk is over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalkBatch {
    pub entries: Vec<WalkedEntry>,
    pub listed: Vec<EntryId>,
}

/// One entry found by the walk: its number, its place, its name and what
/// the disk says of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkedEntry {
    pub id: EntryId,
    /// The folder holding it; the root is its own parent.
    pub parent: EntryId,
    /// The raw bytes of its name (a Linux name need not be UTF-8).
    pub name: Vec<u8>,
    pub disk: DiskEntry,
}

impl WalkedEntry {
    /// The entry as the wire announces it, at generation 0.
    pub fn to_entry(&self) -> Entry {
        Entry {
            id: self.id,
            parent: self.parent,
            kind: self.disk.kind,
            name: self.name.clone(),
            size: self.disk.size,
            mtime: self.disk.mtime,
            mode: self.disk.mode,
            generation: Generation(0),
            target: self.disk.target.clone(),
        }
    }

    /// The entry for the share index.
    pub fn new_entry(&self) -> NewEntry<'_> {
        self.disk.new_entry(self.id, self.parent, &self.name)
    }

    /// An entry as found; ids are filled in by the numbering thread.
    pub(super) fn found(name: Vec<u8>, disk: DiskEntry) -> Self {
        WalkedEntry {
            id: EntryId::ROOT,
            parent: EntryId::ROOT,
            name,
            disk,
        }
    }
}

/// Called with a folder's path just before the walk lists it (the sharer
/// starts watching it there, so nothing created after the listing is missed).
pub type FolderHook = Arc<dyn Fn(&Path) + Send + Sync>;

/// Lister threads when nothing says otherwise: two per core, at least 8 and
/// at most 16. A lister spends much of its time waiting for the disk to read
/// an inode (a folder nobody looked at lately), so more listers than cores
/// keep more reads in flight. Measured with `linkfs-bench-walk` on 2 cores, a
/// million entries, runs alternated: cold (`--cold`) 4.6-6.5 s with 2
/// listers, 3.8-5.1 s with 8; warm 1.21-1.29 s with 2, 1.10-1.15 s with 8.
/// Each lister holds one open folder, so 16 stay far inside a desktop's 1,024
/// files.
pub fn default_workers() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.saturating_mul(2).clamp(8, 16)
}

/// How to walk.
#[derive(Clone)]
pub struct WalkOptions {
    /// Lister threads (at least 1). The default is [`default_workers`].
    pub workers: usize,
    /// Most entries per batch handed to the consumer (at least 1).
    pub batch_len: usize,
    /// Do not enter folders on another filesystem than the root's (like
    /// `find -xdev`): their mount points are reported as empty folders.
    pub one_file_system: bool,
    /// How many unreadable paths the summary keeps (all are counted).
    pub max_problems: usize,
    /// See [`FolderHook`].
    pub before_listing: Option<FolderHook>,
    /// Walk only what this selection shows (a link that selects paths):
    /// nothing beside it is listed or even looked at twice.
    pub selection: Option<Arc<linkfs_core::Selection>>,
    /// The root's device and inode as the caller opened it: the walk refuses
    /// to start if its path leads elsewhere by now (a symlink put in its
    /// place), so it never lists a folder the share does not read from.
    pub root_identity: Option<(u64, u64)>,
}

impl std::fmt::Debug for WalkOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalkOptions")
            .field("workers", &self.workers)
            .field("batch_len", &self.batch_len)
            .field("one_file_system", &self.one_file_system)
            .field("max_problems", &self.max_problems)
            .field("before_listing", &self.before_listing.is_some())
            .field("selection", &self.selection)
            .field("root_identity", &self.root_identity)
            .finish()
    }
}

impl Default for WalkOptions {
    fn default() -> Self {
        WalkOptions {
            workers: default_workers(),
            batch_len: 1024,
            one_file_system: false,
            max_problems: 16,
            before_listing: None,
            selection: None,
            root_identity: None,
        }
    }
}

/// What the walk found, once it is over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalkSummary {
    /// Entries emitted, the root included.
    pub entries: u64,
    /// Folders, the root included.
    pub dirs: u64,
    pub files: u64,
    pub symlinks: u64,
    /// Sum of the files' sizes.
    pub bytes: u64,
    /// Sockets, fifos and devices: not shared.
    pub skipped_special: u64,
    /// Entries that could not be read (and folders not entered, see
    /// [`WalkOptions::one_file_system`] and the module docs).
    pub error_count: u64,
    /// The first [`WalkOptions::max_problems`] of them, with the reason.
    pub errors: Vec<WalkProblem>,
    /// The walk was cancelled before it was over.
    pub cancelled: bool,
    pub elapsed: Duration,
}
