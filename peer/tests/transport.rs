//! The native transport over real webrtc-rs on both sides, over loopback.
//!
//! Run inside a private network namespace (nothing may leave the machine):
//!
//! ```text
//! unshare -n bash -c 'ip link set lo up; ip link add v0 type veth peer name v1;
//!   ip addr add 10.77.0.1/24 dev v0; ip link set v0 up; ip link set v1 up;
//!   ip route add default dev v0;
//!   cargo test -p linkfs-peer --test transport'
//! ```
//!
//! Every peer binds 127.0.0.1 only ([`TransportConfig::loopback`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use linkfs_core::{GuestAction, GuestSignaling, HostAction, HostSignaling, ShareLink};
use linkfs_peer::transport::{
    DataLink, Handshake, HandshakeEvent, IceCandidate, LinkClosed, LinkError, NativeTuning,
    TransportConfig, TransportError, connect_in_process, is_from_native_peer,
};
use linkfs_proto::MAX_FRAME_LEN;
use linkfs_proto::signal::{ClientToRelay, PeerId, RelayToClient};

/// How long a side may take to notice the other side went away.
const NOTICE_WITHIN: Duration = Duration::from_secs(5);

async fn pair() -> (DataLink, DataLink) {
    let config = TransportConfig::loopback();
    tokio::time::timeout(
        Duration::from_secs(20),
        connect_in_process(&config, &config),
    )
    .await
    .expect("the two peers did not connect within 20 s")
    .expect("connecting two in-process peers")
}

/// `len` bytes that differ from frame to frame.
fn frame(seed: u64, len: usize) -> Bytes {
    let mut out = vec![0u8; len];
    blake3::Hasher::new()
        .update(&seed.to_le_bytes())
        .finalize_xof()
        .fill(&mut out);
    Bytes::from(out)
}

