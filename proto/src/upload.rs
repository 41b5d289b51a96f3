//! Upload frames: a visitor adds files to the sharer's disk.
//!
//! ```text
//! visitor                                   sharer
//! Rights (0x05)                <-------     (after Welcome: what this link may do)
//! UploadBegin  (0x40) upload, size, hash, path  ------->
//!                              <-------     UploadReady (0x48) upload, offset, path, changes
//! UploadChunk  (0x41) upload, offset, hash, bytes  ---->   (in order, from `offset`)
//!                              <-------     UploadAck (0x49) upload, written
//!                              <-------     UploadDone (0x4a) upload, path, renamed
//!                              <-------     UploadRefused (0x4b) upload, code, words
//!                              <-------     UploadWindow (0x4c) bytes (after Rights)
//! UploadCancel (0x42) upload  ------->
//! ```
//!
//! The visitor keeps at most [`UPLOAD_WINDOW`] bytes of one upload sent and
//! not acknowledged (what the sharer holds for it in memory). A sharer that
//! says `UploadWindow` takes more: at most that many bytes of all the
//! session's uploads together, sent and not acknowledged (a visitor with lanes
//! needs more in flight: a lane waiting out a loss holds back the bytes
//! after it). A visitor that was not told keeps the first rule, which a
//! sharer that tells always takes ([`SESSION_UPLOAD_WINDOW`] is at least
//! `MAX_UPLOADS` times it), and an older visitor skips the frame. Each chunk
//! carries [`upload_chunk_hash`], checked before a byte is written; the whole
//! file's BLAKE3 hash, given in `UploadBegin`, is compared before it lands.
//! `offset` in `UploadReady` is where the visitor goes on: 0, or the bytes
//! the sharer already holds of that same upload (same link, path, size and
//! hash) from an earlier connection.

use crate::frame::MAX_MESSAGE_LEN;
use crate::varint::{Reader, put_bytes, put_uvarint};
use crate::{DecodeError, MAX_FRAME_LEN};

pub const FRAME_RIGHTS: u8 = 0x05;
pub const FRAME_UPLOAD_BEGIN: u8 = 0x40;
pub const FRAME_UPLOAD_CHUNK: u8 = 0x41;
pub const FRAME_UPLOAD_CANCEL: u8 = 0x42;
pub const FRAME_UPLOAD_READY: u8 = 0x48;
pub const FRAME_UPLOAD_ACK: u8 = 0x49;
pub const FRAME_UPLOAD_DONE: u8 = 0x4a;
pub const FRAME_UPLOAD_REFUSED: u8 = 0x4b;
pub const FRAME_UPLOAD_WINDOW: u8 = 0x4c;

/// Most bytes of one upload sent and not yet acknowledged, where the sharer
/// said no `UploadWindow`.
pub const UPLOAD_WINDOW: u64 = 4 << 20;
/// What this sharer says in `UploadWindow`: most bytes of all of a session's
/// uploads sent and not yet acknowledged. At 100 ms with 0.5% loss one
/// upload over lanes moved 2.0 MB/s with 4 MiB and 5.7 with 32 MiB.
pub const SESSION_UPLOAD_WINDOW: u64 = 32 << 20;
/// Longest path an upload may name, in bytes.
pub const MAX_UPLOAD_PATH: usize = 4096;
/// Largest header of an `UploadChunk` frame: type, upload id, offset, hash.
pub const UPLOAD_CHUNK_HEADER_MAX: usize = 1 + 5 + 10 + 32;
/// Most file bytes in one `UploadChunk` frame.
pub const UPLOAD_CHUNK_LEN: usize = MAX_FRAME_LEN - UPLOAD_CHUNK_HEADER_MAX;

/// An upload's number, chosen by the visitor, unique within its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UploadId(pub u32);

/// The chunk hash of an upload: BLAKE3 in key-derivation mode over the whole
/// file's hash, the offset and the bytes, so a chunk cannot be taken for
/// another file or place.
pub fn upload_chunk_hash(file_hash: &[u8; 32], offset: u64, data: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new_derive_key("linkfs 2026-11 upload chunk v1");
    h.update(file_hash);
    h.update(&offset.to_le_bytes());
    h.update(data);
    *h.finalize().as_bytes()
}

