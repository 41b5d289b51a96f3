//! How a native peer connection is set up: ICE servers, the UDP addresses it binds,
//! its send-buffer limit, socket buffers and how long it may take to open.
//!
//! The defaults are the settings measured to work on this project's machines
//! (`docs/webrtc-notes.md`, and `linkfs-bench-channel`): explicit bind addresses (a
//! wildcard bind makes webrtc-rs skip loopback candidates), native mDNS off (its socket
//! fails where there is no multicast route), a send-buffer limit small enough that
//! Chromium's 128 KiB UDP receive buffer never overflows (32 KiB toward browsers,
//! 64 KiB between native peers), 1 MiB socket buffers of our own.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use linkfs_proto::signal::IceServer;

use super::pace::PaceConfig;
use crate::local_addrs;

/// Default send-buffer limit per data channel: 32 KiB.
///
/// The bytes handed to a channel but not yet acknowledged by the other side never
/// exceed this plus one frame (`send` waits below it). Toward Chromium, whose UDP
/// socket holds 128 KiB and charges every datagram in full, 64 KiB (up to two 60 KiB
/// frames in flight) lost 1,000-1,400 datagrams per 600 MiB on this machine while
/// other work ran, at 44-63 MB/s; 32 KiB lost none, at 57-68 MB/s (median 63). A 1 MiB
/// limit stalled for good in 1-2 runs of 5. Native peers get 64 KiB through
/// [`NativeTuning::ANY_PATH`].
pub const DEFAULT_SEND_BUFFER_LIMIT: usize = 32 * 1024;

/// How a link decides how many bytes it keeps handed to the data channel and
/// not yet acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendWindow {
    /// A fixed number (the channel's send-buffer limit): right where the path
    /// is loopback and its round trip too short to matter.
    Fixed(usize),
    /// Sized to the path's measured rate and round trip, and paced
    /// ([`super::pace`]): across a network.
    Paced(PaceConfig),
}

impl SendWindow {
    /// The send-buffer limit webrtc-rs enforces below ours: the window, or the
    /// largest paced window and one frame (the pacer keeps below it).
    pub fn channel_limit(&self) -> usize {
        match self {
            SendWindow::Fixed(n) => *n,
            SendWindow::Paced(p) => p.max_window + linkfs_proto::MAX_FRAME_LEN,
        }
    }

    /// The window toward browsers: paced from [`DEFAULT_SEND_BUFFER_LIMIT`] up to
    /// 4 MiB (Chromium's SCTP receive window is 5 MiB), bursts of at most 32 KiB
    /// beyond the pacing rate (Chromium's UDP socket holds 128 KiB).
    pub const BROWSER: SendWindow = SendWindow::Paced(PaceConfig {
        min_window: DEFAULT_SEND_BUFFER_LIMIT,
        max_window: 4 << 20,
        burst: 32 * 1024,
        initial_rtt: Duration::from_millis(10),
    });

    /// Between native peers: paced from 64 KiB up to 8 MiB (native receivers
    /// advertise an 8 MiB SCTP window: [`NativeTuning::ANY_PATH`]), bursts up
    /// to 256 KiB (what 125 MB/s brings in 2 ms).
    pub const NATIVE: SendWindow = SendWindow::Paced(PaceConfig {
        min_window: 64 * 1024,
        max_window: 8 << 20,
        burst: 256 * 1024,
        initial_rtt: Duration::from_millis(10),
    });
}

/// Default time from the start of a handshake to an open data channel: 15 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Default time without any packet from the other side before the link counts as lost:
/// 4 s (ICE "disconnected"). Keepalives go out every second, so a live but idle link
/// never comes near it.
pub const DEFAULT_LOST_AFTER: Duration = Duration::from_secs(4);

/// Default kernel buffer per UDP socket: 1 MiB (the kernel caps it at
/// `net.core.rmem_max`/`wmem_max`).
///
/// The kernel charges every queued datagram its full buffer size, so a burst of small
/// frames (a few hundred bytes each, one datagram each) overflowed the 208 KiB default
/// receive buffer here even under a 64 KiB send-buffer limit: 512-640 datagrams lost
/// per 20 MiB of 200-byte frames, which webrtc-rs's SCTP recovers from slowly. With
/// 1 MiB: none lost, full-size throughput unchanged. Memory is only used while
/// datagrams wait.
pub const DEFAULT_SOCKET_BUFFER: usize = 1024 * 1024;

