//! The host's side of signaling: the relay client and the shell around
//! [`HostSignaling`] (the machine in `linkfs_core::signaling`), which decides
//! everything: admission, refusals, sealing, the bounds.

use linkfs_core::{Backoff, BackoffConfig, HostAction, HostSignaling, Millis, Retry, ShareLink};
use linkfs_proto::sharer_key::{SharerKey, host_query};
use linkfs_proto::signal::{IceServer, Role};
use tokio::time::Instant;

use super::event::ShareError;
use crate::random::random_bytes;
use crate::relay_client::RelayClient;

/// The sharer's connection to its relay. See the module docs.
///
/// When the relay connection is lost, visitors already connected stay, and the
/// relay client reconnects on core's backoff schedule (never giving up) and
/// registers the room again; new visitors can then join.
#[derive(Debug)]
pub struct HostRelay {
    client: Option<RelayClient>,
    machine: HostSignaling,
    /// The signaling URL without the host's proof (a fresh one is added per connection).
    url: String,
    sharer: SharerKey,
    backoff: Backoff,
    started: Instant,
    reconnect_at: Option<Instant>,
}

impl HostRelay {
    /// Connects to the relay as the host of `link`'s room and waits until the
    /// relay holds the room. Returns the ICE servers the relay offers.
    pub async fn register(
        link: &ShareLink,
        sharer: SharerKey,
        max_visitors: usize,
    ) -> Result<(HostRelay, Vec<IceServer>), ShareError> {
        let url = link.signal_url(Role::Host);
        let client = RelayClient::connect(&proven(&url, &sharer)?).await?;
        let machine = HostSignaling::new(link, sharer.clone(), max_visitors, random_bytes()?);
        let seed = u64::from_le_bytes(random_bytes()?);
        let mut host = HostRelay {
            client: Some(client),
            machine,
            url,
            sharer,
            backoff: Backoff::new(
                BackoffConfig {
                    give_up_after_ms: None,
                    ..BackoffConfig::default()
                },
                seed,
            ),
            started: Instant::now(),
            reconnect_at: None,
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

    fn now(&self) -> Millis {
        Millis(self.started.elapsed().as_millis() as u64)
    }

    /// The relay connection is gone: try again later.
    fn lost(&mut self) {
        self.client = None;
        self.machine.relay_closed();
        if let Retry::At(t) = self.backoff.failed(self.now()) {
            self.reconnect_at = Some(self.started + std::time::Duration::from_millis(t.0));
        }
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
                        self.lost();
                    }
                }
                HostAction::Registered { ice_servers } => {
                    self.backoff.succeeded();
                    rest.push(HostAction::Warning(
                        "the relay holds the share again; new visitors can join".into(),
                    ));
                    // The new connection's servers (fresh TURN credentials).
                    rest.push(HostAction::IceServers { ice_servers });
                }
                HostAction::Fail(why) => {
                    // Registering again failed (the relay may still hold the old
                    // connection's room for a moment): try again later.
                    tracing::info!(%why, "registering the room again failed; retrying");
                    if let Some(c) = self.client.take() {
                        c.close().await;
                    }
                    self.lost();
                }
                other => rest.push(other),
            }
        }
        rest
    }

    /// Waits for the next message from the relay and hands it to the machine,
    /// or, while the relay is gone, for the next attempt to reach it. Cancel-safe.
    pub async fn recv(&mut self) {
        let Some(client) = self.client.as_mut() else {
            let Some(at) = self.reconnect_at else {
                return std::future::pending().await;
            };
            tokio::time::sleep_until(at).await;
            // Cancelled while connecting, the next call tries again at once.
            let connected = match proven(&self.url, &self.sharer) {
                Ok(url) => RelayClient::connect(&url).await,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot make a proof of the sharer's key");
                    return;
                }
            };
            self.reconnect_at = None;
            match connected {
                Ok(c) => {
                    self.client = Some(c);
                    self.machine.relay_reopened();
                }
                Err(e) => {
                    tracing::info!(error = %e, "the relay is not back yet");
                    self.lost();
                }
            }
            return;
        };
        match client.recv().await {
            Ok(Some(text)) => self.machine.handle_relay_text(&text),
            Ok(None) | Err(_) => self.lost(),
        }
    }

    pub async fn close(self) {
        if let Some(c) = self.client {
            c.close().await;
        }
    }
}

/// `url` with a fresh proof that this host holds the room's key (see
/// `linkfs_proto::sharer_key`): the relay accepts each proof once, within a
/// few minutes of its time.
fn proven(url: &str, sharer: &SharerKey) -> Result<String, ShareError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let nonce: String = random_bytes::<12>()?
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(format!("{url}{}", host_query(sharer, now, &nonce)))
}
