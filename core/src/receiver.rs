//! The receiver's session (sans-IO): index batches in, reads out, every chunk checked.
//!
//! ```text
//! shell                                   Receiver
//!  frame from the data channel ---------> handle_frame(now, frame)
//!  ready to send? <---------------------- poll_transmit(now) -> frame
//!  what happened? <---------------------- poll_event() -> ReceiverEvent
//!  batch committed to storage ----------> persisted(seq)       (persisting shells only)
//!  timer <------------------------------- poll_timeout();  handle_timeout(now)
//!  user wants bytes --------------------> start_read(entry, version, offset, len) -> ReadHandle
//! ```
//!
//! Batches are applied strictly in log order. One that arrives early is held
//! (up to [`ReceiverConfig::max_early_bytes`]; beyond that it is dropped and the
//! sender's retransmission brings it again); a duplicate is dropped and answered
//! with the current acknowledgement. A shell that persists the index (the
//! browser) sets `ack_after_persist` and calls [`Receiver::persisted`] once a
//! batch is committed, so the sender's window also bounds what is not yet on
//! disk. Otherwise acknowledgements go out as soon as batches are applied.
//!
//! Folders listed: the sender says which folders are whole at a log position
//! ([`linkfs_proto::listed`]); once batches up to it are applied (at once, or
//! when the batch still on its way comes: at most [`MAX_LISTED_WAITING`]
//! folders wait), [`Receiver::folder_listed`] says so. Only folders the index
//! holds are kept (at most one entry per folder), and nothing once the index
//! is complete, when every folder is whole.
//!
//! A read is split into requests of at most `request_len` bytes (and the
//! sender's `max_read`); requests are issued round-robin over the open reads
//! while at most `max_in_flight_bytes` (and the sender's `max_reads_in_flight`
//! requests) are outstanding, and at most `max_job_in_flight_bytes` for any one
//! read, so a large download does not starve a small read. Every chunk's BLAKE3
//! hash, which covers the entry id, generation and offset, is checked before
//! its bytes are delivered; bytes are delivered in order. A request that makes
//! no progress for `retry_ms` while nothing at all comes from the sender for
//! `retry_ms` either is asked again for what is missing, at most `max_retries`
//! times per read (a request waiting its turn behind others on a slow link is
//! not stalled).
//!
//! Held-up bytes are asked for again sooner. The sender serves a file's
//! bytes nearest its start first, so when a read's next bytes are the
//! file's first outstanding ones and do not come for `hedge_ms` while later
//! bytes of the same file keep coming, they were lost or held up on the way:
//! over several connections (lanes), a chunk waiting out a retransmission
//! timeout on one of them (at least a second in webrtc-rs's SCTP, doubling
//! while it lasts) while the others move on. Then up to [`HEDGE_MAX_BYTES`]
//! from there are handed to a new request (within the sender's limit on
//! requests); the old request no longer waits for them, and a late copy is
//! dropped as a duplicate. Over one ordered link this never happens.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use linkfs_proto::{
    BatchHeader, CHUNK_LEN, EntryId, EntryKind, Epoch, Generation, Goodbye, GoodbyeCode, Hello,
    MIN_PROTOCOL_VERSION, PROTOCOL_VERSION, ReadErrorCode, ReadId, ReadRequest, ReceiverToSender,
    SenderToReceiver, Seq, chunk_hash,
};

use crate::Millis;
use crate::index::{Index, IndexError};

/// Most bytes one hedge asks for again (four chunks).
pub const HEDGE_MAX_BYTES: u32 = 4 * CHUNK_LEN as u32;

/// A request without progress for this many `retry_ms` is stalled even while
/// the sender keeps sending other things (see `Receiver::stalls_at`).
pub const STALL_CAP: u64 = 12;

#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    /// Acknowledge batches only when the shell says they are persisted.
    pub ack_after_persist: bool,
    /// Most bytes of batches that arrived ahead of their turn kept waiting.
    pub max_early_bytes: usize,
    /// Bytes asked for by one read request (capped by the sender's `max_read`).
    pub request_len: u32,
    pub max_in_flight_bytes: u64,
    pub max_job_in_flight_bytes: u64,
    /// Most reads open at once.
    pub max_reads: usize,
    pub retry_ms: u64,
    pub max_retries: u32,
    /// A read's next bytes held up this long while later bytes of its file
    /// came are asked for again (module docs; 0: never).
    pub hedge_ms: u64,
    /// Most bytes of uploads sent and not acknowledged, even where the
    /// sharer's `UploadWindow` says more (`crate::uploads_out`). The default
    /// is one upload's window of old (4 MiB) for all of them: the page hands
    /// every frame to its data channel, and Chromium refuses a send once 16
    /// MiB are queued there (with a 16 MiB window a page's upload stopped at
    /// 21 MiB: a refused chunk left a gap the sharer waited on). The native
    /// receiver waits for room in its link and puts uploads on lanes: it
    /// takes the sharer's.
    pub max_upload_window: u64,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            ack_after_persist: false,
            max_early_bytes: 4 << 20,
            request_len: 1 << 20,
            max_in_flight_bytes: 8 << 20,
            max_job_in_flight_bytes: 4 << 20,
            max_reads: 4096,
            retry_ms: 5000,
            max_retries: 4,
            // Over eight or more connections at 100 ms a chunk often comes
            // half a second after later ones; one waiting out a timeout (at
            // least 1 s) comes later, and then often several seconds late.
            hedge_ms: 1000,
            max_upload_window: linkfs_proto::UPLOAD_WINDOW,
        }
    }
}

/// One read the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReadHandle(pub u32);

