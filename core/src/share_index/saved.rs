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

use std::collections::HashMap;

use linkfs_proto::batch::{MAX_NAME_LEN, MAX_TARGET_LEN};
use linkfs_proto::{EntryKind, Epoch};

use super::{CTIME_UNKNOWN, DirList, KIND_MASK, LogOp, MAX_ENTRIES, REMOVED, ShareIndex};

const MAGIC: &[u8; 8] = b"lfsindex";
/// Format 2 added the ctime column; format 1 is still read (ctimes unknown
/// until the next look at each file, see [`CTIME_UNKNOWN`]).
const VERSION: u32 = 2;
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
    #[error("the saved index is inconsistent: {0}")]
    Inconsistent(&'static str),
}

/// Bytes per entry row in the columns (for the size check before allocating;
/// format 1 rows lack the last 8, the ctime).
const ROW: usize = 4 + 1 + 2 + 8 + 8 + 4 + 2 + 8 + 8 + 8;
const ROW_WITHOUT_CTIME: usize = ROW - 8;

impl ShareIndex {
    /// The index as a file (see the module docs). Only meaningful once the walk
    /// is done ([`ShareIndex::walk_done`]); the caller checks.
    pub fn to_saved(&self) -> Vec<u8> {
        let n = self.parent.len();
        let mut out = Vec::with_capacity(64 + n * (ROW + 16) + self.log_seq.len() * 12);
        out.extend_from_slice(MAGIC);
        put_u32(&mut out, VERSION);
        put_u64(&mut out, self.epoch.0);
        put_u64(&mut out, self.next_seq);
        put_u64(&mut out, self.horizon);
        put_u64(&mut out, n as u64);
        let live = |i: usize| self.kind[i] & REMOVED == 0;
        for &p in &self.parent {
            put_u32(&mut out, p);
        }
        out.extend_from_slice(&self.kind);
        for i in 0..n {
            let len = if live(i) { self.name_len[i] } else { 0 };
            out.extend_from_slice(&len.to_le_bytes());
        }
        for &s in &self.size {
            put_u64(&mut out, s);
        }
        for &m in &self.mtime {
            out.extend_from_slice(&m.to_le_bytes());
        }
        for &m in &self.mtime_nsec {
            put_u32(&mut out, m);
        }
        for &m in &self.mode {
            out.extend_from_slice(&m.to_le_bytes());
        }
        for &(dev, ino) in &self.dev_ino {
            put_u64(&mut out, dev);
            put_u64(&mut out, ino);
        }
        for &c in &self.ctime {
            out.extend_from_slice(&c.to_le_bytes());
        }
        for i in (0..n).filter(|i| live(*i)) {
            out.extend_from_slice(self.name(i));
        }
        let mut generations: Vec<(u32, u32)> = self
            .generation
            .iter()
            .filter(|(id, g)| **g != 0 && live(**id as usize))
            .map(|(id, g)| (*id, *g))
            .collect();
        generations.sort_unstable();
        put_u64(&mut out, generations.len() as u64);
        for (id, g) in generations {
            put_u32(&mut out, id);
            put_u32(&mut out, g);
        }
        let mut targets: Vec<(&u32, &Box<[u8]>)> = self.targets.iter().collect();
        targets.sort_unstable_by_key(|(id, _)| **id);
        put_u64(&mut out, targets.len() as u64);
        for (id, t) in targets {
            put_u32(&mut out, *id);
            out.extend_from_slice(&(t.len() as u16).to_le_bytes());
            out.extend_from_slice(t);
        }
        let current: Vec<(u64, LogOp)> = (0..self.log_seq.len())
            .map(|k| (self.log_seq[k], self.log_op[k]))
            .filter(|(seq, op)| self.is_current(*seq, *op))
            .collect();
        put_u64(&mut out, current.len() as u64);
        for (seq, op) in current {
            put_u64(&mut out, seq);
            put_u32(&mut out, op.0);
        }
        out.push(u8::from(self.walk_done));
        let hash = blake3::hash(&out);
        out.extend_from_slice(hash.as_bytes());
        out
    }

