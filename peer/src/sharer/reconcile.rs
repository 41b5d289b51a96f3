//! Bringing the share index in line with the disk: for paths the watcher said
//! changed ([`reconcile_paths`]), or for everything ([`rescan`]) when events
//! were lost.
//!
//! Every path is looked at on disk (one `fstatat` beneath the shared root,
//! never through a symlink) and compared with the index:
//!
//! - gone from disk: the entry (and anything under it) is removed;
//! - new on disk: an entry is added; a new folder is listed, its subtree added
//!   and watched (what is moved in from outside arrives whole);
//! - changed: the entry is updated in place (a file whose contents may have
//!   changed gets a new generation: its size, mtime, device, inode or ctime
//!   moved, or the watcher saw it closed after writing);
//! - a path that disappeared and one that appeared in the same group with the
//!   same device and inode is a **move**: the entry keeps its id (a moved
//!   folder is one operation), and the folder's watches follow it;
//! - a kind change (a file replaced by a folder of the same name) is a removal
//!   and an addition: the new thing gets a new id.
//!
//! Paths the watcher named under a folder that moved in the same group are
//! checked again after the moves: an entry is removed only if its path still
//! leads to it and nothing is there on disk.
//!
//! The watcher's events inside a folder cannot be trusted around a move:
//! notify drops the watches of a folder that moves away (and of everything
//! below it) at once, and names what happens inside by the path it had. So
//! after the paths, some folders are compared with the disk ([`Recheck`]),
//! watched again first, so that nothing written in them meanwhile is lost:
//!
//! - a folder that moved, and a folder found at a path with another device
//!   and inode than the index's (rotated, swapped, made again): its whole
//!   subtree;
//! - a folder the watcher named itself (made, moved in, removed and made
//!   again with the same inode): its own listing; what is below it was named
//!   by its own events.

use std::collections::HashMap;
use std::ops::AddAssign;
use std::sync::RwLock;

use linkfs_core::{NewEntry, ShareIndex};
use linkfs_proto::{EntryId, EntryKind};

use super::disk::{DiskEntry, Listing, ShareRoot};

/// Who keeps the watches on folders (the folder watch, or nobody in tests).
pub trait FolderWatches {
    /// Starts watching the folder at `rel` (relative to the shared root).
    fn watch(&self, rel: &[u8]);
    /// Stops watching the folder that was at `rel`.
    fn unwatch(&self, rel: &[u8]);
}

/// No watches (tests, or a share without watching).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoWatches;

impl FolderWatches for NoWatches {
    fn watch(&self, _rel: &[u8]) {}
    fn unwatch(&self, _rel: &[u8]) {}
}

/// Names of a folder compared at a time in a rescan: its listing is never
/// held whole (a restart of a share with a folder of 100,000 names held about
/// 12 MB of it at the restart's peak; one of a million names, about 120 MB).
pub const LIST_CHUNK: usize = 4096;

/// One folder's comparison in a rescan, its listing a chunk at a time.
struct FolderPass {
    dir: EntryId,
    /// The folder's children when the pass began (sorted by id), and which of
    /// them the listing named.
    before: Vec<u32>,
    seen: Vec<bool>,
    /// Its folders already in the index, to compare next.
    next: Vec<(EntryId, Vec<u8>)>,
}

/// A folder to compare with the disk after a group of paths (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recheck {
    pub dir: EntryId,
    pub rel: Vec<u8>,
    /// The whole subtree, not just the folder's own listing.
    pub deep: bool,
}

/// What one reconciliation changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReconcileStats {
    pub added: u64,
    pub updated: u64,
    pub moved: u64,
    pub removed: u64,
    /// Paths that could not be read (permission denied, I/O errors): left as they were.
    pub unreadable: u64,
}

impl AddAssign for ReconcileStats {
    fn add_assign(&mut self, o: ReconcileStats) {
        self.added += o.added;
        self.updated += o.updated;
        self.moved += o.moved;
        self.removed += o.removed;
        self.unreadable += o.unreadable;
    }
}

impl ReconcileStats {
    pub fn changes(&self) -> u64 {
        self.added + self.updated + self.moved + self.removed
    }
}

