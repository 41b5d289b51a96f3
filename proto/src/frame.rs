//! Data-channel frames, named by direction.
//!
//! Every frame is one data-channel message that starts with a type byte. Types
//! this version does not know decode as `Unknown` so that a newer peer can add
//! frames an older one skips.

use crate::batch::{BatchHeader, BatchReader};
use crate::ids::{EntryId, Epoch, Generation, ReadId, Seq};
use crate::varint::{Reader, put_bytes, put_uvarint};
use crate::*;

/// The chunk hash: BLAKE3 in key-derivation mode over where the bytes belong and
/// the bytes, so a chunk cannot be accepted for another entry, version or offset.
pub fn chunk_hash(entry: EntryId, generation: Generation, offset: u64, data: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new_derive_key("linkfs 2026-11 read chunk v1");
    h.update(&entry.0.to_le_bytes());
    h.update(&generation.0.to_le_bytes());
    h.update(&offset.to_le_bytes());
    h.update(data);
    *h.finalize().as_bytes()
}

/// First frame from the receiver: what it speaks and what it already holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub version: u16,
    /// The epoch and next `Seq` of an index the receiver already holds.
    pub resume: Option<(Epoch, Seq)>,
}

/// The sender's answer to `Hello`: where the index stream starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Welcome {
    pub version: u16,
    pub epoch: Epoch,
    /// `Seq(0)` means a fresh snapshot: the receiver drops what it held.
    pub start: Seq,
    /// Largest read a request may ask for, in bytes.
    pub max_read: u32,
    /// Most read requests the sender queues for this receiver at once.
    pub max_reads_in_flight: u32,
}

/// A range of one entry's bytes, by id and generation, never by path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequest {
    pub read: ReadId,
    pub entry: EntryId,
    pub generation: Generation,
    pub offset: u64,
    pub len: u32,
}

/// Up to [`CHUNK_LEN`] bytes of a read, with the hash the receiver checks before use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadChunk<'a> {
    pub read: ReadId,
    pub offset: u64,
    pub hash: [u8; 32],
    pub data: &'a [u8],
}

/// Why a read cannot be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReadErrorCode {
    /// The id is not in the sharer's index (or was removed).
    NoSuchEntry,
    /// The entry is a directory or a symlink.
    NotAFile,
    /// The file changed (or the request named an old generation).
    Changed,
    /// The sharer could not read the file.
    Io,
    /// Too many reads in flight; retry after one completes.
    Busy,
    /// The range is past the end of the file or longer than `max_read`.
    BadRange,
    Other(u8),
}

impl ReadErrorCode {
    pub fn to_u8(self) -> u8 {
        match self {
            ReadErrorCode::NoSuchEntry => 1,
            ReadErrorCode::NotAFile => 2,
            ReadErrorCode::Changed => 3,
            ReadErrorCode::Io => 4,
            ReadErrorCode::Busy => 5,
            ReadErrorCode::BadRange => 6,
            ReadErrorCode::Other(c) => c,
        }
    }

    pub fn from_u8(c: u8) -> ReadErrorCode {
        match c {
            1 => ReadErrorCode::NoSuchEntry,
            2 => ReadErrorCode::NotAFile,
            3 => ReadErrorCode::Changed,
            4 => ReadErrorCode::Io,
            5 => ReadErrorCode::Busy,
            6 => ReadErrorCode::BadRange,
            c => ReadErrorCode::Other(c),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    pub read: ReadId,
    pub code: ReadErrorCode,
    pub message: String,
}

/// Why a side ends the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GoodbyeCode {
    /// The sharer stopped sharing.
    ShuttingDown,
    /// The other side speaks a protocol version this one does not.
    VersionMismatch,
    /// The other side sent something that is not valid.
    ProtocolError,
    /// The sharer withdrew the link this visitor came by.
    LinkWithdrawn,
    /// The link this visitor came by has expired.
    LinkExpired,
    /// The sharer disconnected this visitor.
    SentAway,
    /// The password given for this link is wrong.
    WrongPassword,
    /// Too many wrong passwords for this link lately: the message says how long to wait.
    TooManyTries,
    Other(u8),
}

impl GoodbyeCode {
    pub fn to_u8(self) -> u8 {
        match self {
            GoodbyeCode::ShuttingDown => 1,
            GoodbyeCode::VersionMismatch => 2,
            GoodbyeCode::ProtocolError => 3,
            GoodbyeCode::LinkWithdrawn => 4,
            GoodbyeCode::LinkExpired => 5,
            GoodbyeCode::SentAway => 6,
            GoodbyeCode::WrongPassword => 7,
            GoodbyeCode::TooManyTries => 8,
            GoodbyeCode::Other(c) => c,
        }
    }

