//! The sharer's index: every entry of the share and the log of index operations.
//!
//! Entries are stored column-wise by dense id (the walk assigns 0, 1, 2 ... with
//! parents first), names in one byte arena. The log is what senders stream:
//! position `Seq(n)` is the n-th operation since the share started. The initial
//! snapshot is the first operations (one upsert per entry as the walk finds it);
//! later changes append upserts and removals. A receiver that holds the log up to
//! some `Seq` of this epoch resumes from there.
//!
//! Besides what goes on the wire, the sharer keeps what it needs to serve reads
//! safely: the device and inode the walk saw and the mtime in nanoseconds, so a
//! read of a file that was replaced or changed after it was announced is refused.

use std::collections::HashMap;

use linkfs_proto::batch::{MAX_NAME_LEN, MAX_TARGET_LEN};
use linkfs_proto::{EntryId, EntryKind, EntryView, Epoch, Generation, ReadErrorCode, Seq};

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
}

/// What the sharer checks before and while it reads a file for a receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadTarget {
    /// Path relative to the shared root, components joined with `/`.
    pub path: Vec<u8>,
    pub size: u64,
    pub mtime: i64,
    pub mtime_nsec: u32,
    pub dev: u64,
    pub ino: u64,
}

/// Why an entry could not be added.
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
}

/// One operation of the log: an entry id, with the top bit set for a removal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOp(u32);

impl LogOp {
    const REMOVE: u32 = 1 << 31;

    pub fn upsert(id: EntryId) -> LogOp {
        LogOp(id.0)
    }

    pub fn remove(id: EntryId) -> LogOp {
        LogOp(id.0 | Self::REMOVE)
    }

    pub fn id(self) -> EntryId {
        EntryId(self.0 & !Self::REMOVE)
    }

    pub fn is_remove(self) -> bool {
        self.0 & Self::REMOVE != 0
    }
}

const KIND_MASK: u8 = 3;
const REMOVED: u8 = 4;
/// Entry ids use 31 bits so the log can flag removals in the top bit.
const MAX_ENTRIES: usize = (1 << 31) - 1;

/// The sharer's index. See the module docs.
#[derive(Debug)]
pub struct ShareIndex {
    epoch: Epoch,
    parent: Vec<u32>,
    kind: Vec<u8>,
    name_off: Vec<u32>,
    name_len: Vec<u16>,
    names: Vec<u8>,
    size: Vec<u64>,
    mtime: Vec<i64>,
    mtime_nsec: Vec<u32>,
    mode: Vec<u16>,
    generation: HashMap<u32, u32>,
    dev_ino: Vec<(u64, u64)>,
    targets: HashMap<u32, Box<[u8]>>,
    live: u64,
    log: Vec<LogOp>,
    snapshot_end: Option<Seq>,
}

impl ShareIndex {
    pub fn new(epoch: Epoch) -> Self {
        ShareIndex {
            epoch,
            parent: Vec::new(),
            kind: Vec::new(),
            name_off: Vec::new(),
            name_len: Vec::new(),
            names: Vec::new(),
            size: Vec::new(),
            mtime: Vec::new(),
            mtime_nsec: Vec::new(),
            mode: Vec::new(),
            generation: HashMap::new(),
            dev_ino: Vec::new(),
            targets: HashMap::new(),
            live: 0,
            log: Vec::new(),
            snapshot_end: None,
        }
    }

    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Entries in the index now (removed ones excluded).
    pub fn entries(&self) -> u64 {
        self.live
    }

    /// The id the next new entry must have.
    pub fn next_id(&self) -> EntryId {
        EntryId(self.parent.len() as u32)
    }

    /// The end of the log: the `Seq` the next operation will get.
    pub fn log_end(&self) -> Seq {
        Seq(self.log.len() as u64)
    }

    pub fn op_at(&self, seq: Seq) -> Option<LogOp> {
        usize::try_from(seq.0)
            .ok()
            .and_then(|i| self.log.get(i))
            .copied()
    }

    /// Marks the initial walk finished: everything before the current log end is the snapshot.
    pub fn mark_snapshot_complete(&mut self) {
        if self.snapshot_end.is_none() {
            self.snapshot_end = Some(self.log_end());
        }
    }

    /// Where the initial snapshot ends, once the walk has finished.
    pub fn snapshot_end(&self) -> Option<Seq> {
        self.snapshot_end
    }

    /// Adds a new entry (the next dense id) and logs its upsert.
    pub fn push(&mut self, e: &NewEntry<'_>) -> Result<EntryId, ShareIndexError> {
        let expected = self.next_id();
        if e.id != expected {
            return Err(ShareIndexError::IdOutOfOrder {
                expected,
                got: e.id,
            });
        }
        if self.parent.len() >= MAX_ENTRIES {
            return Err(ShareIndexError::Full(MAX_ENTRIES));
        }
        let is_root = e.id == EntryId::ROOT;
        if !is_root && !self.is_live_dir(e.parent) {
            return Err(ShareIndexError::BadParent {
                id: e.id,
                parent: e.parent,
            });
        }
        if e.name.len() > MAX_NAME_LEN {
            return Err(ShareIndexError::NameTooLong {
                id: e.id,
                len: e.name.len(),
                max: MAX_NAME_LEN,
            });
        }
        if e.target.len() > MAX_TARGET_LEN {
            return Err(ShareIndexError::TargetTooLong {
                id: e.id,
                len: e.target.len(),
                max: MAX_TARGET_LEN,
            });
        }
        self.parent.push(if is_root { 0 } else { e.parent.0 });
        self.kind.push(e.kind as u8);
        self.name_off.push(self.names.len() as u32);
        self.name_len.push(e.name.len() as u16);
        self.names.extend_from_slice(e.name);
        self.size
            .push(if e.kind == EntryKind::Dir { 0 } else { e.size });
        self.mtime.push(e.mtime);
        self.mtime_nsec.push(e.mtime_nsec);
        self.mode.push((e.mode & 0o7777) as u16);
        self.dev_ino.push((e.dev, e.ino));
        if e.kind == EntryKind::Symlink {
            self.targets.insert(e.id.0, e.target.into());
        }
        self.live += 1;
        self.log.push(LogOp::upsert(e.id));
        Ok(e.id)
    }

