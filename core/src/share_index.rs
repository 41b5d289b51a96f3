//! The sharer's index: every entry of the share, and the log that senders stream.
//!
//! Entries are stored column-wise by id (the walk assigns 0, 1, 2 ... with
//! parents first; entries found later get the next free id), names in one byte
//! arena, and each directory keeps the ids of its children (sorted by name on
//! demand, for lookups by path; a big folder can be sorted in short steps
//! instead, outside the write lock: [`FolderSort`]).
//!
//! # The log
//!
//! Every change is one operation at the next log position (`Seq`): an upsert of
//! an entry (it was added, changed, renamed or moved: the entry keeps its id),
//! or the removal of an entry (with everything under it). Each entry remembers
//! the position of its latest operation; an older operation of the same entry
//! is *superseded* and never sent again. So the log read from any position
//! gives every entry that changed since then, once, in its current state, and
//! the removals since then:
//!
//! - a receiver that held the share up to position `p` (and `p` is at or after
//!   [`ShareIndex::horizon`]) gets exactly what changed after `p`;
//! - a fresh receiver reads the log from 0: every live entry, once.
//!
//! Because operations are sent in their *current* state, an entry may be read
//! before its parent's latest operation (it was moved into a folder created
//! later). The sender sends such parents ahead of the entry ([`ShareIndex::last_seq`]
//! says which ones the receiver cannot have yet), so a receiver always knows a
//! parent before its children.
//!
//! The log is held as runs of consecutive positions with consecutive ids
//! (`log_runs`): a walk logs entries in id order, so ten million walked
//! entries are a few runs, not 12 bytes each.
//!
//! # Bounds
//!
//! Superseded positions are dropped from memory once they outnumber the live
//! ones (plus [`COMPACT_SLACK`]); their numbers stay taken. At worst (every
//! run of one) a position costs 16 bytes. Removals are kept
//! for resuming receivers, at most [`KEPT_REMOVALS`]; when older ones are
//! dropped the horizon moves past them, and a receiver that held the share from
//! before the horizon starts over with a fresh snapshot. Ids are never reused.
//!
//! Besides what goes on the wire, the sharer keeps what it needs to serve reads
//! safely: the device and inode the walk saw, and a [`change_stamp`] of the
//! mtime's nanoseconds and the status-change time (ctime), so a read of a file
//! that was replaced or changed after it was announced is refused. The stamp is
//! 4 bytes where the two took 12: it is only ever compared, never shown.
//!
//! # Versions of a file
//!
//! A file's contents are taken to have changed (a new [`Generation`], so
//! receivers drop what they cached and reads of the old version are refused)
//! when its size, mtime, device, inode or ctime differ from what the index
//! holds, or when the caller says it was written ([`ShareIndex::update_written`]:
//! the watcher saw it closed after writing). ctime is the one a user cannot set:
//! a rewrite that keeps the size and restores the mtime (`cp -p`, `rsync -t`,
//! `touch -r`) still moves it. It also moves on chmod, chown, a new hard link
//! and (on most file systems) a rename: such a file gets a new generation too,
//! which costs receivers a cached copy and never serves stale bytes.

use std::collections::HashMap;

use linkfs_proto::batch::{MAX_NAME_LEN, MAX_TARGET_LEN};
use linkfs_proto::{EntryId, EntryKind, EntryView, Epoch, Generation, ReadErrorCode, Seq};

/// Removals remembered for receivers that resume: 100,000. A receiver further
/// behind than the oldest one kept gets a fresh snapshot.
pub const KEPT_REMOVALS: usize = 100_000;
/// Superseded log positions tolerated beyond the live ones before compaction.
pub const COMPACT_SLACK: usize = 65_536;

/// An entry as the walk (or the watcher) found it.
#[derive(Debug, Clone, Copy)]
pub struct NewEntry<'a> {
    pub id: EntryId,
    pub parent: EntryId,
    pub kind: EntryKind,
    pub name: &'a [u8],
    pub size: u64,
    pub mtime: i64,
    pub mtime_nsec: u32,
    pub mode: u32,
    pub target: &'a [u8],
    pub dev: u64,
    pub ino: u64,
    /// Status-change time (ctime) in nanoseconds since the epoch ([`ctime_ns`]),
    /// or [`CTIME_UNKNOWN`].
    pub ctime_ns: i64,
}

/// A ctime the index does not know (read from an index saved before ctimes were
/// kept): it is learnt at the next look at the file, without a new generation.
pub const CTIME_UNKNOWN: i64 = i64::MIN;

/// A status-change time as one number: nanoseconds since the epoch (saturating;
/// only compared for equality, never shown).
pub fn ctime_ns(sec: i64, nsec: i64) -> i64 {
    let t = sec.saturating_mul(1_000_000_000).saturating_add(nsec);
    if t == CTIME_UNKNOWN { t + 1 } else { t }
}

