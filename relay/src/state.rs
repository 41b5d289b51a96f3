//! What every request handler and session shares: config, rooms, counters, the
//! connection budget and the shutdown signal.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use linkfs_proto::signal::PeerId;

use crate::config::{ConfigError, RelayConfig};
use crate::fleet::{Fleet, FleetError, RedisUnreachable};
use crate::metrics::Metrics;
use crate::outbox::{ConnId, PeerLink};
use crate::rooms::{JoinRefusal, RoomRegistry};
use crate::web::WebApp;

/// The relay's shared state; cheap to clone (one `Arc`).
#[derive(Debug, Clone)]
pub struct RelayState {
    inner: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: RelayConfig,
    rooms: Arc<RoomRegistry>,
    /// The other relays serving the same rooms (`--redis`), if any.
    fleet: Option<Fleet>,
    metrics: Metrics,
    websocket_slots: Arc<Semaphore>,
    shutdown: CancellationToken,
    sessions: TaskTracker,
    next_conn: AtomicU64,
    web: WebApp,
    /// Host proofs seen within their window (signature -> expiry, unix seconds).
    host_proofs: Mutex<crate::host_proofs::HostProofs>,
    /// Open connections and rooms per client address.
    per_address: Arc<Mutex<HashMap<IpAddr, AddressUse>>>,
}

/// What one client address holds.
#[derive(Debug, Default, Clone)]
struct AddressUse {
    connections: usize,
    rooms: usize,
    /// Guests per room.
    guests: HashMap<Box<str>, usize>,
}

/// One connection (and, for a host, one room) counted against a client address;
/// given back on drop.
#[derive(Debug)]
pub(crate) struct AddressClaim {
    table: Arc<Mutex<HashMap<IpAddr, AddressUse>>>,
    ip: IpAddr,
    room: bool,
    /// The room this connection is a guest of.
    guest_of: Option<Box<str>>,
}

impl Drop for AddressClaim {
    fn drop(&mut self) {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(u) = table.get_mut(&self.ip) {
            u.connections = u.connections.saturating_sub(1);
            if self.room {
                u.rooms = u.rooms.saturating_sub(1);
            }
            if let Some(room) = &self.guest_of
                && let Some(n) = u.guests.get_mut(room)
            {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    u.guests.remove(room);
                }
            }
            if u.connections == 0 && u.rooms == 0 {
                table.remove(&self.ip);
            }
        }
    }
}

fn fleet_refusal(e: FleetError) -> JoinRefusal {
    match e {
        FleetError::Refused(r) => r,
        _ => JoinRefusal::Unavailable,
    }
}

impl RelayState {
    /// State for a relay with `config`, or why the config cannot work.
    pub fn new(config: RelayConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let web = WebApp::new(config.web_dir.clone());
        let rooms = Arc::new(RoomRegistry::new(&config.limits));
        let shutdown = CancellationToken::new();
        let fleet = match &config.redis {
            Some(url) => Some(
                Fleet::start(url, rooms.clone(), config.limits.clone(), shutdown.clone())
                    .map_err(ConfigError::Redis)?,
            ),
            None => None,
        };
        Ok(RelayState {
            inner: Arc::new(Shared {
                rooms,
                fleet,
                metrics: Metrics::default(),
                websocket_slots: Arc::new(Semaphore::new(config.limits.max_connections)),
                shutdown,
                sessions: TaskTracker::new(),
                next_conn: AtomicU64::new(1),
                web,
                host_proofs: Mutex::new(crate::host_proofs::HostProofs::new(
                    crate::host_proofs::per_address(config.limits.max_rooms_per_address),
                )),
                per_address: Arc::new(Mutex::new(HashMap::new())),
                config,
            }),
        })
    }

