//! `linkfs mount`: the share as a read-only FUSE filesystem (fuser 0.18).
//!
//! - lookup, getattr, readdir(plus), readlink, statfs come from the local index:
//!   no round trip. READDIRPLUS hands the kernel every entry's attributes with
//!   the listing, so `ls -l` of a 100,000-entry folder costs no per-file call;
//!   READDIRPLUS_AUTO lets the kernel ask for only names where nobody looks at
//!   the attributes (`find`, `ls -f`), and the answer to a folder's first call
//!   (which always asks for attributes) is kept short ([`FIRST_LISTING_ENTRIES`]). Attributes with every listing call made
//!   the kernel build an inode per name: `find` over 10M entries took 14x the
//!   disk, `ls -f` of a million names 6.7x; with AUTO 1.5x and 1.3x, and `ls -l`
//!   of 100,000 no slower (0.95-1.01 s against 1.09, the disk 0.83-1.04).
//! - The mount is up before the whole index is here: it waits only until
//!   the root folder is whole (the sharer says which folders its walk has
//!   read to the end: [`linkfs_proto::listed`]). A listing of a folder, or a
//!   lookup of a name not (yet) in it, waits until that folder is whole, at
//!   most [`LISTING_WAIT`] (then EIO and a log line, never a listing with
//!   names missing); a name already there answers at once. At ten million
//!   entries the root lists in well under a second where the whole index
//!   takes half a minute.
//! - Inode numbers are entry ids + 1 (the root is 1): stable for the session;
//!   their generation is the sharer's epoch ([`LinkFs::inode_generation`]),
//!   so a file held open reads its new versions (`tail -f` works).
//! - read goes through a [`BlockCache`] of 1 MiB blocks keyed by (entry,
//!   generation, block): a block is fetched once with the same verified,
//!   pipelined reads the browser uses, and a sequential reader gets the next
//!   [`MountOptions::readahead_blocks`] blocks fetched ahead. A small file read
//!   from its start right after the one before it in its folder's listing
//!   order (the order `cat *`, `tar c`, `grep -r` and `cp -r` read them) gets
//!   the next small files of its folder fetched ahead, at most [`FILES_AHEAD`]
//!   files and [`FILES_AHEAD_BYTES`] bytes: a folder of small files read one
//!   after another costs about one round trip per [`FILES_AHEAD`] files, not
//!   one per file, and a reader that jumps around fetches nothing it did not
//!   ask for. A block that cannot
//!   be fetched makes the read fail with EIO (and a log line): never zeros,
//!   never a short file. A read the sharer refuses because the file changed
//!   on its disk since the version the index names waits for the new
//!   version ([`CHANGED_WAIT`]) and reads that: a log read while it grows
//!   (`tail -f`, a file opened straight after a write) gets its bytes.
//! - No extended attributes: getxattr and listxattr are left unimplemented
//!   (ENOSYS), so the kernel stops asking after the first time. Answering
//!   "no such attribute" instead cost `ls -l` two round trips per file (it asks
//!   for ACLs and the security label): 4.8 s against 0.6 s local for 100,000.
//! - Files and folders belong to the user who mounts; modes and mtimes are the
//!   sharer's. Attributes are valid for [`ATTR_TTL`] (the index may change).
//! - No opendir: the first is answered ENOSYS, and the kernel (5.1 and later,
//!   which says so with `FUSE_NO_OPENDIR_SUPPORT`) then opens folders itself,
//!   asks neither opendir nor releasedir again, and keeps every listing
//!   (`FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE`). Each of those two calls per folder
//!   was a round trip, and a round trip that wakes the other core costs about
//!   60 us on these 2 virtual cores: the second `find` over 200,000 entries took
//!   0.30 s with them, 0.12 s without (the disk's 0.18). A folder of more than
//!   [`KEPT_LISTING_MAX`] names is let go soon after a listing of it (see
//!   `kept`); the kernel copying such a folder's listing into its cache first
//!   costs the first `ls -f` of a million names 0.57-0.65 s against
//!   0.42-0.52. A kernel without it gets opendir as before: folders of up to
//!   [`KEPT_LISTING_MAX`] names opened with their listings kept. A kept
//!   listing costs no listing call until it changes. Every change the index records (once it is complete)
//!   lets its folders go ([`follow_changes`]); a folder opened before the
//!   index was complete is let go then if it changed meanwhile; and when
//!   changes were lost (or the sharer started over) every kept listing is
//!   let go ([`KeptListings`], the `kept` module).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyDirectoryPlus,
    ReplyEntry, ReplyOpen, ReplyStatfs, Request,
};
use linkfs_core::{EntryRef, Index, ReadFailure};
use linkfs_proto::{EntryId, EntryKind, ReadErrorCode};

