//! A stored snapshot of the built [`Index`], in parts: what a shell that keeps
//! the index (the browser) stores instead of an ever longer batch log, so that
//! reopening a big share is a copy and not a replay.
//!
//! Replaying the log costs what the first visit cost in decoding, validating
//! and merging children into sorted order (about 1.5-2 s for 1M entries in
//! wasm); restoring a snapshot copies columns that are already built. It also
//! bounds the store of a live share, whose log would otherwise grow with every
//! change: the batches a snapshot covers are deleted with it.
//!
//! ```text
//! stored part:        "LXS3" | kind u8 | fields' length u32 | the fields, LZ4 (block)
//!                     | 16 bytes of BLAKE3 over everything before them
//! part 0     head:    kind 0, fields: end u32 | live u32 | entry parts u32 | modes
//!                     | symbols u8 | each symbol: length u8, 8 bytes
//! part 1..n  entries: kind 1, fields: first id u32 | count u32 | columns | names
//!                     | side tables | directory records
//! ```
//!
//! The fields are compressed because reopening a big share is bound by
//! reading the snapshot back: IndexedDB gave the page about 90 MB/s here,
//! and a 10M-entry snapshot was 330 MB. LZ4 (`lz4_flex`, pure Rust, so the
//! same code runs in wasm) takes the fields of a walked tree to about two
//! thirds and decompresses at GB/s natively; zstd would take them further
//! but decodes several times slower, and restoring is the other half of a
//! reopen. The checksum covers the stored bytes, so damage is found before
//! anything is decompressed, and a part says its fields' length before
//! they are: at most [`LZ4_MAX_RATIO`] times its stored bytes are made.
//!
//! Part `k` (from 1) holds the entry slots `[(k-1) * PART_SLOTS, k * PART_SLOTS)`:
//! their columns, their names as the index holds them (coded with the
//! head's symbol table if it has one, see the `names` module; in id order,
//! so a snapshot also compacts the name arena), their side-table values, and the children of every directory
//! whose last child (or itself) is in that range. A directory's children
//! therefore arrive with or after all of them, and a shell can list a folder
//! from a partly restored snapshot as soon as its record is in: the top
//! folders, which the walk numbers first, are listable after the first parts.
//!
//! Restoring checks everything it relies on ([`SnapshotError`] says what was
//! wrong): part order and ranges, the checksum, kinds, modes, names, side
//! table ids, the symbol table (and that every coded name decodes), and at
//! the end that every entry hangs under the root exactly once (no cycle, nothing unreachable). Children are trusted to be in display
//! order (the checksum guards the bytes; a wrong order only misplaces lookups).
//! All integers are little-endian.

use std::collections::HashMap;

use linkfs_proto::{EntryId, EntryKind};

use super::names::{ABSENT, NameArena, NameBuf, SymbolTable};
use super::{
    Column, Index, KIND_MASK, MODE_BIG, MODE_SHIFT, NAME_LEN_BIG, PAGE, PRESENT, name_is_safe,
};

/// Entry slots per part (4 column pages): about 0.8 MB of a typical index.
pub const PART_SLOTS: usize = 4 * PAGE;

/// Version 3 compresses each part's fields (version 2 held names coded;
/// parts of an older version are refused, and the shell fetches the index again).
const MAGIC: &[u8; 4] = b"LXS3";
/// Magic, kind and the fields' length, before the compressed fields.
const SEALED_HEAD: usize = 9;
/// LZ4 makes at most 255 bytes of one it reads (a match's length byte), so a
/// part whose fields' length says more is damaged: refused before anything
/// is allocated for it.
pub const LZ4_MAX_RATIO: usize = 255;
const HEAD: u8 = 0;
const ENTRIES: u8 = 1;
const CHECK_LEN: usize = 16;

