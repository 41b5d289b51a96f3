//! Index batches: a bounded run of index operations in one frame.
//!
//! A batch is self-contained (it decodes without any earlier batch), so a
//! receiver can persist the frame's bytes as they are and replay them later.
//! Inside a batch every field is coded against the previous operation, which
//! for a directory walk makes most of them one byte:
//!
//! ```text
//! u8    0x10                  frame type
//! uv    first                 Seq of the first operation
//! uv    known                 entries the sharer has found so far ("announced")
//! u8    flags                 bit 0: the receiver is complete at the end of this batch
//!                             bit 1: everything after n_ops (and span) is one zstd frame
//!                             bit 2: span follows n_ops
//!                             bit 3: the operations are in columns (below)
//! uv    first_id              id the first operation's implicit id starts from
//! iv    base_mtime            seconds; the first operation's mtime delta is against this
//! uv    n_modes  (<= 15)      permission modes used in this batch, each sent once
//! uv*   modes
//! uv    n_ops
//! [uv   span]                 log positions the batch covers, if bit 2 (else n_ops)
//! op*:
//!   u8  head   bits 0-1 kind: 0 file, 1 dir, 2 symlink, 3 remove
//!              bit  2   id is explicit (else: previous id + 1)
//!              bit  3   generation follows (else: 0)
//!              bits 4-7 index into the mode table; 15: mode follows as uv
//!   [iv id - (previous id + 1)]        if bit 2
//!   -- remove ops end here --
//!   iv  parent - previous parent       (previous parent starts at 0)
//!   uv  bytes shared with the previous name, uv suffix length, suffix
//!   uv  size                           files only
//!   iv  mtime - previous mtime         (previous starts at base_mtime)
//!   [uv generation]                    if bit 3
//!   [uv mode]                          if mode index is 15
//!   [uv target length, target]         symlinks only
//! ```
//! (`uv` is an unsigned LEB128 varint, `iv` a zigzag varint.)
//!
//! Columns (flag bit 3, protocol version 2): the same fields in the same order,
//! but the name suffixes and symlink targets go in a column of their own (their
//! lengths stay with the operation), and so do the mtime deltas. Each column is
//! compressed on its own, so zstd's literal coder sees names apart from numbers:
//!
//! ```text
//! u8    column flags          bit i: column i is one zstd frame
//! uv    length, bytes         column 0: every operation's other fields
//! uv    length, bytes         column 1: name suffixes and symlink targets
//! uv    length, bytes         column 2: mtime deltas
//! ```
//!
//! On the 1M-entry generated tree (`linkfs-gen-tree`, random hex names, mtimes
//! spread over four years) this took the wire from 19.3 to 16.6 B/entry, on
//! `/usr` from 9.1 to 7.9; the three together are about all the names' and the
//! mtimes' own entropy. Flag bit 1 (the whole body one frame) is not used with
//! columns. A sharer sends columns only to receivers that said version 2 or more.
//!
//! The span: a batch covers the log positions `first .. first + span`. Usually
//! every position is one operation (span = n_ops, not sent). Once the share
//! changes, positions whose operation was superseded by a later one are skipped
//! (span > n_ops), and an entry's parents the receiver has not been sent yet go
//! out ahead of it (span < n_ops is possible); the receiver's next position is
//! `first + span` either way.
//!
//! The operations (not the header) are compressed with zstd when that makes the
//! frame smaller: on real trees (`/usr`, a home folder) this takes a batch from
//! about 25 to about 9 bytes per entry (about 8 in columns). The encoder fills a batch up to its cap
//! *before* compression, so a compressed frame is never over the cap, and a
//! decoder refuses a body that would decompress to more than [`MAX_FRAME_LEN`].
//! Only sharers compress (feature `zstd-encode`, the C library); decoding is
//! pure Rust and works in the browser. Native receivers decode with the C
//! library (feature `zstd-decode`): a mount or `linkfs get` takes in an index
//! about 27% faster (decode and apply, 0.73 -> 0.53 s per million entries).

use crate::entry::{EntryKind, EntryView, OpView};
use crate::ids::{EntryId, Generation, Seq};
use std::borrow::Cow;
use std::io::Read;

use crate::varint::{Reader, put_ivarint, put_uvarint};
use crate::{DecodeError, FRAME_INDEX_BATCH, MAX_FRAME_LEN};

/// Longest name a batch may carry, in bytes (Linux allows 255; leave room for others).
pub const MAX_NAME_LEN: usize = 1024;
/// Longest symlink target a batch may carry, in bytes (Linux `PATH_MAX`).
pub const MAX_TARGET_LEN: usize = 4096;
/// Size of the mode table in a batch header.
pub const MODE_TABLE_LEN: usize = 15;
/// Upper bound of the header's encoded size; the encoder reserves it.
const HEADER_MAX: usize = 1 + 10 + 10 + 1 + 10 + 10 + 1 + MODE_TABLE_LEN * 3 + 10 + 10;
/// Upper bound of the column flags and the three column lengths.
const COLUMNS_HEADER_MAX: usize = 1 + COLUMNS * 10;
/// Smallest byte cap a batch may be given: room for the largest possible operation.
pub const MIN_BATCH_CAP: usize = HEADER_MAX
    + COLUMNS_HEADER_MAX
    + 2 * 10
    + 10
    + MAX_NAME_LEN
    + 10
    + 10
    + 10
    + 10
    + 10
    + MAX_TARGET_LEN
    + 16;