/// Stamps with this bit set are hashes; below it, an mtime's nanoseconds.
const STAMP_HASHED: u32 = 1 << 31;

/// What tells a file's versions apart beyond its size and mtime seconds, in 4
/// bytes: with the ctime known, a 31-bit hash of the mtime's nanoseconds and
/// the ctime (top bit set); with it unknown (a folder shared from a browser
/// tab, an index saved before ctimes were kept), the nanoseconds themselves,
/// which a tab's reads give back to the page ([`ReadTarget::mtime_nsec`]).
/// A hash misses a change only if a file keeps its size, mtime seconds,
/// device and inode and the hashes collide: one change in two billion.
pub fn change_stamp(mtime_nsec: u32, ctime_ns: i64) -> u32 {
    if ctime_ns == CTIME_UNKNOWN {
        return mtime_nsec.min(999_999_999);
    }
    // splitmix64's finalizer over both.
    let mut x = (ctime_ns as u64) ^ (u64::from(mtime_nsec) << 32 | u64::from(mtime_nsec));
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x >> 33) as u32 | STAMP_HASHED
}

/// Whether a file with `mtime_nsec` and `ctime_ns` differs from what `stamp`
/// says. A stamp made without a ctime compares the nanoseconds only (the
/// ctime is learnt, not taken as a change).
fn stamp_differs(stamp: u32, mtime_nsec: u32, ctime_ns: i64) -> bool {
    if stamp & STAMP_HASHED == 0 {
        stamp != mtime_nsec.min(999_999_999)
    } else {
        stamp != change_stamp(mtime_nsec, ctime_ns)
    }
}

/// What the sharer checks before and while it reads a file for a receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadTarget {
    /// Path relative to the shared root, components joined with `/`.
    pub path: Vec<u8>,
    pub size: u64,
    pub mtime: i64,
    pub dev: u64,
    pub ino: u64,
    /// The file's [`change_stamp`] as the index holds it.
    pub stamp: u32,
}

impl ReadTarget {
    /// Whether a file seen now with these nanoseconds and ctime differs from
    /// this version (the size, mtime seconds, device and inode are the
    /// caller's to compare).
    pub fn stamp_differs(&self, mtime_nsec: u32, ctime_ns: i64) -> bool {
        stamp_differs(self.stamp, mtime_nsec, ctime_ns)
    }

    /// The mtime's nanoseconds, where the index holds them (a file without a
    /// known ctime: a tab's); 0 otherwise.
    pub fn mtime_nsec(&self) -> u32 {
        if self.stamp & STAMP_HASHED == 0 {
            self.stamp
        } else {
            0
        }
    }
}

/// What an entry's [`change_stamp`] is taken from when it is added or changed.
#[derive(Debug, Clone, Copy)]
enum StampFrom {
    /// The entry's own `mtime_nsec` and `ctime_ns`.
    Entry,
    /// A stamp another index holds (a part of the share copies the whole's).
    Given(u32),
}

/// Why an entry could not be added, changed or removed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShareIndexError {
    #[error("entry {got} arrived where {expected} was expected (ids must be dense)")]
    IdOutOfOrder { expected: EntryId, got: EntryId },
    #[error("entry {id} names parent {parent}, which is not a directory in the index")]
    BadParent { id: EntryId, parent: EntryId },
    #[error("entry {id} has a name of {len} bytes; at most {max} are shared")]
    NameTooLong { id: EntryId, len: usize, max: usize },
    #[error("symlink {id} has a target of {len} bytes; at most {max} are shared")]
    TargetTooLong { id: EntryId, len: usize, max: usize },
    #[error("the index is full ({0} entries)")]
    Full(usize),
    #[error("entry {0} is not in the index")]
    NoSuchEntry(EntryId),
    #[error("moving folder {id} under {parent} would put it inside itself")]
    Cycle { id: EntryId, parent: EntryId },
    #[error("the shared folder itself cannot be moved or removed")]
    Root,
}

const KIND_MASK: u8 = 3;
const REMOVED: u8 = 4;
/// Where the kind byte (kind bits and [`REMOVED`]) sits in an entry's meta,
/// above its 12 bits of mode.
const META_KIND_SHIFT: u16 = 12;

/// An entry's meta: kind byte `kind` (kind bits, [`REMOVED`]) and `mode`.
fn meta_of(kind: u8, mode: u16) -> u16 {
    (u16::from(kind) << META_KIND_SHIFT) | (mode & 0o7777)
}
/// Entry ids use 31 bits so the log can flag removals in the top bit.
const MAX_ENTRIES: usize = (1 << 31) - 1;

/// The children of one directory.
#[derive(Debug, Default)]
struct DirList {
    ids: Children,
    /// `ids` is sorted by name bytes (for lookups).
    sorted: bool,
    /// [`ShareIndex::folder_changes`] when a child last came or went: an order
    /// sorted from a copy ([`UnsortedFolder`]) is installed only if this is
    /// unchanged.
    changed_at: u64,
}