/// Why a stored snapshot cannot be restored (the shell then fetches the index again).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    #[error("snapshot part {part} is damaged (its checksum does not match)")]
    Checksum { part: u32 },
    #[error("snapshot part {part} ends early or has bytes left over")]
    Truncated { part: u32 },
    #[error("snapshot part {part} is not the part expected next ({what})")]
    OutOfOrder { part: u32, what: &'static str },
    #[error("snapshot part {part} holds an entry that is not valid: {what} (entry {id})")]
    BadEntry {
        part: u32,
        id: u32,
        what: &'static str,
    },
    #[error("the snapshot has {got} parts, its head says {want}")]
    Incomplete { got: u32, want: u32 },
    #[error("the snapshot's folders do not form one tree under the root: {what}")]
    NotATree { what: &'static str },
}

impl Index {
    /// How many parts [`snapshot_parts`](Self::snapshot_parts) gives now.
    pub fn snapshot_part_count(&self) -> u32 {
        self.end.div_ceil(PART_SLOTS) as u32 + 1
    }

    /// The snapshot of this index, part by part (settles every folder first).
    /// Each part is built when asked for, so a shell that stores them one at a
    /// time never holds more than one part of it.
    pub fn snapshot_parts(&mut self) -> SnapshotParts<'_> {
        let cursor = self.snapshot_cursor();
        SnapshotParts {
            index: self,
            cursor,
        }
    }

    /// Where a snapshot of this index starts, for a shell that builds its parts
    /// across several turns ([`SnapshotCursor::next_part`]); the index must not
    /// change until the last part is built.
    pub fn snapshot_cursor(&mut self) -> SnapshotCursor {
        self.settle_all();
        let parts = self.end.div_ceil(PART_SLOTS);
        // Each directory goes with the part of its last child (or itself).
        let mut dirs_of_part: Vec<Vec<u32>> = vec![Vec::new(); parts];
        for (&dir, d) in &self.dirs {
            if self.meta_of(dir as usize) & PRESENT == 0 {
                continue;
            }
            let last = d.children.iter().copied().max().unwrap_or(0).max(dir) as usize;
            if let Some(slot) = dirs_of_part.get_mut(last / PART_SLOTS) {
                slot.push(dir);
            }
        }
        for p in &mut dirs_of_part {
            p.sort_unstable();
        }
        SnapshotCursor {
            next: 0,
            dirs_of_part,
        }
    }
}

/// A snapshot being built: which part comes next. See [`Index::snapshot_cursor`].
#[derive(Debug)]
pub struct SnapshotCursor {
    /// The next part to build (0: the head).
    next: usize,
    dirs_of_part: Vec<Vec<u32>>,
}

impl SnapshotCursor {
    /// Parts in all, the head included.
    pub fn count(&self) -> u32 {
        self.dirs_of_part.len() as u32 + 1
    }

    /// Builds the next part from `index` (the one the cursor was made of, unchanged).
    pub fn next_part(&mut self, ix: &Index) -> Option<Vec<u8>> {
        let k = self.next;
        if k > self.dirs_of_part.len() {
            return None;
        }
        self.next += 1;
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        if k == 0 {
            out.push(HEAD);
            put_u32(&mut out, ix.end as u32);
            put_u32(&mut out, ix.live as u32);
            put_u32(&mut out, self.dirs_of_part.len() as u32);
            put_u32(&mut out, ix.modes.len() as u32);
            for m in &ix.modes {
                put_u32(&mut out, *m);
            }
            match &ix.names.table {
                None => out.push(0),
                Some(t) => {
                    out.push(t.len() as u8);
                    for (len, bytes) in t.stored() {
                        out.push(len);
                        out.extend_from_slice(&bytes);
                    }
                }
            }
        } else {
            out.push(ENTRIES);
            write_entries(ix, k - 1, &self.dirs_of_part[k - 1], &mut out);
        }
        Some(sealed_part(&out))
    }
}

