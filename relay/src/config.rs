//! What an operator can set: limits, ICE servers, where the web app comes from.
//!
//! Every bound the relay enforces lives in [`Limits`], with the default stated on
//! each field. [`RelayConfig::validate`] refuses values that would make the relay
//! useless (a zero limit, a ping interval longer than the idle timeout), so the
//! rest of the crate can rely on them.

use std::path::PathBuf;
use std::time::Duration;

use linkfs_proto::signal::{IceServer, MAX_SIGNAL_MESSAGE};

use crate::turn::TurnConfig;

/// Everything the relay needs to run.
#[derive(Debug, Clone, Default)]
pub struct RelayConfig {
    /// Bounds on rooms, connections, messages and time.
    pub limits: Limits,
    /// STUN/TURN servers handed to every peer in its `welcome`. Empty by default:
    /// none are needed on one host or a LAN.
    pub ice_servers: Vec<IceServer>,
    /// Serve the web app from this directory, read at request time (development),
    /// instead of the copy embedded in the binary at build time.
    pub web_dir: Option<PathBuf>,
    /// Reverse proxies in front of the relay (addresses or networks): for a
    /// connection from one of these, the client's address is the last
    /// `X-Forwarded-For` entry that is not a proxy. From anyone else the header
    /// is ignored (it could be forged).
    pub trusted_proxies: Vec<IpNetwork>,
    /// If set, `/metrics` answers only requests with `Authorization: Bearer <token>`.
    pub metrics_token: Option<String>,
    /// A TURN server sharing a secret with the relay: every member of a live
    /// room gets short-lived credentials for it (see [`crate::turn`]).
    pub turn: Option<TurnConfig>,
    /// A Redis server (`redis://host:port[/db]`) through which several relays
    /// serve the same rooms (`docs/relay.md`); `None`: this relay alone.
    pub redis: Option<String>,
    /// Refuse sharers that connect from a web page (a host WebSocket whose
    /// request carries an `Origin` header, as every browser's does; the
    /// native `linkfs share` sends none). Visitors in browsers are welcome
    /// either way.
    pub no_tab_sharing: bool,
}

/// An address or a network (`10.0.0.0/8`, `fd00::/8`, `127.0.0.1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNetwork {
    pub addr: std::net::IpAddr,
    pub prefix: u8,
}