/// Columns of a batch in columns: the operations' fields, the names, the mtimes.
const COLUMNS: usize = 3;

const KIND_REMOVE: u8 = 3;
const HEAD_ID_EXPLICIT: u8 = 1 << 2;
const HEAD_GENERATION: u8 = 1 << 3;
const MODE_EXPLICIT: u8 = 15;
const FLAG_SNAPSHOT_COMPLETE: u8 = 1;
const FLAG_ZSTD: u8 = 2;
const FLAG_SPAN: u8 = 4;
const FLAG_COLUMNS: u8 = 8;
/// zstd level for batch bodies: level 3 gave 8.6-9.4 B/entry on real trees at
/// about 80 ns per entry; higher levels buy under 10% for several times the CPU.
#[cfg(feature = "zstd-encode")]
const ZSTD_LEVEL: i32 = 3;
/// Bodies smaller than this are not worth a compression attempt.
#[cfg(feature = "zstd-encode")]
const COMPRESS_MIN: usize = 256;

/// What a batch says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub first: Seq,
    /// Entries the sharer had found when it sent this batch.
    pub known: u64,
    /// The receiver holds every entry of the share once it applied this batch
    /// (the walk is over and the batch reached the end of the log).
    pub snapshot_complete: bool,
    pub ops: u32,
    /// Log positions the batch covers (see the module docs).
    pub span: u64,
}

impl BatchHeader {
    /// The log position after this batch.
    pub fn end(&self) -> Seq {
        Seq(self.first.0.saturating_add(self.span))
    }
}

/// Log positions a batch may cover beyond its operations (superseded ones it
/// skips): 65,536. A sender cuts a batch before it skips more; a receiver
/// refuses a batch that does. With entry ids never beyond the log position
/// that created them (every operation of a batch names an id below the
/// batch's end), this bounds how far one batch can move a receiver's id space.
pub const MAX_SKIPPED_POSITIONS: u64 = 65_536;

/// Which column a field goes in (all in one when the batch is not in columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Fields = 0,
    Names = 1,
    Mtimes = 2,
}

/// Builds one batch, refusing operations once the frame would pass its byte cap.
#[derive(Debug)]
pub struct BatchEncoder {
    cap: usize,
    first: Seq,
    first_id: u32,
    base_mtime: i64,
    modes: Vec<u32>,
    /// Whether the operations go in columns (protocol version 2).
    columns: bool,
    /// The body's columns (only the first when not in columns).
    body: [Vec<u8>; COLUMNS],
    /// The operation being added, column by column, until it is known to fit.
    scratch: [Vec<u8>; COLUMNS],
    n_ops: u32,
    prev_id: i64,
    prev_parent: i64,
    prev_name: Vec<u8>,
    prev_mtime: i64,
}

impl BatchEncoder {
    /// A batch in columns whose first operation will have `first`; `cap` bounds
    /// the whole frame (clamped to `MIN_BATCH_CAP..=MAX_FRAME_LEN`).
    pub fn new(first: Seq, cap: usize) -> Self {
        Self::with_layout(first, cap, true)
    }

    /// The same with every field of an operation together, as protocol version 1
    /// receivers read it.
    pub fn interleaved(first: Seq, cap: usize) -> Self {
        Self::with_layout(first, cap, false)
    }

    /// The layout a receiver speaking protocol `version` reads.
    pub fn for_version(first: Seq, cap: usize, version: u16) -> Self {
        Self::with_layout(first, cap, version >= 2)
    }

    fn with_layout(first: Seq, cap: usize, columns: bool) -> Self {
        BatchEncoder {
            cap: cap.clamp(MIN_BATCH_CAP, MAX_FRAME_LEN),
            first,
            first_id: 0,
            base_mtime: 0,
            modes: Vec::new(),
            columns,
            body: [
                Vec::with_capacity(cap.min(MAX_FRAME_LEN)),
                Vec::new(),
                Vec::new(),
            ],
            scratch: [Vec::with_capacity(64), Vec::new(), Vec::new()],
            n_ops: 0,
            prev_id: 0,
            prev_parent: 0,
            prev_name: Vec::new(),
            prev_mtime: 0,
        }
    }

    pub fn ops(&self) -> u32 {
        self.n_ops
    }

    pub fn is_empty(&self) -> bool {
        self.n_ops == 0
    }

