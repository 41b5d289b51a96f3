//! The receiver's compact in-memory index.
//!
//! Built to hold a million entries in a browser tab in well under 64 bytes
//! each, without ever needing more than that even for a moment:
//!
//! - **Columns in pages.** Every field is a column indexed by entry id (ids are
//!   dense), stored in pages of [`PAGE`] entries, so growing never copies a
//!   column and never leaves more than one part-filled page. (A `Vec` that
//!   doubles would, at its worst moment, hold three times the data: the old
//!   buffer, the new one, and the slack; in wasm that high-water mark is never
//!   given back.)
//! - **Small fields.** Per entry: parent (4 bytes), name offset (4), name
//!   length (1), kind + presence + mode-table index (2), size (4), mtime (4),
//!   plus the name bytes in a paged arena and its place in its directory's
//!   child list (4). Values that do not fit (files of 4 GiB and more, mtimes
//!   before 1970 or after 2106, names over 254 bytes, more than 8,190
//!   distinct modes) go to small side tables.
//! - **Packed pages.** The parent, the kind and mode, the size and the name
//!   offset are held narrower still, page by page (the `packed` module): a
//!   page of one value costs nothing per entry (every file empty), one of at
//!   most 256 values a byte (a page's entries are siblings from a few
//!   folders, with a few modes), and offsets that grow a name at a time 2
//!   bytes from a base per 256 entries. A page only ever widens, and never
//!   past the plain width. On a generated tree of empty files that takes the
//!   index from 46 to 36 bytes an entry; with sizes of 0-4 KiB, 47 to 42.
//! - **Names coded.** From [`LEARN_AT`] entries on, names are held coded
//!   one by one with a symbol table learned from the index's own names
//!   (FSST, the `names` module): on that tree 21 bytes a name become about
//!   14, and the index 36 bytes an entry 29. A name is read by decoding it
//!   into a [`Name`] on the stack; loops that read many decode into one
//!   buffer.
//! - **Children kept sorted.** Each directory lists its children in display
//!   order: directories first, then by name (ASCII case folded, then bytes).
//!   New children are appended and merged in at the end of each batch: the
//!   tail is sorted and each new child is placed by binary search, so a batch
//!   costs O(m log n) comparisons for m new children in a directory of n,
//!   whatever the arrival order. A lookup is then a binary search (in the
//!   directories, then in the files), and the first screen of any directory,
//!   by name in either direction, is a slice: no sorting when it is opened.
//! - **Other orders cached.** Listings by size, time or kind are computed once
//!   per directory and change, and kept in a small cache ([`MAX_CACHED_VIEWS`]).
//!
//! Operations are validated as they are applied: a name must not be empty,
//! `.`, `..`, or contain `/` or NUL; a parent must be a directory present in
//! the index; a move must not put a directory inside itself. An invalid
//! operation is refused with an [`IndexError`] and changes nothing.
//!
//! A shell that stores the index takes a [snapshot](Index::snapshot_parts) of
//! it in parts and restores it with a [`SnapshotRestorer`] (the `snapshot`
//! module says how), instead of replaying every batch since the first.

use std::cmp::Ordering;
use std::collections::HashMap;

mod names;
mod packed;
mod snapshot;
pub use names::{INLINE_NAME, LEARN_AT, Name};
use names::{NAME_LEN_BIG, NameArena, NameBuf, Stored, SymbolTable};
pub use packed::PAGE;
use packed::Packed;
pub use snapshot::{
    PART_SLOTS, SnapshotCursor, SnapshotError, SnapshotParts, SnapshotRestorer, StoredPart,
    sealed_part, unsealed_part,
};

use linkfs_proto::batch::MAX_SKIPPED_POSITIONS;
use linkfs_proto::{
    BatchHeader, BatchReader, DecodeError, Entry, EntryId, EntryKind, EntryView, Generation, OpView,
};

/// How many listings in other orders than by name are kept.
pub const MAX_CACHED_VIEWS: usize = 4;

const KIND_MASK: u16 = 3;
const PRESENT: u16 = 4;
const MODE_SHIFT: u16 = 3;
/// Mode-table index meaning "the mode is in the side table".
const MODE_BIG: u16 = (1 << 13) - 1;
const U32_BIG: u32 = u32::MAX;

/// How a listing is ordered (directories always come first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SortKey {
    Name,
    Size,
    Mtime,
    Kind,
}

impl SortKey {
    /// Every order, by the name [`FromStr`](std::str::FromStr) takes.
    pub const ALL: [(&'static str, SortKey); 4] = [
        ("name", SortKey::Name),
        ("size", SortKey::Size),
        ("mtime", SortKey::Mtime),
        ("kind", SortKey::Kind),
    ];
}

/// A sort order that is not one of [`SortKey::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("there is no sort order '{0}' (one of: name, size, mtime, kind)")]
pub struct UnknownSortKey(pub String);

impl std::str::FromStr for SortKey {
    type Err = UnknownSortKey;