/// Settings for one native WebRTC connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportConfig {
    /// STUN/TURN servers (from the relay's welcome). None are needed on one host or a LAN.
    pub ice_servers: Vec<IceServer>,
    /// Local UDP addresses to bind, one socket each (port 0 = any free port). Must not be
    /// a wildcard if loopback peers matter. Default: [`default_bind_addrs`].
    pub udp_bind: Vec<SocketAddr>,
    /// Which paths ICE may use: any (the default), or only through a TURN relay
    /// (`--ice-policy relay`: the other side never learns this machine's addresses).
    pub ice_policy: IcePolicy,
    /// How many bytes a link keeps unacknowledged (default [`SendWindow::BROWSER`]:
    /// paced, from [`DEFAULT_SEND_BUFFER_LIMIT`] up; `send` waits beyond it).
    pub send_window: SendWindow,
    /// How long a handshake may take, from its start to an open data channel.
    pub connect_timeout: Duration,
    /// Silence from the other side after which the link counts as lost and `recv`
    /// returns `None` (see [`DEFAULT_LOST_AFTER`]).
    pub lost_after: Duration,
    /// Kernel buffer to ask for on each UDP socket, receive and send, or `None` for the
    /// system default (208 KiB on Linux). See [`DEFAULT_SOCKET_BUFFER`].
    pub socket_buffer: Option<usize>,
    /// Extra tuning for links whose other side is a native linkfs peer (default
    /// [`NativeTuning::ANY_PATH`]; `None` for none). An offering side always applies it (its other side is a
    /// sharer, always native); an answering side applies it only when the offer carries
    /// the native-peer marker ([`NATIVE_PEER_MARKER`](super::NATIVE_PEER_MARKER)), so
    /// browser visitors keep the browser-safe settings.
    pub native_peer: Option<NativeTuning>,
    /// Lanes a visitor opens beside its link to a sharer at a distance, for
    /// bulk reads ([`crate::lanes`]; 0: none). Not used by a sharer.
    pub lanes: u8,
}

/// Which candidate pairs ICE may use (the browser's `iceTransportPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IcePolicy {
    /// Direct paths first, a TURN relay when they fail.
    #[default]
    All,
    /// Only through a TURN relay; fails with no TURN server.
    Relay,
}

impl std::str::FromStr for IcePolicy {
    type Err = UnknownIcePolicy;

    fn from_str(s: &str) -> Result<Self, UnknownIcePolicy> {
        match s {
            "all" => Ok(IcePolicy::All),
            "relay" => Ok(IcePolicy::Relay),
            _ => Err(UnknownIcePolicy(s.to_owned())),
        }
    }
}

/// An ICE policy other than `all` and `relay`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: the ICE policy is `all` or `relay`")]
pub struct UnknownIcePolicy(pub String);

/// Settings that only make sense when both ends are webrtc-rs (native <-> native).
/// Each `None` keeps the ordinary setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NativeTuning {
    /// Bytes per SCTP packet (webrtc-rs default 1191, sized for TURN over IPv6). Larger
    /// packets cut per-packet work, which is what bounds throughput here; above about
    /// 1400 the path must carry big UDP datagrams without IP fragmentation (loopback
    /// does; a LAN does not).
    pub sctp_mtu: Option<u32>,
    /// SCTP receive window in bytes (webrtc-rs default 1 MiB): what the other
    /// side may have in flight toward this one.
    pub sctp_receive_window: Option<u32>,
    /// Replaces [`TransportConfig::send_window`].
    pub send_window: Option<SendWindow>,
    /// Replaces [`TransportConfig::socket_buffer`]. A send-buffer limit above 64 KiB
    /// needs a larger one: bursts that overflow the receiving socket are lost, and
    /// webrtc-rs's SCTP recovers from losses slowly (a 1 MiB limit with 208 KiB
    /// sockets: 60 MB/s).
    pub socket_buffer: Option<usize>,
}

