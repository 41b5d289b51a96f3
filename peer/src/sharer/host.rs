//! The host's side of signaling: the relay client and the shell around
//! [`HostSignaling`] (the machine in `linkfs_core::signaling`), which decides
//! everything: admission, refusals, sealing, the bounds.

use linkfs_core::{HostAction, HostSignaling, ShareLink};
use linkfs_proto::signal::{IceServer, Role};

use super::ShareError;
use crate::random::random_bytes;
use crate::relay_client::RelayClient;

/// The sharer's connection to its relay. See the module docs.
#[derive(Debug)]
pub struct HostRelay {
    client: Option<RelayClient>,
    machine: HostSignaling,
}

impl HostRelay {
    /// Connects to the relay as the host of `link`'s room and waits until the
    /// relay holds the room. Returns the ICE servers the relay offers.
    pub async fn register(
        link: &ShareLink,
        max_visitors: usize,
    ) -> Result<(HostRelay, Vec<IceServer>), ShareError> {
        let client = RelayClient::connect(&link.signal_url(Role::Host)).await?;
        let machine = HostSignaling::new(link, max_visitors, random_bytes()?);
        let mut host = HostRelay {
            client: Some(client),
            machine,
        };
        loop {
            let text = match host.client.as_mut() {
                Some(c) => c.recv().await?,
                None => None,
            };
            let Some(text) = text else {
                return Err(ShareError::RelayClosed);
            };
            host.machine.handle_relay_text(&text);
            while let Some(action) = host.machine.poll_action() {
                match action {
                    HostAction::Registered { ice_servers } => return Ok((host, ice_servers)),
                    HostAction::Fail(why) => return Err(ShareError::Refused(why)),
                    _ => {}
                }
            }
        }
    }

    /// The signaling machine, for the share loop's events (answers, candidates,
    /// visitors connected and gone).
    pub fn machine(&mut self) -> &mut HostSignaling {
        &mut self.machine
    }

    /// Carries out the machine's sends and returns its other actions, in order,
    /// for the share loop.
    pub async fn flush(&mut self) -> Vec<HostAction> {
        let mut rest = Vec::new();
        while let Some(action) = self.machine.poll_action() {
            match action {
                HostAction::Send(text) => {
                    if let Some(c) = self.client.as_mut()
                        && let Err(e) = c.send(text).await
                    {
                        tracing::info!(error = %e, "the relay connection failed");
                        self.client = None;
                        self.machine.relay_closed();
                    }
                }
                other => rest.push(other),
            }
        }
        rest
    }

    /// Waits for the next message from the relay and hands it to the machine;
    /// never resolves once the relay is gone. Cancel-safe.
    pub async fn recv(&mut self) {
        let Some(client) = self.client.as_mut() else {
            return std::future::pending().await;
        };
        match client.recv().await {
            Ok(Some(text)) => self.machine.handle_relay_text(&text),
            Ok(None) | Err(_) => {
                self.client = None;
                self.machine.relay_closed();
            }
        }
    }

    pub async fn close(self) {
        if let Some(c) = self.client {
            c.close().await;
        }
    }
}
