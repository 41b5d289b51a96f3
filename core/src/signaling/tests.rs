//! Guest and host machines talking through a relay simulated in memory.

use super::*;
use crate::link::ShareSecret;

/// The sharer's key in these tests.
fn sharer() -> SharerKey {
    SharerKey::from_seed([9; 32])
}

fn link(secret: u8) -> ShareLink {
    ShareLink {
        origin: "http://127.0.0.1:1".into(),
        room: sharer().room(),
        secret: ShareSecret::from_bytes([secret; 16]),
        path: String::new(),
    }
}

fn welcome() -> RelayToClient {
    welcome_as(PeerId(1))
}

fn welcome_as(peer: PeerId) -> RelayToClient {
    RelayToClient::Welcome {
        peer,
        ice_servers: vec![IceServer {
            urls: vec!["stun:127.0.0.1:3478".into()],
            ..IceServer::default()
        }],
        max_message: MAX_SIGNAL_MESSAGE,
    }
}

fn cand(n: u32) -> IceCandidate {
    IceCandidate {
        candidate: format!(
            "candidate:{n} 1 udp 2130706431 127.0.0.1 {} typ host",
            5000 + n
        ),
        sdp_mid: None,
        sdp_mline_index: Some(0),
    }
}

/// A registered host with its actions drained.
fn host(max_visitors: usize) -> HostSignaling {
    let mut h = HostSignaling::new(&link(7), sharer(), max_visitors, [1; 16]);
    h.handle_relay(RelayToClient::Welcome {
        peer: PeerId::HOST,
        ice_servers: Vec::new(),
        max_message: MAX_SIGNAL_MESSAGE,
    });
    assert!(matches!(
        h.poll_action(),
        Some(HostAction::Registered { .. })
    ));
    assert!(h.is_registered());
    h
}

fn guest_actions(g: &mut GuestSignaling) -> Vec<GuestAction> {
    std::iter::from_fn(|| g.poll_action()).collect()
}

fn host_actions(h: &mut HostSignaling) -> Vec<HostAction> {
    std::iter::from_fn(|| h.poll_action()).collect()
}

/// What the relay does with a guest's `Send`: the host receives it from `peer`.
fn to_host(peer: PeerId, actions: &[GuestAction], h: &mut HostSignaling) -> usize {
    let mut n = 0;
    for a in actions {
        if let GuestAction::Send(text) = a {
            let Ok(ClientToRelay::Msg { to, data }) = serde_json::from_str(text) else {
                panic!("not a relay message: {text}")
            };
            assert_eq!(to, PeerId::HOST, "guests only ever send to the host");
            h.handle_relay(RelayToClient::Msg { from: peer, data });
            n += 1;
        }
    }
    n
}

/// What the relay does with the host's `Send`s to `peer`.
fn to_guest(peer: PeerId, actions: &[HostAction], g: &mut GuestSignaling) -> usize {
    let mut n = 0;
    for a in actions {
        if let HostAction::Send(text) = a {
            let Ok(ClientToRelay::Msg { to, data }) = serde_json::from_str(text) else {
                panic!("not a relay message: {text}")
            };
            if to == peer {
                g.handle_relay_text(
                    &serde_json::to_string(&RelayToClient::Msg {
                        from: PeerId::HOST,
                        data,
                    })
                    .unwrap(),
                );
                n += 1;
            }
        }
    }
    n
}

/// The relay tells the host that `peer` joined, and `g`'s knock (its first
/// message, sent on the relay's welcome) reaches the host.
fn knock(h: &mut HostSignaling, g: &GuestSignaling, peer: PeerId) {
    h.handle_relay(RelayToClient::Joined { peer });
    assert!(host_actions(h).is_empty(), "nothing before the knock");
    let data = g.key.seal_payload_bound(
        &g.room,
        Direction::GuestToHost,
        &binding(peer, None),
        [0xAB; 24],
        &SignalPayload::Knock { pad: String::new() },
    );
    h.handle_relay(RelayToClient::Msg { from: peer, data });
}

/// `g` knocks as `peer`; the host's answer (a challenge) reaches `g`.
fn join(h: &mut HostSignaling, g: &mut GuestSignaling, peer: PeerId) {
    knock(h, g, peer);
    let a = host_actions(h);
    assert_eq!(to_guest(peer, &a, g), 1, "one challenge per guest: {a:?}");
}

/// A guest let in as peer 1 of a host of secret 7, holding its challenge.
fn challenged_guest(seed: u8) -> GuestSignaling {
    let mut h = host(4);
    let mut g = GuestSignaling::new(&link(7), [seed; 16]);
    g.handle_relay(welcome());
    guest_actions(&mut g);
    join(&mut h, &mut g, PeerId(1));
    g
}