/// A part as stored from its plain form (`MAGIC`, kind, the fields): the
/// fields compressed, then the checksum. Public for tests and fuzzing that
/// change a field ([`unsealed_part`] gives the plain form back).
#[doc(hidden)]
pub fn sealed_part(plain: &[u8]) -> Vec<u8> {
    let (head, fields) = plain.split_at(plain.len().min(5));
    let packed = lz4_flex::block::compress(fields);
    let mut out = Vec::with_capacity(SEALED_HEAD + packed.len() + CHECK_LEN);
    out.extend_from_slice(MAGIC);
    out.push(head.get(4).copied().unwrap_or(0));
    put_u32(&mut out, fields.len() as u32);
    out.extend_from_slice(&packed);
    let check = blake3::hash(&out);
    out.extend_from_slice(&check.as_bytes()[..CHECK_LEN]);
    out
}

/// The plain form of a stored part (`MAGIC`, kind, the fields), checked and
/// decompressed; part 0 in errors.
#[doc(hidden)]
pub fn unsealed_part(part: &[u8]) -> Result<Vec<u8>, SnapshotError> {
    let (kind, fields) = unseal(part, 0)?;
    let mut plain = Vec::with_capacity(5 + fields.len());
    plain.extend_from_slice(MAGIC);
    plain.push(kind);
    plain.extend_from_slice(&fields);
    Ok(plain)
}

/// Checks a stored part's checksum and magic, and decompresses its fields.
fn unseal(bytes: &[u8], part: u32) -> Result<(u8, Vec<u8>), SnapshotError> {
    let body_len = bytes
        .len()
        .checked_sub(CHECK_LEN)
        .filter(|n| *n >= SEALED_HEAD)
        .ok_or(SnapshotError::Truncated { part })?;
    let (body, check) = bytes.split_at(body_len);
    if blake3::hash(body).as_bytes()[..CHECK_LEN] != *check {
        return Err(SnapshotError::Checksum { part });
    }
    if &body[..4] != MAGIC {
        return Err(SnapshotError::OutOfOrder {
            part,
            what: "not a linkfs snapshot part of this version",
        });
    }
    let kind = body[4];
    let len = u32::from_le_bytes([body[5], body[6], body[7], body[8]]) as usize;
    let packed = &body[SEALED_HEAD..];
    if len > packed.len().saturating_mul(LZ4_MAX_RATIO) {
        return Err(SnapshotError::Truncated { part });
    }
    let mut fields = vec![0u8; len];
    match lz4_flex::block::decompress_into(packed, &mut fields) {
        Ok(n) if n == len => Ok((kind, fields)),
        _ => Err(SnapshotError::Truncated { part }),
    }
}

/// A stored part as the restore is given it.
#[derive(Debug, Clone, Copy)]
pub enum StoredPart<'a> {
    /// As stored: checked against its checksum and decompressed here.
    Sealed(&'a [u8]),
    /// Already checked and decompressed by the shell ([`unsealed_part`]'s
    /// plain form: `MAGIC`, kind, the fields), so that another thread can do
    /// that work while this one restores. Its fields are checked as a sealed
    /// part's are; only the checksum is the shell's to have checked.
    Unsealed(&'a [u8]),
}

/// A part's kind and fields: unsealed here, or as the shell unsealed them.
fn opened(part: StoredPart<'_>, n: u32) -> Result<(u8, std::borrow::Cow<'_, [u8]>), SnapshotError> {
    match part {
        StoredPart::Sealed(bytes) => unseal(bytes, n).map(|(k, f)| (k, f.into())),
        StoredPart::Unsealed(plain) => match plain.split_at_checked(5) {
            Some((head, fields)) if &head[..4] == MAGIC => Ok((head[4], fields.into())),
            Some(_) => Err(SnapshotError::OutOfOrder {
                part: n,
                what: "not a linkfs snapshot part of this version",
            }),
            None => Err(SnapshotError::Truncated { part: n }),
        },
    }
}

/// See [`Index::snapshot_parts`].
#[derive(Debug)]
pub struct SnapshotParts<'a> {
    index: &'a Index,
    cursor: SnapshotCursor,
}

