//! One receiver's session on the sharer's side (sans-IO).
//!
//! ```text
//! shell                                   SenderSession
//!  frame from the data channel ---------> handle_frame(now, frame, &index)
//!  bytes read (or the failure) ---------> handle_io(io, result)
//!  an upload step done ------------------> handle_upload_io(upload, result)
//!  the timer fired ----------------------> handle_timeout(now)
//!  after each: poll_output(now, &index, room) until Wait:
//!    Read(io)        read from disk      Upload(step)  write an upload step
//!    Transmit(frame) (only with room)    Ended(why)    the session is over
//!    TransmitBulk(frame) (only with room): a long read's chunk; a shell with
//!                    lanes sends it on a lane, else as Transmit
//!    Wait(at)        sleep until `at` (or the next input)
//! ```
//!
//! Index batches are cut from the share's log at the session's cursor while the
//! unacknowledged bytes stay under `window_bytes`. Each batch carries the
//! current operations of the positions it covers (superseded ones are skipped,
//! see `share_index`); an entry whose parent's latest state the receiver cannot
//! have yet gets that parent (and its ancestors) sent ahead of it, so receivers
//! always know a parent before its children. A batch that is not full is
//! held back for at most `linger_ms` while the walk is still producing entries,
//! so a fast walk fills batches instead of sending many small ones. The oldest
//! unacknowledged batch is sent again after `retransmit_ms` (doubling up to
//! 10 s); over a reliable data channel this never fires. At most one copy of
//! it waits to be sent at a time, and after [`MAX_RETRANSMITS`] in a row without
//! an acknowledgement the session ends ("stopped acknowledging"): a receiver
//! that never acknowledges costs a bounded amount, not one batch per timeout.
//!
//! Reads: a request is checked against the index (id, kind, generation, range)
//! before it is queued; at most `max_reads` are queued. The session hands the
//! shell one chunk-sized piece of file IO at a time, round-robin over the queued
//! reads so that a small file is not stuck behind a large one (a file's own
//! reads are served nearest its start first within the turns they get), with at most
//! `max_pending_io` pieces read or framed but not yet sent. Short requests (at
//! most [`SHORT_READ`] bytes: a small file, asked for whole) go first: their IO
//! is handed out before longer reads' (with [`SHORT_READ_EXTRA_IO`] pieces of
//! room of their own) and their chunks go ahead of longer reads' queued ones,
//! so opening a small file during a bulk read waits for the path, not for the
//! bulk read's queue. Sending alternates between read chunks and index batches
//! when both are ready.
//!
//! Memory per session is bounded by the sum of:
//! - `window_bytes` (unacknowledged batches);
//! - `max_pending_io` + [`SHORT_READ_EXTRA_IO`] chunks, `MAX_CONTROL_FRAMES` small frames;
//! - the "folders listed" frames of one batch (5 bytes per folder it makes whole);
//! - [`MAX_SENT_AHEAD`] entries sent ahead of their place, and 16 bytes per
//!   folder the walk finished not yet said whole (until the index is complete).
//!
//! Folders listed: while the receiver is not complete, each batch is followed
//! by the folders it makes whole ([`ShareIndex::listed_between`] its range;
//! [`linkfs_proto::listed`]), so a mount answers a listing of such a folder
//! before the rest of the index is there. A folder is said whole only when
//! the receiver holds every child it has now: a child that changed after the
//! walk listed the folder has its latest state later in the log, and is sent
//! ahead of its place first (at most [`LATE_CHILDREN_AHEAD`] of a folder;
//! with more, the folder is said whole once the stream has passed them).
//! One rule, in [`SenderSession::whole_after`].

use std::collections::{BTreeSet, HashMap, VecDeque};

use linkfs_proto::batch::MAX_SKIPPED_POSITIONS;
use linkfs_proto::frame::{ReadChunk, encode_chunk_into};
use linkfs_proto::{
    BatchEncoder, CHUNK_LEN, EntryId, EntryKind, EntryView, Generation, Goodbye, GoodbyeCode,
    MAX_FRAME_LEN, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION, ReadError, ReadErrorCode, ReadId,
    ReadRequest, ReceiverToSender, SenderToReceiver, Seq, Welcome, chunk_hash,
};

use crate::Millis;
use crate::share_index::{ReadTarget, ShareIndex};

/// What a [`SenderSession`] has for its shell ([`SenderSession::poll_output`]).
#[derive(Debug)]
pub enum SenderOutput {
    /// Read this from disk; answer with [`SenderSession::handle_io`].
    Read(ReadIo),
    /// Do this upload step; answer with [`SenderSession::handle_upload_io`].
    Upload(crate::UploadIo),
    /// Send this frame.
    Transmit(Vec<u8>),
    /// Send this chunk of a long read (over [`SHORT_READ`]). A shell with
    /// lanes sends it on a lane and not on the session's own link, so a
    /// small file's answer never waits there behind the repair of a lost
    /// bulk packet (one ordered stream delivers nothing past a hole); a
    /// shell without lanes sends it as [`SenderOutput::Transmit`].
    TransmitBulk(Vec<u8>),
    /// The session is over (`None`: closed here with nothing wrong), and its
    /// last frame was taken.
    Ended(Option<SessionError>),
    /// Nothing now; call [`SenderSession::handle_timeout`] at this time, if any.
    Wait(Option<Millis>),
}