    /// Bytes the frame would have if finished now (an upper bound).
    pub fn len_bound(&self) -> usize {
        let columns = if self.columns { COLUMNS_HEADER_MAX } else { 0 };
        HEADER_MAX + columns + self.body.iter().map(Vec::len).sum::<usize>()
    }

    /// Where a field of the operation being added goes.
    fn col(&mut self, c: Column) -> &mut Vec<u8> {
        let i = if self.columns { c as usize } else { 0 };
        &mut self.scratch[i]
    }

    fn start(&mut self, id: EntryId, mtime: i64) {
        if self.n_ops == 0 {
            self.first_id = id.0;
            self.prev_id = i64::from(id.0) - 1;
            self.base_mtime = mtime;
            self.prev_mtime = mtime;
        }
    }

    fn commit(&mut self, id: EntryId) -> bool {
        let adding: usize = self.scratch.iter().map(Vec::len).sum();
        if self.len_bound() + adding > self.cap {
            self.scratch.iter_mut().for_each(Vec::clear);
            return false;
        }
        for (body, scratch) in self.body.iter_mut().zip(&mut self.scratch) {
            body.extend_from_slice(scratch);
            scratch.clear();
        }
        self.prev_id = i64::from(id.0);
        self.n_ops += 1;
        true
    }

    fn id_part(&self, head: &mut u8, id: EntryId) -> Option<i64> {
        let delta = i64::from(id.0) - (self.prev_id + 1);
        if delta != 0 {
            *head |= HEAD_ID_EXPLICIT;
            Some(delta)
        } else {
            None
        }
    }

    /// Adds an upsert; returns false (and adds nothing) when the batch is full.
    ///
    /// Names longer than [`MAX_NAME_LEN`] or targets longer than
    /// [`MAX_TARGET_LEN`] must be filtered out by the caller; they are cut here.
    pub fn push_upsert(&mut self, e: &EntryView<'_>) -> bool {
        let saved = (
            self.first_id,
            self.prev_id,
            self.base_mtime,
            self.prev_mtime,
        );
        self.start(e.id, e.mtime);
        let name = &e.name[..e.name.len().min(MAX_NAME_LEN)];
        let target = &e.target[..e.target.len().min(MAX_TARGET_LEN)];
        let mode = e.mode & 0o7777;
        let (mode_idx, new_mode) = match self.modes.iter().position(|m| *m == mode) {
            Some(i) => (i as u8, false),
            None if self.modes.len() < MODE_TABLE_LEN => (self.modes.len() as u8, true),
            None => (MODE_EXPLICIT, false),
        };
        let mut head = e.kind as u8 | (mode_idx << 4);
        let id_delta = self.id_part(&mut head, e.id);
        if e.generation.0 != 0 {
            head |= HEAD_GENERATION;
        }
        let shared = common_prefix(&self.prev_name, name);
        let parent_delta = i64::from(e.parent.0) - self.prev_parent;
        let mtime_delta = e.mtime.wrapping_sub(self.prev_mtime);
        let s = self.col(Column::Fields);
        s.push(head);
        if let Some(d) = id_delta {
            put_ivarint(s, d);
        }
        put_ivarint(s, parent_delta);
        put_uvarint(s, shared as u64);
        put_uvarint(s, (name.len() - shared) as u64);
        self.col(Column::Names).extend_from_slice(&name[shared..]);
        if e.kind == EntryKind::File {
            put_uvarint(self.col(Column::Fields), e.size);
        }
        put_ivarint(self.col(Column::Mtimes), mtime_delta);
        let s = self.col(Column::Fields);
        if e.generation.0 != 0 {
            put_uvarint(s, u64::from(e.generation.0));
        }
        if mode_idx == MODE_EXPLICIT {
            put_uvarint(s, u64::from(mode));
        }
        if e.kind == EntryKind::Symlink {
            put_uvarint(s, target.len() as u64);
            self.col(Column::Names).extend_from_slice(target);
        }
        if !self.commit(e.id) {
            (
                self.first_id,
                self.prev_id,
                self.base_mtime,
                self.prev_mtime,
            ) = saved;
            return false;
        }
        if new_mode {
            self.modes.push(mode);
        }
        self.prev_parent = i64::from(e.parent.0);
        self.prev_name.clear();
        self.prev_name.extend_from_slice(name);
        self.prev_mtime = e.mtime;
        true
    }

    /// Adds a removal; returns false (and adds nothing) when the batch is full.
    pub fn push_remove(&mut self, id: EntryId) -> bool {
        let saved = (
            self.first_id,
            self.prev_id,
            self.base_mtime,
            self.prev_mtime,
        );
        self.start(id, self.prev_mtime);
        let mut head = KIND_REMOVE;
        let id_delta = self.id_part(&mut head, id);
        let s = self.col(Column::Fields);
        s.push(head);
        if let Some(d) = id_delta {
            put_ivarint(s, d);
        }
        if !self.commit(id) {
            (
                self.first_id,
                self.prev_id,
                self.base_mtime,
                self.prev_mtime,
            ) = saved;
            return false;
        }
        true
    }

