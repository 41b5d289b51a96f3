//! The visitor's side of uploads, sans IO: files to add are begun on the
//! sharer, their bytes asked of the shell a chunk at a time within the
//! window, each chunk hashed and framed, and what the sharer answers turned
//! into events. A lost connection loses nothing: on the next session every
//! upload not done is begun again and goes on where the sharer says it has
//! bytes up to.
//!
//! ```text
//! shell                                    UploadsOut
//!  add a file (path, size, hash) ------->  start -> UploadId
//!  read these bytes of it <-------------   poll_read -> (upload, offset, len)
//!  here they are ----------------------->  bytes(upload, offset, data)
//!  send this frame <---------------------  poll_frame
//!  what happened <-----------------------  poll_event
//! ```
//!
//! Bounds: at most [`UPLOAD_WINDOW`] bytes of an upload asked of the shell
//! and not yet acknowledged by the sharer, or, where the sharer said its
//! `UploadWindow`, at most that many of all uploads together (so one upload
//! may use it all: over lanes a lost packet holds back the bytes after it);
//! [`crate::MAX_UPLOADS`] uploads begun at once (the rest wait their turn, in
//! the order added).

use std::collections::{BTreeMap, VecDeque};

use linkfs_proto::{
    ReceiverToSender, Rights, UPLOAD_CHUNK_LEN, UPLOAD_WINDOW, UploadBegin, UploadChunk,
    UploadDone, UploadId, UploadReady, UploadRefusal, UploadRefused, upload_chunk_hash,
};

use crate::MAX_UPLOADS;

/// What the sharer said about uploads (the receiver hands it on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UploadNews {
    Rights(Rights),
    /// The session's window for all uploads together.
    Window(u64),
    Ready(UploadReady),
    Ack {
        upload: UploadId,
        written: u64,
    },
    Done(UploadDone),
    Refused(UploadRefused),
}

/// What happened to an upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UploadEvent {
    /// The sharer took it on; it goes on from `offset` (`changes`: how its
    /// names were made safe, in words, one per line).
    Ready {
        upload: UploadId,
        offset: u64,
        path: String,
        changes: String,
    },
    /// The sharer has written `written` bytes.
    Progress { upload: UploadId, written: u64 },
    /// It landed at `path` (`renamed`: the name asked for was taken).
    Done {
        upload: UploadId,
        path: String,
        renamed: bool,
    },
    /// It was refused or failed; nothing of it is in place.
    Refused {
        upload: UploadId,
        code: UploadRefusal,
        message: String,
    },
    /// The visit ended before it landed (`message`: why, in words). What the
    /// sharer holds of it stays there: the same file added on a later visit
    /// goes on from it.
    Interrupted { upload: UploadId, message: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not begun on this session (waiting for a session, or its turn).
    Waiting,
    /// Begun; waiting for the sharer's answer.
    Begun,
    /// Sending bytes.
    Sending,
}

#[derive(Debug)]
struct Outgoing {
    path: Vec<u8>,
    size: u64,
    hash: [u8; 32],
    phase: Phase,
    /// Bytes asked of the shell up to here.
    asked: u64,
    /// Bytes sent up to here.
    sent: u64,
    /// Bytes the sharer has written.
    written: u64,
    /// The reads asked of the shell on this session and not answered yet
    /// (offset, length), in order: only the first one's bytes are taken
    /// (see [`UploadsOut::bytes`]). At most a window's worth of chunks.
    reads: VecDeque<(u64, usize)>,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct UploadsOut {
    next_id: u32,
    uploads: BTreeMap<UploadId, Outgoing>,
    frames: VecDeque<Vec<u8>>,
    events: VecDeque<UploadEvent>,
    /// A session is open (frames may go out).
    open: bool,
    rights: Option<Rights>,
    /// The window the sharer said for this session, if it did.
    window: Option<u64>,
    /// The most of a window this shell takes (0: no limit).
    max_window: u64,
}

impl UploadsOut {
    /// Uploads that take at most `max` bytes of the window a sharer says
    /// (`ReceiverConfig::max_upload_window`).
    pub fn with_max_window(max: u64) -> Self {
        UploadsOut {
            max_window: max,
            ..UploadsOut::default()
        }
    }

    /// What the link lets this visitor do, once the sharer said.
    pub fn rights(&self) -> Option<Rights> {
        self.rights
    }