#[test]
fn a_whole_handshake_trades_offer_answer_and_candidates_in_order() {
    let mut h = host(4);
    let mut g = GuestSignaling::new(&link(7), [2; 16]);
    let peer = PeerId(1);

    g.handle_relay(welcome());
    let a = guest_actions(&mut g);
    assert!(
        matches!(&a[..], [GuestAction::MakeOffer { ice_servers }, GuestAction::Send(_)] if ice_servers.len() == 1),
        "an offer to make, and the knock: {a:?}"
    );

    // A candidate gathered while the offer is being made waits for the offer,
    // and the offer waits for the host's challenge.
    g.local_candidate(cand(1));
    assert!(guest_actions(&mut g).is_empty());
    g.offer_made("offer-sdp".into());
    assert!(
        guest_actions(&mut g).is_empty(),
        "no offer before the challenge"
    );
    join(&mut h, &mut g, peer);
    let a = guest_actions(&mut g);
    assert_eq!(to_host(peer, &a, &mut h), 2);
    assert_eq!(
        host_actions(&mut h),
        vec![
            HostAction::Answer {
                peer,
                offer: "offer-sdp".into(),
                link: LinkId(0),
            },
            HostAction::AddCandidate {
                peer,
                candidate: cand(1)
            },
        ]
    );
    assert_eq!(h.admitted(), 1);

    // The answer and two candidates arrive before the guest finished applying the answer.
    h.answer_made(peer, "answer-sdp".into());
    h.local_candidate(peer, cand(10));
    h.local_candidate(peer, cand(11));
    let a = host_actions(&mut h);
    assert_eq!(to_guest(peer, &a, &mut g), 3);
    assert_eq!(
        guest_actions(&mut g),
        vec![GuestAction::ApplyAnswer {
            sdp: "answer-sdp".into()
        }]
    );
    g.answer_applied();
    assert_eq!(
        guest_actions(&mut g),
        vec![
            GuestAction::AddCandidate(cand(10)),
            GuestAction::AddCandidate(cand(11))
        ]
    );
    // Later candidates go straight through, both ways.
    h.local_candidate(peer, cand(12));
    let a = host_actions(&mut h);
    to_guest(peer, &a, &mut g);
    assert_eq!(
        guest_actions(&mut g),
        vec![GuestAction::AddCandidate(cand(12))]
    );
    g.local_candidate(cand(2));
    let a = guest_actions(&mut g);
    to_host(peer, &a, &mut h);
    assert_eq!(
        host_actions(&mut h),
        vec![HostAction::AddCandidate {
            peer,
            candidate: cand(2)
        }]
    );

    g.channel_open();
    assert_eq!(guest_actions(&mut g), vec![GuestAction::CloseRelay]);
    assert!(g.is_done());
    h.visitor_connected(peer);
    assert_eq!((h.admitted(), h.connected()), (1, 1));
    h.visitor_ended(peer);
    assert_eq!((h.admitted(), h.connected()), (0, 0));
}

#[test]
fn a_wrong_secret_fails_on_the_challenge_and_costs_the_host_one_message() {
    let mut h = host(4);
    let mut g = GuestSignaling::new(&link(8), [3; 16]);
    let peer = PeerId(5);
    g.handle_relay(welcome_as(peer));
    guest_actions(&mut g);
    g.offer_made("offer".into());
    knock(&mut h, &g, peer);
    let a = host_actions(&mut h);
    assert_eq!(to_guest(peer, &a, &mut g), 1);
    // Its knock opened with no link's key: the challenge it gets is sealed
    // with a key no one has, and it cannot open it.
    assert_eq!(
        guest_actions(&mut g),
        vec![GuestAction::Fail(GuestFailure::InvalidLink)]
    );
    assert!(g.is_done());
    // Whatever such a guest sends is dropped unanswered.
    for n in 0..20 {
        h.handle_relay(RelayToClient::Msg {
            from: peer,
            data: format!("junk {n}"),
        });
    }
    assert!(host_actions(&mut h).is_empty());
    assert_eq!(h.admitted(), 0);
    // Nothing more happens after a failure.
    g.handle_relay(welcome());
    g.local_candidate(cand(99));
    assert!(guest_actions(&mut g).is_empty());
}

#[test]
fn a_replayed_offer_from_another_connection_takes_no_slot_and_gets_no_answer() {
    let mut h = host(4);
    let mut g = GuestSignaling::new(&link(7), [3; 16]);
    g.handle_relay(welcome_as(PeerId(1)));
    guest_actions(&mut g);
    join(&mut h, &mut g, PeerId(1));
    g.offer_made("the real visitor's offer".into());
    g.local_candidate(cand(1));
    let captured = guest_actions(&mut g);
    // Replayed by someone who watched the relay, from new guest sockets.
    for replay_peer in [2, 3, 4] {
        let peer = PeerId(replay_peer);
        h.handle_relay(RelayToClient::Joined { peer });
        to_host(peer, &captured, &mut h);
        let got = host_actions(&mut h);
        assert!(
            matches!(&got[..], [HostAction::Send(_)]),
            "a replayed offer is not answered; one message, as for any guest: {got:?}"
        );
        to_host(peer, &captured, &mut h);
        assert!(host_actions(&mut h).is_empty(), "and only once");
    }
    assert_eq!(h.admitted(), 0, "replays hold no visitor slot");
    // The real visitor's own messages still work.
    to_host(PeerId(1), &captured, &mut h);
    assert!(matches!(
        &host_actions(&mut h)[..],
        [HostAction::Answer { .. }, HostAction::AddCandidate { .. }]
    ));
    // And replaying them once it is admitted changes nothing.
    to_host(PeerId(1), &captured, &mut h);
    assert_eq!(h.admitted(), 1);
}

