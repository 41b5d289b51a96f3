//! Several relay processes serving the same rooms through Redis
//! (`linkfs-relay --redis redis://...`), behind any load balancer: a sharer on
//! relay A and a visitor on relay B meet as if on one relay.
//!
//! # How
//!
//! - **Who is where** lives in Redis, in keys that expire unless their relay
//!   renews them ([`scripts`] has the key layout and the TTLs): a room's key
//!   names the relay and connection of its host; its guests are a sorted set of
//!   `"<peer> <relay>"`. Every check-and-change (open, join, close, renew) is
//!   one Lua script, so two relays never both admit the 65th guest.
//! - **Messages** between members on different relays go over Redis pub/sub
//!   ([`bus`]): each relay subscribes to its own channel; the relay of the
//!   sender publishes to the relay of the receiver, which pushes into the
//!   receiver's queue. Relays learn where a room's members are from the join
//!   (the host's relay is told where each guest joined), so forwarding a
//!   message is one `PUBLISH`, no lookup.
//! - **A dead relay** stops renewing: its rooms and guests lapse within
//!   [`scripts::ROOM_TTL`] (30 s). Its sharers reconnect (through the load
//!   balancer) to another relay and take their rooms back with a fresh proof
//!   of their key (the takeover tells the old room's guests, wherever they
//!   are, that the host left; they join again). Relays also notice, when they
//!   renew their guests, that a room's host is gone, and tell those guests.
//! - **Redis unreachable**: `/healthz` answers 503 with the reason; rooms and
//!   guests already here keep talking to each other; opening and joining are
//!   refused with "try again" until Redis is back, when the relay renews all it
//!   holds at once. The client library reconnects by itself: no restart.
//!
//! # Limits across the fleet
//!
//! Fleet-wide (in Redis): guests per room, guests of a room from one address,
//! rooms opened from one address, the join rate of a room, and the one use of
//! each host proof. Per process (each protects its own memory and sockets):
//! connections, rooms, connections per address, message rates, queues.

mod bus;
mod scripts;

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use linkfs_proto::signal::PeerId;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{IntoConnectionInfo, PushInfo, PushKind, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use bus::BusMessage;
use scripts::{REFRESH_EVERY, ROOM_TTL};

use crate::config::{BadRedisUrl, Limits};
use crate::metrics::write_metric;
use crate::outbox::ConnId;
use crate::rooms::{JoinRefusal, RelayId, RoomRegistry};
use crate::wire::SignalText;

/// Messages waiting to be published, at most: 8,192. Beyond, a message is
/// dropped (as a full outbox drops a slow peer's): its handshake retries.
const PUBLISH_QUEUE: usize = 8192;
/// Messages sent in one pipeline, at most.
const PUBLISH_BATCH: usize = 256;
/// How often the relay checks that Redis answers.
const HEALTH_EVERY: Duration = Duration::from_secs(1);
/// How long a Redis call may take before the relay counts Redis as unreachable.
const REDIS_TIMEOUT: Duration = Duration::from_secs(2);

/// Why the fleet could not do something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum FleetError {
    #[error(
        "the relay cannot reach its room directory (Redis) right now; try again in a few seconds"
    )]
    Unavailable,
    #[error("{0:?}")]
    Refused(JoinRefusal),
}

/// What opening a room found.
#[derive(Debug, Default)]
pub(crate) struct Opened {
    /// The host connection that held the room before, on another relay or this one.
    pub previous: Option<(RelayId, u64)>,
    /// The previous host's guests: the relays to tell.
    pub guest_relays: Vec<RelayId>,
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub(crate) struct FleetMetrics {
    pub published: AtomicU64,
    pub received: AtomicU64,
    pub dropped: AtomicU64,
    pub redis_errors: AtomicU64,
}

/// A handle on this relay's membership of the fleet; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Fleet {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    me: RelayId,
    /// The Redis address without credentials, for messages.
    where_: String,
    commands: OnceLock<ConnectionManager>,
    healthy: AtomicBool,
    publish: mpsc::Sender<(String, String)>,
    members: Mutex<Members>,
    rooms: Arc<RoomRegistry>,
    limits: Limits,
    metrics: FleetMetrics,
}

/// Redis (the fleet's room directory) has not answered lately: the relay
/// cannot do its work (`/healthz` says so).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot reach Redis at {at}")]
pub struct RedisUnreachable {
    /// Where Redis is (host and port).
    pub at: String,
}

