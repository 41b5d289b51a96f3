//! A rescan: the folder listed again into an index of its own (`fresh`),
//! then the share's index brought in line with it, entry by entry, where a
//! browser cannot say what changed (no `FileSystemObserver`, or it lost
//! changes). What is the same is left alone (a file keeps its id and version
//! while its size and time are the same); a file whose size or time differ
//! is a new version; what is new is added (a folder with what it holds);
//! what is gone is removed; an entry whose kind changed is replaced.
//!
//! Returns, for every file the rescan found, its id in the fresh listing and
//! in the share, so the page reads it from where the rescan found it.

use std::collections::HashMap;

use linkfs_core::{CTIME_UNKNOWN, NewEntry, ShareIndex};
use linkfs_proto::{EntryId, EntryKind};

/// What changed in the share, in counts (for the person sharing).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Changed {
    pub added: u64,
    pub updated: u64,
    pub removed: u64,
}

/// Brings `index` in line with `fresh` (both rooted at the shared folder).
/// Every file of `fresh` with its id in `index` (fresh, share), and the counts.
pub fn reconcile(index: &mut ShareIndex, fresh: &ShareIndex) -> (Vec<(u32, u32)>, Changed) {
    let mut pairs = Vec::new();
    let mut changed = Changed::default();
    let mut stack = vec![(EntryId::ROOT, EntryId::ROOT)];
    while let Some((f_dir, dir)) = stack.pop() {
        let mut have: HashMap<Vec<u8>, EntryId> = index
            .children(dir)
            .filter_map(|c| index.view(EntryId(c)).map(|v| (v.name.to_vec(), v.id)))
            .collect();
        for c in fresh.children(f_dir) {
            let f_id = EntryId(c);
            let Some(f) = fresh.view(f_id) else { continue };
            let found = have.remove(f.name);
            match found.and_then(|id| index.view(id).map(|v| (id, v.kind, v.size, v.mtime))) {
                Some((id, kind, size, mtime)) if kind == f.kind => {
                    if kind == EntryKind::Dir {
                        stack.push((f_id, id));
                        continue;
                    }
                    // A tab knows no ctimes: an entry's change stamp is its
                    // mtime's nanoseconds (`linkfs_core::change_stamp`).
                    let f_nsec = fresh.disk_identity(f_id).map_or(0, |d| d.2);
                    let nsec = index.disk_identity(id).map_or(0, |d| d.2);
                    if (size, mtime, nsec) != (f.size, f.mtime, f_nsec) {
                        let entry = entry_of(&f, dir, f_nsec);
                        if index.update(id, &entry).unwrap_or(false) {
                            changed.updated += 1;
                        }
                    }
                    pairs.push((f_id.0, id.0));
                }
                old => {
                    if let Some((id, ..)) = old {
                        changed.removed += index.remove(id).unwrap_or(0);
                    }
                    copy(index, fresh, f_id, dir, &mut pairs, &mut changed);
                }
            }
        }
        for (_, gone) in have {
            changed.removed += index.remove(gone).unwrap_or(0);
        }
    }
    (pairs, changed)
}

/// Adds fresh entry `f_id` under `parent` in `index`, with what it holds.
fn copy(
    index: &mut ShareIndex,
    fresh: &ShareIndex,
    f_id: EntryId,
    parent: EntryId,
    pairs: &mut Vec<(u32, u32)>,
    changed: &mut Changed,
) {
    let mut stack = vec![(f_id, parent)];
    while let Some((f_id, parent)) = stack.pop() {
        let Some(f) = fresh.view(f_id) else { continue };
        let nsec = fresh.disk_identity(f_id).map_or(0, |d| d.2);
        let Ok(id) = index.add(&entry_of(&f, parent, nsec)) else {
            continue;
        };
        changed.added += 1;
        if f.kind == EntryKind::Dir {
            stack.extend(fresh.children(f_id).map(|c| (EntryId(c), id)));
        } else {
            pairs.push((f_id.0, id.0));
        }
    }
}