#[test]
fn remote_candidates_before_the_answer_are_bounded() {
    let mut h = host(4);
    let mut g = GuestSignaling::new(&link(7), [4; 16]);
    let peer = PeerId(1);
    g.handle_relay(welcome());
    guest_actions(&mut g);
    join(&mut h, &mut g, peer);
    g.offer_made("offer".into());
    let a = guest_actions(&mut g);
    to_host(peer, &a, &mut h);
    host_actions(&mut h);
    // Candidates that overtake the answer (the relay is ordered, but a shell may
    // gather before it answers): more than the limit.
    for n in 0..(EARLY_CANDIDATE_LIMIT as u32 + 36) {
        h.local_candidate(peer, cand(n));
    }
    h.answer_made(peer, "answer".into());
    let a = host_actions(&mut h);
    to_guest(peer, &a, &mut g);
    assert_eq!(
        guest_actions(&mut g),
        vec![GuestAction::ApplyAnswer {
            sdp: "answer".into()
        }]
    );
    g.answer_applied();
    let added = guest_actions(&mut g);
    assert_eq!(added.len(), EARLY_CANDIDATE_LIMIT);
    assert_eq!(added[0], GuestAction::AddCandidate(cand(0)));
}

#[test]
fn local_candidates_before_the_offer_are_bounded() {
    let mut g = challenged_guest(4);
    for n in 0..200 {
        g.local_candidate(cand(n));
    }
    g.offer_made("offer".into());
    assert_eq!(guest_actions(&mut g).len(), 1 + EARLY_CANDIDATE_LIMIT);
}

#[test]
fn the_host_leaving_means_the_sharer_is_gone() {
    let mut g = GuestSignaling::new(&link(7), [5; 16]);
    g.handle_relay(welcome());
    guest_actions(&mut g);
    // Another guest leaving says nothing to this one.
    g.handle_relay(RelayToClient::Left { peer: PeerId(9) });
    assert!(guest_actions(&mut g).is_empty());
    g.handle_relay(RelayToClient::Left { peer: PeerId::HOST });
    assert_eq!(
        guest_actions(&mut g),
        vec![GuestAction::Fail(GuestFailure::SharerGone)]
    );
}

#[test]
fn relay_errors_say_what_went_wrong() {
    let error = |code, message: &str| RelayToClient::Error {
        code,
        message: message.into(),
    };
    let mut g = GuestSignaling::new(&link(7), [6; 16]);
    g.handle_relay(error(RelayErrorCode::NoSuchRoom, "no one is sharing"));
    assert_eq!(
        guest_actions(&mut g),
        vec![GuestAction::Fail(GuestFailure::SharerGone)]
    );
    let mut g = GuestSignaling::new(&link(7), [6; 16]);
    g.handle_relay(error(RelayErrorCode::RoomFull, "the room is full"));
    let a = guest_actions(&mut g);
    assert_eq!(
        a,
        vec![GuestAction::Fail(GuestFailure::Relay {
            code: RelayErrorCode::RoomFull,
            message: "the room is full".into()
        })]
    );
    let GuestAction::Fail(f) = &a[0] else {
        unreachable!()
    };
    assert_eq!(f.to_string(), "the relay says: the room is full");

    // The host: refused before it holds the room, warned after.
    let mut h = HostSignaling::new(&link(7), sharer(), 1, [1; 16]);
    h.handle_relay(error(RelayErrorCode::RoomTaken, "taken"));
    assert_eq!(
        host_actions(&mut h),
        vec![HostAction::Fail(HostFailure::Refused {
            code: RelayErrorCode::RoomTaken,
            message: "taken".into()
        })]
    );
    let mut h = host(1);
    h.handle_relay(error(RelayErrorCode::UnknownPeer, "gone"));
    h.handle_relay(error(RelayErrorCode::RateLimited, "slow down"));
    assert_eq!(
        host_actions(&mut h),
        vec![HostAction::Warning("the relay says: slow down".into())]
    );
}