    /// The finished frame, covering as many log positions as it holds operations.
    /// `known` is how many entries the sharer has found so far.
    pub fn finish(self, known: u64, snapshot_complete: bool) -> Vec<u8> {
        let span = u64::from(self.n_ops);
        self.finish_span(known, snapshot_complete, span)
    }

    /// The finished frame, covering `span` log positions (which may differ from
    /// the number of operations; see the module docs).
    pub fn finish_span(self, known: u64, snapshot_complete: bool, span: u64) -> Vec<u8> {
        let mut flags = 0;
        let body = if self.columns {
            flags |= FLAG_COLUMNS;
            let mut column_flags = 0u8;
            let mut columns = Vec::with_capacity(COLUMNS);
            for (i, column) in self.body.into_iter().enumerate() {
                let (bytes, compressed) = compress_body(column);
                if compressed {
                    column_flags |= 1 << i;
                }
                columns.push(bytes);
            }
            let mut body = Vec::with_capacity(
                COLUMNS_HEADER_MAX + columns.iter().map(Vec::len).sum::<usize>(),
            );
            body.push(column_flags);
            for column in &columns {
                put_uvarint(&mut body, column.len() as u64);
                body.extend_from_slice(column);
            }
            body
        } else {
            let [fields, _, _] = self.body;
            let (body, compressed) = compress_body(fields);
            if compressed {
                flags |= FLAG_ZSTD;
            }
            body
        };
        let mut out = Vec::with_capacity(HEADER_MAX + body.len());
        out.push(FRAME_INDEX_BATCH);
        put_uvarint(&mut out, self.first.0);
        put_uvarint(&mut out, known);
        if snapshot_complete {
            flags |= FLAG_SNAPSHOT_COMPLETE;
        }
        let explicit_span = span != u64::from(self.n_ops);
        if explicit_span {
            flags |= FLAG_SPAN;
        }
        out.push(flags);
        put_uvarint(&mut out, u64::from(self.first_id));
        put_ivarint(&mut out, self.base_mtime);
        put_uvarint(&mut out, self.modes.len() as u64);
        for m in &self.modes {
            put_uvarint(&mut out, u64::from(*m));
        }
        put_uvarint(&mut out, u64::from(self.n_ops));
        if explicit_span {
            put_uvarint(&mut out, span);
        }
        out.extend_from_slice(&body);
        out
    }
}

/// The body to send and whether it is compressed (only if that is smaller).
/// Each thread keeps one compression context (a new one per call cost more
/// than compressing a small column).
#[cfg(feature = "zstd-encode")]
fn compress_body(body: Vec<u8>) -> (Vec<u8>, bool) {
    thread_local! {
        static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    if body.len() < COMPRESS_MIN {
        return (body, false);
    }
    let z = COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_none() {
            *c = zstd::bulk::Compressor::new(ZSTD_LEVEL).ok();
        }
        c.as_mut()?.compress(&body).ok()
    });
    match z {
        Some(z) if z.len() < body.len() => (z, true),
        _ => (body, false),
    }
}

#[cfg(not(feature = "zstd-encode"))]
fn compress_body(body: Vec<u8>) -> (Vec<u8>, bool) {
    (body, false)
}

/// What a zstd frame header declares (RFC 8878, 3.1.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ZstdDeclared {
    window: u64,
    content: Option<u64>,
}

/// Reads the header of the zstd frame `z` without decoding anything.
fn zstd_header(z: &[u8]) -> Option<ZstdDeclared> {
    const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
    if z.get(..4)? != MAGIC {
        return None;
    }
    let descriptor = *z.get(4)?;
    let fcs_flag = descriptor >> 6;
    let single_segment = descriptor & 0x20 != 0;
    let reserved = descriptor & 0x08 != 0;
    let dict_flag = descriptor & 0x03;
    if reserved || dict_flag != 0 {
        // Batches never use dictionaries.
        return None;
    }
    let mut at = 5;
    let window = if single_segment {
        None
    } else {
        let w = *z.get(at)?;
        at += 1;
        let log = 10 + u64::from(w >> 3);
        let base = 1u64 << log;
        Some(base + (base / 8) * u64::from(w & 7))
    };
    let fcs_len = match (fcs_flag, single_segment) {
        (0, false) => 0,
        (0, true) => 1,
        (1, _) => 2,
        (2, _) => 4,
        _ => 8,
    };
    let content = if fcs_len == 0 {
        None
    } else {
        let bytes = z.get(at..at + fcs_len)?;
        let mut v = [0u8; 8];
        v[..fcs_len].copy_from_slice(bytes);
        let n = u64::from_le_bytes(v);
        Some(if fcs_len == 2 { n + 256 } else { n })
    };
    // A single-segment frame's window is its content size.
    let window = window.or(content)?;
    Some(ZstdDeclared { window, content })
}

