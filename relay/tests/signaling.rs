//! The signaling protocol against a real relay on 127.0.0.1, with real WebSocket
//! clients.

mod common;

use std::time::Duration;

use common::{Client, Ended, PATIENCE, http_get, relay, relay_with};
use futures_util::SinkExt;
use linkfs_proto::signal::{IceServer, MAX_SIGNAL_MESSAGE, PeerId, RelayErrorCode, RelayToClient};
use linkfs_relay::{Limits, RelayConfig};
use tokio_tungstenite::tungstenite::Message;

static ROOM: std::sync::LazyLock<String> = std::sync::LazyLock::new(common::test_room);

#[tokio::test]
async fn host_and_two_guests_exchange_messages_both_ways() {
    let relay = relay(Limits::default()).await;
    let addr = relay.local_addr();
    let mut host = Client::host(addr, &ROOM).await;
    let mut g1 = Client::join(addr, &ROOM, "guest", 1).await;
    assert_eq!(host.recv().await, RelayToClient::Joined { peer: PeerId(1) });
    let mut g2 = Client::join(addr, &ROOM, "guest", 2).await;
    assert_eq!(host.recv().await, RelayToClient::Joined { peer: PeerId(2) });

    g1.send_msg(0, "b2ZmZXItMQ").await;
    g2.send_msg(0, "b2ZmZXItMg").await;
    assert_eq!(host.recv_msg_from(1).await, "b2ZmZXItMQ");
    assert_eq!(host.recv_msg_from(2).await, "b2ZmZXItMg");

    host.send_msg(2, "YW5zd2VyLTI").await;
    host.send_msg(1, "YW5zd2VyLTE").await;
    assert_eq!(g2.recv_msg_from(0).await, "YW5zd2VyLTI");
    assert_eq!(g1.recv_msg_from(0).await, "YW5zd2VyLTE");

    // Nobody gets anything meant for someone else.
    g1.expect_quiet(Duration::from_millis(100)).await;
    g2.expect_quiet(Duration::from_millis(100)).await;

    drop(g1);
    assert_eq!(host.recv().await, RelayToClient::Left { peer: PeerId(1) });
    relay.shutdown().await;
}

#[tokio::test]
async fn members_of_live_rooms_get_short_lived_turn_credentials_and_no_one_else_does() {
    let turn = linkfs_relay::TurnConfig {
        secret: "shared-with-coturn".into(),
        urls: vec!["turn:turn.example.org:3478".into()],
        lifetime: std::time::Duration::from_secs(600),
    };
    let relay = relay_with(RelayConfig {
        turn: Some(turn.clone()),
        ..RelayConfig::default()
    })
    .await;
    let addr = relay.local_addr();
    // A guest of a room no one holds is refused before any welcome: no credentials.
    let mut nobody = Client::connect_raw(addr, &ROOM, "guest").await;
    nobody.expect_error(RelayErrorCode::NoSuchRoom).await;
    let page = http_get(addr, "/").await.text() + &http_get(addr, "/healthz").await.text();
    assert!(
        !page.contains("turn.example.org"),
        "no credentials outside a room"
    );

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let mut host = Client::connect_raw(addr, &ROOM, "host").await;
    let first = host.recv().await;
    let mut guest = Client::connect_raw(addr, &ROOM, "guest").await;
    let second = guest.recv().await;
    for (who, welcome) in [("host", first), ("guest", second)] {
        let RelayToClient::Welcome { ice_servers, .. } = welcome else {
            panic!("{who}: a welcome, not {welcome:?}");
        };
        let server = ice_servers
            .iter()
            .find(|s| s.urls == turn.urls)
            .unwrap_or_else(|| panic!("{who}: no TURN server in {ice_servers:?}"));
        let user = server.username.clone().expect("a username");
        let expiry: u64 = user
            .split(':')
            .next()
            .and_then(|e| e.parse().ok())
            .expect("expiry:name");
        assert!(
            (now + 590..=now + 610).contains(&expiry),
            "{who}: expiry {expiry} is not about 600 s from {now}"
        );
        assert_eq!(
            server.credential.as_deref(),
            Some(linkfs_relay::turn::password(&turn.secret, &user).as_str()),
            "{who}: coturn's HMAC-SHA1 of the username"
        );
    }
}

