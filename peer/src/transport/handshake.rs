//! Negotiating one connection: offer or answer, trickled candidates, until the linkfs
//! data channel opens and becomes a [`DataLink`].
//!
//! ```text
//! offerer (native receiver)                          answerer (sharer)
//!   Handshake::offer(config) -> offer SDP ------------> Handshake::answer(config, offer)
//!   apply_answer(answer) <----------------------------- answer SDP
//!   next_event: LocalCandidate --> add_remote_candidate (either side, any order)
//!   add_remote_candidate <-- next_event: LocalCandidate
//!   next_event: Open(DataLink)                          next_event: Open(DataLink)
//! ```
//!
//! Signaling is not done here: SDP goes in and out as strings, candidates as
//! [`IceCandidate`]. The signaling machine ([`linkfs_core::signaling`]) holds
//! remote candidates that arrive before the answer until it is applied, so an
//! offerer given a candidate before its answer refuses it
//! ([`TransportError::CandidateBeforeAnswer`]).
//!
//! [`Handshake::next_event`] is cancel-safe, so it can sit in a `tokio::select!` branch
//! beside the relay socket. It fails once the connect timeout has passed without an
//! open channel, or the connection ended first.
//!
//! A native offerer marks its offer with [`NATIVE_PEER_MARKER`]; the answering side
//! then applies [`TransportConfig::native_peer`] tuning, and keeps browser-safe
//! settings for everyone else.

use std::sync::Arc;

use linkfs_proto::signal::IceServer;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use webrtc::data_channel::{DataChannel, DataChannelEvent, RTCDataChannelInit};
use webrtc::peer_connection::RTCSessionDescription;

use super::config::TransportConfig;
use super::connection::{ChannelPolicy, Connection, ConnectionEvents, ended, open_connection};
use super::error::{LinkClosed, TransportError};
use super::link::DataLink;
use linkfs_core::IceCandidate;

/// The session-level SDP attribute a native linkfs offerer adds to its offer, so the
/// sharer can tell it from a browser and apply [`TransportConfig::native_peer`].
/// webrtc-rs ignores attributes it does not know; browsers never see an offer.
pub const NATIVE_PEER_MARKER: &str = "a=x-linkfs-peer:native";

/// Added beside [`NATIVE_PEER_MARKER`] by an offerer that connects only through
/// TURN (`--ice-policy relay`): the path is not loopback whatever the relay's
/// address, so the answerer keeps [`NativeTuning::ANY_PATH`](super::NativeTuning::ANY_PATH)
/// (a TURN server does not carry the same-host tuning's 16 KiB packets).
pub const RELAYED_PATH_MARKER: &str = "a=x-linkfs-path:relayed";

/// What a handshake produces.
#[derive(Debug)]
#[non_exhaustive]
pub enum HandshakeEvent {
    /// A local candidate: send it to the other side.
    LocalCandidate(IceCandidate),
    /// The data channel is open. Yielded once; later events are only candidates.
    Open(DataLink),
}

enum Role {
    /// Made the offer and the channel; `answered` once the answer is applied.
    Offerer {
        channel: Arc<dyn DataChannel>,
        answered: bool,
    },
    Answerer,
}

/// One connection being negotiated. Dropping it before the channel opens closes the
/// connection; after it opened, the [`DataLink`] keeps the connection alive.
pub struct Handshake {
    connection: Arc<Connection>,
    events: ConnectionEvents,
    role: Role,
    deadline: Instant,
    timeout: std::time::Duration,
    ending: watch::Receiver<Option<LinkClosed>>,
    opened: bool,
    /// The configuration has a TURN server: the connection may be relayed
    /// (see [`super::relay_pump`]).
    may_relay: bool,
}

impl std::fmt::Debug for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Role::Offerer { answered, .. } => f
                .debug_struct("Offerer")
                .field("answered", answered)
                .finish_non_exhaustive(),
            Role::Answerer => f.write_str("Answerer"),
        }
    }
}

impl std::fmt::Debug for Handshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handshake")
            .field("role", &self.role)
            .field("opened", &self.opened)
            .finish_non_exhaustive()
    }
}

