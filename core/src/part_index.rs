//! What a link that shows part of a share sees, kept as an index of its own
//! that follows the whole share's: one folder as its root, or a selection of
//! paths at their places ([`crate::Selection`]). A sharer with one index
//! (the browser tab, which walks the folder once) serves a scoped or
//! selecting link's sessions from a [`PartIndex`] instead of walking again.
//!
//! # IO
//!
//! | the shell                                   | the part                                        |
//! | --- | --- |
//! | `PartIndex::folder(whole, path, epoch)`, `::selection(...)` | copies what it shows (a folder not there yet waits for it) |
//! | `follow(whole)` after the whole index changed | takes the whole log's operations since the last time |
//! | a session reads part entry `p`              | `whole_id(p)`: the entry to read on disk          |
//!
//! # States
//!
//! ```text
//!             folder found (at the start or later)
//!   Waiting ------------------------------------> Showing --- follow(): each upsert placed,
//!      ^                                             |         each removal removed
//!      +------ the folder removed: the part empties -+
//! ```
//!
//! # Decided here
//!
//! - An entry is in the part if it is below the folder (a folder part), or
//!   if the selection shows it (a selection part: inside a selected path, or
//!   a folder on the way to one). Its ancestors come with it, in order,
//!   whatever order the log gives (a folder updated after its child was
//!   added comes later in the log than the child).
//! - A folder that comes into the part brings what it holds.
//! - A file the whole index logged again is a new version in the part
//!   (`update_written`): the whole one said it changed.
//! - Removals the whole index no longer remembers (its horizon passed the
//!   part's place) are found by a sweep of everything the part maps.
//!
//! Bounds: the part holds at most the whole index's entries, its two maps
//! one pair per entry it ever showed (pruned when a folder goes).

use std::collections::HashMap;

use linkfs_proto::{EntryId, EntryKind, EntryView, Epoch, Seq};

use crate::selection::Selection;
use crate::share_index::{CTIME_UNKNOWN, NewEntry, ShareIndex};

/// What a part shows.
#[derive(Debug, Clone)]
enum PartOf {
    /// This folder (a '/'-separated path) as the root.
    Folder(Vec<u8>),
    Selection(Selection),
}

/// See the module docs.
#[derive(Debug)]
pub struct PartIndex {
    of: PartOf,
    index: ShareIndex,
    /// The whole index's id of the part's root, while it is there.
    root: Option<EntryId>,
    /// Whole id → part id, and back.
    to_part: HashMap<u32, u32>,
    to_whole: HashMap<u32, u32>,
    /// The whole log's position taken up to.
    cursor: Seq,
    /// The part's root name (the folder's own, or the share's).
    root_name: Vec<u8>,
}

impl PartIndex {
    /// The part showing folder `path` of `whole` as its root (its name the
    /// folder's). A folder not there yet is shown once it comes.
    pub fn folder(whole: &mut ShareIndex, path: &str, epoch: Epoch) -> PartIndex {
        let path = path.trim_matches('/').as_bytes().to_vec();
        let root_name = path
            .rsplit(|b| *b == b'/')
            .next()
            .unwrap_or_default()
            .to_vec();
        let mut part = PartIndex::empty(PartOf::Folder(path), epoch, root_name);
        part.follow(whole);
        part
    }

    /// The part showing `selection` of `whole`, at their places.
    pub fn selection(whole: &mut ShareIndex, selection: Selection, epoch: Epoch) -> PartIndex {
        let root_name = whole
            .view(EntryId::ROOT)
            .map(|v| v.name.to_vec())
            .unwrap_or_default();
        let mut part = PartIndex::empty(PartOf::Selection(selection), epoch, root_name);
        part.follow(whole);
        part
    }

    fn empty(of: PartOf, epoch: Epoch, root_name: Vec<u8>) -> PartIndex {
        let mut index = ShareIndex::new(epoch);
        let _ = index.push(&NewEntry {
            id: EntryId::ROOT,
            parent: EntryId::ROOT,
            kind: EntryKind::Dir,
            name: &root_name,
            size: 0,
            mtime: 0,
            mtime_nsec: 0,
            mode: 0o755,
            target: b"",
            dev: 0,
            ino: 0,
            ctime_ns: CTIME_UNKNOWN,
        });
        PartIndex {
            of,
            index,
            root: None,
            to_part: HashMap::new(),
            to_whole: HashMap::new(),
            cursor: Seq(0),
            root_name,
        }
    }

