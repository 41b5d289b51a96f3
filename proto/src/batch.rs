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
//! The span: a batch covers the log positions `first .. first + span`. Usually
//! every position is one operation (span = n_ops, not sent). Once the share
//! changes, positions whose operation was superseded by a later one are skipped
//! (span > n_ops), and an entry's parents the receiver has not been sent yet go
//! out ahead of it (span < n_ops is possible); the receiver's next position is
//! `first + span` either way.
//!
//! The operations (not the header) are compressed with zstd when that makes the
//! frame smaller: on real trees (`/usr`, a home folder) this takes a batch from
//! about 25 to about 9 bytes per entry. The encoder fills a batch up to its cap
//! *before* compression, so a compressed frame is never over the cap, and a
//! decoder refuses a body that would decompress to more than [`MAX_FRAME_LEN`].
//! Only sharers compress (feature `zstd-encode`, the C library); decoding is
//! pure Rust and works in the browser.

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
/// Smallest byte cap a batch may be given: room for the largest possible operation.
pub const MIN_BATCH_CAP: usize =
    HEADER_MAX + 2 * 10 + 10 + MAX_NAME_LEN + 10 + 10 + 10 + 10 + 10 + MAX_TARGET_LEN + 16;

const KIND_REMOVE: u8 = 3;
const HEAD_ID_EXPLICIT: u8 = 1 << 2;
const HEAD_GENERATION: u8 = 1 << 3;
const MODE_EXPLICIT: u8 = 15;
const FLAG_SNAPSHOT_COMPLETE: u8 = 1;
const FLAG_ZSTD: u8 = 2;
const FLAG_SPAN: u8 = 4;
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

/// Builds one batch, refusing operations once the frame would pass its byte cap.
#[derive(Debug)]
pub struct BatchEncoder {
    cap: usize,
    first: Seq,
    first_id: u32,
    base_mtime: i64,
    modes: Vec<u32>,
    body: Vec<u8>,
    scratch: Vec<u8>,
    n_ops: u32,
    prev_id: i64,
    prev_parent: i64,
    prev_name: Vec<u8>,
    prev_mtime: i64,
}

