//! The rooms: who is in which, and routing between them.
//!
//! A room exists exactly as long as its host (peer 0) is connected. Guests get
//! numbers 1, 2, ... in join order; numbers are never reused within a room's life.
//! All state sits behind one mutex, held only for map lookups and non-blocking
//! queue pushes (never across an `.await`), so a slow peer cannot stall the others:
//! its queue overflows and it is disconnected (see [`crate::outbox`]).
//!
//! Bounds: at most `max_rooms` rooms and `max_guests_per_room` guests in each,
//! and guests join a room at most [`JOINS_PER_SEC`] a second (a burst of
//! [`JOIN_BURST`]): each new guest makes the host send a message (its
//! challenge), so a flood of guests must not drive the host over its own rate
//! limit. The host's budget is its own: guests cannot spend it.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use axum::extract::ws::Utf8Bytes;
use linkfs_proto::signal::{PeerId, RelayErrorCode, RelayToClient};

use crate::config::Limits;
use crate::metrics::RoomGauges;
use crate::outbox::{Closing, ConnId, PeerLink};
use crate::rate_limit::{RateLimiter, RateVerdict};
use crate::wire;

/// Why a peer could not join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JoinRefusal {
    TooManyRooms,
    NoSuchRoom,
    RoomFull,
    /// More guests are arriving than [`JOINS_PER_SEC`] allows.
    JoiningTooFast,
}

impl JoinRefusal {
    pub fn code(self) -> RelayErrorCode {
        match self {
            JoinRefusal::TooManyRooms => RelayErrorCode::TooManyRooms,
            JoinRefusal::NoSuchRoom => RelayErrorCode::NoSuchRoom,
            JoinRefusal::RoomFull => RelayErrorCode::RoomFull,
            JoinRefusal::JoiningTooFast => RelayErrorCode::RateLimited,
        }
    }
}

/// Why a message was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RouteRefusal {
    /// The target is not in the room (or is the sender itself).
    UnknownPeer,
    /// Guests may only address the host.
    GuestToGuest,
    /// The target's queue was full; it is being disconnected.
    TargetTooSlow,
}

/// Guests admitted to one room per second: 10.
pub const JOINS_PER_SEC: u32 = 10;
/// Guests admitted to one room at once before the rate applies: 20.
pub const JOIN_BURST: u32 = 20;

#[derive(Debug)]
struct Room {
    host: PeerLink,
    guests: HashMap<PeerId, PeerLink>,
    next_guest: u32,
    joins: RateLimiter,
}

#[derive(Debug, Default)]
struct Rooms {
    by_id: HashMap<Box<str>, Room>,
    guests: usize,
}

/// Every room on the relay.
#[derive(Debug)]
pub(crate) struct RoomRegistry {
    rooms: Mutex<Rooms>,
    max_rooms: usize,
    max_guests: usize,
}