/// Whether a symlink target, as read from a link `depth` folders below the
/// shared folder, leads out of it: absolute, or climbing above it with `..`
/// (lexically; symlinks are never read through).
pub fn target_leaves_root(depth: usize, target: &[u8]) -> bool {
    if target.first() == Some(&b'/') {
        return true;
    }
    let mut at = depth;
    for part in target.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => match at.checked_sub(1) {
                Some(up) => at = up,
                None => return true,
            },
            _ => at += 1,
        }
    }
    false
}

/// Most children of one folder sent ahead of their place so that the folder
/// can be said whole (they changed after the walk listed it); a folder with
/// more is said whole once the stream has passed the last of them.
pub const LATE_CHILDREN_AHEAD: usize = 4096;

/// Most entries a session holds as sent ahead of their place at once (8 bytes
/// each, about 1.5 MiB at most with the map's slack); past it, folders wait
/// for the stream to reach their late children.
pub const MAX_SENT_AHEAD: usize = 65_536;

/// Most small frames (welcome, read errors, goodbye) queued at once; a peer that
/// makes more than this many errors without reading them is disconnected.
pub const MAX_CONTROL_FRAMES: usize = 256;

#[derive(Debug, Clone)]
pub struct SenderConfig {
    /// Most index-batch bytes sent but not yet acknowledged.
    pub window_bytes: usize,
    /// Byte cap of one index batch frame (at most `MAX_FRAME_LEN`).
    pub batch_cap: usize,
    /// How long a part-full batch may wait for more entries while the walk runs.
    pub linger_ms: u64,
    /// A batch waiting for more entries is sent anyway once this many ops are ready.
    pub linger_ops: u64,
    pub retransmit_ms: u64,
    /// Most read requests queued per receiver (told to it as
    /// `max_reads_in_flight`). A small file is a request of its own, so across a
    /// path of 20 ms this bounds a visitor to this many files per 20 ms: 64
    /// held `linkfs get` of 100,000 files of 1 KiB to 2,400 a second where
    /// rsync copied 5,000. A queued read holds no buffer (its IO is bounded by
    /// `max_pending_io`), only its place.
    pub max_reads: usize,
    /// Largest read one request may ask for.
    pub max_read_len: u32,
    /// Most chunk reads handed to the shell or framed and not yet sent.
    pub max_pending_io: usize,
    /// Send a symlink whose target leads out of the shared folder (absolute,
    /// or climbing above it with `..`) with no target: a link scoped to a
    /// subfolder must not name anything beside or above it.
    pub confine_symlinks: bool,
    /// A link that shows a selection of paths: a symlink whose target leads
    /// anywhere else is sent with no target too.
    pub selection: Option<std::sync::Arc<crate::Selection>>,
    /// What the link lets its visitor do (sent after `Welcome`).
    pub rights: linkfs_proto::Rights,
    /// What the link lets uploads be named (kept by the sharer, not sent).
    pub upload_names: crate::upload_name::NameRules,
}

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig {
            window_bytes: 2 << 20,
            batch_cap: MAX_FRAME_LEN,
            linger_ms: 10,
            linger_ops: 2048,
            retransmit_ms: 3000,
            max_reads: 256,
            max_read_len: 1 << 20,
            max_pending_io: 8,
            confine_symlinks: false,
            selection: None,
            rights: linkfs_proto::Rights {
                list: true,
                ..linkfs_proto::Rights::default()
            },
            upload_names: crate::upload_name::NameRules::default(),
        }
    }
}

/// Requests of at most this many bytes are served before longer ones.
pub const SHORT_READ: u64 = 256 * 1024;
/// Pieces of IO short requests may have pending beyond `max_pending_io`.
pub const SHORT_READ_EXTRA_IO: usize = 4;

/// One chunk of file IO for the shell: read `len` bytes at `offset` of
/// `target.path` after checking the file still is what `target` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadIo {
    pub read: ReadId,
    pub entry: EntryId,
    pub generation: Generation,
    pub offset: u64,
    pub len: u32,
    pub target: ReadTarget,
    /// No more IO will be asked for this read after this one.
    pub last: bool,
    /// Part of a short request ([`SHORT_READ`]): its chunk goes ahead of
    /// longer reads' queued chunks.
    pub short: bool,
}

/// Why the shell could not read a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoFailure {
    pub code: ReadErrorCode,
    pub message: String,
}

/// Why a session ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    #[error("the receiver sent a frame that is not valid: {0}")]
    BadFrame(linkfs_proto::DecodeError),
    #[error("the receiver broke the protocol: {0}")]
    Protocol(String),
    /// The receiver broke the upload protocol.
    #[error("the receiver broke the protocol: {0}")]
    Upload(#[from] crate::uploads_in::UploadViolation),
    #[error(
        "the receiver speaks protocol version {0}; this sharer speaks {MIN_PROTOCOL_VERSION} to {PROTOCOL_VERSION}: update the older of the two"
    )]
    Version(u16),
    #[error("the receiver said goodbye: {0}")]
    Goodbye(String),
    /// This side closed the session ([`SenderSession::close`]); the receiver was told this.
    #[error("{0}")]
    ClosedHere(String),
    #[error(
        "the receiver stopped acknowledging the index ({0} resends without an answer); it may reconnect"
    )]
    NoAcks(u32),
    /// The link had no room for a frame for [`STOPPED_READING_MS`]: the
    /// receiver stopped reading (its connection is open, but nothing moves).
    #[error("the receiver stopped reading for {0} s; it may reconnect")]
    StoppedReading(u64),
}