/// The sharer's index. See the module docs.
#[derive(Debug)]
pub struct ShareIndex {
    epoch: Epoch,
    parent: Vec<u32>,
    /// Each entry's kind, removed flag and permission mode in 2 bytes (see
    /// [`ShareIndex::kind_byte`]).
    meta: Vec<u16>,
    name_off: Vec<u32>,
    name_len: Vec<u16>,
    names: Vec<u8>,
    /// Sizes, and mtimes as `i64 as u64`, 4 bytes each (see [`Narrow`]).
    size: Narrow,
    mtime: Narrow,
    /// [`change_stamp`]s.
    stamp: Vec<u32>,
    /// Each entry's device ([`Devices`]: 2 bytes) and inode ([`Narrow`]).
    dev: Devices,
    ino: Narrow,
    /// Position of each entry's latest operation ([`Positions`]: 4 bytes).
    last: Positions,
    generation: HashMap<u32, u32>,
    targets: HashMap<u32, Box<[u8]>>,
    dirs: HashMap<u32, DirList>,
    /// Counts every child that came into or left a folder (see [`DirList::changed_at`]).
    folder_changes: u64,
    dead_name_bytes: usize,
    live: u64,
    /// The log: positions (ascending) and their operations.
    log: LogRuns,
    next_seq: u64,
    /// Removal operations in the log.
    removals: usize,
    horizon: u64,
    walk_done: bool,
    /// Folders the walk read to the end, each with the log position then
    /// (ascending): see [`ShareIndex::mark_listed`].
    listed: Vec<(u64, u32)>,
}

impl ShareIndex {
    pub fn new(epoch: Epoch) -> Self {
        ShareIndex {
            epoch,
            parent: Vec::new(),
            meta: Vec::new(),
            name_off: Vec::new(),
            name_len: Vec::new(),
            names: Vec::new(),
            size: Narrow::default(),
            mtime: Narrow::default(),
            stamp: Vec::new(),
            dev: Devices::default(),
            ino: Narrow::default(),
            last: Positions::default(),
            generation: HashMap::new(),
            targets: HashMap::new(),
            dirs: HashMap::new(),
            folder_changes: 0,
            dead_name_bytes: 0,
            live: 0,
            log: LogRuns::default(),
            next_seq: 0,
            removals: 0,
            horizon: 0,
            walk_done: false,
            listed: Vec::new(),
        }
    }

    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Entries in the index now (removed ones excluded).
    pub fn entries(&self) -> u64 {
        self.live
    }

    /// The id the next new entry gets.
    pub fn next_id(&self) -> EntryId {
        EntryId(self.parent.len() as u32)
    }

    /// The end of the log: the `Seq` the next operation will get.
    pub fn log_end(&self) -> Seq {
        Seq(self.next_seq)
    }

    /// The oldest position a receiver may resume from (see the module docs).
    pub fn horizon(&self) -> Seq {
        Seq(self.horizon)
    }

    /// Whether a receiver that holds the share up to `position` can resume.
    pub fn can_resume_from(&self, position: Seq) -> bool {
        position.0 >= self.horizon && position.0 <= self.next_seq
    }

    /// Marks the initial walk finished.
    pub fn mark_snapshot_complete(&mut self) {
        self.walk_done = true;
    }

    /// Whether the initial walk has finished.
    pub fn walk_done(&self) -> bool {
        self.walk_done
    }

    /// The walk has read every child of `dir`: they are all at log positions
    /// before the end of the log now, so a receiver that applied the log up to
    /// here holds the folder whole (as the walk found it; a child changed
    /// since comes later, as any change does). Senders say so
    /// ([`ShareIndex::listed_between`]), and a mount answers a listing of that
    /// folder without waiting for the whole index. Ignored once the walk is
    /// done (every folder is whole then) or for what is not a live folder.
    pub fn mark_listed(&mut self, dir: EntryId) {
        if self.walk_done || !self.is_live_dir(dir) {
            return;
        }
        self.listed.push((self.next_seq, dir.0));
    }