impl Handshake {
    /// Starts the offering side: creates the connection and the linkfs data channel
    /// (ordered, reliable) and returns the offer SDP to send.
    pub async fn offer(config: &TransportConfig) -> Result<(Self, String), TransportError> {
        let (connection, events) = open_connection(config, ChannelPolicy::OwnOnly, true).await?;
        let pc = &connection.pc;
        let channel = pc
            .create_data_channel(
                linkfs_proto::CHANNEL_LABEL,
                Some(RTCDataChannelInit {
                    ordered: true,
                    ..Default::default()
                }),
            )
            .await
            .map_err(TransportError::Negotiation)?;
        let offer = pc
            .create_offer(None)
            .await
            .map_err(TransportError::Negotiation)?;
        pc.set_local_description(offer)
            .await
            .map_err(TransportError::Negotiation)?;
        if config.ice_servers.iter().any(IceServer::is_turn) {
            // The handshake itself may go through the relay: pump from now.
            super::relay_pump::start(&connection, channel.clone());
        }
        let mut sdp = with_marker(&local_sdp(&connection).await?, NATIVE_PEER_MARKER);
        if config.ice_policy == super::IcePolicy::Relay {
            sdp = with_marker(&sdp, RELAYED_PATH_MARKER);
        }
        let handshake = Self::new(
            connection,
            events,
            Role::Offerer {
                channel,
                answered: false,
            },
            config,
        );
        Ok((handshake, sdp))
    }

    /// Starts the answering side from the other side's offer; returns the answer SDP to
    /// send back. The channel the other side opened with label
    /// [`linkfs_proto::CHANNEL_LABEL`] becomes the link; channels with other labels are
    /// ignored.
    pub async fn answer(
        config: &TransportConfig,
        offer_sdp: &str,
    ) -> Result<(Self, String), TransportError> {
        let offer =
            RTCSessionDescription::offer(offer_sdp.to_owned()).map_err(TransportError::BadOffer)?;
        let native_peer = is_from_native_peer(offer_sdp);
        let mut config = config.clone();
        if has_session_marker(offer_sdp, RELAYED_PATH_MARKER) && config.native_peer.is_some() {
            config.native_peer = Some(super::NativeTuning::ANY_PATH);
        }
        let config = &config;
        let (connection, events) =
            open_connection(config, ChannelPolicy::AcceptLinkfs, native_peer).await?;
        let pc = &connection.pc;
        pc.set_remote_description(offer)
            .await
            .map_err(TransportError::BadOffer)?;
        let answer = pc
            .create_answer(None)
            .await
            .map_err(TransportError::Negotiation)?;
        pc.set_local_description(answer)
            .await
            .map_err(TransportError::Negotiation)?;
        let sdp = local_sdp(&connection).await?;
        Ok((Self::new(connection, events, Role::Answerer, config), sdp))
    }

    fn new(
        connection: Arc<Connection>,
        events: ConnectionEvents,
        role: Role,
        config: &TransportConfig,
    ) -> Self {
        let ending = connection.ending.subscribe();
        Self {
            connection,
            events,
            role,
            deadline: Instant::now() + config.connect_timeout,
            timeout: config.connect_timeout,
            ending,
            opened: false,
            may_relay: config.ice_servers.iter().any(IceServer::is_turn),
        }
    }

    /// Applies the other side's answer (offerer only, once).
    pub async fn apply_answer(&mut self, answer_sdp: &str) -> Result<(), TransportError> {
        let Role::Offerer { answered, .. } = &mut self.role else {
            return Err(TransportError::UnexpectedAnswer(
                "this side answered an offer",
            ));
        };
        if *answered {
            return Err(TransportError::UnexpectedAnswer(
                "the answer was already applied",
            ));
        }
        let answer = RTCSessionDescription::answer(answer_sdp.to_owned())
            .map_err(TransportError::BadAnswer)?;
        self.connection
            .pc
            .set_remote_description(answer)
            .await
            .map_err(TransportError::BadAnswer)?;
        *answered = true;
        Ok(())
    }

    /// Adds a candidate from the other side. An offerer refuses one before its answer
    /// is applied (the signaling machine holds those); an empty candidate (end of
    /// candidates) and an mDNS (`.local`) one are accepted and ignored.
    ///
    /// An error concerns this candidate only: the handshake stays usable and may still
    /// connect through the others, so log it and go on rather than give up.
    pub async fn add_remote_candidate(
        &mut self,
        candidate: IceCandidate,
    ) -> Result<(), TransportError> {
        if candidate.candidate.trim().is_empty() {
            return Ok(());
        }
        if let Role::Offerer {
            answered: false, ..
        } = self.role
        {
            return Err(TransportError::CandidateBeforeAnswer);
        }
        self.connection
            .pc
            .add_ice_candidate(super::candidate::to_init(&candidate))
            .await
            .map_err(TransportError::BadCandidate)
    }