impl BatchEncoder {
    /// A batch whose first operation will have `first`; `cap` bounds the whole frame
    /// (clamped to `MIN_BATCH_CAP..=MAX_FRAME_LEN`).
    pub fn new(first: Seq, cap: usize) -> Self {
        BatchEncoder {
            cap: cap.clamp(MIN_BATCH_CAP, MAX_FRAME_LEN),
            first,
            first_id: 0,
            base_mtime: 0,
            modes: Vec::new(),
            body: Vec::with_capacity(cap.min(MAX_FRAME_LEN)),
            scratch: Vec::with_capacity(64),
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
        HEADER_MAX + self.body.len()
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
        if HEADER_MAX + self.body.len() + self.scratch.len() > self.cap {
            self.scratch.clear();
            return false;
        }
        self.body.extend_from_slice(&self.scratch);
        self.scratch.clear();
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
        let s = &mut self.scratch;
        s.push(head);
        if let Some(d) = id_delta {
            put_ivarint(s, d);
        }
        put_ivarint(s, i64::from(e.parent.0) - self.prev_parent);
        put_uvarint(s, shared as u64);
        put_uvarint(s, (name.len() - shared) as u64);
        s.extend_from_slice(&name[shared..]);
        if e.kind == EntryKind::File {
            put_uvarint(s, e.size);
        }
        put_ivarint(s, e.mtime.wrapping_sub(self.prev_mtime));
        if e.generation.0 != 0 {
            put_uvarint(s, u64::from(e.generation.0));
        }
        if mode_idx == MODE_EXPLICIT {
            put_uvarint(s, u64::from(mode));
        }
        if e.kind == EntryKind::Symlink {
            put_uvarint(s, target.len() as u64);
            s.extend_from_slice(target);
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
        self.scratch.push(head);
        if let Some(d) = id_delta {
            put_ivarint(&mut self.scratch, d);
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
        let (body, compressed) = compress_body(self.body);
        let mut out = Vec::with_capacity(HEADER_MAX + body.len());
        out.push(FRAME_INDEX_BATCH);
        put_uvarint(&mut out, self.first.0);
        put_uvarint(&mut out, known);
        let mut flags = 0;
        if snapshot_complete {
            flags |= FLAG_SNAPSHOT_COMPLETE;
        }
        if compressed {
            flags |= FLAG_ZSTD;
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
#[cfg(feature = "zstd-encode")]
fn compress_body(body: Vec<u8>) -> (Vec<u8>, bool) {
    if body.len() >= COMPRESS_MIN
        && let Ok(z) = zstd::bulk::compress(&body, ZSTD_LEVEL)
        && z.len() < body.len()
    {
        return (z, true);
    }
    (body, false)
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

/// Decompresses a batch body, refusing anything over [`MAX_FRAME_LEN`] bytes.
///
/// The frame header is checked first: a decoder keeps a whole window of output
/// before it hands any out, so a small frame that declares a 1 GiB window (and
/// fills it with run-length blocks) would make it allocate gigabytes before
/// the size check below could see anything. A window or content size over the
/// cap is refused before decoding starts.
fn decompress_body(z: &[u8], at: usize) -> Result<Vec<u8>, DecodeError> {
    let bad = DecodeError::Invalid {
        at,
        what: "compressed batch body",
    };
    let declared = zstd_header(z).ok_or(bad.clone())?;
    let too_large = declared.window.max(declared.content.unwrap_or(0));
    if too_large > MAX_FRAME_LEN as u64 {
        return Err(DecodeError::TooLarge {
            len: usize::try_from(too_large).unwrap_or(usize::MAX),
            max: MAX_FRAME_LEN,
        });
    }
    let mut decoder = ruzstd::decoding::StreamingDecoder::new(z).map_err(|_| bad.clone())?;
    let mut out = Vec::with_capacity(z.len() * 3);
    (&mut decoder)
        .take(MAX_FRAME_LEN as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|_| bad)?;
    if out.len() > MAX_FRAME_LEN {
        return Err(DecodeError::TooLarge {
            len: out.len(),
            max: MAX_FRAME_LEN,
        });
    }
    Ok(out)
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Reads the operations of one batch frame without allocating per operation
/// (a compressed body is decompressed once, into one buffer).
#[derive(Debug)]
pub struct BatchReader<'a> {
    body: Cow<'a, [u8]>,
    pos: usize,
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
        if flags & !(FLAG_SNAPSHOT_COMPLETE | FLAG_ZSTD | FLAG_SPAN) != 0 {
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
        let rest = r.rest();
        let body = if flags & FLAG_ZSTD != 0 {
            Cow::Owned(decompress_body(rest, body_at)?)
        } else {
            Cow::Borrowed(rest)
        };
        // Every operation takes at least one byte: a count beyond that is a lie.
        if n_ops > body.len() as u64 {
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
            pos: 0,
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

    /// Whether the operations travelled zstd-compressed.
    pub fn compressed(&self) -> bool {
        matches!(self.body, Cow::Owned(_))
    }

    /// The next operation, or `None` after the last one (when the frame must be used up).
    pub fn next_op(&mut self) -> Result<Option<OpView<'_>>, DecodeError> {
        let body: &[u8] = &self.body;
        let mut r = Reader::new(&body[self.pos..]);
        let base = self.body_at + self.pos;
        let at = |r: &Reader<'_>| base + r.position();
        if self.left == 0 {
            return r.finish().map(|()| None).map_err(|e| shift(e, base));
        }
        self.left -= 1;
        let head_at = at(&r);
        let head = r.u8().map_err(|e| shift(e, base))?;
        let mut id = self.prev_id + 1;
        if head & HEAD_ID_EXPLICIT != 0 {
            id = id.wrapping_add(r.ivarint().map_err(|e| shift(e, base))?);
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
            self.pos += r.position();
            return Ok(Some(OpView::Remove(id)));
        }
        // kind_bits is 0..=2 here.
        let kind = EntryKind::from_bits(kind_bits).ok_or(DecodeError::Invalid {
            at: head_at,
            what: "entry kind",
        })?;
        let e = |x: DecodeError| shift(x, base);
        let parent_at = at(&r);
        let parent = entry_id(
            self.prev_parent.wrapping_add(r.ivarint().map_err(e)?),
            parent_at,
        )?;
        self.prev_parent = i64::from(parent.0);
        let shared_at = at(&r);
        let shared = r.uvarint().map_err(e)?;
        if shared > self.name.len() as u64 {
            return Err(DecodeError::OutOfRange {
                at: shared_at,
                what: "shared name prefix",
            });
        }
        let suffix = r.byte_string().map_err(e)?;
        let name_len = shared as usize + suffix.len();
        if name_len > MAX_NAME_LEN {
            return Err(DecodeError::OutOfRange {
                at: shared_at,
                what: "name length",
            });
        }
        self.name.truncate(shared as usize);
        self.name.extend_from_slice(suffix);
        let mut size = if kind == EntryKind::File {
            r.uvarint().map_err(e)?
        } else {
            0
        };
        let mtime = self.prev_mtime.wrapping_add(r.ivarint().map_err(e)?);
        self.prev_mtime = mtime;
        let generation = if head & HEAD_GENERATION != 0 {
            Generation(r.u32varint().map_err(e)?)
        } else {
            Generation(0)
        };
        let mode_idx = head >> 4;
        let mode = if mode_idx == MODE_EXPLICIT {
            read_mode(&mut r).map_err(e)?
        } else {
            *self
                .modes
                .get(mode_idx as usize)
                .ok_or(DecodeError::OutOfRange {
                    at: head_at,
                    what: "mode table index",
                })?
        };
        let target_range = if kind == EntryKind::Symlink {
            let t_at = at(&r);
            let t = r.byte_string().map_err(e)?;
            if t.len() > MAX_TARGET_LEN {
                return Err(DecodeError::OutOfRange {
                    at: t_at,
                    what: "symlink target length",
                });
            }
            size = t.len() as u64;
            let end = self.pos + r.position();
            Some(end - t.len()..end)
        } else {
            None
        };
        self.pos += r.position();
        let body: &[u8] = &self.body;
        let target: &[u8] = match target_range {
            Some(range) => &body[range],
            None => &[],
        };
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