/// Why a read failed, in words for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadFailure {
    #[error("{0}")]
    Refused(String, ReadErrorCode),
    #[error("a chunk of the file failed its integrity check (BLAKE3); nothing from it was used")]
    Corrupt,
    #[error("the sharer did not answer the read; try again")]
    TimedOut,
    #[error("the connection to the sharer ended: {0}")]
    SharerGone(String),
    #[error("the read was cancelled")]
    Cancelled,
    /// Asked for while the index was being restored from storage, and not
    /// valid in the restored index.
    #[error(transparent)]
    NotStarted(StartReadError),
}

/// Why a read could not be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StartReadError {
    #[error("entry {0} is not in the index")]
    NoSuchEntry(EntryId),
    #[error("entry {0} is a {1}, not a file")]
    NotAFile(EntryId, &'static str),
    #[error("bytes {offset}+{len} are past the end of the file ({size} bytes)")]
    OutOfRange { offset: u64, len: u64, size: u64 },
    #[error("too many reads are open ({0}); wait for some to finish")]
    TooMany(usize),
    #[error("the connection to the sharer has ended")]
    Closed,
    /// The version asked for is not the one the index holds now (the file
    /// changed since it was listed): reading on would mix two versions.
    #[error(
        "the file changed on the sharer's side since it was listed (version {asked} is now {now}); open or save it again for the new version"
    )]
    Changed { asked: u32, now: u32 },
}

/// Why the session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndReason {
    /// This side closed the session ([`Receiver::close`]).
    ClosedHere,
    /// The sharer said goodbye (for example, sharing stopped).
    SharerGoodbye(String),
    /// The data channel closed without a goodbye.
    ConnectionLost,
    /// The sharer sent something invalid; the message says what.
    ProtocolError(String),
    /// The sharer speaks another protocol version.
    VersionMismatch(String),
    /// The sharer withdrew this link, it expired, or the sharer sent this
    /// visitor away (the sharer's words).
    LinkEnded(String),
    /// The password was wrong, or too many were lately (the sharer's words).
    PasswordRefused(String),
    /// No data link could be made (the first, or a new one after a loss):
    /// what kind of failure, and the words of the last one.
    NotReached { kind: FailureKind, words: String },
}

impl std::fmt::Display for EndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndReason::SharerGoodbye(m) if m.is_empty() || m == "the sharer stopped sharing" => {
                f.write_str("the sharer stopped sharing")
            }
            EndReason::SharerGoodbye(m) => write!(f, "the sharer stopped sharing ({m})"),
            EndReason::ClosedHere => f.write_str("the session was closed on this side"),
            EndReason::ConnectionLost => f.write_str("the connection to the sharer was lost"),
            EndReason::ProtocolError(m) => write!(f, "the sharer sent something invalid: {m}"),
            EndReason::VersionMismatch(m) => {
                write!(f, "this linkfs version cannot talk to the sharer's: {m}")
            }
            EndReason::NotReached { words, .. } => f.write_str(words),
            EndReason::LinkEnded(m) | EndReason::PasswordRefused(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for EndReason {}

impl EndReason {
    /// What kind of end this is, for exit codes and the page's state.
    pub fn kind(&self) -> FailureKind {
        match self {
            EndReason::SharerGoodbye(_) => FailureKind::SharerGone,
            EndReason::ConnectionLost => FailureKind::Unreachable,
            EndReason::ClosedHere => FailureKind::Closed,
            EndReason::ProtocolError(_) | EndReason::VersionMismatch(_) => FailureKind::Other,
            EndReason::NotReached { kind, .. } => *kind,
            EndReason::LinkEnded(_) => FailureKind::LinkEnded,
            EndReason::PasswordRefused(_) => FailureKind::PasswordRefused,
        }
    }
}

/// What kind of failure or end a receiver met. One classification for the
/// native commands' exit codes and the browser's connection states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// The link is malformed or its secret does not match the share.
    InvalidLink,
    /// The sharer stopped sharing (or no one shares at this link any more).
    SharerGone,
    /// The sharer or the relay could not be reached, or the connection was lost.
    Unreachable,
    /// This side closed the session.
    Closed,
    /// The sharer withdrew the link, or its time ran out: it will not open again.
    LinkEnded,
    /// The link's password was wrong (or too many were, lately).
    PasswordRefused,
    /// Anything else (a protocol error, another version, a local failure).
    Other,
}

/// What happened, for the shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiverEvent {
    /// The sharer answered. `fresh`: the index was cleared and a new snapshot follows
    /// (drop what was persisted).
    Started {
        epoch: Epoch,
        fresh: bool,
    },
    /// A batch was applied. `persist` is set when the shell persists batches
    /// (`ack_after_persist`): it says where the batch's bytes are, and the shell
    /// must call [`Receiver::persisted`] with `header.end()` once they are stored.
    /// `refused` lists operations that were not valid and were skipped.
    Applied {
        header: BatchHeader,
        persist: Option<BatchBytes>,
        refused: Vec<IndexError>,
    },
    /// A read made progress, finished or failed.
    Read(ReadEvent),
    /// The data link was lost; the session waits for a new one (reads wait too).
    LinkLost,
    /// The sharer asks for this link's password before anything else
    /// ([`Receiver::give_password`]).
    PasswordNeeded,
    /// The sharer said something about uploads (see [`crate::uploads_out`]).
    Upload(crate::UploadNews),
    Ended {
        reason: EndReason,
    },
}

/// What happened to one read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadEvent {
    /// Verified bytes, in order.
    Data {
        handle: ReadHandle,
        offset: u64,
        data: Vec<u8>,
    },
    Done {
        handle: ReadHandle,
    },
    Failed {
        handle: ReadHandle,
        error: ReadFailure,
    },
}

