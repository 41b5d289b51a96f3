//! Several relays serving the same rooms through a real `redis-server`
//! (Debian's package; `scripts/setup` installs it): members on different relays
//! talk as if on one, the limits hold across the fleet, and a Redis outage is
//! reported and recovered from without restarting anything.

mod common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use linkfs_proto::signal::{PeerId, RelayErrorCode, RelayToClient};
use linkfs_relay::{Limits, RelayConfig, RelayHandle};

/// A `redis-server` on a free loopback port, stopped on drop.
struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    fn start() -> Redis {
        let port = free_port();
        Redis::start_on(port)
    }

    fn start_on(port: u16) -> Redis {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (Debian package redis-server; scripts/setup installs it)");
        let r = Redis { child, port };
        r.wait_ready();
        r
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn wait_ready(&self) {
        let deadline = std::time::Instant::now() + PATIENCE;
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop(mut self) -> u16 {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.port
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

async fn fleet_relay(redis: &Redis, limits: Limits) -> RelayHandle {
    let relay = relay_with(RelayConfig {
        limits,
        redis: Some(redis.url()),
        ..RelayConfig::default()
    })
    .await;
    wait_ready(relay.local_addr(), true).await;
    relay
}

/// Waits until `/healthz` says ready (or not).
async fn wait_ready(addr: SocketAddr, ready: bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = http_get(addr, "/healthz").await.status;
        if (status == 200) == ready {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/healthz stayed {status}, expected {}",
            if ready { "200" } else { "503" }
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_host_on_one_relay_and_guests_on_others_talk_as_on_one_relay() {
    let redis = Redis::start();
    let a = fleet_relay(&redis, Limits::default()).await;
    let b = fleet_relay(&redis, Limits::default()).await;
    let c = fleet_relay(&redis, Limits::default()).await;
    let room = test_room();
    let mut host = Client::host(a.local_addr(), &room).await;
    // Guests are numbered across the fleet, whichever relay they reach.
    let mut g1 = Client::join(b.local_addr(), &room, "guest", 1).await;
    assert_eq!(host.recv().await, RelayToClient::Joined { peer: PeerId(1) });
    let mut g2 = Client::join(c.local_addr(), &room, "guest", 2).await;
    assert_eq!(host.recv().await, RelayToClient::Joined { peer: PeerId(2) });
    let mut g3 = Client::join(a.local_addr(), &room, "guest", 3).await;
    assert_eq!(host.recv().await, RelayToClient::Joined { peer: PeerId(3) });

    g1.send_msg(0, "from-b").await;
    assert_eq!(host.recv_msg_from(1).await, "from-b");
    host.send_msg(2, "to-c").await;
    assert_eq!(g2.recv_msg_from(0).await, "to-c");
    host.send_msg(3, "to-a").await;
    assert_eq!(g3.recv_msg_from(0).await, "to-a");
    // Guests still cannot reach each other, wherever they are.
    g1.send_msg(2, "no").await;
    g1.expect_error(RelayErrorCode::UnknownPeer).await;

    // A guest leaving elsewhere is announced; the host leaving closes everyone.
    g2.ws.close(None).await.expect("close");
    assert_eq!(host.recv().await, RelayToClient::Left { peer: PeerId(2) });
    host.ws.close(None).await.expect("close");
    for g in [&mut g1, &mut g3] {
        assert_eq!(g.recv().await, RelayToClient::Left { peer: PeerId::HOST });
        assert!(matches!(g.expect_end().await, Ended::Close(_)));
    }
    let metrics = http_get(a.local_addr(), "/metrics").await.text();
    assert!(metric(&metrics, "linkfs_relay_fleet_published_total") >= 1);
    assert_eq!(metric(&metrics, "linkfs_relay_redis_up"), 1);
}

#[tokio::test]
async fn room_and_address_limits_hold_across_the_fleet() {
    let redis = Redis::start();
    let limits = Limits {
        max_guests_per_room: 2,
        max_rooms_per_address: 1,
        ..Limits::default()
    };
    let a = fleet_relay(&redis, limits.clone()).await;
    let b = fleet_relay(&redis, limits).await;
    let room = test_room();
    let mut host = Client::host(a.local_addr(), &room).await;
    let _g1 = Client::join(a.local_addr(), &room, "guest", 1).await;
    let _g2 = Client::join(b.local_addr(), &room, "guest", 2).await;
    let mut third = Client::connect_raw(b.local_addr(), &room, "guest").await;
    third.expect_error(RelayErrorCode::RoomFull).await;
    assert_eq!(host.recv().await, RelayToClient::Joined { peer: PeerId(1) });

    // One address opens one room across the fleet, not one per relay.
    let mut second = Client::connect_raw(b.local_addr(), &room_of_seed(7), "host").await;
    let words = second
        .expect_error(RelayErrorCode::TooManyFromAddress)
        .await;
    assert!(words.contains("from your address"), "{words}");
}

#[tokio::test]
async fn a_host_proof_counts_once_across_the_fleet() {
    let redis = Redis::start();
    let a = fleet_relay(&redis, Limits::default()).await;
    let b = fleet_relay(&redis, Limits::default()).await;
    let room = test_room();
    let proof = host_proof(&room);
    let url = |addr: SocketAddr| format!("ws://{addr}/signal/{room}?role=host{proof}");
    let (_first, _) = tokio_tungstenite::connect_async(url(a.local_addr()))
        .await
        .expect("the first use opens the room");
    let replay = tokio_tungstenite::connect_async(url(b.local_addr())).await;
    let Err(tokio_tungstenite::tungstenite::Error::Http(response)) = replay else {
        panic!("a replayed proof must be refused by another relay too");
    };
    assert_eq!(response.status(), 403);
}

#[tokio::test]
async fn a_sharer_taking_its_room_over_through_another_relay_closes_the_old_one_everywhere() {
    let redis = Redis::start();
    let a = fleet_relay(&redis, Limits::default()).await;
    let b = fleet_relay(&redis, Limits::default()).await;
    let room = test_room();
    let mut old_host = Client::host(a.local_addr(), &room).await;
    let mut guest_b = Client::join(b.local_addr(), &room, "guest", 1).await;
    assert_eq!(
        old_host.recv().await,
        RelayToClient::Joined { peer: PeerId(1) }
    );

    // The sharer reconnects through relay B (its relay A still holds the old socket).
    let mut new_host = Client::host(b.local_addr(), &room).await;
    old_host.expect_error(RelayErrorCode::RoomTaken).await;
    assert_eq!(
        guest_b.recv().await,
        RelayToClient::Left { peer: PeerId::HOST }
    );
    // A new visitor, on relay A, reaches the new host on B.
    let mut again = Client::connect_raw(a.local_addr(), &room, "guest").await;
    let RelayToClient::Welcome { peer, .. } = again.recv().await else {
        panic!("a welcome");
    };
    assert_eq!(new_host.recv().await, RelayToClient::Joined { peer });
    again.send_msg(0, "hello").await;
    assert_eq!(new_host.recv_msg_from(peer.0).await, "hello");
}

#[tokio::test]
async fn without_redis_the_relay_says_not_ready_and_recovers_without_a_restart() {
    let redis = Redis::start();
    let a = fleet_relay(&redis, Limits::default()).await;
    let b = fleet_relay(&redis, Limits::default()).await;
    let room = test_room();
    let mut host = Client::host(a.local_addr(), &room).await;

    let port = redis.stop();
    wait_ready(a.local_addr(), false).await;
    wait_ready(b.local_addr(), false).await;
    let health = http_get(b.local_addr(), "/healthz").await;
    assert_eq!(health.status, 503);
    assert!(
        health.text().contains("cannot reach Redis"),
        "{}",
        health.text()
    );
    let metrics = http_get(b.local_addr(), "/metrics").await.text();
    assert_eq!(metric(&metrics, "linkfs_relay_redis_up"), 0);
    // Joining needs the directory: refused with words that say to try again.
    let mut early = Client::connect_raw(b.local_addr(), &room, "guest").await;
    let words = early.expect_error(RelayErrorCode::Unavailable).await;
    assert!(words.contains("try again"), "{words}");

    // Redis comes back empty (no persistence): the relays renew what they hold.
    let _redis = Redis::start_on(port);
    wait_ready(a.local_addr(), true).await;
    wait_ready(b.local_addr(), true).await;
    let mut guest = Client::join(b.local_addr(), &room, "guest", 1).await;
    assert_eq!(host.recv().await, RelayToClient::Joined { peer: PeerId(1) });
    guest.send_msg(0, "back").await;
    assert_eq!(host.recv_msg_from(1).await, "back");
}