fn split(rel: &[u8]) -> (&[u8], &[u8]) {
    match rel.iter().rposition(|b| *b == b'/') {
        Some(at) => (&rel[..at], &rel[at + 1..]),
        None => (&b""[..], rel),
    }
}

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = dir.to_vec();
    if !p.is_empty() {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

fn new_entry<'a>(parent: EntryId, name: &'a [u8], d: &'a DiskEntry) -> NewEntry<'a> {
    // The index numbers new entries; an update keeps the entry's id.
    d.new_entry(EntryId::ROOT, parent, name)
}

/// A path that disappeared: its path, the entry that was there, its kind,
/// and its (device, inode) to recognise it if it appears elsewhere.
type Gone = (Vec<u8>, EntryId, EntryKind, (u64, u64));

/// One reconciliation over the index.
struct Reconciler<'a, W: FolderWatches> {
    index: &'a mut ShareIndex,
    root: &'a ShareRoot,
    watches: &'a W,
    stats: ReconcileStats,
    /// Folders to compare with the disk once the paths are done.
    recheck: Vec<Recheck>,
}

impl<W: FolderWatches> Reconciler<'_, W> {
    fn lstat(&mut self, rel: &[u8]) -> Option<Option<DiskEntry>> {
        match self.root.lstat(rel) {
            Ok(d) => Some(d),
            Err(e) => {
                tracing::info!(path = %String::from_utf8_lossy(rel), error = %e, "cannot look at a changed path");
                self.stats.unreadable += 1;
                None
            }
        }
    }

    /// The folder `rel` in the index, adding it (and missing ancestors) from
    /// disk if the watcher's events did not say so yet.
    fn ensure_dir(&mut self, rel: &[u8]) -> Option<EntryId> {
        if let Some(id) = self.index.lookup(rel) {
            return self.is_folder(id).then_some(id);
        }
        let (parent, name) = split(rel);
        let parent_id = self.ensure_dir(parent)?;
        match self.lstat(rel)?? {
            d if d.kind == EntryKind::Dir => self.add(parent_id, rel, name, &d),
            _ => None,
        }
    }

    /// Adds what is at `rel` under `parent`; a folder is listed, added whole and watched.
    fn add(&mut self, parent: EntryId, rel: &[u8], name: &[u8], d: &DiskEntry) -> Option<EntryId> {
        let id = match self.index.add(&new_entry(parent, name, d)) {
            Ok(id) => id,
            Err(e) => {
                tracing::warn!(path = %String::from_utf8_lossy(rel), error = %e, "cannot add a new entry to the share");
                return None;
            }
        };
        self.stats.added += 1;
        if d.kind == EntryKind::Dir {
            self.watches.watch(rel);
            self.add_subtree(id, rel);
        }
        Some(id)
    }

    /// Lists the new folder `rel` (entry `dir`) and adds everything below it.
    fn add_subtree(&mut self, dir: EntryId, rel: &[u8]) {
        let mut stack = vec![(dir, rel.to_vec())];
        while let Some((dir, rel)) = stack.pop() {
            let listing = match self.root.list(&rel) {
                Ok(Some(l)) => l,
                Ok(None) => continue,
                Err(e) => {
                    tracing::info!(path = %String::from_utf8_lossy(&rel), error = %e, "cannot list a new folder");
                    self.stats.unreadable += 1;
                    continue;
                }
            };
            for (name, d) in listing {
                if self.index.lookup_child(dir, &name).is_some() {
                    continue;
                }
                let child_rel = join(&rel, &name);
                match self.index.add(&new_entry(dir, &name, &d)) {
                    Ok(id) => {
                        self.stats.added += 1;
                        if d.kind == EntryKind::Dir {
                            self.watches.watch(&child_rel);
                            stack.push((id, child_rel));
                        }
                    }
                    Err(e) => {
                        tracing::warn!(path = %String::from_utf8_lossy(&child_rel), error = %e, "cannot add an entry to the share");
                    }
                }
            }
        }
    }

    fn update(&mut self, id: EntryId, parent: EntryId, name: &[u8], d: &DiskEntry) {
        self.update_as(id, parent, name, d, false);
    }

    /// `written`: the watcher saw the file closed after writing (a new
    /// generation whatever its attributes say).
    fn update_as(
        &mut self,
        id: EntryId,
        parent: EntryId,
        name: &[u8],
        d: &DiskEntry,
        written: bool,
    ) {
        let e = new_entry(parent, name, d);
        let result = if written {
            self.index.update_written(id, &e)
        } else {
            self.index.update(id, &e)
        };
        match result {
            Ok(true) => self.stats.updated += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!(entry = id.0, error = %e, "cannot update an entry"),
        }
    }

    /// The folders at and below `rel` (entry `id`), as paths, for their watches.
    fn dirs_below(&self, id: EntryId, rel: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut stack = vec![(id, rel.to_vec())];
        while let Some((dir, rel)) = stack.pop() {
            for c in self.index.children(dir) {
                if let Some(v) = self.index.view(EntryId(c))
                    && v.kind == EntryKind::Dir
                {
                    stack.push((EntryId(c), join(&rel, v.name)));
                }
            }
            out.push(rel);
        }
        out
    }

    fn remove(&mut self, id: EntryId, rel: &[u8]) {
        if self.is_folder(id) {
            for d in self.dirs_below(id, rel) {
                self.watches.unwatch(&d);
            }
        }
        match self.index.remove(id) {
            Ok(_) => self.stats.removed += 1,
            Err(e) => tracing::warn!(entry = id.0, error = %e, "cannot remove an entry"),
        }
    }

    fn paths(&mut self, named_paths: Named<'_>) {
        let Named {
            paths,
            written,
            moved,
        } = named_paths;
        // A folder's own mtime changes with what is added, removed or renamed in
        // it, and the watcher names only the child: look at the parents too.
        let mut all: Vec<Vec<u8>> = Vec::with_capacity(paths.len() * 2);
        let named: std::collections::HashSet<&[u8]> = paths.iter().map(Vec::as_slice).collect();
        let mut root_touched = false;
        for p in paths.iter().filter(|p| !p.is_empty()) {
            all.push(p.clone());
            let (parent, _) = split(p);
            if parent.is_empty() {
                root_touched = true;
            } else {
                all.push(parent.to_vec());
            }
        }
        if root_touched
            && let Some(Some(d)) = self.lstat_root()
            && let Some(name) = self.index.view(EntryId::ROOT).map(|v| v.name.to_vec())
        {
            self.update(EntryId::ROOT, EntryId::ROOT, &name, &d);
        }
        let mut sorted: Vec<&Vec<u8>> = all.iter().collect();
        sorted.sort_unstable();
        sorted.dedup();
        // What disappeared (by path, with the entry that was there) and what
        // appeared (not in the index), so moves can be told apart.
        let mut gone: Vec<Gone> = Vec::new();
        let mut appeared: Vec<(Vec<u8>, DiskEntry)> = Vec::new();
        for rel in sorted {
            let Some(disk) = self.lstat(rel) else {
                continue;
            };
            let existing = self.index.lookup(rel);
            match (existing, disk) {
                (None, None) => {}
                (None, Some(d)) => appeared.push((rel.clone(), d)),
                (Some(id), None) => {
                    if let (Some(v), Some((dev, ino, _))) =
                        (self.index.view(id), self.index.disk_identity(id))
                    {
                        gone.push((rel.clone(), id, v.kind, (dev, ino)));
                    }
                }
                (Some(id), Some(d)) => {
                    let Some(v) = self.index.view(id).map(|v| (v.kind, v.parent)) else {
                        continue;
                    };
                    if v.0 == d.kind {
                        let (_, name) = split(rel);
                        let was_written = written.binary_search(rel).is_ok();
                        let replaced = self
                            .index
                            .disk_identity(id)
                            .is_some_and(|(dev, ino, _)| (dev, ino) != (d.dev, d.ino));
                        self.update_as(id, v.1, name, &d, was_written);
                        // A folder renamed away and back (or into a place
                        // and out) keeps its inode, but notify dropped the
                        // watches below it when it moved: compared deep, so
                        // they are made again and what changed meanwhile found.
                        let went_and_came = moved.binary_search(rel).is_ok();
                        if d.kind == EntryKind::Dir && (replaced || named.contains(rel.as_slice()))
                        {
                            self.recheck.push(Recheck {
                                dir: id,
                                rel: rel.clone(),
                                deep: replaced || went_and_came,
                            });
                        }
                    } else {
                        // Replaced by something of another kind: a new entry.
                        self.remove(id, rel);
                        appeared.push((rel.clone(), d));
                    }
                }
            }
        }
        // Moves: same device and inode, same kind.
        let mut by_identity: HashMap<(u64, u64), usize> = HashMap::new();
        for (n, g) in gone.iter().enumerate() {
            by_identity.insert(g.3, n);
        }
        let mut moved_away = vec![false; gone.len()];
        appeared.sort_by(|a, b| a.0.cmp(&b.0));
        for (rel, d) in &appeared {
            let (parent_rel, name) = split(rel);
            let Some(parent) = self.ensure_dir(parent_rel) else {
                continue;
            };
            if self.index.lookup_child(parent, name).is_some() {
                // Added meanwhile (a new folder's listing took it).
                continue;
            }
            let from = by_identity
                .get(&(d.dev, d.ino))
                .copied()
                .filter(|n| !moved_away[*n] && gone[*n].2 == d.kind);
            match from {
                Some(n) => {
                    let (old_rel, id, kind, _) = &gone[n];
                    let (id, kind) = (*id, *kind);
                    let old_dirs = (kind == EntryKind::Dir).then(|| self.dirs_below(id, old_rel));
                    match self.index.update(id, &new_entry(parent, name, d)) {
                        Ok(_) => {
                            moved_away[n] = true;
                            self.stats.moved += 1;
                            if kind == EntryKind::Dir {
                                self.recheck.push(Recheck {
                                    dir: id,
                                    rel: rel.clone(),
                                    deep: true,
                                });
                            }
                            if let Some(old) = old_dirs {
                                // Watches name paths: the moved folders get new ones.
                                for o in &old {
                                    self.watches.unwatch(o);
                                }
                                for new in self.dirs_below(id, rel) {
                                    self.watches.watch(&new);
                                }
                            }
                        }
                        Err(e) => {
                            tracing::info!(error = %e, "a move could not be applied; adding anew");
                            self.add(parent, rel, name, d);
                        }
                    }
                }
                None => {
                    self.add(parent, rel, name, d);
                }
            }
        }
        // What is gone for good: only if its path still leads to it (a folder
        // above it may have moved) and nothing is there on disk.
        for (n, (rel, id, _, _)) in gone.iter().enumerate() {
            if moved_away[n] || self.index.lookup(rel) != Some(*id) {
                continue;
            }
            if let Some(None) = self.lstat(rel) {
                self.remove(*id, rel);
            }
        }
    }

    /// Brings the root's own attributes in line with the disk.
    fn root_attrs(&mut self) {
        if let Some(Some(d)) = self.lstat_root() {
            let root = self.index.view(EntryId::ROOT).map(|v| v.name.to_vec());
            if let Some(name) = root {
                self.update(EntryId::ROOT, EntryId::ROOT, &name, &d);
            }
        }
    }

    /// Whether `dir` is a folder of the index.
    fn is_folder(&self, dir: EntryId) -> bool {
        self.index
            .view(dir)
            .is_some_and(|v| v.kind == EntryKind::Dir)
    }

    /// Starts comparing folder `dir` with its listing, which comes in chunks
    /// ([`Reconciler::folder_chunk`], then [`Reconciler::folder_end`]). None if
    /// it is not a folder of the index (any more).
    fn folder_start(&self, dir: EntryId) -> Option<FolderPass> {
        if !self.is_folder(dir) {
            return None;
        }
        let mut before = self.index.children(dir).collect::<Vec<u32>>();
        before.sort_unstable();
        let seen = vec![false; before.len()];
        Some(FolderPass {
            dir,
            before,
            seen,
            next: Vec::new(),
        })
    }

    /// Compares a chunk of the folder's listing with the index: each name
    /// is looked up in the folder (a binary search), updated, replaced (a kind
    /// change) or added, and marked as seen.
    fn folder_chunk(&mut self, pass: &mut FolderPass, rel: &[u8], chunk: Listing) {
        let dir = pass.dir;
        if !self.is_folder(dir) {
            // Gone or replaced since it was listed: what replaced it was seen there.
            return;
        }
        // In name order, as the folder's children are kept: neighbouring
        // lookups then share most of their steps (the disk lists names in
        // hash order; a million of them looked up in that order took 9 s,
        // 7.5 sorted).
        let mut chunk = chunk;
        chunk.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<&[u8]> = chunk.iter().map(|(n, _)| n.as_slice()).collect();
        // Looked up before anything changes: the names are the folder's own
        // and differ, so what one of them does leaves the others' answers.
        let found = self.index.lookup_children(dir, &names);
        for ((name, d), id) in chunk.into_iter().zip(found) {
            let child_rel = join(rel, &name);
            let Some(id) = id else {
                self.add(dir, &child_rel, &name, &d);
                continue;
            };
            if let Ok(at) = pass.before.binary_search(&id.0) {
                pass.seen[at] = true;
            }
            let kind = self.index.view(id).map(|v| v.kind);
            if kind != Some(d.kind) {
                self.remove(id, &child_rel);
                self.add(dir, &child_rel, &name, &d);
            } else {
                self.update(id, dir, &name, &d);
                if d.kind == EntryKind::Dir {
                    pass.next.push((id, child_rel));
                }
            }
        }
    }

    /// Ends a folder's comparison once its whole listing was compared: what
    /// the folder held when the pass began and the listing did not name is
    /// removed. Returns the folders below it that were already in the index,
    /// to compare next (new ones were added whole).
    fn folder_end(&mut self, pass: FolderPass, rel: &[u8]) -> Vec<(EntryId, Vec<u8>)> {
        let dir = pass.dir;
        for (id, seen) in pass.before.iter().zip(&pass.seen) {
            if *seen {
                continue;
            }
            let id = EntryId(*id);
            let Some(name) = self
                .index
                .view(id)
                .filter(|v| v.parent == dir)
                .map(|v| v.name.to_vec())
            else {
                continue;
            };
            self.remove(id, &join(rel, &name));
        }
        pass.next
    }

    fn lstat_root(&mut self) -> Option<Option<DiskEntry>> {
        self.root.stat_root().ok()
    }
}

