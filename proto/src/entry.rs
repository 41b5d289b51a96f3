//! What an index entry is on the wire.

use crate::ids::{EntryId, Generation};

/// The kind of an entry. Anything that is not a regular file, a directory or a
/// symlink (sockets, devices, fifos) is not shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EntryKind {
    File = 0,
    Dir = 1,
    Symlink = 2,
}

impl EntryKind {
    pub fn from_bits(b: u8) -> Option<EntryKind> {
        match b {
            0 => Some(EntryKind::File),
            1 => Some(EntryKind::Dir),
            2 => Some(EntryKind::Symlink),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Symlink => "symlink",
        }
    }
}

/// One entry of the share as the sharer announces it.
///
/// Names are raw bytes (a Linux file name need not be UTF-8). The root has
/// `id == parent == EntryId::ROOT` and the shared folder's own name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: EntryId,
    pub parent: EntryId,
    pub kind: EntryKind,
    pub name: Vec<u8>,
    /// Bytes for files; 0 for directories; the target's length for symlinks.
    pub size: u64,
    /// Modification time, whole seconds since the Unix epoch.
    pub mtime: i64,
    /// Permission bits (`mode & 0o7777`).
    pub mode: u32,
    pub generation: Generation,
    /// Symlink target as stored in the link; empty for other kinds.
    pub target: Vec<u8>,
}

impl Entry {
    /// The size as it is sent: directories carry none and a symlink's is its target's length.
    pub fn wire_size(&self) -> u64 {
        match self.kind {
            EntryKind::File => self.size,
            EntryKind::Dir => 0,
            EntryKind::Symlink => self.target.len() as u64,
        }
    }
}

/// One operation in the sharer's index log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexOp {
    /// Add the entry, or replace what the receiver holds under its id (a change
    /// or a rename).
    Upsert(Entry),
    /// The entry is gone (with everything under it, for a directory).
    Remove(EntryId),
}

/// A borrowed view of one decoded operation; see [`crate::batch::decode_batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpView<'a> {
    Upsert(EntryView<'a>),
    Remove(EntryId),
}

/// A borrowed view of one decoded entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryView<'a> {
    pub id: EntryId,
    pub parent: EntryId,
    pub kind: EntryKind,
    pub name: &'a [u8],
    pub size: u64,
    pub mtime: i64,
    pub mode: u32,
    pub generation: Generation,
    pub target: &'a [u8],
}

impl EntryView<'_> {
    pub fn to_entry(&self) -> Entry {
        Entry {
            id: self.id,
            parent: self.parent,
            kind: self.kind,
            name: self.name.to_vec(),
            size: self.size,
            mtime: self.mtime,
            mode: self.mode,
            generation: self.generation,
            target: self.target.to_vec(),
        }
    }
}

impl OpView<'_> {
    pub fn to_op(&self) -> IndexOp {
        match self {
            OpView::Upsert(e) => IndexOp::Upsert(e.to_entry()),
            OpView::Remove(id) => IndexOp::Remove(*id),
        }
    }
}