impl SnapshotParts<'_> {
    /// Parts in all, the head included.
    pub fn count(&self) -> u32 {
        self.cursor.count()
    }
}

impl Iterator for SnapshotParts<'_> {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        self.cursor.next_part(self.index)
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn write_entries(ix: &Index, part: usize, dirs: &[u32], out: &mut Vec<u8>) {
    let first = part * PART_SLOTS;
    let last = (first + PART_SLOTS).min(ix.end);
    let slots = first..last;
    put_u32(out, first as u32);
    put_u32(out, (last - first) as u32);
    let present = |i: usize| ix.meta_of(i) & PRESENT != 0;
    // Absent slots are written as zeros: they compress and restore as absent.
    for i in slots.clone() {
        put_u32(out, if present(i) { ix.parent.get(i) } else { 0 });
    }
    for i in slots.clone() {
        let m = if present(i) { ix.meta.get(i) } else { 0 };
        out.extend_from_slice(&m.to_le_bytes());
    }
    for i in slots.clone() {
        out.push(if present(i) { ix.name_len.get(i) } else { 0 });
    }
    for i in slots.clone() {
        put_u32(out, if present(i) { ix.size.get(i) } else { 0 });
    }
    for i in slots.clone() {
        put_u32(out, if present(i) { ix.mtime.get(i) } else { 0 });
    }
    let names_at = out.len();
    put_u32(out, 0);
    for i in slots.clone().filter(|i| present(*i)) {
        out.extend_from_slice(ix.stored_name_at(i));
    }
    let names_len = (out.len() - names_at - 4) as u32;
    out[names_at..names_at + 4].copy_from_slice(&names_len.to_le_bytes());

    // Side tables, each sorted by id so the same index always gives the same bytes.
    let in_part = |id: &u32| slots.contains(&(*id as usize)) && present(*id as usize);
    fn sorted<V: Copy>(map: &HashMap<u32, V>, keep: impl Fn(&u32) -> bool) -> Vec<(u32, V)> {
        let mut v: Vec<(u32, V)> = map
            .iter()
            .filter(|(k, _)| keep(k))
            .map(|(k, v)| (*k, *v))
            .collect();
        v.sort_unstable_by_key(|(k, _)| *k);
        v
    }
    let long = sorted(&ix.long_names, in_part);
    put_u32(out, long.len() as u32);
    for (id, len) in long {
        put_u32(out, id);
        out.extend_from_slice(&len.to_le_bytes());
    }
    let big = sorted(&ix.big_sizes, in_part);
    put_u32(out, big.len() as u32);
    for (id, v) in big {
        put_u32(out, id);
        out.extend_from_slice(&v.to_le_bytes());
    }
    let odd_t = sorted(&ix.odd_mtimes, in_part);
    put_u32(out, odd_t.len() as u32);
    for (id, v) in odd_t {
        put_u32(out, id);
        out.extend_from_slice(&v.to_le_bytes());
    }
    for map in [&ix.odd_modes, &ix.generation] {
        let v = sorted(map, in_part);
        put_u32(out, v.len() as u32);
        for (id, x) in v {
            put_u32(out, id);
            put_u32(out, x);
        }
    }
    let mut targets: Vec<(&u32, &Box<[u8]>)> =
        ix.targets.iter().filter(|(k, _)| in_part(k)).collect();
    targets.sort_unstable_by_key(|(k, _)| **k);
    put_u32(out, targets.len() as u32);
    for (id, t) in targets {
        put_u32(out, *id);
        put_u32(out, t.len() as u32);
        out.extend_from_slice(t);
    }
    put_u32(out, dirs.len() as u32);
    for &dir in dirs {
        let d = &ix.dirs[&dir];
        put_u32(out, dir);
        put_u32(out, d.dirs as u32);
        put_u32(out, d.children.len() as u32);
        for c in &d.children {
            put_u32(out, *c);
        }
    }
}

