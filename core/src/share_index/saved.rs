//! The share index on disk, so a sharer that restarts keeps its entry ids,
//! epoch and log positions: a receiver that held the share before the restart
//! resumes from the position it holds and gets only what changed.
//!
//! The format is columns of little-endian integers (one row per entry id,
//! removed ones included, so ids are never reused), the live entries' names,
//! the generations and symlink targets that are not default, and the current
//! log operations; a BLAKE3 hash of everything before it ends the file. Only
//! a finished walk is saved.
//!
//! What is read back is checked whole before it is used (the hash, every
//! length, kinds, that every live entry hangs under a live folder without a
//! cycle, that the log is ordered and names every live entry exactly once);
//! anything wrong is a [`SavedIndexError`] and the caller walks the folder
//! afresh. Nothing in it can make the reader allocate more than the file's own
//! size allows or panic.
//!
//! Both ways go through the file as they write and read it
//! ([`ShareIndex::write_saved`], [`ShareIndex::read_saved`]): a copy of the
//! file in memory beside the index (about 80 B per entry against the index's
//! 100) made every stop and every restart of a big share take twice the
//! memory of its walk.

use std::collections::HashMap;
use std::io::{Read, Write};

use linkfs_proto::batch::{MAX_NAME_LEN, MAX_TARGET_LEN};
use linkfs_proto::{EntryKind, Epoch};

use super::{
    CTIME_UNKNOWN, Children, Devices, DirList, KIND_MASK, LogOp, LogRuns, MAX_ENTRIES,
    META_KIND_SHIFT, Narrow, Positions, REMOVED, ShareIndex, change_stamp, meta_of,
};

const MAGIC: &[u8; 8] = b"lfsindex";
/// Format 3 holds each entry's [`change_stamp`] in place of format 2's mtime
/// nanoseconds and ctime columns (4 bytes for 12); format 2 is read into
/// stamps, format 1 (no ctimes) too (stamps of the nanoseconds alone until the
/// next look at each file, see [`CTIME_UNKNOWN`]).
const VERSION: u32 = 3;
const VERSION_WITH_CTIME: u32 = 2;
const VERSION_WITHOUT_CTIME: u32 = 1;
const HASH_LEN: usize = 32;

/// Why a saved index cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SavedIndexError {
    #[error("not a saved linkfs index")]
    NotAnIndex,
    #[error("saved by another version of linkfs (format {0})")]
    Version(u32),
    #[error("the file is damaged (its checksum does not match)")]
    Checksum,
    #[error("the file is cut short")]
    Truncated,
    #[error("the file could not be read: {0}")]
    Read(String),
    #[error("the saved index is inconsistent: {0}")]
    Inconsistent(&'static str),
}

/// Bytes per entry row in the columns (for the size check before allocating):
/// parent, kind, name length, size, mtime, stamp, mode, device, inode. Format
/// 2's rows add the ctime's 8; format 1's are this size (nanoseconds in the
/// stamp's place, no ctime).
const ROW: usize = 4 + 1 + 2 + 8 + 8 + 4 + 2 + 8 + 8;
const ROW_WITH_CTIME: usize = ROW + 8;

impl ShareIndex {
    /// The index as a file (see the module docs), in memory: see
    /// [`ShareIndex::write_saved`], which a sharer uses.
    pub fn to_saved(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_saved(&mut out)
            .expect("writing to a Vec does not fail");
        out
    }