impl RoomRegistry {
    pub fn new(limits: &Limits) -> Self {
        RoomRegistry {
            rooms: Mutex::new(Rooms::default()),
            max_rooms: limits.max_rooms,
            max_guests: limits.max_guests_per_room,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Rooms> {
        // Nothing panics while holding the lock, but if something ever did, the map
        // is still consistent (every update is a single insert or remove).
        self.rooms.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens `room` with `host` as peer 0. A room already open is taken over:
    /// only the holder of the room's key gets here (the HTTP layer checked its
    /// proof), so this is the sharer reconnecting while its old connection is
    /// not yet gone; that connection is closed and its guests told.
    pub fn open(&self, room: &str, host: PeerLink) -> Result<(), JoinRefusal> {
        let replaced = {
            let mut rooms = self.lock();
            let replaced = rooms.by_id.remove(room);
            if let Some(old) = &replaced {
                rooms.guests = rooms.guests.saturating_sub(old.guests.len());
            }
            if rooms.by_id.len() >= self.max_rooms {
                return Err(JoinRefusal::TooManyRooms);
            }
            rooms.by_id.insert(
                room.into(),
                Room {
                    host,
                    guests: HashMap::new(),
                    next_guest: 1,
                    joins: RateLimiter::new(JOINS_PER_SEC, JOIN_BURST, u32::MAX, Instant::now()),
                },
            );
            replaced
        };
        if let Some(old) = replaced {
            let closing = Closing {
                code: wire::close_code::NORMAL,
                reason: wire::HOST_LEFT,
            };
            old.host.push_then_close(
                wire::encode(&RelayToClient::Error {
                    code: RelayErrorCode::RoomTaken,
                    message: "the sharer connected again; this older connection is closed".into(),
                }),
                closing,
            );
            let left = wire::encode(&RelayToClient::Left { peer: PeerId::HOST });
            for guest in old.guests.values() {
                guest.push_then_close(left.clone(), closing);
            }
        }
        Ok(())
    }

    /// Adds `guest` to `room`, tells the host, and returns the guest's number.
    pub fn join(&self, room: &str, guest: PeerLink) -> Result<PeerId, JoinRefusal> {
        let mut rooms = self.lock();
        let Some(entry) = rooms.by_id.get_mut(room) else {
            return Err(JoinRefusal::NoSuchRoom);
        };
        if entry.guests.len() >= self.max_guests {
            return Err(JoinRefusal::RoomFull);
        }
        if entry.joins.check(Instant::now()) != RateVerdict::Accept {
            return Err(JoinRefusal::JoiningTooFast);
        }
        let peer = PeerId(entry.next_guest);
        // 4 billion joins to one room: refuse rather than reuse a number.
        entry.next_guest = entry
            .next_guest
            .checked_add(1)
            .ok_or(JoinRefusal::RoomFull)?;
        entry.guests.insert(peer, guest);
        // If the host cannot take even this, it is disconnected and the room closes.
        let _ = entry
            .host
            .push(wire::encode(&RelayToClient::Joined { peer }));
        rooms.guests += 1;
        Ok(peer)
    }

    /// Removes guest `peer` (connection `conn`) from `room` and tells the host.
    pub fn leave(&self, room: &str, peer: PeerId, conn: ConnId) {
        let mut rooms = self.lock();
        let Some(entry) = rooms.by_id.get_mut(room) else {
            return;
        };
        if entry.guests.get(&peer).is_none_or(|g| g.conn != conn) {
            return;
        }
        entry.guests.remove(&peer);
        let _ = entry.host.push(wire::encode(&RelayToClient::Left { peer }));
        rooms.guests = rooms.guests.saturating_sub(1);
    }

    /// The host (connection `conn`) left: the room closes. Every guest gets
    /// `left {peer: 0}` and is then closed.
    pub fn close(&self, room: &str, conn: ConnId) {
        let closed = {
            let mut rooms = self.lock();
            if rooms.by_id.get(room).is_none_or(|r| r.host.conn != conn) {
                return;
            }
            let closed = rooms.by_id.remove(room);
            if let Some(r) = &closed {
                rooms.guests = rooms.guests.saturating_sub(r.guests.len());
            }
            closed
        };
        let Some(closed) = closed else { return };
        let left = wire::encode(&RelayToClient::Left { peer: PeerId::HOST });
        let closing = Closing {
            code: wire::close_code::NORMAL,
            reason: wire::HOST_LEFT,
        };
        for guest in closed.guests.values() {
            guest.push_then_close(left.clone(), closing);
        }
    }

    /// Delivers `text` from `from` to `to` within `room`.
    pub fn route(
        &self,
        room: &str,
        from: PeerId,
        to: PeerId,
        text: Utf8Bytes,
    ) -> Result<(), RouteRefusal> {
        let rooms = self.lock();
        let Some(entry) = rooms.by_id.get(room) else {
            return Err(RouteRefusal::UnknownPeer);
        };
        let target = match (from == PeerId::HOST, to == PeerId::HOST) {
            (true, true) => return Err(RouteRefusal::UnknownPeer),
            (true, false) => entry.guests.get(&to).ok_or(RouteRefusal::UnknownPeer)?,
            (false, true) => &entry.host,
            (false, false) => return Err(RouteRefusal::GuestToGuest),
        };
        target.push(text).map_err(|_| RouteRefusal::TargetTooSlow)
    }

    pub fn gauges(&self) -> RoomGauges {
        let rooms = self.lock();
        RoomGauges {
            rooms: rooms.by_id.len(),
            guests: rooms.guests,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbox::{Outbound, Outbox, outbox};
    use tokio_util::sync::CancellationToken;

    fn small() -> Limits {
        Limits {
            max_rooms: 2,
            max_guests_per_room: 2,
            ..Limits::default()
        }
    }

    fn peer(n: u64) -> (PeerLink, Outbox) {
        outbox(ConnId(n), &Limits::default(), CancellationToken::new())
    }

    fn texts(outbox: &mut Outbox) -> Vec<String> {
        std::iter::from_fn(|| outbox.try_next())
            .map(|item| match item {
                Outbound::Text(t) => t.as_str().to_owned(),
                Outbound::Close(c) => format!("close {}", c.code),
            })
            .collect()
    }

    #[test]
    fn guests_are_numbered_and_announced_to_the_host() {
        let rooms = RoomRegistry::new(&small());
        let (host, mut host_box) = peer(1);
        rooms.open("room-0001", host).expect("open");
        assert_eq!(rooms.join("room-0001", peer(2).0), Ok(PeerId(1)));
        assert_eq!(rooms.join("room-0001", peer(3).0), Ok(PeerId(2)));
        assert_eq!(
            rooms.join("room-0001", peer(4).0),
            Err(JoinRefusal::RoomFull)
        );
        rooms.leave("room-0001", PeerId(1), ConnId(2));
        // Numbers are not reused.
        assert_eq!(rooms.join("room-0001", peer(5).0), Ok(PeerId(3)));
        assert_eq!(texts(&mut host_box).len(), 4, "three joins and a leave");
    }

    #[test]
    fn the_room_limit_holds_and_a_proven_host_takes_its_room_over() {
        let rooms = RoomRegistry::new(&small());
        let (old_host, mut old_box) = peer(1);
        rooms.open("room-0001", old_host).expect("first");
        let (guest, mut guest_box) = peer(6);
        rooms.join("room-0001", guest).expect("a guest");
        // The same sharer again (its key was checked before this): the old connection goes.
        rooms.open("room-0001", peer(2).0).expect("taken over");
        assert!(texts(&mut old_box).iter().any(|t| t.contains("room-taken")));
        assert!(
            texts(&mut guest_box)
                .iter()
                .any(|t| t.contains(r#""peer":0"#))
        );
        assert_eq!(rooms.gauges().rooms, 1);
        rooms.open("room-0002", peer(3).0).expect("second");
        assert_eq!(
            rooms.open("room-0003", peer(4).0),
            Err(JoinRefusal::TooManyRooms)
        );
        assert_eq!(
            rooms.join("room-0009", peer(5).0),
            Err(JoinRefusal::NoSuchRoom)
        );
    }

    #[test]
    fn only_the_host_that_opened_a_room_closes_it() {
        let rooms = RoomRegistry::new(&small());
        rooms.open("room-0001", peer(1).0).expect("open");
        rooms.close("room-0001", ConnId(99));
        assert_eq!(rooms.gauges().rooms, 1);
        rooms.close("room-0001", ConnId(1));
        assert_eq!(rooms.gauges().rooms, 0);
    }

    #[test]
    fn routing_rules() {
        let rooms = RoomRegistry::new(&small());
        let (host, _hb) = peer(1);
        let (g1, _g1b) = peer(2);
        let (g2, _g2b) = peer(3);
        rooms.open("room-0001", host).expect("open");
        rooms.join("room-0001", g1).expect("join");
        rooms.join("room-0001", g2).expect("join");
        let r = |from, to| rooms.route("room-0001", PeerId(from), PeerId(to), "x".into());
        assert_eq!(r(1, 0), Ok(()));
        assert_eq!(r(0, 2), Ok(()));
        assert_eq!(r(0, 9), Err(RouteRefusal::UnknownPeer));
        assert_eq!(r(0, 0), Err(RouteRefusal::UnknownPeer));
        assert_eq!(r(1, 2), Err(RouteRefusal::GuestToGuest));
    }

    #[test]
    fn the_host_hears_joins_and_leaves_and_guests_hear_the_host_leave() {
        let rooms = RoomRegistry::new(&small());
        let (host, mut host_box) = peer(1);
        let (g1, mut g1_box) = peer(2);
        rooms.open("room-0001", host).expect("open");
        rooms.join("room-0001", g1).expect("join");
        rooms.join("room-0001", peer(3).0).expect("join");
        rooms.leave("room-0001", PeerId(2), ConnId(3));
        assert_eq!(rooms.gauges().guests, 1);
        assert_eq!(
            texts(&mut host_box),
            [
                r#"{"t":"joined","peer":1}"#,
                r#"{"t":"joined","peer":2}"#,
                r#"{"t":"left","peer":2}"#
            ]
        );
        rooms.close("room-0001", ConnId(1));
        assert_eq!(rooms.gauges().guests, 0);
        assert_eq!(
            texts(&mut g1_box),
            [r#"{"t":"left","peer":0}"#, "close 1000"]
        );
    }
}
