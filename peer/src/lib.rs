//! The native linkfs peer: the `linkfs` command's library.
//!
//! - [`walk`]: the parallel folder walk (one `lstat` per entry, dense ids,
//!   streamed in bounded batches, symlinks never followed).
//! - [`transport`]: webrtc-rs peer connections carrying linkfs frames over one
//!   data channel, with the settings measured to work on this project's machines.
//! - [`relay_client`]: the relay's WebSocket from a native peer; what travels
//!   on it is `linkfs_core::signaling`'s business (the handshake, once).
//! - [`drive`]: the one loop that runs any core session (the sharer's or the
//!   receiver's) over any data link (WebRTC, or in memory for tests).
//! - [`lanes`]: one session's read chunks over several peer connections, so
//!   a lossy long path is filled (a loss halves one window of several); when
//!   a visitor opens them is `linkfs_core::lanes::LaneSet`'s.
//! - [`random`]: the system's random source, in one place.
//! - [`local_addrs`]: this machine's addresses: which one a link to a relay on
//!   every interface names (the default route's), and what WebRTC binds.
//! - [`terminal`]: outside text (names, messages) with control characters
//!   escaped before it reaches a terminal.
//! - [`sharer`]: `linkfs share` wired together, the shell of
//!   `linkfs_core::share::Share` (links, rights, visitors, passwords): the
//!   embedded (or external) relay, the walk feeding the share index (or the
//!   saved index compared with the folder), the folder watch keeping it
//!   current, the link and index kept per folder between runs, one sender
//!   session per visitor, and safe file reads beneath the shared root.
//! - [`visit`]: the native receiver (`linkfs mount`, `ls`, `get`): reaching a
//!   sharer from a link, the core visit in one loop, the FUSE filesystem and
//!   the downloader.
//!
//! The protocol logic itself is `linkfs-core` (sans-IO); everything here is
//! IO around it. `main.rs` is the command-line glue.

pub mod disk_entry;
pub mod drive;
pub mod lanes;
pub mod local_addrs;
pub mod random;
pub mod relay_client;
pub mod sharer;
pub mod terminal;
pub mod transport;
pub mod visit;
pub mod walk;