    /// Writes the index as a file (see the module docs) to `out` as it goes:
    /// no copy of it is held in memory (at ten million entries the file is
    /// about 80 MB per million, and a copy doubled the sharer's memory as it
    /// stopped). Only meaningful once the walk is done
    /// ([`ShareIndex::walk_done`]); the caller checks.
    pub fn write_saved(&self, out: impl Write) -> std::io::Result<()> {
        let mut w = std::io::BufWriter::with_capacity(
            IO_CHUNK,
            HashingWriter {
                inner: out,
                hasher: blake3::Hasher::new(),
            },
        );
        let n = self.parent.len();
        w.write_all(MAGIC)?;
        w.write_all(&VERSION.to_le_bytes())?;
        w.write_all(&self.epoch.0.to_le_bytes())?;
        w.write_all(&self.next_seq.to_le_bytes())?;
        w.write_all(&self.horizon.to_le_bytes())?;
        w.write_all(&(n as u64).to_le_bytes())?;
        let live = |i: usize| self.kind_byte(i) & REMOVED == 0;
        for &p in &self.parent {
            w.write_all(&p.to_le_bytes())?;
        }
        for i in 0..n {
            w.write_all(&[self.kind_byte(i)])?;
        }
        for i in 0..n {
            let len = if live(i) { self.name_len[i] } else { 0 };
            w.write_all(&len.to_le_bytes())?;
        }
        for i in 0..n {
            w.write_all(&self.size.get(i).to_le_bytes())?;
        }
        for i in 0..n {
            w.write_all(&self.mtime_of(i).to_le_bytes())?;
        }
        for &m in &self.stamp {
            w.write_all(&m.to_le_bytes())?;
        }
        for i in 0..n {
            w.write_all(&self.mode_of(i).to_le_bytes())?;
        }
        for i in 0..n {
            let (dev, ino) = self.dev_ino(i);
            w.write_all(&dev.to_le_bytes())?;
            w.write_all(&ino.to_le_bytes())?;
        }
        for i in (0..n).filter(|i| live(*i)) {
            w.write_all(self.name(i))?;
        }
        let mut generations: Vec<(u32, u32)> = self
            .generation
            .iter()
            .filter(|(id, g)| **g != 0 && live(**id as usize))
            .map(|(id, g)| (*id, *g))
            .collect();
        generations.sort_unstable();
        w.write_all(&(generations.len() as u64).to_le_bytes())?;
        for (id, g) in generations {
            w.write_all(&id.to_le_bytes())?;
            w.write_all(&g.to_le_bytes())?;
        }
        let mut targets: Vec<(&u32, &Box<[u8]>)> = self.targets.iter().collect();
        targets.sort_unstable_by_key(|(id, _)| **id);
        w.write_all(&(targets.len() as u64).to_le_bytes())?;
        for (id, t) in targets {
            w.write_all(&id.to_le_bytes())?;
            w.write_all(&(t.len() as u16).to_le_bytes())?;
            w.write_all(t)?;
        }
        // The current operations, counted first and then written (not
        // gathered: 16 bytes each).
        let current = || {
            self.log
                .iter_from(0)
                .filter(|(seq, op)| self.is_current(*seq, *op))
        };
        w.write_all(&(current().count() as u64).to_le_bytes())?;
        for (seq, op) in current() {
            w.write_all(&seq.to_le_bytes())?;
            w.write_all(&op.0.to_le_bytes())?;
        }
        w.write_all(&[u8::from(self.walk_done)])?;
        let HashingWriter { mut inner, hasher } = w.into_inner().map_err(|e| e.into_error())?;
        inner.write_all(hasher.finalize().as_bytes())?;
        inner.flush()
    }

    /// Reads an index written by [`ShareIndex::to_saved`], checking it whole.
    pub fn from_saved(file: &[u8]) -> Result<ShareIndex, SavedIndexError> {
        ShareIndex::read_saved(file, file.len() as u64)
    }

    /// Reads an index written by [`ShareIndex::write_saved`] from `src`, a
    /// file of `len` bytes, as it goes (no copy of the file in memory),
    /// checking it whole. A file whose checksum does not match is
    /// [`SavedIndexError::Checksum`] whatever else is wrong with it.
    pub fn read_saved(src: impl Read, len: u64) -> Result<ShareIndex, SavedIndexError> {
        let mut r = Reader {
            src,
            left: len.saturating_sub(HASH_LEN as u64),
            hasher: blake3::Hasher::new(),
            scratch: Vec::new(),
        };
        if len < (MAGIC.len() + 4 + HASH_LEN) as u64 || r.array::<8>()? != *MAGIC {
            return Err(SavedIndexError::NotAnIndex);
        }
        let version = r.u32()?;
        if ![VERSION, VERSION_WITH_CTIME, VERSION_WITHOUT_CTIME].contains(&version) {
            return Err(SavedIndexError::Version(version));
        }
        match read_body(&mut r, version) {
            Ok(index) => {
                r.check_hash()?;
                Ok(index)
            }
            // Damage comes first: whatever broke the parse, a file whose hash
            // does not match says so.
            Err(e) => match r.drain_and_check_hash() {
                Err(SavedIndexError::Checksum) => Err(SavedIndexError::Checksum),
                _ => Err(e),
            },
        }
    }
}