use super::{Client, ReadError};

mod kept;

pub use kept::{ChangeFollower, KeptListings, follow_changes};

/// Folders of at most this many names have their listings kept by the
/// kernel (see the `kept` module); bigger ones, which a kernel that opens
/// folders without opendir keeps anyway, are let go soon after each listing. A listing served from the kernel asks
/// the mount nothing, so it brings no attributes either: `ls -l` a second
/// time, its names' attributes expired ([`ATTR_TTL`]), then looks every name
/// up on its own (a round trip each, about 24 us here) where a listing asked
/// of the mount hands them over in bulk (READDIRPLUS_AUTO). Bounded here to
/// about 25 ms a folder; `find` gains from the many small folders (the
/// generated 10M tree: 455 names a folder on average).
pub const KEPT_LISTING_MAX: usize = 1_000;
/// The longest name the mount shows (the kernel's NAME_MAX, as `statfs` says):
/// a sharer whose system allows longer ones (macOS and Windows names of up to
/// 255 UTF-16 units are up to 765 bytes) has them left out of listings and
/// refused by name (ENAMETOOLONG), as programs reading a listing expect.
pub const NAME_MAX: usize = 255;
/// How long the kernel may keep attributes and names.
pub const ATTR_TTL: Duration = Duration::from_secs(1);
/// Entries in the answer to a folder's first listing call ("." and ".."
/// counted), which the kernel always asks with attributes. A short answer is
/// legal (only an empty one ends a listing); the next call comes with
/// attributes only if these names were looked at (`ls -l` looks at each name
/// as it reads it), else with names only (`find`, `ls -f`). Each name answered
/// with attributes makes the kernel build an inode: a whole first call (1 MiB,
/// about 6,000 names) made one for nearly every name of the 10M tree; 64 for
/// 64 names of each of its 22,003 folders; 16 took the first `find` from
/// 65.6-73.2 s to 58.5 s. One name (tried 2026-12-03) made `find` over 200,000
/// entries 1.05 -> 0.69-0.79 s but `du -s` 8.97 -> 10.2-10.4 s: `du`, `tar`,
/// `rsync` and `cp -r` read a whole folder before they look at its names, so
/// only the names of this first call come to them without a lookup each, and
/// `ls -l` skips the hidden names that sort first (`.git`), so one name there
/// never makes the kernel ask the next calls with attributes.
pub const FIRST_LISTING_ENTRIES: u64 = 16;
/// Bytes per cached block.
pub const BLOCK: u64 = 1 << 20;
/// A folder's `st_blksize`, as ext4 gives: glibc's `readdir` sizes its buffer
/// by it (32 KiB for this, 1 MiB for [`BLOCK`]), and the kernel allocates and
/// maps a buffer of the size asked for each listing call.
pub const DIR_BLKSIZE: u32 = 4096;
/// Small files of a folder fetched ahead of a reader going through them.
pub const FILES_AHEAD: usize = 32;
/// At most this many bytes of them.
pub const FILES_AHEAD_BYTES: u64 = 8 << 20;
/// How long a FUSE request waits for a block before it fails with EIO.
pub const BLOCK_WAIT: Duration = Duration::from_secs(60);
/// How long a read the sharer refused because the file changed waits for the
/// file's new version to reach the index (the sharer sends it within its
/// settle time, under a second) before it is tried again.
pub const CHANGED_WAIT: Duration = Duration::from_secs(5);
/// Versions a read goes on to when each changes under it (a file written
/// without pause), before it fails with EIO.
pub const CHANGED_RETRIES: u32 = 4;
/// How long a listing or lookup waits for its folder to be whole (the
/// sharer's walk to reach its end) before it fails with EIO: a cold walk of
/// ten million entries took about two minutes here.
pub const LISTING_WAIT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone)]
pub struct MountOptions {
    /// Most bytes of file data kept in memory.
    pub cache_bytes: u64,
    /// Blocks fetched ahead of a sequential reader on one connection, one
    /// more per four lanes open ([`readahead`]). 16 (of 1 MiB): 24 moved
    /// 10-14% more at 100 ms with 0.5% loss (32 lanes sharing the read) but
    /// 10% less on a clean 20 ms path on one connection (docs/benchmarks.md,
    /// "The mount's read-ahead").
    pub readahead_blocks: u64,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            cache_bytes: 64 << 20,
            readahead_blocks: 16,
        }
    }
}

