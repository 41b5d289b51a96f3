//! The receiver's compact in-memory index.
//!
//! Entries are stored column-wise by id (ids are dense), names in one byte
//! arena, so an entry costs about 30 bytes plus its name: no per-entry
//! allocation, no per-entry object. Each directory keeps the ids of its
//! children; they are sorted by name bytes lazily (when a lookup needs it), so
//! a lookup in a directory of a million entries is a binary search.
//!
//! Listings in display order (directories first, then by name, size or time,
//! either direction) are computed once per directory, order and change, and
//! kept in a small cache ([`MAX_CACHED_VIEWS`]), so scrolling a 100,000-entry
//! directory asks only for windows of an order that already exists.
//!
//! Operations are validated as they are applied: a name must not be empty,
//! `.`, `..`, or contain `/` or NUL; a parent must be a directory present in
//! the index; a move must not put a directory inside itself. An invalid
//! operation is refused with an [`IndexError`] and changes nothing.

use std::cmp::Ordering;
use std::collections::HashMap;

use linkfs_proto::{
    BatchHeader, BatchReader, DecodeError, EntryId, EntryKind, EntryView, Generation, OpView,
};

/// How many sorted listings are kept.
pub const MAX_CACHED_VIEWS: usize = 4;

const KIND_MASK: u8 = 3;
const PRESENT: u8 = 4;

/// How a listing is ordered (directories always come first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SortKey {
    Name,
    Size,
    Mtime,
    Kind,
}

/// Why an operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    #[error("the sharer sent a batch that is not valid: {0}")]
    Decode(#[from] DecodeError),
    #[error("entry {id} has an unsafe name {name:?} (empty, '.', '..', or containing '/' or NUL)")]
    UnsafeName { id: EntryId, name: String },
    #[error("entry {id} names parent {parent}, which is not a directory in the index")]
    BadParent { id: EntryId, parent: EntryId },
    #[error("moving directory {id} under {parent} would put it inside itself")]
    Cycle { id: EntryId, parent: EntryId },
    #[error("the share root cannot be removed or moved")]
    Root,
}

/// A borrowed view of one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef<'a> {
    pub id: EntryId,
    pub parent: EntryId,
    pub kind: EntryKind,
    pub name: &'a [u8],
    pub size: u64,
    pub mtime: i64,
    pub mode: u32,
    pub generation: Generation,
    pub target: &'a [u8],
    /// Children, for directories.
    pub children: u32,
}

#[derive(Debug, Default)]
struct Dir {
    children: Vec<u32>,
    sorted: bool,
    /// Bumped on every change of the children (or of a child's sort fields).
    version: u32,
}

#[derive(Debug)]
struct View {
    dir: u32,
    key: SortKey,
    descending: bool,
    version: u32,
    order: Vec<u32>,
    last_used: u64,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct Index {
    parent: Vec<u32>,
    kind: Vec<u8>,
    name_off: Vec<u32>,
    name_len: Vec<u16>,
    names: Vec<u8>,
    dead_name_bytes: usize,
    size: Vec<u64>,
    mtime: Vec<i64>,
    mode: Vec<u16>,
    generation: HashMap<u32, u32>,
    targets: HashMap<u32, Box<[u8]>>,
    dirs: HashMap<u32, Dir>,
    live: usize,
    views: Vec<View>,
    view_clock: u64,
}

fn name_is_safe(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.iter().any(|b| *b == b'/' || *b == 0)
}

/// Display order of names: ASCII case folded first, then the raw bytes.
fn display_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let fold = |x: &u8| x.to_ascii_lowercase();
    a.iter()
        .map(fold)
        .cmp(b.iter().map(fold))
        .then_with(|| a.cmp(b))
}

impl Index {
    pub fn new() -> Self {
        Self::default()
    }

    /// Drops everything (a fresh snapshot is coming).
    pub fn clear(&mut self) {
        *self = Index::default();
    }

    /// Entries present.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Makes room for `n` entries in total, to avoid growth by doubling.
    pub fn reserve_entries(&mut self, n: usize) {
        let extra = n.saturating_sub(self.parent.len());
        self.parent.reserve_exact(extra);
        self.kind.reserve_exact(extra);
        self.name_off.reserve_exact(extra);
        self.name_len.reserve_exact(extra);
        self.size.reserve_exact(extra);
        self.mtime.reserve_exact(extra);
        self.mode.reserve_exact(extra);
    }

    fn present(&self, id: EntryId) -> Option<usize> {
        let i = id.index();
        match self.kind.get(i) {
            Some(k) if k & PRESENT != 0 => Some(i),
            _ => None,
        }
    }

    fn kind_at(&self, i: usize) -> EntryKind {
        // Only valid kinds are stored.
        EntryKind::from_bits(self.kind[i] & KIND_MASK).unwrap_or(EntryKind::File)
    }

