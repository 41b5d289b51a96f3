//! What one `lstat` of a name says, written once: the record the walk, the
//! watcher's reconcile and the share index all take their facts from.

use std::os::unix::fs::MetadataExt;

use linkfs_core::NewEntry;
use linkfs_proto::{EntryId, EntryKind};
use nix::sys::stat::FileStat;

/// File type bits of `st_mode` (as in `<sys/stat.h>`).
const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;
const S_IFDIR: u32 = 0o040_000;
const S_IFLNK: u32 = 0o120_000;

/// A file, folder or symlink as the disk describes it (its name and place
/// are the caller's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskEntry {
    pub kind: EntryKind,
    /// Bytes for files, 0 for folders, the target's length for symlinks.
    pub size: u64,
    /// Modification time: whole seconds since the Unix epoch ...
    pub mtime: i64,
    /// ... and nanoseconds within that second.
    pub mtime_nsec: u32,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// Device and inode: the same file when it moves, another when replaced.
    pub dev: u64,
    pub ino: u64,
    /// Status-change time (`linkfs_core::ctime_ns`): tells a rewrite that kept
    /// the size and mtime from no change.
    pub ctime_ns: i64,
    /// Symlink target as stored in the link; empty for other kinds.
    pub target: Vec<u8>,
}

impl DiskEntry {
    /// What kind of entry `st_mode` is; `None` for sockets, fifos and devices
    /// (they are not shared).
    pub fn kind_of(st_mode: u32) -> Option<EntryKind> {
        match st_mode & S_IFMT {
            S_IFREG => Some(EntryKind::File),
            S_IFDIR => Some(EntryKind::Dir),
            S_IFLNK => Some(EntryKind::Symlink),
            _ => None,
        }
    }

    /// The entry `fstatat` described (`target`: a symlink's, read by the caller).
    pub fn from_stat(kind: EntryKind, target: Vec<u8>, st: &FileStat) -> DiskEntry {
        Self::from_parts(
            kind,
            target,
            st.st_size.max(0) as u64,
            (st.st_mtime, st.st_mtime_nsec),
            st.st_mode,
            (st.st_dev, st.st_ino),
            (st.st_ctime, st.st_ctime_nsec),
        )
    }

    /// The entry `std::fs::metadata` described.
    pub fn from_metadata(kind: EntryKind, target: Vec<u8>, md: &std::fs::Metadata) -> DiskEntry {
        Self::from_parts(
            kind,
            target,
            md.size(),
            (md.mtime(), md.mtime_nsec()),
            md.mode(),
            (md.dev(), md.ino()),
            (md.ctime(), md.ctime_nsec()),
        )
    }

    fn from_parts(
        kind: EntryKind,
        target: Vec<u8>,
        st_size: u64,
        (mtime, mtime_nsec): (i64, i64),
        st_mode: u32,
        (dev, ino): (u64, u64),
        (ctime, ctime_nsec): (i64, i64),
    ) -> DiskEntry {
        DiskEntry {
            kind,
            size: match kind {
                EntryKind::File => st_size,
                EntryKind::Dir => 0,
                EntryKind::Symlink => target.len() as u64,
            },
            mtime,
            // st_mtime_nsec is always in 0..1e9; clamp rather than trust it.
            mtime_nsec: u32::try_from(mtime_nsec).unwrap_or(0).min(999_999_999),
            mode: st_mode & 0o7777,
            dev,
            ino,
            ctime_ns: linkfs_core::ctime_ns(ctime, ctime_nsec),
            target,
        }
    }

    /// The entry for the share index, as `name` in `parent` (`id`: the walk's
    /// number, or anything when the index numbers it).
    pub fn new_entry<'a>(&'a self, id: EntryId, parent: EntryId, name: &'a [u8]) -> NewEntry<'a> {
        NewEntry {
            id,
            parent,
            kind: self.kind,
            name,
            size: self.size,
            mtime: self.mtime,
            mtime_nsec: self.mtime_nsec,
            mode: self.mode,
            target: &self.target,
            dev: self.dev,
            ino: self.ino,
            ctime_ns: self.ctime_ns,
        }
    }
}