/// The paths a settled group of events named (relative to the root, sorted).
#[derive(Debug, Clone, Copy)]
pub struct Named<'a> {
    pub paths: &'a [Vec<u8>],
    /// Those the watcher saw closed after writing.
    pub written: &'a [Vec<u8>],
    /// Those something was renamed from or to.
    pub moved: &'a [Vec<u8>],
}

/// Brings the index in line with the disk for `paths` (relative to the root,
/// as the watcher named them), then compares the folders that asks for
/// ([`Recheck`]); `written` (sorted) are those of them the watcher saw closed
/// after writing. See the module docs. Holds the index the whole time (see
/// [`reconcile_paths_shared`] for an index being served).
pub fn reconcile_paths(
    index: &mut ShareIndex,
    root: &ShareRoot,
    watches: &impl FolderWatches,
    paths: &[Vec<u8>],
    written: &[Vec<u8>],
) -> ReconcileStats {
    let mut r = Reconciler {
        index,
        root,
        watches,
        stats: ReconcileStats::default(),
        recheck: Vec::new(),
    };
    r.paths(Named {
        paths,
        written,
        moved: &[],
    });
    let recheck = std::mem::take(&mut r.recheck);
    compare(&mut r, recheck, true);
    r.stats
}

/// [`reconcile_paths`] for an index that is being served: the paths under one
/// write lock, then the folders to compare as [`rescan_shared`] compares
/// (short locks). `changed` is called after each step that changed something.
pub fn reconcile_paths_shared(
    index: &RwLock<ShareIndex>,
    root: &ShareRoot,
    watches: &impl FolderWatches,
    named: Named<'_>,
    mut changed: impl FnMut(),
) -> ReconcileStats {
    let (mut stats, recheck) = {
        let mut ix = index.write().unwrap_or_else(|p| p.into_inner());
        let mut r = Reconciler {
            index: &mut ix,
            root,
            watches,
            stats: ReconcileStats::default(),
            recheck: Vec::new(),
        };
        r.paths(named);
        (r.stats, r.recheck)
    };
    if stats.changes() > 0 {
        changed();
    }
    stats += compare_shared(index, root, watches, recheck, true, changed);
    stats
}

