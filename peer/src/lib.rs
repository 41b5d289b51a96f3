//! The native linkfs peer: the `linkfs` command's library.
//!
//! - [`walk`]: the parallel folder walk (one `lstat` per entry, dense ids,
//!   streamed in bounded batches, symlinks never followed).
//! - [`transport`]: webrtc-rs peer connections carrying linkfs frames over one
//!   data channel, with the settings measured to work on this project's machines.
//! - [`signal_client`]: the relay's WebSocket from a native peer.
//! - [`sharer`]: `linkfs share` wired together: the embedded (or external)
//!   relay, the walk feeding the share index, one sender session per visitor,
//!   and safe file reads beneath the shared root.
//! - [`visit`]: the native receiver (`linkfs mount`, `ls`, `get`): reaching a
//!   sharer from a link, the core receiver in one loop, the FUSE filesystem and
//!   the downloader.
//!
//! The protocol logic itself is `linkfs-core` (sans-IO); everything here is
//! IO around it. `main.rs` is the command-line glue.

pub mod sharer;
pub mod signal_client;
pub mod transport;
pub mod visit;
pub mod walk;