#[test]
fn the_relay_closing_before_the_answer_fails_but_not_after_it() {
    let mut g = GuestSignaling::new(&link(7), [7; 16]);
    g.handle_relay(welcome());
    guest_actions(&mut g);
    g.offer_made("o".into());
    guest_actions(&mut g);
    g.relay_closed();
    assert_eq!(
        guest_actions(&mut g),
        vec![GuestAction::Fail(GuestFailure::RelayLost)]
    );

    let mut h = host(2);
    let mut g = GuestSignaling::new(&link(7), [7; 16]);
    g.handle_relay(welcome());
    guest_actions(&mut g);
    join(&mut h, &mut g, PeerId(1));
    g.offer_made("o".into());
    let a = guest_actions(&mut g);
    to_host(PeerId(1), &a, &mut h);
    host_actions(&mut h);
    h.answer_made(PeerId(1), "a".into());
    let a = host_actions(&mut h);
    to_guest(PeerId(1), &a, &mut g);
    guest_actions(&mut g);
    g.answer_applied();
    g.relay_closed();
    // ICE may still finish with what was traded; local candidates are not sent.
    g.local_candidate(cand(1));
    assert!(guest_actions(&mut g).is_empty());
    g.channel_open();
    assert!(
        guest_actions(&mut g).is_empty(),
        "the relay is already closed"
    );
}

fn offer_from(h: &mut HostSignaling, peer: PeerId) -> Vec<HostAction> {
    offer_and_guest(h, peer).0
}

/// A guest let in as `peer` offers; the host's actions, and the guest.
fn offer_and_guest(h: &mut HostSignaling, peer: PeerId) -> (Vec<HostAction>, GuestSignaling) {
    guest_offering_through(h, peer, 7)
}

#[test]
fn the_host_admits_at_most_max_visitors_and_frees_ended_slots() {
    let mut h = host(2);
    assert!(matches!(
        &offer_from(&mut h, PeerId(1))[..],
        [HostAction::Answer { .. }]
    ));
    assert!(matches!(
        &offer_from(&mut h, PeerId(2))[..],
        [HostAction::Answer { .. }]
    ));
    let (a, mut g3) = offer_and_guest(&mut h, PeerId(3));
    assert!(a.contains(&HostAction::Refused {
        peer: PeerId(3),
        why: Refusal::Full { max: 2 }
    }));
    // The refused guest is told why, in words it can open.
    to_guest(PeerId(3), &a, &mut g3);
    let failed = guest_actions(&mut g3);
    assert!(
        matches!(&failed[..], [GuestAction::Fail(GuestFailure::Refused(r))] if r.contains("2 visitors")),
        "{failed:?}"
    );
    // A repeated offer from an admitted visitor changes nothing.
    assert!(offer_from(&mut h, PeerId(1)).is_empty());
    assert_eq!(h.admitted(), 2);
    // A visitor whose task ended (however it ended) frees its slot.
    h.visitor_ended(PeerId(2));
    assert!(matches!(
        &offer_from(&mut h, PeerId(4))[..],
        [HostAction::Answer { .. }]
    ));
    assert_eq!(h.admitted(), 2);
}

#[test]
fn a_visitors_lanes_never_turn_another_visitor_away() {
    let mut h = host(2);
    assert!(matches!(
        &offer_from(&mut h, PeerId(1))[..],
        [HostAction::Answer { .. }]
    ));
    // Visitor 1's lane connects (a slot while it is unknown), then joins its session.
    assert!(matches!(
        &offer_from(&mut h, PeerId(2))[..],
        [HostAction::Answer { .. }]
    ));
    h.visitor_is_lane(PeerId(2));
    assert_eq!(h.admitted(), 1);
    // Another visitor still gets in.
    assert!(matches!(
        &offer_from(&mut h, PeerId(3))[..],
        [HostAction::Answer { .. }]
    ));
    assert_eq!(h.admitted(), 2);
    // A lane's offer again changes nothing; its end frees nothing twice.
    assert!(offer_from(&mut h, PeerId(2)).is_empty());
    h.visitor_ended(PeerId(2));
    assert_eq!(h.admitted(), 2);
    // Not admitted: no lane.
    h.visitor_is_lane(PeerId(9));
    assert_eq!(h.admitted(), 2);
}

#[test]
fn the_host_takes_a_bounded_number_of_candidates_per_visitor() {
    let mut h = host(2);
    let peer = PeerId(1);
    let mut g = GuestSignaling::new(&link(7), [1; 16]);
    g.handle_relay(welcome());
    guest_actions(&mut g);
    join(&mut h, &mut g, peer);
    g.offer_made("o".into());
    for n in 0..500 {
        g.local_candidate(cand(n));
    }
    let a = guest_actions(&mut g);
    to_host(peer, &a, &mut h);
    let added = host_actions(&mut h)
        .into_iter()
        .filter(|a| matches!(a, HostAction::AddCandidate { .. }))
        .count();
    assert_eq!(added, CANDIDATES_PER_VISITOR);
}