/// Decompresses a batch body (or a column of one), refusing anything over
/// `limit` bytes (at most [`MAX_FRAME_LEN`]: the columns share it).
///
/// The frame header is checked first: a decoder keeps a whole window of output
/// before it hands any out, so a small frame that declares a 1 GiB window (and
/// fills it with run-length blocks) would make it allocate gigabytes before
/// the size check below could see anything. A window or content size over the
/// cap is refused before decoding starts.
fn decompress_body(
    z: &[u8],
    at: usize,
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    let bad = DecodeError::Invalid {
        at,
        what: "compressed batch body",
    };
    let limit = limit.min(MAX_FRAME_LEN);
    let declared = zstd_header(z).ok_or(bad.clone())?;
    let too_large = declared.window.max(declared.content.unwrap_or(0));
    if too_large > MAX_FRAME_LEN as u64 {
        return Err(DecodeError::TooLarge {
            len: usize::try_from(too_large).unwrap_or(usize::MAX),
            max: MAX_FRAME_LEN,
        });
    }
    let content = declared.content.unwrap_or(0);
    if content > limit as u64 {
        return Err(DecodeError::TooLarge {
            len: usize::try_from(content).unwrap_or(usize::MAX),
            max: limit,
        });
    }
    #[cfg(feature = "zstd-decode")]
    if let Some(content) = declared.content {
        // `content <= limit <= MAX_FRAME_LEN`, checked above.
        return if decompress_declared(z, content as usize, out) {
            Ok(())
        } else {
            Err(bad)
        };
    }
    decompress_rust(z, at, limit, out)
}

/// Decodes the zstd frame `z` onto the end of `out` in pure Rust (the page,
/// and frames that do not declare their size), refusing over `limit` bytes.
fn decompress_rust(
    z: &[u8],
    at: usize,
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    let bad = DecodeError::Invalid {
        at,
        what: "compressed batch body",
    };
    let mut decoder = ruzstd::decoding::StreamingDecoder::new(z).map_err(|_| bad.clone())?;
    let start = out.len();
    out.reserve((z.len() * 3).min(limit));
    (&mut decoder)
        .take(limit as u64 + 1)
        .read_to_end(out)
        .map_err(|_| bad)?;
    if out.len() - start > limit {
        return Err(DecodeError::TooLarge {
            len: out.len() - start,
            max: limit,
        });
    }
    Ok(())
}