/// The rest of a saved index after its magic and version (see [`ShareIndex::read_saved`]).
fn read_body(r: &mut Reader<impl Read>, version: u32) -> Result<ShareIndex, SavedIndexError> {
    let row = if version == VERSION_WITH_CTIME {
        ROW_WITH_CTIME
    } else {
        ROW
    };
    let epoch = Epoch(r.u64()?);
    let next_seq = r.u64()?;
    let horizon = r.u64()?;
    let n = r.u64()?;
    if n == 0 || n > MAX_ENTRIES as u64 || n.saturating_mul(row as u64) > r.left {
        return Err(SavedIndexError::Inconsistent("entry count"));
    }
    let n = n as usize;
    let parent: Vec<u32> = r.column(n, 4, |b| u32::from_le_bytes(arr(b)))?;
    // Kinds and modes go straight into the entries' meta (no column of each
    // beside it: at ten million entries that was 30 MB more at a restart).
    // A kind byte with bits the meta has no room for stays wrong (0xf: the
    // check below refuses it).
    let mut meta: Vec<u16> = r.column(n, 1, |b| {
        if b[0] & !(KIND_MASK | REMOVED) != 0 {
            meta_of(0xf, 0)
        } else {
            meta_of(b[0], 0)
        }
    })?;
    let name_len: Vec<u16> = r.column(n, 2, |b| u16::from_le_bytes(arr(b)))?;
    let size = r.narrow_column(n)?;
    let mtime = r.narrow_column(n)?;
    // Format 3: stamps; formats 1 and 2: the nanoseconds, made stamps below.
    let mut stamp: Vec<u32> = r.column(n, 4, |b| u32::from_le_bytes(arr(b)))?;
    let mut i = 0;
    r.records(n, 2, |b| {
        meta[i] |= u16::from_le_bytes(arr(b)) & 0o7777;
        i += 1;
    })?;
    let (dev, ino) = r.dev_ino_columns(n)?;
    if version == VERSION_WITH_CTIME {
        let mut i = 0;
        r.records(n, 8, |b| {
            stamp[i] = change_stamp(stamp[i], i64::from_le_bytes(arr(b)));
            i += 1;
        })?;
    } else if version == VERSION_WITHOUT_CTIME {
        for s in &mut stamp {
            *s = change_stamp(*s, CTIME_UNKNOWN);
        }
    }
    let kind = |i: usize| (meta[i] >> META_KIND_SHIFT) as u8;
    let live = |i: usize| kind(i) & REMOVED == 0;
    for (i, k) in (0..n).map(|i| (i, kind(i))) {
        if k & !(KIND_MASK | REMOVED) != 0 || EntryKind::from_bits(k & KIND_MASK).is_none() {
            return Err(SavedIndexError::Inconsistent("entry kind"));
        }
        if usize::from(name_len[i]) > MAX_NAME_LEN || (!live(i) && name_len[i] != 0) {
            return Err(SavedIndexError::Inconsistent("name length"));
        }
    }
    let mut name_off = vec![0u32; n];
    let mut total = 0u64;
    for i in 0..n {
        name_off[i] =
            u32::try_from(total).map_err(|_| SavedIndexError::Inconsistent("name length"))?;
        total += u64::from(name_len[i]);
    }
    let names = r.column(
        usize::try_from(total).map_err(|_| SavedIndexError::Truncated)?,
        1,
        |b| b[0],
    )?;
    let mut generation = HashMap::new();
    for _ in 0..r.count(8)? {
        let (id, g) = (r.u32()?, r.u32()?);
        if id as usize >= n || !live(id as usize) || generation.insert(id, g).is_some() {
            return Err(SavedIndexError::Inconsistent("generations"));
        }
    }
    let mut targets = HashMap::new();
    for _ in 0..r.count(6)? {
        let id = r.u32()?;
        let len = usize::from(u16::from_le_bytes(r.array::<2>()?));
        let t = r.column(len, 1, |b| b[0])?;
        let i = id as usize;
        if i >= n
            || !live(i)
            || kind(i) != EntryKind::Symlink as u8
            || len > MAX_TARGET_LEN
            || targets.insert(id, t.into()).is_some()
        {
            return Err(SavedIndexError::Inconsistent("symlink targets"));
        }
    }
    let ops = r.count(12)?;
    let mut log = LogRuns::default();
    let mut last = Positions::with_capacity(n);
    (0..n).for_each(|_| last.push(None));
    let mut removals = 0;
    for _ in 0..ops {
        let (seq, op) = (r.u64()?, LogOp(r.u32()?));
        let i = op.id().index();
        let ordered = log.last_seq().is_none_or(|prev| prev < seq);
        if !ordered || seq >= next_seq || seq < horizon || i >= n || last.get(i).is_some() {
            return Err(SavedIndexError::Inconsistent("log order"));
        }
        if live(i) == op.is_remove() {
            return Err(SavedIndexError::Inconsistent("log operations"));
        }
        removals += usize::from(op.is_remove());
        last.set(i, Some(seq));
        log.push(seq, op);
    }
    let walk_done = match r.array::<1>()? {
        [0] => false,
        [1] => true,
        _ => return Err(SavedIndexError::Inconsistent("walk flag")),
    };
    if r.left != 0 {
        return Err(SavedIndexError::Inconsistent("trailing bytes"));
    }
    if !live(0) || kind(0) != EntryKind::Dir as u8 {
        return Err(SavedIndexError::Inconsistent("the root"));
    }
    let mut dirs: HashMap<u32, DirList> = HashMap::new();
    let mut kids: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut live_count = 0u64;
    for i in (0..n).filter(|i| live(*i)) {
        live_count += 1;
        if last.get(i).is_none() {
            return Err(SavedIndexError::Inconsistent(
                "an entry missing from the log",
            ));
        }
        if kind(i) == EntryKind::Dir as u8 {
            dirs.entry(i as u32).or_default();
        }
    }
    for i in (1..n).filter(|i| live(*i)) {
        let p = parent[i] as usize;
        if p >= n || p == i || !live(p) || kind(p) != EntryKind::Dir as u8 {
            return Err(SavedIndexError::Inconsistent("a parent"));
        }
        kids.entry(p as u32).or_default().push(i as u32);
    }
    check_acyclic(&parent, &meta)?;
    // Names as a folder listing could hold them: safe, and unique per folder.
    let name_at = |i: usize| &names[name_off[i] as usize..][..usize::from(name_len[i])];
    for i in (1..n).filter(|i| live(*i)) {
        let name = name_at(i);
        if name.is_empty()
            || name == b"."
            || name == b".."
            || name.contains(&b'/')
            || name.contains(&0)
        {
            return Err(SavedIndexError::Inconsistent("a name"));
        }
    }
    // Each folder's children sorted by name: the check for two of one name, and
    // the order lookups by name need (so no folder sorts on a first lookup).
    for (dir, mut ids) in kids {
        ids.sort_unstable_by(|a, b| name_at(*a as usize).cmp(name_at(*b as usize)));
        if ids
            .windows(2)
            .any(|w| name_at(w[0] as usize) == name_at(w[1] as usize))
        {
            return Err(SavedIndexError::Inconsistent(
                "two entries of one name in a folder",
            ));
        }
        let list = dirs.entry(dir).or_default();
        list.ids = Children::from_vec(ids);
        list.sorted = true;
    }
    // Every folder is listed once its own operation and its children's
    // latest are applied: a fresh receiver (a mount) can show it then.
    let mut listed: Vec<(u64, u32)> = dirs
        .iter()
        .map(|(&dir, list)| {
            let at = list
                .ids
                .iter()
                .filter_map(|c| last.get(c as usize))
                .fold(last.get(dir as usize).unwrap_or(0), u64::max);
            (at.saturating_add(1), dir)
        })
        .collect();
    listed.sort_unstable();
    Ok(ShareIndex {
        epoch,
        parent,
        meta,
        name_off,
        name_len,
        names,
        size,
        mtime,
        stamp,
        dev,
        ino,
        last,
        generation,
        targets,
        dirs,
        folder_changes: 0,
        dead_name_bytes: 0,
        live: live_count,
        log,
        next_seq,
        removals,
        horizon,
        walk_done,
        listed,
    })
}

