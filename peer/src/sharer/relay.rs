//! Which relay a share uses: the one embedded in this process (the zero-setup
//! default), or one that runs elsewhere.
//!
//! What a link to an embedded relay begins with: `--public-url` if given (a
//! reverse proxy or a port forward in front of it); else the address it listens
//! on; for a wildcard (`--bind 0.0.0.0:PORT`), the address of the interface
//! holding the default route, the machine's other addresses listed beside it
//! ([`crate::local_addrs`]). The sharer itself always reaches an embedded relay
//! over loopback (a port forward is often not reachable from inside).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use linkfs_proto::signal::IceServer;

use super::event::ShareError;
use crate::local_addrs;

/// What an embedded relay hands its rooms' members besides signaling: STUN or
/// TURN servers, and short-lived TURN credentials when it shares a secret with
/// a coturn (the same as `linkfs-relay`'s flags).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EmbeddedRelayConfig {
    pub ice_servers: Vec<IceServer>,
    pub turn_secret: Option<String>,
    pub turn_urls: Vec<String>,
    /// `None`: the relay's default (an hour).
    pub turn_lifetime: Option<Duration>,
}

/// Where the relay is.
#[derive(Debug, Clone)]
pub enum RelayChoice {
    /// Run the relay in this process, listening on `bind` (needs the
    /// `embedded-relay` feature, on by default); links begin with `public_url`
    /// when given.
    Embedded {
        bind: SocketAddr,
        public_url: Option<String>,
        config: EmbeddedRelayConfig,
    },
    /// Use a relay that runs elsewhere (`http(s)://host:port`).
    External { url: String },
}

/// The relay a share is using.
#[derive(Debug)]
pub struct RelayInUse {
    /// What links begin with: `http://host:port`.
    pub origin: String,
    /// Where this process reaches the relay (the same as `origin` for an
    /// external relay; loopback for an embedded one).
    pub connect_origin: String,
    /// Other origins an embedded relay on a wildcard address is reachable at.
    pub other_origins: Vec<String>,
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
                connect_origin: url.trim_end_matches('/').to_owned(),
                other_origins: Vec::new(),
                loopback_only: false,
                #[cfg(feature = "embedded-relay")]
                embedded: None,
            }),
            RelayChoice::Embedded {
                bind,
                public_url,
                config,
            } => {
                let mut relay = None;
                if let Some(port) = preferred_port.filter(|_| bind.port() == 0) {
                    let preferred = SocketAddr::new(bind.ip(), port);
                    match start_embedded(preferred, config).await {
                        Ok(r) => relay = Some(r),
                        Err(e) => {
                            tracing::info!(%preferred, error = %e, "the kept link's port is not free");
                        }
                    }
                }
                let (mut relay, listening) = match relay {
                    Some(r) => r,
                    None => start_embedded(*bind, config).await?,
                };
                relay.name_origins(listening, public_url.as_deref());
                Ok(relay)
            }
        }
    }

    /// Sets what links begin with and where this process connects, for an
    /// embedded relay listening on `listening` (see the module docs).
    fn name_origins(&mut self, listening: SocketAddr, public_url: Option<&str>) {
        let port = listening.port();
        let (main, others) = local_addrs::link_addrs(listening);
        self.origin = match public_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => local_addrs::http_origin(main, port),
        };
        self.other_origins = others
            .into_iter()
            .map(|ip| local_addrs::http_origin(ip, port))
            .collect();
        if public_url.is_some() && !listening.ip().is_unspecified() {
            self.other_origins
                .insert(0, local_addrs::http_origin(listening.ip(), port));
        }
        let local = match listening.ip() {
            IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        self.connect_origin = local_addrs::http_origin(local, port);
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

/// Starts the embedded relay on `bind`; returns it and the address it listens on.
#[cfg(feature = "embedded-relay")]
async fn start_embedded(
    bind: SocketAddr,
    config: &EmbeddedRelayConfig,
) -> Result<(RelayInUse, SocketAddr), ShareError> {
    let turn = config
        .turn_secret
        .as_ref()
        .map(|secret| linkfs_relay::TurnConfig {
            secret: secret.clone(),
            urls: config.turn_urls.clone(),
            lifetime: config
                .turn_lifetime
                .unwrap_or(linkfs_relay::DEFAULT_TURN_LIFETIME),
        });
    let relay_config = linkfs_relay::RelayConfig {
        ice_servers: config.ice_servers.clone(),
        turn,
        ..linkfs_relay::RelayConfig::default()
    };
    relay_config
        .validate()
        .map_err(|e| ShareError::Relay(e.to_string()))?;
    let listener = linkfs_relay::bind(bind)
        .await
        .map_err(|source| ShareError::RelayBind { bind, source })?;
    let relay = linkfs_relay::spawn(listener, relay_config)
        .await
        .map_err(|e| ShareError::Relay(e.to_string()))?;
    let listening = relay.local_addr();
    Ok((
        RelayInUse {
            origin: format!("http://{listening}"),
            connect_origin: format!("http://{listening}"),
            other_origins: Vec::new(),
            loopback_only: bind.ip().is_loopback(),
            embedded: Some(relay),
        },
        listening,
    ))
}

#[cfg(not(feature = "embedded-relay"))]
async fn start_embedded(
    _bind: SocketAddr,
    _config: &EmbeddedRelayConfig,
) -> Result<(RelayInUse, SocketAddr), ShareError> {
    Err(ShareError::Relay(
        "this linkfs was built without the embedded relay (cargo feature `embedded-relay`); share through a relay with --relay URL".into(),
    ))
}
