//! One webrtc-rs peer connection and what it reports, shared by the handshake that
//! negotiates it and the link that uses it.
//!
//! webrtc-rs calls the [`PeerConnectionEventHandler`] on its driver task; a handler that
//! blocks stalls the whole connection. So the handler never awaits anything that
//! depends on the application: candidates go into a bounded queue with `try_send`,
//! the end of the connection into a `watch` (latest value, never blocks), an opened
//! data channel into a one-slot queue with `try_send`.
//!
//! The peer connection is closed when the last owner ([`Connection`]) is dropped:
//! webrtc-rs keeps its driver and sockets alive until `close()` otherwise.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use webrtc::data_channel::DataChannel;
use webrtc::peer_connection::{
    PeerConnection, PeerConnectionBuilder, PeerConnectionEventHandler, RTCConfigurationBuilder,
    RTCIceServer, RTCIceTransportPolicy, RTCPeerConnectionIceEvent, RTCPeerConnectionState,
    SettingEngineBuilder,
};

use super::config::TransportConfig;
use super::error::{LinkClosed, TransportError};
use linkfs_core::IceCandidate;

/// Most local candidates queued for the application: 64. One host candidate per bind
/// address plus one per STUN/TURN server and address; a candidate that does not fit is
/// dropped with a warning (the connection can still use the others).
pub const LOCAL_CANDIDATE_QUEUE: usize = 64;

/// ICE keepalive interval: 1 s, well under [`TransportConfig::lost_after`].
const KEEPALIVE: Duration = Duration::from_secs(1);

/// Pace of ICE connectivity checks: 50 ms (RFC 8445's Ta; webrtc-rs defaults to 200 ms).
/// webrtc-rs's driver also sleeps until its next timer after ICE connects, so this
/// pace shortens the DTLS handshake that follows (measured: 200 ms -> about 20-50 ms).
const ICE_CHECK_INTERVAL: Duration = Duration::from_millis(50);

/// Whether the answering side accepts a data channel the other side opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChannelPolicy {
    /// Offerer: it makes its own channel and ignores any the other side opens.
    OwnOnly,
    /// Answerer: take the first channel labelled [`linkfs_proto::CHANNEL_LABEL`].
    AcceptLinkfs,
}

/// The shared end-of-connection state: `None` while alive, then the first reason seen.
#[derive(Debug, Clone)]
pub(crate) struct Ending(Arc<watch::Sender<Option<LinkClosed>>>);

impl Ending {
    fn new() -> Self {
        Self(Arc::new(watch::Sender::new(None)))
    }

    /// Records `reason` unless a reason is already recorded.
    pub(crate) fn end(&self, reason: LinkClosed) {
        self.0.send_if_modified(|current| {
            if current.is_none() {
                *current = Some(reason);
                true
            } else {
                false
            }
        });
    }

    pub(crate) fn reason(&self) -> Option<LinkClosed> {
        self.0.borrow().clone()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Option<LinkClosed>> {
        self.0.subscribe()
    }
}

/// Waits until `ending` holds a reason and returns it.
pub(crate) async fn ended(ending: &mut watch::Receiver<Option<LinkClosed>>) -> LinkClosed {
    match ending.wait_for(Option::is_some).await {
        Ok(reason) => reason.clone().unwrap_or(LinkClosed::ConnectionClosed),
        // The sender lives in an Arc that every holder of this receiver also holds,
        // so this arm is unreachable in practice; treat it as a closed connection.
        Err(_) => LinkClosed::ConnectionClosed,
    }
}

/// How a data link's packets travel: the ICE types (`host`, `srflx`, `prflx`,
/// `relay`) of the selected candidate pair's two ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub local: String,
    pub remote: String,
}

impl Route {
    /// The route of a selected pair whose candidates' types the report gave
    /// (`None`: not in the report). A remote candidate ICE learned from a
    /// check that came before the signalled one (a peer-reflexive one) is in
    /// no report: webrtc-rs files only signalled remote candidates. Its pair
    /// stays selected after the signalled one arrives, so waiting would never
    /// name it; it is named as browsers name it. This side's own candidates
    /// are always filed.
    fn of_pair(local: Option<String>, remote: Option<String>) -> Option<Self> {
        Some(Route {
            local: local?,
            remote: remote.unwrap_or_else(|| "prflx".to_owned()),
        })
    }

    /// Through a TURN server (either end's candidate is a relayed one).
    pub fn relayed(&self) -> bool {
        self.local == "relay" || self.remote == "relay"
    }

    /// Through this side's own TURN allocation.
    pub fn locally_relayed(&self) -> bool {
        self.local == "relay"
    }
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = if self.relayed() {
            "through a TURN relay"
        } else {
            "directly"
        };
        write!(f, "{how} ({} to {})", self.local, self.remote)
    }
}

