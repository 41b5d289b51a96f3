//! Counters for `/metrics`, in the Prometheus text format.
//!
//! Lock-free atomics, bumped where things happen; rendering reads them once each.
//! Gauges that the room registry already knows (rooms, guests) are passed in at
//! render time rather than kept twice.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why the relay turned something away. Each has a counter, labelled by [`Rejection::code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    NoSuchRoom,
    RoomTaken,
    RoomFull,
    TooManyRooms,
    MessageTooLarge,
    RateLimited,
    /// Closed after sustained rate-limit violations.
    RateAbuse,
    BadMessage,
    UnknownPeer,
    IdleTimeout,
    /// HTTP 400 before the upgrade (bad room id or role).
    BadRequest,
    /// HTTP 503 before the upgrade: `max_connections` reached.
    TooManyConnections,
    /// Disconnected because its outbound queue or a write overflowed or stalled.
    SlowConsumer,
    /// Refused because the fleet's room directory (Redis) could not be reached.
    Unavailable,
    /// A TCP connection dropped before its first request head arrived: its
    /// address had `max_unfinished_per_address` such connections (the oldest goes).
    UnfinishedFromOneAddress,
    /// A TCP connection dropped before its first request head arrived: the
    /// process ran out of file descriptors, or unfinished connections held a
    /// quarter of them (the oldest go).
    OutOfDescriptors,
}

impl Rejection {
    const ALL: [Rejection; 16] = [
        Rejection::NoSuchRoom,
        Rejection::RoomTaken,
        Rejection::RoomFull,
        Rejection::TooManyRooms,
        Rejection::MessageTooLarge,
        Rejection::RateLimited,
        Rejection::RateAbuse,
        Rejection::BadMessage,
        Rejection::UnknownPeer,
        Rejection::IdleTimeout,
        Rejection::BadRequest,
        Rejection::TooManyConnections,
        Rejection::SlowConsumer,
        Rejection::Unavailable,
        Rejection::UnfinishedFromOneAddress,
        Rejection::OutOfDescriptors,
    ];

    /// The metric label: the wire's error code where there is one.
    pub fn code(self) -> &'static str {
        match self {
            Rejection::NoSuchRoom => "no-such-room",
            Rejection::RoomTaken => "room-taken",
            Rejection::RoomFull => "room-full",
            Rejection::TooManyRooms => "too-many-rooms",
            Rejection::MessageTooLarge => "message-too-large",
            Rejection::RateLimited => "rate-limited",
            Rejection::RateAbuse => "rate-abuse",
            Rejection::BadMessage => "bad-message",
            Rejection::UnknownPeer => "unknown-peer",
            Rejection::IdleTimeout => "idle-timeout",
            Rejection::BadRequest => "bad-request",
            Rejection::TooManyConnections => "too-many-connections",
            Rejection::SlowConsumer => "slow-consumer",
            Rejection::Unavailable => "unavailable",
            Rejection::UnfinishedFromOneAddress => "unfinished-per-address",
            Rejection::OutOfDescriptors => "out-of-descriptors",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The relay's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    connections_open: AtomicU64,
    connections_total: AtomicU64,
    messages_forwarded: AtomicU64,
    bytes_forwarded: AtomicU64,
    rejections: [AtomicU64; Rejection::ALL.len()],
}

/// Gauges owned elsewhere, read when rendering.
#[derive(Debug, Clone, Copy)]
pub struct RoomGauges {
    pub rooms: usize,
    pub guests: usize,
}

impl Metrics {
    pub(crate) fn connection_opened(&self) {
        self.connections_open.fetch_add(1, Ordering::Relaxed);
        self.connections_total.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn connection_closed(&self) {
        self.connections_open.fetch_sub(1, Ordering::Relaxed);
    }

    /// One message of `bytes` (as written to the receiver) was queued for delivery.
    pub(crate) fn forwarded(&self, bytes: usize) {
        self.messages_forwarded.fetch_add(1, Ordering::Relaxed);
        self.bytes_forwarded
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub(crate) fn rejected(&self, why: Rejection) {
        self.rejections[why.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Open WebSockets now.
    pub fn connections_open(&self) -> u64 {
        self.connections_open.load(Ordering::Relaxed)
    }

    /// How often `why` happened since start.
    pub fn rejections(&self, why: Rejection) -> u64 {
        self.rejections[why.index()].load(Ordering::Relaxed)
    }

    /// The Prometheus text exposition (format 0.0.4).
    pub fn render(&self, rooms: RoomGauges) -> String {
        let mut out = String::with_capacity(2048);
        let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
            write_metric(&mut out, name, kind, help, value);
        };
        metric(
            "linkfs_relay_rooms",
            "gauge",
            "Rooms open now (each has its sharer connected).",
            rooms.rooms as u64,
        );
        metric(
            "linkfs_relay_guests",
            "gauge",
            "Guests (visitors) connected now, over all rooms.",
            rooms.guests as u64,
        );
        metric(
            "linkfs_relay_connections",
            "gauge",
            "WebSocket connections open now.",
            self.connections_open(),
        );
        metric(
            "linkfs_relay_connections_total",
            "counter",
            "WebSocket connections accepted since start.",
            self.connections_total.load(Ordering::Relaxed),
        );
        metric(
            "linkfs_relay_messages_forwarded_total",
            "counter",
            "Signaling messages forwarded between peers.",
            self.messages_forwarded.load(Ordering::Relaxed),
        );
        metric(
            "linkfs_relay_bytes_forwarded_total",
            "counter",
            "Bytes of forwarded signaling messages, as written to the receiving peer.",
            self.bytes_forwarded.load(Ordering::Relaxed),
        );
        let name = "linkfs_relay_rejections_total";
        let _ = write!(
            out,
            "# HELP {name} Requests, connections and messages the relay turned away, by reason.\n\
             # TYPE {name} counter\n"
        );
        for why in Rejection::ALL {
            let _ = writeln!(
                out,
                "{name}{{code=\"{}\"}} {}",
                why.code(),
                self.rejections(why)
            );
        }
        out
    }
}

/// Appends one metric (help, type, value) in the Prometheus text format.
pub(crate) fn write_metric(out: &mut String, name: &str, kind: &str, help: &str, value: u64) {
    // Writing to a String cannot fail.
    let _ = write!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rejection_has_its_own_counter() {
        for (i, why) in Rejection::ALL.iter().enumerate() {
            assert_eq!(why.index(), i, "{why:?} is out of order in ALL");
        }
    }

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        m.connection_opened();
        m.forwarded(120);
        m.rejected(Rejection::RoomFull);
        m.rejected(Rejection::RoomFull);
        let text = m.render(RoomGauges {
            rooms: 3,
            guests: 5,
        });
        for line in [
            "linkfs_relay_rooms 3",
            "linkfs_relay_guests 5",
            "linkfs_relay_connections 1",
            "linkfs_relay_messages_forwarded_total 1",
            "linkfs_relay_bytes_forwarded_total 120",
            "linkfs_relay_rejections_total{code=\"room-full\"} 2",
            "linkfs_relay_rejections_total{code=\"no-such-room\"} 0",
            "# TYPE linkfs_relay_rooms gauge",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }
}
