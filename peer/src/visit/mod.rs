//! The native receiver: what `linkfs mount`, `linkfs ls` and `linkfs get` share.
//!
//! ```text
//!  link --connect (guest signaling, webrtc-rs offer)--> DataLink
//!  DataLink --client (core Receiver in one select! loop)--> Client
//!  Client: with_index (list, lookup, stat: local, no round trip)
//!          read / read_blocking (entry id + offset + len, verified chunks)
//!  mount: fuser over a Client;  get: files and folders written beneath --out
//! ```
//!
//! The receiver logic is `linkfs-core`'s [`linkfs_core::Receiver`], exactly what
//! the browser runs; this module adds only IO. The native index lives in memory
//! for the life of the command (no persistence: a native peer reconnects in under
//! a second and the index of 1M entries arrives in seconds).

mod client;
mod connect;
pub mod get;
pub mod listing;
pub mod mount;

pub use client::{
    COMMAND_QUEUE, Client, MAX_READ_LEN, MAX_REFUSALS_KEPT, ReadError, Status,
    native_receiver_config,
};
pub use connect::{connect, relay_is_local};

use linkfs_core::ShareLink;

use crate::signal_client::SignalError;
use crate::transport::{TransportConfig, TransportError};

/// Why a native receiver could not reach or use a share.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VisitError {
    #[error("this is not a linkfs link: {0} (a link looks like http://host:port/#room.secret)")]
    BadLink(String),
    #[error(
        "this link is not valid: its secret does not match the share (copy the whole link, including everything after #)"
    )]
    InvalidLink,
    #[error("the share is not there any more: the sharer stopped sharing, or the link is old")]
    SharerGone,
    #[error("the sharer turned the connection down: {0}")]
    Refused(String),
    #[error("the relay says: {0}")]
    Relay(String),
    #[error("the relay closed the connection before the sharer answered")]
    RelayClosed,
    #[error(transparent)]
    Signal(#[from] SignalError),
    #[error("could not connect to the sharer: {0}")]
    Transport(#[from] TransportError),
    #[error(
        "no connection to the sharer after {0:?} (is the sharer on a network this machine can reach?)"
    )]
    Timeout(std::time::Duration),
    #[error("the system's random source failed: {0}")]
    Random(String),
    #[error("the index did not arrive: {0}")]
    Index(String),
}

/// Parses `link`, connects and starts a [`Client`]; does not wait for the index.
pub async fn open(link: &str, transport: &TransportConfig) -> Result<Client, VisitError> {
    let link = ShareLink::parse(link).map_err(|e| VisitError::BadLink(e.to_string()))?;
    let data = connect(&link, transport).await?;
    Ok(Client::start(data, native_receiver_config()))
}