    pub fn from_u8(c: u8) -> GoodbyeCode {
        match c {
            1 => GoodbyeCode::ShuttingDown,
            2 => GoodbyeCode::VersionMismatch,
            3 => GoodbyeCode::ProtocolError,
            4 => GoodbyeCode::LinkWithdrawn,
            5 => GoodbyeCode::LinkExpired,
            6 => GoodbyeCode::SentAway,
            7 => GoodbyeCode::WrongPassword,
            8 => GoodbyeCode::TooManyTries,
            c => GoodbyeCode::Other(c),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Goodbye {
    pub code: GoodbyeCode,
    pub message: String,
}

/// Longest message text a frame may carry (error and goodbye messages).
pub const MAX_MESSAGE_LEN: usize = 1024;

/// Frames the sharer sends.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SenderToReceiver<'a> {
    Welcome(Welcome),
    /// The whole frame, to persist as it is; read its operations with [`BatchReader`].
    IndexBatch {
        header: BatchHeader,
        frame: &'a [u8],
    },
    ReadChunk(ReadChunk<'a>),
    ReadError(ReadError),
    Goodbye(Goodbye),
    /// This link asks for a password before anything of the share is sent.
    PasswordNeeded,
    /// What this link lets its visitor do (after `Welcome`).
    Rights(Rights),
    UploadReady(UploadReady),
    /// Bytes of an upload written so far (the visitor's window moves on).
    UploadAck {
        upload: UploadId,
        written: u64,
    },
    UploadDone(UploadDone),
    UploadRefused(UploadRefused),
    /// Most bytes of all this session's uploads sent and not yet
    /// acknowledged (after `Rights`; without it, `UPLOAD_WINDOW` per upload).
    UploadWindow {
        bytes: u64,
    },
    /// These folders are whole once the log is applied up to a position
    /// ([`crate::listed`]).
    FoldersListed(crate::FoldersListed),
    Unknown {
        kind: u8,
    },
}

/// Frames the receiver sends.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReceiverToSender<'a> {
    Hello(Hello),
    /// Every operation before `next` is applied (and persisted, where the receiver persists).
    Ack {
        next: Seq,
    },
    Read(ReadRequest),
    CancelRead {
        read: ReadId,
    },
    Goodbye(Goodbye),
    /// The link's password (at most [`MAX_MESSAGE_LEN`] bytes).
    Password(String),
    UploadBegin(UploadBegin),
    UploadChunk(UploadChunk<'a>),
    UploadCancel {
        upload: UploadId,
    },
    Unknown {
        kind: u8,
    },
}

fn check_len(frame: &[u8]) -> Result<(), DecodeError> {
    if frame.is_empty() {
        return Err(DecodeError::Empty);
    }
    if frame.len() > MAX_FRAME_LEN {
        return Err(DecodeError::TooLarge {
            len: frame.len(),
            max: MAX_FRAME_LEN,
        });
    }
    Ok(())
}

fn bounded_message(r: &mut Reader<'_>) -> Result<String, DecodeError> {
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

fn u16_varint(r: &mut Reader<'_>) -> Result<u16, DecodeError> {
    let at = r.position();
    u16::try_from(r.uvarint()?).map_err(|_| DecodeError::OutOfRange {
        at,
        what: "16-bit value",
    })
}

fn decode_goodbye(r: &mut Reader<'_>) -> Result<Goodbye, DecodeError> {
    let code = GoodbyeCode::from_u8(r.u8()?);
    let message = bounded_message(r)?;
    r.finish()?;
    Ok(Goodbye { code, message })
}

fn encode_goodbye(g: &Goodbye) -> Vec<u8> {
    let mut out = vec![FRAME_GOODBYE, g.code.to_u8()];
    put_message(&mut out, &g.message);
    out
}

impl<'a> SenderToReceiver<'a> {
    pub fn decode(frame: &'a [u8]) -> Result<Self, DecodeError> {
        check_len(frame)?;
        let mut r = Reader::new(frame);
        let kind = r.u8()?;
        Ok(match kind {
            FRAME_WELCOME => {
                let version = u16_varint(&mut r)?;
                let epoch = Epoch(u64::from_le_bytes(r.array()?));
                let start = Seq(r.uvarint()?);
                let max_read = r.u32varint()?;
                let max_reads_in_flight = r.u32varint()?;
                r.finish()?;
                SenderToReceiver::Welcome(Welcome {
                    version,
                    epoch,
                    start,
                    max_read,
                    max_reads_in_flight,
                })
            }
            FRAME_INDEX_BATCH => SenderToReceiver::IndexBatch {
                header: BatchReader::new(frame)?.header(),
                frame,
            },
            FRAME_READ_CHUNK => {
                let read = ReadId(r.u32varint()?);
                let offset = r.uvarint()?;
                let hash = r.array()?;
                let data = r.rest();
                SenderToReceiver::ReadChunk(ReadChunk {
                    read,
                    offset,
                    hash,
                    data,
                })
            }
            FRAME_READ_ERROR => {
                let read = ReadId(r.u32varint()?);
                let code = ReadErrorCode::from_u8(r.u8()?);
                let message = bounded_message(&mut r)?;
                r.finish()?;
                SenderToReceiver::ReadError(ReadError {
                    read,
                    code,
                    message,
                })
            }
            FRAME_GOODBYE => SenderToReceiver::Goodbye(decode_goodbye(&mut r)?),
            FRAME_PASSWORD_NEEDED => {
                r.finish()?;
                SenderToReceiver::PasswordNeeded
            }
            FRAME_RIGHTS => SenderToReceiver::Rights(upload::decode_rights(&mut r)?),
            FRAME_UPLOAD_READY => SenderToReceiver::UploadReady(upload::decode_ready(&mut r)?),
            FRAME_UPLOAD_ACK => {
                let (upload, written) = upload::decode_ack(&mut r)?;
                SenderToReceiver::UploadAck { upload, written }
            }
            FRAME_UPLOAD_DONE => SenderToReceiver::UploadDone(upload::decode_done(&mut r)?),
            FRAME_UPLOAD_REFUSED => {
                SenderToReceiver::UploadRefused(upload::decode_refused(&mut r)?)
            }
            FRAME_UPLOAD_WINDOW => SenderToReceiver::UploadWindow {
                bytes: upload::decode_window(&mut r)?,
            },
            crate::FRAME_FOLDERS_LISTED => {
                SenderToReceiver::FoldersListed(crate::listed::decode_folders_listed(&mut r)?)
            }
            FRAME_HELLO | FRAME_ACK | FRAME_READ | FRAME_CANCEL_READ | FRAME_PASSWORD
            | FRAME_UPLOAD_BEGIN | FRAME_UPLOAD_CHUNK | FRAME_UPLOAD_CANCEL => {
                return Err(DecodeError::WrongDirection { kind });
            }
            kind => SenderToReceiver::Unknown { kind },
        })
    }

    /// Encodes the frame. An `IndexBatch` is already encoded: its frame is copied.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            SenderToReceiver::Welcome(w) => {
                let mut out = vec![FRAME_WELCOME];
                put_uvarint(&mut out, u64::from(w.version));
                out.extend_from_slice(&w.epoch.0.to_le_bytes());
                put_uvarint(&mut out, w.start.0);
                put_uvarint(&mut out, u64::from(w.max_read));
                put_uvarint(&mut out, u64::from(w.max_reads_in_flight));
                out
            }
            SenderToReceiver::IndexBatch { frame, .. } => frame.to_vec(),
            SenderToReceiver::ReadChunk(c) => {
                let mut out = Vec::with_capacity(READ_CHUNK_HEADER_MAX + c.data.len());
                encode_chunk_into(&mut out, c);
                out
            }
            SenderToReceiver::ReadError(e) => {
                let mut out = vec![FRAME_READ_ERROR];
                put_uvarint(&mut out, u64::from(e.read.0));
                out.push(e.code.to_u8());
                put_message(&mut out, &e.message);
                out
            }
            SenderToReceiver::Goodbye(g) => encode_goodbye(g),
            SenderToReceiver::PasswordNeeded => vec![FRAME_PASSWORD_NEEDED],
            SenderToReceiver::Rights(x) => upload::encode_rights(x),
            SenderToReceiver::UploadReady(x) => upload::encode_ready(x),
            SenderToReceiver::UploadAck { upload, written } => {
                upload::encode_ack(*upload, *written)
            }
            SenderToReceiver::UploadDone(x) => upload::encode_done(x),
            SenderToReceiver::UploadRefused(x) => upload::encode_refused(x),
            SenderToReceiver::UploadWindow { bytes } => upload::encode_window(*bytes),
            SenderToReceiver::FoldersListed(l) => {
                // One frame when it fits (the sender cuts longer lists itself).
                crate::encode_folders_listed(l.upto, &l.folders)
                    .into_iter()
                    .flatten()
                    .collect()
            }
            SenderToReceiver::Unknown { kind } => vec![*kind],
        }
    }
}

/// Largest header of a `ReadChunk` frame: type, read id, offset, hash.
pub const READ_CHUNK_HEADER_MAX: usize = 1 + 5 + 10 + 32;

/// Most file bytes in one `ReadChunk` frame: the frame cap less its header.
pub const CHUNK_LEN: usize = crate::MAX_FRAME_LEN - READ_CHUNK_HEADER_MAX;

/// Writes a `ReadChunk` frame into `out` (cleared first).
pub fn encode_chunk_into(out: &mut Vec<u8>, c: &ReadChunk<'_>) {
    out.clear();
    out.push(FRAME_READ_CHUNK);
    put_uvarint(out, u64::from(c.read.0));
    put_uvarint(out, c.offset);
    out.extend_from_slice(&c.hash);
    out.extend_from_slice(c.data);
}

impl<'a> ReceiverToSender<'a> {
    pub fn decode(frame: &'a [u8]) -> Result<Self, DecodeError> {
        check_len(frame)?;
        let mut r = Reader::new(frame);
        let kind = r.u8()?;
        let msg = match kind {
            FRAME_HELLO => {
                let version = u16_varint(&mut r)?;
                let has_at = r.position();
                let resume = match r.u8()? {
                    0 => None,
                    1 => {
                        let epoch = Epoch(u64::from_le_bytes(r.array()?));
                        Some((epoch, Seq(r.uvarint()?)))
                    }
                    _ => {
                        return Err(DecodeError::Invalid {
                            at: has_at,
                            what: "resume flag",
                        });
                    }
                };
                ReceiverToSender::Hello(Hello { version, resume })
            }
            FRAME_ACK => ReceiverToSender::Ack {
                next: Seq(r.uvarint()?),
            },
            FRAME_READ => ReceiverToSender::Read(ReadRequest {
                read: ReadId(r.u32varint()?),
                entry: EntryId(r.u32varint()?),
                generation: Generation(r.u32varint()?),
                offset: r.uvarint()?,
                len: r.u32varint()?,
            }),
            FRAME_CANCEL_READ => ReceiverToSender::CancelRead {
                read: ReadId(r.u32varint()?),
            },
            FRAME_GOODBYE => return Ok(ReceiverToSender::Goodbye(decode_goodbye(&mut r)?)),
            FRAME_PASSWORD => ReceiverToSender::Password(bounded_message(&mut r)?),
            FRAME_UPLOAD_BEGIN => {
                return Ok(ReceiverToSender::UploadBegin(upload::decode_begin(&mut r)?));
            }
            FRAME_UPLOAD_CHUNK => {
                return Ok(ReceiverToSender::UploadChunk(upload::decode_chunk(&mut r)?));
            }
            FRAME_UPLOAD_CANCEL => {
                return Ok(ReceiverToSender::UploadCancel {
                    upload: upload::decode_cancel(&mut r)?,
                });
            }
            FRAME_WELCOME
            | FRAME_INDEX_BATCH
            | FRAME_READ_CHUNK
            | FRAME_READ_ERROR
            | FRAME_PASSWORD_NEEDED
            | FRAME_RIGHTS
            | FRAME_UPLOAD_READY
            | FRAME_UPLOAD_ACK
            | FRAME_UPLOAD_DONE
            | FRAME_UPLOAD_REFUSED
            | FRAME_UPLOAD_WINDOW
            | crate::FRAME_FOLDERS_LISTED => {
                return Err(DecodeError::WrongDirection { kind });
            }
            kind => return Ok(ReceiverToSender::Unknown { kind }),
        };
        r.finish()?;
        Ok(msg)
    }