    /// Uploads not finished yet.
    pub fn pending(&self) -> usize {
        self.uploads.len()
    }

    /// Adds a file to upload: `path` relative to the link's folder, its size
    /// and its whole-file BLAKE3 hash.
    pub fn start(&mut self, path: Vec<u8>, size: u64, hash: [u8; 32]) -> UploadId {
        self.next_id = self.next_id.wrapping_add(1);
        let upload = UploadId(self.next_id);
        self.uploads.insert(
            upload,
            Outgoing {
                path,
                size,
                hash,
                phase: Phase::Waiting,
                asked: 0,
                sent: 0,
                written: 0,
                reads: VecDeque::new(),
            },
        );
        self.begin_waiting();
        upload
    }

    /// Gives an upload up (its part on the sharer goes).
    pub fn cancel(&mut self, upload: UploadId) {
        if let Some(u) = self.uploads.remove(&upload) {
            if self.open && u.phase != Phase::Waiting {
                self.frames
                    .push_back(ReceiverToSender::UploadCancel { upload }.encode());
            }
            self.begin_waiting();
        }
    }

    /// A session opened (after the sharer's welcome): uploads are begun again.
    pub fn session_opened(&mut self) {
        self.open = true;
        self.begin_waiting();
    }

    /// The session is gone: nothing goes out until the next; what was sent
    /// and not written is sent again then (from where the sharer says).
    pub fn session_lost(&mut self) {
        self.open = false;
        // The next session's sharer says its own (or keeps the first rule).
        self.window = None;
        self.frames.clear();
        for u in self.uploads.values_mut() {
            u.phase = Phase::Waiting;
            u.reads.clear();
        }
    }

    /// The visit ended for good (`words`: why): every upload not finished
    /// ends, [`UploadEvent::Interrupted`].
    pub fn end(&mut self, words: &str) {
        self.session_lost();
        for (upload, _) in std::mem::take(&mut self.uploads) {
            self.events.push_back(UploadEvent::Interrupted {
                upload,
                message: words.to_owned(),
            });
        }
    }

    fn begin_waiting(&mut self) {
        if !self.open {
            return;
        }
        let mut begun = self
            .uploads
            .values()
            .filter(|u| u.phase != Phase::Waiting)
            .count();
        for (id, u) in &mut self.uploads {
            if begun >= MAX_UPLOADS {
                break;
            }
            if u.phase == Phase::Waiting {
                u.phase = Phase::Begun;
                begun += 1;
                self.frames.push_back(
                    ReceiverToSender::UploadBegin(UploadBegin {
                        upload: *id,
                        size: u.size,
                        hash: u.hash,
                        path: u.path.clone(),
                    })
                    .encode(),
                );
            }
        }
    }

    /// The next bytes to read for an upload: (upload, offset, len).
    pub fn poll_read(&mut self) -> Option<(UploadId, u64, usize)> {
        if !self.open {
            return None;
        }
        // Room left in the session's window (all uploads together), if the
        // sharer said one; else each upload has UPLOAD_WINDOW of its own.
        let mut shared = self.window.map(|w| {
            let out: u64 = self
                .uploads
                .values()
                .filter(|u| u.phase == Phase::Sending)
                .map(|u| u.asked - u.written)
                .sum();
            w.saturating_sub(out)
        });
        for (id, u) in &mut self.uploads {
            let room = shared.unwrap_or(UPLOAD_WINDOW.saturating_sub(u.asked - u.written));
            if u.phase == Phase::Sending && u.asked < u.size && room > 0 {
                let len = (u.size - u.asked).min(UPLOAD_CHUNK_LEN as u64).min(room);
                let at = u.asked;
                u.asked += len;
                u.reads.push_back((at, len as usize));
                if let Some(left) = shared.as_mut() {
                    *left -= len;
                }
                return Some((*id, at, len as usize));
            }
        }
        None
    }