/// Whether a rescan listed folder `rel` whole (a folder gone, or one that
/// could not be read, is left as it was: nothing in it is removed).
fn listed_whole(listed: std::io::Result<bool>, rel: &[u8], stats: &mut ReconcileStats) -> bool {
    match listed {
        Ok(whole) => whole,
        Err(e) => {
            tracing::info!(path = %String::from_utf8_lossy(rel), error = %e, "cannot list a folder while rescanning");
            stats.unreadable += 1;
            false
        }
    }
}

/// Compares the whole folder with the index and fixes every difference,
/// holding the index for the whole time (see [`rescan_shared`] for a shared one).
/// Moves between folders come out as a removal and an addition here.
pub fn rescan(
    index: &mut ShareIndex,
    root: &ShareRoot,
    watches: &impl FolderWatches,
) -> ReconcileStats {
    let mut r = Reconciler {
        index,
        root,
        watches,
        stats: ReconcileStats::default(),
        recheck: Vec::new(),
    };
    r.root_attrs();
    compare(&mut r, vec![Recheck::everything()], false);
    r.stats
}

impl Recheck {
    /// The whole shared folder.
    fn everything() -> Recheck {
        Recheck {
            dir: EntryId::ROOT,
            rel: Vec::new(),
            deep: true,
        }
    }
}