impl IpNetwork {
    /// Whether `ip` is in this network.
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        use std::net::IpAddr::{V4, V6};
        match (self.addr, ip) {
            (V4(net), V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (V6(net), V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl From<std::net::IpAddr> for IpNetwork {
    fn from(addr: std::net::IpAddr) -> Self {
        IpNetwork {
            addr,
            prefix: if addr.is_ipv4() { 32 } else { 128 },
        }
    }
}

impl std::str::FromStr for IpNetwork {
    type Err = NotAnIpNetwork;

    fn from_str(s: &str) -> Result<Self, NotAnIpNetwork> {
        let bad = || NotAnIpNetwork(s.to_owned());
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: std::net::IpAddr = addr.parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(bad)?,
            None => max,
        };
        Ok(IpNetwork { addr, prefix })
    }
}

/// Text that is neither an IP address nor a network.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an IP address or network (like 10.0.0.0/8)")]
pub struct NotAnIpNetwork(pub String);

/// The relay's bounds. Defaults suit a small public relay on 2 cores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest signaling message, in bytes, either direction. Default
    /// [`MAX_SIGNAL_MESSAGE`] (16 KiB). Larger frames are refused by the WebSocket
    /// reader before they are buffered; the peer gets `message-too-large` and is closed.
    pub max_message: usize,
    /// Guests (visitors) per room at once. Default 64; beyond: `room-full`.
    pub max_guests_per_room: usize,
    /// Rooms (active shares) on the relay. Default 10,000; beyond: `too-many-rooms`.
    pub max_rooms: usize,
    /// Open WebSockets on the relay. Default 20,000; beyond: HTTP 503 before the upgrade.
    pub max_connections: usize,
    /// Open WebSockets from one client address. Default 64; beyond: HTTP 429.
    /// (A page closes its socket once its data link is open, so a household or an
    /// office behind one address needs few at once.)
    pub max_connections_per_address: usize,
    /// Rooms (shares) opened from one client address. Default 16; beyond: HTTP 429.
    pub max_rooms_per_address: usize,
    /// Guests of one room from one client address. Default 16; beyond: HTTP 429
    /// (one client cannot fill a room's 64 places).
    pub max_guests_per_address: usize,
    /// TCP connections that are not (yet) WebSockets: page loads, health checks,
    /// upgrades in progress. Default 1,024. When `max_connections + max_http_connections`
    /// sockets are open, the relay stops accepting until one closes (the kernel's
    /// backlog holds the rest).
    pub max_http_connections: usize,
    /// TCP connections from one client address whose first request head has not
    /// arrived yet. Default 16; beyond it the oldest of them is dropped (a slow
    /// flood from one address holds at most this many descriptors). Trusted
    /// proxies are exempt. Separately, such connections from everyone together
    /// may hold at most a quarter of the process's open-file limit, and when
    /// descriptors run out the oldest of them are dropped so accepting goes on.
    pub max_unfinished_per_address: usize,
    /// Messages per second a connection may send, long term. Default 50.
    pub rate_per_sec: u32,
    /// Messages a connection may send at once before the rate applies. Default 100.
    pub rate_burst: u32,
    /// Refused (over-rate) messages tolerated before the connection is closed; one is
    /// forgiven per second. Default 100.
    pub max_refused: u32,
    /// Messages waiting to be written to one connection. Default 256; a peer whose
    /// queue is full is disconnected rather than buffered without bound.
    pub max_queued_messages: usize,
    /// Bytes waiting to be written to one connection. Default 128 KiB (eight
    /// maximum-size messages); same consequence as `max_queued_messages`.
    pub max_queued_bytes: usize,
    /// The relay pings every connection this often. Default 20 s.
    pub ping_interval: Duration,
    /// A connection with no traffic (not even a pong) for this long is closed with
    /// `idle-timeout`. Default 60 s.
    pub idle_timeout: Duration,
    /// A TCP connection from which not a byte arrives for this long is dropped: idle
    /// HTTP keep-alive, half-sent requests (slowloris), dead peers. Default 90 s.
    /// Must exceed `idle_timeout` (by a few seconds, so that a WebSocket gets its
    /// `idle-timeout` message and close frame first).
    pub silence_timeout: Duration,
    /// A connection's first request head (up to the blank line) must arrive
    /// within this long of the connection: a client that trickles it a byte at a
    /// time (slowloris) is dropped. Default 10 s.
    pub header_timeout: Duration,
    /// A write to a connection that takes longer than this disconnects it (its reader
    /// is gone or too slow). Default 10 s.
    pub write_timeout: Duration,
    /// On shutdown, how long to wait for connections to close. Default 5 s.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message: MAX_SIGNAL_MESSAGE,
            max_guests_per_room: 64,
            max_rooms: 10_000,
            max_connections: 20_000,
            max_connections_per_address: 64,
            max_rooms_per_address: 16,
            max_guests_per_address: 16,
            max_http_connections: 1_024,
            max_unfinished_per_address: 16,
            rate_per_sec: 50,
            rate_burst: 100,
            max_refused: 100,
            max_queued_messages: 256,
            max_queued_bytes: 128 * 1024,
            ping_interval: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(60),
            silence_timeout: Duration::from_secs(90),
            header_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

/// A configuration the relay cannot run with.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("the limit `{0}` must be at least 1")]
    Zero(&'static str),
    #[error("the limit `{0}` must be at most {1} (seconds, for times)")]
    TooLarge(&'static str, u64),
    #[error(
        "max_message is {0} bytes; it must be between 256 and {MAX_SIGNAL_MESSAGE} \
         (the protocol's limit)"
    )]
    MessageSize(usize),
    #[error(
        "max_queued_bytes ({queued}) must hold at least one message of max_message ({message}) bytes"
    )]
    QueueSmallerThanMessage { queued: usize, message: usize },
    #[error("the ping interval ({ping:?}) must be shorter than the idle timeout ({idle:?})")]
    PingNotBeforeIdle { ping: Duration, idle: Duration },
    #[error("the silence timeout ({silence:?}) must be longer than the idle timeout ({idle:?})")]
    SilenceNotAfterIdle { silence: Duration, idle: Duration },
    #[error("{0}")]
    Turn(String),
    #[error("{0}")]
    Redis(BadRedisUrl),
}

