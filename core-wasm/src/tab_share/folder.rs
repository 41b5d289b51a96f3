//! The shared folder as the page found it, into the share index: the walk's
//! batches (parallel arrays, names joined by `/`, which no name holds) and,
//! later, what a read found changed.
//!
//! A browser's file API gives a name, a kind, a size and a modification time
//! in milliseconds; no device, inode, mode or change time. So an entry's
//! identity for the index is its size and modification time only, and its
//! mode is what a file or folder usually has (0644, 0755).

use linkfs_core::{CTIME_UNKNOWN, NewEntry, ShareIndex};
use linkfs_proto::{EntryId, EntryKind};

/// An id the index refused (the walk skips the entry and its children).
pub const REFUSED: u32 = u32::MAX;

/// The folder's own entry, the index's root.
pub fn root(index: &mut ShareIndex, name: &str, mtime_ms: f64) {
    let (mtime, mtime_nsec) = split_ms(mtime_ms);
    let _ = index.push(&NewEntry {
        id: EntryId::ROOT,
        parent: EntryId::ROOT,
        kind: EntryKind::Dir,
        name: name.as_bytes(),
        size: 0,
        mtime,
        mtime_nsec,
        mode: 0o755,
        target: b"",
        dev: 0,
        ino: 0,
        ctime_ns: CTIME_UNKNOWN,
    });
}

/// One entry the walk found.
pub struct Found<'a> {
    pub parent: u32,
    pub dir: bool,
    pub name: &'a str,
    pub size: f64,
    pub mtime_ms: f64,
}

impl Found<'_> {
    fn entry(&self) -> NewEntry<'_> {
        let (mtime, mtime_nsec) = split_ms(self.mtime_ms);
        NewEntry {
            id: EntryId::ROOT,
            parent: EntryId(self.parent),
            kind: if self.dir {
                EntryKind::Dir
            } else {
                EntryKind::File
            },
            name: self.name.as_bytes(),
            size: if self.dir { 0 } else { whole(self.size) },
            mtime,
            mtime_nsec,
            mode: if self.dir { 0o755 } else { 0o644 },
            target: b"",
            dev: 0,
            ino: 0,
            ctime_ns: CTIME_UNKNOWN,
        }
    }
}

/// Adds what the walk found; each entry's id, or [`REFUSED`] (a name the
/// index does not take: empty, too long, or under a refused folder).
pub fn add(index: &mut ShareIndex, found: &[Found<'_>]) -> Vec<u32> {
    found
        .iter()
        .map(|f| {
            if f.name.is_empty() || f.parent == REFUSED {
                return REFUSED;
            }
            index.add(&f.entry()).map_or(REFUSED, |id| id.0)
        })
        .collect()
}

/// A file a read found changed on disk: the index takes its new size and
/// time (a new generation: reads of the old version are refused, and every
/// visitor hears of the change). Whether the index changed (false: it knew
/// already, or the file is gone from it).
pub fn changed(index: &mut ShareIndex, id: EntryId, size: f64, mtime_ms: f64) -> bool {
    let Some(view) = index.view(id) else {
        return false;
    };
    let (name, parent) = (view.name.to_vec(), view.parent);
    let (mtime, mtime_nsec) = split_ms(mtime_ms);
    let entry = NewEntry {
        id,
        parent,
        kind: EntryKind::File,
        name: &name,
        size: whole(size),
        mtime,
        mtime_nsec,
        mode: 0o644,
        target: b"",
        dev: 0,
        ino: 0,
        ctime_ns: CTIME_UNKNOWN,
    };
    index.update(id, &entry).unwrap_or(false)
}

/// A JS number of bytes as a count (negative or not a number: 0).
fn whole(n: f64) -> u64 {
    if n.is_finite() && n > 0.0 {
        n as u64
    } else {
        0
    }
}

/// Milliseconds since the epoch as seconds and nanoseconds.
pub fn split_ms(ms: f64) -> (i64, u32) {
    if !ms.is_finite() {
        return (0, 0);
    }
    let secs = (ms / 1000.0).floor();
    let nsec = ((ms - secs * 1000.0) * 1_000_000.0)
        .round()
        .clamp(0.0, 999_999_999.0);
    (secs as i64, nsec as u32)
}

/// Seconds and nanoseconds as the milliseconds a browser's `lastModified` says.
pub fn ms_of(mtime: i64, mtime_nsec: u32) -> f64 {
    mtime as f64 * 1000.0 + f64::from(mtime_nsec / 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_browser_time_goes_into_the_index_and_comes_back_the_same() {
        for ms in [0.0, 1.0, 999.0, 1_700_000_000_123.0, 1_764_000_000_999.0] {
            let (s, ns) = split_ms(ms);
            assert_eq!(ms_of(s, ns), ms, "{ms}");
        }
    }
}
