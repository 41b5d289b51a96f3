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

/// What the page found at a path that changed on disk.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Looked {
    Gone,
    File { size: f64, mtime_ms: f64 },
    Dir,
}

/// Brings the index in line with what the page found at `path` (relative to
/// the shared folder, `/`-separated): a new entry added (its id returned, so
/// the page keeps its source and lists a new folder), a changed file updated,
/// a removed one removed with what it held, an entry whose kind changed
/// replaced. A path whose folder is not in the index is left for the change
/// that brings the folder.
pub fn apply(
    index: &mut ShareIndex,
    path: &str,
    looked: Looked,
    folder_time_ms: f64,
) -> Option<u32> {
    if path.is_empty() {
        return None;
    }
    let id = index.lookup(path.as_bytes());
    let kind = id.and_then(|id| index.view(id)).map(|v| v.kind);
    match (looked, id, kind) {
        (Looked::Gone, Some(id), _) => {
            let _ = index.remove(id);
            None
        }
        (Looked::Gone, None, _) => None,
        (Looked::File { size, mtime_ms }, Some(id), Some(EntryKind::File)) => {
            // The browser said it changed: a new version even if its size and
            // time are the same (a browser gives no change time to tell).
            written(index, id, size, mtime_ms);
            None
        }
        (Looked::Dir, Some(_), Some(EntryKind::Dir)) => None,
        (found, old, _) => {
            if let Some(old) = old {
                let _ = index.remove(old);
            }
            let (parent_path, name) = path.rsplit_once('/').unwrap_or(("", path));
            let parent = index.lookup(parent_path.as_bytes())?;
            let (dir, size, mtime_ms) = match found {
                Looked::File { size, mtime_ms } => (false, size, mtime_ms),
                _ => (true, 0.0, folder_time_ms),
            };
            let added = add(
                index,
                &[Found {
                    parent: parent.0,
                    dir,
                    name,
                    size,
                    mtime_ms,
                }],
            );
            added.first().copied().filter(|id| *id != REFUSED)
        }
    }
}

/// What the page found at paths that settled together (sorted: a folder
/// before what it holds): each added entry's id, or [`REFUSED`]. A folder
/// added here is listed whole by the page, so what settled under it with it
/// is left to that listing (it would go in twice otherwise).
pub fn apply_all(
    index: &mut ShareIndex,
    looked: &[(&str, Looked)],
    folder_time_ms: f64,
) -> Vec<u32> {
    let mut new_folders: Vec<&str> = Vec::new();
    looked
        .iter()
        .map(|(path, found)| {
            let under_new = new_folders.iter().any(|f| {
                path.strip_prefix(f)
                    .is_some_and(|rest| rest.starts_with('/'))
            });
            if under_new {
                return REFUSED;
            }
            let added = apply(index, path, *found, folder_time_ms);
            if added.is_some() && *found == Looked::Dir {
                new_folders.push(path);
            }
            added.unwrap_or(REFUSED)
        })
        .collect()
}

/// A file the browser said was written: a new version whatever its size and time.
fn written(index: &mut ShareIndex, id: EntryId, size: f64, mtime_ms: f64) {
    let Some(view) = index.view(id) else { return };
    let (name, parent) = (view.name.to_vec(), view.parent);
    let (mtime, mtime_nsec) = split_ms(mtime_ms);
    let _ = index.update_written(
        id,
        &NewEntry {
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
        },
    );
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

    fn index() -> ShareIndex {
        let mut index = ShareIndex::new(linkfs_proto::Epoch(1));
        root(&mut index, "top", 0.0);
        index
    }

    #[test]
    fn what_the_page_finds_on_disk_becomes_the_index() {
        let mut ix = index();
        let file = Looked::File {
            size: 5.0,
            mtime_ms: 1_000.0,
        };
        let dir = apply(&mut ix, "docs", Looked::Dir, 0.0).expect("a new folder is added");
        let note = apply(&mut ix, "docs/note.txt", file, 0.0).expect("a new file is added");
        assert_eq!(ix.lookup(b"docs/note.txt"), Some(EntryId(note)));
        assert_eq!(ix.view(EntryId(note)).map(|v| v.parent), Some(EntryId(dir)));
        // Under a folder the index does not have: left for the change that brings it.
        assert_eq!(apply(&mut ix, "elsewhere/x.txt", file, 0.0), None);
        assert_eq!(ix.lookup(b"elsewhere/x.txt"), None);
        // A changed file keeps its id with a new version.
        let before = ix.generation(EntryId(note));
        assert_eq!(
            apply(
                &mut ix,
                "docs/note.txt",
                Looked::File {
                    size: 9.0,
                    mtime_ms: 2_000.0
                },
                0.0
            ),
            None
        );
        assert_eq!(ix.view(EntryId(note)).map(|v| v.size), Some(9));
        assert_ne!(ix.generation(EntryId(note)), before);
        // A file that became a folder is replaced.
        let again = apply(&mut ix, "docs/note.txt", Looked::Dir, 0.0).expect("replaced");
        assert_ne!(again, note);
        assert_eq!(
            ix.view(EntryId(again)).map(|v| v.kind),
            Some(EntryKind::Dir)
        );
        // A removed folder goes with what it held.
        assert_eq!(apply(&mut ix, "docs", Looked::Gone, 0.0), None);
        assert_eq!(ix.lookup(b"docs"), None);
        assert_eq!(ix.lookup(b"docs/note.txt"), None);
        assert_eq!(ix.entries(), 1);
    }

    #[test]
    fn a_new_folder_and_what_settled_in_it_go_in_once() {
        let mut ix = index();
        let file = Looked::File {
            size: 1.0,
            mtime_ms: 0.0,
        };
        let ids = apply_all(
            &mut ix,
            &[("x", Looked::Dir), ("x/f", file), ("xy", file)],
            0.0,
        );
        assert_ne!(ids[0], REFUSED, "the folder is added");
        assert_eq!(ids[1], REFUSED, "its file is left to the folder's listing");
        assert_ne!(
            ids[2], REFUSED,
            "a name that only starts the same is not under it"
        );
        assert_eq!(ix.lookup(b"x/f"), None);
        assert_eq!(ix.entries(), 3);
    }

    #[test]
    fn a_browser_time_goes_into_the_index_and_comes_back_the_same() {
        for ms in [0.0, 1.0, 999.0, 1_700_000_000_123.0, 1_764_000_000_999.0] {
            let (s, ns) = split_ms(ms);
            assert_eq!(ms_of(s, ns), ms, "{ms}");
        }
    }
}