#[tokio::test]
async fn the_welcome_carries_the_ice_servers_and_the_message_limit() {
    let stun = IceServer {
        urls: vec!["stun:stun.example.org:3478".into()],
        ..IceServer::default()
    };
    let relay = relay_with(RelayConfig {
        ice_servers: vec![stun.clone()],
        ..RelayConfig::default()
    })
    .await;
    let mut host = Client::connect_raw(relay.local_addr(), &ROOM, "host").await;
    assert_eq!(
        host.recv().await,
        RelayToClient::Welcome {
            peer: PeerId::HOST,
            ice_servers: vec![stun],
            max_message: MAX_SIGNAL_MESSAGE,
        }
    );
}

#[tokio::test]
async fn a_guest_without_a_host_is_told_no_one_is_sharing_and_closed() {
    let relay = relay(Limits::default()).await;
    let mut guest = Client::connect_raw(relay.local_addr(), &ROOM, "guest").await;
    let message = guest.expect_error(RelayErrorCode::NoSuchRoom).await;
    assert_eq!(
        message,
        "No one is sharing at this link right now. The sharer may have stopped; ask them for a new link."
    );
    assert!(matches!(
        guest.expect_end().await,
        Ended::Close(Some((1000, _)))
    ));
}

#[tokio::test]
async fn a_second_proven_host_takes_the_room_over_and_the_first_is_told() {
    let relay = relay(Limits::default()).await;
    let addr = relay.local_addr();
    let mut first = Client::host(addr, &ROOM).await;
    let mut guest = Client::join(addr, &ROOM, "guest", 1).await;
    assert!(matches!(first.recv().await, RelayToClient::Joined { .. }));
    // The same sharer again (it holds the key), while its old connection lingers.
    let mut second = Client::host(addr, &ROOM).await;
    first.expect_error(RelayErrorCode::RoomTaken).await;
    assert!(matches!(guest.recv().await, RelayToClient::Left { peer } if peer == PeerId::HOST));
    // New guests reach the new host.
    let _g = Client::join(addr, &ROOM, "guest", 1).await;
    assert!(matches!(second.recv().await, RelayToClient::Joined { .. }));
}

#[tokio::test]
async fn a_host_without_the_rooms_key_cannot_open_it() {
    let relay = relay(Limits::default()).await;
    let addr = relay.local_addr();
    // No proof at all, another key's proof, and a proof used before.
    let room = &*ROOM;
    let urls = [
        format!("ws://{addr}/signal/{room}?role=host"),
        format!(
            "ws://{addr}/signal/{room}?role=host{}",
            common::host_proof(&common::room_of_seed(7))
        ),
    ];
    for url in urls {
        let refused = tokio_tungstenite::connect_async(url).await;
        assert!(
            matches!(&refused, Err(tokio_tungstenite::tungstenite::Error::Http(r)) if r.status() == 403),
            "{refused:?}"
        );
    }
    let once = format!(
        "ws://{addr}/signal/{room}?role=host{}",
        common::host_proof(room)
    );
    let (_first, _) = tokio_tungstenite::connect_async(once.clone())
        .await
        .expect("the first use");
    let again = tokio_tungstenite::connect_async(once).await;
    assert!(
        matches!(&again, Err(tokio_tungstenite::tungstenite::Error::Http(r)) if r.status() == 403),
        "a proof counts once: {again:?}"
    );
}

#[tokio::test]
async fn a_guest_cannot_message_another_guest_or_a_missing_peer() {
    let relay = relay(Limits::default()).await;
    let addr = relay.local_addr();
    let mut host = Client::host(addr, &ROOM).await;
    let mut g1 = Client::join(addr, &ROOM, "guest", 1).await;
    let mut g2 = Client::join(addr, &ROOM, "guest", 2).await;
    g1.send_msg(2, "c2VjcmV0").await;
    let message = g1.expect_error(RelayErrorCode::UnknownPeer).await;
    assert!(message.contains("only send to the sharer"), "{message}");
    g2.expect_quiet(Duration::from_millis(100)).await;

    host.recv().await; // joined 1
    host.recv().await; // joined 2
    host.send_msg(9, "eA").await;
    let message = host.expect_error(RelayErrorCode::UnknownPeer).await;
    assert_eq!(message, "Peer 9 is not in this share (it may have left).");
    // Both sockets stay open and keep working.
    g1.send_msg(0, "c3RpbGwgaGVyZQ").await;
    assert_eq!(host.recv_msg_from(1).await, "c3RpbGwgaGVyZQ");
    host.send_msg(1, "eWVz").await;
    assert_eq!(g1.recv_msg_from(0).await, "eWVz");
}