/// The route of `pc`'s selected candidate pair, once ICE has chosen one.
pub(crate) async fn route_of(pc: &dyn PeerConnection) -> Option<Route> {
    use webrtc::peer_connection::{RTCStatsReportEntry, StatsSelector};
    let report = pc
        .get_stats(std::time::Instant::now(), StatsSelector::None)
        .await;
    let pair_id = report.transport()?.selected_candidate_pair_id.clone();
    let pair = report.candidate_pairs().find(|p| p.stats.id == pair_id)?;
    // webrtc-rs 0.21 names a candidate "candidate:..." in the pair and files
    // it under "RTCLocalIceCandidate_" / "RTCRemoteIceCandidate_" + that.
    let kind = |prefix: &str, id: &str| {
        let entry = report
            .get(id)
            .or_else(|| report.get(&format!("{prefix}{id}")));
        match entry {
            Some(
                RTCStatsReportEntry::LocalCandidate(c) | RTCStatsReportEntry::RemoteCandidate(c),
            ) => Some(c.candidate_type.to_string()),
            _ => None,
        }
    };
    Route::of_pair(
        kind("RTCLocalIceCandidate_", &pair.local_candidate_id),
        kind("RTCRemoteIceCandidate_", &pair.remote_candidate_id),
    )
}

/// The address the other end's packets come from: the remote candidate of the
/// selected pair, as ICE's checks proved it (a peer-reflexive one included; a
/// TURN server's address when the other end is relayed). `None` until ICE
/// has selected a pair.
pub(crate) async fn remote_address_of(pc: &dyn PeerConnection) -> Option<std::net::IpAddr> {
    let ice = pc.sctp().await?.transport().ice_transport();
    let pair = ice.get_selected_candidate_pair().await.ok()??;
    pair.remote().address.parse().ok()
}

/// The round trip of the selected candidate pair, as ICE's checks last measured it.
pub(crate) async fn round_trip_of(pc: &dyn PeerConnection) -> Option<std::time::Duration> {
    use webrtc::peer_connection::StatsSelector;
    let report = pc
        .get_stats(std::time::Instant::now(), StatsSelector::None)
        .await;
    let pair_id = report.transport()?.selected_candidate_pair_id.clone();
    let pair = report.candidate_pairs().find(|p| p.stats.id == pair_id)?;
    let rtt = pair.current_round_trip_time;
    (rtt.is_finite() && rtt > 0.0).then(|| std::time::Duration::from_secs_f64(rtt))
}

/// Owner of one peer connection; closes it when dropped.
pub(crate) struct Connection {
    pub(crate) pc: Arc<dyn PeerConnection>,
    pub(crate) ending: Ending,
    /// How its link keeps bytes in flight.
    pub(crate) send_window: super::SendWindow,
    /// Whether the other side is a native linkfs peer (not a browser).
    pub(crate) native_peer: bool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("ending", &self.ending.reason())
            .finish_non_exhaustive()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.ending.end(LinkClosed::ClosedHere);
        let pc = self.pc.clone();
        // Without a runtime (process shutdown) there is nothing left to stop.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(error) = pc.close().await {
                    tracing::debug!(%error, "closing the peer connection");
                }
            });
        }
    }
}

/// What the handler hands to the handshake.
pub(crate) struct ConnectionEvents {
    pub(crate) candidates: mpsc::Receiver<IceCandidate>,
    pub(crate) channels: mpsc::Receiver<Arc<dyn DataChannel>>,
}

