//! The sharer's side of a visitor's uploads, sans IO: what the visitor sent
//! is checked here (the link's rights, names made safe, each chunk's hash, the
//! order of bytes, the window, how many at once), and what is left for the
//! shell is a queue of [`UploadIo`] to carry out in order (the landing:
//! begin, write, finish, cancel) and to answer with [`UploadResult`].
//!
//! Chunks may come out of order: a visitor with lanes (more connections,
//! `crate::lanes`) spreads one upload's chunks over them. A chunk past the
//! next byte is checked against its hash and held until the bytes before it
//! came; the shell is still asked to write each upload's bytes in order, so
//! its part file is always a prefix of the file (what a resume goes on from).
//!
//! Memory: at most [`SESSION_UPLOAD_WINDOW`] bytes of all of a session's
//! uploads sent and not yet written (held here out of order or queued for the
//! shell), said to the visitor after its rights (`UploadWindow`). A visitor
//! not told keeps [`UPLOAD_WINDOW`] per upload, which is within it (at most
//! [`MAX_UPLOADS`] uploads at once). A visitor that sends past the window, or
//! the same bytes twice, ends its session.
//!
//! The shell answers every step it is handed, in order. An upload that was
//! cancelled or refused here may still have steps at the shell (its part
//! open there until the `Cancel` is carried out): it is *closing* until every
//! one is answered. Its id cannot be begun again meanwhile (the shell's
//! answers would be taken for the new one's, and the old part left open,
//! uncounted), and at most [`MAX_CLOSING`] uploads close at once, so the
//! parts a visitor holds open at the shell stay bounded by
//! `MAX_UPLOADS + MAX_CLOSING` however fast it begins and cancels.

use std::collections::{BTreeMap, VecDeque};

use linkfs_proto::{
    Rights, SESSION_UPLOAD_WINDOW, SenderToReceiver, UploadBegin, UploadChunk, UploadDone,
    UploadId, UploadReady, UploadRefusal, UploadRefused, upload_chunk_hash,
};

use crate::upload_name::{NameRules, SafePath, safe_path_with};

/// Most uploads one session has open at once.
pub const MAX_UPLOADS: usize = 4;

/// Most uploads of one session cancelled or refused here whose steps the
/// shell has not all answered yet (see the module docs).
pub const MAX_CLOSING: usize = 2 * MAX_UPLOADS;

/// Most chunks of a session's uploads held here or handed to the shell and
/// not yet written: the window bounds their bytes, this their number (a
/// visitor's chunks are 60 KiB but the last of a file or of its window, so
/// 32 MiB is about 550 of them; 1-byte chunks would be 33 million).
pub const MAX_PIECES: usize = 2048;

/// Something for the shell to do about an upload, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UploadIo {
    /// Open (or find again) the upload's part; answer `Ready` or `Refused`.
    Begin {
        upload: UploadId,
        path: SafePath,
        size: u64,
        hash: [u8; 32],
    },
    /// Write these bytes at `offset`; answer `Written` or `Refused`.
    Write {
        upload: UploadId,
        offset: u64,
        data: Vec<u8>,
    },
    /// Every byte is written: check, sync and land it; answer `Landed` or `Refused`.
    Finish { upload: UploadId },
    /// The visitor gave up: remove its part.
    Cancel { upload: UploadId },
}

/// The shell's answer to an [`UploadIo`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UploadResult {
    /// The part is open; the visitor goes on from `offset`.
    Ready { offset: u64 },
    /// Bytes up to `end` are written.
    Written { end: u64 },
    /// It landed at `path` (relative to the link's folder).
    Landed { path: String, renamed: bool },
    Refused {
        code: UploadRefusal,
        message: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the shell to open the part.
    Opening,
    /// Taking bytes.
    Open,
    /// Every byte is in; waiting for the landing.
    Finishing,
}