    /// The next thing to act on: a local candidate to send, or the open link.
    ///
    /// Cancel-safe. Before the link opens it fails once the connect timeout has passed
    /// or the connection ended. After [`HandshakeEvent::Open`] it yields only late local
    /// candidates and otherwise never resolves, so keep it in a `select!` branch or drop
    /// the handshake.
    pub async fn next_event(&mut self) -> Result<HandshakeEvent, TransportError> {
        if self.opened {
            return match self.events.candidates.recv().await {
                Some(candidate) => Ok(HandshakeEvent::LocalCandidate(candidate)),
                None => std::future::pending().await,
            };
        }
        loop {
            let opened_channel = tokio::select! {
                biased;
                Some(candidate) = self.events.candidates.recv() => {
                    return Ok(HandshakeEvent::LocalCandidate(candidate));
                }
                channel = wait_for_channel(&self.role, &mut self.events.channels) => channel,
                reason = ended(&mut self.ending) => {
                    return Err(TransportError::Closed(reason));
                }
                () = tokio::time::sleep_until(self.deadline) => {
                    return Err(TransportError::TimedOut(self.timeout));
                }
            };
            match opened_channel {
                ChannelProgress::Open(channel) => {
                    self.opened = true;
                    if self.may_relay && matches!(self.role, Role::Answerer) {
                        // (The offerer pumps from the start: see `offer`.)
                        super::relay_pump::start(&self.connection, channel.clone());
                    }
                    let link = DataLink::new(self.connection.clone(), channel);
                    return Ok(HandshakeEvent::Open(link));
                }
                ChannelProgress::Closed => {
                    self.connection.ending.end(LinkClosed::PeerClosed);
                    return Err(TransportError::Closed(LinkClosed::PeerClosed));
                }
                ChannelProgress::Other => continue,
            }
        }
    }
}

enum ChannelProgress {
    Open(Arc<dyn DataChannel>),
    Closed,
    Other,
}

/// Waits for the linkfs channel to open: the offerer watches its own channel's events,
/// the answerer waits for the handler to hand over the other side's channel.
/// Cancel-safe: both waits are channel receives.
async fn wait_for_channel(
    role: &Role,
    handed_over: &mut mpsc::Receiver<Arc<dyn DataChannel>>,
) -> ChannelProgress {
    match role {
        Role::Offerer { channel, .. } => match channel.poll().await {
            Some(DataChannelEvent::OnOpen) => ChannelProgress::Open(channel.clone()),
            Some(DataChannelEvent::OnClose) | None => ChannelProgress::Closed,
            Some(_) => ChannelProgress::Other,
        },
        Role::Answerer => match handed_over.recv().await {
            Some(channel) => ChannelProgress::Open(channel),
            // The handler lives as long as the connection, which this handshake holds.
            None => std::future::pending().await,
        },
    }
}

/// `sdp` with `marker` among its session-level attributes (before the first
/// media section).
fn with_marker(sdp: &str, marker: &str) -> String {
    let line = format!("{marker}\r\n");
    match sdp.find("\nm=") {
        Some(at) => format!("{}{line}{}", &sdp[..=at], &sdp[at + 1..]),
        None => format!("{sdp}{line}"),
    }
}

/// Whether an offer came from a native linkfs peer (carries [`NATIVE_PEER_MARKER`] at
/// session level).
pub fn is_from_native_peer(offer_sdp: &str) -> bool {
    has_session_marker(offer_sdp, NATIVE_PEER_MARKER)
}

fn has_session_marker(sdp: &str, marker: &str) -> bool {
    let session = sdp.split("\nm=").next().unwrap_or(sdp);
    session.lines().any(|line| line.trim_end() == marker)
}

async fn local_sdp(connection: &Connection) -> Result<String, TransportError> {
    connection
        .pc
        .local_description()
        .await
        .map(|description| description.sdp)
        .ok_or_else(|| {
            TransportError::Negotiation(webrtc::error::Error::Other(
                "no local description after setting it".to_owned(),
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFER: &str = "v=0\r\no=- 1 2 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:0\r\n";

    #[test]
    fn the_native_marker_goes_in_the_session_section() {
        let marked = with_marker(OFFER, NATIVE_PEER_MARKER);
        assert!(is_from_native_peer(&marked));
        assert!(!is_from_native_peer(OFFER));
        let session_end = marked.find("m=application").unwrap();
        assert!(marked[..session_end].ends_with("a=group:BUNDLE 0\r\na=x-linkfs-peer:native\r\n"));
        assert_eq!(marked.len(), OFFER.len() + NATIVE_PEER_MARKER.len() + 2);
    }

    #[test]
    fn a_marker_inside_a_media_section_does_not_count() {
        let late = format!("{OFFER}{NATIVE_PEER_MARKER}\r\n");
        assert!(!is_from_native_peer(&late));
    }
}