/// How long a session's link may take no frame at all while the session has
/// one to send before the session ends ([`SessionError::StoppedReading`]): a
/// visitor that keeps its connection open but reads nothing holds its slot
/// and buffers only this long. A slow link that moves at all never reaches it.
pub const STOPPED_READING_MS: u64 = 60_000;

/// Resends of the oldest batch without any acknowledgement before the session
/// ends: 8 (about a minute: 3, 6, then 10 s apart).
pub const MAX_RETRANSMITS: u32 = 8;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    pub batches_sent: u64,
    pub batch_bytes_sent: u64,
    pub ops_sent: u64,
    pub retransmits: u64,
    pub reads_accepted: u64,
    pub reads_refused: u64,
    pub chunks_sent: u64,
    pub chunk_bytes_sent: u64,
}

#[derive(Debug)]
struct SentBatch {
    end: Seq,
    frame: Vec<u8>,
}

#[derive(Debug)]
struct ActiveRead {
    read: ReadId,
    entry: EntryId,
    generation: Generation,
    next: u64,
    end: u64,
    target: ReadTarget,
    short: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitingHello,
    Open,
    Closed,
}

/// See the module docs.
#[derive(Debug)]
pub struct SenderSession {
    config: SenderConfig,
    state: State,
    /// The protocol version of the session: the receiver's, from its Hello.
    version: u16,
    /// The Hello that opened the session and the Welcome that answered it.
    hello: Option<(linkfs_proto::Hello, Vec<u8>)>,
    /// Next op to put in a batch.
    cursor: Seq,
    acked: Seq,
    unacked: VecDeque<SentBatch>,
    unacked_bytes: usize,
    oldest_sent_at: Millis,
    rto: u64,
    /// Resends since the last acknowledgement.
    resends: u32,
    complete_sent: bool,
    pending_since: Option<Millis>,
    control: VecDeque<Vec<u8>>,
    /// "Folders listed" frames for the batch just cut, sent right after it.
    listed_out: VecDeque<Vec<u8>>,
    /// Folders the walk finished that cannot be said whole yet, with the
    /// position from which to check again ([`SenderSession::whole_after`]).
    listed_held: BTreeSet<(u64, u32)>,
    /// Folders whose late children did not fit in the batch just cut: they
    /// go first in the next one.
    listed_next: Vec<EntryId>,
    reads: VecDeque<ActiveRead>,
    io_in_flight: usize,
    chunks: VecDeque<Vec<u8>>,
    /// When the shell last took a frame ([`SenderSession::poll_output`]).
    last_taken: Option<Millis>,
    /// How many chunks at the front of `chunks` are short requests'.
    short_chunks: usize,
    chunk_turn: bool,
    /// Entries sent ahead of their place as some entry's ancestor, with the
    /// position of the state sent (so that place is skipped).
    early: HashMap<u32, u64>,
    stats: SenderStats,
    end_reason: Option<SessionError>,
    uploads: crate::UploadsIn,
}

/// [`SenderSession::whole_after`]: a folder the walk finished, at a batch's end.
enum Whole {
    /// The receiver holds it whole with this batch.
    Now,
    /// Not yet: check again with the batch that ends at or after this.
    From(Seq),
    /// No longer a folder: nothing to say.
    Gone,
}

impl SenderSession {
    pub fn new(config: SenderConfig) -> Self {
        let rto = config.retransmit_ms;
        let (rights, upload_names) = (config.rights, config.upload_names);
        SenderSession {
            config,
            state: State::AwaitingHello,
            version: PROTOCOL_VERSION,
            hello: None,
            cursor: Seq(0),
            acked: Seq(0),
            unacked: VecDeque::new(),
            unacked_bytes: 0,
            oldest_sent_at: Millis(0),
            resends: 0,
            rto,
            complete_sent: false,
            pending_since: None,
            control: VecDeque::new(),
            listed_out: VecDeque::new(),
            listed_held: BTreeSet::new(),
            listed_next: Vec::new(),
            reads: VecDeque::new(),
            io_in_flight: 0,
            chunks: VecDeque::new(),
            last_taken: None,
            short_chunks: 0,
            chunk_turn: false,
            early: HashMap::new(),
            stats: SenderStats::default(),
            end_reason: None,
            uploads: crate::UploadsIn::new(rights, upload_names),
        }
    }

    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    /// The receiver has acknowledged every op before this.
    pub fn acked(&self) -> Seq {
        self.acked
    }

    pub fn is_open(&self) -> bool {
        self.state == State::Open
    }

    /// The session is over and every frame it wanted to send has been taken.
    pub fn is_finished(&self) -> bool {
        self.state == State::Closed && self.control.is_empty()
    }

    /// Why the session ended, if it did.
    pub fn end_reason(&self) -> Option<&SessionError> {
        self.end_reason.as_ref()
    }

    fn push_control(&mut self, frame: SenderToReceiver<'_>) {
        self.push_control_frame(frame.encode());
    }