    fn from_str(s: &str) -> Result<SortKey, UnknownSortKey> {
        SortKey::ALL
            .iter()
            .find(|(name, _)| *name == s)
            .map(|(_, key)| *key)
            .ok_or_else(|| UnknownSortKey(s.to_owned()))
    }
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
    #[error(
        "entry {id} is beyond the batch's log positions (ids never exceed the position that created them, below {end})"
    )]
    IdBeyondLog { id: EntryId, end: u64 },
    #[error(
        "a batch of {ops} operations covers {span} log positions; at most {max} more than its operations are allowed"
    )]
    SpanTooLong { ops: u32, span: u64, max: u64 },
}

/// A borrowed view of one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef<'a> {
    pub id: EntryId,
    pub parent: EntryId,
    pub kind: EntryKind,
    pub name: Name<'a>,
    pub size: u64,
    pub mtime: i64,
    pub mode: u32,
    pub generation: Generation,
    pub target: &'a [u8],
    /// Children, for directories.
    pub children: u32,
}

impl EntryRef<'_> {
    /// The entry as an owned value (its name and target copied).
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

/// One column of fixed-size values, in pages of [`PAGE`]. A page no value was
/// set in holds nothing (an empty box): ids a sharer skipped (removed before
/// this receiver came, or a hostile sharer's far ids) cost a pointer per page,
/// not [`PAGE`] values.
#[derive(Debug, Default)]
struct Column<T> {
    pages: Vec<Box<[T]>>,
}

impl<T: Copy + Default> Column<T> {
    fn get(&self, i: usize) -> T {
        self.pages
            .get(i / PAGE)
            .and_then(|p| p.get(i % PAGE).copied())
            .unwrap_or_default()
    }

    fn set(&mut self, i: usize, v: T) {
        let page = i / PAGE;
        while self.pages.len() <= page {
            self.pages.push(Box::default());
        }
        let p = &mut self.pages[page];
        if p.is_empty() {
            *p = vec![T::default(); PAGE].into_boxed_slice();
        }
        p[i % PAGE] = v;
    }

    /// Page `page`'s values, or none if no value was ever set in it.
    fn page(&self, page: usize) -> Option<&[T]> {
        self.pages
            .get(page)
            .filter(|p| !p.is_empty())
            .map(|p| &p[..])
    }

    fn heap_bytes(&self) -> usize {
        self.pages.iter().map(|p| p.len()).sum::<usize>() * std::mem::size_of::<T>()
            + self.pages.capacity() * std::mem::size_of::<Box<[T]>>()
    }
}

#[derive(Debug, Default)]
struct Dir {
    /// Display order up to `sorted`, then children not merged in yet.
    children: Vec<u32>,
    sorted: usize,
    /// Directories among the sorted children (they come first).
    dirs: usize,
    /// Bumped on every change of the children (or of a child's sort fields).
    version: u32,
    /// Sorted children that left during this batch, taken out of `children`
    /// all at once when it settles ([`Index::compact`]): removing them one
    /// at a time moved the rest of a big folder's list each time (100,000
    /// removals from a folder of a million took 13.6 s).
    gone: Vec<u32>,
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
    parent: Packed<u32, true, true>,
    meta: Packed<u16, true, false>,
    name_off: Packed<u32, false, true>,
    name_len: Column<u8>,
    size: Packed<u32, true, true>,
    mtime: Column<u32>,
    names: NameArena,
    long_names: HashMap<u32, u16>,
    big_sizes: HashMap<u32, u64>,
    odd_mtimes: HashMap<u32, i64>,
    odd_modes: HashMap<u32, u32>,
    modes: Vec<u32>,
    mode_index: HashMap<u32, u16>,
    generation: HashMap<u32, u32>,
    targets: HashMap<u32, Box<[u8]>>,
    dirs: HashMap<u32, Dir>,
    /// Directories with children not merged in yet.
    unsettled: Vec<u32>,
    /// Directories with sorted children gone and not yet taken out.
    uncompacted: Vec<u32>,
    /// One past the highest id ever present.
    end: usize,
    live: usize,
    /// The sizes of the files present, summed as they change (a `statfs`
    /// answers from it: walking 10M entries for it took about a second).
    file_bytes: u128,
    views: Vec<View>,
    view_clock: u64,
    journal: Option<Journal>,
    /// The names' symbol table was learned (or tried): see [`LEARN_AT`].
    names_learned: bool,
    /// Entries at which to learn it, if not [`LEARN_AT`].
    learn_at: Option<usize>,
}

/// What a directory's children are sorted by: directories first, then by
/// name in display order, then by id. The name is a range of a buffer of
/// names read once ([`ChildKeys`]).
#[derive(Clone, Copy)]
struct ChildKey {
    is_dir: bool,
    /// The name's first 8 bytes case folded, big-endian, zero padded: most
    /// comparisons end here ([`folded_prefix`]).
    prefix: u64,
    at: u32,
    len: u16,
    id: u32,
}

/// `name`'s first 8 bytes, ASCII case folded, as a big-endian number padded
/// with zeros. No name holds a zero byte, so two prefixes that differ order
/// their names as [`display_cmp`] does; equal ones say nothing.
fn folded_prefix(name: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    for (o, c) in b.iter_mut().zip(name) {
        *o = c.to_ascii_lowercase();
    }
    u64::from_be_bytes(b)
}

/// The sort keys of a directory's new children, their names decoded once
/// into one buffer (not once per comparison, nor a buffer each).
#[derive(Default)]
struct ChildKeys {
    keys: Vec<ChildKey>,
    names: Vec<u8>,
}

