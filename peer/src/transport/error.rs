//! What can go wrong while connecting, and why a link ended — in words a user understands.

use std::time::Duration;

pub use crate::drive::LinkClosed;

/// Errors while setting up or negotiating a connection.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// webrtc-rs refused to create the peer connection (bad ICE server URL, no usable
    /// bind address, ...).
    #[error("could not set up the WebRTC connection: {0}")]
    Setup(#[source] webrtc::error::Error),
    /// A bind address from the configuration cannot be used.
    #[error("no UDP address to bind: the configuration lists none")]
    NoBindAddress,
    /// The other side's offer could not be parsed or applied.
    #[error("the other side's offer is not usable: {0}")]
    BadOffer(#[source] webrtc::error::Error),
    /// The other side's answer could not be parsed or applied.
    #[error("the other side's answer is not usable: {0}")]
    BadAnswer(#[source] webrtc::error::Error),
    /// An ICE candidate from the other side could not be parsed or applied.
    #[error("the other side sent an ICE candidate that cannot be used: {0}")]
    BadCandidate(#[source] webrtc::error::Error),
    /// A remote candidate was given to an offerer before its answer was applied
    /// (the signaling machine holds early candidates; this is a bug in the caller).
    #[error("an ICE candidate arrived before the answer was applied")]
    CandidateBeforeAnswer,
    /// `apply_answer` was called on the answering side, or twice.
    #[error("this side cannot take an answer now ({0})")]
    UnexpectedAnswer(&'static str),
    /// Creating the local offer or answer failed.
    #[error("could not create the local session description: {0}")]
    Negotiation(#[source] webrtc::error::Error),
    /// The data channel did not open within the connect timeout.
    #[error(
        "the connection did not open within {} s (is the other side reachable?)",
        .0.as_secs_f32()
    )]
    TimedOut(Duration),
    /// The connection ended before the data channel opened.
    #[error("the connection ended before it opened: {0}")]
    Closed(LinkClosed),
}

/// Errors from sending on a [`DataLink`](super::DataLink).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// The frame is larger than [`linkfs_proto::MAX_FRAME_LEN`]; nothing was sent.
    #[error("a {len}-byte frame is over the {max}-byte frame limit; it was not sent")]
    FrameTooLarge { len: usize, max: usize },
    /// The link has ended; nothing more can be sent.
    #[error("the link is closed: {0}")]
    Closed(LinkClosed),
}