    pub fn config(&self) -> &RelayConfig {
        &self.inner.config
    }

    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// Cancelled when the relay shuts down; every session closes with "going away".
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.inner.shutdown
    }

    /// The `/metrics` page.
    pub fn render_metrics(&self) -> String {
        let mut page = self.inner.metrics.render(self.inner.rooms.gauges());
        if let Some(fleet) = &self.inner.fleet {
            fleet.render_metrics(&mut page);
        }
        page
    }

    /// The fleet this relay belongs to (`--redis`), if any.
    pub(crate) fn fleet(&self) -> Option<&Fleet> {
        self.inner.fleet.as_ref()
    }

    /// Whether the relay can do its work (for `/healthz`): always alone; with
    /// a fleet, while Redis answers.
    pub fn ready(&self) -> Result<(), RedisUnreachable> {
        self.inner.fleet.as_ref().map_or(Ok(()), Fleet::health)
    }

    /// Opens `room` with `host` (connection `conn`, from `ip`) as its host,
    /// here and, with a fleet, across it.
    pub(crate) async fn open_room(
        &self,
        room: &str,
        host: PeerLink,
        ip: IpAddr,
    ) -> Result<(), JoinRefusal> {
        let Some(fleet) = &self.inner.fleet else {
            return self.inner.rooms.open(room, host);
        };
        if !self.inner.rooms.has_room_for_one_more() {
            return Err(JoinRefusal::TooManyRooms);
        }
        let conn = host.conn;
        let opened = fleet.open(room, conn, ip).await.map_err(fleet_refusal)?;
        if let Err(refused) = self.inner.rooms.open(room, host) {
            fleet.close(room, conn);
            return Err(refused);
        }
        fleet.announce_takeover(room, &opened);
        Ok(())
    }

    /// Adds `guest` (from `ip`) to `room`: its number.
    pub(crate) async fn join_room(
        &self,
        room: &str,
        guest: PeerLink,
        ip: IpAddr,
    ) -> Result<PeerId, JoinRefusal> {
        let Some(fleet) = &self.inner.fleet else {
            return self.inner.rooms.join(room, guest);
        };
        let (peer, host_at) = fleet.join(room, ip).await.map_err(fleet_refusal)?;
        if let Err(refused) = self
            .inner
            .rooms
            .join_numbered(room, peer, guest, host_at.clone())
        {
            fleet.leave(room, peer);
            return Err(refused);
        }
        if let Some(relay) = &host_at {
            fleet.announce_join(room, peer, relay);
        }
        Ok(peer)
    }

    /// Guest `peer` (connection `conn`) left `room`.
    pub(crate) fn leave_room(&self, room: &str, peer: PeerId, conn: ConnId) {
        self.inner.rooms.leave(room, peer, conn);
        if let Some(fleet) = &self.inner.fleet {
            fleet.leave(room, peer);
        }
    }

    /// The host (connection `conn`) of `room` left: the room closes.
    pub(crate) fn close_room(&self, room: &str, conn: ConnId) {
        self.inner.rooms.close(room, conn);
        if let Some(fleet) = &self.inner.fleet {
            fleet.close(room, conn);
        }
    }

    pub(crate) fn rooms(&self) -> &RoomRegistry {
        &self.inner.rooms
    }

    pub(crate) fn web(&self) -> &WebApp {
        &self.inner.web
    }

    pub(crate) fn sessions(&self) -> &TaskTracker {
        &self.inner.sessions
    }

    /// Records a host proof's signature from `from`, or says why it is not
    /// taken (used before, or too many in flight: see `host_proofs`).
    pub(crate) fn first_use_of_host_proof(
        &self,
        sig: &str,
        from: IpAddr,
        now_secs: u64,
    ) -> Result<(), crate::host_proofs::ProofRefused> {
        let mut seen = self
            .inner
            .host_proofs
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let keep = 2 * linkfs_proto::sharer_key::HOST_PROOF_WINDOW_SECS;
        seen.first_use(sig, from, now_secs, keep)
    }

    /// Counts one more connection from `ip` (a host's, opening a room, or a
    /// guest's of `room_name`), or says which per-address limit it would pass.
    pub(crate) fn claim_address(
        &self,
        ip: IpAddr,
        room_name: &str,
        room: bool,
    ) -> Result<AddressClaim, &'static str> {
        let limits = &self.inner.config.limits;
        let mut table = self
            .inner
            .per_address
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let u = table.entry(ip).or_default();
        if u.connections >= limits.max_connections_per_address {
            return Err("connections");
        }
        if room && u.rooms >= limits.max_rooms_per_address {
            return Err("shares");
        }
        if !room && u.guests.get(room_name).copied().unwrap_or(0) >= limits.max_guests_per_address {
            return Err("visitors of this share");
        }
        u.connections += 1;
        if room {
            u.rooms += 1;
        } else {
            *u.guests.entry(room_name.into()).or_default() += 1;
        }
        Ok(AddressClaim {
            table: self.inner.per_address.clone(),
            ip,
            room,
            guest_of: (!room).then(|| room_name.into()),
        })
    }

    pub(crate) fn next_conn(&self) -> ConnId {
        ConnId(self.inner.next_conn.fetch_add(1, Ordering::Relaxed))
    }

    /// A slot for one more WebSocket, if `max_connections` allows.
    pub(crate) fn websocket_slot(&self) -> Option<WebSocketSlot> {
        let permit = self
            .inner
            .websocket_slots
            .clone()
            .try_acquire_owned()
            .ok()?;
        self.inner.metrics.connection_opened();
        Some(WebSocketSlot {
            _permit: permit,
            state: self.clone(),
        })
    }
}

/// One of the `max_connections` WebSocket slots; given back (and counted) on drop.
#[derive(Debug)]
pub(crate) struct WebSocketSlot {
    _permit: OwnedSemaphorePermit,
    state: RelayState,
}

impl Drop for WebSocketSlot {
    fn drop(&mut self) {
        self.state.inner.metrics.connection_closed();
    }
}
