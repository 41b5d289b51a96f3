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
//!
//! With several relays sharing rooms ([`crate::fleet`]), a room's members may be
//! connected to other relay processes: a member is then [`Member::There`], and
//! [`route`](RoomRegistry::route) answers [`Routed::Forward`] for the fleet to
//! carry. This registry holds only this process's view: the rooms it hosts
//! (with their guests here and elsewhere) and the rooms its guests are in
//! (with their host elsewhere). The fleet-wide bounds live in Redis then.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use linkfs_proto::signal::{PeerId, RelayErrorCode, RelayToClient};

use crate::config::Limits;
use crate::metrics::RoomGauges;
use crate::outbox::{Closing, ConnId, PeerLink};
use crate::rate_limit::{RateLimiter, RateVerdict};
use crate::wire::{self, SignalText};

/// Why a peer could not join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JoinRefusal {
    TooManyRooms,
    NoSuchRoom,
    RoomFull,
    /// More guests are arriving than [`JOINS_PER_SEC`] allows.
    JoiningTooFast,
    /// Too many rooms, or guests of this room, from the client's address
    /// (checked across the fleet).
    TooManyFromAddress,
    /// The fleet's room directory cannot be reached.
    Unavailable,
}

impl JoinRefusal {
    pub fn code(self) -> RelayErrorCode {
        match self {
            JoinRefusal::TooManyRooms => RelayErrorCode::TooManyRooms,
            JoinRefusal::NoSuchRoom => RelayErrorCode::NoSuchRoom,
            JoinRefusal::RoomFull => RelayErrorCode::RoomFull,
            JoinRefusal::JoiningTooFast => RelayErrorCode::RateLimited,
            JoinRefusal::TooManyFromAddress => RelayErrorCode::TooManyFromAddress,
            JoinRefusal::Unavailable => RelayErrorCode::Unavailable,
        }
    }
}

/// Where a room's member is connected.
#[derive(Debug, Clone)]
pub(crate) enum Member {
    /// To this relay process.
    Here(PeerLink),
    /// To another relay of the fleet.
    There(RelayId),
}

/// A relay process of the fleet (random, per process start).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RelayId(pub Box<str>);

/// What became of a routed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Routed {
    /// In the target's queue here.
    Delivered,
    /// The target is connected to another relay: the fleet carries it there.
    Forward(RelayId),
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
    host: Member,
    guests: HashMap<PeerId, Member>,
    next_guest: u32,
    joins: RateLimiter,
}

impl Room {
    fn new(host: Member) -> Self {
        Room {
            host,
            guests: HashMap::new(),
            next_guest: 1,
            joins: RateLimiter::new(JOINS_PER_SEC, JOIN_BURST, u32::MAX, Instant::now()),
        }
    }

    fn hosted_here(&self) -> bool {
        matches!(self.host, Member::Here(_))
    }

    fn guests_here(&self) -> usize {
        self.guests
            .values()
            .filter(|g| matches!(g, Member::Here(_)))
            .count()
    }
}

#[derive(Debug, Default)]
struct Rooms {
    by_id: HashMap<Box<str>, Room>,
    /// Rooms whose host is connected here, and guests connected here.
    hosted: usize,
    guests: usize,
}

impl Rooms {
    fn insert(&mut self, id: &str, room: Room) -> Option<Room> {
        self.hosted += usize::from(room.hosted_here());
        self.guests += room.guests_here();
        let old = self.by_id.insert(id.into(), room);
        if let Some(o) = &old {
            self.forget_counts(o);
        }
        old
    }

    fn remove(&mut self, id: &str) -> Option<Room> {
        let old = self.by_id.remove(id);
        if let Some(o) = &old {
            self.forget_counts(o);
        }
        old
    }

    fn forget_counts(&mut self, room: &Room) {
        self.hosted = self.hosted.saturating_sub(usize::from(room.hosted_here()));
        self.guests = self.guests.saturating_sub(room.guests_here());
    }
}