#[derive(Debug)]
struct Incoming {
    path: SafePath,
    size: u64,
    hash: [u8; 32],
    phase: Phase,
    /// The next byte to be written in order.
    next: u64,
    /// Chunks past `next`, checked, by offset: (end, bytes). They lie within
    /// the window, so they hold at most [`UPLOAD_WINDOW`] bytes.
    ahead: BTreeMap<u64, (u64, Vec<u8>)>,
    /// The end of the furthest bytes that came (`next`, or past it).
    furthest: u64,
    /// Bytes the shell has written.
    written: u64,
    /// Writes handed to the shell and not answered yet.
    writing: usize,
}

/// Whether `offset..end` overlaps a chunk held ahead.
fn overlaps(ahead: &BTreeMap<u64, (u64, Vec<u8>)>, offset: u64, end: u64) -> bool {
    let before = ahead
        .range(..=offset)
        .next_back()
        .is_some_and(|(_, (e, _))| *e > offset);
    let after = ahead.range(offset..end).next().is_some();
    before || after
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct UploadsIn {
    rights: Rights,
    names: NameRules,
    uploads: BTreeMap<UploadId, Incoming>,
    io: VecDeque<UploadIo>,
    /// Steps of each upload queued in `io` or handed to the shell and not
    /// answered yet (an id without steps is absent).
    steps: BTreeMap<UploadId, usize>,
    /// Uploads whose written bytes moved since the last ack (one ack frame
    /// each, however many writes: the control queue stays short).
    acks_due: std::collections::BTreeSet<UploadId>,
}

/// What a frame did: frames to send back, or a reason to end the session.
pub type Replies = Result<Vec<Vec<u8>>, UploadViolation>;

/// How a visitor broke the upload protocol (its session ends).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UploadViolation {
    #[error("upload {} was begun twice", .0.0)]
    BegunTwice(UploadId),
    #[error("bytes of upload {} before it was ready", .0.0)]
    BeforeReady(UploadId),
    #[error("upload {}: bytes at {offset} that came already (or none)", upload.0)]
    SentTwice { upload: UploadId, offset: u64 },
    #[error("upload {}: {end} bytes of a {size}-byte file", upload.0)]
    PastEnd {
        upload: UploadId,
        end: u64,
        size: u64,
    },
    #[error("upload {}: more than {SESSION_UPLOAD_WINDOW} bytes sent ahead of the sharer", .0.0)]
    PastWindow(UploadId),
    #[error("upload {}: more than {MAX_PIECES} pieces waiting to be written (chunks too small)", .0.0)]
    TooManyPieces(UploadId),
}

fn step_upload(io: &UploadIo) -> UploadId {
    match io {
        UploadIo::Begin { upload, .. }
        | UploadIo::Write { upload, .. }
        | UploadIo::Finish { upload }
        | UploadIo::Cancel { upload } => *upload,
    }
}

fn refused(upload: UploadId, code: UploadRefusal, message: impl Into<String>) -> Vec<u8> {
    SenderToReceiver::UploadRefused(UploadRefused {
        upload,
        code,
        message: message.into(),
    })
    .encode()
}

impl UploadsIn {
    pub fn new(rights: Rights, names: NameRules) -> Self {
        UploadsIn {
            rights,
            names,
            ..UploadsIn::default()
        }
    }

    pub fn rights(&self) -> Rights {
        self.rights
    }

    /// Uploads open now.
    pub fn open(&self) -> usize {
        self.uploads.len()
    }