    fn push_control_frame(&mut self, frame: Vec<u8>) {
        if self.control.len() >= MAX_CONTROL_FRAMES {
            self.fail(SessionError::Protocol(
                "too many requests were refused without the replies being read".into(),
            ));
            return;
        }
        self.control.push_back(frame);
    }

    fn fail(&mut self, err: SessionError) {
        if self.state == State::Closed {
            return;
        }
        let code = match err {
            SessionError::Version(_) => GoodbyeCode::VersionMismatch,
            SessionError::Goodbye(_) => GoodbyeCode::ShuttingDown,
            _ => GoodbyeCode::ProtocolError,
        };
        if !matches!(err, SessionError::Goodbye(_)) {
            self.control.clear();
            self.control.push_back(
                SenderToReceiver::Goodbye(Goodbye {
                    code,
                    message: err.to_string(),
                })
                .encode(),
            );
        }
        self.end_reason = Some(err);
        self.close_inner();
    }

    fn close_inner(&mut self) {
        self.state = State::Closed;
        self.unacked.clear();
        self.unacked_bytes = 0;
        self.reads.clear();
        self.chunks.clear();
        self.short_chunks = 0;
        // Parts stay where they are: the visitor resumes them.
        self.uploads = crate::UploadsIn::new(self.config.rights, self.config.upload_names);
    }

    /// Ends the session, telling the receiver why (for example, sharing stopped).
    pub fn close(&mut self, message: &str) {
        self.close_with(GoodbyeCode::ShuttingDown, message);
    }

    /// [`close`](Self::close) with the goodbye's code: a withdrawn or
    /// expired link, a visitor sent away.
    pub fn close_with(&mut self, code: GoodbyeCode, message: &str) {
        if self.state == State::Closed {
            return;
        }
        self.control.clear();
        self.control.push_back(
            SenderToReceiver::Goodbye(Goodbye {
                code,
                message: message.to_owned(),
            })
            .encode(),
        );
        self.end_reason = Some(SessionError::ClosedHere(message.to_owned()));
        self.close_inner();
    }

    /// Handles one frame from the receiver. Errors end the session (a goodbye
    /// saying why is queued for the receiver) and are also returned for logging.
    pub fn handle_frame(
        &mut self,
        now: Millis,
        frame: &[u8],
        index: &ShareIndex,
    ) -> Result<(), SessionError> {
        if self.state == State::Closed {
            return Ok(());
        }
        let msg = match ReceiverToSender::decode(frame) {
            Ok(m) => m,
            Err(e) => {
                let err = SessionError::BadFrame(e);
                self.fail(err.clone());
                return Err(err);
            }
        };
        let result = self.handle_message(now, msg, index);
        if let Err(e) = &result {
            self.fail(e.clone());
        }
        result
    }

    fn handle_message(
        &mut self,
        now: Millis,
        msg: ReceiverToSender,
        index: &ShareIndex,
    ) -> Result<(), SessionError> {
        match (self.state, msg) {
            (State::AwaitingHello, ReceiverToSender::Hello(h)) => {
                if !(MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&h.version) {
                    return Err(SessionError::Version(h.version));
                }
                self.version = h.version;
                let start = match h.resume {
                    Some((epoch, next))
                        if epoch == index.epoch() && index.can_resume_from(next) =>
                    {
                        next
                    }
                    _ => Seq(0),
                };
                self.cursor = start;
                self.acked = start;
                self.state = State::Open;
                self.oldest_sent_at = now;
                let welcome = SenderToReceiver::Welcome(Welcome {
                    version: self.version,
                    epoch: index.epoch(),
                    start,
                    max_read: self.config.max_read_len,
                    max_reads_in_flight: self.config.max_reads as u32,
                })
                .encode();
                self.control.push_back(welcome.clone());
                self.control
                    .push_back(SenderToReceiver::Rights(self.config.rights).encode());
                if self.config.rights.upload {
                    self.control.push_back(
                        SenderToReceiver::UploadWindow {
                            bytes: linkfs_proto::SESSION_UPLOAD_WINDOW,
                        }
                        .encode(),
                    );
                }
                self.hello = Some((h, welcome));
                Ok(())
            }
            (State::AwaitingHello, other) => Err(SessionError::Protocol(format!(
                "expected Hello first, got {other:?}"
            ))),
            (State::Open, ReceiverToSender::Hello(h)) => match &self.hello {
                // The Welcome was lost (or is late): answer the same way again.
                Some((first, welcome)) if *first == h => {
                    let w = welcome.clone();
                    self.push_control_frame(w);
                    Ok(())
                }
                _ => Err(SessionError::Protocol("a second, different Hello".into())),
            },
            (State::Open, ReceiverToSender::Ack { next }) => self.handle_ack(now, next),
            (State::Open, ReceiverToSender::Read(req)) => {
                self.handle_read(req, index);
                Ok(())
            }
            (State::Open, ReceiverToSender::CancelRead { read }) => {
                self.reads.retain(|r| r.read != read);
                Ok(())
            }
            (State::Open, ReceiverToSender::UploadBegin(b)) => {
                let replies = self.uploads.begin(b)?;
                for f in replies {
                    self.push_control_frame(f);
                }
                Ok(())
            }
            (State::Open, ReceiverToSender::UploadChunk(c)) => {
                let replies = self.uploads.chunk(&c)?;
                for f in replies {
                    self.push_control_frame(f);
                }
                Ok(())
            }
            (State::Open, ReceiverToSender::UploadCancel { upload }) => {
                self.uploads.cancel(upload);
                Ok(())
            }
            (_, ReceiverToSender::Goodbye(g)) => {
                self.end_reason = Some(SessionError::Goodbye(g.message));
                self.control.clear();
                self.close_inner();
                Ok(())
            }
            // Frames from a newer protocol revision are skipped.
            (_, ReceiverToSender::Unknown { .. }) => Ok(()),
            (State::Closed, _) => Ok(()),
            (_, other) => Err(SessionError::Protocol(format!(
                "unexpected frame {other:?}"
            ))),
        }
    }