/// Tells every guest connected here that the host left, and closes them.
fn send_host_left(guests: &HashMap<PeerId, Member>) {
    let left = wire::encode(&RelayToClient::Left { peer: PeerId::HOST });
    let closing = Closing {
        code: wire::close_code::NORMAL,
        reason: wire::HOST_LEFT,
    };
    for guest in guests.values() {
        if let Member::Here(link) = guest {
            link.push_then_close(left.clone(), closing);
        }
    }
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
            let replaced = rooms.remove(room);
            if rooms.hosted >= self.max_rooms {
                return Err(JoinRefusal::TooManyRooms);
            }
            rooms.insert(room, Room::new(Member::Here(host)));
            replaced
        };
        if let Some(old) = replaced {
            if let Member::Here(old_host) = &old.host {
                close_taken(old_host);
            }
            send_host_left(&old.guests);
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
        entry.guests.insert(peer, Member::Here(guest));
        // If the host cannot take even this, it is disconnected and the room closes.
        if let Member::Here(host) = &entry.host {
            let _ = host.push(wire::encode(&RelayToClient::Joined { peer }));
        }
        rooms.guests += 1;
        Ok(peer)
    }

    /// Removes guest `peer` (connection `conn`) from `room` and tells the host.
    pub fn leave(&self, room: &str, peer: PeerId, conn: ConnId) {
        let mut rooms = self.lock();
        let Some(entry) = rooms.by_id.get_mut(room) else {
            return;
        };
        if entry
            .guests
            .get(&peer)
            .is_none_or(|g| !matches!(g, Member::Here(l) if l.conn == conn))
        {
            return;
        }
        entry.guests.remove(&peer);
        match &entry.host {
            Member::Here(host) => {
                let _ = host.push(wire::encode(&RelayToClient::Left { peer }));
            }
            // The room's host is elsewhere: this relay kept the entry only for
            // its own guests.
            Member::There(_) if entry.guests.is_empty() => {
                rooms.by_id.remove(room);
            }
            Member::There(_) => {}
        }
        rooms.guests = rooms.guests.saturating_sub(1);
    }

    /// The host (connection `conn`) left: the room closes. Every guest gets
    /// `left {peer: 0}` and is then closed.
    pub fn close(&self, room: &str, conn: ConnId) {
        let closed = {
            let mut rooms = self.lock();
            if rooms
                .by_id
                .get(room)
                .is_none_or(|r| !matches!(&r.host, Member::Here(h) if h.conn == conn))
            {
                return;
            }
            rooms.remove(room)
        };
        if let Some(closed) = closed {
            send_host_left(&closed.guests);
        }
    }

    /// Delivers `text` from `from` to `to` within `room`, or says which relay
    /// of the fleet the target is connected to.
    pub fn route(
        &self,
        room: &str,
        from: PeerId,
        to: PeerId,
        text: SignalText,
    ) -> Result<Routed, RouteRefusal> {
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
        match target {
            Member::Here(link) => link
                .push(text)
                .map(|()| Routed::Delivered)
                .map_err(|_| RouteRefusal::TargetTooSlow),
            Member::There(relay) => Ok(Routed::Forward(relay.clone())),
        }
    }

    pub fn gauges(&self) -> RoomGauges {
        let rooms = self.lock();
        RoomGauges {
            rooms: rooms.hosted,
            guests: rooms.guests,
        }
    }

    // ---- the fleet's operations (see crate::fleet) ----

    /// Whether this relay may host one more room.
    pub fn has_room_for_one_more(&self) -> bool {
        self.lock().hosted < self.max_rooms
    }

    /// A guest connected here joined `room` as `peer` (numbered by the fleet).
    /// `host_at`: the relay the host is connected to, `None` for this one.
    /// Refused only when the room's host is said to be here but is not.
    pub fn join_numbered(
        &self,
        room: &str,
        peer: PeerId,
        guest: PeerLink,
        host_at: Option<RelayId>,
    ) -> Result<(), JoinRefusal> {
        let mut rooms = self.lock();
        match host_at {
            None => {
                let Some(entry) = rooms.by_id.get_mut(room).filter(|r| r.hosted_here()) else {
                    return Err(JoinRefusal::NoSuchRoom);
                };
                entry.guests.insert(peer, Member::Here(guest));
                if let Member::Here(host) = &entry.host {
                    let _ = host.push(wire::encode(&RelayToClient::Joined { peer }));
                }
            }
            Some(relay) => {
                let entry = rooms
                    .by_id
                    .entry(room.into())
                    .or_insert_with(|| Room::new(Member::There(relay.clone())));
                if !entry.hosted_here() {
                    // The host may have moved to another relay since.
                    entry.host = Member::There(relay);
                }
                entry.guests.insert(peer, Member::Here(guest));
            }
        }
        rooms.guests += 1;
        Ok(())
    }

    /// The highest guest number `room` has seen here (0 for none).
    pub fn highest_guest(&self, room: &str) -> u32 {
        self.lock().by_id.get(room).map_or(0, |r| {
            r.guests
                .keys()
                .map(|p| p.0)
                .max()
                .unwrap_or(0)
                .max(r.next_guest.saturating_sub(1))
        })
    }

    /// Another relay says a guest of a room hosted here joined there.
    pub fn joined_elsewhere(&self, room: &str, peer: PeerId, relay: RelayId) {
        let mut rooms = self.lock();
        if let Some(entry) = rooms.by_id.get_mut(room)
            && let Member::Here(host) = &entry.host
        {
            let _ = host.push(wire::encode(&RelayToClient::Joined { peer }));
            entry.guests.insert(peer, Member::There(relay));
        }
    }

    /// Another relay says a guest of a room hosted here left.
    pub fn left_elsewhere(&self, room: &str, peer: PeerId) {
        let mut rooms = self.lock();
        if let Some(entry) = rooms.by_id.get_mut(room)
            && let Member::Here(host) = &entry.host
            && matches!(entry.guests.get(&peer), Some(Member::There(_)))
        {
            entry.guests.remove(&peer);
            let _ = host.push(wire::encode(&RelayToClient::Left { peer }));
        }
    }

    /// The host of `room`, connected elsewhere, is gone (closed, moved to
    /// another connection, or its relay died): the guests here are told and closed.
    pub fn host_gone_elsewhere(&self, room: &str) {
        let gone = {
            let mut rooms = self.lock();
            if rooms.by_id.get(room).is_some_and(|r| !r.hosted_here()) {
                rooms.remove(room)
            } else {
                None
            }
        };
        if let Some(r) = gone {
            send_host_left(&r.guests);
        }
    }

    /// The sharer took `room` over through another relay: its connection `conn`
    /// here is closed and its guests told.
    pub fn taken_elsewhere(&self, room: &str, conn: ConnId) {
        let closed = {
            let mut rooms = self.lock();
            if rooms
                .by_id
                .get(room)
                .is_some_and(|r| matches!(&r.host, Member::Here(h) if h.conn == conn))
            {
                rooms.remove(room)
            } else {
                None
            }
        };
        if let Some(old) = closed {
            if let Member::Here(host) = &old.host {
                close_taken(host);
            }
            send_host_left(&old.guests);
        }
    }

    /// Delivers a message another relay carried here to `to` in `room`.
    pub fn deliver(&self, room: &str, to: PeerId, text: SignalText) -> Result<(), RouteRefusal> {
        let rooms = self.lock();
        let entry = rooms.by_id.get(room).ok_or(RouteRefusal::UnknownPeer)?;
        let target = if to == PeerId::HOST {
            &entry.host
        } else {
            entry.guests.get(&to).ok_or(RouteRefusal::UnknownPeer)?
        };
        match target {
            Member::Here(link) => link.push(text).map_err(|_| RouteRefusal::TargetTooSlow),
            Member::There(_) => Err(RouteRefusal::UnknownPeer),
        }
    }
}

