//! linkfs core: the sans-IO logic shared by the native peer and the browser.
//!
//! Nothing here touches a socket, a file, a clock or a thread. Shells feed
//! frames, time and IO results in, and take frames, events and IO requests out:
//!
//! - [`share_index::ShareIndex`]: the sharer's index and its log of operations.
//! - [`sender::SenderSession`]: one receiver's session on the sharer's side:
//!   streams the log as bounded, sequenced batches inside a window of
//!   unacknowledged bytes, checks and serves reads chunk by chunk.
//! - [`receiver::Receiver`]: the receiving side: applies batches in order into
//!   an [`index::Index`], acknowledges (after persisting, where the shell
//!   persists), schedules pipelined reads and checks every chunk's BLAKE3 hash.
//! - [`persist::PersistentReceiver`]: the receiver of a shell that keeps the
//!   index in storage (the browser): one write at a time, acknowledgements
//!   after commit, the rebuild on the next visit, the "complete" rule.
//! - [`visit::Visit`]: the whole receiving side of one share, over the two
//!   above: the data link's life (connect, reconnect with backoff, the grace
//!   for a restarting sharer, when to give up and why, the status a user
//!   sees), the stepped restore of a stored index and the snapshots, the
//!   journal of changed folders, reads. One `poll_output()`; the browser's
//!   worker and the native receiver only carry its IO.
//! - [`index::Index`]: the compact, column-wise receiver index with lazy sorted
//!   listings and binary-search lookups.
//! - [`search::Search`]: whole-share name search over that index, step by
//!   step (case-folded, NFC-normalised, substring or `*`/`?` glob).
//! - [`signaling`]: the handshake through the relay, once: a guest machine
//!   (browser and native receiver) and a host machine (the sharer) trading
//!   sealed offers, answers and candidates until the data link opens.
//! - [`seal`] and [`link`]: share links and the sealing of signaling payloads
//!   with a key derived from the link's secret.
//!
//! - [`lanes::LaneSet`]: a receiver's lanes (more peer connections for one
//!   session's read chunks) from the first to the last, with
//!   [`lanes::LaneGate`], when they open, inside; the native receiver and the
//!   page only connect and close what it says.
//! - [`backoff::Backoff`]: when to try again after a lost connection (the
//!   browser, the native receiver and the sharer's relay connection share it).
//! - [`settle::Settler`]: changes on disk settle before they are announced (a
//!   per-path debounce and a periodic flush; a rescan when events were lost).
//! - [`password_gate::PasswordGate`]: guesses at a link's password, counted
//!   before they are tried, per address and per link.
//! - [`part_index::PartIndex`]: what a link that shows one folder or a
//!   selection sees, as an index of its own following the whole share's
//!   (the tab sharer's scoped links).
//! - [`sim`]: a lossy, reordering simulated link and a deterministic PRNG, for
//!   tests of anything that drives a session.
//!
//! The same code compiles for the native peer and for wasm32 in the browser.
//! Time is [`Millis`] from any monotonic clock the shell has.

pub mod backoff;
pub mod index;
pub mod lanes;
pub mod link;
pub mod part_index;
pub mod password_gate;
pub mod persist;
pub mod receiver;
pub mod seal;
pub mod search;
pub mod selection;
pub mod sender;
pub mod settle;
pub mod share;
pub mod share_index;
pub mod signaling;
pub mod sim;
pub mod upload_name;
pub mod uploads_in;
pub mod uploads_out;
pub mod visit;

pub use backoff::{Backoff, BackoffConfig, Retry};
pub use index::{
    EntryRef, Index, IndexChange, IndexError, JOURNAL_LIMIT, Place, SnapshotError, SnapshotParts,
    SnapshotRestorer, SortKey, UnknownSortKey, display_cmp,
};
pub use lanes::{
    FRAME_HEAD_BYTES, LANE_AFTER_BYTES, LANE_BELOW_RATE, LANE_END_GRACE, LANE_MIN_RTT,
    LANE_SAMPLE_BYTES, LANE_SAMPLE_TIME, LaneDo, LaneNo, LaneSet, MAX_LANES, lane_may_carry,
};
pub use link::{LinkError, ShareLink, ShareSecret};
pub use part_index::PartIndex;
pub use password_gate::{GuessSource, GuessTicket, PasswordGate};
pub use persist::{
    PersistentReceiver, Rebuilder, Rebuilt, SNAPSHOT_MIN_BATCHES, SNAPSHOT_QUIET_MS, StorageError,
    StoreOp, StoreWrite, StoredEvent, StoredFrame, StoredProgress, StoredSnapshot, StoredState,
    rebuild,
};
pub use receiver::{
    BatchBytes, EndReason, FailureKind, HEDGE_MAX_BYTES, Progress, ReadEvent, ReadFailure,
    ReadHandle, Receiver, ReceiverConfig, ReceiverEvent, STALL_CAP, StartReadError,
};
pub use seal::{Direction, NonceSequence, SealError, SignalKey};
pub use search::{MAX_RESULTS, NamePattern, Search, SearchStep};
pub use selection::{MAX_SELECTED_PATHS, Selection, SelectionError};
pub use sender::{
    IoFailure, MAX_RETRANSMITS, ReadIo, SHORT_READ, SHORT_READ_EXTRA_IO, STOPPED_READING_MS,
    SenderConfig, SenderOutput, SenderSession, SenderStats, SessionError, target_leaves_root,
};
pub use settle::{Ready, SettleConfig, Settler};
pub use share_index::{
    CTIME_UNKNOWN, FolderSort, LogOp, NewEntry, ReadTarget, SavedIndexError, ShareIndex,
    ShareIndexError, SortStep, change_stamp, ctime_ns,
};
pub use signaling::{
    GuestAction, GuestFailure, GuestSignaling, HostAction, HostFailure, HostSignaling,
    IceCandidate, LinkEnd, LinkId, MAX_LINK_KEYS, Refusal, TooManyLinks,
};
pub use uploads_in::{
    MAX_CLOSING, MAX_UPLOADS, UploadIo, UploadResult, UploadViolation, UploadsIn,
};
pub use uploads_out::{UploadEvent, UploadNews, UploadsOut};
pub use visit::{
    IndexChanges, LoadRequest, Output, SnapshotFigures, Storage, StoreJob, Visit, VisitConfig,
    VisitEvent, VisitProgress, VisitStatus,
};

/// Milliseconds on the shell's monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Millis(pub u64);