    /// The bytes asked for by [`UploadsOut::poll_read`], in the order asked.
    /// Bytes of a read this session did not ask (one asked before a lost
    /// session, answered after the next began), or of an upload no longer
    /// sending, are dropped: taken, a read asked before at the offset the
    /// sharer went on from, of another length, put every later read off its
    /// boundary, and the upload stopped for good.
    pub fn bytes(&mut self, upload: UploadId, offset: u64, data: &[u8]) {
        let Some(u) = self.uploads.get_mut(&upload) else {
            return;
        };
        if !self.open || u.phase != Phase::Sending || data.is_empty() {
            return;
        }
        if u.reads.front() != Some(&(offset, data.len())) || offset != u.sent {
            return;
        }
        u.reads.pop_front();
        u.sent += data.len() as u64;
        self.frames.push_back(
            ReceiverToSender::UploadChunk(UploadChunk {
                upload,
                offset,
                hash: upload_chunk_hash(&u.hash, offset, data),
                data,
            })
            .encode(),
        );
    }

    /// The shell could not read a file it added: the upload ends (said in words).
    pub fn unreadable(&mut self, upload: UploadId, words: String) {
        self.cancel(upload);
        self.events.push_back(UploadEvent::Refused {
            upload,
            code: UploadRefusal::Failed,
            message: words,
        });
    }