/// What a link lets its visitor do (sent right after `Welcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rights {
    /// The visitor sees the tree (false: a drop link, which only takes files).
    pub list: bool,
    /// The visitor may add files.
    pub upload: bool,
    /// Largest file it may add, in bytes (0: no cap but the disk).
    pub max_file: u64,
    /// Bytes it may still add through this link (0: no cap but the disk).
    pub bytes_left: u64,
    /// Files it may still add through this link (0: no cap).
    pub files_left: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadBegin {
    pub upload: UploadId,
    pub size: u64,
    /// BLAKE3 of the whole file.
    pub hash: [u8; 32],
    /// '/'-separated, relative to the folder the link shows.
    pub path: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadChunk<'a> {
    pub upload: UploadId,
    pub offset: u64,
    pub hash: [u8; 32],
    pub data: &'a [u8],
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadReady {
    pub upload: UploadId,
    /// Where the visitor goes on (bytes the sharer already holds).
    pub offset: u64,
    /// The path as the sharer will make it (names made safe).
    pub path: String,
    /// Each change made to the names, in words, one per line.
    pub changes: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadDone {
    pub upload: UploadId,
    /// Where it landed, relative to the folder the link shows.
    pub path: String,
    /// The name asked for was taken: it landed under another.
    pub renamed: bool,
}

/// Why an upload was refused or failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadRefusal {
    /// This link may not add files.
    NotAllowed,
    /// A name that cannot be made safe (`..`, empty, not UTF-8, too long).
    BadName,
    /// Larger than the link's largest file, or its bytes or files left.
    OverCap,
    /// The sharer's disk is full (or would be).
    DiskFull,
    /// The bytes did not match the hash: nothing was saved.
    Corrupt,
    /// Too many uploads at once on this session.
    Busy,
    /// Anything else on the sharer's side (in the words).
    Failed,
    Unknown(u8),
}

impl UploadRefusal {
    pub fn to_u8(self) -> u8 {
        match self {
            UploadRefusal::NotAllowed => 1,
            UploadRefusal::BadName => 2,
            UploadRefusal::OverCap => 3,
            UploadRefusal::DiskFull => 4,
            UploadRefusal::Corrupt => 5,
            UploadRefusal::Busy => 6,
            UploadRefusal::Failed => 7,
            UploadRefusal::Unknown(c) => c,
        }
    }

    pub fn from_u8(c: u8) -> Self {
        match c {
            1 => UploadRefusal::NotAllowed,
            2 => UploadRefusal::BadName,
            3 => UploadRefusal::OverCap,
            4 => UploadRefusal::DiskFull,
            5 => UploadRefusal::Corrupt,
            6 => UploadRefusal::Busy,
            7 => UploadRefusal::Failed,
            c => UploadRefusal::Unknown(c),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadRefused {
    pub upload: UploadId,
    pub code: UploadRefusal,
    pub message: String,
}

fn message(r: &mut Reader<'_>) -> Result<String, DecodeError> {
    let at = r.position();
    let s = r.string()?;
    if s.len() > MAX_MESSAGE_LEN {
        return Err(DecodeError::OutOfRange {
            at,
            what: "message length",
        });
    }
    Ok(s)
}

fn put_message(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(MAX_MESSAGE_LEN);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    put_bytes(out, &s.as_bytes()[..end]);
}

fn upload_path(r: &mut Reader<'_>) -> Result<Vec<u8>, DecodeError> {
    let at = r.position();
    let p = r.byte_string()?;
    if p.len() > MAX_UPLOAD_PATH {
        return Err(DecodeError::OutOfRange {
            at,
            what: "upload path length",
        });
    }
    Ok(p.to_vec())
}

fn path_text(r: &mut Reader<'_>) -> Result<String, DecodeError> {
    let at = r.position();
    let p = upload_path(r)?;
    String::from_utf8(p).map_err(|_| DecodeError::BadUtf8 { at })
}

pub(crate) fn decode_rights(r: &mut Reader<'_>) -> Result<Rights, DecodeError> {
    let at = r.position();
    let flags = r.u8()?;
    if flags & !0b11 != 0 {
        return Err(DecodeError::Invalid {
            at,
            what: "rights flags",
        });
    }
    let rights = Rights {
        list: flags & 1 != 0,
        upload: flags & 2 != 0,
        max_file: r.uvarint()?,
        bytes_left: r.uvarint()?,
        files_left: r.uvarint()?,
    };
    r.finish()?;
    Ok(rights)
}

pub(crate) fn encode_rights(x: &Rights) -> Vec<u8> {
    let mut out = vec![FRAME_RIGHTS, u8::from(x.list) | (u8::from(x.upload) << 1)];
    put_uvarint(&mut out, x.max_file);
    put_uvarint(&mut out, x.bytes_left);
    put_uvarint(&mut out, x.files_left);
    out
}

pub(crate) fn decode_begin(r: &mut Reader<'_>) -> Result<UploadBegin, DecodeError> {
    let b = UploadBegin {
        upload: UploadId(r.u32varint()?),
        size: r.uvarint()?,
        hash: r.array()?,
        path: upload_path(r)?,
    };
    r.finish()?;
    Ok(b)
}

pub(crate) fn encode_begin(b: &UploadBegin) -> Vec<u8> {
    let mut out = vec![FRAME_UPLOAD_BEGIN];
    put_uvarint(&mut out, u64::from(b.upload.0));
    put_uvarint(&mut out, b.size);
    out.extend_from_slice(&b.hash);
    put_bytes(&mut out, &b.path[..b.path.len().min(MAX_UPLOAD_PATH)]);
    out
}

pub(crate) fn decode_chunk<'a>(r: &mut Reader<'a>) -> Result<UploadChunk<'a>, DecodeError> {
    Ok(UploadChunk {
        upload: UploadId(r.u32varint()?),
        offset: r.uvarint()?,
        hash: r.array()?,
        data: r.rest(),
    })
}

/// Writes an `UploadChunk` frame into `out` (cleared first).
pub fn encode_upload_chunk_into(out: &mut Vec<u8>, c: &UploadChunk<'_>) {
    out.clear();
    out.push(FRAME_UPLOAD_CHUNK);
    put_uvarint(out, u64::from(c.upload.0));
    put_uvarint(out, c.offset);
    out.extend_from_slice(&c.hash);
    out.extend_from_slice(c.data);
}

pub(crate) fn decode_ready(r: &mut Reader<'_>) -> Result<UploadReady, DecodeError> {
    let x = UploadReady {
        upload: UploadId(r.u32varint()?),
        offset: r.uvarint()?,
        path: path_text(r)?,
        changes: message(r)?,
    };
    r.finish()?;
    Ok(x)
}

pub(crate) fn encode_ready(x: &UploadReady) -> Vec<u8> {
    let mut out = vec![FRAME_UPLOAD_READY];
    put_uvarint(&mut out, u64::from(x.upload.0));
    put_uvarint(&mut out, x.offset);
    put_bytes(
        &mut out,
        &x.path.as_bytes()[..x.path.len().min(MAX_UPLOAD_PATH)],
    );
    put_message(&mut out, &x.changes);
    out
}

pub(crate) fn decode_window(r: &mut Reader<'_>) -> Result<u64, DecodeError> {
    let bytes = r.uvarint()?;
    r.finish()?;
    Ok(bytes)
}

pub(crate) fn encode_window(bytes: u64) -> Vec<u8> {
    let mut out = vec![FRAME_UPLOAD_WINDOW];
    put_uvarint(&mut out, bytes);
    out
}

pub(crate) fn decode_ack(r: &mut Reader<'_>) -> Result<(UploadId, u64), DecodeError> {
    let x = (UploadId(r.u32varint()?), r.uvarint()?);
    r.finish()?;
    Ok(x)
}

pub(crate) fn encode_ack(upload: UploadId, written: u64) -> Vec<u8> {
    let mut out = vec![FRAME_UPLOAD_ACK];
    put_uvarint(&mut out, u64::from(upload.0));
    put_uvarint(&mut out, written);
    out
}

pub(crate) fn decode_done(r: &mut Reader<'_>) -> Result<UploadDone, DecodeError> {
    let upload = UploadId(r.u32varint()?);
    let path = path_text(r)?;
    let at = r.position();
    let renamed = match r.u8()? {
        0 => false,
        1 => true,
        _ => {
            return Err(DecodeError::Invalid {
                at,
                what: "renamed flag",
            });
        }
    };
    r.finish()?;
    Ok(UploadDone {
        upload,
        path,
        renamed,
    })
}

pub(crate) fn encode_done(x: &UploadDone) -> Vec<u8> {
    let mut out = vec![FRAME_UPLOAD_DONE];
    put_uvarint(&mut out, u64::from(x.upload.0));
    put_bytes(
        &mut out,
        &x.path.as_bytes()[..x.path.len().min(MAX_UPLOAD_PATH)],
    );
    out.push(u8::from(x.renamed));
    out
}

pub(crate) fn decode_refused(r: &mut Reader<'_>) -> Result<UploadRefused, DecodeError> {
    let x = UploadRefused {
        upload: UploadId(r.u32varint()?),
        code: UploadRefusal::from_u8(r.u8()?),
        message: message(r)?,
    };
    r.finish()?;
    Ok(x)
}

pub(crate) fn encode_refused(x: &UploadRefused) -> Vec<u8> {
    let mut out = vec![FRAME_UPLOAD_REFUSED];
    put_uvarint(&mut out, u64::from(x.upload.0));
    out.push(x.code.to_u8());
    put_message(&mut out, &x.message);
    out
}

pub(crate) fn decode_cancel(r: &mut Reader<'_>) -> Result<UploadId, DecodeError> {
    let x = UploadId(r.u32varint()?);
    r.finish()?;
    Ok(x)
}

pub(crate) fn encode_cancel(upload: UploadId) -> Vec<u8> {
    let mut out = vec![FRAME_UPLOAD_CANCEL];
    put_uvarint(&mut out, u64::from(upload.0));
    out
}
