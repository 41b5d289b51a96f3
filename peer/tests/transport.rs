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
use linkfs_peer::transport::{
    CloseReason, DataLink, Handshake, HandshakeEvent, IceCandidate, LinkError, TransportConfig,
    TransportError, connect_in_process,
};
use linkfs_proto::MAX_FRAME_LEN;

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
        assert_eq!(got, Some(frame(i as u64, len)), "frame {i} offerer -> answerer");
        let got = recv_within(&mut offerer, "answerer -> offerer").await;
        assert_eq!(got, Some(frame(1000 + i as u64, len)), "frame {i} answerer -> offerer");
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

async fn assert_ends_within(link: &mut DataLink, side: &str) -> CloseReason {
    let started = Instant::now();
    let end = tokio::time::timeout(NOTICE_WITHIN, async {
        while let Some(extra) = link.recv().await {
            panic!("{side}: unexpected frame of {} bytes", extra.len());
        }
    })
    .await;
    assert!(
        end.is_ok(),
        "{side}: recv did not return None within {NOTICE_WITHIN:?}"
    );
    eprintln!("{side} noticed the end after {:?}", started.elapsed());
    link.close_reason()
        .unwrap_or_else(|| panic!("{side}: recv returned None but no close reason"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_offerer_ends_the_answerer() {
    let (offerer, mut answerer) = pair().await;
    offerer.close().await;
    let reason = assert_ends_within(&mut answerer, "answerer").await;
    assert!(
        matches!(
            reason,
            CloseReason::PeerClosed | CloseReason::ConnectionClosed | CloseReason::ConnectionLost
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidates_that_arrive_before_the_answer_are_kept() {
    let config = TransportConfig::loopback();
    let (mut offerer, offer) = Handshake::offer(&config).await.unwrap();
    let (mut answerer, answer) = Handshake::answer(&config, &offer).await.unwrap();

    // The answerer's candidates reach the offerer before its answer does.
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
    offerer.add_remote_candidate(candidate).await.unwrap();
    offerer.apply_answer(&answer).await.unwrap();

    let mut links = (None, None);
    let deadline = Instant::now() + Duration::from_secs(20);
    while links.0.is_none() || links.1.is_none() {
        assert!(Instant::now() < deadline, "did not connect within 20 s");
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
        }
    }
    let (Some(a), Some(mut b)) = links else {
        unreachable!()
    };
    a.send(Bytes::from_static(b"hello")).await.unwrap();
    assert_eq!(
        recv_within(&mut b, "hello").await,
        Some(Bytes::from_static(b"hello"))
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