#[tokio::test]
async fn an_oversize_message_is_refused_and_closed() {
    let relay = relay(Limits::default()).await;
    let addr = relay.local_addr();
    let mut host = Client::host(addr, &ROOM).await;
    let mut guest = Client::join(addr, &ROOM, "guest", 1).await;
    host.recv().await; // joined

    // Exactly at the limit is fine.
    let prefix = r#"{"t":"msg","to":0,"data":""#;
    let fill = MAX_SIGNAL_MESSAGE - prefix.len() - 2;
    let data = "A".repeat(fill);
    guest.send_msg(0, &data).await;
    assert_eq!(host.recv_msg_from(1).await.len(), fill);

    // One byte more is not.
    guest.send_msg(0, &format!("{data}A")).await;
    let message = guest.expect_error(RelayErrorCode::MessageTooLarge).await;
    assert!(message.contains("16384 bytes"), "{message}");
    assert!(matches!(
        guest.expect_end().await,
        Ended::Close(Some((1009, _)))
    ));
    assert_eq!(host.recv().await, RelayToClient::Left { peer: PeerId(1) });
}

#[tokio::test]
async fn a_huge_frame_is_refused_without_being_read() {
    let relay = relay(Limits::default()).await;
    let mut host = Client::host(relay.local_addr(), &ROOM).await;
    // 8 MiB in one frame: the relay refuses it on its header.
    let huge = "A".repeat(8 << 20);
    let _ = host.ws.send(Message::Text(huge.into())).await;
    host.expect_error(RelayErrorCode::MessageTooLarge).await;
    let ended = host.expect_end().await;
    assert!(
        matches!(ended, Ended::Close(Some((1009, _))) | Ended::Eof),
        "{ended:?}"
    );
}