/// Compares folders with the disk, holding the index; with `install_watches`,
/// each folder is watched before it is listed.
fn compare<W: FolderWatches>(
    r: &mut Reconciler<'_, W>,
    start: Vec<Recheck>,
    install_watches: bool,
) {
    for Recheck { dir, rel, deep } in start {
        if r.index.relative_path(dir).as_deref() != Some(&rel[..]) {
            // Moved again since: that move compares it.
            continue;
        }
        let mut stack = vec![(dir, rel)];
        while let Some((dir, rel)) = stack.pop() {
            if install_watches {
                r.watches.watch(&rel);
            }
            let Some(mut pass) = r.folder_start(dir) else {
                continue;
            };
            let root = r.root;
            let listed = root.list_in_chunks(&rel, LIST_CHUNK, |chunk| {
                r.folder_chunk(&mut pass, &rel, chunk);
            });
            if listed_whole(listed, &rel, &mut r.stats) {
                let below = r.folder_end(pass, &rel);
                if deep {
                    stack.extend(below);
                }
            }
        }
    }
}

/// How [`rescan_shared`] goes about it.
#[derive(Debug, Clone, Copy)]
pub struct RescanOptions {
    /// Watch every folder before it is listed (a sharer that starts from a
    /// saved index has no watches yet); off when the watches are in place.
    pub install_watches: bool,
}

