//! The linkfs wire: data-channel frames, index batches and signaling messages.
//!
//! # Protocol flow (one data channel, one receiver)
//!
//! ```text
//! receiver                                              sender (the sharer)
//!   |-- Hello {version, resume: (epoch, next seq)?} ------->|
//!   |<-- Welcome {version, epoch, start seq, limits} -------|  start 0 = fresh snapshot
//!   |<-- IndexBatch {first seq, known, ops...} -------------|  streamed while the walk runs,
//!   |<-- IndexBatch ... ------------------------------------|  at most WINDOW unacked bytes
//!   |<-- FoldersListed {upto seq, folder ids} --------------|  after a batch: these folders are whole
//!   |-- Ack {next seq} ------------------------------------>|  after applying (and persisting)
//!   |-- Read {read id, entry id, generation, offset, len} ->|  any time, several at once
//!   |<-- ReadChunk {read id, offset, blake3, bytes} --------|  checked before use
//!   |<-- ReadError {read id, code, message} ----------------|
//!   |<-- Goodbye / --> Goodbye -----------------------------|
//! ```
//!
//! Lanes ([`lane`]): a sharer's first frame on a session's link may be a
//! `LaneOffer`; a receiver at a distance may then open more connections whose
//! only frame is `LaneJoin` and which carry `ReadChunk`s of that session. Both
//! frames are the shells'; sessions decode them as `Unknown`.
//!
//! Every frame is one data-channel message of at most [`MAX_FRAME_LEN`] bytes
//! (60 KiB: below the 64 KiB `max-message-size` webrtc-rs advertises, with room
//! to spare). Every frame begins with a type byte; unknown types decode as
//! `Unknown` and are skipped, so frames can be added without a version bump.
//! Incompatible changes bump [`PROTOCOL_VERSION`]; both sides still speak every
//! version from [`MIN_PROTOCOL_VERSION`] up, the sharer in the receiver's.
//!
//! Index entries are coded by [`batch`]: ids implicit, parent/mtime/id as deltas,
//! names front-coded against the previous name, modes sent once per batch.
//! Reads name an entry id, its generation and a byte range, never a path.
//! Signaling ([`signal`]) is JSON through the relay with sealed payloads.
//!
//! Nothing here does IO; decoders never panic and never allocate more than their
//! input.

pub mod batch;
pub mod entry;
pub mod error;
pub mod frame;
pub mod ids;
pub mod lane;
pub mod listed;
pub mod sharer_key;
pub mod signal;
pub mod upload;
pub mod varint;
pub mod vectors;

pub use batch::{BatchEncoder, BatchHeader, BatchReader, decode_batch};
pub use entry::{Entry, EntryKind, EntryView, IndexOp, OpView};
pub use error::DecodeError;
pub use frame::{
    Goodbye, GoodbyeCode, Hello, ReadChunk, ReadError, ReadErrorCode, ReadRequest,
    ReceiverToSender, SenderToReceiver, Welcome, chunk_hash,
};
pub use ids::{EntryId, Epoch, Generation, ReadId, Seq};
pub use lane::{FRAME_LANE_JOIN, FRAME_LANE_OFFER, LaneJoin, LaneOffer, LaneToken};
pub use listed::{FRAME_FOLDERS_LISTED, FoldersListed, encode_folders_listed};
pub use upload::{
    FRAME_RIGHTS, FRAME_UPLOAD_ACK, FRAME_UPLOAD_BEGIN, FRAME_UPLOAD_CANCEL, FRAME_UPLOAD_CHUNK,
    FRAME_UPLOAD_DONE, FRAME_UPLOAD_READY, FRAME_UPLOAD_REFUSED, FRAME_UPLOAD_WINDOW, Rights,
    SESSION_UPLOAD_WINDOW, UPLOAD_CHUNK_LEN, UPLOAD_WINDOW, UploadBegin, UploadChunk, UploadDone,
    UploadId, UploadReady, UploadRefusal, UploadRefused, encode_upload_chunk_into,
    upload_chunk_hash,
};

/// Version of the data-channel protocol this build speaks. 2: index batches in
/// columns ([`batch`]).
pub const PROTOCOL_VERSION: u16 = 2;
/// The oldest version this build still speaks: a receiver says its version in
/// `Hello`, and the sharer answers in it (batches of version 1 are interleaved);
/// a receiver takes a `Welcome` of any version from this one to its own.
pub const MIN_PROTOCOL_VERSION: u16 = 1;

/// Hard cap on every data-channel frame, either direction: 61,440 bytes (60 KiB).
/// webrtc-rs advertises `max-message-size:65536`; Chromium 262,144.
pub const MAX_FRAME_LEN: usize = 60 * 1024;

pub use frame::CHUNK_LEN;

/// The data-channel label both sides use.
pub const CHANNEL_LABEL: &str = "linkfs/1";

pub const FRAME_WELCOME: u8 = 0x01;
pub const FRAME_HELLO: u8 = 0x02;
/// The sharer: this link asks for a password (before anything of the share).
pub const FRAME_PASSWORD_NEEDED: u8 = 0x03;
/// The receiver: the password, over the link's encrypted, sharer-authenticated channel.
pub const FRAME_PASSWORD: u8 = 0x04;
pub const FRAME_INDEX_BATCH: u8 = 0x10;
pub const FRAME_ACK: u8 = 0x11;
pub const FRAME_READ_CHUNK: u8 = 0x20;
pub const FRAME_READ_ERROR: u8 = 0x21;
pub const FRAME_READ: u8 = 0x22;
pub const FRAME_CANCEL_READ: u8 = 0x23;
pub const FRAME_GOODBYE: u8 = 0x7f;
