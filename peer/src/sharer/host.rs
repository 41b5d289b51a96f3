//! The sharer's line to its relay: IO only. What is sent, when to connect
//! again and what the relay's words mean are the share machine's
//! ([`linkfs_core::share::Share`]: its `Relay`, `ConnectRelay` and
//! `CloseRelay` outputs, its `relay_*` inputs).

use linkfs_core::ShareLink;
use linkfs_proto::sharer_key::{SharerKey, host_query};
use linkfs_proto::signal::Role;
use tokio::task::JoinHandle;

use super::event::ShareError;
use crate::random::random_bytes;
use crate::relay_client::RelayClient;

/// What came from the relay line.
#[derive(Debug)]
pub enum RelayIn {
    Text(String),
    /// The connection closed (or failed).
    Closed,
    /// A connection asked for ([`RelayLine::reconnect`]) is open.
    Opened,
    /// A connection asked for could not be made.
    Failed,
}

/// See the module docs.
#[derive(Debug)]
pub struct RelayLine {
    client: Option<RelayClient>,
    connecting: Option<JoinHandle<Result<RelayClient, ShareError>>>,
    /// The signaling URL without the host's proof (a fresh one is added per connection).
    url: String,
    sharer: SharerKey,
}

impl RelayLine {
    /// Connects to the relay as the host of `link`'s room.
    pub async fn connect(link: &ShareLink, sharer: SharerKey) -> Result<RelayLine, ShareError> {
        let url = link.signal_url(Role::Host);
        let client = RelayClient::connect(&proven(&url, &sharer)?).await?;
        Ok(RelayLine {
            client: Some(client),
            connecting: None,
            url,
            sharer,
        })
    }

    /// Sends `text`; `Err` when the connection failed (it is dropped). With
    /// no connection, the text is dropped: the machine knows the relay is gone.
    pub async fn send(&mut self, text: String) -> Result<(), ShareError> {
        let Some(client) = self.client.as_mut() else {
            return Ok(());
        };
        if let Err(e) = client.send(text).await {
            tracing::info!(error = %e, "the relay connection failed");
            self.client = None;
            return Err(e.into());
        }
        Ok(())
    }

    /// Starts connecting again (answered by [`RelayIn::Opened`] or [`RelayIn::Failed`]).
    pub fn reconnect(&mut self) {
        if self.connecting.is_some() {
            return;
        }
        let (url, sharer) = (self.url.clone(), self.sharer.clone());
        self.connecting = Some(tokio::spawn(async move {
            Ok(RelayClient::connect(&proven(&url, &sharer)?).await?)
        }));
    }

    /// Closes the connection now.
    pub async fn close_now(&mut self) {
        if let Some(c) = self.client.take() {
            c.close().await;
        }
    }

    /// The next thing from the relay line; never, while there is no
    /// connection and none is being made. Cancel-safe.
    pub async fn recv(&mut self) -> RelayIn {
        if let Some(connecting) = self.connecting.as_mut() {
            let made = connecting.await;
            self.connecting = None;
            return match made {
                Ok(Ok(client)) => {
                    self.client = Some(client);
                    RelayIn::Opened
                }
                Ok(Err(e)) => {
                    tracing::info!(error = %e, "the relay is not back yet");
                    RelayIn::Failed
                }
                Err(e) => {
                    tracing::warn!(error = %e, "connecting to the relay failed");
                    RelayIn::Failed
                }
            };
        }
        let Some(client) = self.client.as_mut() else {
            return std::future::pending().await;
        };
        match client.recv().await {
            Ok(Some(text)) => RelayIn::Text(text),
            Ok(None) | Err(_) => {
                self.client = None;
                RelayIn::Closed
            }
        }
    }

    pub async fn close(mut self) {
        if let Some(c) = self.connecting.take() {
            c.abort();
        }
        self.close_now().await;
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