    fn handle_ack(&mut self, now: Millis, next: Seq) -> Result<(), SessionError> {
        if next > self.cursor {
            return Err(SessionError::Protocol(format!(
                "acknowledged {next} but only {} was sent",
                self.cursor
            )));
        }
        if next < self.acked {
            return Ok(());
        }
        // An acknowledgement of the position already acknowledged still covers
        // batches that end there: the empty "complete" batch a resumed session
        // sends at the receiver's own position is acknowledged exactly so.
        let advanced = next > self.acked;
        self.acked = next;
        let mut released = false;
        while let Some(front) = self.unacked.front() {
            if front.end > next {
                break;
            }
            self.unacked_bytes -= front.frame.len();
            self.unacked.pop_front();
            released = true;
        }
        if !advanced && !released {
            return Ok(());
        }
        self.rto = self.config.retransmit_ms;
        self.resends = 0;
        self.oldest_sent_at = now;
        Ok(())
    }

    fn refuse(&mut self, read: ReadId, code: ReadErrorCode, message: String) {
        self.stats.reads_refused += 1;
        self.push_control(SenderToReceiver::ReadError(ReadError {
            read,
            code,
            message,
        }));
    }

    fn handle_read(&mut self, req: ReadRequest, index: &ShareIndex) {
        if self.reads.iter().any(|r| r.read == req.read) {
            self.refuse(
                req.read,
                ReadErrorCode::BadRange,
                format!("{} is already in progress", req.read),
            );
            return;
        }
        if self.reads.len() >= self.config.max_reads {
            self.refuse(
                req.read,
                ReadErrorCode::Busy,
                format!("at most {} reads may be in flight", self.config.max_reads),
            );
            return;
        }
        let target = match index.read_target(req.entry, req.generation) {
            Ok(t) => t,
            Err((code, message)) => return self.refuse(req.read, code, message),
        };
        let end = req.offset.checked_add(u64::from(req.len));
        let valid = req.len > 0
            && req.len <= self.config.max_read_len
            && end.is_some_and(|e| e <= target.size);
        let Some(end) = end.filter(|_| valid) else {
            return self.refuse(
                req.read,
                ReadErrorCode::BadRange,
                format!(
                    "bytes {}+{} are not within the file's {} bytes (at most {} per request)",
                    req.offset, req.len, target.size, self.config.max_read_len
                ),
            );
        };
        self.stats.reads_accepted += 1;
        self.reads.push_back(ActiveRead {
            read: req.read,
            entry: req.entry,
            generation: req.generation,
            next: req.offset,
            end,
            target,
            short: u64::from(req.len) <= SHORT_READ,
        });
    }

    /// The next piece of file IO to do, if the session has room for its result.
    pub fn poll_io(&mut self) -> Option<ReadIo> {
        if self.state != State::Open {
            return None;
        }
        let pending = self.io_in_flight + self.chunks.len();
        let short = (pending < self.config.max_pending_io + SHORT_READ_EXTRA_IO)
            .then(|| self.reads.iter().position(|r| r.short))
            .flatten();
        let at = match short {
            Some(at) => at,
            None if pending < self.config.max_pending_io => 0,
            None => return None,
        };
        let mut r = self.reads.remove(at)?;
        // The turn is this read's; the bytes go to the read of the same
        // file nearest its start, so a file's reads end in the order of
        // their bytes (a download that writes pieces in order never waits
        // on its first while the others are done).
        let first = self
            .reads
            .iter_mut()
            .filter(|o| o.entry == r.entry && o.short == r.short && o.next < r.next)
            .min_by_key(|o| o.next);
        if let Some(first) = first {
            std::mem::swap(&mut r, first);
        }
        let len = (r.end - r.next).min(CHUNK_LEN as u64) as u32;
        let io = ReadIo {
            read: r.read,
            entry: r.entry,
            generation: r.generation,
            offset: r.next,
            len,
            target: r.target.clone(),
            last: r.next + u64::from(len) >= r.end,
            short: r.short,
        };
        r.next += u64::from(len);
        if r.next < r.end && r.short {
            self.reads.push_front(r);
        } else if r.next < r.end {
            self.reads.push_back(r);
        }
        self.io_in_flight += 1;
        Some(io)
    }

    /// The next upload step for the shell (see [`crate::uploads_in`]).
    pub fn poll_upload_io(&mut self) -> Option<crate::UploadIo> {
        if self.state != State::Open {
            return None;
        }
        self.uploads.poll_io()
    }

    /// The shell's answer to an upload step.
    pub fn handle_upload_io(
        &mut self,
        upload: linkfs_proto::UploadId,
        result: crate::UploadResult,
    ) {
        if self.state != State::Open {
            return;
        }
        for f in self.uploads.handle_io(upload, result) {
            self.push_control_frame(f);
        }
    }

