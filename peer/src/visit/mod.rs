//! The native receiver: what `linkfs mount`, `linkfs ls` and `linkfs get` share.
//!
//! ```text
//!  link --connect (core's GuestSignaling, webrtc-rs offer)--> DataLink
//!  DataLink --client (core Receiver in the drive loop)--> Client
//!  Client: with_index (list, lookup, stat: local, no round trip)
//!          read / read_blocking (entry id + offset + len, verified chunks)
//!  mount: fuser over a Client;  get: files and folders written beneath --out
//! ```
//!
//! The handshake is `linkfs-core`'s [`linkfs_core::GuestSignaling`] and the
//! receiver logic its [`linkfs_core::Receiver`], exactly what the browser runs;
//! this module adds only IO. Failures are typed ([`VisitError`], with a
//! [`FailureKind`] the commands turn into exit codes). The native index lives in memory
//! for the life of the command (no persistence: a native peer reconnects in under
//! a second and the index of 1M entries arrives in seconds).

mod client;
mod connect;
pub mod get;
pub mod listing;
pub mod mount;

pub use client::{
    CHANGES_QUEUE, COMMAND_QUEUE, Client, IndexChanges, MAX_READ_LEN, MAX_REFUSALS_KEPT, ReadError,
    Reconnector, Status, native_receiver_config,
};
pub use connect::connect;

use linkfs_core::{EndReason, FailureKind, GuestFailure, LinkError, ShareLink};

use crate::random::RandomError;
use crate::relay_client::RelayClientError;
use crate::transport::{TransportConfig, TransportError};

/// Why a native receiver could not reach or use a share.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VisitError {
    /// The link is malformed (its words say how, and that a link looks like
    /// `http://host:port/#room.secret`).
    #[error(transparent)]
    BadLink(#[from] LinkError),
    /// The handshake through the relay failed (invalid link, share gone, refused, ...).
    #[error(transparent)]
    Signaling(#[from] GuestFailure),
    #[error(transparent)]
    Relay(#[from] RelayClientError),
    #[error("could not connect to the sharer")]
    Transport(#[from] TransportError),
    #[error(
        "no connection to the sharer after {0:?} (is the sharer on a network this machine can reach?)"
    )]
    Timeout(std::time::Duration),
    #[error(transparent)]
    Random(#[from] RandomError),
    /// The session with the sharer ended (before the index was complete, or while in use).
    #[error("{0}")]
    Ended(EndReason),
}

impl VisitError {
    /// What kind of failure this is, for exit codes and scripts.
    pub fn kind(&self) -> FailureKind {
        match self {
            VisitError::BadLink(_) | VisitError::Signaling(GuestFailure::InvalidLink) => {
                FailureKind::InvalidLink
            }
            VisitError::Signaling(GuestFailure::SharerGone) => FailureKind::SharerGone,
            VisitError::Ended(reason) => reason.kind(),
            VisitError::Relay(_)
            | VisitError::Transport(_)
            | VisitError::Timeout(_)
            | VisitError::Signaling(GuestFailure::RelayLost) => FailureKind::Unreachable,
            _ => FailureKind::Other,
        }
    }
}

/// Parses `link`, connects and starts a [`Client`] that reconnects when the
/// data link is lost; does not wait for the index.
pub async fn open(link: &str, transport: &TransportConfig) -> Result<Client, VisitError> {
    let link = ShareLink::parse(link)?;
    let data = connect(&link, transport).await?;
    // ICE may settle on its pair a moment after the channel opens.
    let mut route = data.route().await;
    for _ in 0..10 {
        if route.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        route = data.route().await;
    }
    let transport = transport.clone();
    let reconnect: Reconnector<crate::transport::DataLink> = Box::new(move || {
        let (link, transport) = (link.clone(), transport.clone());
        Box::pin(async move { connect(&link, &transport).await })
    });
    Ok(Client::start_with(data, native_receiver_config(), Some(reconnect)).with_route(route))
}