/// Where the bytes of an applied batch are, for a shell that stores them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchBytes {
    /// The frame given to the `handle_frame` call that produced this event (the
    /// usual case: the shell keeps its own copy, nothing is copied here).
    Given,
    /// A frame that arrived ahead of its turn and was held until now.
    Held(Vec<u8>),
}

/// Index fill progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    pub received: u64,
    pub announced: u64,
    pub complete: bool,
}

#[derive(Debug)]
struct Job {
    entry: EntryId,
    generation: Generation,
    end: u64,
    next_request: u64,
    delivered: u64,
    /// When `delivered` last moved (or its first request went).
    delivered_at: Option<Millis>,
    /// When a chunk of it last came.
    heard_at: Millis,
    in_flight: u64,
    pending: BTreeMap<u64, Vec<u8>>,
    retries: u32,
}

#[derive(Debug)]
struct Request {
    job: ReadHandle,
    offset: u64,
    len: u32,
    /// Received (offset, len) pieces, sorted.
    received: Vec<(u64, u32)>,
    received_bytes: u32,
    last_progress: Millis,
}

impl Request {
    /// The missing piece that starts at `at` (within this request), up to
    /// the next piece that came or its end.
    fn missing_from(&self, at: u64) -> Option<(u64, u32)> {
        let end = self.offset + u64::from(self.len);
        if at < self.offset || at >= end {
            return None;
        }
        let pos = self.received.partition_point(|(o, _)| *o <= at);
        if pos > 0 && {
            let (o, l) = self.received[pos - 1];
            at < o + u64::from(l)
        } {
            return None;
        }
        let until = self.received.get(pos).map_or(end, |(o, _)| *o);
        Some((at, (until - at) as u32))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitingWelcome,
    Open,
    /// The data link was lost; the shell is getting a new one.
    Disconnected,
    Closed,
}

/// See the module docs.
#[derive(Debug)]
pub struct Receiver {
    config: ReceiverConfig,
    state: State,
    index: Index,
    resume: Option<(Epoch, Seq)>,
    epoch: Epoch,
    next: Seq,
    acked: Seq,
    ack_due: bool,
    early: BTreeMap<u64, Vec<u8>>,
    early_bytes: usize,
    announced: u64,
    complete: bool,
    out: VecDeque<Vec<u8>>,
    hello_sent_at: Millis,
    /// When the last frame came from the sender: a request is only stalled if
    /// the whole link has been quiet too (see [`Receiver::handle_timeout`]).
    last_heard: Millis,
    events: VecDeque<ReceiverEvent>,
    max_read: u32,
    max_requests: usize,
    next_handle: u32,
    next_read_id: u32,
    jobs: BTreeMap<ReadHandle, Job>,
    rr_cursor: Option<ReadHandle>,
    requests: HashMap<ReadId, Request>,
    in_flight: u64,
    index_wire_bytes: u64,
    /// Reads asked for before the index was installed
    /// ([`Receiver::awaiting_index`]): checked and started once it is.
    waiting: Option<Vec<WaitingRead>>,
    /// Folders the sharer said are whole at a position already applied (only
    /// until the index is complete; then every folder is).
    listed: HashSet<u32>,
    /// Said for a position not applied yet (a batch still on its way):
    /// (position, folders), at most [`MAX_LISTED_WAITING`] folders in all.
    listed_waiting: Vec<(Seq, Vec<EntryId>)>,
}

/// Folders said to be listed at a position not applied yet, kept at most:
/// beyond, they are dropped and wait for the whole index instead.
pub const MAX_LISTED_WAITING: usize = 65_536;

/// A read asked for before the index was there.
#[derive(Debug, Clone, Copy)]
struct WaitingRead {
    handle: ReadHandle,
    entry: EntryId,
    version: Option<Generation>,
    offset: u64,
    len: u64,
}

impl Receiver {
    /// A session over `index` (empty, or rebuilt from storage). `resume` names
    /// the epoch and next `Seq` of that index, if it came from storage.
    pub fn new(config: ReceiverConfig, index: Index, resume: Option<(Epoch, Seq)>) -> Self {
        let mut r = Receiver {
            config,
            state: State::AwaitingWelcome,
            index,
            resume,
            epoch: Epoch(0),
            next: Seq(0),
            acked: Seq(0),
            ack_due: false,
            early: BTreeMap::new(),
            early_bytes: 0,
            announced: 0,
            complete: false,
            listed: HashSet::new(),
            listed_waiting: Vec::new(),
            out: VecDeque::new(),
            hello_sent_at: Millis(0),
            last_heard: Millis(0),
            events: VecDeque::new(),
            max_read: 0,
            max_requests: 0,
            next_handle: 1,
            next_read_id: 1,
            jobs: BTreeMap::new(),
            rr_cursor: None,
            requests: HashMap::new(),
            in_flight: 0,
            index_wire_bytes: 0,
            waiting: None,
        };
        r.out.push_back(r.hello());
        r
    }

    /// A session whose index comes later ([`install_index`](Self::install_index):
    /// a shell restoring it from storage). Reads asked for meanwhile wait and
    /// are checked against the index once it is installed.
    pub fn awaiting_index(config: ReceiverConfig) -> Self {
        let mut r = Receiver::new(config, Index::new(), None);
        r.waiting = Some(Vec::new());
        r
    }

    /// Whether the index is still to come ([`awaiting_index`](Self::awaiting_index)).
    pub fn is_awaiting_index(&self) -> bool {
        self.waiting.is_some()
    }