/// Blocks to fetch ahead of a sequential reader: `base` on one connection, and
/// one more for every four lanes open (24 with the 31 a lossy long path opens).
/// Each lane is a window of its own that a loss stalls alone: more blocks in
/// flight keep the others busy meanwhile; where one connection fills the path,
/// no lane opens and more blocks only queue.
pub fn readahead(base: u64, lanes_open: usize) -> u64 {
    base + (lanes_open as u64).div_ceil(4)
}

fn kind_of(kind: EntryKind) -> FileType {
    match kind {
        EntryKind::Dir => FileType::Directory,
        EntryKind::Symlink => FileType::Symlink,
        _ => FileType::RegularFile,
    }
}

fn ino_of(id: u32) -> INodeNo {
    INodeNo(u64::from(id) + 1)
}

fn id_of(ino: INodeNo) -> Option<EntryId> {
    ino.0
        .checked_sub(1)
        .and_then(|i| u32::try_from(i).ok())
        .map(EntryId)
}

fn time_of(secs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
    } else {
        UNIX_EPOCH
            .checked_sub(Duration::from_secs(secs.unsigned_abs()))
            .unwrap_or(UNIX_EPOCH)
    }
}

/// Which block of which version of which file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct BlockKey {
    entry: u32,
    generation: u32,
    block: u64,
}

#[derive(Debug)]
enum Slot {
    Loading,
    Ready { data: Arc<[u8]>, used: u64 },
    Failed(ReadError),
}

/// Why a read from the mount failed (the program reading gets EIO).
#[derive(Debug, thiserror::Error)]
enum MountReadError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("the sharer sent a block shorter than the file")]
    ShortBlock,
    #[error("the sharer did not send the data in time")]
    TimedOut,
    #[error("the data read does not match the file's size")]
    WrongSize,
}

impl MountReadError {
    /// The sharer refused the read: the file changed since the version asked for.
    fn is_changed(&self) -> bool {
        matches!(
            self,
            MountReadError::Read(ReadError::Failed(ReadFailure::Refused(
                _,
                ReadErrorCode::Changed
            )))
        )
    }
}

#[derive(Debug, Default)]
struct CacheState {
    blocks: HashMap<BlockKey, Slot>,
    bytes: u64,
    clock: u64,
    /// Per file: where the last read ended (sequential readers get read-ahead).
    next_offset: HashMap<u32, u64>,
    /// The small file after the last one read from its start: a reader going
    /// through a folder in listing order opens it next.
    next_small: Option<u32>,
}

impl CacheState {
    /// `entry`, a small file, is read from its start, and `next` are the small
    /// files after it in its folder: which of them to fetch ahead. Only for a
    /// reader going through the folder in order (this file is the one after
    /// the last it read): one that jumps around (`find -exec`, a database,
    /// a sampling benchmark) would otherwise wait behind 32 files it never
    /// reads at every open.
    fn small_file_read(&mut self, entry: u32, next: Vec<NextFile>) -> Vec<NextFile> {
        let in_order = self.next_small == Some(entry);
        self.next_small = next.first().map(|f| f.entry);
        if in_order { next } else { Vec::new() }
    }
}

/// File data blocks shared by all FUSE threads (see the module docs).
#[derive(Debug)]
pub struct BlockCache {
    state: Mutex<CacheState>,
    changed: Condvar,
    options: MountOptions,
}

impl BlockCache {
    fn new(options: MountOptions) -> Self {
        BlockCache {
            state: Mutex::new(CacheState::default()),
            changed: Condvar::new(),
            options,
        }
    }

    fn lock(&self) -> MutexGuard<'_, CacheState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Evicts the least recently used ready blocks until under the budget.
    fn evict(&self, s: &mut CacheState) {
        while s.bytes > self.options.cache_bytes {
            let oldest = s
                .blocks
                .iter()
                .filter_map(|(k, v)| match v {
                    Slot::Ready { used, .. } => Some((*used, *k)),
                    _ => None,
                })
                .min();
            let Some((_, key)) = oldest else { break };
            if let Some(Slot::Ready { data, .. }) = s.blocks.remove(&key) {
                s.bytes -= data.len() as u64;
            }
        }
    }

    fn fill(&self, key: BlockKey, result: Result<Vec<u8>, ReadError>) {
        let mut s = self.lock();
        let slot = match result {
            Ok(data) => {
                s.clock += 1;
                s.bytes += data.len() as u64;
                Slot::Ready {
                    data: data.into(),
                    used: s.clock,
                }
            }
            Err(e) => Slot::Failed(e),
        };
        s.blocks.insert(key, slot);
        self.evict(&mut s);
        drop(s);
        self.changed.notify_all();
    }
}