/// [`rescan`] for an index that is being served: each folder is listed
/// without the lock, [`LIST_CHUNK`] names at a time, and each chunk compared
/// under a short write lock of its own, so readers and senders are never held
/// up for long. `changed` is called after
/// each folder that changed something (sessions then cut new batches).
pub fn rescan_shared(
    index: &RwLock<ShareIndex>,
    root: &ShareRoot,
    watches: &impl FolderWatches,
    options: RescanOptions,
    mut changed: impl FnMut(),
) -> ReconcileStats {
    let mut stats = ReconcileStats::default();
    step(index, root, watches, &mut stats, &mut changed, |r| {
        r.root_attrs();
    });
    stats += compare_shared(
        index,
        root,
        watches,
        vec![Recheck::everything()],
        options.install_watches,
        changed,
    );
    stats
}

/// One short write lock of a shared comparison; what it changed is counted.
fn step<W: FolderWatches, T>(
    index: &RwLock<ShareIndex>,
    root: &ShareRoot,
    watches: &W,
    total: &mut ReconcileStats,
    changed: &mut impl FnMut(),
    work: impl FnOnce(&mut Reconciler<'_, W>) -> T,
) -> T {
    let mut ix = index.write().unwrap_or_else(|p| p.into_inner());
    let mut r = Reconciler {
        index: &mut ix,
        root,
        watches,
        stats: ReconcileStats::default(),
        recheck: Vec::new(),
    };
    let out = work(&mut r);
    let stats = r.stats;
    drop(ix);
    if stats.changes() > 0 {
        changed();
    }
    *total += stats;
    out
}

/// [`compare`] for an index that is being served: each folder listed without
/// the lock, [`LIST_CHUNK`] names at a time, each chunk compared under a short
/// write lock of its own.
fn compare_shared(
    index: &RwLock<ShareIndex>,
    root: &ShareRoot,
    watches: &impl FolderWatches,
    start: Vec<Recheck>,
    install_watches: bool,
    mut changed: impl FnMut(),
) -> ReconcileStats {
    let mut stats = ReconcileStats::default();
    for Recheck { dir, rel, deep } in start {
        let still_there = index
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .relative_path(dir)
            .is_some_and(|p| p == rel);
        if !still_there {
            // Moved again since: that move compares it.
            continue;
        }
        let mut stack = vec![(dir, rel)];
        while let Some((dir, rel)) = stack.pop() {
            if install_watches {
                watches.watch(&rel);
            }
            let started = step(index, root, watches, &mut stats, &mut changed, |r| {
                r.folder_start(dir)
            });
            let Some(mut pass) = started else {
                continue;
            };
            let listed = root.list_in_chunks(&rel, LIST_CHUNK, |chunk| {
                step(index, root, watches, &mut stats, &mut changed, |r| {
                    r.folder_chunk(&mut pass, &rel, chunk);
                });
            });
            if listed_whole(listed, &rel, &mut stats) {
                let below = step(index, root, watches, &mut stats, &mut changed, |r| {
                    r.folder_end(pass, &rel)
                });
                if deep {
                    stack.extend(below);
                }
            }
        }
    }
    stats
}