    /// Installs the index a session [`awaiting_index`](Self::awaiting_index)
    /// was waiting for, and where it resumes; starts the reads that waited
    /// (one not valid in this index fails with its reason). Call before the
    /// first frame goes out; otherwise it does nothing.
    pub fn install_index(&mut self, index: Index, resume: Option<(Epoch, Seq)>) {
        let Some(waiting) = self.waiting.take() else {
            return;
        };
        self.index = index;
        self.resume = resume;
        self.out.clear();
        self.out.push_back(self.hello());
        for w in waiting {
            if let Err(error) = self.begin_read(w.handle, w.entry, w.version, w.offset, w.len) {
                self.events
                    .push_back(ReceiverEvent::Read(ReadEvent::Failed {
                        handle: w.handle,
                        error: ReadFailure::NotStarted(error),
                    }));
            }
        }
    }

    fn hello(&self) -> Vec<u8> {
        ReceiverToSender::Hello(Hello {
            version: PROTOCOL_VERSION,
            resume: self.resume,
        })
        .encode()
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    /// Mutable access for lookups and listings (they sort lazily).
    pub fn index_mut(&mut self) -> &mut Index {
        &mut self.index
    }

    pub fn is_open(&self) -> bool {
        self.state == State::Open
    }

    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// The epoch and the next `Seq` of the index held, for resuming later.
    pub fn position(&self) -> (Epoch, Seq) {
        (self.epoch, self.next)
    }

    pub fn progress(&self) -> Progress {
        let received = self.index.len() as u64;
        Progress {
            received,
            announced: self.announced.max(received),
            complete: self.complete,
        }
    }

    /// Bytes of index batches received from the sharer in this session.
    pub fn index_wire_bytes(&self) -> u64 {
        self.index_wire_bytes
    }

    pub fn poll_event(&mut self) -> Option<ReceiverEvent> {
        self.events.pop_front()
    }

    /// Handles one frame from the sharer. Protocol errors end the session
    /// (an `Ended` event says why).
    pub fn handle_frame(&mut self, now: Millis, frame: &[u8]) {
        if self.state == State::Closed {
            return;
        }
        let msg = match SenderToReceiver::decode(frame) {
            Ok(m) => m,
            Err(e) => return self.fail_protocol(format!("undecodable frame: {e}")),
        };
        self.last_heard = self.last_heard.max(now);
        match msg {
            SenderToReceiver::Welcome(w) => {
                if self.state == State::Open && w.epoch == self.epoch {
                    // The answer to a repeated Hello.
                    return;
                }
                if self.state != State::AwaitingWelcome {
                    return self.fail_protocol("Welcome sent twice".into());
                }
                if !(MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&w.version) {
                    return self.end(EndReason::VersionMismatch(format!(
                        "the sharer speaks protocol {}, this receiver {MIN_PROTOCOL_VERSION} to {PROTOCOL_VERSION}: update the older of the two",
                        w.version
                    )));
                }
                let fresh = w.start == Seq(0);
                if fresh {
                    self.index.clear();
                    self.complete = false;
                    self.announced = 0;
                    self.listed.clear();
                    self.listed_waiting.clear();
                } else if Some((w.epoch, w.start)) != self.resume {
                    return self.fail_protocol(format!(
                        "the sharer resumed at {} of another index",
                        w.start
                    ));
                }
                self.epoch = w.epoch;
                self.next = w.start;
                self.acked = w.start;
                self.max_read = w.max_read.clamp(1, u32::MAX);
                self.max_requests = w.max_reads_in_flight.max(1) as usize;
                self.state = State::Open;
                self.events.push_back(ReceiverEvent::Started {
                    epoch: w.epoch,
                    fresh: fresh && (self.resume.is_some() || !self.index.is_empty()),
                });
            }
            SenderToReceiver::IndexBatch { header, frame } => {
                if self.state != State::Open {
                    // Overtook a lost or late Welcome; the sender sends it again.
                    return;
                }
                self.index_wire_bytes += frame.len() as u64;
                self.handle_batch(header, frame);
            }
            SenderToReceiver::ReadChunk(c) => {
                self.handle_chunk(now, c.read, c.offset, &c.hash, c.data)
            }
            SenderToReceiver::ReadError(e) => {
                if let Some(req) = self.requests.get(&e.read) {
                    let job = req.job;
                    self.fail_job(job, ReadFailure::Refused(e.message, e.code));
                }
            }
            SenderToReceiver::PasswordNeeded => {
                self.events.push_back(ReceiverEvent::PasswordNeeded);
            }
            SenderToReceiver::Goodbye(g) => {
                let reason = match g.code {
                    GoodbyeCode::VersionMismatch => EndReason::VersionMismatch(g.message),
                    GoodbyeCode::LinkWithdrawn
                    | GoodbyeCode::LinkExpired
                    | GoodbyeCode::SentAway => EndReason::LinkEnded(g.message),
                    GoodbyeCode::WrongPassword | GoodbyeCode::TooManyTries => {
                        EndReason::PasswordRefused(g.message)
                    }
                    GoodbyeCode::ProtocolError => {
                        EndReason::ProtocolError(format!("the sharer says: {}", g.message))
                    }
                    _ => EndReason::SharerGoodbye(g.message),
                };
                self.end(reason);
            }
            SenderToReceiver::Rights(r) => self.upload_news(crate::UploadNews::Rights(r)),
            SenderToReceiver::UploadWindow { bytes } => {
                self.upload_news(crate::UploadNews::Window(bytes));
            }
            SenderToReceiver::UploadReady(r) => self.upload_news(crate::UploadNews::Ready(r)),
            SenderToReceiver::UploadAck { upload, written } => {
                self.upload_news(crate::UploadNews::Ack { upload, written });
            }
            SenderToReceiver::UploadDone(d) => self.upload_news(crate::UploadNews::Done(d)),
            SenderToReceiver::UploadRefused(r) => {
                self.upload_news(crate::UploadNews::Refused(r));
            }
            SenderToReceiver::FoldersListed(l) => {
                if self.state != State::Open || self.complete {
                    return;
                }
                if l.upto <= self.next {
                    self.take_listed(&l.folders);
                } else if self
                    .listed_waiting
                    .iter()
                    .map(|(_, f)| f.len())
                    .sum::<usize>()
                    + l.folders.len()
                    <= MAX_LISTED_WAITING
                {
                    self.listed_waiting.push((l.upto, l.folders));
                }
            }
            // Frames of a newer protocol revision are skipped.
            _ => {}
        }
    }

    fn upload_news(&mut self, news: crate::UploadNews) {
        if self.state == State::Open {
            self.events.push_back(ReceiverEvent::Upload(news));
        }
    }

    fn handle_batch(&mut self, header: BatchHeader, frame: &[u8]) {
        if header.first < self.next {
            // A retransmission of something already applied: repeat the acknowledgement.
            self.ack_due = true;
            return;
        }
        if header.first > self.next {
            if self.early_bytes + frame.len() <= self.config.max_early_bytes
                && !self.early.contains_key(&header.first.0)
            {
                self.early_bytes += frame.len();
                self.early.insert(header.first.0, frame.to_vec());
            }
            return;
        }
        self.apply_batch(header, frame, None);
        while let Some(f) = self.early.remove(&self.next.0) {
            self.early_bytes -= f.len();
            match linkfs_proto::BatchReader::new(&f) {
                Ok(r) => {
                    let h = r.header();
                    self.apply_batch(h, &f, Some(&f));
                }
                Err(e) => return self.fail_protocol(format!("undecodable batch: {e}")),
            }
        }
        // Anything older than the new position is a duplicate now.
        let next = self.next.0;
        let stale: Vec<u64> = self.early.range(..next).map(|(k, _)| *k).collect();
        for k in stale {
            if let Some(f) = self.early.remove(&k) {
                self.early_bytes -= f.len();
            }
        }
    }

    /// `held` is the frame again when it was held early (not the one just given).
    fn apply_batch(&mut self, header: BatchHeader, frame: &[u8], held: Option<&Vec<u8>>) {
        match self.index.apply_batch(frame) {
            Ok((_, refused)) => {
                self.next = header.end();
                self.announced = header.known;
                if header.snapshot_complete {
                    self.complete = true;
                }
                self.listed_reached();
                let persist = self.config.ack_after_persist;
                self.events.push_back(ReceiverEvent::Applied {
                    header,
                    persist: persist.then(|| match held {
                        Some(f) => BatchBytes::Held(f.clone()),
                        None => BatchBytes::Given,
                    }),
                    refused,
                });
                if !persist {
                    self.acked = self.next;
                    self.ack_due = true;
                }
            }
            Err(e) => self.fail_protocol(e.to_string()),
        }
    }

    /// Folders said listed whose position is applied now are taken; all of
    /// them are dropped once the index is complete (every folder is whole).
    fn listed_reached(&mut self) {
        if self.complete {
            self.listed = HashSet::new();
            self.listed_waiting = Vec::new();
            return;
        }
        let next = self.next;
        let (reached, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.listed_waiting)
            .into_iter()
            .partition(|(upto, _)| *upto <= next);
        self.listed_waiting = waiting;
        for (_, folders) in reached {
            self.take_listed(&folders);
        }
    }

    /// Only folders the index holds are kept: at most one per folder.
    fn take_listed(&mut self, folders: &[EntryId]) {
        for &id in folders {
            if self
                .index
                .get(id)
                .is_some_and(|e| e.kind == linkfs_proto::EntryKind::Dir)
            {
                self.listed.insert(id.0);
            }
        }
    }

    /// Whether the index holds every child of folder `dir` (as the sharer
    /// found them; later changes come as changes do): the whole index is
    /// here, or the sharer said so for a position already applied.
    pub fn folder_listed(&self, dir: EntryId) -> bool {
        self.complete || self.listed.contains(&dir.0)
    }

    /// Folders known whole before the index is complete (0 once it is).
    pub fn folders_listed(&self) -> u64 {
        self.listed.len() as u64
    }

    /// The shell stored every batch up to `end` (exclusive).
    pub fn persisted(&mut self, end: Seq) {
        // `end == acked` too: an empty batch (a resumed session's "complete" marker at
        // the position already acknowledged) is acknowledged all the same, or the
        // sharer resends it until it gives the session up.
        if end >= self.acked && end <= self.next {
            self.acked = end;
            self.ack_due = true;
        }
    }

    fn fail_protocol(&mut self, message: String) {
        if self.state != State::Closed {
            self.out.push_back(
                ReceiverToSender::Goodbye(Goodbye {
                    code: GoodbyeCode::ProtocolError,
                    message: message.clone(),
                })
                .encode(),
            );
        }
        self.end(EndReason::ProtocolError(message));
    }

    /// Ends the session with `reason` (nothing is sent): reads fail with it,
    /// an `Ended` event follows.
    pub fn end(&mut self, reason: EndReason) {
        if self.state == State::Closed {
            return;
        }
        self.state = State::Closed;
        let waiting = self
            .waiting
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        for w in waiting {
            self.events
                .push_back(ReceiverEvent::Read(ReadEvent::Failed {
                    handle: w.handle,
                    error: ReadFailure::SharerGone(reason.to_string()),
                }));
        }
        let handles: Vec<ReadHandle> = self.jobs.keys().copied().collect();
        for h in handles {
            self.fail_job(h, ReadFailure::SharerGone(reason.to_string()));
        }
        self.events.push_back(ReceiverEvent::Ended { reason });
    }

    /// The data channel closed and no new one will come: the session ends.
    pub fn connection_lost(&mut self) {
        self.end(EndReason::ConnectionLost);
    }

    /// The data link was lost, and the shell will try a new one
    /// ([`link_ready`](Self::link_ready)). The index, the position and every
    /// read stay; what was asked and not answered is asked again later, from
    /// the first byte not yet delivered. Nothing is sent meanwhile.
    pub fn link_lost(&mut self) {
        if self.state == State::Closed || self.state == State::Disconnected {
            return;
        }
        if self.state == State::Open {
            // Whatever the index holds is a valid place to resume from.
            self.resume = Some((self.epoch, self.next));
        }
        self.state = State::Disconnected;
        self.out.clear();
        self.ack_due = false;
        self.early.clear();
        self.early_bytes = 0;
        self.requests.clear();
        self.in_flight = 0;
        for job in self.jobs.values_mut() {
            job.next_request = job.delivered;
            job.in_flight = 0;
            job.pending.clear();
        }
        self.events.push_back(ReceiverEvent::LinkLost);
    }

    /// A new data link is open: the session starts again with a Hello that
    /// resumes where the index is.
    pub fn link_ready(&mut self) {
        if self.state != State::Disconnected {
            return;
        }
        self.state = State::AwaitingWelcome;
        self.hello_sent_at = Millis(0);
        self.out.push_back(self.hello());
    }

    /// Whether the session waits for a new data link.
    pub fn is_disconnected(&self) -> bool {
        self.state == State::Disconnected
    }

    /// Ends the session from this side: a goodbye goes out (take it with
    /// [`Receiver::poll_transmit`]), reads fail, an `Ended` event follows.
    pub fn close(&mut self) {
        if self.state == State::Closed {
            return;
        }
        if self.state == State::Open {
            self.out.push_back(
                ReceiverToSender::Goodbye(Goodbye {
                    code: GoodbyeCode::ShuttingDown,
                    message: "the receiver closed the session".into(),
                })
                .encode(),
            );
        }
        self.end(EndReason::ClosedHere);
    }

    /// The link's password, which the sharer asked for
    /// ([`ReceiverEvent::PasswordNeeded`]); it travels on the data link,
    /// encrypted, to the sharer the handshake authenticated.
    pub fn give_password(&mut self, password: &str) {
        if self.state == State::Closed {
            return;
        }
        self.out
            .push_back(ReceiverToSender::Password(password.to_owned()).encode());
    }

    /// Starts reading `len` bytes at `offset` of a file in the index (while
    /// the index is awaited, the read waits for it). With `Some(generation)`,
    /// a file the index now holds at another generation is refused
    /// ([`StartReadError::Changed`]), so the pieces of one download never mix
    /// two versions; `None` reads whatever version the index holds.
    pub fn start_read(
        &mut self,
        entry: EntryId,
        version: Option<Generation>,
        offset: u64,
        len: u64,
    ) -> Result<ReadHandle, StartReadError> {
        if self.state == State::Closed {
            return Err(StartReadError::Closed);
        }
        let open = self.jobs.len() + self.waiting.as_ref().map_or(0, Vec::len);
        if open >= self.config.max_reads {
            return Err(StartReadError::TooMany(self.config.max_reads));
        }
        let handle = ReadHandle(self.next_handle);
        if let Some(waiting) = &mut self.waiting {
            waiting.push(WaitingRead {
                handle,
                entry,
                version,
                offset,
                len,
            });
        } else {
            self.begin_read(handle, entry, version, offset, len)?;
        }
        self.next_handle = self.next_handle.wrapping_add(1).max(1);
        Ok(handle)
    }

    /// Checks a read against the index and opens its job under `handle`.
    fn begin_read(
        &mut self,
        handle: ReadHandle,
        entry: EntryId,
        version: Option<Generation>,
        offset: u64,
        len: u64,
    ) -> Result<(), StartReadError> {
        let e = self
            .index
            .get(entry)
            .ok_or(StartReadError::NoSuchEntry(entry))?;
        if e.kind != EntryKind::File {
            return Err(StartReadError::NotAFile(entry, e.kind.as_str()));
        }
        if let Some(asked) = version
            && asked != e.generation
        {
            return Err(StartReadError::Changed {
                asked: asked.0,
                now: e.generation.0,
            });
        }
        let end = offset.checked_add(len).filter(|end| *end <= e.size).ok_or(
            StartReadError::OutOfRange {
                offset,
                len,
                size: e.size,
            },
        )?;
        if len == 0 {
            self.events
                .push_back(ReceiverEvent::Read(ReadEvent::Done { handle }));
            return Ok(());
        }
        self.jobs.insert(
            handle,
            Job {
                entry,
                generation: e.generation,
                end,
                next_request: offset,
                delivered: offset,
                delivered_at: None,
                heard_at: Millis(0),
                in_flight: 0,
                pending: BTreeMap::new(),
                retries: 0,
            },
        );
        Ok(())
    }

    /// Stops a read; no more events come for it.
    pub fn cancel_read(&mut self, handle: ReadHandle) {
        if let Some(waiting) = &mut self.waiting {
            waiting.retain(|w| w.handle != handle);
        }
        self.drop_job(handle);
    }

    fn drop_job(&mut self, handle: ReadHandle) -> bool {
        if self.jobs.remove(&handle).is_none() {
            return false;
        }
        let ids: Vec<ReadId> = self
            .requests
            .iter()
            .filter(|(_, r)| r.job == handle)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(r) = self.requests.remove(&id) {
                self.in_flight -= u64::from(r.len - r.received_bytes);
                if self.state == State::Open {
                    self.out
                        .push_back(ReceiverToSender::CancelRead { read: id }.encode());
                }
            }
        }
        true
    }

