//! Connecting one visitor: answer its offer, trade candidates, until the data
//! channel opens.

use linkfs_proto::signal::{PeerId, SignalPayload};
use tokio::sync::mpsc;

use crate::transport::{
    DataLink, Handshake, HandshakeEvent, IceCandidate, TransportConfig, TransportError,
};

/// Remote candidates queued for one visitor's handshake.
pub const CANDIDATE_QUEUE: usize = 64;

/// A sealed-to-be payload for one visitor.
pub type Outgoing = (PeerId, SignalPayload);

/// Answers `offer` and runs the handshake until the channel opens. Local
/// candidates and the answer go out through `out`; remote candidates come in
/// through `remote`.
pub async fn connect_visitor(
    peer: PeerId,
    offer: String,
    config: TransportConfig,
    mut remote: mpsc::Receiver<IceCandidate>,
    out: mpsc::Sender<Outgoing>,
) -> Result<DataLink, TransportError> {
    let (mut handshake, answer) = Handshake::answer(&config, &offer).await?;
    let _ = out
        .send((peer, SignalPayload::Answer { sdp: answer }))
        .await;
    let mut remote_open = true;
    loop {
        tokio::select! {
            event = handshake.next_event() => match event? {
                HandshakeEvent::LocalCandidate(c) => {
                    let _ = out.send((peer, c.into_payload())).await;
                }
                HandshakeEvent::Open(link) => return Ok(link),
            },
            c = remote.recv(), if remote_open => match c {
                Some(c) => {
                    // One unusable candidate concerns only itself; others may work.
                    if let Err(e) = handshake.add_remote_candidate(c).await {
                        tracing::info!(peer = peer.0, error = %e, "skipping a visitor's ICE candidate");
                    }
                }
                None => remote_open = false,
            },
        }
    }
}