    /// Reads an index written by [`ShareIndex::to_saved`], checking it whole.
    pub fn from_saved(file: &[u8]) -> Result<ShareIndex, SavedIndexError> {
        if file.len() < MAGIC.len() + 4 + HASH_LEN || &file[..MAGIC.len()] != MAGIC {
            return Err(SavedIndexError::NotAnIndex);
        }
        let (body, hash) = file.split_at(file.len() - HASH_LEN);
        let mut r = Reader {
            rest: &body[MAGIC.len()..],
        };
        let version = r.u32()?;
        if version != VERSION && version != VERSION_WITHOUT_CTIME {
            return Err(SavedIndexError::Version(version));
        }
        let row = if version == VERSION {
            ROW
        } else {
            ROW_WITHOUT_CTIME
        };
        if blake3::hash(body).as_bytes() != hash {
            return Err(SavedIndexError::Checksum);
        }
        let epoch = Epoch(r.u64()?);
        let next_seq = r.u64()?;
        let horizon = r.u64()?;
        let n = r.u64()?;
        if n == 0 || n > MAX_ENTRIES as u64 || (n as usize).saturating_mul(row) > r.rest.len() {
            return Err(SavedIndexError::Inconsistent("entry count"));
        }
        let n = n as usize;
        let parent: Vec<u32> = r.column(n, 4, |b| u32::from_le_bytes(arr(b)))?;
        let kind: Vec<u8> = r.take(n)?.to_vec();
        let name_len: Vec<u16> = r.column(n, 2, |b| u16::from_le_bytes(arr(b)))?;
        let size: Vec<u64> = r.column(n, 8, |b| u64::from_le_bytes(arr(b)))?;
        let mtime: Vec<i64> = r.column(n, 8, |b| i64::from_le_bytes(arr(b)))?;
        let mtime_nsec: Vec<u32> = r.column(n, 4, |b| u32::from_le_bytes(arr(b)))?;
        let mode: Vec<u16> = r.column(n, 2, |b| u16::from_le_bytes(arr(b)))?;
        let dev_ino: Vec<(u64, u64)> = r.column(n, 16, |b| {
            (
                u64::from_le_bytes(arr(&b[..8])),
                u64::from_le_bytes(arr(&b[8..])),
            )
        })?;
        let ctime: Vec<i64> = if version == VERSION {
            r.column(n, 8, |b| i64::from_le_bytes(arr(b)))?
        } else {
            vec![CTIME_UNKNOWN; n]
        };
        let live = |i: usize| kind[i] & REMOVED == 0;
        for (i, k) in kind.iter().enumerate() {
            if k & !(KIND_MASK | REMOVED) != 0 || EntryKind::from_bits(k & KIND_MASK).is_none() {
                return Err(SavedIndexError::Inconsistent("entry kind"));
            }
            if usize::from(name_len[i]) > MAX_NAME_LEN || (!live(i) && name_len[i] != 0) {
                return Err(SavedIndexError::Inconsistent("name length"));
            }
        }
        let mut name_off = vec![0u32; n];
        let mut names = Vec::new();
        for i in 0..n {
            name_off[i] = names.len() as u32;
            names.extend_from_slice(r.take(usize::from(name_len[i]))?);
        }
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
            let len = usize::from(u16::from_le_bytes(arr(r.take(2)?)));
            let t = r.take(len)?;
            let i = id as usize;
            if i >= n
                || !live(i)
                || kind[i] != EntryKind::Symlink as u8
                || len > MAX_TARGET_LEN
                || targets.insert(id, t.into()).is_some()
            {
                return Err(SavedIndexError::Inconsistent("symlink targets"));
            }
        }
        let ops = r.count(12)?;
        let mut log_seq = Vec::with_capacity(ops);
        let mut log_op = Vec::with_capacity(ops);
        let mut last = vec![u64::MAX; n];
        let mut removals = 0;
        for _ in 0..ops {
            let (seq, op) = (r.u64()?, LogOp(r.u32()?));
            let i = op.id().index();
            let ordered = log_seq.last().is_none_or(|prev| *prev < seq);
            if !ordered || seq >= next_seq || seq < horizon || i >= n || last[i] != u64::MAX {
                return Err(SavedIndexError::Inconsistent("log order"));
            }
            if live(i) == op.is_remove() {
                return Err(SavedIndexError::Inconsistent("log operations"));
            }
            removals += usize::from(op.is_remove());
            last[i] = seq;
            log_seq.push(seq);
            log_op.push(op);
        }
        let walk_done = match r.take(1)? {
            [0] => false,
            [1] => true,
            _ => return Err(SavedIndexError::Inconsistent("walk flag")),
        };
        if !r.rest.is_empty() {
            return Err(SavedIndexError::Inconsistent("trailing bytes"));
        }
        if !live(0) || kind[0] != EntryKind::Dir as u8 {
            return Err(SavedIndexError::Inconsistent("the root"));
        }
        let mut dirs: HashMap<u32, DirList> = HashMap::new();
        let mut live_count = 0u64;
        for i in (0..n).filter(|i| live(*i)) {
            live_count += 1;
            if last[i] == u64::MAX {
                return Err(SavedIndexError::Inconsistent(
                    "an entry missing from the log",
                ));
            }
            if kind[i] == EntryKind::Dir as u8 {
                dirs.entry(i as u32).or_default();
            }
        }
        for i in (1..n).filter(|i| live(*i)) {
            let p = parent[i] as usize;
            if p >= n || p == i || !live(p) || kind[p] != EntryKind::Dir as u8 {
                return Err(SavedIndexError::Inconsistent("a parent"));
            }
            dirs.entry(p as u32).or_default().ids.push(i as u32);
        }
        check_acyclic(&parent, &kind)?;
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
        for list in dirs.values_mut() {
            list.ids
                .sort_unstable_by(|a, b| name_at(*a as usize).cmp(name_at(*b as usize)));
            if list
                .ids
                .windows(2)
                .any(|w| name_at(w[0] as usize) == name_at(w[1] as usize))
            {
                return Err(SavedIndexError::Inconsistent(
                    "two entries of one name in a folder",
                ));
            }
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
                    .map(|&c| last[c as usize])
                    .fold(last[dir as usize], u64::max);
                (at.saturating_add(1), dir)
            })
            .collect();
        listed.sort_unstable();
        Ok(ShareIndex {
            epoch,
            parent,
            kind,
            name_off,
            name_len,
            names,
            size,
            mtime,
            mtime_nsec,
            mode,
            dev_ino,
            ctime,
            last,
            generation,
            targets,
            dirs,
            folder_changes: 0,
            dead_name_bytes: 0,
            live: live_count,
            log_seq,
            log_op,
            next_seq,
            removals,
            horizon,
            walk_done,
            listed,
        })
    }
}