    pub fn encode(&self) -> Vec<u8> {
        match self {
            ReceiverToSender::Hello(h) => {
                let mut out = vec![FRAME_HELLO];
                put_uvarint(&mut out, u64::from(h.version));
                match h.resume {
                    None => out.push(0),
                    Some((epoch, next)) => {
                        out.push(1);
                        out.extend_from_slice(&epoch.0.to_le_bytes());
                        put_uvarint(&mut out, next.0);
                    }
                }
                out
            }
            ReceiverToSender::Ack { next } => {
                let mut out = vec![FRAME_ACK];
                put_uvarint(&mut out, next.0);
                out
            }
            ReceiverToSender::Read(q) => {
                let mut out = vec![FRAME_READ];
                put_uvarint(&mut out, u64::from(q.read.0));
                put_uvarint(&mut out, u64::from(q.entry.0));
                put_uvarint(&mut out, u64::from(q.generation.0));
                put_uvarint(&mut out, q.offset);
                put_uvarint(&mut out, u64::from(q.len));
                out
            }
            ReceiverToSender::CancelRead { read } => {
                let mut out = vec![FRAME_CANCEL_READ];
                put_uvarint(&mut out, u64::from(read.0));
                out
            }
            ReceiverToSender::Goodbye(g) => encode_goodbye(g),
            ReceiverToSender::Password(p) => {
                let mut out = vec![FRAME_PASSWORD];
                put_message(&mut out, p);
                out
            }
            ReceiverToSender::UploadBegin(b) => upload::encode_begin(b),
            ReceiverToSender::UploadChunk(c) => {
                let mut out = Vec::with_capacity(upload::UPLOAD_CHUNK_HEADER_MAX + c.data.len());
                upload::encode_upload_chunk_into(&mut out, c);
                out
            }
            ReceiverToSender::UploadCancel { upload } => upload::encode_cancel(*upload),
            ReceiverToSender::Unknown { kind } => vec![*kind],
        }
    }
}