    /// The result of a [`ReadIo`]: exactly `io.len` bytes, or why not.
    pub fn handle_io(&mut self, io: &ReadIo, result: Result<Vec<u8>, IoFailure>) {
        self.io_in_flight = self.io_in_flight.saturating_sub(1);
        if self.state != State::Open {
            return;
        }
        match result {
            Ok(data) if data.len() == io.len as usize => {
                let hash = chunk_hash(io.entry, io.generation, io.offset, &data);
                let mut frame =
                    Vec::with_capacity(linkfs_proto::frame::READ_CHUNK_HEADER_MAX + data.len());
                encode_chunk_into(
                    &mut frame,
                    &ReadChunk {
                        read: io.read,
                        offset: io.offset,
                        hash,
                        data: &data,
                    },
                );
                if io.short {
                    self.chunks.insert(self.short_chunks, frame);
                    self.short_chunks += 1;
                } else {
                    self.chunks.push_back(frame);
                }
            }
            Ok(data) => {
                self.reads.retain(|r| r.read != io.read);
                self.refuse(
                    io.read,
                    ReadErrorCode::Changed,
                    format!(
                        "the file changed while it was read ({} bytes where {} were expected)",
                        data.len(),
                        io.len
                    ),
                );
            }
            Err(f) => {
                self.reads.retain(|r| r.read != io.read);
                self.refuse(io.read, f.code, f.message);
            }
        }
    }

    fn batch_ready(&mut self, now: Millis, index: &ShareIndex) -> bool {
        if self.unacked_bytes >= self.config.window_bytes {
            return false;
        }
        let end = index.log_end();
        if self.cursor >= end {
            self.pending_since = None;
            // A last, possibly empty, batch tells the receiver it holds everything.
            return !self.complete_sent && index.walk_done();
        }
        if index.walk_done() || end.0 - self.cursor.0 >= self.config.linger_ops {
            return true;
        }
        let since = *self.pending_since.get_or_insert(now);
        now.0 >= since.0 + self.config.linger_ms
    }

    /// The ancestors of `id` the receiver cannot have in their current state
    /// when the stream is at `pos` (their latest operation comes later and was
    /// not sent ahead yet), root first.
    fn unsent_ancestors(&self, index: &ShareIndex, id: EntryId, pos: Seq) -> Vec<EntryId> {
        let mut chain = Vec::new();
        let Some(mut a) = index.view(id).map(|v| v.parent) else {
            return chain;
        };
        if id == EntryId::ROOT {
            return chain;
        }
        // Parent chains are acyclic (the index refuses cycles); the bound is a guard.
        for _ in 0..=index.next_id().0 {
            let Some(last) = index.last_seq(a) else {
                break;
            };
            if last < pos || self.early.get(&a.0) == Some(&last.0) {
                break;
            }
            chain.push(a);
            if a == EntryId::ROOT {
                break;
            }
            match index.view(a) {
                Some(v) => a = v.parent,
                None => break,
            }
        }
        chain.reverse();
        chain
    }