/// Tells a host connection that the sharer connected again elsewhere, and closes it.
fn close_taken(old_host: &PeerLink) {
    let closing = Closing {
        code: wire::close_code::NORMAL,
        reason: wire::HOST_LEFT,
    };
    old_host.push_then_close(
        wire::encode(&RelayToClient::Error {
            code: RelayErrorCode::RoomTaken,
            message: "the sharer connected again; this older connection is closed".into(),
        }),
        closing,
    );
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
        assert_eq!(r(1, 0), Ok(Routed::Delivered));
        assert_eq!(r(0, 2), Ok(Routed::Delivered));
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

    #[test]
    fn members_on_other_relays_are_forwarded_to_and_told_of() {
        let rooms = RoomRegistry::new(&small());
        let b = RelayId("relay-b".into());
        // A room hosted here, with guest 1 here and guest 2 on relay B.
        let (host, mut host_box) = peer(1);
        rooms.open("room-0001", host).expect("open");
        let (g1, _g1b) = peer(2);
        rooms
            .join_numbered("room-0001", PeerId(1), g1, None)
            .expect("guest here");
        rooms.joined_elsewhere("room-0001", PeerId(2), b.clone());
        let r = |from, to| rooms.route("room-0001", PeerId(from), PeerId(to), "x".into());
        assert_eq!(r(0, 1), Ok(Routed::Delivered));
        assert_eq!(r(0, 2), Ok(Routed::Forward(b.clone())));
        rooms.left_elsewhere("room-0001", PeerId(2));
        assert_eq!(r(0, 2), Err(RouteRefusal::UnknownPeer));
        assert_eq!(
            texts(&mut host_box),
            [
                r#"{"t":"joined","peer":1}"#,
                r#"{"t":"joined","peer":2}"#,
                r#"{"t":"left","peer":2}"#
            ]
        );
        assert_eq!(rooms.gauges().rooms, 1);
        assert_eq!(rooms.gauges().guests, 1);
    }

    #[test]
    fn guests_here_of_a_room_hosted_elsewhere_hear_when_its_host_is_gone() {
        let rooms = RoomRegistry::new(&small());
        let a = RelayId("relay-a".into());
        let (g, mut g_box) = peer(2);
        rooms
            .join_numbered("room-0001", PeerId(5), g, Some(a.clone()))
            .expect("guest of a remote host");
        assert_eq!(
            rooms.route("room-0001", PeerId(5), PeerId::HOST, "x".into()),
            Ok(Routed::Forward(a))
        );
        assert_eq!(
            rooms.deliver("room-0001", PeerId(5), "from the host".into()),
            Ok(())
        );
        assert_eq!(rooms.gauges().rooms, 0, "not hosted here");
        rooms.host_gone_elsewhere("room-0001");
        assert_eq!(
            texts(&mut g_box),
            ["from the host", r#"{"t":"left","peer":0}"#, "close 1000"]
        );
        assert_eq!(rooms.gauges().guests, 0);
    }

    #[test]
    fn a_host_taken_over_through_another_relay_is_closed_here() {
        let rooms = RoomRegistry::new(&small());
        let (host, mut host_box) = peer(1);
        rooms.open("room-0001", host).expect("open");
        let (g, mut g_box) = peer(2);
        rooms.join("room-0001", g).expect("guest");
        rooms.taken_elsewhere("room-0001", ConnId(99));
        assert_eq!(rooms.gauges().rooms, 1, "another connection: not ours");
        rooms.taken_elsewhere("room-0001", ConnId(1));
        assert_eq!(rooms.gauges().rooms, 0);
        assert!(
            texts(&mut host_box)
                .iter()
                .any(|t| t.contains("room-taken"))
        );
        assert!(
            texts(&mut g_box)
                .iter()
                .any(|t| t == r#"{"t":"left","peer":0}"#)
        );
    }
}