#[test]
fn a_candidate_from_a_guest_without_an_offer_is_dropped() {
    let mut h = host(2);
    let mut g = GuestSignaling::new(&link(7), [1; 16]);
    g.handle_relay(welcome());
    guest_actions(&mut g);
    join(&mut h, &mut g, PeerId(1));
    g.offer_made("o".into());
    guest_actions(&mut g); // the offer never reaches the host
    g.local_candidate(cand(1));
    let a = guest_actions(&mut g);
    to_host(PeerId(1), &a, &mut h);
    assert!(host_actions(&mut h).is_empty());
}

#[test]
fn challenges_are_one_per_guest_and_kept_within_a_bound() {
    let mut h = host(1);
    for p in 1..=(CHALLENGES_KEPT as u32 + 10) {
        // Junk from a guest: it gets a challenge no one can open, once.
        for _ in 0..3 {
            h.handle_relay(RelayToClient::Msg {
                from: PeerId(p),
                data: "junk".into(),
            });
        }
    }
    assert!(
        h.challenges.is_empty(),
        "nothing kept for a guest with no link"
    );
    assert!(h.refused.len() <= REFUSALS_REMEMBERED);
    let actions = host_actions(&mut h);
    assert_eq!(actions.len(), CHALLENGES_KEPT + 10, "one message per guest");
    assert!(actions.iter().all(|a| matches!(a, HostAction::Send(_))));
    // Guests that knock right but never offer: their challenges are kept
    // within the bound.
    let first = CHALLENGES_KEPT as u32 + 100;
    for p in first..first + CHALLENGES_KEPT as u32 + 10 {
        let mut g = GuestSignaling::new(&link(7), [3; 16]);
        g.handle_relay(welcome_as(PeerId(p)));
        knock(&mut h, &g, PeerId(p));
        assert_eq!(host_actions(&mut h).len(), 1);
    }
    assert_eq!(h.challenges.len(), CHALLENGES_KEPT);
}

#[test]
fn refusals_are_remembered_within_a_bound() {
    let mut h = host(1);
    assert!(matches!(
        &offer_from(&mut h, PeerId(1))[..],
        [HostAction::Answer { .. }]
    ));
    for p in 2..=(REFUSALS_REMEMBERED as u32 + 10) {
        offer_from(&mut h, PeerId(p));
    }
    assert_eq!(h.refused.len(), REFUSALS_REMEMBERED);
}