/// Every live entry reaches the root through live folders (parents are
/// checked live already; this finds cycles among them).
fn check_acyclic(parent: &[u32], kind: &[u8]) -> Result<(), SavedIndexError> {
    // 0: not seen, 1: on the current path, 2: reaches the root.
    let mut state = vec![0u8; parent.len()];
    state[0] = 2;
    let mut path = Vec::new();
    for (start, k) in kind.iter().enumerate() {
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

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], SavedIndexError> {
        if self.rest.len() < len {
            return Err(SavedIndexError::Truncated);
        }
        let (head, tail) = self.rest.split_at(len);
        self.rest = tail;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, SavedIndexError> {
        Ok(u32::from_le_bytes(arr(self.take(4)?)))
    }

    fn u64(&mut self) -> Result<u64, SavedIndexError> {
        Ok(u64::from_le_bytes(arr(self.take(8)?)))
    }

    /// A count of records at least `min_record` bytes long, checked against what is left.
    fn count(&mut self, min_record: usize) -> Result<usize, SavedIndexError> {
        let c = self.u64()?;
        if c > (self.rest.len() / min_record) as u64 {
            return Err(SavedIndexError::Truncated);
        }
        Ok(c as usize)
    }

    fn column<T>(
        &mut self,
        n: usize,
        width: usize,
        read: impl Fn(&[u8]) -> T,
    ) -> Result<Vec<T>, SavedIndexError> {
        let bytes = self.take(n.checked_mul(width).ok_or(SavedIndexError::Truncated)?)?;
        Ok(bytes.chunks_exact(width).map(read).collect())
    }
}