/// Every live entry reaches the root through live folders (parents are
/// checked live already; this finds cycles among them).
fn check_acyclic(parent: &[u32], meta: &[u16]) -> Result<(), SavedIndexError> {
    // 0: not seen, 1: on the current path, 2: reaches the root.
    let mut state = vec![0u8; parent.len()];
    state[0] = 2;
    let mut path = Vec::new();
    for (start, k) in meta
        .iter()
        .map(|m| (m >> META_KIND_SHIFT) as u8)
        .enumerate()
    {
        if k & REMOVED != 0 {
            continue;
        }
        let mut cur = start;
        while state[cur] == 0 {
            state[cur] = 1;
            path.push(cur);
            cur = parent[cur] as usize;
        }
        if state[cur] == 1 {
            return Err(SavedIndexError::Inconsistent("a folder inside itself"));
        }
        for p in path.drain(..) {
            state[p] = 2;
        }
    }
    Ok(())
}

fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

/// Bytes read or written at once.
const IO_CHUNK: usize = 256 << 10;

/// Hashes what it passes on.
struct HashingWriter<W> {
    inner: W,
    hasher: blake3::Hasher,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Reads a saved index's body (`left` bytes of it not read yet), hashing it
/// as it goes; the hash follows the body.
struct Reader<R> {
    src: R,
    left: u64,
    hasher: blake3::Hasher,
    scratch: Vec<u8>,
}

impl<R: Read> Reader<R> {
    fn fill(&mut self, out: &mut [u8]) -> Result<(), SavedIndexError> {
        if (out.len() as u64) > self.left {
            return Err(SavedIndexError::Truncated);
        }
        self.src.read_exact(out).map_err(read_error)?;
        self.hasher.update(out);
        self.left -= out.len() as u64;
        Ok(())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], SavedIndexError> {
        let mut a = [0u8; N];
        self.fill(&mut a)?;
        Ok(a)
    }