impl ChildKeys {
    fn push(&mut self, ix: &Index, id: u32, buf: &mut NameBuf) {
        let name = ix.name_with(id as usize, buf);
        self.keys.push(ChildKey {
            is_dir: ix.is_dir_at(id as usize),
            prefix: folded_prefix(name),
            at: self.names.len() as u32,
            len: name.len() as u16,
            id,
        });
        self.names.extend_from_slice(name);
    }

    fn name(&self, k: &ChildKey) -> &[u8] {
        &self.names[k.at as usize..k.at as usize + k.len as usize]
    }

    fn cmp(&self, a: &ChildKey, b: &ChildKey) -> Ordering {
        b.is_dir
            .cmp(&a.is_dir)
            .then(a.prefix.cmp(&b.prefix))
            .then_with(|| display_cmp(self.name(a), self.name(b)))
            .then_with(|| a.id.cmp(&b.id))
    }
}

/// Where an entry was or is: its parent and its name.
pub type Place = (EntryId, Box<[u8]>);

/// One change applied to the index, for a shell that must tell others (the
/// kernel's caches on a mount, the listings shown in a page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexChange {
    pub id: EntryId,
    /// Where it was before (`None`: it is new).
    pub before: Option<Place>,
    /// Where it is now (`None`: it was removed, with everything under it).
    pub after: Option<Place>,
}

/// Changes recorded since the shell last took them.
#[derive(Debug, Default)]
struct Journal {
    changes: Vec<IndexChange>,
    overflowed: bool,
}

/// Most changes the journal keeps between two takes: 65,536. Beyond that it
/// only says it overflowed (the shell then refreshes everything).
pub const JOURNAL_LIMIT: usize = 65_536;

fn name_is_safe(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.iter().any(|b| *b == b'/' || *b == 0)
}

/// Drops `key` from a side table of the few entries with an odd value. Most
/// tables are empty for a whole tree, and a removal hashes the key even
/// then: five hashes an entry, for nothing, at every entry of a fill.
fn forget<V>(table: &mut HashMap<u32, V>, key: u32) {
    if !table.is_empty() {
        table.remove(&key);
    }
}

