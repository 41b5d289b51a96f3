//! The native WebRTC transport: webrtc-rs peer connections carrying linkfs frames over
//! one data channel (label [`linkfs_proto::CHANNEL_LABEL`], ordered, reliable).
//!
//! # Shape
//!
//! ```text
//!  signaling (not here: the relay loop)          this module
//!  ------------------------------------          -----------
//!  offer SDP  ------------------------------->  Handshake::answer(config, offer) -> answer SDP
//!  answer SDP <-------------------------------  (or Handshake::offer(config) / apply_answer)
//!  candidates <-> IceCandidate  <------------>  next_event: LocalCandidate | add_remote_candidate
//!                                               next_event: Open(DataLink)
//!  the sender/receiver core  <-- frames -->     DataLink: send / recv / close, or split()
//! ```
//!
//! - [`Handshake`] negotiates one connection. SDP goes in and out as strings and
//!   candidates as [`IceCandidate`] (the fields of
//!   [`SignalPayload::Candidate`](linkfs_proto::signal::SignalPayload::Candidate)).
//!   The sharer answers; a native receiver offers. Early remote candidates are held
//!   by the signaling machine (`linkfs_core::signaling`), not here.
//! - [`DataLink`] is the open channel: `send(frame)` with backpressure, `recv()` until
//!   `None`, `close()`; [`DataLink::split`] gives halves for one `select!` loop.
//! - [`TransportConfig`] holds ICE servers, bind addresses, the send-buffer limit,
//!   socket buffers and the timeouts; its defaults are the settings measured on the
//!   project's test machine (`docs/webrtc-notes.md`), safe for browser peers.
//! - [`NativeTuning`] (in [`TransportConfig::native_peer`]) applies only where both
//!   ends are native: a native offer carries [`NATIVE_PEER_MARKER`], and the answering
//!   sharer tunes that one connection ([`NativeTuning::ANY_PATH`] by default: a 64 KiB
//!   send-buffer limit instead of the browser-safe 32 KiB). [`NativeTuning::SAME_HOST`] (16 KiB SCTP
//!   packets, 256 KiB send buffer, 4 MiB sockets) lifts native <-> native throughput
//!   on one host from about 320 to about 840 MB/s (`linkfs-bench-channel`).
//! - [`connect_in_process`] connects two real peers in one process, for tests and
//!   benchmarks of whatever runs over a link.
//!
//! # Bounds
//!
//! | what | bound |
//! | --- | --- |
//! | frame | [`linkfs_proto::MAX_FRAME_LEN`] (60 KiB) each way; larger is refused (send) or ends the link (receive) |
//! | unacknowledged bytes per channel | [`TransportConfig::send_window`]: paced, sized to the path, 32 KiB to 4 MiB toward browsers and 64 KiB to 8 MiB between native peers; a fixed 256 KiB with [`NativeTuning::SAME_HOST`]; + one frame |
//! | outbox per link | [`OUTBOX_FRAMES`] frames |
//! | received, unread | webrtc-rs's two 256-message queues + the 1 MiB SCTP window (about 33 MiB with full frames) |
//! | local candidates waiting | [`LOCAL_CANDIDATE_QUEUE`] |
//! | remote candidates before the answer | `linkfs_core::signaling::EARLY_CANDIDATE_LIMIT` (held there) |
//! | kernel buffer per UDP socket | [`TransportConfig::socket_buffer`] (1 MiB default) |
//! | time to open | [`TransportConfig::connect_timeout`] (15 s default) |
//! | silence before the link counts as lost | [`TransportConfig::lost_after`] (4 s default) |
//!
//! # webrtc-rs notes
//!
//! webrtc-rs 0.21 runs each connection on a driver task and calls the event handler on
//! it; the handler here never waits on the application (see `connection.rs`). Each UDP
//! address is bound explicitly (a wildcard bind skips loopback candidates), native mDNS
//! is off (remote `.local` candidates are ignored), ICE checks run every 50 ms and a
//! peer-reflexive pair is used at once (webrtc-rs waits 1 s by default), and a peer
//! connection is always closed explicitly (webrtc-rs keeps its driver and sockets
//! otherwise). Native <-> native on this machine the channel opens in about 0.46 s,
//! most of it SCTP's 200 ms delayed acknowledgement, twice.

mod candidate;
mod config;
mod connection;
mod error;
mod handshake;
mod link;
pub mod pace;
mod pair;
mod relay_pump;
mod sockets;

pub use config::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_LOST_AFTER, DEFAULT_SEND_BUFFER_LIMIT, DEFAULT_SOCKET_BUFFER,
    IcePolicy, NativeTuning, SendWindow, TransportConfig, UnknownIcePolicy, default_bind_addrs,
};
pub use connection::{LOCAL_CANDIDATE_QUEUE, Route};
pub use error::{LinkClosed, LinkError, TransportError};
pub use handshake::{Handshake, HandshakeEvent, NATIVE_PEER_MARKER, is_from_native_peer};
pub use link::{
    CLOSE_FLUSH_TIMEOUT, DataLink, DataLinkSender, LinkReceiver, LinkSender, OUTBOX_FRAMES,
    PathProbe, SendPermit,
};
pub use linkfs_core::IceCandidate;
pub use pair::connect_in_process;