    fn u32(&mut self) -> Result<u32, SavedIndexError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, SavedIndexError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A count of records at least `min_record` bytes long, checked against what is left.
    fn count(&mut self, min_record: usize) -> Result<usize, SavedIndexError> {
        let c = self.u64()?;
        if c > self.left / min_record as u64 {
            return Err(SavedIndexError::Truncated);
        }
        Ok(c as usize)
    }

    /// `n` records of `width` bytes each, handed to `each` in order; the
    /// count is checked against what is left of the file first, so the
    /// caller may size its column by `n`.
    fn records(
        &mut self,
        n: usize,
        width: usize,
        mut each: impl FnMut(&[u8]),
    ) -> Result<(), SavedIndexError> {
        let total = n.checked_mul(width).ok_or(SavedIndexError::Truncated)?;
        if total as u64 > self.left {
            return Err(SavedIndexError::Truncated);
        }
        let per_chunk = (IO_CHUNK / width).max(1);
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut done = 0;
        while done < n {
            let k = per_chunk.min(n - done);
            scratch.resize(k * width, 0);
            self.fill(&mut scratch)?;
            scratch.chunks_exact(width).for_each(&mut each);
            done += k;
        }
        self.scratch = scratch;
        Ok(())
    }

    /// `n` values of `width` bytes each.
    fn column<T>(
        &mut self,
        n: usize,
        width: usize,
        read: impl Fn(&[u8]) -> T,
    ) -> Result<Vec<T>, SavedIndexError> {
        let total = n.checked_mul(width).ok_or(SavedIndexError::Truncated)?;
        if total as u64 > self.left {
            return Err(SavedIndexError::Truncated);
        }
        let mut out = Vec::with_capacity(n);
        self.records(n, width, |b| out.push(read(b)))?;
        Ok(out)
    }

    /// `n` little-endian 64-bit values into a [`Narrow`] column (an `i64`
    /// read as its bits).
    fn narrow_column(&mut self, n: usize) -> Result<Narrow, SavedIndexError> {
        if (n as u64).saturating_mul(8) > self.left {
            return Err(SavedIndexError::Truncated);
        }
        let mut out = Narrow::with_capacity(n);
        self.records(n, 8, |b| out.push(u64::from_le_bytes(arr(b))))?;
        Ok(out)
    }

    /// `n` (device, inode) pairs, 8 bytes each.
    fn dev_ino_columns(&mut self, n: usize) -> Result<(Devices, Narrow), SavedIndexError> {
        if (n as u64).saturating_mul(16) > self.left {
            return Err(SavedIndexError::Truncated);
        }
        let (mut dev, mut ino) = (Devices::default(), Narrow::with_capacity(n));
        self.records(n, 16, |b| {
            dev.push(u64::from_le_bytes(arr(&b[..8])));
            ino.push(u64::from_le_bytes(arr(&b[8..])));
        })?;
        Ok((dev, ino))
    }

    /// After the whole body: the hash that follows it must match.
    fn check_hash(&mut self) -> Result<(), SavedIndexError> {
        let mut hash = [0u8; HASH_LEN];
        self.src.read_exact(&mut hash).map_err(read_error)?;
        if self.hasher.finalize().as_bytes() != &hash {
            return Err(SavedIndexError::Checksum);
        }
        Ok(())
    }

    /// After a parse stopped early: hashes the rest of the body, then checks.
    fn drain_and_check_hash(&mut self) -> Result<(), SavedIndexError> {
        let mut chunk = vec![0u8; IO_CHUNK];
        while self.left > 0 {
            let k = (self.left.min(IO_CHUNK as u64)) as usize;
            self.fill(&mut chunk[..k])?;
        }
        self.check_hash()
    }
}

fn read_error(e: std::io::Error) -> SavedIndexError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        SavedIndexError::Truncated
    } else {
        SavedIndexError::Read(e.to_string())
    }
}