/// A `--redis` URL the Redis client cannot use (the client's words say why).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--redis {url:?} is not a Redis URL: {reason}")]
pub struct BadRedisUrl {
    pub url: String,
    pub reason: String,
}

impl RelayConfig {
    /// Checks that every bound is usable.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let l = &self.limits;
        let counts: [(&'static str, u64); 14] = [
            (
                "max_connections_per_address",
                l.max_connections_per_address as u64,
            ),
            ("max_rooms_per_address", l.max_rooms_per_address as u64),
            ("max_guests_per_address", l.max_guests_per_address as u64),
            ("max_guests_per_room", l.max_guests_per_room as u64),
            ("max_rooms", l.max_rooms as u64),
            ("max_connections", l.max_connections as u64),
            ("max_http_connections", l.max_http_connections as u64),
            (
                "max_unfinished_per_address",
                l.max_unfinished_per_address as u64,
            ),
            ("rate_per_sec", u64::from(l.rate_per_sec)),
            ("rate_burst", u64::from(l.rate_burst)),
            ("max_queued_messages", l.max_queued_messages as u64),
            ("ping_interval", l.ping_interval.as_millis() as u64),
            ("write_timeout", l.write_timeout.as_millis() as u64),
            ("idle_timeout", l.idle_timeout.as_millis() as u64),
        ];
        if let Some((name, _)) = counts.iter().find(|(_, v)| *v == 0) {
            return Err(ConfigError::Zero(name));
        }
        // Ceilings far above any real relay, low enough that nothing sized from them
        // (semaphores, channels, deadlines) can overflow.
        let ceilings: [(&'static str, u64, u64); 10] = [
            ("max_connections", l.max_connections as u64, MAX_COUNT),
            (
                "max_http_connections",
                l.max_http_connections as u64,
                MAX_COUNT,
            ),
            ("max_rooms", l.max_rooms as u64, MAX_COUNT),
            (
                "max_guests_per_room",
                l.max_guests_per_room as u64,
                MAX_COUNT,
            ),
            ("max_queued_messages", l.max_queued_messages as u64, 65_536),
            ("ping_interval", l.ping_interval.as_secs(), MAX_SECS),
            ("idle_timeout", l.idle_timeout.as_secs(), MAX_SECS),
            ("silence_timeout", l.silence_timeout.as_secs(), MAX_SECS),
            ("write_timeout", l.write_timeout.as_secs(), MAX_SECS),
            ("shutdown_grace", l.shutdown_grace.as_secs(), MAX_SECS),
        ];
        if let Some((name, _, max)) = ceilings.iter().find(|(_, v, max)| v > max) {
            return Err(ConfigError::TooLarge(name, *max));
        }
        if !(256..=MAX_SIGNAL_MESSAGE).contains(&l.max_message) {
            return Err(ConfigError::MessageSize(l.max_message));
        }
        // A forwarded message is the client's `data` re-wrapped in a slightly different
        // envelope; a queue must hold at least one full one.
        if l.max_queued_bytes < l.max_message + OUTBOUND_ENVELOPE_SLACK {
            return Err(ConfigError::QueueSmallerThanMessage {
                queued: l.max_queued_bytes,
                message: l.max_message,
            });
        }
        if l.ping_interval >= l.idle_timeout {
            return Err(ConfigError::PingNotBeforeIdle {
                ping: l.ping_interval,
                idle: l.idle_timeout,
            });
        }
        if l.silence_timeout <= l.idle_timeout {
            return Err(ConfigError::SilenceNotAfterIdle {
                silence: l.silence_timeout,
                idle: l.idle_timeout,
            });
        }
        if let Some(turn) = &self.turn {
            if turn.secret.is_empty() {
                return Err(ConfigError::Turn("the TURN secret is empty".into()));
            }
            if turn.urls.is_empty() {
                return Err(ConfigError::Turn(
                    "a TURN secret needs at least one TURN URL (--turn-url turn:HOST:3478)".into(),
                ));
            }
            if let Some(bad) = turn
                .urls
                .iter()
                .find(|u| !(u.starts_with("turn:") || u.starts_with("turns:")))
            {
                return Err(ConfigError::Turn(format!(
                    "{bad:?} is not a turn: or turns: URL"
                )));
            }
            if !(MIN_TURN_LIFETIME..=MAX_SECS).contains(&turn.lifetime.as_secs()) {
                return Err(ConfigError::Turn(format!(
                    "the TURN credential lifetime must be between {MIN_TURN_LIFETIME} and {MAX_SECS} seconds, not {}",
                    turn.lifetime.as_secs()
                )));
            }
        }
        Ok(())
    }
}

/// Shortest lifetime of handed-out TURN credentials: a minute (they are
/// renewed every half lifetime).
const MIN_TURN_LIFETIME: u64 = 60;

/// The most connections, rooms or guests any count limit may allow.
const MAX_COUNT: u64 = 10_000_000;
/// The longest any time limit may be: one day.
const MAX_SECS: u64 = 86_400;

/// How much longer a forwarded `{"t":"msg","from":N,...}` can be than the client's
/// `{"t":"msg","to":N,...}`: `from` is two bytes longer than `to`, and a peer number
/// can be up to 10 digits instead of 1.
pub(crate) const OUTBOUND_ENVELOPE_SLACK: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(RelayConfig::default().validate(), Ok(()));
    }

    #[test]
    fn zero_limits_are_refused_by_name() {
        let mut c = RelayConfig::default();
        c.limits.max_rooms = 0;
        assert_eq!(c.validate(), Err(ConfigError::Zero("max_rooms")));
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "the limit `max_rooms` must be at least 1"
        );
    }

    #[test]
    fn absurd_limits_are_refused_rather_than_overflowing() {
        let mut c = RelayConfig::default();
        c.limits.max_connections = usize::MAX;
        assert_eq!(
            c.validate(),
            Err(ConfigError::TooLarge("max_connections", 10_000_000))
        );
        let mut c = RelayConfig::default();
        c.limits.idle_timeout = Duration::from_secs(u64::MAX);
        assert_eq!(
            c.validate(),
            Err(ConfigError::TooLarge("idle_timeout", 86_400))
        );
    }

    #[test]
    fn ping_must_come_before_idle_timeout() {
        let mut c = RelayConfig::default();
        c.limits.ping_interval = Duration::from_secs(60);
        assert!(matches!(
            c.validate(),
            Err(ConfigError::PingNotBeforeIdle { .. })
        ));
    }

    #[test]
    fn message_limit_cannot_exceed_the_protocol() {
        let mut c = RelayConfig::default();
        c.limits.max_message = MAX_SIGNAL_MESSAGE + 1;
        assert_eq!(
            c.validate(),
            Err(ConfigError::MessageSize(MAX_SIGNAL_MESSAGE + 1))
        );
    }
}