/// A small file to fetch ahead (block 0 holds all of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NextFile {
    entry: u32,
    generation: u32,
    size: u64,
}

/// The small files after `id` in its folder's listing order, within
/// [`FILES_AHEAD`] files and [`FILES_AHEAD_BYTES`] bytes. Folders and large
/// files are passed over (a reader may skip them), looking at most
/// 4 × [`FILES_AHEAD`] entries on.
fn next_small_files(ix: &Index, id: EntryId) -> Vec<NextFile> {
    let Some(parent) = ix.get(id).map(|e| e.parent) else {
        return Vec::new();
    };
    let siblings = ix.children(parent);
    let Some(at) = ix.child_position(parent, id) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut bytes = 0u64;
    for &c in siblings[at + 1..].iter().take(4 * FILES_AHEAD) {
        let Some(e) = ix.get(EntryId(c)) else {
            continue;
        };
        if e.kind != EntryKind::File || e.size == 0 || e.size > BLOCK {
            continue;
        }
        if out.len() >= FILES_AHEAD || bytes + e.size > FILES_AHEAD_BYTES {
            break;
        }
        bytes += e.size;
        out.push(NextFile {
            entry: c,
            generation: e.generation.0,
            size: e.size,
        });
    }
    out
}

/// The filesystem fuser calls.
pub struct LinkFs {
    client: Client,
    cache: Arc<BlockCache>,
    runtime: tokio::runtime::Handle,
    uid: u32,
    gid: u32,
    kept: Arc<KeptListings>,
    /// The kernel opens folders without asking (set in `init`).
    no_opendir: bool,
}

impl LinkFs {
    /// A filesystem over `client`; block fetches run on `runtime`.
    pub fn new(client: Client, options: MountOptions, runtime: tokio::runtime::Handle) -> Self {
        LinkFs {
            client,
            cache: Arc::new(BlockCache::new(options)),
            runtime,
            uid: nix::unistd::getuid().as_raw(),
            gid: nix::unistd::getgid().as_raw(),
            kept: Arc::default(),
            no_opendir: false,
        }
    }

    /// A listing call for folder `ino` at `offset`, as the kernel keeps
    /// listings without opendir: one from the start is kept (noted, so that
    /// changes let it go), and a folder too big to keep is let go soon after.
    /// `complete`: the index was complete before the call.
    fn listing_kept_by_the_kernel(&self, ino: INodeNo, offset: u64, complete: bool, ix: &Index) {
        if !self.no_opendir || !self.kept.keeping() {
            return;
        }
        if offset == 0 {
            self.kept.kept(ino.0, complete);
        }
        if id_of(ino).is_some_and(|dir| ix.child_count(dir) > KEPT_LISTING_MAX) {
            self.kept.too_big(ino.0);
        }
    }

    /// The folders whose listings the kernel may keep, for [`follow_changes`].
    pub fn kept_listings(&self) -> Arc<KeptListings> {
        self.kept.clone()
    }