    pub fn poll_frame(&mut self) -> Option<Vec<u8>> {
        if !self.open {
            return None;
        }
        self.frames.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<UploadEvent> {
        self.events.pop_front()
    }

    /// What the sharer said.
    pub fn handle(&mut self, news: UploadNews) {
        match news {
            UploadNews::Rights(r) => self.handle_rights(r),
            UploadNews::Window(bytes) => {
                self.window = Some(match self.max_window {
                    0 => bytes,
                    max => bytes.min(max),
                });
            }
            UploadNews::Ready(r) => self.handle_ready(r),
            UploadNews::Ack { upload, written } => self.handle_ack(upload, written),
            UploadNews::Done(d) => self.handle_done(d),
            UploadNews::Refused(r) => self.handle_refused(r),
        }
    }

    pub fn handle_rights(&mut self, rights: Rights) {
        self.rights = Some(rights);
    }

    pub fn handle_ready(&mut self, r: UploadReady) {
        let Some(u) = self.uploads.get_mut(&r.upload) else {
            return;
        };
        if u.phase != Phase::Begun || r.offset > u.size {
            return;
        }
        u.phase = Phase::Sending;
        u.asked = r.offset;
        u.sent = r.offset;
        u.written = r.offset;
        u.reads.clear();
        self.events.push_back(UploadEvent::Ready {
            upload: r.upload,
            offset: r.offset,
            path: r.path,
            changes: r.changes,
        });
    }

    pub fn handle_ack(&mut self, upload: UploadId, written: u64) {
        if let Some(u) = self.uploads.get_mut(&upload)
            && written > u.written
            && written <= u.sent
        {
            u.written = written;
            self.events
                .push_back(UploadEvent::Progress { upload, written });
        }
    }

    pub fn handle_done(&mut self, d: UploadDone) {
        if self.uploads.remove(&d.upload).is_some() {
            self.events.push_back(UploadEvent::Done {
                upload: d.upload,
                path: d.path,
                renamed: d.renamed,
            });
            self.begin_waiting();
        }
    }

    pub fn handle_refused(&mut self, r: UploadRefused) {
        if self.uploads.remove(&r.upload).is_some() {
            self.events.push_back(UploadEvent::Refused {
                upload: r.upload,
                code: r.code,
                message: r.message,
            });
            self.begin_waiting();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkfs_proto::SESSION_UPLOAD_WINDOW;

    /// Bytes asked of the shell for one upload of `size` bytes, nothing
    /// acknowledged, after the sharer said `window` (or nothing).
    fn asked_without_acks(window: Option<u64>, lost_first: bool) -> u64 {
        let mut out = UploadsOut::default();
        out.session_opened();
        if let Some(w) = window {
            out.handle(UploadNews::Window(w));
        }
        if lost_first {
            out.session_lost();
            out.session_opened();
        }
        let size = 64 << 20;
        let id = out.start(b"big".to_vec(), size, [0; 32]);
        out.handle_ready(UploadReady {
            upload: id,
            offset: 0,
            path: "big".into(),
            changes: String::new(),
        });
        let mut asked = 0;
        while let Some((_, _, len)) = out.poll_read() {
            asked += len as u64;
            assert!(asked <= size);
        }
        asked
    }

    #[test]
    fn one_upload_may_use_the_whole_window_the_sharer_said_and_only_that() {
        assert_eq!(asked_without_acks(None, false), UPLOAD_WINDOW);
        assert_eq!(
            asked_without_acks(Some(SESSION_UPLOAD_WINDOW), false),
            SESSION_UPLOAD_WINDOW
        );
        // A new session's sharer says its own; until then the first rule.
        assert_eq!(
            asked_without_acks(Some(SESSION_UPLOAD_WINDOW), true),
            UPLOAD_WINDOW
        );
    }

    #[test]
    fn a_shell_that_takes_less_than_the_sharer_says_keeps_to_its_own() {
        // A shell that takes 16 MiB at most.
        let mut out = UploadsOut::with_max_window(16 << 20);
        out.session_opened();
        out.handle(UploadNews::Window(SESSION_UPLOAD_WINDOW));
        let id = out.start(b"big".to_vec(), 64 << 20, [0; 32]);
        out.handle_ready(UploadReady {
            upload: id,
            offset: 0,
            path: "big".into(),
            changes: String::new(),
        });
        let mut asked = 0;
        while let Some((_, _, len)) = out.poll_read() {
            asked += len as u64;
        }
        assert_eq!(asked, 16 << 20);
    }

    #[test]
    fn a_read_asked_before_a_lost_session_and_answered_after_does_not_stop_the_upload() {
        // The window cuts the last read of the first session short (4 MiB is
        // no multiple of a chunk); the next session's sharer goes on from
        // that read's offset, where the new read is a whole chunk. The
        // shell answers the old read first (its reads of a file go in
        // order), then the new ones.
        let chunk = UPLOAD_CHUNK_LEN as u64;
        let size = 8 << 20;
        let mut out = UploadsOut::default();
        out.session_opened();
        let id = out.start(b"big".to_vec(), size, [0; 32]);
        let ready = |out: &mut UploadsOut, offset| {
            out.handle_ready(UploadReady {
                upload: id,
                offset,
                path: "big".into(),
                changes: String::new(),
            })
        };
        ready(&mut out, 0);
        let mut first = Vec::new();
        while let Some(read) = out.poll_read() {
            first.push(read);
        }
        let (_, cut_at, cut_len) = *first.last().unwrap();
        assert!((cut_len as u64) < chunk, "the window cut the last read");
        out.session_lost();
        out.session_opened();
        out.begin_waiting();
        ready(&mut out, cut_at);
        let mut second = Vec::new();
        while let Some(read) = out.poll_read() {
            second.push(read);
        }
        assert_eq!(second[0], (id, cut_at, chunk as usize));
        let bytes = vec![7u8; chunk as usize];
        out.bytes(id, cut_at, &bytes[..cut_len]);
        for &(_, at, len) in &second {
            out.bytes(id, at, &bytes[..len]);
        }
        let u = &out.uploads[&id];
        assert_eq!(
            u.sent,
            cut_at + second.iter().map(|r| r.2 as u64).sum::<u64>(),
            "every read of this session sent, the old one not"
        );
    }

    #[test]
    fn uploads_not_finished_when_the_visit_ends_end_with_the_reason() {
        let mut out = UploadsOut::default();
        out.session_opened();
        let a = out.start(b"a".to_vec(), 10, [0; 32]);
        let b = out.start(b"b".to_vec(), 10, [0; 32]);
        out.handle_ready(UploadReady {
            upload: a,
            offset: 0,
            path: "a".into(),
            changes: String::new(),
        });
        while out.poll_event().is_some() {}
        out.end("the sharer stopped sharing");
        let mut ended = Vec::new();
        while let Some(e) = out.poll_event() {
            match e {
                UploadEvent::Interrupted { upload, message } => {
                    assert_eq!(message, "the sharer stopped sharing");
                    ended.push(upload);
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(ended, vec![a, b]);
        assert_eq!(out.pending(), 0);
        assert_eq!(out.poll_read(), None);
    }

    #[test]
    fn the_window_the_sharer_said_is_shared_by_every_upload() {
        let mut out = UploadsOut::default();
        out.session_opened();
        out.handle(UploadNews::Window(8 << 20));
        for name in ["a", "b", "c"] {
            let id = out.start(name.as_bytes().to_vec(), 16 << 20, [0; 32]);
            out.handle_ready(UploadReady {
                upload: id,
                offset: 0,
                path: name.into(),
                changes: String::new(),
            });
        }
        let mut asked = 0;
        while let Some((_, _, len)) = out.poll_read() {
            asked += len as u64;
        }
        assert_eq!(asked, 8 << 20, "all three together within the window");
    }
}