    /// The part's own index (what its sessions serve).
    pub fn index(&self) -> &ShareIndex {
        &self.index
    }

    /// Whether the folder it shows is there now (a selection's always is).
    pub fn showing(&self) -> bool {
        self.root.is_some()
    }

    /// The whole index's id of part entry `id`.
    pub fn whole_id(&self, id: EntryId) -> Option<EntryId> {
        self.to_whole.get(&id.0).map(|w| EntryId(*w))
    }

    /// Takes what changed in `whole` since the last call.
    pub fn follow(&mut self, whole: &mut ShareIndex) {
        if self.root.is_none() {
            self.adopt(whole);
        } else {
            let lost = !whole.can_resume_from(self.cursor);
            let ops: Vec<_> = whole.ops_from(self.cursor).map(|(_, op)| op).collect();
            for op in ops {
                if op.is_remove() {
                    self.removed(op.id());
                } else {
                    self.place(whole, op.id());
                }
                if self.root.is_none() {
                    // Its folder went: look for it again below.
                    break;
                }
            }
            if lost && self.root.is_some() {
                self.sweep(whole);
            }
            self.cursor = whole.log_end();
            if self.root.is_none() {
                self.adopt(whole);
            }
        }
        if whole.walk_done() && !self.index.walk_done() {
            self.index.mark_snapshot_complete();
        }
    }

    /// Finds the part's root in `whole` and copies what it shows.
    fn adopt(&mut self, whole: &mut ShareIndex) {
        self.cursor = whole.log_end();
        let root = match &self.of {
            PartOf::Selection(_) => Some(EntryId::ROOT),
            PartOf::Folder(path) => {
                let path = path.clone();
                whole
                    .lookup(&path)
                    .filter(|id| whole.view(*id).is_some_and(|v| v.kind == EntryKind::Dir))
            }
        };
        let Some(root) = root else { return };
        self.root = Some(root);
        self.to_part.insert(root.0, EntryId::ROOT.0);
        self.to_whole.insert(EntryId::ROOT.0, root.0);
        self.copy_below(whole, root);
    }

    /// The whole index removed `id` (and what it held).
    fn removed(&mut self, id: EntryId) {
        if Some(id) == self.root {
            let children: Vec<u32> = self.index.children(EntryId::ROOT).collect();
            for c in children {
                let _ = self.index.remove(EntryId(c));
            }
            self.to_part.clear();
            self.to_whole.clear();
            self.root = None;
            return;
        }
        if let Some(p) = self.to_part.remove(&id.0) {
            self.drop_part(EntryId(p));
        }
    }

    /// Removes part entry `p` and forgets what it held.
    fn drop_part(&mut self, p: EntryId) {
        let was_dir = self.index.view(p).is_some_and(|v| v.kind == EntryKind::Dir);
        let _ = self.index.remove(p);
        if let Some(w) = self.to_whole.remove(&p.0) {
            self.to_part.remove(&w);
        }
        if was_dir {
            let index = &self.index;
            self.to_whole
                .retain(|p, _| EntryId(*p) == EntryId::ROOT || index.view(EntryId(*p)).is_some());
            let to_whole = &self.to_whole;
            self.to_part.retain(|_, p| to_whole.contains_key(p));
        }
    }

    /// Whole entry `id` was added or changed: into the part, changed in it,
    /// or out of it, as it is now.
    fn place(&mut self, whole: &ShareIndex, id: EntryId) {
        if Some(id) == self.root || id == EntryId::ROOT {
            return;
        }
        let Some(view) = whole.view(id) else { return };
        let Some(parent) = self.shows(whole, &view) else {
            if let Some(p) = self.to_part.remove(&id.0) {
                self.drop_part(EntryId(p));
            }
            return;
        };
        match self.to_part.get(&id.0) {
            Some(&p) => {
                let (entry, stamp) = entry_of(whole, &view, parent, view.name);
                let written = view.kind == EntryKind::File;
                let _ = self
                    .index
                    .update_with_stamp(EntryId(p), &entry, stamp, written);
            }
            None => self.add(whole, &view, parent),
        }
    }