/// Reads one part's fields, failing with the part's number.
struct PartReader<'a> {
    bytes: &'a [u8],
    at: usize,
    part: u32,
}

impl<'a> PartReader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SnapshotError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.bytes.len())
            .ok_or(SnapshotError::Truncated { part: self.part })?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, SnapshotError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, SnapshotError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, SnapshotError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, SnapshotError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }

    /// A count of items of at least `item` bytes each that must fit in what is left.
    fn count(&mut self, item: usize) -> Result<usize, SnapshotError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(item) > self.bytes.len() - self.at {
            return Err(SnapshotError::Truncated { part: self.part });
        }
        Ok(n)
    }
}

/// Restores an [`Index`] from its snapshot parts, in order. While it runs,
/// [`index`](Self::index) answers from what is restored so far: an entry is
/// there once its part is, a folder's children once all of them are.
#[derive(Debug)]
pub struct SnapshotRestorer {
    index: Index,
    /// Entry parts the head announced, and how many came.
    want: u32,
    got: u32,
    /// Children in the directory records restored so far.
    children_seen: usize,
    /// Entries present in the parts restored so far.
    present: usize,
    /// Entries listed as some folder's child so far (one bit per slot).
    listed: Vec<u64>,
}

impl SnapshotRestorer {
    /// Starts from the head (part 0) as stored.
    pub fn new(head: &[u8]) -> Result<Self, SnapshotError> {
        Self::from_head(StoredPart::Sealed(head))
    }

    /// Starts from the head (part 0), sealed or unsealed.
    pub fn from_head(head: StoredPart<'_>) -> Result<Self, SnapshotError> {
        let (kind, fields) = opened(head, 0)?;
        let mut r = PartReader {
            bytes: &fields,
            at: 0,
            part: 0,
        };
        if kind != HEAD {
            return Err(SnapshotError::OutOfOrder {
                part: 0,
                what: "the first part must be the head",
            });
        }
        let end = r.u32()? as usize;
        let live = r.u32()? as usize;
        let want = r.u32()?;
        if want as usize != end.div_ceil(PART_SLOTS) || live > end {
            return Err(SnapshotError::OutOfOrder {
                part: 0,
                what: "the head's counts do not agree",
            });
        }
        let n = r.count(4)?;
        if n >= MODE_BIG as usize {
            return Err(SnapshotError::OutOfOrder {
                part: 0,
                what: "too many modes",
            });
        }
        let mut index = Index::new();
        for ix in 0..n {
            let m = r.u32()?;
            index.modes.push(m);
            index.mode_index.insert(m, ix as u16);
        }
        let symbols = r.u8()? as usize;
        if symbols > 0 {
            let mut stored = Vec::with_capacity(symbols);
            for _ in 0..symbols {
                let len = r.u8()?;
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(r.take(8)?);
                stored.push((len, bytes));
            }
            let table = SymbolTable::from_stored(&stored)
                .map_err(|e| SnapshotError::OutOfOrder { part: 0, what: e.0 })?;
            index.names = NameArena::with_table(Some(Box::new(table)));
            index.names_learned = true;
        }
        if r.at != r.bytes.len() {
            return Err(SnapshotError::Truncated { part: 0 });
        }
        index.end = end;
        index.live = live;
        Ok(SnapshotRestorer {
            index,
            want,
            got: 0,
            children_seen: 0,
            present: 0,
            listed: vec![0; end.div_ceil(64)],
        })
    }

    /// Parts in all (the head included), as the head says.
    pub fn parts(&self) -> u32 {
        self.want + 1
    }

    /// What is restored so far (see the type's docs).
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// For listings and lookups while restoring (they sort lazily).
    pub fn index_mut(&mut self) -> &mut Index {
        &mut self.index
    }

