//! Newtypes for the numbers that cross the wire, so an entry id can never be
//! passed where a sequence number is expected.

use std::fmt;

/// A stable id the sharer gives every entry of the share. The root is `EntryId::ROOT`.
/// Ids are dense (assigned 0, 1, 2 ... as entries are found), so receivers index by them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EntryId(pub u32);

impl EntryId {
    pub const ROOT: EntryId = EntryId(0);

    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Position in the sharer's log of index operations. A batch names the `Seq` of
/// its first operation; an acknowledgement names the next `Seq` the receiver expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Seq(pub u64);

impl Seq {
    pub fn advance(self, n: u64) -> Seq {
        Seq(self.0 + n)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seq {}", self.0)
    }
}

/// One run of a share. A sharer restart makes a new epoch; a receiver holding
/// an index from another epoch starts again from a fresh snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Epoch(pub u64);

/// How many times an entry has changed since it was first announced. Reads name
/// it so that a read never mixes bytes of two versions of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Generation(pub u32);

/// A receiver-chosen id for one read request; chunks and errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ReadId(pub u32);

impl fmt::Display for ReadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "read {}", self.0)
    }
}