    fn live_index(&self, id: EntryId) -> Option<usize> {
        let i = id.index();
        match self.kind.get(i) {
            Some(k) if k & REMOVED == 0 => Some(i),
            _ => None,
        }
    }

    fn is_live_dir(&self, id: EntryId) -> bool {
        self.live_index(id)
            .is_some_and(|i| self.kind[i] & KIND_MASK == EntryKind::Dir as u8)
    }

    fn name(&self, i: usize) -> &[u8] {
        let off = self.name_off[i] as usize;
        &self.names[off..off + self.name_len[i] as usize]
    }

    fn kind_of(&self, i: usize) -> EntryKind {
        // Only valid kinds are ever stored (see `push`).
        EntryKind::from_bits(self.kind[i] & KIND_MASK).unwrap_or(EntryKind::File)
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
            size: self.size[i],
            mtime: self.mtime[i],
            mode: u32::from(self.mode[i]),
            generation: self.generation(id),
            target: self.targets.get(&id.0).map(|t| &t[..]).unwrap_or(&[]),
        })
    }

    /// Path of a live entry relative to the root (`a/b/c`; empty for the root).
    pub fn relative_path(&self, id: EntryId) -> Option<Vec<u8>> {
        let mut parts = Vec::new();
        let mut cur = self.live_index(id)?;
        // Parents always have lower ids than their children in the walk, but a
        // rename may break that; the depth bound stops a corrupt chain.
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
        let (dev, ino) = self.dev_ino[i];
        Ok(ReadTarget {
            path,
            size: self.size[i],
            mtime: self.mtime[i],
            mtime_nsec: self.mtime_nsec[i],
            dev,
            ino,
        })
    }

    /// Rough heap bytes held by the index (for the memory figures).
    pub fn heap_bytes(&self) -> usize {
        self.parent.capacity() * 4
            + self.kind.capacity()
            + self.name_off.capacity() * 4
            + self.name_len.capacity() * 2
            + self.names.capacity()
            + self.size.capacity() * 8
            + self.mtime.capacity() * 8
            + self.mtime_nsec.capacity() * 4
            + self.mode.capacity() * 2
            + self.dev_ino.capacity() * 16
            + self.log.capacity() * 4
            + self.targets.values().map(|t| t.len() + 32).sum::<usize>()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn entry<'a>(
        id: u32,
        parent: u32,
        kind: EntryKind,
        name: &'a [u8],
        size: u64,
    ) -> NewEntry<'a> {
        NewEntry {
            id: EntryId(id),
            parent: EntryId(parent),
            kind,
            name,
            size,
            mtime: 1_700_000_000 + i64::from(id),
            mtime_nsec: 0,
            mode: if kind == EntryKind::Dir { 0o755 } else { 0o644 },
            target: b"",
            dev: 1,
            ino: u64::from(id) + 100,
        }
    }

    #[test]
    fn paths_and_read_targets() {
        let mut ix = ShareIndex::new(Epoch(1));
        ix.push(&entry(0, 0, EntryKind::Dir, b"root", 0)).unwrap();
        ix.push(&entry(1, 0, EntryKind::Dir, b"a", 0)).unwrap();
        ix.push(&entry(2, 1, EntryKind::File, b"b.txt", 5)).unwrap();
        assert_eq!(ix.relative_path(EntryId(2)).unwrap(), b"a/b.txt");
        assert_eq!(ix.relative_path(EntryId(0)).unwrap(), b"");
        let t = ix.read_target(EntryId(2), Generation(0)).unwrap();
        assert_eq!((t.size, t.ino), (5, 102));
        assert_eq!(
            ix.read_target(EntryId(1), Generation(0)).unwrap_err().0,
            ReadErrorCode::NotAFile
        );
        assert_eq!(
            ix.read_target(EntryId(9), Generation(0)).unwrap_err().0,
            ReadErrorCode::NoSuchEntry
        );
        assert_eq!(
            ix.read_target(EntryId(2), Generation(3)).unwrap_err().0,
            ReadErrorCode::Changed
        );
    }

    #[test]
    fn ids_must_be_dense_and_parents_directories() {
        let mut ix = ShareIndex::new(Epoch(1));
        ix.push(&entry(0, 0, EntryKind::Dir, b"root", 0)).unwrap();
        assert!(matches!(
            ix.push(&entry(5, 0, EntryKind::File, b"x", 0)),
            Err(ShareIndexError::IdOutOfOrder { .. })
        ));
        ix.push(&entry(1, 0, EntryKind::File, b"f", 0)).unwrap();
        assert!(matches!(
            ix.push(&entry(2, 1, EntryKind::File, b"under-a-file", 0)),
            Err(ShareIndexError::BadParent { .. })
        ));
    }
}