#[tokio::test]
async fn binary_and_malformed_frames_are_bad_messages() {
    let relay = relay(Limits::default()).await;
    let addr = relay.local_addr();

    let mut host = Client::host(addr, &ROOM).await;
    host.ws
        .send(Message::Binary(vec![1, 2, 3].into()))
        .await
        .expect("send");
    let message = host.expect_error(RelayErrorCode::BadMessage).await;
    assert!(message.contains("binary"), "{message}");
    assert!(matches!(
        host.expect_end().await,
        Ended::Close(Some((1008, _)))
    ));

    let mut host = Client::host(addr, &ROOM).await;
    host.send_text(r#"{"t":"msg","data":"no target"}"#).await;
    let message = host.expect_error(RelayErrorCode::BadMessage).await;
    assert!(message.contains("missing field `to`"), "{message}");
    assert!(matches!(
        host.expect_end().await,
        Ended::Close(Some((1008, _)))
    ));

    let mut host = Client::host(addr, &ROOM).await;
    host.send_text("not json").await;
    host.expect_error(RelayErrorCode::BadMessage).await;
}

#[tokio::test]
async fn over_the_rate_messages_are_dropped_then_sustained_abuse_is_closed() {
    let relay = relay(Limits {
        rate_per_sec: 2,
        rate_burst: 5,
        max_refused: 10,
        ..Limits::default()
    })
    .await;
    let addr = relay.local_addr();
    let mut host = Client::host(addr, &ROOM).await;
    let mut guest = Client::join(addr, &ROOM, "guest", 1).await;
    host.recv().await; // joined

    for i in 0..7 {
        guest.send_msg(0, &format!("bTA{i}")).await;
    }
    // The burst of five arrives; the rest were dropped, and the guest was told once.
    for i in 0..5 {
        assert_eq!(host.recv_msg_from(1).await, format!("bTA{i}"));
    }
    host.expect_quiet(Duration::from_millis(100)).await;
    let message = guest.expect_error(RelayErrorCode::RateLimited).await;
    assert!(message.contains("2 per second"), "{message}");
    guest.expect_quiet(Duration::from_millis(100)).await;

    // Keep flooding: after ten refusals the relay gives up on this connection.
    for _ in 0..20 {
        guest.send_msg(0, "eA").await;
    }
    let message = guest.expect_error(RelayErrorCode::RateLimited).await;
    assert!(message.contains("connection was closed"), "{message}");
    assert!(matches!(
        guest.expect_end().await,
        Ended::Close(Some((1008, _)))
    ));
    let metrics = common::http_get(addr, "/metrics").await.text();
    assert!(
        common::metric(
            &metrics,
            "linkfs_relay_rejections_total{code=\"rate-limited\"}"
        ) >= 10
    );
    assert_eq!(
        common::metric(
            &metrics,
            "linkfs_relay_rejections_total{code=\"rate-abuse\"}"
        ),
        1
    );
}

#[tokio::test]
async fn a_full_room_refuses_the_next_guest() {
    let relay = relay(Limits {
        max_guests_per_room: 2,
        ..Limits::default()
    })
    .await;
    let addr = relay.local_addr();
    let _host = Client::host(addr, &ROOM).await;
    let _g1 = Client::join(addr, &ROOM, "guest", 1).await;
    let g2 = Client::join(addr, &ROOM, "guest", 2).await;
    let mut g3 = Client::connect_raw(addr, &ROOM, "guest").await;
    let message = g3.expect_error(RelayErrorCode::RoomFull).await;
    assert!(message.contains("(2)"), "{message}");
    assert!(matches!(
        g3.expect_end().await,
        Ended::Close(Some((1013, _)))
    ));

    // A place frees up when someone leaves.
    drop(g2);
    tokio::time::sleep(Duration::from_millis(100)).await;
    Client::join(addr, &ROOM, "guest", 3).await;
}

#[tokio::test]
async fn the_relay_refuses_rooms_beyond_its_limit() {
    let relay = relay(Limits {
        max_rooms: 1,
        ..Limits::default()
    })
    .await;
    let addr = relay.local_addr();
    let _first = Client::host(addr, &ROOM).await;
    let mut second = Client::connect_raw(addr, &common::room_of_seed(43), "host").await;
    second.expect_error(RelayErrorCode::TooManyRooms).await;
    assert!(matches!(
        second.expect_end().await,
        Ended::Close(Some((1013, _)))
    ));
}

#[tokio::test]
async fn when_the_host_leaves_guests_hear_left_0_and_are_closed_and_the_room_can_be_reused() {
    let relay = relay(Limits::default()).await;
    let addr = relay.local_addr();
    let mut host = Client::host(addr, &ROOM).await;
    let mut g1 = Client::join(addr, &ROOM, "guest", 1).await;
    let mut g2 = Client::join(addr, &ROOM, "guest", 2).await;
    host.recv().await;
    host.recv().await;
    host.ws.close(None).await.expect("close");

    for g in [&mut g1, &mut g2] {
        assert_eq!(g.recv().await, RelayToClient::Left { peer: PeerId::HOST });
        match g.expect_end().await {
            Ended::Close(Some((1000, reason))) => assert_eq!(reason, "The sharer stopped sharing."),
            other => panic!("expected a normal close, got {other:?}"),
        }
    }

    // The same room id works again, with fresh numbering.
    let _host = Client::host(addr, &ROOM).await;
    Client::join(addr, &ROOM, "guest", 1).await;
}

#[tokio::test]
async fn an_idle_connection_is_closed_but_one_answering_pings_is_not() {
    let relay = relay(Limits {
        ping_interval: Duration::from_millis(100),
        idle_timeout: Duration::from_millis(400),
        ..Limits::default()
    })
    .await;
    let addr = relay.local_addr();
    // This client reads (and so answers pings) all along.
    let mut lively = Client::host(addr, &ROOM).await;
    // This one reads nothing for a while: it answers no pings.
    let mut idle = Client::host(addr, &common::room_of_seed(44)).await;
    lively.expect_quiet(Duration::from_millis(900)).await;

    let message = idle.expect_error(RelayErrorCode::IdleTimeout).await;
    assert!(message.contains("0.4 s"), "{message}");
    assert!(matches!(
        idle.expect_end().await,
        Ended::Close(Some((1008, _)))
    ));
    lively.expect_quiet(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn a_receiver_that_does_not_read_is_disconnected_not_buffered() {
    let relay = relay(Limits {
        rate_per_sec: 100_000,
        rate_burst: 100_000,
        write_timeout: Duration::from_millis(500),
        ..Limits::default()
    })
    .await;
    let addr = relay.local_addr();
    // The host never reads after its welcome.
    let host = Client::host(addr, &ROOM).await;
    let mut guest = Client::join(addr, &ROOM, "guest", 1).await;
    let data = "A".repeat(15_000);
    // 60 MB: far more than socket buffers hold, so the host's queue must overflow.
    let sender = tokio::spawn(async move {
        for _ in 0..4000 {
            guest.send_msg(0, &data).await;
        }
        guest
    });
    let mut guest = tokio::time::timeout(PATIENCE * 4, sender)
        .await
        .expect("the guest can send without waiting for the stuck host")
        .expect("sender task");
    // The stuck host was dropped, so its room closed.
    loop {
        match guest.recv().await {
            RelayToClient::Left { peer } => {
                assert_eq!(peer, PeerId::HOST);
                break;
            }
            RelayToClient::Error { code, message } => {
                panic!("unexpected error {code:?}: {message}")
            }
            _ => {}
        }
    }
    let metrics = common::http_get(addr, "/metrics").await.text();
    assert!(
        common::metric(
            &metrics,
            "linkfs_relay_rejections_total{code=\"slow-consumer\"}"
        ) >= 1
    );
    drop(host);
}

#[tokio::test]
async fn shutdown_tells_everyone_going_away_and_returns_promptly() {
    let relay = relay(Limits::default()).await;
    let addr = relay.local_addr();
    let mut host = Client::host(addr, &ROOM).await;
    let mut guest = Client::join(addr, &ROOM, "guest", 1).await;
    let started = std::time::Instant::now();
    relay.shutdown().await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    for c in [&mut host, &mut guest] {
        // Skip joined/left notes racing the shutdown.
        while c.expect_end_or_text().await.is_some() {}
    }
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still listening"
    );
}

impl Client {
    /// The next text frame, or `None` once closed with "going away".
    async fn expect_end_or_text(&mut self) -> Option<String> {
        use futures_util::StreamExt;
        loop {
            let frame = tokio::time::timeout(PATIENCE, self.ws.next())
                .await
                .expect("the connection ends within the patience");
            match frame {
                Some(Ok(Message::Text(t))) => return Some(t.to_string()),
                Some(Ok(Message::Close(Some(f)))) => {
                    assert_eq!(u16::from(f.code), 1001, "{f:?}");
                    assert_eq!(f.reason.as_str(), "The relay is shutting down.");
                    return None;
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                other => panic!("expected close 1001, got {other:?}"),
            }
        }
    }
}

#[tokio::test]
async fn a_flood_of_guests_cannot_get_the_host_rate_limited_off_its_room() {
    // All from one address here: the per-address caps are lifted for the flood.
    let relay = relay(Limits {
        max_guests_per_room: 1000,
        max_guests_per_address: 1000,
        max_connections_per_address: 1000,
        ..Limits::default()
    })
    .await;
    let addr = relay.local_addr();
    let mut host = Client::host(addr, &ROOM).await;
    // 300 guests arrive at once; the host answers each one it hears of (a challenge).
    let mut guests = Vec::new();
    let mut refused = 0;
    for _ in 0..300 {
        let mut g = Client::connect_raw(addr, &ROOM, "guest").await;
        match g.recv().await {
            RelayToClient::Welcome { .. } => guests.push(g),
            RelayToClient::Error { code, .. } => {
                assert_eq!(code, RelayErrorCode::RateLimited);
                refused += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(refused > 0, "guests beyond the join rate are turned away");
    let admitted = guests.len();
    for _ in 0..admitted {
        match host.recv().await {
            RelayToClient::Joined { peer } => host.send_msg(peer.0, "challenge").await,
            other => panic!("the host heard {other:?}"),
        }
    }
    // The host was never told it went over its rate, and still holds the room.
    host.expect_quiet(Duration::from_millis(300)).await;
    let _late = Client::join(addr, &ROOM, "guest", admitted as u32 + 1).await;
}

#[tokio::test]
async fn one_address_opens_a_bounded_number_of_rooms() {
    let relay = relay(Limits {
        max_rooms_per_address: 1,
        ..Limits::default()
    })
    .await;
    let addr = relay.local_addr();
    let _first = Client::host(addr, &ROOM).await;
    let other = common::room_of_seed(45);
    let url = format!(
        "ws://{addr}/signal/{other}?role=host{}",
        common::host_proof(&other)
    );
    let refused = tokio_tungstenite::connect_async(url).await;
    assert!(
        matches!(&refused, Err(tokio_tungstenite::tungstenite::Error::Http(r)) if r.status() == 429),
        "{refused:?}"
    );
}