    fn name_at(&self, i: usize) -> &[u8] {
        let off = self.name_off[i] as usize;
        &self.names[off..off + self.name_len[i] as usize]
    }

    fn is_dir(&self, id: EntryId) -> bool {
        self.present(id)
            .is_some_and(|i| self.kind_at(i) == EntryKind::Dir)
    }

    pub fn contains(&self, id: EntryId) -> bool {
        self.present(id).is_some()
    }

    pub fn get(&self, id: EntryId) -> Option<EntryRef<'_>> {
        let i = self.present(id)?;
        let kind = self.kind_at(i);
        Some(EntryRef {
            id,
            parent: EntryId(self.parent[i]),
            kind,
            name: self.name_at(i),
            size: self.size[i],
            mtime: self.mtime[i],
            mode: u32::from(self.mode[i]),
            generation: Generation(self.generation.get(&id.0).copied().unwrap_or(0)),
            target: self.targets.get(&id.0).map(|t| &t[..]).unwrap_or(&[]),
            children: if kind == EntryKind::Dir {
                self.dirs.get(&id.0).map_or(0, |d| d.children.len() as u32)
            } else {
                0
            },
        })
    }

    /// Applies every operation of a batch frame. Invalid operations are skipped
    /// and returned (the rest of the batch still applies); a frame that does not
    /// decode is an error and applies only the operations before the damage.
    pub fn apply_batch(
        &mut self,
        frame: &[u8],
    ) -> Result<(BatchHeader, Vec<IndexError>), IndexError> {
        let mut reader = BatchReader::new(frame)?;
        let header = reader.header();
        if header.known as usize > self.parent.len() && header.known < (1 << 31) {
            self.reserve_entries(header.known as usize);
        }
        let mut refused = Vec::new();
        while let Some(op) = reader.next_op()? {
            if let Err(e) = self.apply(op) {
                refused.push(e);
            }
        }
        Ok((header, refused))
    }

    /// Applies one operation.
    pub fn apply(&mut self, op: OpView<'_>) -> Result<(), IndexError> {
        match op {
            OpView::Upsert(e) => self.upsert(&e),
            OpView::Remove(id) => self.remove(id),
        }
    }

    fn touch_dir(&mut self, dir: u32) {
        if let Some(d) = self.dirs.get_mut(&dir) {
            d.version = d.version.wrapping_add(1);
        }
    }

    fn upsert(&mut self, e: &EntryView<'_>) -> Result<(), IndexError> {
        let is_root = e.id == EntryId::ROOT;
        if is_root {
            if e.parent != EntryId::ROOT {
                return Err(IndexError::Root);
            }
        } else {
            if !name_is_safe(e.name) {
                return Err(IndexError::UnsafeName {
                    id: e.id,
                    name: String::from_utf8_lossy(e.name).into_owned(),
                });
            }
            if !self.is_dir(e.parent) {
                return Err(IndexError::BadParent {
                    id: e.id,
                    parent: e.parent,
                });
            }
        }
        let i = e.id.index();
        match self.present(e.id) {
            Some(_) => {
                if !is_root && e.kind == EntryKind::Dir && self.is_ancestor_or_self(e.id, e.parent)
                {
                    return Err(IndexError::Cycle {
                        id: e.id,
                        parent: e.parent,
                    });
                }
                let old_parent = self.parent[i];
                let moved = old_parent != e.parent.0 || self.name_at(i) != e.name;
                if self.kind_at(i) == EntryKind::Dir && e.kind != EntryKind::Dir {
                    self.remove_children(e.id);
                    self.dirs.remove(&e.id.0);
                }
                if moved && !is_root {
                    self.unlink_child(old_parent, e.id.0);
                }
                if self.name_at(i) != e.name {
                    self.dead_name_bytes += self.name_len[i] as usize;
                    self.set_name(i, e.name);
                }
                self.set_fields(i, e);
                if moved && !is_root {
                    self.link_child(e.parent.0, e.id.0);
                } else if !is_root {
                    self.touch_dir(e.parent.0);
                }
            }
            None => {
                if i >= self.parent.len() {
                    let n = i + 1;
                    self.parent.resize(n, 0);
                    self.kind.resize(n, 0);
                    self.name_off.resize(n, 0);
                    self.name_len.resize(n, 0);
                    self.size.resize(n, 0);
                    self.mtime.resize(n, 0);
                    self.mode.resize(n, 0);
                }
                self.set_name(i, e.name);
                self.set_fields(i, e);
                self.live += 1;
                if !is_root {
                    self.link_child(e.parent.0, e.id.0);
                }
            }
        }
        Ok(())
    }

    fn set_name(&mut self, i: usize, name: &[u8]) {
        self.name_off[i] = self.names.len() as u32;
        self.name_len[i] = name.len() as u16;
        self.names.extend_from_slice(name);
    }

    fn set_fields(&mut self, i: usize, e: &EntryView<'_>) {
        self.parent[i] = e.parent.0;
        self.kind[i] = e.kind as u8 | PRESENT;
        self.size[i] = e.size;
        self.mtime[i] = e.mtime;
        self.mode[i] = (e.mode & 0o7777) as u16;
        if e.generation.0 != 0 {
            self.generation.insert(e.id.0, e.generation.0);
        } else {
            self.generation.remove(&e.id.0);
        }
        if e.kind == EntryKind::Symlink {
            self.targets.insert(e.id.0, e.target.into());
        } else {
            self.targets.remove(&e.id.0);
        }
    }

    fn link_child(&mut self, dir: u32, child: u32) {
        let d = self.dirs.entry(dir).or_default();
        d.children.push(child);
        d.sorted = false;
        d.version = d.version.wrapping_add(1);
    }

    fn unlink_child(&mut self, dir: u32, child: u32) {
        if let Some(d) = self.dirs.get_mut(&dir)
            && let Some(pos) = d.children.iter().position(|c| *c == child)
        {
            // `remove` keeps a sorted list sorted.
            d.children.remove(pos);
            d.version = d.version.wrapping_add(1);
        }
    }

    fn is_ancestor_or_self(&self, ancestor: EntryId, mut of: EntryId) -> bool {
        for _ in 0..=self.parent.len() {
            if of == ancestor {
                return true;
            }
            if of == EntryId::ROOT {
                return false;
            }
            of = EntryId(self.parent[of.index()]);
        }
        true
    }

    fn remove_children(&mut self, dir: EntryId) {
        let mut stack = match self.dirs.remove(&dir.0) {
            Some(d) => d.children,
            None => return,
        };
        while let Some(c) = stack.pop() {
            let i = c as usize;
            if self.kind.get(i).is_some_and(|k| k & PRESENT != 0) {
                if let Some(d) = self.dirs.remove(&c) {
                    stack.extend(d.children);
                }
                self.kill(i);
            }
        }
        self.dirs.insert(dir.0, Dir::default());
    }

    fn kill(&mut self, i: usize) {
        self.kind[i] = 0;
        self.dead_name_bytes += self.name_len[i] as usize;
        self.targets.remove(&(i as u32));
        self.generation.remove(&(i as u32));
        self.live -= 1;
    }

    fn remove(&mut self, id: EntryId) -> Result<(), IndexError> {
        if id == EntryId::ROOT {
            return Err(IndexError::Root);
        }
        let Some(i) = self.present(id) else {
            return Ok(());
        };
        if self.kind_at(i) == EntryKind::Dir {
            self.remove_children(id);
            self.dirs.remove(&id.0);
        }
        self.unlink_child(self.parent[i], id.0);
        self.kill(i);
        Ok(())
    }

    fn ensure_sorted(&mut self, dir: u32) {
        let Some(d) = self.dirs.get_mut(&dir) else {
            return;
        };
        if d.sorted {
            return;
        }
        let mut children = std::mem::take(&mut d.children);
        let (names, off, len) = (&self.names, &self.name_off, &self.name_len);
        let name = |c: &u32| {
            let i = *c as usize;
            &names[off[i] as usize..off[i] as usize + len[i] as usize]
        };
        children.sort_unstable_by(|a, b| name(a).cmp(name(b)));
        // The entry exists: it was taken above.
        if let Some(d) = self.dirs.get_mut(&dir) {
            d.children = children;
            d.sorted = true;
        }
    }

    /// The child of `dir` called `name`.
    pub fn lookup_child(&mut self, dir: EntryId, name: &[u8]) -> Option<EntryId> {
        self.ensure_sorted(dir.0);
        let d = self.dirs.get(&dir.0)?;
        d.children
            .binary_search_by(|c| self.name_at(*c as usize).cmp(name))
            .ok()
            .map(|pos| EntryId(d.children[pos]))
    }

    /// Looks up a `/`-separated path relative to the root (empty: the root).
    pub fn lookup(&mut self, path: &[u8]) -> Option<EntryId> {
        let mut cur = EntryId::ROOT;
        self.present(cur)?;
        for part in path.split(|b| *b == b'/').filter(|p| !p.is_empty()) {
            if !self.is_dir(cur) {
                return None;
            }
            cur = self.lookup_child(cur, part)?;
        }
        Some(cur)
    }

    /// The ids from the root down to `id` (inclusive).
    pub fn ancestry(&self, id: EntryId) -> Vec<EntryId> {
        let mut out = Vec::new();
        let mut cur = id;
        for _ in 0..=self.parent.len() {
            if self.present(cur).is_none() {
                return Vec::new();
            }
            out.push(cur);
            if cur == EntryId::ROOT {
                out.reverse();
                return out;
            }
            cur = EntryId(self.parent[cur.index()]);
        }
        Vec::new()
    }

    /// The path of `id` relative to the root, components joined with `/`.
    pub fn path_of(&self, id: EntryId) -> Option<Vec<u8>> {
        let chain = self.ancestry(id);
        if chain.is_empty() {
            return None;
        }
        let mut path = Vec::new();
        for (n, c) in chain.iter().skip(1).enumerate() {
            if n > 0 {
                path.push(b'/');
            }
            path.extend_from_slice(self.name_at(c.index()));
        }
        Some(path)
    }

    /// Children of `dir` in no particular order (name order after a lookup).
    pub fn children(&self, dir: EntryId) -> &[u32] {
        self.dirs.get(&dir.0).map_or(&[], |d| &d.children[..])
    }

    /// Number of children of `dir`.
    pub fn child_count(&self, dir: EntryId) -> usize {
        self.children(dir).len()
    }

    /// A window of `dir`'s children in display order: directories first, then by
    /// `key` (ties by name), ascending or descending.
    pub fn list(
        &mut self,
        dir: EntryId,
        key: SortKey,
        descending: bool,
        start: usize,
        count: usize,
    ) -> Vec<EntryId> {
        let version = match self.dirs.get(&dir.0) {
            Some(d) => d.version,
            None => return Vec::new(),
        };
        self.view_clock += 1;
        let clock = self.view_clock;
        let pos = self.views.iter().position(|v| {
            v.dir == dir.0 && v.key == key && v.descending == descending && v.version == version
        });
        let pos = match pos {
            Some(p) => p,
            None => {
                let order = self.display_order(dir.0, key, descending);
                self.views
                    .retain(|v| !(v.dir == dir.0 && v.key == key && v.descending == descending));
                if self.views.len() >= MAX_CACHED_VIEWS
                    && let Some(oldest) = self
                        .views
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, v)| v.last_used)
                        .map(|(i, _)| i)
                {
                    self.views.swap_remove(oldest);
                }
                self.views.push(View {
                    dir: dir.0,
                    key,
                    descending,
                    version,
                    order,
                    last_used: clock,
                });
                self.views.len() - 1
            }
        };
        let v = &mut self.views[pos];
        v.last_used = clock;
        let end = start.saturating_add(count).min(v.order.len());
        let start = start.min(end);
        v.order[start..end].iter().map(|c| EntryId(*c)).collect()
    }

    fn display_order(&self, dir: u32, key: SortKey, descending: bool) -> Vec<u32> {
        let mut order = self
            .dirs
            .get(&dir)
            .map(|d| d.children.clone())
            .unwrap_or_default();
        let cmp_key = |a: usize, b: usize| -> Ordering {
            match key {
                SortKey::Name => Ordering::Equal,
                SortKey::Size => self.size[a].cmp(&self.size[b]),
                SortKey::Mtime => self.mtime[a].cmp(&self.mtime[b]),
                SortKey::Kind => (self.kind[a] & KIND_MASK).cmp(&(self.kind[b] & KIND_MASK)),
            }
            .then_with(|| display_cmp(self.name_at(a), self.name_at(b)))
        };
        order.sort_unstable_by(|a, b| {
            let (a, b) = (*a as usize, *b as usize);
            let dir_a = self.kind_at(a) == EntryKind::Dir;
            let dir_b = self.kind_at(b) == EntryKind::Dir;
            dir_b.cmp(&dir_a).then_with(|| {
                let c = cmp_key(a, b);
                if descending { c.reverse() } else { c }
            })
        });
        order
    }

    /// Heap bytes held (columns, names, directories, cached listings).
    pub fn heap_bytes(&self) -> usize {
        let columns = self.parent.capacity() * 4
            + self.kind.capacity()
            + self.name_off.capacity() * 4
            + self.name_len.capacity() * 2
            + self.size.capacity() * 8
            + self.mtime.capacity() * 8
            + self.mode.capacity() * 2;
        let dirs: usize = self
            .dirs
            .values()
            .map(|d| d.children.capacity() * 4 + 48)
            .sum();
        let views: usize = self.views.iter().map(|v| v.order.capacity() * 4).sum();
        let maps = (self.generation.capacity() * 8)
            + self.targets.values().map(|t| t.len() + 40).sum::<usize>();
        columns + self.names.capacity() + dirs + views + maps
    }

    /// Bytes of the name arena that belong to removed or renamed entries.
    pub fn dead_name_bytes(&self) -> usize {
        self.dead_name_bytes
    }
}
