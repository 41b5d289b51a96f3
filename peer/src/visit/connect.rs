//! Reaching a sharer from a link: the native guest's shell around
//! [`GuestSignaling`] (the same machine the browser drives).
//!
//! ```text
//! relay client /signal/{room}?role=guest     webrtc-rs Handshake (offerer)
//!   text frames -> machine.handle_relay_text     LocalCandidate -> machine.local_candidate
//!   machine: Send(text)  -> relay client         MakeOffer      -> Handshake::offer
//!            ApplyAnswer -> apply_answer, answer_applied
//!            AddCandidate -> add_remote_candidate (one that cannot be used is skipped)
//!            CloseRelay  -> the relay socket closes (frees the relay's slot)
//!            Fail(why)   -> VisitError::Signaling(why)
//! ```

use linkfs_core::{GuestAction, GuestSignaling, ShareLink};
use linkfs_proto::signal::Role;

use super::VisitError;
use crate::random::random_bytes;
use crate::relay_client::RelayClient;
use crate::transport::{
    DataLink, Handshake, HandshakeEvent, IcePolicy, NativeTuning, TransportConfig,
};

/// Connects to the sharer of `link`: signaling through its relay, then the
/// data link. Fails in words if the link is wrong, the share is gone or the
/// connection cannot be made within the transport's connect timeout.
pub async fn connect(link: &ShareLink, config: &TransportConfig) -> Result<DataLink, VisitError> {
    let mut relay = Some(RelayClient::connect(&link.signal_url(Role::Guest)).await?);
    let mut machine = GuestSignaling::new(link, random_bytes()?);
    let deadline = tokio::time::Instant::now() + config.connect_timeout;
    let result =
        tokio::time::timeout_at(deadline, negotiate(link, &mut machine, &mut relay, config))
            .await
            .unwrap_or(Err(VisitError::Timeout(config.connect_timeout)));
    if let Some(relay) = relay {
        relay.close().await;
    }
    result
}

async fn negotiate(
    link: &ShareLink,
    machine: &mut GuestSignaling,
    relay: &mut Option<RelayClient>,
    config: &TransportConfig,
) -> Result<DataLink, VisitError> {
    let mut handshake: Option<Handshake> = None;
    loop {
        while let Some(action) = machine.poll_action() {
            match action {
                GuestAction::Send(text) => {
                    if let Some(r) = relay.as_mut()
                        && r.send(text).await.is_err()
                    {
                        *relay = None;
                        machine.relay_closed();
                    }
                }
                GuestAction::MakeOffer { ice_servers } => {
                    let mut config = config.clone();
                    config.ice_servers.extend(ice_servers);
                    if link.relay_is_loopback()
                        && config.native_peer.is_some()
                        && config.ice_policy != IcePolicy::Relay
                    {
                        // A loopback relay means the sharer is on this host, and it
                        // tunes native visitors of a loopback relay the same way.
                        config.native_peer = Some(NativeTuning::SAME_HOST);
                    }
                    let (h, offer) = Handshake::offer(&config).await?;
                    handshake = Some(h);
                    machine.offer_made(offer);
                }
                GuestAction::ApplyAnswer { sdp } => {
                    if let Some(h) = handshake.as_mut() {
                        h.apply_answer(&sdp).await?;
                        machine.answer_applied();
                    }
                }
                GuestAction::AddCandidate(c) => {
                    if let Some(h) = handshake.as_mut()
                        && let Err(e) = h.add_remote_candidate(c).await
                    {
                        tracing::info!(error = %e, "skipping a sharer's ICE candidate");
                    }
                }
                GuestAction::CloseRelay => {
                    if let Some(r) = relay.take() {
                        r.close().await;
                    }
                }
                GuestAction::Fail(why) => return Err(VisitError::Signaling(why)),
                _ => {}
            }
        }
        // (The futures live inside `select!`, so they are dropped before a branch runs.)
        tokio::select! {
            event = async {
                match handshake.as_mut() {
                    Some(h) => h.next_event().await,
                    None => std::future::pending().await,
                }
            } => match event? {
                HandshakeEvent::LocalCandidate(c) => machine.local_candidate(c),
                HandshakeEvent::Open(data) => {
                    machine.channel_open();
                    while let Some(action) = machine.poll_action() {
                        if action == GuestAction::CloseRelay && let Some(r) = relay.take() {
                            r.close().await;
                        }
                    }
                    return Ok(data);
                }
            },
            msg = async {
                match relay.as_mut() {
                    Some(r) => r.recv().await,
                    None => std::future::pending().await,
                }
            } => match msg {
                Ok(Some(text)) => machine.handle_relay_text(&text),
                // The relay went away; the handshake may still finish over ICE.
                Ok(None) | Err(_) => {
                    *relay = None;
                    machine.relay_closed();
                }
            },
        }
    }
}