impl NativeTuning {
    /// Safe on any network path: the [`SendWindow::NATIVE`] window (paced, from
    /// 64 KiB up to 8 MiB as the path's rate and round trip need) and an 8 MiB SCTP
    /// receive window, so that the other side may keep that much in flight. (A fixed
    /// 64 KiB was measured 12% faster than 32 KiB on one host, and it is where the
    /// paced window starts; at 20 ms it held a link to 64 KiB per round trip.) The
    /// default for [`TransportConfig::native_peer`].
    pub const ANY_PATH: Self = Self {
        sctp_mtu: None,
        sctp_receive_window: Some(8 << 20),
        send_window: Some(SendWindow::NATIVE),
        socket_buffer: None,
    };

    /// Both ends on this host, so the path is loopback: 16 KiB SCTP packets (the most a
    /// DTLS record holds), a 256 KiB send-buffer limit and 4 MiB socket buffers.
    /// Measured with `linkfs-bench-channel` on this 2-core machine: median about
    /// 840 MB/s against about 320 MB/s with the defaults.
    pub const SAME_HOST: Self = Self {
        sctp_mtu: Some(16 * 1024),
        sctp_receive_window: None,
        send_window: Some(SendWindow::Fixed(256 * 1024)),
        socket_buffer: Some(4 * 1024 * 1024),
    };
}

impl Default for TransportConfig {
    fn default() -> Self {
        Self {
            ice_servers: Vec::new(),
            udp_bind: default_bind_addrs(),
            ice_policy: IcePolicy::All,
            send_window: SendWindow::BROWSER,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            lost_after: DEFAULT_LOST_AFTER,
            socket_buffer: Some(DEFAULT_SOCKET_BUFFER),
            native_peer: Some(NativeTuning::ANY_PATH),
            lanes: crate::lanes::MAX_LANES,
        }
    }
}

impl TransportConfig {
    /// The defaults, bound to 127.0.0.1 only: both peers on this host (tests, benchmarks).
    pub fn loopback() -> Self {
        Self {
            udp_bind: vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0)],
            ..Self::default()
        }
    }
}

/// Every address of an up, non-loopback interface another machine could
/// reach (IPv4, and global or unique-local IPv6:
/// [`local_addrs::interface_addrs`]), each with port 0; 127.0.0.1 only where
/// there is none. IPv6 link-local addresses are left out (they need scope ids
/// and add nothing on one LAN).
///
/// Not loopback beside them: a peer on this machine reaches the interface
/// addresses as well, and a pair from 127.0.0.1 to a browser's address could
/// be the one nominated (host candidates all have one priority; the first to
/// succeed wins), which Firefox answers checks on but never sends data on: the
/// data channel never opened (a visitor of a Firefox tab share, 1 run in 3).
pub fn default_bind_addrs() -> Vec<SocketAddr> {
    let mut ips = Vec::new();
    for ip in local_addrs::interface_addrs() {
        if !ips.contains(&ip) && !ip.is_loopback() {
            ips.push(ip);
        }
    }
    if ips.is_empty() {
        ips.push(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    ips.into_iter().map(|ip| SocketAddr::new(ip, 0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_binds_loopback_only_where_nothing_else_and_never_a_wildcard() {
        let addrs = default_bind_addrs();
        let loopback = addrs.iter().filter(|a| a.ip().is_loopback()).count();
        let others = addrs.len() - loopback;
        assert_eq!(loopback, usize::from(others == 0), "{addrs:?}");
        assert!(!addrs.is_empty());
        for addr in &addrs {
            assert!(!addr.ip().is_unspecified(), "{addr} is a wildcard");
            assert_eq!(addr.port(), 0);
        }
        let mut dedup = addrs.clone();
        dedup.dedup();
        assert_eq!(dedup.len(), addrs.len());
    }

    #[test]
    fn defaults_are_the_measured_ones() {
        let config = TransportConfig::loopback();
        assert_eq!(config.send_window, SendWindow::BROWSER);
        assert_eq!(SendWindow::BROWSER.channel_limit(), (4 << 20) + 61_440);
        assert_eq!(
            config.udp_bind,
            vec!["127.0.0.1:0".parse::<SocketAddr>().unwrap()]
        );
        assert!(config.ice_servers.is_empty());
        assert_eq!(config.native_peer, Some(NativeTuning::ANY_PATH));
        assert_eq!(config.socket_buffer, Some(1024 * 1024));
    }
}