    fn fail_job(&mut self, handle: ReadHandle, error: ReadFailure) {
        if self.drop_job(handle) {
            self.events
                .push_back(ReceiverEvent::Read(ReadEvent::Failed { handle, error }));
        }
    }

    fn handle_chunk(
        &mut self,
        now: Millis,
        read: ReadId,
        offset: u64,
        hash: &[u8; 32],
        data: &[u8],
    ) {
        let Some(req) = self.requests.get_mut(&read) else {
            // A cancelled or already completed request.
            return;
        };
        let handle = req.job;
        let req_end = req.offset + u64::from(req.len);
        let len = data.len() as u64;
        // The offset is the sharer's: checked arithmetic (an offset near 2^64
        // wrapped around and was taken for a chunk inside the request).
        if data.is_empty()
            || len > CHUNK_LEN as u64
            || offset < req.offset
            || offset.checked_add(len).is_none_or(|end| end > req_end)
        {
            return self.fail_job(handle, ReadFailure::Corrupt);
        }
        let pos = req.received.partition_point(|(o, _)| *o < offset);
        if req.received.get(pos).is_some_and(|(o, _)| *o == offset) {
            return; // duplicate
        }
        // Inside a hole handed to another request: a late copy.
        if pos > 0 && {
            let (o, l) = req.received[pos - 1];
            offset + len <= o + u64::from(l)
        } {
            return;
        }
        let overlaps_prev =
            pos > 0 && req.received[pos - 1].0 + u64::from(req.received[pos - 1].1) > offset;
        let overlaps_next = req
            .received
            .get(pos)
            .is_some_and(|(o, _)| offset + len > *o);
        if overlaps_prev || overlaps_next {
            return self.fail_job(handle, ReadFailure::Corrupt);
        }
        let Some(job) = self.jobs.get(&handle) else {
            return;
        };
        if chunk_hash(job.entry, job.generation, offset, data) != *hash {
            return self.fail_job(handle, ReadFailure::Corrupt);
        }
        req.received.insert(pos, (offset, len as u32));
        req.received_bytes += len as u32;
        req.last_progress = now;
        let req_done = req.received_bytes == req.len;
        if req_done {
            self.requests.remove(&read);
        }
        self.in_flight -= len;
        let Some(job) = self.jobs.get_mut(&handle) else {
            return;
        };
        job.in_flight -= len;
        job.heard_at = now;
        job.pending.insert(offset, data.to_vec());
        while let Some(data) = job.pending.remove(&job.delivered) {
            let at = job.delivered;
            job.delivered += data.len() as u64;
            job.delivered_at = Some(now);
            self.events.push_back(ReceiverEvent::Read(ReadEvent::Data {
                handle,
                offset: at,
                data,
            }));
        }
        if job.delivered >= job.end {
            let entry = job.entry;
            self.jobs.remove(&handle);
            // Its file's other reads heard from the file now.
            for j in self.jobs.values_mut().filter(|j| j.entry == entry) {
                j.heard_at = j.heard_at.max(now);
            }
            self.events
                .push_back(ReceiverEvent::Read(ReadEvent::Done { handle }));
        }
    }