async fn recv_within(link: &mut DataLink, what: &str) -> Option<Bytes> {
    tokio::time::timeout(Duration::from_secs(10), link.recv())
        .await
        .unwrap_or_else(|_| panic!("no frame within 10 s: {what}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_cross_both_ways_byte_equal() {
    let (mut offerer, mut answerer) = pair().await;
    let sizes = [1, 2, 100, 1200, 16 * 1024, 60_000, MAX_FRAME_LEN];

    for (i, &len) in sizes.iter().enumerate() {
        offerer.send(frame(i as u64, len)).await.unwrap();
        answerer.send(frame(1000 + i as u64, len)).await.unwrap();
    }
    for (i, &len) in sizes.iter().enumerate() {
        let got = recv_within(&mut answerer, "offerer -> answerer").await;
        assert_eq!(
            got,
            Some(frame(i as u64, len)),
            "frame {i} offerer -> answerer"
        );
        let got = recv_within(&mut offerer, "answerer -> offerer").await;
        assert_eq!(
            got,
            Some(frame(1000 + i as u64, len)),
            "frame {i} answerer -> offerer"
        );
    }
    assert_eq!(offerer.close_reason(), None);
    assert_eq!(answerer.close_reason(), None);
    offerer.close().await;
}

/// One transfer of `total` bytes in MAX_FRAME_LEN frames; returns the receiver's hash,
/// or fails naming the run and how much had arrived.
async fn transfer(
    run: usize,
    total: usize,
    sender: &linkfs_peer::transport::LinkSender,
    receiver: &mut linkfs_peer::transport::LinkReceiver,
) -> (blake3::Hash, blake3::Hash, Duration) {
    let arrived = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let send = {
        let sender = sender.clone();
        tokio::spawn(async move {
            let mut hasher = blake3::Hasher::new();
            let mut sent = 0usize;
            let mut seq = 0u64;
            while sent < total {
                let len = MAX_FRAME_LEN.min(total - sent);
                let f = frame(((run as u64) << 32) | seq, len);
                hasher.update(&f);
                sender.send(f).await.expect("send during a transfer");
                sent += len;
                seq += 1;
            }
            hasher.finalize()
        })
    };
    let receive = {
        let arrived = arrived.clone();
        async move {
            let mut hasher = blake3::Hasher::new();
            let mut got = 0usize;
            while got < total {
                let f = receiver.recv().await.unwrap_or_else(|| {
                    panic!(
                        "run {run}: the link ended after {got} of {total} bytes: {:?}",
                        receiver.close_reason()
                    )
                });
                hasher.update(&f);
                got += f.len();
                arrived.store(got as u64, Ordering::Relaxed);
            }
            hasher.finalize()
        }
    };
    let received = tokio::time::timeout(Duration::from_secs(60), receive)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "run {run} stalled: {} of {total} bytes arrived within 60 s",
                arrived.load(Ordering::Relaxed)
            )
        });
    let sent = send.await.expect("the sending task");
    (sent, received, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_mib_five_times_in_a_row_never_stalls() {
    const TOTAL: usize = 64 * 1024 * 1024;
    let (offerer, answerer) = pair().await;
    let (sender, _offer_rx) = offerer.split();
    let (_answer_tx, mut receiver) = answerer.split();
    for run in 1..=5 {
        let (sent, received, took) = transfer(run, TOTAL, &sender, &mut receiver).await;
        assert_eq!(sent, received, "run {run}: bytes differ (blake3)");
        eprintln!(
            "run {run}: 64 MiB in {:.2} s ({:.1} MB/s)",
            took.as_secs_f64(),
            TOTAL as f64 / took.as_secs_f64() / 1e6
        );
    }
    sender.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_host_tuning_carries_big_transfers_intact() {
    // 16 KiB SCTP packets, 256 KiB send buffer, 4 MiB sockets: what a native mount of a
    // share on this host uses.
    const TOTAL: usize = 64 * 1024 * 1024;
    let config = TransportConfig {
        native_peer: Some(NativeTuning::SAME_HOST),
        ..TransportConfig::loopback()
    };
    let (_, offer) = Handshake::offer(&config).await.unwrap();
    assert!(
        is_from_native_peer(&offer),
        "a native offer carries the marker"
    );
    let (offerer, answerer) = connect_in_process(&config, &config).await.unwrap();
    let (sender, _) = offerer.split();
    let (_, mut receiver) = answerer.split();
    for run in 1..=2 {
        let (sent, received, took) = transfer(run, TOTAL, &sender, &mut receiver).await;
        assert_eq!(sent, received, "run {run}: bytes differ (blake3)");
        eprintln!(
            "same host, run {run}: 64 MiB in {:.2} s ({:.1} MB/s)",
            took.as_secs_f64(),
            TOTAL as f64 / took.as_secs_f64() / 1e6
        );
    }
    sender.close().await;
}

async fn assert_ends_within(link: &mut DataLink, side: &str) -> LinkClosed {
    let started = Instant::now();
    let end = tokio::time::timeout(NOTICE_WITHIN, link.recv())
        .await
        .unwrap_or_else(|_| panic!("{side}: recv did not return None within {NOTICE_WITHIN:?}"));
    if let Some(extra) = end {
        panic!("{side}: unexpected frame of {} bytes", extra.len());
    }
    let reason = link
        .close_reason()
        .unwrap_or_else(|| panic!("{side}: recv returned None but no close reason"));
    eprintln!(
        "{side} noticed the end after {:?}: {reason}",
        started.elapsed()
    );
    reason
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_offerer_ends_the_answerer() {
    let (offerer, mut answerer) = pair().await;
    offerer.close().await;
    let reason = assert_ends_within(&mut answerer, "answerer").await;
    assert!(
        matches!(
            reason,
            LinkClosed::PeerClosed | LinkClosed::ConnectionClosed | LinkClosed::ConnectionLost
        ),
        "{reason:?}"
    );
    assert!(matches!(
        answerer.send(Bytes::from_static(b"late")).await,
        Err(LinkError::Closed(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_answerer_ends_the_offerer() {
    let (mut offerer, answerer) = pair().await;
    answerer.close().await;
    assert_ends_within(&mut offerer, "offerer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_link_ends_the_other_side() {
    let (offerer, mut answerer) = pair().await;
    drop(offerer);
    assert_ends_within(&mut answerer, "answerer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_delivers_frames_queued_before_it() {
    let (offerer, mut answerer) = pair().await;
    let count = 40u64;
    for i in 0..count {
        offerer.send(frame(i, MAX_FRAME_LEN)).await.unwrap();
    }
    offerer.close().await;
    for i in 0..count {
        let got = recv_within(&mut answerer, "frames queued before close").await;
        assert_eq!(got, Some(frame(i, MAX_FRAME_LEN)), "frame {i} of {count}");
    }
    assert_ends_within(&mut answerer, "answerer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_over_the_limit_is_refused_and_the_link_goes_on() {
    let (offerer, mut answerer) = pair().await;
    for len in [MAX_FRAME_LEN + 1, 64 * 1024, 64 * 1024 + 1, 1 << 20] {
        let refused = offerer.send(vec![7u8; len]).await;
        assert_eq!(
            refused,
            Err(LinkError::FrameTooLarge {
                len,
                max: MAX_FRAME_LEN
            })
        );
        let message = refused.unwrap_err().to_string();
        assert!(
            message.contains(&len.to_string()) && message.contains("61440"),
            "{message}"
        );
    }
    offerer.send(frame(9, MAX_FRAME_LEN)).await.unwrap();
    assert_eq!(
        recv_within(&mut answerer, "after the refused frames").await,
        Some(frame(9, MAX_FRAME_LEN))
    );
    assert_eq!(offerer.close_reason(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_halves_work_in_one_select_loop() {
    // A ping-pong where each side's single task waits for room and for frames at once.
    let (offerer, answerer) = pair().await;
    let echo = tokio::spawn(async move {
        let (tx, mut rx) = answerer.split();
        let mut pending: std::collections::VecDeque<Bytes> = Default::default();
        loop {
            tokio::select! {
                permit = tx.reserve(), if !pending.is_empty() => {
                    let frame = pending.pop_front().expect("checked non-empty");
                    permit.expect("room").send(frame).expect("send");
                }
                frame = rx.recv() => match frame {
                    Some(f) => pending.push_back(f),
                    None => break,
                },
            }
        }
    });
    let (tx, mut rx) = offerer.split();
    for i in 0..200u64 {
        let f = frame(i, (i as usize * 997) % MAX_FRAME_LEN + 1);
        tx.send(f.clone()).await.unwrap();
        let back = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("echo within 10 s");
        assert_eq!(back, Some(f), "echo {i}");
    }
    tx.close().await;
    tokio::time::timeout(NOTICE_WITHIN, echo)
        .await
        .expect("the echo loop ends when the link closes")
        .unwrap();
}

/// What the relay does with a signaling machine's `Send`: the message, as the
/// other side receives it from `from`.
fn relayed(text: &str, from: PeerId) -> RelayToClient {
    let Ok(ClientToRelay::Msg { data, .. }) = serde_json::from_str::<ClientToRelay>(text) else {
        panic!("not a relay message: {text}");
    };
    RelayToClient::Msg { from, data }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidates_that_arrive_before_the_answer_are_held_until_it_is_applied() {
    let config = TransportConfig::loopback();
    let sharer = linkfs_proto::sharer_key::SharerKey::from_seed([4; 32]);
    let link = ShareLink::of_sharer("http://127.0.0.1:1", &sharer, [3; 16]);
    let mut guest = GuestSignaling::new(&link, [1; 16]);
    let mut host = HostSignaling::new(&link, sharer, 4, [2; 16]);
    let welcome = |peer| RelayToClient::Welcome {
        peer,
        ice_servers: Vec::new(),
        max_message: 16 * 1024,
    };
    host.handle_relay(welcome(PeerId::HOST));
    assert!(matches!(
        host.poll_action(),
        Some(HostAction::Registered { .. })
    ));
    guest.handle_relay(welcome(PeerId(1)));
    assert!(matches!(
        guest.poll_action(),
        Some(GuestAction::MakeOffer { .. })
    ));
    // The relay announces the guest, whose knock reaches the host; the
    // host's challenge reaches it.
    host.handle_relay(RelayToClient::Joined { peer: PeerId(1) });
    let Some(GuestAction::Send(knock)) = guest.poll_action() else {
        panic!("the guest knocks");
    };
    host.handle_relay(relayed(&knock, PeerId(1)));
    while let Some(HostAction::Send(text)) = host.poll_action() {
        guest.handle_relay(relayed(&text, PeerId::HOST));
    }

    let (mut offerer, offer) = Handshake::offer(&config).await.unwrap();
    guest.offer_made(offer);
    let Some(GuestAction::Send(text)) = guest.poll_action() else {
        panic!("the offer goes to the relay");
    };
    host.handle_relay(relayed(&text, PeerId(1)));
    let Some(HostAction::Answer { peer, offer, .. }) = host.poll_action() else {
        panic!("the host admits the visitor");
    };
    let (mut answerer, answer) = Handshake::answer(&config, &offer).await.unwrap();

    // The answerer's first candidate reaches the guest before its answer does.
    let first = tokio::time::timeout(Duration::from_secs(5), answerer.next_event())
        .await
        .expect("a local candidate within 5 s")
        .unwrap();
    let HandshakeEvent::LocalCandidate(candidate) = first else {
        panic!("expected a candidate first, got {first:?}");
    };
    assert_eq!(candidate.sdp_mid, None, "webrtc-rs's empty mid is dropped");
    assert_eq!(candidate.sdp_mline_index, Some(0));
    assert!(candidate.candidate.starts_with("candidate:"));
    host.local_candidate(peer, candidate.clone());
    host.answer_made(peer, answer);
    while let Some(HostAction::Send(text)) = host.poll_action() {
        guest.handle_relay(relayed(&text, PeerId::HOST));
    }
    // The machine held the candidate: only the answer comes out.
    let Some(GuestAction::ApplyAnswer { sdp }) = guest.poll_action() else {
        panic!("the answer is to be applied first");
    };
    assert_eq!(guest.poll_action(), None, "the early candidate is held");
    offerer.apply_answer(&sdp).await.unwrap();
    guest.answer_applied();
    assert_eq!(
        guest.poll_action(),
        Some(GuestAction::AddCandidate(candidate.clone()))
    );
    offerer.add_remote_candidate(candidate).await.unwrap();

    let (a, mut b) = trade_candidates_until_open(&mut offerer, &mut answerer).await;
    a.send(Bytes::from_static(b"hello")).await.unwrap();
    assert_eq!(
        recv_within(&mut b, "hello").await,
        Some(Bytes::from_static(b"hello"))
    );
}

/// Carries each side's local candidates to the other until both links open (20 s at
/// most); returns (offerer's link, answerer's link).
async fn trade_candidates_until_open(
    offerer: &mut Handshake,
    answerer: &mut Handshake,
) -> (DataLink, DataLink) {
    let mut links = (None, None);
    let deadline = tokio::time::sleep(Duration::from_secs(20));
    tokio::pin!(deadline);
    loop {
        links = match links {
            (Some(a), Some(b)) => return (a, b),
            partial => partial,
        };
        tokio::select! {
            e = offerer.next_event(), if links.0.is_none() => match e.unwrap() {
                HandshakeEvent::LocalCandidate(c) => answerer.add_remote_candidate(c).await.unwrap(),
                HandshakeEvent::Open(link) => links.0 = Some(link),
                other => panic!("{other:?}"),
            },
            e = answerer.next_event(), if links.1.is_none() => match e.unwrap() {
                HandshakeEvent::LocalCandidate(c) => offerer.add_remote_candidate(c).await.unwrap(),
                HandshakeEvent::Open(link) => links.1 = Some(link),
                other => panic!("{other:?}"),
            },
            () = &mut deadline => panic!("did not connect within 20 s"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_junk_candidate_does_not_spoil_the_handshake() {
    let config = TransportConfig::loopback();
    let junk = |text: &str| IceCandidate {
        candidate: text.into(),
        sdp_mid: Some("0".into()),
        sdp_mline_index: Some(0),
    };
    let mdns = junk(
        "candidate:1 1 udp 2122260223 0d1e2f3a-aaaa-bbbb-cccc-123456789abc.local 50000 typ host",
    );
    let (mut offerer, offer) = Handshake::offer(&config).await.unwrap();
    let (mut answerer, answer) = Handshake::answer(&config, &offer).await.unwrap();

    // Before the answer: refused (the signaling machine holds early candidates).
    assert!(matches!(
        offerer.add_remote_candidate(mdns.clone()).await,
        Err(TransportError::CandidateBeforeAnswer)
    ));
    offerer.apply_answer(&answer).await.unwrap();
    assert!(
        offerer
            .add_remote_candidate(junk("candidate:garbage"))
            .await
            .is_err()
    );
    // After it: refused with an error, the handshake goes on. mDNS names are ignored.
    assert!(
        answerer
            .add_remote_candidate(junk("candidate:garbage"))
            .await
            .is_err()
    );
    answerer.add_remote_candidate(mdns).await.unwrap();

    let (a, mut b) = trade_candidates_until_open(&mut offerer, &mut answerer).await;
    a.send(Bytes::from_static(b"still fine")).await.unwrap();
    assert_eq!(
        recv_within(&mut b, "after junk candidates").await,
        Some(Bytes::from_static(b"still fine"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_signaling_input_gives_clear_errors() {
    let config = TransportConfig::loopback();

    let bad_offer = Handshake::answer(&config, "this is not SDP").await;
    assert!(
        matches!(bad_offer, Err(TransportError::BadOffer(_))),
        "{bad_offer:?}"
    );

    let (mut offerer, offer) = Handshake::offer(&config).await.unwrap();
    let bad_answer = offerer.apply_answer("v=0\r\nnonsense").await;
    assert!(
        matches!(bad_answer, Err(TransportError::BadAnswer(_))),
        "{bad_answer:?}"
    );

    let (mut answerer, answer) = Handshake::answer(&config, &offer).await.unwrap();
    let junk = IceCandidate {
        candidate: "candidate:not a candidate at all".into(),
        sdp_mid: Some(String::new()),
        sdp_mline_index: Some(0),
    };
    let bad_candidate = answerer.add_remote_candidate(junk).await;
    assert!(
        matches!(bad_candidate, Err(TransportError::BadCandidate(_))),
        "{bad_candidate:?}"
    );
    let empty = IceCandidate {
        candidate: String::new(),
        sdp_mid: None,
        sdp_mline_index: None,
    };
    answerer.add_remote_candidate(empty).await.unwrap();

    let wrong_side = answerer.apply_answer(&answer).await;
    assert!(
        matches!(wrong_side, Err(TransportError::UnexpectedAnswer(_))),
        "{wrong_side:?}"
    );
    offerer.apply_answer(&answer).await.unwrap();
    let twice = offerer.apply_answer(&answer).await;
    assert!(
        matches!(twice, Err(TransportError::UnexpectedAnswer(_))),
        "{twice:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_settings_give_clear_errors() {
    let no_address = TransportConfig {
        udp_bind: Vec::new(),
        ..TransportConfig::loopback()
    };
    let outcome = Handshake::offer(&no_address).await;
    assert!(
        matches!(outcome, Err(TransportError::NoBindAddress)),
        "{outcome:?}"
    );

    let bad_server = TransportConfig {
        ice_servers: vec![linkfs_proto::signal::IceServer {
            urls: vec!["not a url".into()],
            username: None,
            credential: None,
        }],
        ..TransportConfig::loopback()
    };
    let outcome = Handshake::offer(&bad_server).await;
    let Err(error) = outcome else {
        panic!("an ICE server URL that is not a URL was accepted");
    };
    assert!(matches!(error, TransportError::Setup(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with("could not set up the WebRTC connection")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_offer_times_out() {
    let config = TransportConfig {
        connect_timeout: Duration::from_millis(800),
        ..TransportConfig::loopback()
    };
    let (mut offerer, _offer) = Handshake::offer(&config).await.unwrap();
    let started = Instant::now();
    let outcome = loop {
        match offerer.next_event().await {
            Ok(HandshakeEvent::LocalCandidate(_)) => continue,
            other => break other,
        }
    };
    assert!(
        matches!(outcome, Err(TransportError::TimedOut(_))),
        "{outcome:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    let message = outcome.unwrap_err().to_string();
    assert!(message.contains("did not open within 0.8 s"), "{message}");
}

/// Sends full frames to a side that does not read until a send waits 2 s; returns the
/// bytes accepted, after checking that every one of them then arrives in order.
async fn held_back_after(config: &TransportConfig, bound: usize) -> usize {
    let (offerer, mut answerer) = connect_in_process(config, config).await.unwrap();
    let mut accepted = 0usize;
    let mut seq = 0u64;
    loop {
        let send = offerer.send(frame(seq, MAX_FRAME_LEN));
        match tokio::time::timeout(Duration::from_secs(2), send).await {
            Ok(result) => {
                result.expect("send while the receiver is not reading");
                accepted += MAX_FRAME_LEN;
                seq += 1;
                assert!(
                    accepted <= bound,
                    "the sender was never held back: {accepted} bytes accepted"
                );
            }
            Err(_) => break, // held back
        }
    }
    // Reading everything lets the sender go on, and nothing was lost.
    for i in 0..seq {
        let got = recv_within(&mut answerer, "draining a held-back link").await;
        assert_eq!(got, Some(frame(i, MAX_FRAME_LEN)), "frame {i} of {seq}");
    }
    offerer.send(frame(seq, 10)).await.unwrap();
    assert_eq!(
        recv_within(&mut answerer, "after draining").await,
        Some(frame(seq, 10))
    );
    accepted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_stops_reading_holds_the_sender_back() {
    // The bound stated in the link docs: two 256-message queues in webrtc-rs plus the
    // 1 MiB SCTP window plus the sender's own buffers, about 33 MiB with full frames
    // (measured 31-35 MiB, whatever the SCTP window). Held under 40 MiB.
    let accepted = held_back_after(&TransportConfig::loopback(), 40 << 20).await;
    eprintln!("sender held back after {accepted} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_vanishes_is_noticed_within_seconds() {
    // The offerer's connection runs on its own runtime; shutting that runtime down
    // stops it without a word, as a crashed process or a pulled cable would.
    let vanishing = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let config = TransportConfig::loopback();
    let (mut offerer, offer) = {
        let config = config.clone();
        vanishing
            .spawn(async move { Handshake::offer(&config).await })
            .await
            .unwrap()
            .unwrap()
    };
    let (mut answerer, answer) = Handshake::answer(&config, &offer).await.unwrap();
    offerer.apply_answer(&answer).await.unwrap();
    let (gone, mut left) = trade_candidates_until_open(&mut offerer, &mut answerer).await;
    gone.send(Bytes::from_static(b"last words")).await.unwrap();
    assert_eq!(
        recv_within(&mut left, "last words").await,
        Some(Bytes::from_static(b"last words"))
    );

    vanishing.shutdown_background();
    let started = Instant::now();
    let end = tokio::time::timeout(Duration::from_secs(10), left.recv())
        .await
        .expect("recv did not return None within 10 s of the peer vanishing");
    assert_eq!(end, None);
    let reason = left.close_reason();
    eprintln!(
        "vanished peer noticed after {:?}: {reason:?}",
        started.elapsed()
    );
    assert_eq!(reason, Some(LinkClosed::ConnectionLost));
    assert!(started.elapsed() < Duration::from_secs(8));
    drop(gone);
}

/// A plain webrtc-rs offerer standing in for a browser: it opens a channel with
/// another label before the linkfs one.
mod browser_like {
    use std::sync::Arc;

    use linkfs_peer::transport::IceCandidate;
    use tokio::sync::mpsc;
    use webrtc::peer_connection::{
        PeerConnection, PeerConnectionBuilder, PeerConnectionEventHandler, RTCConfigurationBuilder,
        RTCPeerConnectionIceEvent, SettingEngineBuilder,
    };

    pub struct Candidates(pub mpsc::Sender<IceCandidate>);

    #[async_trait::async_trait]
    impl PeerConnectionEventHandler for Candidates {
        async fn on_ice_candidate(&self, event: RTCPeerConnectionIceEvent) {
            if let Ok(init) = event.candidate.to_json() {
                let _ = self.0.try_send(IceCandidate {
                    candidate: init.candidate,
                    sdp_mid: None,
                    sdp_mline_index: Some(0),
                });
            }
        }
    }

    pub async fn peer(candidates: mpsc::Sender<IceCandidate>) -> Arc<dyn PeerConnection> {
        let pc = PeerConnectionBuilder::new()
            .with_configuration(RTCConfigurationBuilder::new().build())
            .with_setting_engine(
                SettingEngineBuilder::new()
                    .with_multicast_dns_mode(rtc::ice::mdns::MulticastDnsMode::Disabled)
                    .build(),
            )
            .with_handler(Arc::new(Candidates(candidates)))
            .with_udp_addrs(vec!["127.0.0.1:0".to_string()])
            .build()
            .await
            .unwrap();
        Arc::new(pc)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answerer_takes_only_the_linkfs_channel() {
    use webrtc::data_channel::DataChannelEvent;
    use webrtc::peer_connection::RTCSessionDescription;

    let (cand_tx, mut cand_rx) = tokio::sync::mpsc::channel(64);
    let browser = browser_like::peer(cand_tx).await;
    let chat = browser.create_data_channel("chat", None).await.unwrap();
    let linkfs = browser
        .create_data_channel(linkfs_proto::CHANNEL_LABEL, None)
        .await
        .unwrap();
    let offer = browser.create_offer(None).await.unwrap();
    browser.set_local_description(offer.clone()).await.unwrap();

    // Native tuning must not reach a browser: its offer carries no marker.
    assert!(!is_from_native_peer(&offer.sdp));
    let config = TransportConfig {
        native_peer: Some(NativeTuning::SAME_HOST),
        ..TransportConfig::loopback()
    };
    let (mut sharer, answer) = Handshake::answer(&config, &offer.sdp).await.unwrap();
    browser
        .set_remote_description(RTCSessionDescription::answer(answer).unwrap())
        .await
        .unwrap();

    let deadline = tokio::time::sleep(Duration::from_secs(20));
    tokio::pin!(deadline);
    let mut link = loop {
        tokio::select! {
            e = sharer.next_event() => match e.unwrap() {
                HandshakeEvent::LocalCandidate(c) => {
                    let init = webrtc::peer_connection::RTCIceCandidateInit {
                        candidate: c.candidate,
                        sdp_mid: c.sdp_mid,
                        sdp_mline_index: c.sdp_mline_index,
                        ..Default::default()
                    };
                    browser.add_ice_candidate(init).await.unwrap();
                }
                HandshakeEvent::Open(link) => break link,
                other => panic!("{other:?}"),
            },
            Some(c) = cand_rx.recv() => sharer.add_remote_candidate(c).await.unwrap(),
            () = &mut deadline => panic!("did not connect within 20 s"),
        }
    };
    for channel in [&chat, &linkfs] {
        while !matches!(channel.poll().await, Some(DataChannelEvent::OnOpen)) {}
    }
    chat.send(bytes::BytesMut::from(&b"not for linkfs"[..]))
        .await
        .unwrap();
    linkfs
        .send(bytes::BytesMut::from(&b"frame"[..]))
        .await
        .unwrap();
    assert_eq!(
        recv_within(&mut link, "the linkfs frame").await,
        Some(Bytes::from_static(b"frame"))
    );

    // A message over the frame limit (webrtc-rs itself takes up to 64 KiB) ends the
    // link with a reason that says what happened, and no panic.
    linkfs
        .send(bytes::BytesMut::from(&vec![1u8; MAX_FRAME_LEN + 1][..]))
        .await
        .unwrap();
    assert_eq!(recv_within(&mut link, "the oversized message").await, None);
    assert_eq!(
        link.close_reason(),
        Some(LinkClosed::OversizedFrame {
            len: MAX_FRAME_LEN + 1,
            max: MAX_FRAME_LEN
        })
    );
    let words = link.close_reason().unwrap().to_string();
    assert!(
        words.contains("61441") && words.contains("61440"),
        "{words}"
    );
    browser.close().await.unwrap();
}

/// Regression: webrtc-rs's driver handed a connection's events to its handlers
/// after it had sent what they queued, so the SCTP INIT (queued when DTLS
/// completed) and the data channel's OPEN (when the association came up) each
/// waited for the next timer: 140-160 ms apiece across a 20 ms path; over
/// loopback a connection took 455 ms (median of five), and 54 ms with the
/// fix (third_party/PATCHES.md, webrtc 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_opens_without_waiting_for_a_timer() {
    let mut took = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let (a, b) = pair().await;
        took.push(started.elapsed());
        drop((a, b));
    }
    took.sort();
    eprintln!("connections opened in {took:?}");
    assert!(
        took[2] < Duration::from_millis(100),
        "the median connection took {:?} to open over loopback (all: {took:?})",
        took[2]
    );
}

/// `rounds` frames sent one after another, each after the other side echoed the last.
async fn ping_pong(a: &mut DataLink, b: &mut DataLink, rounds: u32) -> Duration {
    let started = Instant::now();
    for n in 0..rounds {
        a.send(frame(u64::from(n), 64)).await.expect("a sends");
        let got = recv_within(b, "b").await.expect("b receives");
        b.send(got).await.expect("b echoes");
        recv_within(a, "a").await.expect("a receives the echo");
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_set_to_gather_datagrams_reads_them_no_sooner_than_its_wait() {
    let (mut a, mut b) = pair().await;
    let alone = ping_pong(&mut a, &mut b, 10).await;
    // The webrtc patch (third_party/PATCHES.md): woken again within the wait of its
    // last wake, a's driver lets datagrams gather before it reads them.
    a.set_receive_coalescing(Duration::from_millis(40));
    let gathering = ping_pong(&mut a, &mut b, 10).await;
    eprintln!("10 round trips: {alone:?} alone, {gathering:?} gathering for 40 ms");
    assert!(
        alone < Duration::from_millis(200),
        "10 round trips over loopback took {alone:?} with no wait set"
    );
    assert!(
        gathering >= Duration::from_millis(300),
        "10 round trips took {gathering:?} with a 40 ms wait set: the driver read each datagram at once"
    );
    a.set_receive_coalescing(Duration::ZERO);
    let again = ping_pong(&mut a, &mut b, 10).await;
    assert!(
        again < Duration::from_millis(200),
        "10 round trips took {again:?} after the wait was set back to zero"
    );
}