fn entry_of<'a>(f: &linkfs_proto::EntryView<'a>, parent: EntryId, nsec: u32) -> NewEntry<'a> {
    NewEntry {
        id: EntryId::ROOT,
        parent,
        kind: f.kind,
        name: f.name,
        size: f.size,
        mtime: f.mtime,
        mtime_nsec: nsec,
        mode: f.mode,
        target: f.target,
        dev: 0,
        ino: 0,
        ctime_ns: CTIME_UNKNOWN,
    }
}

#[cfg(test)]
mod tests {
    use super::super::folder::{Found, add, root};
    use super::*;

    fn listing(files: &[(&str, f64, f64)]) -> ShareIndex {
        let mut ix = ShareIndex::new(linkfs_proto::Epoch(1));
        root(&mut ix, "top", 0.0);
        for (path, size, mtime) in files {
            let mut parent = 0u32;
            let parts: Vec<&str> = path.split('/').collect();
            for (i, name) in parts.iter().enumerate() {
                let last = i + 1 == parts.len();
                let dir = !last || path.ends_with('/');
                if name.is_empty() {
                    continue;
                }
                let here = ix.lookup_child(EntryId(parent), name.as_bytes());
                parent = match here {
                    Some(id) => id.0,
                    None => add(
                        &mut ix,
                        &[Found {
                            parent,
                            dir,
                            name,
                            size: *size,
                            mtime_ms: *mtime,
                        }],
                    )[0],
                };
            }
        }
        ix
    }

    #[test]
    fn a_rescan_adds_the_new_removes_the_gone_and_updates_only_the_changed() {
        let mut ix = listing(&[
            ("same.txt", 5.0, 1000.0),
            ("changed.txt", 5.0, 1000.0),
            ("gone.txt", 1.0, 1000.0),
            ("old/inside.txt", 2.0, 1000.0),
            ("was-file", 3.0, 1000.0),
        ]);
        let same = ix.lookup(b"same.txt").unwrap();
        let same_gen = ix.generation(same);
        let changed_id = ix.lookup(b"changed.txt").unwrap();
        let changed_gen = ix.generation(changed_id);
        let fresh = listing(&[
            ("same.txt", 5.0, 1000.0),
            ("changed.txt", 5.0, 2000.0),
            ("new/deep/n.txt", 4.0, 1000.0),
            ("was-file/now-a-folder.txt", 1.0, 1000.0),
        ]);
        let (pairs, counts) = reconcile(&mut ix, &fresh);
        assert_eq!(ix.lookup(b"same.txt"), Some(same));
        assert_eq!(ix.generation(same), same_gen, "unchanged: the same version");
        assert_eq!(ix.lookup(b"changed.txt"), Some(changed_id));
        assert_ne!(ix.generation(changed_id), changed_gen, "a new version");
        assert_eq!(ix.lookup(b"gone.txt"), None);
        assert_eq!(ix.lookup(b"old/inside.txt"), None);
        assert_eq!(ix.lookup(b"old"), None);
        assert!(ix.lookup(b"new/deep/n.txt").is_some());
        assert!(ix.lookup(b"was-file/now-a-folder.txt").is_some());
        assert_eq!(ix.entries(), fresh.entries());
        // Every fresh file is paired with its id in the share.
        assert_eq!(pairs.len(), 4);
        let mut fresh = fresh;
        for path in [
            "same.txt",
            "changed.txt",
            "new/deep/n.txt",
            "was-file/now-a-folder.txt",
        ] {
            let f = fresh.lookup(path.as_bytes()).unwrap().0;
            let i = ix.lookup(path.as_bytes()).unwrap().0;
            assert!(pairs.contains(&(f, i)), "{path}");
        }
        assert_eq!(counts.updated, 1);
        assert_eq!(
            counts.added, 5,
            "new, new/deep, n.txt, was-file, its file: {counts:?}"
        );
        assert_eq!(counts.removed, 4, "{counts:?}");
    }
}