    fn attr(&self, e: &EntryRef<'_>) -> FileAttr {
        let size = match e.kind {
            EntryKind::Dir => 4096,
            _ => e.size,
        };
        let mtime = time_of(e.mtime);
        FileAttr {
            ino: ino_of(e.id.0),
            size,
            blocks: size.div_ceil(512),
            atime: mtime,
            mtime,
            ctime: mtime,
            crtime: mtime,
            kind: kind_of(e.kind),
            perm: (e.mode & 0o7777) as u16,
            nlink: if e.kind == EntryKind::Dir { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: if e.kind == EntryKind::Dir {
                DIR_BLKSIZE
            } else {
                BLOCK as u32
            },
            flags: 0,
        }
    }

    /// Waits until folder `dir` is whole here (see the module docs); false
    /// if it was not within [`LISTING_WAIT`] or the session ended.
    fn folder_whole(&self, dir: EntryId) -> bool {
        let is_dir = || {
            self.client
                .with_index(|ix| ix.get(dir).is_some_and(|e| e.kind == EntryKind::Dir))
        };
        // Not a folder (or gone): the caller answers that at once.
        if self.client.folder_listed(dir) || !is_dir() {
            return true;
        }
        let whole = self
            .client
            .wait_folder_listed_blocking(&self.runtime, dir, LISTING_WAIT);
        if !whole {
            let path = self
                .client
                .with_index(|ix| ix.path_of(dir).unwrap_or_default());
            tracing::error!(
                path = %String::from_utf8_lossy(&path),
                "the sharer has not finished listing this folder; the program asking gets EIO (try again later)"
            );
        }
        whole
    }

    /// The generation the kernel keeps with every inode: the sharer's epoch.
    /// Inode numbers are entry ids, which a sharer that starts over numbers
    /// anew: an inode the kernel holds from before is then stale, and a
    /// program holding it open gets EIO rather than another file's bytes. A
    /// file's own generation (its versions) is not it: the kernel takes a
    /// changed one for a reused inode number and fails every read of a file
    /// held open once it changes (`tail -f` read nothing new).
    fn inode_generation(&self) -> Generation {
        Generation(self.client.epoch().0)
    }

    /// Waits (at most [`CHANGED_WAIT`]) until the index holds a version of
    /// `entry` other than `generation`; whether it does.
    fn newer_version(&self, entry: EntryId, generation: u32) -> bool {
        let deadline = std::time::Instant::now() + CHANGED_WAIT;
        loop {
            let now = self
                .client
                .with_index(|ix| ix.get(entry).map(|e| e.generation.0));
            match now {
                Some(g) if g != generation => return true,
                None => return false,
                Some(_) if std::time::Instant::now() >= deadline => return false,
                Some(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    fn with_entry<R>(&self, ino: INodeNo, f: impl FnOnce(&Index, EntryRef<'_>) -> R) -> Option<R> {
        let id = id_of(ino)?;
        self.client.with_index(|ix| ix.get(id).map(|e| f(ix, e)))
    }

    /// Starts fetching a block unless it is cached or on its way.
    fn fetch(&self, s: &mut CacheState, key: BlockKey, size: u64) {
        match s.blocks.get(&key) {
            Some(Slot::Loading | Slot::Ready { .. }) => return,
            Some(Slot::Failed(_)) | None => {}
        }
        // A block past the end of what u64 holds (read-ahead near the end of a
        // file a sharer says is 2^64 bytes) is past the end of the file too.
        let Some(offset) = key.block.checked_mul(BLOCK).filter(|o| *o < size) else {
            return;
        };
        let len = BLOCK.min(size - offset);
        s.blocks.insert(key, Slot::Loading);
        let read = self
            .client
            .start_read(EntryId(key.entry), None, offset, len);
        let cache = self.cache.clone();
        self.runtime.spawn(async move {
            cache.fill(key, read.await);
        });
    }

    /// The bytes `offset..offset+size` of a file, all of them or an error.
    fn read_range(
        &self,
        entry: u32,
        generation: u32,
        file_size: u64,
        offset: u64,
        size: u32,
        next_files: &[NextFile],
    ) -> Result<Vec<u8>, MountReadError> {
        let end = offset.saturating_add(u64::from(size)).min(file_size);
        if offset >= end {
            return Ok(Vec::new());
        }
        let first = offset / BLOCK;
        let last = (end - 1) / BLOCK;
        let mut out = Vec::with_capacity((end - offset) as usize);
        let mut s = self.cache.lock();
        // Sequential (this read starts where the last one ended, or at 0): fetch ahead.
        let sequential = offset == 0 || s.next_offset.get(&entry) == Some(&offset);
        s.next_offset.insert(entry, end);
        let ahead = if sequential {
            readahead(
                self.cache.options.readahead_blocks,
                self.client.lanes_open(),
            )
        } else {
            0
        };
        for block in first..=last + ahead {
            self.fetch(
                &mut s,
                BlockKey {
                    entry,
                    generation,
                    block,
                },
                file_size,
            );
        }
        // After this file's own blocks: the next small files of its folder.
        for f in next_files {
            let key = BlockKey {
                entry: f.entry,
                generation: f.generation,
                block: 0,
            };
            self.fetch(&mut s, key, f.size);
        }
        let deadline = std::time::Instant::now() + BLOCK_WAIT;
        for block in first..=last {
            let key = BlockKey {
                entry,
                generation,
                block,
            };
            loop {
                s.clock += 1;
                let clock = s.clock;
                match s.blocks.get_mut(&key) {
                    Some(Slot::Ready { data, used }) => {
                        *used = clock;
                        let base = block * BLOCK;
                        let from = (offset.max(base) - base) as usize;
                        let to = (end.min(base + data.len() as u64) - base) as usize;
                        if to < from || base + data.len() as u64 <= offset.max(base) {
                            return Err(MountReadError::ShortBlock);
                        }
                        out.extend_from_slice(&data[from..to]);
                        break;
                    }
                    Some(Slot::Failed(e)) => {
                        let e = e.clone();
                        // Forget the failure: a later read tries again.
                        s.blocks.remove(&key);
                        return Err(e.into());
                    }
                    Some(Slot::Loading) => {}
                    // Evicted before we got to it: fetch again.
                    None => self.fetch(&mut s, key, file_size),
                }
                let now = std::time::Instant::now();
                if now >= deadline {
                    return Err(MountReadError::TimedOut);
                }
                s = self
                    .cache
                    .changed
                    .wait_timeout(s, deadline - now)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0;
            }
        }
        if out.len() as u64 != end - offset {
            return Err(MountReadError::WrongSize);
        }
        Ok(out)
    }
}

impl Filesystem for LinkFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Attributes with a folder's first listing call, and with later ones
        // only where its names were looked at (the kernel decides: `ls -l`
        // gets them, `find` and `ls -f` only names); concurrent lookups in one
        // folder; cached symlinks; folders opened without opendir.
        let wanted = InitFlags::FUSE_DO_READDIRPLUS
            | InitFlags::FUSE_READDIRPLUS_AUTO
            | InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_CACHE_SYMLINKS
            | InitFlags::FUSE_NO_OPENDIR_SUPPORT;
        let supported = config.capabilities() & wanted;
        let _ = config.add_capabilities(supported);
        self.no_opendir = config
            .capabilities()
            .contains(InitFlags::FUSE_NO_OPENDIR_SUPPORT);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let Some(parent) = id_of(parent) else {
            return reply.error(Errno::ENOENT);
        };
        if name.len() > NAME_MAX {
            return reply.error(Errno::ENAMETOOLONG);
        }
        let find = || {
            self.client.with_index(|ix| {
                let id = ix.lookup_child(parent, name.as_bytes())?;
                ix.get(id).map(|e| self.attr(&e))
            })
        };
        let mut found = find();
        // Not there (yet): only "no such name" once the folder is whole.
        if found.is_none() && !self.client.folder_listed(parent) {
            if !self.folder_whole(parent) {
                return reply.error(Errno::EIO);
            }
            found = find();
        }
        match found {
            Some(attr) => reply.entry(&ATTR_TTL, &attr, self.inode_generation()),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.with_entry(ino, |_, e| self.attr(&e)) {
            Some(attr) => reply.attr(&ATTR_TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.with_entry(ino, |_, e| (e.kind, e.target.to_vec())) {
            Some((EntryKind::Symlink, target)) => reply.data(&target),
            Some(_) => reply.error(Errno::EINVAL),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if flags.acc_mode() != fuser::OpenAccMode::O_RDONLY {
            return reply.error(Errno::EROFS);
        }
        match self.with_entry(ino, |_, e| e.kind) {
            Some(EntryKind::File) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Some(EntryKind::Dir) => reply.error(Errno::EISDIR),
            Some(_) => reply.error(Errno::EINVAL),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(entry) = id_of(ino) else {
            return reply.error(Errno::ENOENT);
        };
        // Versions tried that the sharer said changed.
        let mut changed = 0;
        loop {
            let Some((kind, generation, file_size, path)) = self.with_entry(ino, |ix, e| {
                (
                    e.kind,
                    e.generation.0,
                    e.size,
                    ix.path_of(e.id).unwrap_or_default(),
                )
            }) else {
                return reply.error(if changed > 0 {
                    Errno::EIO
                } else {
                    Errno::ENOENT
                });
            };
            if kind != EntryKind::File {
                return reply.error(if changed > 0 {
                    Errno::EIO
                } else {
                    Errno::EISDIR
                });
            }
            let next_files = if offset == 0 && file_size <= BLOCK {
                let next = self.client.with_index(|ix| next_small_files(ix, entry));
                self.cache.lock().small_file_read(entry.0, next)
            } else {
                Vec::new()
            };
            let e = match self.read_range(entry.0, generation, file_size, offset, size, &next_files)
            {
                Ok(data) => return reply.data(&data),
                Err(e) => e,
            };
            // Changed on the sharer's disk since the index said: read the new
            // version once it is here (a file held open follows a growing log).
            if e.is_changed() && changed < CHANGED_RETRIES && self.newer_version(entry, generation)
            {
                changed += 1;
                continue;
            }
            tracing::error!(
                path = %String::from_utf8_lossy(&path),
                offset,
                size,
                error = %e,
                "a read from the mount failed (the program reading gets EIO)"
            );
            return reply.error(Errno::EIO);
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if self.no_opendir {
            return reply.error(Errno::ENOSYS);
        }
        let found = id_of(ino).and_then(|dir| {
            self.client
                .with_index(|ix| ix.get(dir).map(|e| (e.kind, ix.child_count(dir))))
        });
        match found {
            // Kept up to KEPT_LISTING_MAX names (before the index is
            // complete, checked once it is: see `kept`); an open without
            // these flags drops what was kept.
            Some((EntryKind::Dir, names)) if names <= KEPT_LISTING_MAX && self.kept.keeping() => {
                self.kept.kept(ino.0, self.client.status().complete);
                reply.opened(
                    FileHandle(0),
                    FopenFlags::FOPEN_CACHE_DIR | FopenFlags::FOPEN_KEEP_CACHE,
                )
            }
            Some((EntryKind::Dir, _)) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Some(_) => reply.error(Errno::ENOTDIR),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(dir) = id_of(ino) else {
            return reply.error(Errno::ENOENT);
        };
        if offset == 0 && !self.folder_whole(dir) {
            return reply.error(Errno::EIO);
        }
        // Read before the index is: a folder listed while it completes counts
        // as listed before.
        let complete = offset == 0 && self.no_opendir && self.client.status().complete;
        let done = self.client.with_index(|ix| {
            let e = ix.get(dir)?;
            if e.kind != EntryKind::Dir {
                return Some(Err(Errno::ENOTDIR));
            }
            self.listing_kept_by_the_kernel(ino, offset, complete, ix);
            self.kept.listing(ino.0, ix);
            let parent = if dir.0 == 0 { ino } else { ino_of(e.parent.0) };
            // Offsets: "." 0, ".." 1, the child at position p p + 2; each
            // entry carries the offset after it.
            if offset == 0 && reply.add(ino, 1, FileType::Directory, ".") {
                return Some(Ok(()));
            }
            if offset <= 1 && reply.add(parent, 2, FileType::Directory, "..") {
                return Some(Ok(()));
            }
            let from = offset.saturating_sub(2) as usize;
            ix.children_named(dir, from, |at, child, kind, name| {
                name.len() > NAME_MAX
                    || !reply.add(
                        ino_of(child),
                        at as u64 + 3,
                        kind_of(kind),
                        OsStr::from_bytes(name),
                    )
            });
            Some(Ok(()))
        });
        match done {
            Some(Ok(())) => reply.ok(),
            Some(Err(e)) => reply.error(e),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let Some(dir) = id_of(ino) else {
            return reply.error(Errno::ENOENT);
        };
        if offset == 0 && !self.folder_whole(dir) {
            return reply.error(Errno::EIO);
        }
        // Read before the index is: a folder listed while it completes counts
        // as listed before.
        let complete = offset == 0 && self.no_opendir && self.client.status().complete;
        let generation = self.inode_generation();
        let done = self.client.with_index(|ix| {
            let e = ix.get(dir)?;
            if e.kind != EntryKind::Dir {
                return Some(Err(Errno::ENOTDIR));
            }
            self.listing_kept_by_the_kernel(ino, offset, complete, ix);
            self.kept.listing(ino.0, ix);
            let own = self.attr(&e);
            let parent_attr = if dir.0 == 0 {
                own
            } else {
                ix.get(e.parent).map_or(own, |p| self.attr(&p))
            };
            let children = ix.children(dir);
            let total = children.len() as u64 + 2;
            let end = if offset == 0 {
                total.min(FIRST_LISTING_ENTRIES)
            } else {
                total
            };
            let mut at = offset;
            while at < end {
                let full = match at {
                    0 => reply.add(ino, 1, ".", &ATTR_TTL, &own, Generation(0)),
                    1 => reply.add(
                        parent_attr.ino,
                        2,
                        "..",
                        &ATTR_TTL,
                        &parent_attr,
                        Generation(0),
                    ),
                    _ => {
                        let child = children[(at - 2) as usize];
                        let Some(c) = ix.get(EntryId(child)).filter(|c| c.name.len() <= NAME_MAX)
                        else {
                            at += 1;
                            continue;
                        };
                        let attr = self.attr(&c);
                        reply.add(
                            attr.ino,
                            at + 1,
                            OsStr::from_bytes(&c.name),
                            &ATTR_TTL,
                            &attr,
                            generation,
                        )
                    }
                };
                if full {
                    break;
                }
                at += 1;
            }
            Some(Ok(()))
        });
        match done {
            Some(Ok(())) => reply.ok(),
            Some(Err(e)) => reply.error(e),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let (files, bytes) = self
            .client
            .with_index(|ix| (ix.len() as u64, ix.file_bytes()));
        reply.statfs(
            bytes.div_ceil(4096),
            0,
            0,
            files,
            0,
            4096,
            NAME_MAX as u32,
            4096,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkfs_proto::{EntryView, Generation as EntryGeneration, OpView};

    #[test]
    fn read_ahead_grows_with_the_lanes_open_and_not_without_them() {
        let base = MountOptions::default().readahead_blocks;
        assert_eq!(readahead(base, 0), 16, "one connection: 16 blocks");
        assert_eq!(readahead(base, 7), 18);
        assert_eq!(
            readahead(base, 31),
            24,
            "every lane a lossy long path opens"
        );
    }

    fn put(ix: &mut Index, id: u32, parent: u32, kind: EntryKind, name: &str, size: u64) {
        ix.apply(OpView::Upsert(EntryView {
            id: EntryId(id),
            parent: EntryId(parent),
            kind,
            name: name.as_bytes(),
            size,
            mtime: 0,
            mode: 0o644,
            generation: EntryGeneration(id),
            target: b"",
        }))
        .unwrap();
    }

    fn names(ix: &Index, files: &[NextFile]) -> Vec<String> {
        files
            .iter()
            .map(|f| String::from_utf8_lossy(&ix.get(EntryId(f.entry)).unwrap().name).into_owned())
            .collect()
    }

    fn small(entry: u32) -> NextFile {
        NextFile {
            entry,
            generation: entry,
            size: 10,
        }
    }

    #[test]
    fn a_reader_jumping_around_a_folder_fetches_no_files_ahead() {
        // Broke: every small file opened from its start fetched the next 32 of
        // its folder, so a reader sampling every 250th file of a 100,000-file
        // folder on one host waited behind them: first byte p50 0.5 -> 2-4 ms.
        let mut s = CacheState::default();
        for at in (0..2000).step_by(250) {
            let next = (at + 1..at + 33).map(small).collect();
            assert_eq!(s.small_file_read(at, next), Vec::new(), "file {at}");
        }
    }

    #[test]
    fn a_reader_going_through_a_folder_in_order_gets_the_next_files_from_its_second() {
        let mut s = CacheState::default();
        let next_of = |at: u32| (at + 1..at + 33).map(small).collect::<Vec<_>>();
        assert_eq!(s.small_file_read(0, next_of(0)), Vec::new());
        assert_eq!(s.small_file_read(1, next_of(1)), next_of(1));
        assert_eq!(s.small_file_read(2, next_of(2)), next_of(2));
        // A jump elsewhere stops it, going on in order from there starts it again.
        assert_eq!(s.small_file_read(900, next_of(900)), Vec::new());
        assert_eq!(s.small_file_read(901, next_of(901)), next_of(901));
    }

    #[test]
    fn the_next_small_files_of_the_folder_come_in_listing_order_passing_over_big_ones_and_folders()
    {
        let mut ix = Index::new();
        put(&mut ix, 0, 0, EntryKind::Dir, "", 0);
        put(&mut ix, 1, 0, EntryKind::Dir, "src", 0);
        put(&mut ix, 2, 1, EntryKind::File, "a.c", 100);
        put(&mut ix, 3, 1, EntryKind::File, "b.c", 200);
        put(&mut ix, 4, 1, EntryKind::File, "c.iso", BLOCK + 1);
        put(&mut ix, 5, 1, EntryKind::File, "d.c", 300);
        put(&mut ix, 6, 1, EntryKind::File, "empty", 0);
        put(&mut ix, 7, 1, EntryKind::Dir, "zz", 0);
        put(&mut ix, 8, 7, EntryKind::File, "inner.c", 10);
        put(&mut ix, 9, 0, EntryKind::File, "other.c", 10);
        let next = next_small_files(&ix, EntryId(2));
        assert_eq!(names(&ix, &next), ["b.c", "d.c"]);
        assert_eq!(next[0].generation, 3, "fetched as the index has it");
        assert_eq!(
            names(&ix, &next_small_files(&ix, EntryId(5))),
            Vec::<String>::new()
        );
    }

    #[test]
    fn files_fetched_ahead_stay_within_their_count_and_bytes() {
        let mut ix = Index::new();
        put(&mut ix, 0, 0, EntryKind::Dir, "", 0);
        for i in 1..=200u32 {
            put(&mut ix, i, 0, EntryKind::File, &format!("f{i:03}"), 1000);
        }
        let next = next_small_files(&ix, EntryId(1));
        assert_eq!(next.len(), FILES_AHEAD);
        assert_eq!(next[0].entry, 2);
        let mut ix = Index::new();
        put(&mut ix, 0, 0, EntryKind::Dir, "", 0);
        for i in 1..=40u32 {
            put(&mut ix, i, 0, EntryKind::File, &format!("f{i:03}"), BLOCK);
        }
        let next = next_small_files(&ix, EntryId(1));
        assert_eq!(next.len() as u64, FILES_AHEAD_BYTES / BLOCK);
    }
}