/// Decodes the zstd frame `z`, which declares `content` bytes, onto the end
/// of `out` with the C library (feature `zstd-decode`, native receivers): it
/// decodes a batch in about a third of pure Rust's time, the biggest cost of
/// a mount taking in a big index. The output room is exactly `content`
/// bytes, so the library can write no more; anything but one frame that
/// decodes to exactly `content` bytes is refused (false), and `out` is left
/// as it was. Frames that do not declare their size (no sharer sends them)
/// go to the pure-Rust decoder.
#[cfg(feature = "zstd-decode")]
fn decompress_declared(z: &[u8], content: usize, out: &mut Vec<u8>) -> bool {
    thread_local! {
        static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    let start = out.len();
    out.reserve_exact(content);
    let written = DECOMPRESSOR.with(|d| {
        let mut d = d.borrow_mut();
        if d.is_none() {
            *d = zstd::bulk::Decompressor::new().ok();
        }
        let mut room = std::io::Cursor::new(&mut *out);
        room.set_position(start as u64);
        d.as_mut()?.decompress_to_buffer(z, &mut room).ok()
    });
    if written == Some(content) && out.len() == start + content {
        true
    } else {
        out.truncate(start);
        false
    }
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Reads the operations of one batch frame without allocating per operation
/// (a compressed body is decompressed once, into one buffer).
#[derive(Debug)]
pub struct BatchReader<'a> {
    body: Cow<'a, [u8]>,
    /// Where each column lies in `body` (columns 1 and 2 empty when the batch
    /// is not in columns: every field is in column 0).
    columns: [std::ops::Range<usize>; COLUMNS],
    /// Bytes of each column read so far.
    pos: [usize; COLUMNS],
    in_columns: bool,
    compressed: bool,
    /// Offset of the body in the frame, for error positions.
    body_at: usize,
    header: BatchHeader,
    modes: Vec<u32>,
    left: u32,
    prev_id: i64,
    prev_parent: i64,
    prev_mtime: i64,
    name: Vec<u8>,
}

impl<'a> BatchReader<'a> {
    /// Parses the header of `frame` (which starts with its type byte).
    pub fn new(frame: &'a [u8]) -> Result<Self, DecodeError> {
        if frame.len() > MAX_FRAME_LEN {
            return Err(DecodeError::TooLarge {
                len: frame.len(),
                max: MAX_FRAME_LEN,
            });
        }
        let mut r = Reader::new(frame);
        let kind = r.u8()?;
        if kind != FRAME_INDEX_BATCH {
            return Err(DecodeError::Invalid {
                at: 0,
                what: "index batch type",
            });
        }
        let first = Seq(r.uvarint()?);
        let known = r.uvarint()?;
        let flags_at = r.position();
        let flags = r.u8()?;
        if flags & !(FLAG_SNAPSHOT_COMPLETE | FLAG_ZSTD | FLAG_SPAN | FLAG_COLUMNS) != 0
            || flags & (FLAG_ZSTD | FLAG_COLUMNS) == FLAG_ZSTD | FLAG_COLUMNS
        {
            return Err(DecodeError::Invalid {
                at: flags_at,
                what: "batch flags",
            });
        }
        let first_id = r.u32varint()?;
        let base_mtime = r.ivarint()?;
        let n_modes_at = r.position();
        let n_modes = r.uvarint()?;
        if n_modes > MODE_TABLE_LEN as u64 {
            return Err(DecodeError::OutOfRange {
                at: n_modes_at,
                what: "mode table length",
            });
        }
        let mut modes = Vec::with_capacity(n_modes as usize);
        for _ in 0..n_modes {
            modes.push(read_mode(&mut r)?);
        }
        let n_ops_at = r.position();
        let n_ops = r.uvarint()?;
        let span = if flags & FLAG_SPAN != 0 {
            r.uvarint()?
        } else {
            n_ops
        };
        let body_at = r.position();
        let in_columns = flags & FLAG_COLUMNS != 0;
        let (body, columns, compressed) = if in_columns {
            read_columns(&mut r)?
        } else {
            let rest = r.rest();
            if flags & FLAG_ZSTD != 0 {
                let mut body = Vec::new();
                decompress_body(rest, body_at, MAX_FRAME_LEN, &mut body)?;
                let n = body.len();
                (Cow::Owned(body), [0..n, n..n, n..n], true)
            } else {
                let n = rest.len();
                (Cow::Borrowed(rest), [0..n, n..n, n..n], false)
            }
        };
        // Every operation takes at least one byte: a count beyond that is a lie.
        if n_ops > columns[0].len() as u64 {
            return Err(DecodeError::OutOfRange {
                at: n_ops_at,
                what: "operation count",
            });
        }
        let header = BatchHeader {
            first,
            known,
            snapshot_complete: flags & FLAG_SNAPSHOT_COMPLETE != 0,
            ops: n_ops as u32,
            span,
        };
        Ok(BatchReader {
            body,
            columns,
            pos: [0; COLUMNS],
            in_columns,
            compressed,
            body_at,
            header,
            modes,
            left: n_ops as u32,
            prev_id: i64::from(first_id) - 1,
            prev_parent: 0,
            prev_mtime: base_mtime,
            name: Vec::with_capacity(64),
        })
    }

    pub fn header(&self) -> BatchHeader {
        self.header
    }

    /// Whether the operations (or any column of them) travelled zstd-compressed.
    pub fn compressed(&self) -> bool {
        self.compressed
    }

    /// Whether the operations travelled in columns (protocol version 2).
    pub fn in_columns(&self) -> bool {
        self.in_columns
    }

    /// The next operation, or `None` after the last one (when the frame must be used up).
    pub fn next_op(&mut self) -> Result<Option<OpView<'_>>, DecodeError> {
        let body: &[u8] = &self.body;
        // Where each column's unread bytes start in the body, and in the frame.
        let starts: [usize; COLUMNS] = std::array::from_fn(|i| self.columns[i].start + self.pos[i]);
        let bases = starts.map(|at| self.body_at + at);
        let mut rf = Reader::new(&body[starts[0]..self.columns[0].end]);
        let mut rn = Reader::new(&body[starts[1]..self.columns[1].end]);
        let mut rm = Reader::new(&body[starts[2]..self.columns[2].end]);
        if self.left == 0 {
            for (r, base) in [(&rf, bases[0]), (&rn, bases[1]), (&rm, bases[2])] {
                r.finish().map_err(|e| shift(e, base))?;
            }
            return Ok(None);
        }
        self.left -= 1;
        let (bf, bn, bm) = (bases[0], bases[1], bases[2]);
        let e = |x: DecodeError| shift(x, bf);
        let head_at = bf + rf.position();
        let head = rf.u8().map_err(e)?;
        let mut id = self.prev_id + 1;
        if head & HEAD_ID_EXPLICIT != 0 {
            id = id.wrapping_add(rf.ivarint().map_err(e)?);
        }
        let id = entry_id(id, head_at)?;
        self.prev_id = i64::from(id.0);
        let kind_bits = head & 3;
        if kind_bits == KIND_REMOVE {
            if head & !(KIND_REMOVE | HEAD_ID_EXPLICIT) != 0 {
                return Err(DecodeError::Invalid {
                    at: head_at,
                    what: "remove operation flags",
                });
            }
            self.pos[0] += rf.position();
            return Ok(Some(OpView::Remove(id)));
        }
        // kind_bits is 0..=2 here.
        let kind = EntryKind::from_bits(kind_bits).ok_or(DecodeError::Invalid {
            at: head_at,
            what: "entry kind",
        })?;
        let parent_at = bf + rf.position();
        let parent = entry_id(
            self.prev_parent.wrapping_add(rf.ivarint().map_err(e)?),
            parent_at,
        )?;
        self.prev_parent = i64::from(parent.0);
        let shared_at = bf + rf.position();
        let shared = rf.uvarint().map_err(e)?;
        if shared > self.name.len() as u64 {
            return Err(DecodeError::OutOfRange {
                at: shared_at,
                what: "shared name prefix",
            });
        }
        let suffix_len = rf.uvarint().map_err(e)?;
        if shared.saturating_add(suffix_len) > MAX_NAME_LEN as u64 {
            return Err(DecodeError::OutOfRange {
                at: shared_at,
                what: "name length",
            });
        }
        // In columns the bytes of names and targets are in column 1.
        let (names, names_base) = if self.in_columns {
            (&mut rn, bn)
        } else {
            (&mut rf, bf)
        };
        let suffix = names
            .bytes(suffix_len as usize)
            .map_err(|x| shift(x, names_base))?;
        self.name.truncate(shared as usize);
        self.name.extend_from_slice(suffix);
        let mut size = if kind == EntryKind::File {
            rf.uvarint().map_err(e)?
        } else {
            0
        };
        let mtime_delta = if self.in_columns {
            rm.ivarint().map_err(|x| shift(x, bm))?
        } else {
            rf.ivarint().map_err(e)?
        };
        let mtime = self.prev_mtime.wrapping_add(mtime_delta);
        self.prev_mtime = mtime;
        let generation = if head & HEAD_GENERATION != 0 {
            Generation(rf.u32varint().map_err(e)?)
        } else {
            Generation(0)
        };
        let mode_idx = head >> 4;
        let mode = if mode_idx == MODE_EXPLICIT {
            read_mode(&mut rf).map_err(e)?
        } else {
            *self
                .modes
                .get(mode_idx as usize)
                .ok_or(DecodeError::OutOfRange {
                    at: head_at,
                    what: "mode table index",
                })?
        };
        let target: &[u8] = if kind == EntryKind::Symlink {
            let t_at = bf + rf.position();
            let len = rf.uvarint().map_err(e)?;
            if len > MAX_TARGET_LEN as u64 {
                return Err(DecodeError::OutOfRange {
                    at: t_at,
                    what: "symlink target length",
                });
            }
            let (names, names_base) = if self.in_columns {
                (&mut rn, bn)
            } else {
                (&mut rf, bf)
            };
            let t = names
                .bytes(len as usize)
                .map_err(|x| shift(x, names_base))?;
            size = t.len() as u64;
            t
        } else {
            &[]
        };
        self.pos[0] += rf.position();
        self.pos[1] += rn.position();
        self.pos[2] += rm.position();
        Ok(Some(OpView::Upsert(EntryView {
            id,
            parent,
            kind,
            name: &self.name,
            size,
            mtime,
            mode,
            generation,
            target,
        })))
    }
}