/// Display order of names (the page's and the mount's listings): ASCII case
/// folded first, then the raw bytes.
pub fn display_cmp(a: &[u8], b: &[u8]) -> Ordering {
    // Equal bytes fold equal: only where they differ is case folded, and
    // equal runs of 8 are skipped whole.
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n && a[i..i + 8] == b[i..i + 8] {
        i += 8;
    }
    for (x, y) in a[i..n].iter().zip(&b[i..n]) {
        if x != y {
            let (fx, fy) = (x.to_ascii_lowercase(), y.to_ascii_lowercase());
            if fx != fy {
                return fx.cmp(&fy);
            }
        }
    }
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

impl Index {
    pub fn new() -> Self {
        Self::default()
    }

    /// Drops everything (a fresh snapshot is coming).
    pub fn clear(&mut self) {
        let journaling = self.journal.is_some();
        let learn_at = self.learn_at;
        *self = Index::default();
        self.learn_at = learn_at;
        if journaling {
            self.journal = Some(Journal {
                changes: Vec::new(),
                overflowed: true,
            });
        }
    }

    /// Starts (or stops) recording the changes applied, for [`take_changes`](Self::take_changes).
    pub fn record_changes(&mut self, on: bool) {
        self.journal = on.then(Journal::default);
    }

    /// The changes applied since the last call, and whether more happened than
    /// were kept ([`JOURNAL_LIMIT`]).
    pub fn take_changes(&mut self) -> (Vec<IndexChange>, bool) {
        match &mut self.journal {
            Some(j) => (
                std::mem::take(&mut j.changes),
                std::mem::replace(&mut j.overflowed, false),
            ),
            None => (Vec::new(), false),
        }
    }

    fn note(&mut self, id: EntryId, before: Option<Place>, after: Option<Place>) {
        if let Some(j) = &mut self.journal {
            if j.changes.len() >= JOURNAL_LIMIT {
                j.overflowed = true;
            } else {
                j.changes.push(IndexChange { id, before, after });
            }
        }
    }

    fn place_of(&self, i: usize) -> Place {
        (EntryId(self.parent.get(i)), (*self.name_at(i)).into())
    }

    /// Entries present.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The bytes of every file present (what a whole copy would fetch), at
    /// most `u64::MAX`; kept as entries change, so O(1). An index still being
    /// restored from a snapshot reads 0 here until its restore finishes.
    pub fn file_bytes(&self) -> u64 {
        u64::try_from(self.file_bytes).unwrap_or(u64::MAX)
    }

    /// The bytes entry `i` adds to [`file_bytes`](Self::file_bytes): its size if a present file.
    fn file_bytes_at(&self, i: usize) -> u128 {
        let meta = self.meta_of(i);
        if meta & PRESENT != 0 && meta & KIND_MASK == EntryKind::File as u16 {
            u128::from(self.size_at(i))
        } else {
            0
        }
    }

    fn meta_of(&self, i: usize) -> u16 {
        if i < self.end { self.meta.get(i) } else { 0 }
    }

    fn present(&self, id: EntryId) -> Option<usize> {
        let i = id.index();
        (self.meta_of(i) & PRESENT != 0).then_some(i)
    }

    fn kind_at(&self, i: usize) -> EntryKind {
        // Only valid kinds are stored.
        EntryKind::from_bits((self.meta.get(i) & KIND_MASK) as u8).unwrap_or(EntryKind::File)
    }

    fn is_dir_at(&self, i: usize) -> bool {
        self.meta.get(i) & KIND_MASK == EntryKind::Dir as u16
    }

    fn name_at(&self, i: usize) -> Name<'_> {
        match self.name_len.get(i) {
            NAME_LEN_BIG => Name::held(self.stored_name_at(i)),
            len => self
                .names
                .read(self.names.stored_at(self.name_off.get(i), len as usize)),
        }
    }

    /// Entry `i`'s name, decoded into `buf` if coded (for loops that read
    /// many names: no [`Name`] made for each).
    fn name_with<'b>(&'b self, i: usize, buf: &'b mut NameBuf) -> &'b [u8] {
        match self.name_len.get(i) {
            NAME_LEN_BIG => self.stored_name_at(i),
            len => self.names.read_with(
                self.names.stored_at(self.name_off.get(i), len as usize),
                buf,
            ),
        }
    }

    /// The bytes entry `i`'s name is stored as (coded, or as it is if long).
    fn stored_name_at(&self, i: usize) -> &[u8] {
        let len = match self.name_len.get(i) {
            NAME_LEN_BIG => self.long_names.get(&(i as u32)).copied().unwrap_or(0) as usize,
            n => n as usize,
        };
        self.names.stored_at(self.name_off.get(i), len)
    }

    fn size_at(&self, i: usize) -> u64 {
        match self.size.get(i) {
            U32_BIG => self
                .big_sizes
                .get(&(i as u32))
                .copied()
                .unwrap_or(u64::from(U32_BIG)),
            s => u64::from(s),
        }
    }

    fn mtime_at(&self, i: usize) -> i64 {
        match self.mtime.get(i) {
            U32_BIG => self
                .odd_mtimes
                .get(&(i as u32))
                .copied()
                .unwrap_or(i64::from(U32_BIG)),
            t => i64::from(t),
        }
    }

    fn mode_at(&self, i: usize) -> u32 {
        let idx = self.meta.get(i) >> MODE_SHIFT;
        if idx == MODE_BIG {
            self.odd_modes.get(&(i as u32)).copied().unwrap_or(0)
        } else {
            self.modes.get(idx as usize).copied().unwrap_or(0)
        }
    }

    fn is_dir(&self, id: EntryId) -> bool {
        self.present(id).is_some_and(|i| self.is_dir_at(i))
    }

    pub fn contains(&self, id: EntryId) -> bool {
        self.present(id).is_some()
    }

    /// One past the highest entry slot in use: every present id is below it.
    pub fn id_bound(&self) -> u32 {
        self.end as u32
    }

    /// The name of a present entry (cheaper than [`get`](Self::get) for a scan).
    pub fn name_of(&self, id: EntryId) -> Option<Name<'_>> {
        self.present(id).map(|i| self.name_at(i))
    }

    /// Calls `visit(id, name)` for every present entry with an id in
    /// `from..to`, in id order, until it answers `false`. It walks the
    /// columns a page at a time, a few times cheaper per entry than
    /// [`name_of`](Self::name_of) (a search scans every name).
    pub fn scan_names(&self, from: u32, to: u32, mut visit: impl FnMut(u32, &[u8]) -> bool) {
        let to = (to as usize).min(self.end);
        let mut i = from as usize;
        let mut buf: NameBuf = [0; _];
        while i < to {
            let page = i / PAGE;
            let page_end = ((page + 1) * PAGE).min(to);
            let Some(lens) = self.name_len.page(page) else {
                i = page_end;
                continue;
            };
            for j in i..page_end {
                let k = j % PAGE;
                if self.meta.get(j) & PRESENT == 0 {
                    continue;
                }
                let name = match lens[k] {
                    NAME_LEN_BIG => self.stored_name_at(j),
                    len => self.names.read_with(
                        self.names.stored_at(self.name_off.get(j), len as usize),
                        &mut buf,
                    ),
                };
                if !visit(j as u32, name) {
                    return;
                }
            }
            i = page_end;
        }
    }

    pub fn get(&self, id: EntryId) -> Option<EntryRef<'_>> {
        let i = self.present(id)?;
        let kind = self.kind_at(i);
        Some(EntryRef {
            id,
            parent: EntryId(self.parent.get(i)),
            kind,
            name: self.name_at(i),
            size: self.size_at(i),
            mtime: self.mtime_at(i),
            mode: self.mode_at(i),
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
        if header.span > u64::from(header.ops) + MAX_SKIPPED_POSITIONS {
            return Err(IndexError::SpanTooLong {
                ops: header.ops,
                span: header.span,
                max: MAX_SKIPPED_POSITIONS,
            });
        }
        // An id is never beyond the log position that created it: a batch
        // names only ids below its end (a sharer cannot make a receiver
        // allocate the id space with one far id).
        let end = header.end().0;
        let mut refused = Vec::new();
        let result = loop {
            match reader.next_op() {
                Ok(Some(op)) => {
                    let id = match op {
                        OpView::Upsert(e) => e.id,
                        OpView::Remove(id) => id,
                    };
                    if u64::from(id.0) >= end && id != EntryId::ROOT {
                        refused.push(IndexError::IdBeyondLog { id, end });
                        continue;
                    }
                    if let Err(e) = self.apply_unsettled(op) {
                        refused.push(e);
                    }
                }
                Ok(None) => break Ok((header, refused)),
                Err(e) => break Err(e.into()),
            }
        };
        self.settle_all();
        self.learn_names();
        result
    }

    /// Applies one operation.
    pub fn apply(&mut self, op: OpView<'_>) -> Result<(), IndexError> {
        let r = self.apply_unsettled(op);
        self.settle_all();
        self.learn_names();
        r
    }

    fn apply_unsettled(&mut self, op: OpView<'_>) -> Result<(), IndexError> {
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
        let before =
            (self.journal.is_some() && self.present(e.id).is_some()).then(|| self.place_of(i));
        match self.present(e.id) {
            Some(_) => {
                // Whatever it becomes, nothing may hang under itself (a folder
                // turned into a file under its own id was left parented to itself).
                if !is_root && self.is_ancestor_or_self(e.id, e.parent) {
                    return Err(IndexError::Cycle {
                        id: e.id,
                        parent: e.parent,
                    });
                }
                let was_dir = self.is_dir_at(i);
                if was_dir && e.kind != EntryKind::Dir {
                    self.remove_descendants(e.id);
                    self.dirs.remove(&e.id.0);
                }
                let old_parent = self.parent.get(i);
                // Anything that decides the place in the parent's order: re-place it.
                let renamed = *self.name_at(i) != *e.name;
                let replace = !is_root
                    && (old_parent != e.parent.0
                        || renamed
                        || was_dir != (e.kind == EntryKind::Dir));
                if replace {
                    self.unlink_child(old_parent, e.id.0);
                }
                if renamed {
                    self.names.dead += self.stored_name_at(i).len();
                    self.set_name(i, e.name);
                }
                self.set_fields(i, e);
                if replace {
                    self.link_child(e.parent.0, e.id.0);
                } else if !is_root {
                    self.touch_dir(e.parent.0);
                }
            }
            None => {
                self.set_name(i, e.name);
                self.set_fields(i, e);
                self.end = self.end.max(i + 1);
                self.live += 1;
                if !is_root {
                    self.link_child(e.parent.0, e.id.0);
                }
            }
        }
        if self.journal.is_some() {
            let after = Some((e.parent, e.name.into()));
            self.note(e.id, before, after);
        }
        Ok(())
    }

    fn set_name(&mut self, i: usize, name: &[u8]) {
        let (off, stored) = self.names.store(name);
        self.name_off.set(i, off);
        match stored {
            Stored::Short(len) => {
                self.name_len.set(i, len);
                forget(&mut self.long_names, i as u32);
            }
            Stored::Long(len) => {
                self.name_len.set(i, NAME_LEN_BIG);
                self.long_names.insert(i as u32, len);
            }
        }
    }

    /// Learns the names' symbol table at `entries` entries instead of
    /// [`LEARN_AT`] (tests and benches reach the coded state with small
    /// indexes this way).
    pub fn learn_names_at(&mut self, entries: usize) {
        self.learn_at = Some(entries);
        self.learn_names();
    }

    /// Whether names are held coded (the table is learned).
    pub fn names_coded(&self) -> bool {
        self.names.table.is_some()
    }

    /// Learns the names' symbol table once the index holds [`LEARN_AT`]
    /// entries, and codes every name with it (the `names` module says why
    /// and how). Done once: the table then never changes.
    fn learn_names(&mut self) {
        if self.names_learned || self.live < self.learn_at.unwrap_or(LEARN_AT) {
            return;
        }
        self.names_learned = true;
        // Pages no name was set in hold no entry: skipped whole.
        let present: Vec<usize> = (0..self.end.div_ceil(PAGE))
            .filter(|page| self.name_len.page(*page).is_some())
            .flat_map(|page| page * PAGE..((page + 1) * PAGE).min(self.end))
            .filter(|i| self.meta_of(*i) & PRESENT != 0)
            .collect();
        // Long names are never coded: they would only teach the table their runs.
        let held: Vec<&[u8]> = present
            .iter()
            .map(|i| self.stored_name_at(*i))
            .filter(|n| n.len() <= INLINE_NAME)
            .collect();
        let Some(table) = SymbolTable::learn(&held) else {
            return;
        };
        drop(held);
        let old = std::mem::replace(
            &mut self.names,
            NameArena::with_table(Some(Box::new(table))),
        );
        for i in present {
            // The old arena has no table: its bytes are the names.
            let len = match self.name_len.get(i) {
                NAME_LEN_BIG => self.long_names.get(&(i as u32)).copied().unwrap_or(0) as usize,
                n => n as usize,
            };
            let name = old.stored_at(self.name_off.get(i), len);
            self.set_name(i, name);
        }
    }

    fn mode_slot(&mut self, mode: u32) -> Option<u16> {
        if let Some(ix) = self.mode_index.get(&mode) {
            return Some(*ix);
        }
        let ix = self.modes.len() as u16;
        if ix >= MODE_BIG {
            return None;
        }
        self.modes.push(mode);
        self.mode_index.insert(mode, ix);
        Some(ix)
    }

    fn set_fields(&mut self, i: usize, e: &EntryView<'_>) {
        let key = i as u32;
        self.file_bytes -= self.file_bytes_at(i);
        if e.kind == EntryKind::File {
            self.file_bytes += u128::from(e.size);
        }
        self.parent.set(i, e.parent.0);
        let mode = e.mode & 0o7777;
        let mode_ix = match self.mode_slot(mode) {
            Some(ix) => {
                forget(&mut self.odd_modes, key);
                ix
            }
            None => {
                self.odd_modes.insert(key, mode);
                MODE_BIG
            }
        };
        self.meta
            .set(i, e.kind as u16 | PRESENT | (mode_ix << MODE_SHIFT));
        match u32::try_from(e.size) {
            Ok(s) if s != U32_BIG => {
                self.size.set(i, s);
                forget(&mut self.big_sizes, key);
            }
            _ => {
                self.size.set(i, U32_BIG);
                self.big_sizes.insert(key, e.size);
            }
        }
        match u32::try_from(e.mtime) {
            Ok(t) if t != U32_BIG => {
                self.mtime.set(i, t);
                forget(&mut self.odd_mtimes, key);
            }
            _ => {
                self.mtime.set(i, U32_BIG);
                self.odd_mtimes.insert(key, e.mtime);
            }
        }
        if e.generation.0 != 0 {
            self.generation.insert(key, e.generation.0);
        } else {
            forget(&mut self.generation, key);
        }
        if e.kind == EntryKind::Symlink {
            self.targets.insert(key, e.target.into());
        } else {
            forget(&mut self.targets, key);
        }
        if e.kind == EntryKind::Dir {
            self.dirs.entry(key).or_default();
        }
    }

    fn link_child(&mut self, dir: u32, child: u32) {
        let d = self.dirs.entry(dir).or_default();
        if d.sorted == d.children.len() {
            self.unsettled.push(dir);
        }
        d.children.push(child);
        d.version = d.version.wrapping_add(1);
    }

    /// Where `child` sits among the children of `dir`, if it is there.
    fn position_in(&self, d: &Dir, child: u32) -> Option<usize> {
        let i = child as usize;
        let in_tail = d.children[d.sorted..]
            .iter()
            .position(|c| *c == child)
            .map(|p| p + d.sorted);
        if in_tail.is_some() {
            return in_tail;
        }
        let name = self.name_at(i);
        let key = (self.is_dir_at(i), &*name);
        let sorted = &d.children[..d.sorted];
        // Equal keys (a sharer sent a name twice) sit side by side, by id: the
        // search takes the id too, so a run of one name costs nothing.
        let p = sorted
            .partition_point(|c| self.key_cmp_with(*c, key).then(c.cmp(&child)) == Ordering::Less);
        (sorted.get(p) == Some(&child))
            .then_some(p)
            .or_else(|| sorted.iter().position(|c| *c == child))
    }

    /// Takes `child` out of `dir`'s children: at once from the new ones not
    /// merged in yet; from the sorted ones when the batch settles, every one
    /// gone from the folder in one pass ([`Dir::gone`]). Until then the sorted
    /// list still names it, and nothing reads that list but [`Index::settle_all`]
    /// (and [`Index::remove_descendants`], which checks each child's parent).
    fn unlink_child(&mut self, dir: u32, child: u32) {
        let Some(d) = self.dirs.get_mut(&dir) else {
            return;
        };
        d.version = d.version.wrapping_add(1);
        if let Some(p) = d.children[d.sorted..].iter().position(|c| *c == child) {
            d.children.remove(d.sorted + p);
            return;
        }
        if d.gone.is_empty() {
            self.uncompacted.push(dir);
        }
        d.gone.push(child);
    }

    /// Takes the sorted children gone during this batch out of their folders'
    /// lists, one pass per folder.
    fn compact(&mut self) {
        for dir in std::mem::take(&mut self.uncompacted) {
            let Some(d) = self.dirs.get_mut(&dir) else {
                continue;
            };
            let mut gone = std::mem::take(&mut d.gone);
            gone.sort_unstable();
            let sorted = d.sorted;
            let mut kept = 0;
            for r in 0..sorted {
                let c = d.children[r];
                if gone.binary_search(&c).is_err() {
                    d.children[kept] = c;
                    kept += 1;
                }
            }
            d.children.drain(kept..sorted);
            d.sorted = kept;
            let children = std::mem::take(&mut d.children);
            let dirs = children[..kept].partition_point(|c| self.is_dir_at(*c as usize));
            if let Some(d) = self.dirs.get_mut(&dir) {
                d.children = children;
                d.dirs = dirs;
            }
        }
    }

    fn is_ancestor_or_self(&self, ancestor: EntryId, mut of: EntryId) -> bool {
        for _ in 0..=self.end {
            if of == ancestor {
                return true;
            }
            if of == EntryId::ROOT {
                return false;
            }
            of = EntryId(self.parent.get(of.index()));
        }
        true
    }

    /// Removes everything below `dir` (not `dir` itself).
    fn remove_descendants(&mut self, dir: EntryId) {
        let mut stack: Vec<(u32, u32)> = match self.dirs.get_mut(&dir.0) {
            Some(d) => {
                d.sorted = 0;
                d.dirs = 0;
                d.gone.clear();
                d.version = d.version.wrapping_add(1);
                let children = std::mem::take(&mut d.children);
                children.into_iter().map(|c| (c, dir.0)).collect()
            }
            None => return,
        };
        while let Some((c, listed_in)) = stack.pop() {
            let i = c as usize;
            // A child that moved out during this batch is still listed here
            // until the batch settles: it lives on where it went.
            if self.meta_of(i) & PRESENT != 0 && self.parent.get(i) == listed_in {
                if let Some(d) = self.dirs.remove(&c) {
                    stack.extend(d.children.into_iter().map(|g| (g, c)));
                }
                self.kill(i);
            }
        }
    }

    fn kill(&mut self, i: usize) {
        self.file_bytes -= self.file_bytes_at(i);
        self.names.dead += self.stored_name_at(i).len();
        self.meta.set(i, 0);
        let key = i as u32;
        forget(&mut self.targets, key);
        forget(&mut self.generation, key);
        forget(&mut self.big_sizes, key);
        forget(&mut self.odd_mtimes, key);
        forget(&mut self.odd_modes, key);
        forget(&mut self.long_names, key);
        self.live -= 1;
    }

    fn remove(&mut self, id: EntryId) -> Result<(), IndexError> {
        if id == EntryId::ROOT {
            return Err(IndexError::Root);
        }
        let Some(i) = self.present(id) else {
            return Ok(());
        };
        if self.journal.is_some() {
            let before = Some(self.place_of(i));
            self.note(id, before, None);
        }
        if self.is_dir_at(i) {
            self.remove_descendants(id);
            self.dirs.remove(&id.0);
        }
        self.unlink_child(self.parent.get(i), id.0);
        self.kill(i);
        Ok(())
    }

    /// Compares child `c` with a (is_dir, name) key in display order.
    fn key_cmp_with(&self, c: u32, (is_dir, name): (bool, &[u8])) -> Ordering {
        let i = c as usize;
        is_dir
            .cmp(&self.is_dir_at(i))
            .then_with(|| display_cmp(self.name_with(i, &mut [0; _]), name))
    }

    fn settle_all(&mut self) {
        // Gone children out first: settling compares with the sorted ones.
        self.compact();
        let dirs = std::mem::take(&mut self.unsettled);
        for d in dirs {
            self.settle(d);
        }
    }

    /// Merges a directory's new children into its sorted list.
    fn settle(&mut self, dir: u32) {
        let Some(d) = self.dirs.get_mut(&dir) else {
            return;
        };
        if d.sorted == d.children.len() {
            return;
        }
        let mut children = std::mem::take(&mut d.children);
        let n = d.sorted;
        let tail = children.split_off(n);
        // Each new child's sort fields read once (they are read again at
        // every comparison otherwise).
        let mut keys = ChildKeys::default();
        let mut buf: NameBuf = [0; _];
        for c in tail {
            keys.push(self, c, &mut buf);
        }
        let mut tail = std::mem::take(&mut keys.keys);
        tail.sort_unstable_by(|a, b| keys.cmp(a, b));
        let total = n + tail.len();
        children.resize(total, 0);
        // From the back: each new child goes after the sorted ones not greater
        // than it; the block in between moves right in one copy. Its place
        // is found galloping back from the last one (1, 2, 4, ... back, then
        // a binary search): new children spread over a big folder read about
        // log(n/m) names each, not log(n) (a read decodes a coded name).
        let (mut i, mut k) = (n, total);
        for t in tail.iter().rev() {
            let key = (t.is_dir, keys.name(t));
            let greater =
                |c: u32| self.key_cmp_with(c, key).then_with(|| c.cmp(&t.id)) == Ordering::Greater;
            // Every child in children[hi..i] is greater than t.
            let (mut hi, mut step) = (i, 1usize);
            let lo = loop {
                if hi == 0 {
                    break 0;
                }
                let probe = hi.saturating_sub(step);
                if !greater(children[probe]) {
                    break probe + 1;
                }
                hi = probe;
                step *= 2;
            };
            let p = lo + children[lo..hi].partition_point(|c| !greater(*c));
            children.copy_within(p..i, k - (i - p));
            k -= i - p;
            i = p;
            k -= 1;
            children[k] = t.id;
        }
        drop(tail);
        drop(keys);
        let dirs = children.partition_point(|c| self.is_dir_at(*c as usize));
        if let Some(d) = self.dirs.get_mut(&dir) {
            d.children = children;
            d.sorted = total;
            d.dirs = dirs;
        }
    }

    /// The child of `dir` called `name`.
    pub fn lookup_child(&self, dir: EntryId, name: &[u8]) -> Option<EntryId> {
        let d = self.dirs.get(&dir.0)?;
        let sorted = &d.children[..d.sorted];
        let (dirs, files) = sorted.split_at(d.dirs.min(sorted.len()));
        let find = |part: &[u32]| {
            part.binary_search_by(|c| display_cmp(&self.name_at(*c as usize), name))
                .ok()
                .map(|p| EntryId(part[p]))
        };
        find(dirs).or_else(|| find(files)).or_else(|| {
            // Children not merged yet (only between operations of one batch).
            d.children[d.sorted..]
                .iter()
                .find(|c| *self.name_at(**c as usize) == *name)
                .map(|c| EntryId(*c))
        })
    }

    /// Looks up a `/`-separated path relative to the root (empty: the root).
    pub fn lookup(&self, path: &[u8]) -> Option<EntryId> {
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
        for _ in 0..=self.end {
            if self.present(cur).is_none() {
                return Vec::new();
            }
            out.push(cur);
            if cur == EntryId::ROOT {
                out.reverse();
                return out;
            }
            cur = EntryId(self.parent.get(cur.index()));
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
            path.extend_from_slice(&self.name_at(c.index()));
        }
        Some(path)
    }

    /// Children of `dir` in display order (directories first, then by name).
    pub fn children(&self, dir: EntryId) -> &[u32] {
        self.dirs.get(&dir.0).map_or(&[], |d| &d.children[..])
    }

    /// Calls `visit(position, child, kind, name)` for `dir`'s children from
    /// `position` `from` of [`children`](Self::children)`(dir)` on, in that
    /// order, until it answers `false`: what a listing needs, without
    /// [`get`](Self::get)'s other columns and tables (a mount's listing
    /// call of 600 names made 600 of those).
    pub fn children_named(
        &self,
        dir: EntryId,
        from: usize,
        mut visit: impl FnMut(usize, u32, EntryKind, &[u8]) -> bool,
    ) {
        let children = self.children(dir);
        let mut buf: NameBuf = [0; _];
        for (at, &child) in children.iter().enumerate().skip(from) {
            let Some(i) = self.present(EntryId(child)) else {
                continue;
            };
            if !visit(at, child, self.kind_at(i), self.name_with(i, &mut buf)) {
                return;
            }
        }
    }

    /// Where `id` sits in [`children`](Self::children)`(dir)` (a binary
    /// search by name, not a scan of a big folder).
    pub fn child_position(&self, dir: EntryId, id: EntryId) -> Option<usize> {
        self.position_in(self.dirs.get(&dir.0)?, id.0)
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
        let Some(d) = self.dirs.get(&dir.0) else {
            return Vec::new();
        };
        let (total, n_dirs, version) = (d.children.len(), d.dirs, d.version);
        let end = start.saturating_add(count).min(total);
        let start = start.min(end);
        if key == SortKey::Name {
            // Already in this order: a slice, or the two parts reversed.
            return (start..end)
                .map(|p| {
                    let at = match (descending, p < n_dirs) {
                        (false, _) => p,
                        (true, true) => n_dirs - 1 - p,
                        (true, false) => n_dirs + (total - 1 - p),
                    };
                    EntryId(d.children[at])
                })
                .collect();
        }
        self.view_clock += 1;
        let clock = self.view_clock;
        let found = self.views.iter().position(|v| {
            v.dir == dir.0 && v.key == key && v.descending == descending && v.version == version
        });
        let pos = match found {
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
        v.order[start..end.min(v.order.len())]
            .iter()
            .map(|c| EntryId(*c))
            .collect()
    }

    fn display_order(&self, dir: u32, key: SortKey, descending: bool) -> Vec<u32> {
        let Some(d) = self.dirs.get(&dir) else {
            return Vec::new();
        };
        // The children are in name order already: a stable sort by `key` keeps
        // name order among equals.
        let mut order = d.children.clone();
        let n_dirs = d.dirs.min(order.len());
        let cmp = |a: &u32, b: &u32| {
            let (a, b) = (*a as usize, *b as usize);
            let c = match key {
                SortKey::Name => Ordering::Equal,
                SortKey::Size => self.size_at(a).cmp(&self.size_at(b)),
                SortKey::Mtime => self.mtime_at(a).cmp(&self.mtime_at(b)),
                SortKey::Kind => {
                    (self.meta.get(a) & KIND_MASK).cmp(&(self.meta.get(b) & KIND_MASK))
                }
            };
            if descending { c.reverse() } else { c }
        };
        let (dirs, rest) = order.split_at_mut(n_dirs);
        dirs.sort_by(cmp);
        rest.sort_by(cmp);
        order
    }

    /// Heap bytes held (columns, names, directories, side tables, cached listings).
    pub fn heap_bytes(&self) -> usize {
        let columns = self.parent.heap_bytes()
            + self.meta.heap_bytes()
            + self.name_off.heap_bytes()
            + self.name_len.heap_bytes()
            + self.size.heap_bytes()
            + self.mtime.heap_bytes();
        let dirs: usize = self.dirs.capacity() * 48
            + self
                .dirs
                .values()
                .map(|d| d.children.capacity() * 4)
                .sum::<usize>();
        let views: usize = self.views.iter().map(|v| v.order.capacity() * 4).sum();
        let side = (self.big_sizes.capacity() + self.odd_mtimes.capacity()) * 16
            + (self.generation.capacity() + self.odd_modes.capacity() + self.mode_index.capacity())
                * 8
            + self.long_names.capacity() * 8
            + self.targets.values().map(|t| t.len() + 40).sum::<usize>();
        columns + self.names.heap_bytes() + dirs + views + side
    }

    /// Bytes of the name arena that belong to removed or renamed entries.
    pub fn dead_name_bytes(&self) -> usize {
        self.names.dead
    }
}