/// What this relay holds, to renew it.
#[derive(Debug, Default)]
struct Members {
    /// Rooms hosted here: the host's connection and client address.
    hosts: HashMap<Box<str>, (ConnId, IpAddr)>,
    /// Guests here: (room, peer) -> client address and the room's owner when they joined.
    guests: HashMap<(Box<str>, u32), (IpAddr, String)>,
}

fn owner_string(relay: &RelayId, conn: ConnId) -> String {
    format!("{} {}", relay.0, conn.0)
}

fn parse_owner(owner: &str) -> Option<(RelayId, u64)> {
    let (relay, conn) = owner.split_once(' ')?;
    Some((RelayId(relay.into()), conn.parse().ok()?))
}

/// `"<peer> <relay>"` of a guest entry.
fn parse_guest(member: &str) -> Option<(u32, RelayId)> {
    let (peer, relay) = member.split_once(' ')?;
    Some((peer.parse().ok()?, RelayId(relay.into())))
}

impl Fleet {
    /// Joins the fleet at `url` (a `redis://` URL) with a fresh relay id, and
    /// keeps trying to reach Redis in the background until `stop`.
    pub(crate) fn start(
        url: &str,
        rooms: Arc<RoomRegistry>,
        limits: Limits,
        stop: CancellationToken,
    ) -> Result<Fleet, BadRedisUrl> {
        let info = url.into_connection_info().map_err(|e| BadRedisUrl {
            url: url.to_owned(),
            reason: e.to_string(),
        })?;
        let where_ = format!("{}", info.addr());
        let me = RelayId(random_id().into());
        let (publish, queue) = mpsc::channel(PUBLISH_QUEUE);
        let fleet = Fleet {
            inner: Arc::new(Inner {
                me,
                where_,
                commands: OnceLock::new(),
                healthy: AtomicBool::new(false),
                publish,
                members: Mutex::new(Members::default()),
                rooms,
                limits,
                metrics: FleetMetrics::default(),
            }),
        };
        let redis = info
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3);
        let info = info.set_redis_settings(redis);
        tokio::spawn(fleet.clone().run(info, queue, stop));
        Ok(fleet)
    }

    /// Whether Redis answered lately; the reason when not (for `/healthz`).
    pub fn health(&self) -> Result<(), RedisUnreachable> {
        if self.inner.healthy.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err(RedisUnreachable {
                at: self.inner.where_.clone(),
            })
        }
    }

    /// The fleet's figures, appended to the relay's metrics page.
    pub(crate) fn render_metrics(&self, out: &mut String) {
        let m = self.metrics();
        let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
            write_metric(out, name, kind, help, value);
        };
        metric(
            "linkfs_relay_redis_up",
            "gauge",
            "1 while Redis (the fleet's room directory) answers, else 0.",
            u64::from(self.health().is_ok()),
        );
        metric(
            "linkfs_relay_fleet_published_total",
            "counter",
            "Messages published to other relays of the fleet.",
            m.published.load(Ordering::Relaxed),
        );
        metric(
            "linkfs_relay_fleet_received_total",
            "counter",
            "Messages received from other relays of the fleet.",
            m.received.load(Ordering::Relaxed),
        );
        metric(
            "linkfs_relay_fleet_dropped_total",
            "counter",
            "Messages for other relays that could not be published (queue full or Redis unreachable).",
            m.dropped.load(Ordering::Relaxed),
        );
        metric(
            "linkfs_relay_redis_errors_total",
            "counter",
            "Redis calls that failed or timed out.",
            m.redis_errors.load(Ordering::Relaxed),
        );
    }

    pub fn metrics(&self) -> &FleetMetrics {
        &self.inner.metrics
    }

    fn members(&self) -> MutexGuard<'_, Members> {
        self.inner
            .members
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn commands(&self) -> Result<ConnectionManager, FleetError> {
        if !self.inner.healthy.load(Ordering::Relaxed) {
            return Err(FleetError::Unavailable);
        }
        self.inner
            .commands
            .get()
            .cloned()
            .ok_or(FleetError::Unavailable)
    }

    /// Runs a script within [`REDIS_TIMEOUT`].
    async fn invoke<T: redis::FromRedisValue>(
        &self,
        call: &redis::ScriptInvocation<'_>,
    ) -> Result<T, FleetError> {
        let mut conn = self.commands()?;
        match tokio::time::timeout(REDIS_TIMEOUT, call.invoke_async(&mut conn)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                self.redis_failed(&e.to_string());
                Err(FleetError::Unavailable)
            }
            Err(_) => {
                self.redis_failed("no answer in time");
                Err(FleetError::Unavailable)
            }
        }
    }

    fn redis_failed(&self, why: &str) {
        self.inner
            .metrics
            .redis_errors
            .fetch_add(1, Ordering::Relaxed);
        if self.inner.healthy.swap(false, Ordering::Relaxed) {
            tracing::warn!(redis = %self.inner.where_, %why, "Redis stopped answering; new rooms and visitors wait until it is back");
        }
    }

    /// Records a host proof's first use across the fleet: `false` if any relay saw it before.
    pub(crate) async fn first_use_of_proof(
        &self,
        sig: &str,
        ttl: Duration,
    ) -> Result<bool, FleetError> {
        let mut conn = self.commands()?;
        let set: Result<Option<String>, _> = tokio::time::timeout(
            REDIS_TIMEOUT,
            redis::cmd("SET")
                .arg(scripts::proof_key(sig))
                .arg(1)
                .arg("NX")
                .arg("PX")
                .arg(ttl.as_millis() as u64)
                .query_async(&mut conn),
        )
        .await
        .unwrap_or_else(|_| Err(redis::RedisError::from((redis::ErrorKind::Io, "timeout"))));
        match set {
            Ok(answer) => Ok(answer.is_some()),
            Err(e) => {
                self.redis_failed(&e.to_string());
                Err(FleetError::Unavailable)
            }
        }
    }

    /// Makes this relay's connection `conn` the host of `room` across the fleet.
    pub(crate) async fn open(
        &self,
        room: &str,
        conn: ConnId,
        ip: IpAddr,
    ) -> Result<Opened, FleetError> {
        let ip_s = ip.to_string();
        let owner = owner_string(&self.inner.me, conn);
        let script = &*scripts::OPEN;
        let mut call = script.prepare_invoke();
        call.key(scripts::room_key(room))
            .key(scripts::guests_key(room))
            .key(scripts::next_key(room))
            .key(scripts::addr_rooms_key(&ip_s))
            .arg(&owner)
            .arg(ROOM_TTL.as_millis() as u64)
            .arg(self.inner.limits.max_rooms_per_address)
            .arg(room);
        let answer: Vec<String> = self.invoke(&call).await?;
        if answer.first().map(String::as_str) != Some("ok") {
            return Err(FleetError::Refused(JoinRefusal::TooManyFromAddress));
        }
        self.members().hosts.insert(room.into(), (conn, ip));
        let previous = answer
            .get(1)
            .filter(|p| !p.is_empty() && **p != owner)
            .and_then(|p| parse_owner(p));
        let mut guest_relays: Vec<RelayId> = answer
            .iter()
            .skip(2)
            .filter_map(|g| parse_guest(g).map(|(_, r)| r))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        guest_relays.retain(|r| *r != self.inner.me);
        Ok(Opened {
            previous,
            guest_relays,
        })
    }

    /// Tells the relays concerned that `room` was taken over: the previous
    /// host's relay closes it there, the previous guests' relays tell them.
    pub(crate) fn announce_takeover(&self, room: &str, opened: &Opened) {
        if let Some((relay, conn)) = &opened.previous
            && *relay != self.inner.me
        {
            self.send(
                relay,
                &BusMessage::Taken {
                    room: room.into(),
                    conn: *conn,
                },
            );
        }
        for relay in &opened.guest_relays {
            self.send(relay, &BusMessage::HostLeft { room: room.into() });
        }
    }

    /// The host connection `conn` of `room` is gone: the room closes across the
    /// fleet, and every relay with guests of it is told (in the background).
    pub(crate) fn close(&self, room: &str, conn: ConnId) {
        let ip = match self.members().hosts.get(room) {
            Some((c, ip)) if *c == conn => *ip,
            _ => return,
        };
        self.members().hosts.remove(room);
        let fleet = self.clone();
        let room = room.to_owned();
        tokio::spawn(async move {
            let script = &*scripts::CLOSE;
            let mut call = script.prepare_invoke();
            call.key(scripts::room_key(&room))
                .key(scripts::guests_key(&room))
                .key(scripts::addr_rooms_key(&ip.to_string()))
                .arg(owner_string(&fleet.inner.me, conn))
                .arg(&room);
            let Ok(guests) = fleet.invoke::<Vec<String>>(&call).await else {
                return; // The room lapses on its own within ROOM_TTL.
            };
            let relays: HashSet<RelayId> = guests
                .iter()
                .filter_map(|g| parse_guest(g).map(|(_, r)| r))
                .filter(|r| *r != fleet.inner.me)
                .collect();
            for relay in relays {
                fleet.send(&relay, &BusMessage::HostLeft { room: room.clone() });
            }
        });
    }

    /// Admits a guest of `room` from `ip` across the fleet: its number, and
    /// where the host is (`None`: on this relay).
    pub(crate) async fn join(
        &self,
        room: &str,
        ip: IpAddr,
    ) -> Result<(PeerId, Option<RelayId>), FleetError> {
        let ip_s = ip.to_string();
        let script = &*scripts::JOIN;
        let mut call = script.prepare_invoke();
        call.key(scripts::room_key(room))
            .key(scripts::guests_key(room))
            .key(scripts::next_key(room))
            .key(scripts::joins_key(room))
            .key(scripts::addr_guests_key(&ip_s, room))
            .arg(&*self.inner.me.0)
            .arg(self.inner.limits.max_guests_per_room)
            .arg(self.inner.limits.max_guests_per_address)
            .arg(ROOM_TTL.as_millis() as u64)
            .arg(crate::rooms::JOINS_PER_SEC)
            .arg(crate::rooms::JOIN_BURST);
        let answer: Vec<String> = self.invoke(&call).await?;
        let refusal = match answer.first().map(String::as_str) {
            Some("ok") => None,
            Some("no-such-room") => Some(JoinRefusal::NoSuchRoom),
            Some("room-full") => Some(JoinRefusal::RoomFull),
            Some("too-fast") => Some(JoinRefusal::JoiningTooFast),
            _ => Some(JoinRefusal::TooManyFromAddress),
        };
        if let Some(r) = refusal {
            return Err(FleetError::Refused(r));
        }
        let owner = answer.get(1).cloned().unwrap_or_default();
        let (Some((relay, _)), Some(peer)) = (
            parse_owner(&owner),
            answer.get(2).and_then(|p| p.parse::<u32>().ok()),
        ) else {
            return Err(FleetError::Unavailable);
        };
        self.members()
            .guests
            .insert((room.into(), peer), (ip, owner));
        let host_at = (relay != self.inner.me).then_some(relay);
        Ok((PeerId(peer), host_at))
    }

    /// Tells the host's relay (when it is another) that guest `peer` joined here.
    pub(crate) fn announce_join(&self, room: &str, peer: PeerId, host_at: &RelayId) {
        self.send(
            host_at,
            &BusMessage::Joined {
                room: room.into(),
                peer: peer.0,
                relay: self.inner.me.0.to_string(),
            },
        );
    }

    /// Guest `peer` of `room`, connected here, left (in the background).
    pub(crate) fn leave(&self, room: &str, peer: PeerId) {
        let Some((ip, owner)) = self.members().guests.remove(&(room.into(), peer.0)) else {
            return;
        };
        if let Some((relay, _)) = parse_owner(&owner)
            && relay != self.inner.me
        {
            self.send(
                &relay,
                &BusMessage::Left {
                    room: room.into(),
                    peer: peer.0,
                },
            );
        }
        let fleet = self.clone();
        let room = room.to_owned();
        tokio::spawn(async move {
            let script = &*scripts::LEAVE;
            let mut call = script.prepare_invoke();
            call.key(scripts::guests_key(&room))
                .key(scripts::addr_guests_key(&ip.to_string(), &room))
                .arg(format!("{} {}", peer.0, fleet.inner.me.0));
            let _ = fleet.invoke::<i64>(&call).await;
        });
    }

    /// Carries `text` for peer `to` of `room` to the relay it is connected to.
    pub(crate) fn forward(
        &self,
        relay: &RelayId,
        room: &str,
        to: PeerId,
        text: &SignalText,
    ) -> bool {
        self.send(
            relay,
            &BusMessage::Msg {
                room: room.into(),
                to: to.0,
                text: text.as_str().to_owned(),
            },
        )
    }

    fn send(&self, relay: &RelayId, message: &BusMessage) -> bool {
        let queued = self
            .inner
            .publish
            .try_send((scripts::relay_channel(&relay.0), message.encode()))
            .is_ok();
        if !queued {
            self.inner.metrics.dropped.fetch_add(1, Ordering::Relaxed);
        }
        queued
    }

    /// A message from another relay, for the rooms here.
    fn received(&self, message: BusMessage) {
        self.inner.metrics.received.fetch_add(1, Ordering::Relaxed);
        let rooms = &self.inner.rooms;
        match message {
            BusMessage::Msg { room, to, text } => {
                let _ = rooms.deliver(&room, PeerId(to), text.into());
            }
            BusMessage::Joined { room, peer, relay } => {
                rooms.joined_elsewhere(&room, PeerId(peer), RelayId(relay.into()));
            }
            BusMessage::Left { room, peer } => rooms.left_elsewhere(&room, PeerId(peer)),
            BusMessage::HostLeft { room } => {
                self.members().guests.retain(|(r, _), _| **r != *room);
                rooms.host_gone_elsewhere(&room);
            }
            BusMessage::Taken { room, conn } => {
                let mut members = self.members();
                if members
                    .hosts
                    .get(room.as_str())
                    .is_some_and(|(c, _)| c.0 == conn)
                {
                    members.hosts.remove(room.as_str());
                }
                drop(members);
                rooms.taken_elsewhere(&room, ConnId(conn));
            }
        }
    }

    /// Connects (retrying until it can), then publishes, watches Redis's
    /// health and renews what this relay holds, until `stop`.
    async fn run(
        self,
        info: redis::ConnectionInfo,
        mut queue: mpsc::Receiver<(String, String)>,
        stop: CancellationToken,
    ) {
        let client = match redis::Client::open(info) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "cannot use the Redis address");
                return;
            }
        };
        let config = || {
            ConnectionManagerConfig::new()
                .set_connection_timeout(Some(REDIS_TIMEOUT))
                .set_response_timeout(Some(REDIS_TIMEOUT))
                .set_max_delay(Duration::from_secs(2))
        };
        let channel = scripts::relay_channel(&self.inner.me.0);
        let (commands, subscriber) = loop {
            let fleet = self.clone();
            let on_push = move |push: PushInfo| {
                fleet.on_push(push);
                Ok::<(), redis::aio::SendError>(())
            };
            let connected = async {
                let commands = client.get_connection_manager_with_config(config()).await?;
                let mut sub = client
                    .get_connection_manager_with_config(
                        config()
                            .set_push_sender(on_push)
                            .set_automatic_resubscription(),
                    )
                    .await?;
                sub.subscribe(&channel).await?;
                Ok::<_, redis::RedisError>((commands, sub))
            };
            tokio::select! {
                () = stop.cancelled() => return,
                c = connected => match c {
                    Ok(c) => break c,
                    Err(e) => {
                        self.redis_failed(&e.to_string());
                        tracing::warn!(redis = %self.inner.where_, error = %e, "cannot reach Redis yet; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        };
        let _ = self.inner.commands.set(commands.clone());
        self.inner.healthy.store(true, Ordering::Relaxed);
        tracing::info!(redis = %self.inner.where_, relay = %self.inner.me.0, "joined the fleet");
        tokio::spawn(
            self.clone()
                .maintain(commands.clone(), subscriber, channel, stop.clone()),
        );
        // Publishing has this task to itself: renewing never delays a message.
        let mut publisher = commands;
        loop {
            let first = tokio::select! {
                () = stop.cancelled() => return,
                first = queue.recv() => match first {
                    Some(f) => f,
                    None => return,
                },
            };
            let mut pipe = redis::pipe();
            pipe.cmd("PUBLISH").arg(first.0).arg(first.1).ignore();
            let mut n: u64 = 1;
            while n < PUBLISH_BATCH as u64
                && let Ok((ch, text)) = queue.try_recv()
            {
                pipe.cmd("PUBLISH").arg(ch).arg(text).ignore();
                n += 1;
            }
            let sent =
                tokio::time::timeout(REDIS_TIMEOUT, pipe.query_async::<()>(&mut publisher)).await;
            match sent {
                Ok(Ok(())) => {
                    self.inner.metrics.published.fetch_add(n, Ordering::Relaxed);
                }
                Ok(Err(e)) => {
                    self.inner.metrics.dropped.fetch_add(n, Ordering::Relaxed);
                    self.redis_failed(&e.to_string());
                }
                Err(_) => {
                    self.inner.metrics.dropped.fetch_add(n, Ordering::Relaxed);
                    self.redis_failed("no answer in time");
                }
            }
        }
    }

    /// Watches Redis's health and renews what this relay holds, until `stop`.
    async fn maintain(
        self,
        commands: ConnectionManager,
        mut subscriber: ConnectionManager,
        channel: String,
        stop: CancellationToken,
    ) {
        let mut health = tokio::time::interval(HEALTH_EVERY);
        let mut renew = tokio::time::interval(REFRESH_EVERY);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = health.tick() => {
                    let mut conn = commands.clone();
                    let ping = tokio::time::timeout(
                        REDIS_TIMEOUT,
                        redis::cmd("PING").query_async::<String>(&mut conn),
                    )
                    .await;
                    let up = matches!(ping, Ok(Ok(_)));
                    let was = self.inner.healthy.swap(up, Ordering::Relaxed);
                    if up && !was {
                        // The client resubscribes on its own after reconnecting;
                        // subscribing again is harmless. Then renew all at once.
                        let _ = subscriber.subscribe(&channel).await;
                        tracing::info!(redis = %self.inner.where_, "Redis answers again");
                        self.renew().await;
                    } else if !up && was {
                        self.inner.healthy.store(true, Ordering::Relaxed);
                        self.redis_failed("no answer to a ping");
                    }
                }
                _ = renew.tick() => self.renew().await,
            }
        }
    }

    fn on_push(&self, push: PushInfo) {
        if !matches!(push.kind, PushKind::Message) {
            return;
        }
        // A message push is [channel, payload].
        if let Some(Value::BulkString(payload)) = push.data.get(1)
            && let Some(message) = BusMessage::decode(payload)
        {
            self.received(message);
        }
    }

    /// Renews every room hosted here and every guest here; tells hosts whose
    /// room another connection holds now, and guests whose host is gone.
    async fn renew(&self) {
        let (hosts, guests) = {
            let m = self.members();
            (
                m.hosts
                    .iter()
                    .map(|(r, v)| (r.clone(), *v))
                    .collect::<Vec<_>>(),
                m.guests
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<Vec<_>>(),
            )
        };
        let renew_room = &*scripts::RENEW_ROOM;
        for (room, (conn, ip)) in hosts {
            let mut call = renew_room.prepare_invoke();
            call.key(scripts::room_key(&room))
                .key(scripts::next_key(&room))
                .key(scripts::addr_rooms_key(&ip.to_string()))
                .arg(owner_string(&self.inner.me, conn))
                .arg(ROOM_TTL.as_millis() as u64)
                .arg(&*room)
                .arg(self.inner.rooms.highest_guest(&room));
            match self.invoke::<i64>(&call).await {
                Ok(0) => {
                    self.members().hosts.remove(&room);
                    self.inner.rooms.taken_elsewhere(&room, conn);
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
        let renew_guest = &*scripts::RENEW_GUEST;
        let mut gone = HashSet::new();
        for ((room, peer), (ip, owner)) in guests {
            if gone.contains(&room) {
                continue;
            }
            let mut call = renew_guest.prepare_invoke();
            call.key(scripts::room_key(&room))
                .key(scripts::guests_key(&room))
                .key(scripts::addr_guests_key(&ip.to_string(), &room))
                .arg(format!("{peer} {}", self.inner.me.0))
                .arg(ROOM_TTL.as_millis() as u64);
            match self.invoke::<String>(&call).await {
                Ok(now) if now != owner => {
                    gone.insert(room);
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
        for room in gone {
            self.members().guests.retain(|(r, _), _| **r != *room);
            self.inner.rooms.host_gone_elsewhere(&room);
        }
    }
}

/// 16 hex digits from the system's random source.
fn random_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    // The standard library seeds each RandomState from the system's random source.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_and_guest_entries_parse() {
        let me = RelayId("ab12".into());
        assert_eq!(
            parse_owner(&owner_string(&me, ConnId(7))),
            Some((me.clone(), 7))
        );
        assert_eq!(parse_guest("3 ab12"), Some((3, me)));
        assert_eq!(parse_owner("junk"), None);
        assert_eq!(parse_guest("x ab12"), None);
        assert_eq!(random_id().len(), 16);
    }
}