    pub fn begin(&mut self, b: UploadBegin) -> Replies {
        if !self.rights.upload {
            return Ok(vec![refused(
                b.upload,
                UploadRefusal::NotAllowed,
                "this link does not let visitors add files",
            )]);
        }
        if self.uploads.contains_key(&b.upload) {
            return Err(UploadViolation::BegunTwice(b.upload));
        }
        if self.steps.contains_key(&b.upload) {
            return Ok(vec![refused(
                b.upload,
                UploadRefusal::Busy,
                format!(
                    "upload {} is still being closed; begin it under a new id",
                    b.upload.0
                ),
            )]);
        }
        if self.closing() >= MAX_CLOSING {
            return Ok(vec![refused(
                b.upload,
                UploadRefusal::Busy,
                format!(
                    "{MAX_CLOSING} cancelled uploads are still being closed; send this one again in a moment"
                ),
            )]);
        }
        if self.uploads.len() >= MAX_UPLOADS {
            return Ok(vec![refused(
                b.upload,
                UploadRefusal::Busy,
                format!("at most {MAX_UPLOADS} uploads at once; send this one after another ends"),
            )]);
        }
        if self.rights.max_file > 0 && b.size > self.rights.max_file {
            return Ok(vec![refused(
                b.upload,
                UploadRefusal::OverCap,
                format!(
                    "the file is {} bytes; this link takes files of at most {} bytes",
                    b.size, self.rights.max_file
                ),
            )]);
        }
        let path = match safe_path_with(&b.path, self.names) {
            Ok(p) => p,
            Err(e) => {
                return Ok(vec![refused(
                    b.upload,
                    UploadRefusal::BadName,
                    format!("'{}': {e}", String::from_utf8_lossy(&b.path)),
                )]);
            }
        };
        self.uploads.insert(
            b.upload,
            Incoming {
                path: path.clone(),
                size: b.size,
                hash: b.hash,
                phase: Phase::Opening,
                next: 0,
                ahead: BTreeMap::new(),
                furthest: 0,
                written: 0,
                writing: 0,
            },
        );
        self.push_io(UploadIo::Begin {
            upload: b.upload,
            path,
            size: b.size,
            hash: b.hash,
        });
        Ok(Vec::new())
    }

    pub fn chunk(&mut self, c: &UploadChunk<'_>) -> Replies {
        // The other uploads' bytes that came and are not written (the
        // session's window counts them all).
        let others: u64 = self
            .uploads
            .iter()
            .filter(|(id, _)| **id != c.upload)
            .map(|(_, o)| o.furthest.saturating_sub(o.written))
            .sum();
        let pieces: usize = self
            .uploads
            .values()
            .map(|o| o.ahead.len() + o.writing)
            .sum();
        let Some(u) = self.uploads.get_mut(&c.upload) else {
            // Cancelled or refused while this was on its way: dropped.
            return Ok(Vec::new());
        };
        if u.phase != Phase::Open {
            return Err(UploadViolation::BeforeReady(c.upload));
        }
        let end = c.offset.saturating_add(c.data.len() as u64);
        if c.offset < u.next || c.data.is_empty() || overlaps(&u.ahead, c.offset, end) {
            return Err(UploadViolation::SentTwice {
                upload: c.upload,
                offset: c.offset,
            });
        }
        if end > u.size {
            return Err(UploadViolation::PastEnd {
                upload: c.upload,
                end,
                size: u.size,
            });
        }
        // The session's window: every upload's bytes that came and are not
        // written, this chunk's included.
        if others + end.max(u.furthest) - u.written > SESSION_UPLOAD_WINDOW {
            return Err(UploadViolation::PastWindow(c.upload));
        }
        if pieces >= MAX_PIECES {
            return Err(UploadViolation::TooManyPieces(c.upload));
        }
        if upload_chunk_hash(&u.hash, c.offset, c.data) != c.hash {
            let upload = c.upload;
            self.uploads.remove(&upload);
            self.unqueue(upload, false);
            self.push_io(UploadIo::Cancel { upload });
            return Ok(vec![refused(
                upload,
                UploadRefusal::Corrupt,
                format!(
                    "bytes at {} did not match their hash: nothing was saved; send the file again",
                    c.offset
                ),
            )]);
        }
        u.furthest = u.furthest.max(end);
        if c.offset > u.next {
            u.ahead.insert(c.offset, (end, c.data.to_vec()));
            return Ok(Vec::new());
        }
        let mut writes = vec![(c.offset, c.data.to_vec())];
        u.next = end;
        while let Some(entry) = u.ahead.first_entry() {
            if *entry.key() != u.next {
                break;
            }
            let (offset, (end, data)) = entry.remove_entry();
            writes.push((offset, data));
            u.next = end;
        }
        u.writing += writes.len();
        let finished = u.next == u.size;
        if finished {
            u.phase = Phase::Finishing;
        }
        for (offset, data) in writes {
            self.push_io(UploadIo::Write {
                upload: c.upload,
                offset,
                data,
            });
        }
        if finished {
            self.push_io(UploadIo::Finish { upload: c.upload });
        }
        Ok(Vec::new())
    }