/// Builds a peer connection with the project's settings and starts its driver.
///
/// `native_peer`: whether the other side is a native linkfs peer, so that
/// [`TransportConfig::native_peer`] tuning applies.
pub(crate) async fn open_connection(
    config: &TransportConfig,
    policy: ChannelPolicy,
    native_peer: bool,
) -> Result<(Arc<Connection>, ConnectionEvents), TransportError> {
    let tuning = config
        .native_peer
        .filter(|_| native_peer)
        .unwrap_or_default();
    let send_window = tuning.send_window.unwrap_or(config.send_window);
    if config.udp_bind.is_empty() {
        return Err(TransportError::NoBindAddress);
    }
    let ending = Ending::new();
    let (candidate_tx, candidates) = mpsc::channel(LOCAL_CANDIDATE_QUEUE);
    let (channel_tx, channels) = mpsc::channel(1);
    let handler = Arc::new(Handler {
        candidates: candidate_tx,
        channels: channel_tx,
        ending: ending.clone(),
        policy,
    });

    let mut settings = SettingEngineBuilder::new()
        .with_multicast_dns_mode(rtc::ice::mdns::MulticastDnsMode::Disabled)
        .with_ice_timeouts(
            Some(config.lost_after),
            Some(config.lost_after * 2),
            Some(KEEPALIVE),
        )
        .with_ice_connection_attempts(Some(ICE_CHECK_INTERVAL), None)
        // A peer-reflexive candidate is an address a connectivity check just came
        // from, so the path works. webrtc-rs waits 1 s before using one (in case a
        // better candidate trickles in); Chromium's address is always learned this
        // way (it sends no loopback candidates), and a native peer's often is when
        // its check outruns its trickled candidate. Use it at once.
        .with_prflx_acceptance_min_wait(Some(Duration::ZERO));
    if config.ice_policy == super::IcePolicy::Relay {
        // Only relayed pairs will ever come: take the first that works, instead
        // of waiting (2 s by default) in case a direct one does.
        settings = settings.with_relay_acceptance_min_wait(Some(Duration::ZERO));
    }
    if let Some(mtu) = tuning.sctp_mtu {
        settings = settings.with_sctp_mtu(mtu);
    }
    if let Some(window) = tuning.sctp_receive_window {
        settings = settings.with_sctp_max_receive_buffer_size(window);
    }
    let ice_servers = config
        .ice_servers
        .iter()
        .map(|server| RTCIceServer {
            urls: server.urls.clone(),
            username: server.username.clone().unwrap_or_default(),
            credential: server.credential.clone().unwrap_or_default(),
        })
        .collect();

    let mut builder = PeerConnectionBuilder::new();
    if let Some(bytes) = tuning.socket_buffer.or(config.socket_buffer) {
        builder = builder.with_runtime(super::sockets::SizedSockets::runtime(bytes));
    }
    let pc = builder
        .with_configuration(
            RTCConfigurationBuilder::new()
                .with_ice_servers(ice_servers)
                .with_ice_transport_policy(match config.ice_policy {
                    super::IcePolicy::All => RTCIceTransportPolicy::All,
                    super::IcePolicy::Relay => RTCIceTransportPolicy::Relay,
                })
                .build(),
        )
        .with_setting_engine(settings.build())
        .with_handler(handler)
        .with_udp_addrs(config.udp_bind.clone())
        .with_data_channel_send_buffer_limit(send_window.channel_limit())
        .build()
        .await
        .map_err(TransportError::Setup)?;

    let connection = Arc::new(Connection {
        pc: Arc::new(pc),
        ending,
        send_window,
        native_peer,
    });
    Ok((
        connection,
        ConnectionEvents {
            candidates,
            channels,
        },
    ))
}

/// The webrtc-rs event handler: runs on the driver, never blocks.
struct Handler {
    candidates: mpsc::Sender<IceCandidate>,
    channels: mpsc::Sender<Arc<dyn DataChannel>>,
    ending: Ending,
    policy: ChannelPolicy,
}

#[async_trait::async_trait]
impl PeerConnectionEventHandler for Handler {
    async fn on_ice_candidate(&self, event: RTCPeerConnectionIceEvent) {
        let Some(candidate) = super::candidate::from_local(&event.candidate) else {
            tracing::debug!(candidate = %event.candidate, "cannot write out a local candidate");
            return;
        };
        match self.candidates.try_send(candidate) {
            Ok(()) => {}
            // The handshake was dropped: nobody wants candidates any more.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(c)) => {
                tracing::warn!(
                    candidate = %c.candidate,
                    "over {LOCAL_CANDIDATE_QUEUE} local ICE candidates waiting; dropped one"
                );
            }
        }
    }

    async fn on_connection_state_change(&self, state: RTCPeerConnectionState) {
        tracing::debug!(%state, "peer connection state");
        let reason = match state {
            RTCPeerConnectionState::Disconnected => LinkClosed::ConnectionLost,
            RTCPeerConnectionState::Failed => LinkClosed::ConnectionFailed,
            RTCPeerConnectionState::Closed => LinkClosed::ConnectionClosed,
            _ => return,
        };
        self.ending.end(reason);
    }

    async fn on_data_channel(&self, channel: Arc<dyn DataChannel>) {
        if self.policy != ChannelPolicy::AcceptLinkfs {
            tracing::debug!("ignoring a data channel the other side opened");
            return;
        }
        // `label()` locks the connection core, which the driver does not hold while it
        // calls this handler.
        match channel.label().await {
            Ok(label) if label == linkfs_proto::CHANNEL_LABEL => {
                if self.channels.try_send(channel).is_err() {
                    tracing::debug!("a second linkfs data channel was opened; ignoring it");
                }
            }
            Ok(label) => tracing::debug!(%label, "ignoring a data channel with another label"),
            Err(error) => tracing::debug!(%error, "a data channel closed as it opened"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Route;

    /// Through TURN, the sharer's relayed candidate often reached the
    /// visitor's ICE in a check before it came through the relay's signalling;
    /// the report then had no entry for it, and `linkfs get` never said how it
    /// went (CI, reach b).
    #[test]
    fn route_is_named_when_the_remote_candidate_came_from_a_check() {
        let route = Route::of_pair(Some("relay".into()), None).expect("a route");
        assert!(route.relayed());
        assert_eq!(route.to_string(), "through a TURN relay (relay to prflx)");
        let direct = Route::of_pair(Some("host".into()), None).expect("a route");
        assert_eq!(direct.to_string(), "directly (host to prflx)");
        assert!(Route::of_pair(None, Some("host".into())).is_none());
    }
}
