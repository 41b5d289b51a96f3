//! Two real webrtc-rs peers in one process, signaled through memory: for tests and
//! benchmarks of anything that runs over a [`DataLink`] (no relay needed).
//!
//! Both sides do the full handshake: offer, answer, trickled candidates (carried
//! in their signaling form, [`IceCandidate`]), and the answerer receives the channel
//! through `on_data_channel` exactly as with a browser.

use super::config::TransportConfig;
use super::error::TransportError;
use super::handshake::{Handshake, HandshakeEvent};
use super::link::DataLink;
use linkfs_core::IceCandidate;

/// Connects an offerer and an answerer in this process. Returns
/// `(offerer's link, answerer's link)`; fails like [`Handshake::next_event`] does, for
/// either side.
pub async fn connect_in_process(
    offerer: &TransportConfig,
    answerer: &TransportConfig,
) -> Result<(DataLink, DataLink), TransportError> {
    let (mut offer_side, offer_sdp) = Handshake::offer(offerer).await?;
    let (mut answer_side, answer_sdp) = Handshake::answer(answerer, &offer_sdp).await?;
    offer_side.apply_answer(&answer_sdp).await?;

    let mut offer_link = None;
    let mut answer_link = None;
    loop {
        match (offer_link.take(), answer_link.take()) {
            (Some(offer_link), Some(answer_link)) => return Ok((offer_link, answer_link)),
            (offer, answer) => {
                offer_link = offer;
                answer_link = answer;
            }
        }
        tokio::select! {
            event = offer_side.next_event(), if offer_link.is_none() => match event? {
                HandshakeEvent::LocalCandidate(c) => {
                    answer_side.add_remote_candidate(through_signaling(c)).await?;
                }
                HandshakeEvent::Open(link) => offer_link = Some(link),
            },
            event = answer_side.next_event(), if answer_link.is_none() => match event? {
                HandshakeEvent::LocalCandidate(c) => {
                    offer_side.add_remote_candidate(through_signaling(c)).await?;
                }
                HandshakeEvent::Open(link) => answer_link = Some(link),
            },
        }
    }
}

/// A candidate as the other side receives it: through the signaling payload's JSON.
fn through_signaling(candidate: IceCandidate) -> IceCandidate {
    let payload = candidate.clone().into_payload();
    serde_json::to_string(&payload)
        .ok()
        .and_then(|json| serde_json::from_str(&json).ok())
        .and_then(|payload| IceCandidate::from_payload(&payload))
        .unwrap_or(candidate)
}