    /// The folders a receiver holds whole once it has applied the log up to
    /// `to` but not once only up to `from` (`from < listed position <= to`).
    pub fn listed_between(&self, from: Seq, to: Seq) -> impl Iterator<Item = EntryId> + '_ {
        let start = self.listed.partition_point(|(at, _)| *at <= from.0);
        let end = self.listed.partition_point(|(at, _)| *at <= to.0);
        self.listed[start..end.max(start)]
            .iter()
            .map(|(_, id)| EntryId(*id))
    }

    /// Positions held in memory (live and superseded ones not yet compacted).
    pub fn log_len(&self) -> usize {
        self.log.len()
    }

    fn check_new(&self, e: &NewEntry<'_>, id: EntryId) -> Result<(), ShareIndexError> {
        if self.parent.len() >= MAX_ENTRIES {
            return Err(ShareIndexError::Full(MAX_ENTRIES));
        }
        if id != EntryId::ROOT && !self.is_live_dir(e.parent) {
            return Err(ShareIndexError::BadParent {
                id,
                parent: e.parent,
            });
        }
        check_lengths(e, id)
    }

    /// Adds the entry the walk found (its id must be the next one) and logs it.
    pub fn push(&mut self, e: &NewEntry<'_>) -> Result<EntryId, ShareIndexError> {
        let expected = self.next_id();
        if e.id != expected {
            return Err(ShareIndexError::IdOutOfOrder {
                expected,
                got: e.id,
            });
        }
        self.add(e)
    }

    /// Adds a new entry under the next free id (`e.id` is ignored) and logs it.
    pub fn add(&mut self, e: &NewEntry<'_>) -> Result<EntryId, ShareIndexError> {
        self.add_stamped(e, StampFrom::Entry)
    }

    /// As [`add`](Self::add), with the [`change_stamp`] `stamp` (another
    /// index's) in place of one made from `e`.
    pub fn add_with_stamp(
        &mut self,
        e: &NewEntry<'_>,
        stamp: u32,
    ) -> Result<EntryId, ShareIndexError> {
        self.add_stamped(e, StampFrom::Given(stamp))
    }

    fn add_stamped(
        &mut self,
        e: &NewEntry<'_>,
        from: StampFrom,
    ) -> Result<EntryId, ShareIndexError> {
        let id = self.next_id();
        self.check_new(e, id)?;
        let is_root = id == EntryId::ROOT;
        self.parent.push(if is_root { 0 } else { e.parent.0 });
        self.meta
            .push(meta_of(e.kind as u8, (e.mode & 0o7777) as u16));
        self.name_off.push(self.names.len() as u32);
        self.name_len.push(e.name.len() as u16);
        self.names.extend_from_slice(e.name);
        self.size
            .push(if e.kind == EntryKind::Dir { 0 } else { e.size });
        self.mtime.push(e.mtime as u64);
        self.stamp.push(stamp_of(e, from));
        self.dev.push(e.dev);
        self.ino.push(e.ino);
        self.last.push(None);
        if e.kind == EntryKind::Symlink {
            self.targets.insert(id.0, e.target.into());
        }
        if e.kind == EntryKind::Dir {
            self.dirs.insert(id.0, DirList::default());
        }
        if !is_root {
            self.link_child(e.parent.0, id.0);
        }
        self.live += 1;
        self.log(LogOp::upsert(id));
        Ok(id)
    }

    /// Changes a live entry to what `e` says (`e.id` is ignored): contents,
    /// attributes, name and place. The entry keeps its id; a file whose
    /// contents may have changed (size, mtime, device, inode or ctime differ:
    /// see the module docs) gets a new generation, so reads of the old version
    /// are refused. Returns whether anything changed (nothing is logged
    /// otherwise).
    pub fn update(&mut self, id: EntryId, e: &NewEntry<'_>) -> Result<bool, ShareIndexError> {
        self.apply(id, e, false, StampFrom::Entry)
    }

    /// As [`update`](Self::update) or, with `written`,
    /// [`update_written`](Self::update_written), with the [`change_stamp`]
    /// `stamp` (another index's) in place of one made from `e`.
    pub fn update_with_stamp(
        &mut self,
        id: EntryId,
        e: &NewEntry<'_>,
        stamp: u32,
        written: bool,
    ) -> Result<bool, ShareIndexError> {
        self.apply(id, e, written, StampFrom::Given(stamp))
    }

    /// As [`update`](Self::update), and a file gets a new generation whatever
    /// its attributes say: it was written (the watcher saw it closed after
    /// writing), and on a file system with coarse timestamps two writes can
    /// leave the same size, mtime and ctime.
    pub fn update_written(
        &mut self,
        id: EntryId,
        e: &NewEntry<'_>,
    ) -> Result<bool, ShareIndexError> {
        self.apply(id, e, true, StampFrom::Entry)
    }

    fn apply(
        &mut self,
        id: EntryId,
        e: &NewEntry<'_>,
        written: bool,
        from: StampFrom,
    ) -> Result<bool, ShareIndexError> {
        let i = self
            .live_index(id)
            .ok_or(ShareIndexError::NoSuchEntry(id))?;
        check_lengths(e, id)?;
        let is_root = id == EntryId::ROOT;
        let old_parent = self.parent[i];
        let moves = !is_root && (old_parent != e.parent.0 || self.name(i) != e.name);
        if is_root && e.name != self.name(i) {
            return Err(ShareIndexError::Root);
        }
        if moves {
            if !self.is_live_dir(e.parent) {
                return Err(ShareIndexError::BadParent {
                    id,
                    parent: e.parent,
                });
            }
            if self.is_ancestor_or_self(id, e.parent) {
                return Err(ShareIndexError::Cycle {
                    id,
                    parent: e.parent,
                });
            }
        }
        let old_kind = self.kind_of(i);
        let size = if e.kind == EntryKind::Dir { 0 } else { e.size };
        let target_changed = e.kind == EntryKind::Symlink
            && self.targets.get(&id.0).map(|t| &t[..]) != Some(e.target);
        let stamp = stamp_of(e, from);
        let stamp_changed = match from {
            StampFrom::Entry => stamp_differs(self.stamp[i], e.mtime_nsec, e.ctime_ns),
            StampFrom::Given(given) => self.stamp[i] != given,
        };
        let contents_changed = old_kind != e.kind
            || (e.kind == EntryKind::File
                && (written
                    || stamp_changed
                    || self.size.get(i) != size
                    || self.mtime_of(i) != e.mtime
                    || self.dev_ino(i) != (e.dev, e.ino)));
        let attrs_changed = self.mtime_of(i) != e.mtime
            || self.mode_of(i) != (e.mode & 0o7777) as u16
            || self.dev_ino(i) != (e.dev, e.ino);
        // A folder's or a symlink's stamp changes nothing a receiver sees; it
        // is kept (and a ctime the index did not know is learnt) either way.
        self.stamp[i] = stamp;
        if !moves && !contents_changed && !attrs_changed && !target_changed {
            return Ok(false);
        }
        if old_kind == EntryKind::Dir && e.kind != EntryKind::Dir {
            self.remove_below(id);
            self.dirs.remove(&id.0);
        }
        if e.kind == EntryKind::Dir && old_kind != EntryKind::Dir {
            self.dirs.insert(id.0, DirList::default());
        }
        if moves {
            self.unlink_child(old_parent, id.0);
            if self.name(i) != e.name {
                self.dead_name_bytes += usize::from(self.name_len[i]);
                self.name_off[i] = self.names.len() as u32;
                self.name_len[i] = e.name.len() as u16;
                self.names.extend_from_slice(e.name);
            }
            self.parent[i] = e.parent.0;
            self.link_child(e.parent.0, id.0);
        }
        self.meta[i] = meta_of(e.kind as u8, (e.mode & 0o7777) as u16);
        self.size.set(i, size);
        self.mtime.set(i, e.mtime as u64);
        self.dev.set(i, e.dev);
        self.ino.set(i, e.ino);
        if e.kind == EntryKind::Symlink {
            self.targets.insert(id.0, e.target.into());
        } else {
            self.targets.remove(&id.0);
        }
        if contents_changed {
            let g = self.generation.entry(id.0).or_insert(0);
            *g = g.wrapping_add(1);
        }
        self.log(LogOp::upsert(id));
        Ok(true)
    }

    /// Removes a live entry and everything under it, and logs one removal.
    /// Returns how many entries went.
    pub fn remove(&mut self, id: EntryId) -> Result<u64, ShareIndexError> {
        if id == EntryId::ROOT {
            return Err(ShareIndexError::Root);
        }
        let i = self
            .live_index(id)
            .ok_or(ShareIndexError::NoSuchEntry(id))?;
        let before = self.live;
        if self.kind_of(i) == EntryKind::Dir {
            self.remove_below(id);
            self.dirs.remove(&id.0);
        }
        self.unlink_child(self.parent[i], id.0);
        self.kill(i);
        self.removals += 1;
        self.log(LogOp::remove(id));
        self.trim_removals();
        Ok(before - self.live)
    }

    /// Marks everything below directory `dir` removed (no log operations: the
    /// removal of an ancestor covers them).
    fn remove_below(&mut self, dir: EntryId) {
        let mut stack: Vec<u32> = self
            .dirs
            .get_mut(&dir.0)
            .map(|d| std::mem::take(&mut d.ids).to_vec())
            .unwrap_or_default();
        while let Some(c) = stack.pop() {
            let i = c as usize;
            if self.kind_byte(i) & REMOVED != 0 {
                continue;
            }
            if let Some(d) = self.dirs.remove(&c) {
                stack.extend(d.ids.iter());
            }
            self.kill(i);
        }
    }

    fn kill(&mut self, i: usize) {
        self.meta[i] |= u16::from(REMOVED) << META_KIND_SHIFT;
        self.dead_name_bytes += usize::from(self.name_len[i]);
        self.targets.remove(&(i as u32));
        self.live -= 1;
    }

    fn log(&mut self, op: LogOp) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.last.set(op.id().index(), Some(seq));
        self.log.push(seq, op);
        if self.log.len() > 2 * (self.live as usize + self.removals) + COMPACT_SLACK {
            self.compact();
        }
    }

    /// Entry `i`'s device and inode.
    fn dev_ino(&self, i: usize) -> (u64, u64) {
        (self.dev.get(i), self.ino.get(i))
    }

    /// Entry `i`'s mtime (seconds).
    fn mtime_of(&self, i: usize) -> i64 {
        self.mtime.get(i) as i64
    }

    /// Whether the operation at position `seq` is the latest of its entry.
    fn is_current(&self, seq: u64, op: LogOp) -> bool {
        let i = op.id().index();
        self.last.get(i) == Some(seq) && (self.kind_byte(i) & REMOVED != 0) == op.is_remove()
    }

    /// Drops superseded positions from memory.
    fn compact(&mut self) {
        let mut log = std::mem::take(&mut self.log);
        log.retain(|seq, op| self.is_current(seq, op));
        self.log = log;
    }

    /// Forgets the oldest removals beyond [`KEPT_REMOVALS`] and moves the
    /// horizon past them.
    fn trim_removals(&mut self) {
        if self.removals <= KEPT_REMOVALS + KEPT_REMOVALS / 4 {
            return;
        }
        let mut drop = self.removals - KEPT_REMOVALS;
        let mut log = std::mem::take(&mut self.log);
        log.retain(|seq, op| {
            if !self.is_current(seq, op) {
                return false;
            }
            if drop > 0 && op.is_remove() {
                drop -= 1;
                self.removals -= 1;
                self.horizon = self.horizon.max(seq + 1);
                // The entry stays removed; only its announcement is forgotten.
                self.last.set(op.id().index(), None);
                return false;
            }
            true
        });
        self.log = log;
    }

    /// The current operations at or after `from`, in log order.
    pub fn ops_from(&self, from: Seq) -> impl Iterator<Item = (Seq, LogOp)> + '_ {
        self.log
            .iter_from(from.0)
            .filter(move |(seq, op)| self.is_current(*seq, *op))
            .map(|(seq, op)| (Seq(seq), op))
    }

    /// The position of a live entry's latest operation.
    pub fn last_seq(&self, id: EntryId) -> Option<Seq> {
        self.live_index(id).and_then(|i| self.last.get(i)).map(Seq)
    }

    fn live_index(&self, id: EntryId) -> Option<usize> {
        let i = id.index();
        match self.meta.get(i) {
            Some(m) if (m >> META_KIND_SHIFT) as u8 & REMOVED == 0 => Some(i),
            _ => None,
        }
    }

    fn is_live_dir(&self, id: EntryId) -> bool {
        self.live_index(id)
            .is_some_and(|i| self.kind_byte(i) & KIND_MASK == EntryKind::Dir as u8)
    }

    /// Whether `id` is `of` or one of its ancestors.
    fn is_ancestor_or_self(&self, id: EntryId, of: EntryId) -> bool {
        let mut cur = of.0;
        for _ in 0..=self.parent.len() {
            if cur == id.0 {
                return true;
            }
            if cur == 0 {
                return false;
            }
            cur = self.parent[cur as usize];
        }
        true
    }

    fn name(&self, i: usize) -> &[u8] {
        let off = self.name_off[i] as usize;
        &self.names[off..off + self.name_len[i] as usize]
    }

    fn kind_of(&self, i: usize) -> EntryKind {
        // Only valid kinds are ever stored (see `add` and `update`).
        EntryKind::from_bits(self.kind_byte(i) & KIND_MASK).unwrap_or(EntryKind::File)
    }

    /// Entry `i`'s kind bits and [`REMOVED`] flag (as the saved index holds
    /// them: one byte).
    fn kind_byte(&self, i: usize) -> u8 {
        (self.meta[i] >> META_KIND_SHIFT) as u8
    }

    /// Entry `i`'s permission mode (the 12 bits a receiver is sent).
    fn mode_of(&self, i: usize) -> u16 {
        self.meta[i] & 0o7777
    }

    fn link_child(&mut self, dir: u32, child: u32) {
        let (names, name_off, name_len) = (&self.names, &self.name_off, &self.name_len);
        let name_of = |i: u32| {
            let i = i as usize;
            let off = name_off[i] as usize;
            &names[off..off + usize::from(name_len[i])]
        };
        self.folder_changes += 1;
        let d = self.dirs.entry(dir).or_default();
        d.changed_at = self.folder_changes;
        if d.sorted {
            // A folder that was looked up stays sorted: entries added one by one
            // (a burst of new files, each looked up first) would otherwise sort
            // the whole folder again for every one of them.
            d.ids.insert_sorted(child, |c| name_of(c) < name_of(child));
        } else {
            d.ids.push(child);
        }
    }

    fn unlink_child(&mut self, dir: u32, child: u32) {
        let (names, name_off, name_len) = (&self.names, &self.name_off, &self.name_len);
        let name_of = |i: u32| {
            let i = i as usize;
            let off = name_off[i] as usize;
            &names[off..off + usize::from(name_len[i])]
        };
        let Some(d) = self.dirs.get_mut(&dir) else {
            return;
        };
        // Order is kept, so a sorted list stays sorted.
        let gone = if d.sorted {
            d.ids
                .remove_sorted(child, |c| name_of(c).cmp(name_of(child)))
        } else {
            d.ids.remove_any(child)
        };
        if gone {
            self.folder_changes += 1;
            d.changed_at = self.folder_changes;
        }
    }

    /// The live children of a directory, in no particular order.
    pub fn children(&self, dir: EntryId) -> impl Iterator<Item = u32> + '_ {
        self.dirs.get(&dir.0).into_iter().flat_map(|d| d.ids.iter())
    }

    /// How many live children a directory has.
    pub fn child_count(&self, dir: EntryId) -> usize {
        self.dirs.get(&dir.0).map_or(0, |d| d.ids.len())
    }

    /// The child of `dir` named `name`, if any.
    pub fn lookup_child(&mut self, dir: EntryId, name: &[u8]) -> Option<EntryId> {
        let mut list = self.dirs.remove(&dir.0)?;
        if !list.sorted {
            list.ids
                .sort_unstable_by(|a, b| self.name(a as usize).cmp(self.name(b as usize)));
            list.sorted = true;
        }
        let found = list
            .ids
            .binary_search_by(|c| self.name(c as usize).cmp(name))
            .map(EntryId);
        self.dirs.insert(dir.0, list);
        found
    }

    /// The children of `dir` named `names` (best sorted by name), each if
    /// there is one: [`lookup_child`](Self::lookup_child) for many names at
    /// once.
    pub fn lookup_children(&mut self, dir: EntryId, names: &[&[u8]]) -> Vec<Option<EntryId>> {
        let Some(mut list) = self.dirs.remove(&dir.0) else {
            return vec![None; names.len()];
        };
        if !list.sorted {
            list.ids
                .sort_unstable_by(|a, b| self.name(a as usize).cmp(self.name(b as usize)));
            list.sorted = true;
        }
        // Each a search of the whole list: searches over the same range share
        // its first steps, which stay in the cache (starting each where the
        // last one ended took twice as long over a million names).
        let found = names
            .iter()
            .map(|name| {
                list.ids
                    .binary_search_by(|c| self.name(c as usize).cmp(name))
                    .map(EntryId)
            })
            .collect();
        self.dirs.insert(dir.0, list);
        found
    }

    /// Folders of at least `min_children` whose children are not sorted by name
    /// yet (the walk adds them in the order the disk lists them).
    pub fn unsorted_folders(&self, min_children: usize) -> Vec<EntryId> {
        let mut found: Vec<EntryId> = self
            .dirs
            .iter()
            .filter(|(_, d)| !d.sorted && d.ids.len() >= min_children)
            .map(|(id, _)| EntryId(*id))
            .collect();
        found.sort_unstable_by_key(|id| id.0);
        found
    }

    /// Starts sorting an unsorted folder's children by name outside the index's
    /// write lock: see [`FolderSort`]. None if the folder is gone or sorted.
    pub fn start_folder_sort(&self, dir: EntryId) -> Option<FolderSort> {
        let d = self.dirs.get(&dir.0).filter(|d| !d.sorted)?;
        Some(FolderSort::new(dir.0, d.changed_at, d.ids.to_vec()))
    }

    /// Takes a finished [`FolderSort`]'s order if no child came or went since
    /// it started. Returns whether it was taken (if not, the folder sorts on its
    /// first lookup by name, as any folder does).
    pub fn install_order(&mut self, sort: FolderSort) -> bool {
        let Some((dir, changed_at, ids)) = sort.into_order() else {
            return false;
        };
        match self.dirs.get_mut(&dir) {
            Some(d) if !d.sorted && d.changed_at == changed_at && d.ids.len() == ids.len() => {
                d.ids = Children::from_vec(ids);
                d.sorted = true;
                true
            }
            _ => false,
        }
    }

    /// Whether a folder's children came or went since `changed_at`.
    fn folder_changed(&self, dir: u32, changed_at: u64) -> bool {
        self.dirs
            .get(&dir)
            .is_none_or(|d| d.sorted || d.changed_at != changed_at)
    }

    /// Looks up a `/`-separated path relative to the root (empty: the root).
    pub fn lookup(&mut self, path: &[u8]) -> Option<EntryId> {
        let mut cur = EntryId::ROOT;
        self.live_index(cur)?;
        for part in path.split(|b| *b == b'/').filter(|p| !p.is_empty()) {
            cur = self.lookup_child(cur, part)?;
        }
        Some(cur)
    }

    pub fn generation(&self, id: EntryId) -> Generation {
        Generation(self.generation.get(&id.0).copied().unwrap_or(0))
    }

    /// The entry as it goes on the wire, if it is live.
    pub fn view(&self, id: EntryId) -> Option<EntryView<'_>> {
        let i = self.live_index(id)?;
        let kind = self.kind_of(i);
        Some(EntryView {
            id,
            parent: EntryId(self.parent[i]),
            kind,
            name: self.name(i),
            size: self.size.get(i),
            mtime: self.mtime_of(i),
            mode: u32::from(self.mode_of(i)),
            generation: self.generation(id),
            target: self.targets.get(&id.0).map(|t| &t[..]).unwrap_or(&[]),
        })
    }

    /// What the sharer last saw on disk for a live entry: (device, inode,
    /// [`change_stamp`]), to tell a changed file from an unchanged one.
    pub fn disk_identity(&self, id: EntryId) -> Option<(u64, u64, u32)> {
        let i = self.live_index(id)?;
        let (dev, ino) = self.dev_ino(i);
        Some((dev, ino, self.stamp[i]))
    }

    /// Path of a live entry relative to the root (`a/b/c`; empty for the root).
    pub fn relative_path(&self, id: EntryId) -> Option<Vec<u8>> {
        let mut parts = Vec::new();
        let mut cur = self.live_index(id)?;
        // Moves keep the chain acyclic (see `update`); the bound stops a corrupt one.
        for _ in 0..self.parent.len() {
            if cur == 0 {
                break;
            }
            parts.push(cur);
            cur = self.live_index(EntryId(self.parent[cur]))?;
        }
        let mut path = Vec::new();
        for (n, i) in parts.iter().rev().enumerate() {
            if n > 0 {
                path.push(b'/');
            }
            path.extend_from_slice(self.name(*i));
        }
        Some(path)
    }

    /// Checks a read of `id` at `generation` and says what to check on disk.
    pub fn read_target(
        &self,
        id: EntryId,
        generation: Generation,
    ) -> Result<ReadTarget, (ReadErrorCode, String)> {
        let i = self.live_index(id).ok_or_else(|| {
            (
                ReadErrorCode::NoSuchEntry,
                format!("entry {id} is not in this share (it may have been removed)"),
            )
        })?;
        if self.kind_of(i) != EntryKind::File {
            return Err((
                ReadErrorCode::NotAFile,
                format!("entry {id} is a {}, not a file", self.kind_of(i).as_str()),
            ));
        }
        let current = self.generation(id);
        if current != generation {
            return Err((
                ReadErrorCode::Changed,
                format!(
                    "the file changed since it was listed (version {} is now {})",
                    generation.0, current.0
                ),
            ));
        }
        let path = self.relative_path(id).ok_or_else(|| {
            (
                ReadErrorCode::NoSuchEntry,
                format!("entry {id} is no longer reachable from the share root"),
            )
        })?;
        let (dev, ino) = self.dev_ino(i);
        Ok(ReadTarget {
            path,
            size: self.size.get(i),
            mtime: self.mtime_of(i),
            dev,
            ino,
            stamp: self.stamp[i],
        })
    }

    /// Rough heap bytes held by the index (for the memory figures).
    pub fn heap_bytes(&self) -> usize {
        self.parent.capacity() * 4
            + self.meta.capacity() * 2
            + self.name_off.capacity() * 4
            + self.name_len.capacity() * 2
            + self.names.capacity()
            + self.size.heap_bytes()
            + self.mtime.heap_bytes()
            + self.stamp.capacity() * 4
            + self.dev.heap_bytes()
            + self.ino.heap_bytes()
            + self.last.heap_bytes()
            + self.log.heap_bytes()
            + self
                .dirs
                .values()
                .map(|d| d.ids.heap_bytes() + 48)
                .sum::<usize>()
            + self.targets.values().map(|t| t.len() + 32).sum::<usize>()
            + self.listed.capacity() * 16
    }
}

fn stamp_of(e: &NewEntry<'_>, from: StampFrom) -> u32 {
    match from {
        StampFrom::Entry => change_stamp(e.mtime_nsec, e.ctime_ns),
        StampFrom::Given(stamp) => stamp,
    }
}

fn check_lengths(e: &NewEntry<'_>, id: EntryId) -> Result<(), ShareIndexError> {
    if e.name.len() > MAX_NAME_LEN {
        return Err(ShareIndexError::NameTooLong {
            id,
            len: e.name.len(),
            max: MAX_NAME_LEN,
        });
    }
    if e.target.len() > MAX_TARGET_LEN {
        return Err(ShareIndexError::TargetTooLong {
            id,
            len: e.target.len(),
            max: MAX_TARGET_LEN,
        });
    }
    Ok(())
}

mod children;
mod folder_sort;
mod log_runs;
mod narrow;
mod saved;

use children::Children;
pub use log_runs::LogOp;
use log_runs::LogRuns;
use narrow::{Devices, Narrow, Positions};

pub use folder_sort::{FolderSort, SortStep};
pub use saved::SavedIndexError;

#[cfg(test)]
pub(crate) mod tests;