/// Reads the columns of a batch in columns (after its header) into one buffer:
/// the buffer, where each column lies in it, and whether any was compressed.
/// The columns together decompress to at most [`MAX_FRAME_LEN`] bytes.
#[allow(clippy::type_complexity)]
fn read_columns<'a>(
    r: &mut Reader<'a>,
) -> Result<(Cow<'a, [u8]>, [std::ops::Range<usize>; COLUMNS], bool), DecodeError> {
    let flags_at = r.position();
    let column_flags = r.u8()?;
    if column_flags >> COLUMNS != 0 {
        return Err(DecodeError::Invalid {
            at: flags_at,
            what: "column flags",
        });
    }
    let mut body = Vec::new();
    let mut ranges: [std::ops::Range<usize>; COLUMNS] = std::array::from_fn(|_| 0..0);
    for (i, range) in ranges.iter_mut().enumerate() {
        let at = r.position();
        let bytes = r.byte_string()?;
        let start = body.len();
        if column_flags & (1 << i) != 0 {
            decompress_body(bytes, at, MAX_FRAME_LEN - start, &mut body)?;
        } else {
            if start + bytes.len() > MAX_FRAME_LEN {
                return Err(DecodeError::TooLarge {
                    len: start + bytes.len(),
                    max: MAX_FRAME_LEN,
                });
            }
            body.extend_from_slice(bytes);
        }
        *range = start..body.len();
    }
    r.finish()?;
    Ok((Cow::Owned(body), ranges, column_flags != 0))
}