    fn issue_requests(&mut self, now: Millis) {
        if self.state != State::Open || self.jobs.is_empty() {
            return;
        }
        let request_len = u64::from(self.config.request_len.min(self.max_read));
        let mut idle_rounds = 0;
        while self.in_flight < self.config.max_in_flight_bytes
            && self.requests.len() < self.max_requests
            && idle_rounds < 2
        {
            // Round-robin: the next job after the cursor that wants more bytes.
            let after = self.rr_cursor.map_or(0, |h| h.0.wrapping_add(1));
            let pick = self
                .jobs
                .range(ReadHandle(after)..)
                .chain(self.jobs.range(..ReadHandle(after)))
                .find(|(_, j)| {
                    j.next_request < j.end && j.in_flight < self.config.max_job_in_flight_bytes
                })
                .map(|(h, _)| *h);
            let Some(handle) = pick else {
                idle_rounds += 1;
                self.rr_cursor = None;
                continue;
            };
            self.rr_cursor = Some(handle);
            let Some(job) = self.jobs.get_mut(&handle) else {
                break;
            };
            job.delivered_at.get_or_insert(now);
            let len = (job.end - job.next_request).min(request_len) as u32;
            let offset = job.next_request;
            job.next_request += u64::from(len);
            job.in_flight += u64::from(len);
            let (entry, generation) = (job.entry, job.generation);
            self.send_request(now, handle, entry, generation, offset, len);
        }
    }