    /// Restores the next entry part.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), SnapshotError> {
        self.push_part(StoredPart::Sealed(bytes))
    }

    /// The next entry part, sealed or unsealed.
    pub fn push_part(&mut self, stored: StoredPart<'_>) -> Result<(), SnapshotError> {
        let part = self.got + 1;
        let (kind, fields) = opened(stored, part)?;
        let mut r = PartReader {
            bytes: &fields,
            at: 0,
            part,
        };
        if kind != ENTRIES || self.got >= self.want {
            return Err(SnapshotError::OutOfOrder {
                part,
                what: "more entry parts than the head announced",
            });
        }
        let first = r.u32()? as usize;
        let count = r.u32()? as usize;
        let expect_first = self.got as usize * PART_SLOTS;
        if first != expect_first || count != PART_SLOTS.min(self.index.end - first) {
            return Err(SnapshotError::OutOfOrder {
                part,
                what: "its entry range does not follow the previous part",
            });
        }
        self.restore_entries(&mut r, first, count)?;
        if r.at != r.bytes.len() {
            return Err(SnapshotError::Truncated { part });
        }
        self.got += 1;
        Ok(())
    }

    fn restore_entries(
        &mut self,
        r: &mut PartReader<'_>,
        first: usize,
        count: usize,
    ) -> Result<(), SnapshotError> {
        let part = r.part;
        let bad = |id: usize, what: &'static str| SnapshotError::BadEntry {
            part,
            id: id as u32,
            what,
        };
        let parent = r.take(count * 4)?;
        let meta = r.take(count * 2)?;
        let name_len = r.take(count)?;
        let size = r.take(count * 4)?;
        let mtime = r.take(count * 4)?;
        let names_len = r.count(1)?;
        let names = r.take(names_len)?;
        let u32_at = |b: &[u8], k: usize| {
            u32::from_le_bytes([b[4 * k], b[4 * k + 1], b[4 * k + 2], b[4 * k + 3]])
        };
        let meta_at = |k: usize| u16::from_le_bytes([meta[2 * k], meta[2 * k + 1]]);

        // Side tables first: a long name's length is needed to cut the names.
        let in_range = |id: u32| (first..first + count).contains(&(id as usize));
        let present_here = |id: u32| in_range(id) && meta_at(id as usize - first) & PRESENT != 0;
        let n = r.count(6)?;
        let mut long_names = HashMap::new();
        for _ in 0..n {
            let (id, len) = (r.u32()?, r.u16()?);
            // Without a symbol table only names of 255 bytes and more are
            // long; with one, also those that coding would not shorten.
            let short = (len as usize) < NAME_LEN_BIG as usize;
            if !present_here(id) || (short && self.index.names.table.is_none()) {
                return Err(bad(id as usize, "a long name that is not one"));
            }
            long_names.insert(id, len);
        }
        let n = r.count(12)?;
        for _ in 0..n {
            let (id, v) = (r.u32()?, r.u64()?);
            if !present_here(id) {
                return Err(bad(id as usize, "a size for an entry not in this part"));
            }
            self.index.big_sizes.insert(id, v);
        }
        let n = r.count(12)?;
        for _ in 0..n {
            let (id, v) = (r.u32()?, r.u64()? as i64);
            if !present_here(id) {
                return Err(bad(id as usize, "a time for an entry not in this part"));
            }
            self.index.odd_mtimes.insert(id, v);
        }
        for which in 0..2 {
            let n = r.count(8)?;
            for _ in 0..n {
                let (id, v) = (r.u32()?, r.u32()?);
                if !present_here(id) {
                    return Err(bad(id as usize, "a mode or generation for an absent entry"));
                }
                if which == 0 {
                    self.index.odd_modes.insert(id, v);
                } else {
                    self.index.generation.insert(id, v);
                }
            }
        }
        let n = r.count(8)?;
        for _ in 0..n {
            let id = r.u32()?;
            let len = r.count(1)?;
            let t = r.take(len)?;
            if !present_here(id)
                || meta_at(id as usize - first) & KIND_MASK != EntryKind::Symlink as u16
            {
                return Err(bad(
                    id as usize,
                    "a link target for an entry that is not a link",
                ));
            }
            self.index.targets.insert(id, t.into());
        }

        // Columns, a page at a time.
        let mut name_at = 0usize;
        let mut scratch: NameBuf = [0; _];
        // Each present name's length here first, then its offset (push_run).
        let mut offs = vec![ABSENT; count];
        for k in 0..count {
            let id = first + k;
            let m = meta_at(k);
            if m & PRESENT == 0 {
                continue;
            }
            if EntryKind::from_bits((m & KIND_MASK) as u8).is_none() {
                return Err(bad(id, "unknown kind"));
            }
            let mode = m >> MODE_SHIFT;
            if mode == MODE_BIG {
                if !self.index.odd_modes.contains_key(&(id as u32)) {
                    return Err(bad(id, "its mode is missing"));
                }
            } else if mode as usize >= self.index.modes.len() {
                return Err(bad(id, "mode out of the table"));
            }
            let p = u32_at(parent, k);
            if p as usize >= self.index.end {
                return Err(bad(id, "parent beyond the index"));
            }
            let (len, long) = match name_len[k] {
                NAME_LEN_BIG => match long_names.get(&(id as u32)) {
                    Some(l) => (*l as usize, true),
                    None => return Err(bad(id, "its long name's length is missing")),
                },
                l => (l as usize, false),
            };
            let name = names
                .get(name_at..name_at + len)
                .ok_or(SnapshotError::Truncated { part })?;
            name_at += len;
            let root = id == 0;
            if root && (p != 0 || m & KIND_MASK != EntryKind::Dir as u16) {
                return Err(bad(id, "the root must be a folder under itself"));
            }
            let safe = if long {
                root || name_is_safe(name)
            } else {
                self.index.names.short_is_safe(name, root, &mut scratch)
            };
            if !safe {
                return Err(bad(id, "unsafe name"));
            }
            offs[k] = len as u32;
            self.present += 1;
        }
        if name_at != names.len() {
            return Err(SnapshotError::Truncated { part });
        }
        self.index.names.push_run(names, &mut offs);
        if first == 0 && (count == 0 || meta_at(0) & PRESENT == 0) {
            return Err(bad(0, "the root is missing"));
        }
        self.index.long_names.extend(long_names);
        for page in 0..count.div_ceil(PAGE) {
            let (a, b) = (page * PAGE, ((page + 1) * PAGE).min(count));
            self.index
                .parent
                .push_page((a..b).map(|k| u32_at(parent, k)));
            self.index.meta.push_page((a..b).map(meta_at));
            push_page(&mut self.index.name_len, name_len[a..b].iter().copied());
            self.index.size.push_page((a..b).map(|k| u32_at(size, k)));
            push_page(&mut self.index.mtime, (a..b).map(|k| u32_at(mtime, k)));
            self.index.name_off.push_page(offs[a..b].iter().copied());
        }
        for k in 0..count {
            let m = meta_at(k);
            if m & PRESENT != 0 && m & KIND_MASK == EntryKind::Dir as u16 {
                // An empty record until its children come (maybe in a later part).
                self.index.dirs.entry((first + k) as u32).or_default();
            }
        }
        self.restore_dirs(r)
    }

    fn restore_dirs(&mut self, r: &mut PartReader<'_>) -> Result<(), SnapshotError> {
        let part = r.part;
        let restored_end = (self.got as usize + 1) * PART_SLOTS;
        let n = r.count(12)?;
        for _ in 0..n {
            let dir = r.u32()?;
            let n_dirs = r.u32()? as usize;
            let len = r.count(4)?;
            let bad = |id: u32, what: &'static str| SnapshotError::BadEntry { part, id, what };
            if !self.index.is_dir(EntryId(dir)) {
                return Err(bad(
                    dir,
                    "children listed under something that is not a folder",
                ));
            }
            let raw = r.take(len * 4)?;
            let mut children = Vec::with_capacity(len);
            for k in 0..len {
                let c = u32::from_le_bytes([
                    raw[4 * k],
                    raw[4 * k + 1],
                    raw[4 * k + 2],
                    raw[4 * k + 3],
                ]);
                let i = c as usize;
                if c == 0 || i >= restored_end || self.index.meta_of(i) & PRESENT == 0 {
                    return Err(bad(c, "a child that is not a restored entry"));
                }
                if self.index.parent.get(i) != dir {
                    return Err(bad(
                        c,
                        "a child listed under another folder than its parent",
                    ));
                }
                let (word, bit) = (i / 64, 1u64 << (i % 64));
                if self.listed[word] & bit != 0 {
                    return Err(bad(c, "a child listed twice"));
                }
                self.listed[word] |= bit;
                if (k < n_dirs) != self.index.is_dir_at(i) {
                    return Err(bad(dir, "its folders do not come first"));
                }
                children.push(c);
            }
            if n_dirs > len {
                return Err(bad(dir, "more folders than children"));
            }
            let record = self.index.dirs.entry(dir).or_default();
            if !record.children.is_empty() {
                return Err(bad(dir, "its children are listed twice"));
            }
            record.sorted = children.len();
            record.dirs = n_dirs;
            self.children_seen += children.len();
            record.children = children;
        }
        Ok(())
    }

    /// The restored index, once every part is in and it is one tree.
    pub fn finish(self) -> Result<Index, SnapshotError> {
        if self.got != self.want {
            return Err(SnapshotError::Incomplete {
                got: self.got + 1,
                want: self.want + 1,
            });
        }
        let ix = self.index;
        let present = self.present;
        if present != ix.live {
            return Err(SnapshotError::NotATree {
                what: "the head's entry count is not the number of entries",
            });
        }
        if present > 0 && self.children_seen != present - 1 {
            return Err(SnapshotError::NotATree {
                what: "not every entry is listed in its folder",
            });
        }
        // Every entry is listed once, under its own parent: walking down from
        // the root must then reach them all, unless some folders form a loop.
        // A record's folders come first (`restore_dirs` checked each child's kind).
        let mut reached = 0usize;
        let mut stack = if present > 0 { vec![0u32] } else { Vec::new() };
        while let Some(d) = stack.pop() {
            reached += 1;
            if let Some(rec) = ix.dirs.get(&d) {
                let folders = rec.dirs.min(rec.children.len());
                stack.extend_from_slice(&rec.children[..folders]);
                reached += rec.children.len() - folders;
            }
            if reached > present {
                break;
            }
        }
        if reached != present {
            return Err(SnapshotError::NotATree {
                what: "some folders are not under the root",
            });
        }
        // The parts hold the columns, not the sum kept beside them.
        let mut ix = ix;
        ix.file_bytes = (0..ix.end).map(|i| ix.file_bytes_at(i)).sum();
        Ok(ix)
    }
}

/// Appends one page to a column from up to [`PAGE`] values (the rest default).
fn push_page<T: Copy + Default + PartialEq>(
    column: &mut Column<T>,
    values: impl Iterator<Item = T>,
) {
    let mut page = vec![T::default(); PAGE].into_boxed_slice();
    for (slot, v) in page.iter_mut().zip(values) {
        *slot = v;
    }
    // A page of defaults only reads the same held as nothing (ids skipped).
    if page.iter().all(|v| *v == T::default()) {
        page = Box::default();
    }
    column.pages.push(page);
}

#[cfg(test)]
mod tests;