/// Moves an error's offset from the body-relative reader to the frame.
fn shift(e: DecodeError, by: usize) -> DecodeError {
    match e {
        DecodeError::Truncated { at, wanted } => DecodeError::Truncated {
            at: at + by,
            wanted,
        },
        DecodeError::VarintOverflow { at } => DecodeError::VarintOverflow { at: at + by },
        DecodeError::OutOfRange { at, what } => DecodeError::OutOfRange { at: at + by, what },
        DecodeError::BadUtf8 { at } => DecodeError::BadUtf8 { at: at + by },
        DecodeError::TrailingBytes { at, count } => {
            DecodeError::TrailingBytes { at: at + by, count }
        }
        DecodeError::Invalid { at, what } => DecodeError::Invalid { at: at + by, what },
        other => other,
    }
}

fn read_mode(r: &mut Reader<'_>) -> Result<u32, DecodeError> {
    let at = r.position();
    let m = r.uvarint()?;
    if m > 0o7777 {
        return Err(DecodeError::OutOfRange {
            at,
            what: "permission mode",
        });
    }
    Ok(m as u32)
}

fn entry_id(v: i64, at: usize) -> Result<EntryId, DecodeError> {
    u32::try_from(v)
        .map(EntryId)
        .map_err(|_| DecodeError::OutOfRange {
            at,
            what: "entry id",
        })
}

/// Decodes a whole batch into owned operations (tests and tools; the receiver
/// uses [`BatchReader`] directly).
pub fn decode_batch(frame: &[u8]) -> Result<(BatchHeader, Vec<crate::IndexOp>), DecodeError> {
    let mut reader = BatchReader::new(frame)?;
    let header = reader.header();
    let mut ops = Vec::with_capacity(header.ops as usize);
    while let Some(op) = reader.next_op()? {
        ops.push(op.to_op());
    }
    Ok((header, ops))
}

/// The C decoder against the pure-Rust one: the same bytes for every frame a
/// sharer makes, and for damaged frames an error from the C one wherever the
/// Rust one errs or decodes other bytes than it (never a panic, never more
/// than the declared size).
#[cfg(all(test, feature = "zstd-decode"))]
mod c_decoder {
    use super::{decompress_declared, decompress_rust, zstd_header};
    use crate::MAX_FRAME_LEN;

    /// A seeded run of bytes like a batch column: runs, counters and noise.
    fn body(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        (0..len)
            .map(|i| match next() % 4 {
                0 => (i / 7) as u8,
                1 => b'a' + (next() % 16) as u8,
                2 => 0,
                _ => next() as u8,
            })
            .collect()
    }

    #[test]
    fn both_decoders_give_the_same_bytes_for_what_a_sharer_sends() {
        for (seed, len) in [(1, 300), (2, 4_000), (3, 30_000), (4, MAX_FRAME_LEN - 64)] {
            let plain = body(seed, len);
            let z = zstd::bulk::compress(&plain, 3).unwrap();
            let declared = zstd_header(&z).unwrap().content.unwrap() as usize;
            assert_eq!(declared, len);
            // Onto the end of bytes already there, as columns are decoded.
            let mut c = b"before".to_vec();
            assert!(decompress_declared(&z, declared, &mut c));
            let mut rust = b"before".to_vec();
            decompress_rust(&z, 0, MAX_FRAME_LEN, &mut rust).unwrap();
            assert_eq!(c, rust, "seed {seed}");
            assert_eq!(&c[6..], &plain[..]);
        }
    }

    #[test]
    fn a_damaged_frame_is_refused_by_the_c_decoder_and_leaves_the_output_as_it_was() {
        let plain = body(7, 50_000);
        let z = zstd::bulk::compress(&plain, 3).unwrap();
        let declared = zstd_header(&z).unwrap().content.unwrap() as usize;
        let mut refused = 0;
        for i in (0..z.len()).step_by(7) {
            for flip in [0x01u8, 0x80, 0x5a] {
                let mut bad = z.clone();
                bad[i] ^= flip;
                let Some(header) = zstd_header(&bad) else {
                    continue;
                };
                let size = header.content.unwrap_or(0) as usize;
                if size > MAX_FRAME_LEN || header.content.is_none() {
                    continue;
                }
                let mut c = b"kept".to_vec();
                if decompress_declared(&bad, size, &mut c) {
                    assert_eq!(c.len(), 4 + size);
                    // What C accepts, Rust decodes the same, or refuses.
                    let mut rust = b"kept".to_vec();
                    if decompress_rust(&bad, 0, MAX_FRAME_LEN, &mut rust).is_ok() {
                        assert_eq!(c, rust, "byte {i} ^ {flip:#x}");
                    }
                } else {
                    refused += 1;
                    assert_eq!(c, b"kept", "byte {i} ^ {flip:#x}: output changed");
                }
            }
        }
        assert!(refused > 0, "no damage was refused");
        // Cut short, and with bytes after the frame.
        for bad in [z[..z.len() - 5].to_vec(), [&z[..], b"tail"].concat()] {
            let mut c = Vec::new();
            assert!(!decompress_declared(&bad, declared, &mut c));
            assert!(c.is_empty());
        }
    }
}
