//! Which relay a share uses: the one embedded in this process (the zero-setup
//! default), or one that runs elsewhere.

use std::net::SocketAddr;

use super::ShareError;

/// Where the relay is.
#[derive(Debug, Clone)]
pub enum RelayChoice {
    /// Run the relay in this process, listening on `bind` (needs the
    /// `embedded-relay` feature, on by default).
    Embedded { bind: SocketAddr },
    /// Use a relay that runs elsewhere (`http(s)://host:port`).
    External { url: String },
}

/// The relay a share is using.
#[derive(Debug)]
pub struct RelayInUse {
    /// What links begin with: `http://host:port`.
    pub origin: String,
    /// Only this host can reach the relay (an embedded relay on a loopback
    /// address), so every native visitor is on this host too.
    pub loopback_only: bool,
    #[cfg(feature = "embedded-relay")]
    embedded: Option<linkfs_relay::RelayHandle>,
}

impl RelayInUse {
    /// Starts the embedded relay, or notes the external one. An embedded relay
    /// asked for any free port (`:0`) tries `preferred_port` first (the port
    /// the folder's kept link names), so the link stays the same.
    pub async fn start(
        choice: &RelayChoice,
        preferred_port: Option<u16>,
    ) -> Result<RelayInUse, ShareError> {
        match choice {
            RelayChoice::External { url } => Ok(RelayInUse {
                origin: url.trim_end_matches('/').to_owned(),
                loopback_only: false,
                #[cfg(feature = "embedded-relay")]
                embedded: None,
            }),
            RelayChoice::Embedded { bind } => {
                if let Some(port) = preferred_port.filter(|_| bind.port() == 0) {
                    let preferred = SocketAddr::new(bind.ip(), port);
                    match start_embedded(preferred).await {
                        Ok(relay) => return Ok(relay),
                        Err(e) => {
                            tracing::info!(%preferred, error = %e, "the kept link's port is not free");
                        }
                    }
                }
                start_embedded(*bind).await
            }
        }
    }

    /// The embedded relay's port (`None` for an external relay).
    pub fn embedded_port(&self) -> Option<u16> {
        #[cfg(feature = "embedded-relay")]
        if let Some(relay) = &self.embedded {
            return Some(relay.local_addr().port());
        }
        None
    }

    /// Stops the embedded relay, if this share started one.
    pub async fn shutdown(self) {
        #[cfg(feature = "embedded-relay")]
        if let Some(relay) = self.embedded {
            relay.shutdown().await;
        }
    }
}

#[cfg(feature = "embedded-relay")]
async fn start_embedded(bind: SocketAddr) -> Result<RelayInUse, ShareError> {
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|source| ShareError::RelayBind { bind, source })?;
    let relay = linkfs_relay::spawn(listener, linkfs_relay::RelayConfig::default())
        .await
        .map_err(|e| ShareError::Relay(e.to_string()))?;
    Ok(RelayInUse {
        origin: format!("http://{}", relay.local_addr()),
        loopback_only: bind.ip().is_loopback(),
        embedded: Some(relay),
    })
}

#[cfg(not(feature = "embedded-relay"))]
async fn start_embedded(_bind: SocketAddr) -> Result<RelayInUse, ShareError> {
    Err(ShareError::Relay(
        "this linkfs was built without the embedded relay (cargo feature `embedded-relay`); share through a relay with --relay URL".into(),
    ))
}
