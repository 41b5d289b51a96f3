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
pub mod put;

pub use client::{
    CHANGES_QUEUE, COMMAND_QUEUE, Client, Connector, MAX_READ_LEN, MAX_REFUSALS_KEPT, NO_PASSWORD,
    PasswordSource, ReadError, RouteCell, Status, native_receiver_config,
};
pub use connect::connect;
pub use linkfs_core::IndexChanges;

use linkfs_core::{EndReason, FailureKind, GuestFailure, LinkError, ShareLink};

use std::sync::Arc;

use crate::lanes::{LaneConnectError, LaneMaker, LanedLink};
use crate::random::RandomError;
use crate::transport::DataLink;

/// A lane's handshake under way.
type LaneConnecting =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<DataLink, LaneConnectError>> + Send>>;
use crate::relay_client::RelayClientError;
use crate::transport::{Route, TransportConfig, TransportError};

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
            VisitError::Signaling(
                GuestFailure::LinkWithdrawn(_) | GuestFailure::LinkExpired(_),
            ) => FailureKind::LinkEnded,
            VisitError::Ended(reason) => reason.kind(),
            VisitError::Relay(_)
            | VisitError::Transport(_)
            | VisitError::Timeout(_)
            | VisitError::Signaling(GuestFailure::RelayLost) => FailureKind::Unreachable,
            _ => FailureKind::Other,
        }
    }
}

/// Parses `link`, connects and starts a [`Client`] that reconnects whenever
/// its visit asks; does not wait for the index. Fails, in the words of the
/// failure, when the first link cannot be made.
pub async fn open(
    link: &str,
    transport: &TransportConfig,
    password: Option<PasswordSource>,
) -> Result<Client, VisitError> {
    let link = ShareLink::parse(link)?;
    let transport = transport.clone();
    // How the first link travelled, for the commands to say (found beside the
    // session, never before it: ICE may take a while to say, or never).
    let route = RouteCell::default();
    let first_route = route.clone();
    let first_link = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let lanes_open = crate::lanes::LanesOpen::default();
    let client_lanes_open = lanes_open.clone();
    let lane_link = (link.clone(), transport.clone());
    let lane_connect: Arc<dyn Fn() -> LaneConnecting + Send + Sync> = Arc::new(move || {
        let (link, transport) = lane_link.clone();
        Box::pin(async move {
            connect(&link, &transport)
                .await
                .map_err(LaneConnectError::new)
        })
    });
    let connect: Connector<LanedLink<DataLink>> = Box::new(move || {
        let (link, transport, route) = (link.clone(), transport.clone(), first_route.clone());
        let first_link = first_link.clone();
        let lane_connect = lane_connect.clone();
        let lanes_open = lanes_open.clone();
        Box::pin(async move {
            let data = connect(&link, &transport).await?;
            let probe = data.path_probe();
            if first_link.swap(false, std::sync::atomic::Ordering::SeqCst) {
                let probe = probe.clone();
                tokio::spawn(async move {
                    let found = settled_route(&probe).await;
                    if let Ok(mut r) = route.lock() {
                        *r = Some(found);
                    }
                });
            }
            let maker = LaneMaker {
                connect: lane_connect,
                round_trip: Arc::new(move || {
                    let probe = probe.clone();
                    Box::pin(async move { probe.round_trip().await })
                }),
                lanes: transport.lanes,
                open: lanes_open,
            };
            maker.open.store(0, std::sync::atomic::Ordering::Relaxed);
            Ok(LanedLink::new(data, Some(maker)))
        })
    });
    let client = Client::connect_with_password(connect, native_receiver_config(), password).await?;
    Ok(client.with_route(route).with_lanes_open(client_lanes_open))
}

/// The route a new link settled on: ICE may settle on its pair a while
/// after the channel opens (on a busy machine, through TURN, a second was
/// once not enough and `linkfs get` did not say how it went), so it is asked
/// for up to 10 s: every 20 ms for the first second, then every 200 ms.
/// Asked beside the session: awaited before it, it held up a 204k-entry
/// index on one host by a second whenever ICE did not say.
async fn settled_route(probe: &crate::transport::PathProbe) -> Option<Route> {
    let asked = std::time::Instant::now();
    loop {
        if let Some(route) = probe.route().await {
            return Some(route);
        }
        if !probe.is_open() || asked.elapsed() >= std::time::Duration::from_secs(10) {
            return None;
        }
        let pause = if asked.elapsed() < std::time::Duration::from_secs(1) {
            20
        } else {
            200
        };
        tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
    }
}