    fn next_batch(&mut self, now: Millis, index: &ShareIndex) -> Vec<u8> {
        let mut enc = BatchEncoder::for_version(self.cursor, self.config.batch_cap, self.version);
        // Where the batch ends: after the last operation taken, or the end of
        // the log if every current operation up to it was taken.
        let mut end = index.log_end();
        let mut ops = 0u64;
        // Folders whose late children did not fit before go first: with them
        // ahead, the receiver holds them whole at this batch's end.
        // They take at most half the batch, so the log's own operations
        // still move it on, and once one does not fit the rest wait unlooked
        // at (a folder of a million children is not scanned again for each).
        let mut whole = Vec::new();
        let mut next = std::mem::take(&mut self.listed_next).into_iter();
        let half = self.config.batch_cap / 2;
        for dir in next.by_ref() {
            match self.whole_after(index, dir, self.cursor, &mut enc, half, &mut ops) {
                Whole::Now => whole.push(dir),
                Whole::From(at) if at == self.cursor => {
                    self.listed_next.push(dir);
                    break;
                }
                Whole::From(at) => {
                    self.listed_held.insert((at.0, dir.0));
                }
                Whole::Gone => {}
            }
        }
        self.listed_next.extend(next);
        'ops: for (seq, op) in index.ops_from(self.cursor) {
            // Never skip more than MAX_SKIPPED_POSITIONS superseded positions in
            // one batch (receivers refuse that): cut before them; every position
            // up to `seq` is superseded, so any cut there is sound.
            let limit = self.cursor.0 + ops + MAX_SKIPPED_POSITIONS;
            if seq.0 > limit {
                end = Seq(limit);
                break;
            }
            let id = op.id();
            if op.is_remove() {
                if !enc.push_remove(id) {
                    end = seq;
                    break;
                }
                self.early.remove(&id.0);
                ops += 1;
                continue;
            }
            if self.early.get(&id.0) == Some(&seq.0) {
                // Sent ahead as an ancestor, in this very state.
                self.early.remove(&id.0);
                continue;
            }
            self.early.remove(&id.0);
            for a in self.unsent_ancestors(index, id, seq) {
                let (Some(view), Some(last)) = (index.view(a), index.last_seq(a)) else {
                    continue;
                };
                if !enc.push_upsert(&view) {
                    end = seq;
                    break 'ops;
                }
                self.early.insert(a.0, last.0);
                ops += 1;
            }
            let Some(view) = index.view(id) else {
                continue;
            };
            if !enc.push_upsert(&self.confined(index, view)) {
                end = seq;
                break;
            }
            ops += 1;
        }
        // Trailing superseded positions count against the limit too.
        end = Seq(end.0.min(self.cursor.0 + ops + MAX_SKIPPED_POSITIONS));
        let complete = index.walk_done() && end == index.log_end();
        if !complete && !self.complete_sent {
            // The folders this batch makes whole at the receiver, so a mount
            // can list them before the whole index is there.
            let due: Vec<(u64, u32)> = self
                .listed_held
                .range(..=(end.0, u32::MAX))
                .copied()
                .collect();
            let fresh: Vec<EntryId> = index.listed_between(self.cursor, end).collect();
            let candidates = due.iter().map(|(_, id)| EntryId(*id)).chain(fresh);
            let mut held = Vec::new();
            for dir in candidates.collect::<Vec<_>>() {
                match self.whole_after(index, dir, end, &mut enc, usize::MAX, &mut ops) {
                    Whole::Now => whole.push(dir),
                    Whole::From(at) if at == end => self.listed_next.push(dir),
                    Whole::From(at) => held.push((at.0, dir.0)),
                    Whole::Gone => {}
                }
            }
            for key in due {
                self.listed_held.remove(&key);
            }
            self.listed_held.extend(held);
        }
        let span = end.0 - self.cursor.0;
        let frame = enc.finish_span(index.entries(), complete, span);
        self.stats.batches_sent += 1;
        self.stats.batch_bytes_sent += frame.len() as u64;
        self.stats.ops_sent += ops;
        if complete {
            // Every folder is whole at the receiver now: nothing more to say.
            self.complete_sent = true;
            self.listed_held.clear();
            self.listed_next.clear();
        } else if !self.complete_sent && !whole.is_empty() {
            self.listed_out
                .extend(linkfs_proto::encode_folders_listed(end, &whole));
        }
        if self.unacked.is_empty() {
            self.oldest_sent_at = now;
        }
        self.cursor = end;
        self.pending_since = None;
        self.unacked_bytes += frame.len();
        self.unacked.push_back(SentBatch {
            end,
            frame: frame.clone(),
        });
        frame
    }

    /// Whether the receiver holds every current child of `dir` once it has
    /// applied the log up to `end` (and `enc`). The walk marked the folder
    /// listed after the last child it found, but a child that changed since
    /// has its latest state later in the log; a receiver that has not had it
    /// yet (one that came after the change) would list the folder without
    /// it. Such children (at most [`LATE_CHILDREN_AHEAD`], and their
    /// ancestors the receiver lacks) go into `enc` now, ahead of their place,
    /// as ancestors do. With more, or one made after `end` (or moved into a
    /// folder made after it: receivers refuse ids past a batch's positions),
    /// the folder waits for the stream to pass the last of them (`From` after
    /// it); with `enc` at `fill_limit` or full, for the next batch
    /// (`From(end)`), where it goes first. Children gone since are not sent
    /// ahead: the folder can be said whole with a name removed since, which
    /// goes when its removal comes, as any change does.
    fn whole_after(
        &mut self,
        index: &ShareIndex,
        dir: EntryId,
        end: Seq,
        enc: &mut BatchEncoder,
        fill_limit: usize,
        ops: &mut u64,
    ) -> Whole {
        if index.view(dir).map(|v| v.kind) != Some(EntryKind::Dir) {
            return Whole::Gone;
        }
        let late = |c: u32| {
            let last = index.last_seq(EntryId(c))?;
            (last >= end && self.early.get(&c) != Some(&last.0)).then_some((c, last))
        };
        // How many, the latest, and whether one was made after `end`: a
        // receiver refuses an entry whose id is past the batch's positions
        // (ids never exceed the position that made them), so that one cannot
        // go ahead.
        let (count, last, made_after) = index
            .children(dir)
            .filter_map(late)
            .fold((0usize, end, false), |(n, m, a), (c, s)| {
                (n + 1, m.max(s), a || u64::from(c) >= end.0)
            });
        if count == 0 {
            return Whole::Now;
        }
        let wait_for_them = Whole::From(Seq(last.0 + 1));
        if made_after || count > LATE_CHILDREN_AHEAD || self.early.len() + count > MAX_SENT_AHEAD {
            return wait_for_them;
        }
        let ahead: Vec<(u32, Seq)> = index.children(dir).filter_map(late).collect();
        for (c, at) in ahead {
            let id = EntryId(c);
            let chain = self.unsent_ancestors(index, id, end);
            // A folder it moved into since, made after `end`: not yet.
            if chain.iter().any(|a| u64::from(a.0) >= end.0) {
                return wait_for_them;
            }
            for a in chain {
                let (Some(view), Some(a_at)) = (index.view(a), index.last_seq(a)) else {
                    continue;
                };
                if enc.len_bound() >= fill_limit || !enc.push_upsert(&view) {
                    return Whole::From(end);
                }
                self.early.insert(a.0, a_at.0);
                *ops += 1;
            }
            let Some(view) = index.view(id) else {
                continue;
            };
            if enc.len_bound() >= fill_limit || !enc.push_upsert(&self.confined(index, view)) {
                return Whole::From(end);
            }
            self.early.insert(c, at.0);
            *ops += 1;
        }
        Whole::Now
    }

    /// `view`, with its symlink target blanked if it leads out of the
    /// shared folder and the session confines symlinks.
    fn confined<'a>(&self, index: &ShareIndex, view: EntryView<'a>) -> EntryView<'a> {
        if !self.config.confine_symlinks || view.kind != EntryKind::Symlink {
            return view;
        }
        let rel = index.relative_path(view.id).unwrap_or_default();
        let depth = rel.split(|b| *b == b'/').count().saturating_sub(1);
        let hidden = target_leaves_root(depth, view.target)
            || self
                .config
                .selection
                .as_ref()
                .is_some_and(|s| !s.shows_target(&rel, view.target));
        if hidden {
            EntryView {
                target: b"",
                ..view
            }
        } else {
            view
        }
    }

    /// The next frame to send, if any.
    pub fn poll_transmit(&mut self, now: Millis, index: &ShareIndex) -> Option<Vec<u8>> {
        self.poll_frame(now, index).map(|(f, _)| f)
    }

    /// The next frame to send, and whether it is a long read's chunk
    /// ([`SenderOutput::TransmitBulk`]).
    fn poll_frame(&mut self, now: Millis, index: &ShareIndex) -> Option<(Vec<u8>, bool)> {
        if let Some(f) = self.control.pop_front() {
            return Some((f, false));
        }
        if self.state != State::Open {
            return None;
        }
        if let Some(f) = self.listed_out.pop_front() {
            return Some((f, false));
        }
        if let Some(f) = self.uploads.poll_ack() {
            return Some((f, false));
        }
        let batch = self.batch_ready(now, index);
        let chunk = !self.chunks.is_empty();
        if chunk && (!batch || self.chunk_turn) {
            self.chunk_turn = false;
            self.stats.chunks_sent += 1;
            let f = self.chunks.pop_front()?;
            let bulk = self.short_chunks == 0;
            self.short_chunks = self.short_chunks.saturating_sub(1);
            self.stats.chunk_bytes_sent += f.len() as u64;
            return Some((f, bulk));
        }
        if batch {
            self.chunk_turn = true;
            return Some((self.next_batch(now, index), false));
        }
        None
    }

    /// Everything the session has for its shell, one item a call, in the
    /// order a shell must take them: file IO first (reads start while frames
    /// go out), upload steps, a frame if the link has `room` for one, the end
    /// once every frame it wanted to send was taken, else when to call
    /// [`SenderSession::handle_timeout`]. This is the shell's one poll: call
    /// it after every input until it says [`SenderOutput::Wait`].
    pub fn poll_output(&mut self, now: Millis, index: &ShareIndex, room: bool) -> SenderOutput {
        // No room: the shell holds a frame the link has not taken.
        let stuck_since = (!room && self.state == State::Open)
            .then_some(self.last_taken)
            .flatten();
        if let Some(t) = stuck_since
            && now.0 >= t.0 + STOPPED_READING_MS
        {
            self.end_reason = Some(SessionError::StoppedReading(STOPPED_READING_MS / 1000));
            // Nothing more can go out on a link that takes nothing.
            self.control.clear();
            self.close_inner();
        }
        if let Some(io) = self.poll_io() {
            return SenderOutput::Read(io);
        }
        if let Some(io) = self.poll_upload_io() {
            return SenderOutput::Upload(io);
        }
        if room && let Some((frame, bulk)) = self.poll_frame(now, index) {
            self.last_taken = Some(now);
            return if bulk {
                SenderOutput::TransmitBulk(frame)
            } else {
                SenderOutput::Transmit(frame)
            };
        }
        if self.is_finished() {
            return SenderOutput::Ended(self.end_reason.clone());
        }
        let stuck_until = stuck_since
            .filter(|_| self.state == State::Open)
            .map(|t| Millis(t.0 + STOPPED_READING_MS));
        let wake = match (self.poll_timeout(), stuck_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        SenderOutput::Wait(wake)
    }

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Millis> {
        if self.state != State::Open {
            return None;
        }
        let retransmit =
            (!self.unacked.is_empty()).then(|| Millis(self.oldest_sent_at.0 + self.rto));
        let linger = self
            .pending_since
            .map(|s| Millis(s.0 + self.config.linger_ms));
        match (retransmit, linger) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Re-sends the oldest unacknowledged batch if it has waited too long.
    pub fn handle_timeout(&mut self, now: Millis) {
        if self.state != State::Open || self.unacked.is_empty() {
            return;
        }
        if now.0 >= self.oldest_sent_at.0 + self.rto
            && let Some(front) = self.unacked.front()
        {
            if self.resends >= MAX_RETRANSMITS {
                self.fail(SessionError::NoAcks(self.resends));
                return;
            }
            self.resends += 1;
            // One copy waiting to go out is enough.
            if !self.control.iter().any(|f| *f == front.frame) {
                self.control.push_back(front.frame.clone());
                self.stats.retransmits += 1;
            }
            self.oldest_sent_at = now;
            self.rto = (self.rto * 2).min(10_000);
        }
    }
}