    pub fn cancel(&mut self, upload: UploadId) {
        if self.uploads.remove(&upload).is_some() {
            self.unqueue(upload, false);
            self.push_io(UploadIo::Cancel { upload });
        }
    }

    /// Uploads cancelled or refused here with steps not yet answered.
    fn closing(&self) -> usize {
        self.steps
            .keys()
            .filter(|id| !self.uploads.contains_key(id))
            .count()
    }

    fn push_io(&mut self, io: UploadIo) {
        *self.steps.entry(step_upload(&io)).or_default() += 1;
        self.io.push_back(io);
    }

    /// Takes `upload`'s writes (and its finish too, if `finish`) out of the
    /// queue: the shell is never handed them.
    fn unqueue(&mut self, upload: UploadId, finish: bool) {
        let before = self.io.len();
        self.io.retain(|io| match io {
            UploadIo::Write { upload: u, .. } => *u != upload,
            UploadIo::Finish { upload: u } => !finish || *u != upload,
            _ => true,
        });
        for _ in self.io.len()..before {
            self.answered(upload);
        }
    }

    /// One of `upload`'s steps is done with.
    fn answered(&mut self, upload: UploadId) {
        if let Some(n) = self.steps.get_mut(&upload) {
            *n -= 1;
            if *n == 0 {
                self.steps.remove(&upload);
            }
        }
    }

    /// The next acknowledgement to send, if bytes were written since the last.
    pub fn poll_ack(&mut self) -> Option<Vec<u8>> {
        while let Some(upload) = self.acks_due.pop_first() {
            if let Some(u) = self.uploads.get(&upload) {
                return Some(
                    SenderToReceiver::UploadAck {
                        upload,
                        written: u.written,
                    }
                    .encode(),
                );
            }
        }
        None
    }

    /// The next thing for the shell to do.
    pub fn poll_io(&mut self) -> Option<UploadIo> {
        self.io.pop_front()
    }

    /// The shell's answer about `upload`: frames for the visitor.
    pub fn handle_io(&mut self, upload: UploadId, result: UploadResult) -> Vec<Vec<u8>> {
        self.answered(upload);
        let Some(u) = self.uploads.get_mut(&upload) else {
            return Vec::new();
        };
        match result {
            UploadResult::Ready { offset } if u.phase == Phase::Opening && offset <= u.size => {
                u.next = offset;
                u.furthest = offset;
                u.written = offset;
                u.phase = Phase::Open;
                let ready = SenderToReceiver::UploadReady(UploadReady {
                    upload,
                    offset,
                    path: u.path.joined(),
                    changes: u.path.changes.join("\n"),
                })
                .encode();
                if offset == u.size {
                    // Every byte was already there: land it.
                    u.phase = Phase::Finishing;
                    self.push_io(UploadIo::Finish { upload });
                }
                vec![ready]
            }
            UploadResult::Ready { .. } => Vec::new(),
            UploadResult::Written { end } => {
                u.writing = u.writing.saturating_sub(1);
                u.written = u.written.max(end);
                self.acks_due.insert(upload);
                Vec::new()
            }
            UploadResult::Landed { path, renamed } => {
                self.uploads.remove(&upload);
                vec![
                    SenderToReceiver::UploadDone(UploadDone {
                        upload,
                        path,
                        renamed,
                    })
                    .encode(),
                ]
            }
            UploadResult::Refused { code, message } => {
                self.uploads.remove(&upload);
                self.unqueue(upload, true);
                vec![refused(upload, code, message)]
            }
        }
    }
}