#[test]
fn relay_text_that_is_too_long_or_unknown_is_skipped() {
    let mut g = GuestSignaling::new(&link(7), [1; 16]);
    g.handle_relay_text("not json");
    g.handle_relay_text(r#"{"t":"from-the-future","x":1}"#);
    let long = format!(
        r#"{{"t":"welcome","peer":1,"max_message":1,"ice_servers":[{{"urls":["{}"]}}]}}"#,
        "s".repeat(MAX_SIGNAL_MESSAGE)
    );
    g.handle_relay_text(&long);
    assert!(guest_actions(&mut g).is_empty());
    g.handle_relay_text(r#"{"t":"welcome","peer":1,"max_message":16384}"#);
    assert!(matches!(
        &guest_actions(&mut g)[..],
        [GuestAction::MakeOffer { .. }, GuestAction::Send(_)]
    ));
}

#[test]
fn every_sealed_message_has_its_own_nonce() {
    let mut g = challenged_guest(1);
    g.offer_made("same".into());
    g.local_candidate(cand(1));
    g.local_candidate(cand(1));
    let sends: Vec<String> = guest_actions(&mut g)
        .into_iter()
        .filter_map(|a| match a {
            GuestAction::Send(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(sends.len(), 3);
    assert_ne!(
        sends[1], sends[2],
        "the same candidate twice is sealed differently"
    );
}

#[test]
fn losing_the_relay_is_said_once_and_stops_host_sends() {
    let mut h = host(2);
    offer_from(&mut h, PeerId(1));
    h.relay_closed();
    h.relay_closed();
    assert_eq!(host_actions(&mut h).len(), 1);
    h.answer_made(PeerId(1), "a".into());
    assert!(host_actions(&mut h).is_empty());
}

#[test]
fn after_the_relay_comes_back_the_room_is_registered_again_and_slots_stay() {
    let mut h = host(2);
    offer_from(&mut h, PeerId(1));
    h.visitor_connected(PeerId(1));
    h.relay_closed();
    host_actions(&mut h);
    h.relay_reopened();
    assert!(!h.is_registered());
    h.handle_relay(RelayToClient::Welcome {
        peer: PeerId::HOST,
        ice_servers: Vec::new(),
        max_message: MAX_SIGNAL_MESSAGE,
    });
    assert!(matches!(
        h.poll_action(),
        Some(HostAction::Registered { .. })
    ));
    assert_eq!(
        (h.admitted(), h.connected()),
        (1, 1),
        "the connected visitor is still counted"
    );
    // The room taken by the old connection for a moment: a failure the shell retries.
    h.relay_closed();
    h.relay_reopened();
    h.handle_relay(RelayToClient::Error {
        code: RelayErrorCode::RoomTaken,
        message: "taken".into(),
    });
    assert!(
        host_actions(&mut h)
            .iter()
            .any(|a| matches!(a, HostAction::Fail(_)))
    );
}

#[test]
fn someone_with_the_link_but_not_the_sharers_key_cannot_pose_as_the_sharer() {
    // An impostor knows the link (the secret) and somehow holds the room.
    let impostor = SharerKey::from_seed([10; 32]);
    let mut h = HostSignaling::new(&link(7), impostor.clone(), 4, [1; 16]);
    h.handle_relay(welcome_as(PeerId::HOST));
    host_actions(&mut h);
    let mut g = GuestSignaling::new(&link(7), [2; 16]);
    g.handle_relay(welcome());
    guest_actions(&mut g);
    knock(&mut h, &g, PeerId(1));
    let a = host_actions(&mut h);
    to_guest(PeerId(1), &a, &mut g);
    assert_eq!(
        guest_actions(&mut g),
        vec![GuestAction::Fail(GuestFailure::NotTheSharer)]
    );

    // A real challenge, then an answer signed by another key: refused too.
    let mut h = host(4);
    let mut g = GuestSignaling::new(&link(7), [3; 16]);
    g.handle_relay(welcome());
    guest_actions(&mut g);
    join(&mut h, &mut g, PeerId(1));
    g.offer_made("offer".into());
    let a = guest_actions(&mut g);
    to_host(PeerId(1), &a, &mut h);
    host_actions(&mut h);
    let (challenge, _) = h.challenge_of(PeerId(1)).unwrap();
    let forged = SignalPayload::Answer {
        sdp: "impostor's answer".into(),
        sig: impostor.sign_text(&answer_message(
            &link(7).room,
            1,
            &challenge,
            "impostor's answer",
        )),
    };
    let data = SignalKey::from_secret(&link(7).secret).seal_payload_bound(
        &link(7).room,
        Direction::HostToGuest,
        &binding(PeerId(1), Some(&challenge)),
        [5; 24],
        &forged,
    );
    g.handle_relay(RelayToClient::Msg {
        from: PeerId::HOST,
        data,
    });
    assert_eq!(
        guest_actions(&mut g),
        vec![GuestAction::Fail(GuestFailure::NotTheSharer)]
    );
}

/// A guest of secret `secret` that knocks as `peer` and offers: what it ends with.
fn visit_as(
    h: &mut HostSignaling,
    secret: u8,
    peer: PeerId,
) -> (Vec<HostAction>, Vec<GuestAction>) {
    let mut g = GuestSignaling::new(&link(secret), [peer.0 as u8; 16]);
    g.handle_relay(welcome_as(peer));
    g.offer_made(format!("offer {}", peer.0));
    let a = guest_actions(&mut g);
    h.handle_relay(RelayToClient::Joined { peer });
    to_host(peer, &a, h);
    let first = host_actions(h);
    let sent = first
        .iter()
        .filter(|a| matches!(a, HostAction::Send(_)))
        .count();
    assert_eq!(sent, 1, "one message to every guest: {first:?}");
    to_guest(peer, &first, &mut g);
    let a = guest_actions(&mut g);
    to_host(peer, &a, h);
    let mut acted: Vec<HostAction> = first
        .into_iter()
        .filter(|a| !matches!(a, HostAction::Send(_)))
        .collect();
    acted.extend(host_actions(h));
    (acted, a)
}

#[test]
fn each_link_of_a_share_is_known_by_the_key_its_knock_opens_with() {
    let mut h = host(8);
    h.add_link(LinkId(5), &ShareSecret::from_bytes([8; 16]))
        .unwrap();
    let (first, _) = visit_as(&mut h, 7, PeerId(1));
    assert!(
        matches!(
            &first[..],
            [HostAction::Answer {
                link: LinkId(0),
                ..
            }]
        ),
        "{first:?}"
    );
    let (second, _) = visit_as(&mut h, 8, PeerId(2));
    assert!(
        matches!(
            &second[..],
            [HostAction::Answer {
                link: LinkId(5),
                ..
            }]
        ),
        "{second:?}"
    );
    assert_eq!(h.link_of(PeerId(2)), Some(LinkId(5)));
    // A secret of no link: the same one message, then "not valid".
    let (none, g) = visit_as(&mut h, 9, PeerId(3));
    assert!(none.is_empty());
    assert_eq!(g, vec![GuestAction::Fail(GuestFailure::InvalidLink)]);
}

#[test]
fn a_withdrawn_or_expired_link_is_told_so_and_the_others_still_open() {
    let mut h = host(8);
    h.add_link(LinkId(5), &ShareSecret::from_bytes([8; 16]))
        .unwrap();
    h.add_link(LinkId(6), &ShareSecret::from_bytes([9; 16]))
        .unwrap();
    h.end_link(
        LinkId(5),
        LinkEnd::Withdrawn {
            words: "This link was withdrawn by the sharer.".into(),
        },
    );
    h.end_link(
        LinkId(6),
        LinkEnd::Expired {
            words: "This link expired on 2026-11-27 18:00 UTC.".into(),
        },
    );
    let (acted, g) = visit_as(&mut h, 8, PeerId(1));
    assert!(
        matches!(&acted[..], [HostAction::Refused { .. }]),
        "{acted:?}"
    );
    assert_eq!(
        g,
        vec![GuestAction::Fail(GuestFailure::LinkWithdrawn(
            "This link was withdrawn by the sharer.".into()
        ))]
    );
    assert_eq!(
        GuestFailure::LinkWithdrawn(String::new()).kind(),
        crate::FailureKind::LinkEnded
    );
    let (_, g) = visit_as(&mut h, 9, PeerId(2));
    assert_eq!(
        g,
        vec![GuestAction::Fail(GuestFailure::LinkExpired(
            "This link expired on 2026-11-27 18:00 UTC.".into()
        ))]
    );
    let (acted, _) = visit_as(&mut h, 7, PeerId(3));
    assert!(matches!(
        &acted[..],
        [HostAction::Answer {
            link: LinkId(0),
            ..
        }]
    ));
    // A forgotten link is no link at all.
    h.forget_link(LinkId(5));
    let (_, g) = visit_as(&mut h, 8, PeerId(4));
    assert_eq!(g, vec![GuestAction::Fail(GuestFailure::InvalidLink)]);
}

/// A host with link 5 (secret 8), and guest 1 of that link holding its challenge.
fn challenged_through_link_5() -> (HostSignaling, GuestSignaling) {
    let mut h = host(8);
    h.add_link(LinkId(5), &ShareSecret::from_bytes([8; 16]))
        .unwrap();
    let mut g = GuestSignaling::new(&link(8), [1; 16]);
    g.handle_relay(welcome_as(PeerId(1)));
    guest_actions(&mut g);
    join(&mut h, &mut g, PeerId(1));
    (h, g)
}

#[test]
fn a_link_withdrawn_during_a_guests_handshake_admits_it_no_further() {
    let (mut h, mut g) = challenged_through_link_5();
    h.end_link(
        LinkId(5),
        LinkEnd::Withdrawn {
            words: "withdrawn".into(),
        },
    );
    g.offer_made("offer".into());
    let a = guest_actions(&mut g);
    to_host(PeerId(1), &a, &mut h);
    assert!(
        !host_actions(&mut h)
            .iter()
            .any(|a| matches!(a, HostAction::Answer { .. })),
        "no answer for a withdrawn link"
    );
    assert_eq!(h.admitted(), 0);
}

#[test]
fn a_share_holds_a_bounded_number_of_link_keys() {
    let mut h = host(1);
    for i in 1..MAX_LINK_KEYS as u32 {
        h.add_link(LinkId(i), &ShareSecret::from_bytes([i as u8; 16]))
            .unwrap();
    }
    assert_eq!(
        h.add_link(LinkId(100_000), &ShareSecret::from_bytes([1; 16])),
        Err(TooManyLinks)
    );
    // Replacing a known one is always possible.
    h.add_link(LinkId(3), &ShareSecret::from_bytes([200; 16]))
        .unwrap();
}

/// `peer`'s offer through the link whose secret is `[secret; 16]`: the host's actions.
fn offer_through(h: &mut HostSignaling, peer: PeerId, secret: u8) -> Vec<HostAction> {
    guest_offering_through(h, peer, secret).0
}

/// A guest of the link whose secret is `[secret; 16]`, as `peer`, that knocked
/// and sent its offer: the host's actions, and the guest.
fn guest_offering_through(
    h: &mut HostSignaling,
    peer: PeerId,
    secret: u8,
) -> (Vec<HostAction>, GuestSignaling) {
    let mut g = GuestSignaling::new(&link(secret), [peer.0 as u8; 16]);
    g.handle_relay(welcome_as(peer));
    guest_actions(&mut g);
    knock(h, &g, peer);
    let challenge = host_actions(h);
    to_guest(peer, &challenge, &mut g);
    g.offer_made(format!("offer {}", peer.0));
    let a = guest_actions(&mut g);
    to_host(peer, &a, h);
    (host_actions(h), g)
}

#[test]
fn visitors_waiting_at_a_password_prompt_hold_no_visitor_slot() {
    // Regression: with --max-visitors 3, three visitors sitting at a password
    // prompt made the main link answer "already has 3 visitors connected".
    let mut h = host(3);
    h.add_link(LinkId(5), &ShareSecret::from_bytes([8; 16]))
        .expect("room for a link");
    h.set_asks_password(LinkId(5), true);
    for p in 1..=3 {
        assert!(
            matches!(
                &offer_through(&mut h, PeerId(p), 8)[..],
                [HostAction::Answer { .. }]
            ),
            "visitor {p} at the prompt"
        );
    }
    assert_eq!((h.admitted(), h.at_prompt()), (0, 3));
    // The main link still admits its three.
    for p in 4..=6 {
        assert!(
            matches!(
                &offer_from(&mut h, PeerId(p))[..],
                [HostAction::Answer { .. }]
            ),
            "visitor {p} of the main link"
        );
    }
    assert_eq!(h.admitted(), 3);
    // Past the prompt into a full share: not admitted (the shell tells it why).
    assert!(!h.visitor_passed(PeerId(1)));
    assert!(h.full_words().contains("3 visitors"));
    h.visitor_ended(PeerId(4));
    assert!(h.visitor_passed(PeerId(1)), "a slot was free");
    assert_eq!((h.admitted(), h.at_prompt()), (3, 2));
    // Passing twice, or for a visitor of a link without a password, changes nothing.
    assert!(h.visitor_passed(PeerId(1)));
    assert!(h.visitor_passed(PeerId(5)));
    assert_eq!(h.admitted(), 3);
}

#[test]
fn at_most_max_at_prompt_visitors_wait_at_password_prompts() {
    let mut h = host(1);
    h.add_link(LinkId(5), &ShareSecret::from_bytes([8; 16]))
        .expect("room for a link");
    h.set_asks_password(LinkId(5), true);
    for p in 1..=MAX_AT_PROMPT as u32 {
        assert!(matches!(
            &offer_through(&mut h, PeerId(p), 8)[..],
            [HostAction::Answer { .. }]
        ));
    }
    let a = offer_through(&mut h, PeerId(100), 8);
    assert!(
        a.contains(&HostAction::Refused {
            peer: PeerId(100),
            why: Refusal::AtPrompt { max: MAX_AT_PROMPT }
        }),
        "{a:?}"
    );
    // The main link's one slot is untouched.
    assert!(matches!(
        &offer_from(&mut h, PeerId(200))[..],
        [HostAction::Answer { .. }]
    ));
    // One at the prompt gives up: another may wait.
    h.visitor_ended(PeerId(1));
    assert!(matches!(
        &offer_through(&mut h, PeerId(101), 8)[..],
        [HostAction::Answer { .. }]
    ));
}

#[test]
fn a_guest_in_its_handshake_when_its_link_is_withdrawn_is_told_so_not_left_to_time_out() {
    // Regression: a `get` whose link was withdrawn mid-handshake waited for
    // the handshake to time out and exited 5 ("could not be reached")
    // instead of 6 ("withdrawn").
    let (mut h, mut g) = challenged_through_link_5();
    h.end_link(
        LinkId(5),
        LinkEnd::Withdrawn {
            words: "The sharer withdrew this link.".into(),
        },
    );
    let told = host_actions(&mut h);
    assert!(told.contains(&HostAction::Refused {
        peer: PeerId(1),
        why: Refusal::LinkEnded(LinkEnd::Withdrawn {
            words: "The sharer withdrew this link.".into()
        })
    }));
    to_guest(PeerId(1), &told, &mut g);
    let failed = guest_actions(&mut g);
    assert!(
        matches!(&failed[..], [GuestAction::Fail(GuestFailure::LinkWithdrawn(w))] if w == "The sharer withdrew this link."),
        "{failed:?}"
    );
    // Admitted and still connecting: told too.
    let mut h = host(8);
    h.add_link(LinkId(5), &ShareSecret::from_bytes([8; 16]))
        .unwrap();
    assert!(matches!(
        &offer_through(&mut h, PeerId(2), 8)[..],
        [HostAction::Answer { .. }]
    ));
    h.end_link(
        LinkId(5),
        LinkEnd::Expired {
            words: "expired".into(),
        },
    );
    assert!(host_actions(&mut h).iter().any(|a| matches!(
        a,
        HostAction::Refused {
            peer: PeerId(2),
            ..
        }
    )));
}

#[test]
fn a_visitor_the_shell_cannot_serve_is_told_why_and_frees_its_slot() {
    // Regression: after a restart where a scoped link's folder had become a
    // symlink, its visitor was told "this link is not valid" instead of why.
    let mut h = host(1);
    let (a, mut g) = offer_and_guest(&mut h, PeerId(1));
    assert!(matches!(&a[..], [HostAction::Answer { .. }]));
    h.turn_away(
        PeerId(1),
        "The folder this link shows is not there any more.".into(),
    );
    let told = host_actions(&mut h);
    to_guest(PeerId(1), &told, &mut g);
    let failed = guest_actions(&mut g);
    assert!(
        matches!(&failed[..], [GuestAction::Fail(GuestFailure::LinkWithdrawn(w))] if w.contains("not there any more")),
        "{failed:?}"
    );
    assert_eq!(h.admitted(), 0);
    assert!(matches!(
        &offer_from(&mut h, PeerId(2))[..],
        [HostAction::Answer { .. }]
    ));
}