    fn send_request(
        &mut self,
        now: Millis,
        job: ReadHandle,
        entry: EntryId,
        generation: Generation,
        offset: u64,
        len: u32,
    ) {
        let read = ReadId(self.next_read_id);
        self.next_read_id = self.next_read_id.wrapping_add(1).max(1);
        self.in_flight += u64::from(len);
        self.requests.insert(
            read,
            Request {
                job,
                offset,
                len,
                received: Vec::new(),
                received_bytes: 0,
                last_progress: now,
            },
        );
        self.out.push_back(
            ReceiverToSender::Read(ReadRequest {
                read,
                entry,
                generation,
                offset,
                len,
            })
            .encode(),
        );
    }

    /// The next frame to send, if any.
    pub fn poll_transmit(&mut self, now: Millis) -> Option<Vec<u8>> {
        if self.state == State::AwaitingWelcome && self.hello_sent_at == Millis(0) {
            self.hello_sent_at = Millis(now.0.max(1));
        }
        if let Some(f) = self.out.pop_front() {
            return Some(f);
        }
        if self.state != State::Open {
            return None;
        }
        if self.ack_due {
            self.ack_due = false;
            return Some(ReceiverToSender::Ack { next: self.acked }.encode());
        }
        self.issue_requests(now);
        self.out.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Millis> {
        if self.state == State::AwaitingWelcome {
            return Some(Millis(self.hello_sent_at.0 + self.config.retry_ms));
        }
        let hedge = self.held_up_reads().into_iter().map(|(_, at)| at).min();
        self.requests
            .values()
            .map(|r| Millis(self.stalls_at(r)))
            .min()
            .into_iter()
            .chain(hedge)
            .min()
    }

    /// Reads whose next bytes are their file's first outstanding ones while
    /// later bytes of the file came since they last moved, and when they are
    /// due to be asked for again (module docs).
    fn held_up_reads(&self) -> Vec<(ReadHandle, Millis)> {
        if self.config.hedge_ms == 0 || self.requests.len() >= self.max_requests {
            return Vec::new();
        }
        // Per file: its read furthest behind, and when any of its chunks last came.
        let mut files: HashMap<EntryId, (ReadHandle, u64, Millis, Millis)> = HashMap::new();
        for (h, j) in &self.jobs {
            let Some(moved) = j.delivered_at.filter(|_| j.delivered < j.end) else {
                continue;
            };
            let f = files
                .entry(j.entry)
                .or_insert((*h, j.delivered, moved, j.heard_at));
            f.3 = f.3.max(j.heard_at);
            if j.delivered < f.1 {
                (f.0, f.1, f.2) = (*h, j.delivered, moved);
            }
        }
        files
            .into_values()
            .filter(|(_, _, moved, heard)| heard.0 > moved.0)
            .map(|(h, _, moved, _)| (h, Millis(moved.0.saturating_add(self.config.hedge_ms))))
            .collect()
    }

    /// Asks again, in a new request, for the next bytes of reads held up for
    /// `hedge_ms` (module docs).
    fn hedge_held_up(&mut self, now: Millis) {
        for (handle, due) in self.held_up_reads() {
            if now < due || self.requests.len() >= self.max_requests {
                continue;
            }
            let Some(job) = self.jobs.get_mut(&handle) else {
                continue;
            };
            job.delivered_at = Some(now);
            let (at, entry, generation) = (job.delivered, job.entry, job.generation);
            let Some((id, (offset, len))) = self
                .requests
                .iter()
                .filter(|(_, r)| r.job == handle)
                .find_map(|(id, r)| r.missing_from(at).map(|m| (*id, m)))
            else {
                continue;
            };
            let len = len.min(HEDGE_MAX_BYTES);
            let Some(req) = self.requests.get_mut(&id) else {
                continue;
            };
            let pos = req.received.partition_point(|(o, _)| *o < offset);
            req.received.insert(pos, (offset, len));
            req.received_bytes += len;
            if req.received_bytes == req.len {
                self.requests.remove(&id);
            }
            self.in_flight -= u64::from(len);
            self.send_request(now, handle, entry, generation, offset, len);
        }
    }

    /// When `req` counts as stalled: `retry_ms` after its own last progress
    /// and after the last frame from the sender. Over a slow link a request
    /// queued behind megabytes of others waits long for its first byte while
    /// the link is busy; asking again then would only queue it once more
    /// (and fail the read after `max_retries`). A link that goes quiet, or a
    /// request lost while others flow and the flow then ends, is asked again.
    /// Whatever else the sender sends, a request without progress for
    /// [`STALL_CAP`] × `retry_ms` (a minute by default) is stalled: a sharer
    /// that keeps the link busy cannot hang a read forever.
    fn stalls_at(&self, req: &Request) -> u64 {
        let retry = self.config.retry_ms;
        let quiet = req
            .last_progress
            .0
            .max(self.last_heard.0)
            .saturating_add(retry);
        let cap = req
            .last_progress
            .0
            .saturating_add(retry.saturating_mul(STALL_CAP));
        quiet.min(cap)
    }

    /// Asks again for whatever a stalled request is missing, and for the
    /// next bytes of reads held up for `hedge_ms`.
    pub fn handle_timeout(&mut self, now: Millis) {
        if self.state == State::AwaitingWelcome
            && now.0 >= self.hello_sent_at.0 + self.config.retry_ms
        {
            // Hello or Welcome was lost; asking again is harmless.
            self.hello_sent_at = now;
            self.out.push_back(self.hello());
        }
        if self.state != State::Open {
            return;
        }
        self.hedge_held_up(now);
        let stalled: Vec<ReadId> = self
            .requests
            .iter()
            .filter(|(_, r)| now.0 >= self.stalls_at(r))
            .map(|(id, _)| *id)
            .collect();
        // A job's requests that stall together (the link went quiet) are one
        // retry of the job, not one per request in flight.
        let mut retried: Vec<ReadHandle> = Vec::new();
        for id in stalled {
            let Some(req) = self.requests.remove(&id) else {
                continue;
            };
            self.in_flight -= u64::from(req.len - req.received_bytes);
            self.out
                .push_back(ReceiverToSender::CancelRead { read: id }.encode());
            let Some(job) = self.jobs.get_mut(&req.job) else {
                continue;
            };
            if !retried.contains(&req.job) {
                retried.push(req.job);
                job.retries += 1;
            }
            if job.retries > self.config.max_retries {
                self.fail_job(req.job, ReadFailure::TimedOut);
                continue;
            }
            let (entry, generation) = (job.entry, job.generation);
            let mut gaps = Vec::new();
            let mut at = req.offset;
            for (o, l) in req
                .received
                .iter()
                .chain([(req.offset + u64::from(req.len), 0)].iter())
            {
                if *o > at {
                    gaps.push((at, (*o - at) as u32));
                }
                at = at.max(*o + u64::from(*l));
            }
            for (offset, len) in gaps {
                self.send_request(now, req.job, entry, generation, offset, len);
            }
        }
    }
}