    /// The part id of the parent `view` has in the part (its ancestors
    /// brought in as needed), if the part shows it.
    fn shows(&mut self, whole: &ShareIndex, view: &EntryView<'_>) -> Option<EntryId> {
        if let PartOf::Selection(selection) = &self.of {
            let rel = whole.relative_path(view.id)?;
            if !selection.shows(&rel, view.kind == EntryKind::Dir) {
                return None;
            }
        }
        // The ancestors not in the part yet, nearest first.
        let mut missing = Vec::new();
        let mut at = view.parent;
        let top = loop {
            if let Some(&p) = self.to_part.get(&at.0) {
                break EntryId(p);
            }
            if at == EntryId::ROOT || missing.len() > whole.entries() as usize {
                // Above the part's folder: not shown.
                return None;
            }
            missing.push(at);
            at = whole.view(at)?.parent;
        };
        let mut parent = top;
        for w in missing.into_iter().rev() {
            let v = whole.view(w)?;
            let (entry, stamp) = entry_of(whole, &v, parent, v.name);
            let p = self.index.add_with_stamp(&entry, stamp).ok()?;
            self.to_part.insert(w.0, p.0);
            self.to_whole.insert(p.0, w.0);
            parent = p;
        }
        Some(parent)
    }

    /// Adds `view` under part folder `parent`, with what it holds.
    fn add(&mut self, whole: &ShareIndex, view: &EntryView<'_>, parent: EntryId) {
        let (entry, stamp) = entry_of(whole, view, parent, view.name);
        let Ok(p) = self.index.add_with_stamp(&entry, stamp) else {
            return;
        };
        self.to_part.insert(view.id.0, p.0);
        self.to_whole.insert(p.0, view.id.0);
        if view.kind == EntryKind::Dir {
            self.copy_below(whole, view.id);
        }
    }

    /// Copies what whole folder `dir` (in the part) holds and the part shows.
    fn copy_below(&mut self, whole: &ShareIndex, dir: EntryId) {
        let mut stack = vec![dir];
        while let Some(d) = stack.pop() {
            let Some(&pd) = self.to_part.get(&d.0) else {
                continue;
            };
            for c in whole.children(d) {
                let c = EntryId(c);
                if self.to_part.contains_key(&c.0) {
                    continue;
                }
                let Some(v) = whole.view(c) else { continue };
                if let PartOf::Selection(selection) = &self.of {
                    let shown = whole
                        .relative_path(c)
                        .is_some_and(|rel| selection.shows(&rel, v.kind == EntryKind::Dir));
                    if !shown {
                        continue;
                    }
                }
                let (entry, stamp) = entry_of(whole, &v, EntryId(pd), v.name);
                if let Ok(p) = self.index.add_with_stamp(&entry, stamp) {
                    self.to_part.insert(c.0, p.0);
                    self.to_whole.insert(p.0, c.0);
                    if v.kind == EntryKind::Dir {
                        stack.push(c);
                    }
                }
            }
        }
    }

    /// Removes what the part shows that the whole index no longer has.
    fn sweep(&mut self, whole: &ShareIndex) {
        let gone: Vec<u32> = self
            .to_part
            .iter()
            .filter(|(w, _)| whole.view(EntryId(**w)).is_none())
            .map(|(_, p)| *p)
            .collect();
        for p in gone {
            if self.index.view(EntryId(p)).is_some() {
                self.drop_part(EntryId(p));
            }
        }
    }

    /// The part's root name.
    pub fn root_name(&self) -> &[u8] {
        &self.root_name
    }
}

/// The part's entry for whole entry `v`, and the whole's
/// [`change_stamp`](crate::share_index::change_stamp) of it.
fn entry_of<'a>(
    whole: &ShareIndex,
    v: &EntryView<'a>,
    parent: EntryId,
    name: &'a [u8],
) -> (NewEntry<'a>, u32) {
    let (dev, ino, stamp) = whole.disk_identity(v.id).unwrap_or((0, 0, 0));
    let entry = NewEntry {
        id: EntryId::ROOT,
        parent,
        kind: v.kind,
        name,
        size: v.size,
        mtime: v.mtime,
        mtime_nsec: 0,
        mode: v.mode,
        target: v.target,
        dev,
        ino,
        ctime_ns: CTIME_UNKNOWN,
    };
    (entry, stamp)
}

#[cfg(test)]
mod tests;
