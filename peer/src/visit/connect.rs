//! Reaching a sharer from a link: the guest's side of signaling.
//!
//! ```text
//! WebSocket /signal/{room}?role=guest
//!   <- welcome {ice_servers}      -> offer (webrtc-rs), sent sealed to the host
//!   <- msg {answer}   (sealed)    -> apply it
//!   <-> msg {candidate} (sealed)  -> trickled both ways
//! data channel open               -> the WebSocket is closed (frees the relay's slot)
//! ```
//!
//! A host message that does not open with the link's secret means the secret is
//! wrong: [`VisitError::InvalidLink`], and nothing else is tried.

use linkfs_core::{Direction, ShareLink, SignalKey};
use linkfs_proto::signal::{
    ClientToRelay, PeerId, RelayErrorCode, RelayToClient, Role, SignalPayload,
};

use super::VisitError;
use crate::signal_client::SignalClient;
use crate::transport::{
    DataLink, Handshake, HandshakeEvent, IceCandidate, NativeTuning, TransportConfig,
};

/// Whether the link's relay is on this host (then the sharer is too, and the
/// same-host transport tuning is safe: both ends apply it).
pub fn relay_is_local(link: &ShareLink) -> bool {
    let rest = link
        .origin
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    let host = rest.split('/').next().unwrap_or("");
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.split(']').next())
        .unwrap_or_else(|| host.rsplit_once(':').map_or(host, |(h, _)| h));
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn random_nonce() -> Result<[u8; 24], VisitError> {
    let mut b = [0u8; 24];
    getrandom::fill(&mut b).map_err(|e| VisitError::Random(e.to_string()))?;
    Ok(b)
}

/// Connects to the sharer of `link`: signaling through its relay, then the
/// data channel. Fails in words if the link is wrong, the share is gone or the
/// connection cannot be made within the transport's connect timeout.
pub async fn connect(link: &ShareLink, config: &TransportConfig) -> Result<DataLink, VisitError> {
    let key = SignalKey::from_secret(&link.secret);
    let url = link.signal_url(Role::Guest);
    let mut signal = SignalClient::connect(&url).await?;
    let deadline = tokio::time::Instant::now() + config.connect_timeout;
    let result = tokio::time::timeout_at(deadline, negotiate(link, &key, &mut signal, config))
        .await
        .unwrap_or(Err(VisitError::Timeout(config.connect_timeout)));
    signal.close().await;
    result
}

async fn send_sealed(
    signal: &mut SignalClient,
    link: &ShareLink,
    key: &SignalKey,
    payload: &SignalPayload,
) -> Result<(), VisitError> {
    let data = key.seal_payload(&link.room, Direction::GuestToHost, random_nonce()?, payload);
    signal
        .send(&ClientToRelay::Msg {
            to: PeerId::HOST,
            data,
        })
        .await?;
    Ok(())
}

async fn negotiate(
    link: &ShareLink,
    key: &SignalKey,
    signal: &mut SignalClient,
    config: &TransportConfig,
) -> Result<DataLink, VisitError> {
    let mut config = config.clone();
    loop {
        match signal.recv().await? {
            Some(RelayToClient::Welcome { ice_servers, .. }) => {
                config.ice_servers.extend(ice_servers);
                break;
            }
            Some(RelayToClient::Error { code, message }) => return Err(relay_error(code, message)),
            Some(_) => {}
            None => return Err(VisitError::RelayClosed),
        }
    }
    if relay_is_local(link) && config.native_peer.is_some() {
        config.native_peer = Some(NativeTuning::SAME_HOST);
    }
    let (mut handshake, offer) = Handshake::offer(&config).await?;
    send_sealed(signal, link, key, &SignalPayload::Offer { sdp: offer }).await?;
    let mut answered = false;
    let mut early: Vec<IceCandidate> = Vec::new();
    let mut relay_open = true;
    loop {
        tokio::select! {
            event = handshake.next_event() => match event? {
                HandshakeEvent::LocalCandidate(c) => {
                    if relay_open {
                        send_sealed(signal, link, key, &c.into_payload()).await?;
                    }
                }
                HandshakeEvent::Open(data) => return Ok(data),
            },
            msg = signal.recv(), if relay_open => match msg? {
                Some(RelayToClient::Msg { from, data }) if from == PeerId::HOST => {
                    let payload = key
                        .open_payload(&link.room, Direction::HostToGuest, &data)
                        .map_err(|_| VisitError::InvalidLink)?;
                    match payload {
                        SignalPayload::Answer { sdp } if !answered => {
                            handshake.apply_answer(&sdp).await?;
                            answered = true;
                            for c in early.drain(..) {
                                if let Err(e) = handshake.add_remote_candidate(c).await {
                                    tracing::info!(error = %e, "skipping a sharer's ICE candidate");
                                }
                            }
                        }
                        ref c @ SignalPayload::Candidate { .. } => {
                            if let Some(c) = IceCandidate::from_payload(c) {
                                if answered {
                                    if let Err(e) = handshake.add_remote_candidate(c).await {
                                        tracing::info!(error = %e, "skipping a sharer's ICE candidate");
                                    }
                                } else if early.len() < crate::transport::EARLY_CANDIDATE_LIMIT {
                                    early.push(c);
                                }
                            }
                        }
                        SignalPayload::Reject { reason } => return Err(VisitError::Refused(reason)),
                        _ => {}
                    }
                }
                Some(RelayToClient::Left { peer }) if peer == PeerId::HOST => {
                    return Err(VisitError::SharerGone);
                }
                Some(RelayToClient::Error { code, message }) => return Err(relay_error(code, message)),
                Some(_) => {}
                // The relay went away; the handshake may still finish over ICE.
                None => relay_open = false,
            },
        }
    }
}

fn relay_error(code: RelayErrorCode, message: String) -> VisitError {
    match code {
        RelayErrorCode::NoSuchRoom => VisitError::SharerGone,
        _ => VisitError::Relay(message),
    }
}
