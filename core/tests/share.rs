//! The sharing side's machine ([`Share`]) in simulated time: guests knock
//! through a relay modelled in memory (real [`GuestSignaling`] machines), and
//! the tests play the shell: they open data links, send first frames, check
//! passwords, end tasks and move the clocks.

use std::collections::HashMap;

use linkfs_core::share::links::{Links, UploadRights};
use linkfs_core::share::rights::Shown;
use linkfs_core::share::{
    Figures, NewLink, Now, Share, ShareConfig, ShareNews, ShareOutput, WRONG_PASSWORD,
};
use linkfs_core::{
    GuessSource, GuestAction, GuestSignaling, LinkId, Millis, ShareLink, ShareSecret,
};
use linkfs_proto::sharer_key::SharerKey;
use linkfs_proto::signal::{ClientToRelay, MAX_SIGNAL_MESSAGE, PeerId, RelayToClient};
use linkfs_proto::{GoodbyeCode, Hello, PROTOCOL_VERSION, ReceiverToSender, SenderToReceiver};

/// 2026-11-26 12:00 UTC.
const UNIX: u64 = 1_795_694_400;

struct World {
    share: Share,
    now: Now,
    main: ShareLink,
    guests: HashMap<PeerId, GuestSignaling>,
    /// Every output the share gave, in order (relay texts routed, not kept).
    seen: Vec<ShareOutput>,
}

fn sharer() -> SharerKey {
    SharerKey::from_seed([9; 32])
}

fn world(max_visitors: usize) -> World {
    let main = ShareLink::of_sharer("http://127.0.0.1:1", &sharer(), [7; 16]);
    let now = Now {
        mono: Millis(1_000),
        unix: UNIX,
    };
    let config = ShareConfig {
        max_visitors,
        ..ShareConfig::default()
    };
    let share = Share::new(now, &main, sharer(), Links::default(), config, [3; 16]);
    let mut w = World {
        share,
        now,
        main,
        guests: HashMap::new(),
        seen: Vec::new(),
    };
    let welcome = RelayToClient::Welcome {
        peer: PeerId::HOST,
        ice_servers: Vec::new(),
        max_message: MAX_SIGNAL_MESSAGE,
    };
    w.share
        .relay_text(now, &serde_json::to_string(&welcome).unwrap());
    let out = w.drain();
    assert!(
        out.iter()
            .any(|o| matches!(o, ShareOutput::Registered { again: false, .. })),
        "{out:?}"
    );
    w
}

impl World {
    /// The share's outputs until it says to wait; relay texts go to the guests.
    fn drain(&mut self) -> Vec<ShareOutput> {
        let mut out = Vec::new();
        for _ in 0..10_000 {
            match self.share.poll_output() {
                ShareOutput::Timeout(_) => return out,
                ShareOutput::Relay(text) => {
                    let ClientToRelay::Msg { to, data } = serde_json::from_str(&text).unwrap()
                    else {
                        panic!("the host sends messages only: {text}")
                    };
                    if let Some(g) = self.guests.get_mut(&to) {
                        g.handle_relay(RelayToClient::Msg {
                            from: PeerId::HOST,
                            data,
                        });
                    }
                }
                o => {
                    self.seen.push(clone_of(&o));
                    out.push(o);
                }
            }
        }
        panic!("the share never said to wait");
    }

    /// The share's next deadline.
    fn deadline(&mut self) -> Option<Millis> {
        loop {
            if let ShareOutput::Timeout(t) = self.share.poll_output() {
                return t;
            }
        }
    }

    /// What a guest sends goes to the share.
    fn deliver_guest(&mut self, peer: PeerId) {
        let actions: Vec<GuestAction> = {
            let g = self.guests.get_mut(&peer).unwrap();
            std::iter::from_fn(|| g.poll_action()).collect()
        };
        for a in actions {
            if let GuestAction::Send(text) = a {
                let ClientToRelay::Msg { data, .. } = serde_json::from_str(&text).unwrap() else {
                    panic!("{text}")
                };
                let msg = RelayToClient::Msg { from: peer, data };
                self.share
                    .relay_text(self.now, &serde_json::to_string(&msg).unwrap());
            }
        }
    }

    /// A guest of `link` as `peer` knocks and offers: the share's outputs.
    fn offer(&mut self, peer: PeerId, link: &ShareLink) -> Vec<ShareOutput> {
        let mut g = GuestSignaling::new(link, [peer.0 as u8; 16]);
        g.handle_relay(RelayToClient::Welcome {
            peer,
            ice_servers: Vec::new(),
            max_message: MAX_SIGNAL_MESSAGE,
        });
        self.guests.insert(peer, g);
        self.deliver_guest(peer); // its knock
        self.drain(); // the challenge reaches it
        self.guests
            .get_mut(&peer)
            .unwrap()
            .offer_made(format!("offer {}", peer.0));
        self.deliver_guest(peer);
        self.drain()
    }

    /// A guest that gets as far as its first frame: the outputs after it.
    fn visit(&mut self, peer: PeerId, link: &ShareLink) -> Vec<ShareOutput> {
        let own = GuessSource(Some([
            10,
            0,
            0,
            peer.0 as u8,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ]));
        self.visit_from(peer, link, own)
    }

    /// The same, its data link coming from `source`.
    fn visit_from(
        &mut self,
        peer: PeerId,
        link: &ShareLink,
        source: GuessSource,
    ) -> Vec<ShareOutput> {
        let out = self.offer(peer, link);
        assert!(
            out.iter()
                .any(|o| matches!(o, ShareOutput::Answer { peer: p, .. } if *p == peer)),
            "{out:?}"
        );
        self.share.answer_made(peer, "answer".into());
        self.share.link_opened(self.now, peer, source);
        self.share.first_frame(self.now, peer, hello());
        self.drain()
    }

    fn link(&mut self, new: NewLink, secret: u8) -> (LinkId, ShareLink) {
        let secret = ShareSecret::from_bytes([secret; 16]);
        let record = self.share.add_link(self.now, new, secret.clone()).unwrap();
        self.drain();
        (
            record.id,
            ShareLink {
                secret,
                ..self.main.clone()
            },
        )
    }

    fn advance(&mut self, ms: u64) {
        self.now.mono = Millis(self.now.mono.0 + ms);
        self.now.unix += ms / 1000;
        self.share.handle_timeout(self.now);
    }
}

fn clone_of(o: &ShareOutput) -> ShareOutput {
    match o {
        ShareOutput::StartSession { peer, link, first } => ShareOutput::StartSession {
            peer: *peer,
            link: *link,
            first: first.clone(),
        },
        ShareOutput::EndVisitor { peer, code, words } => ShareOutput::EndVisitor {
            peer: *peer,
            code: *code,
            words: words.clone(),
        },
        ShareOutput::CloseLink { peer } => ShareOutput::CloseLink { peer: *peer },
        _ => ShareOutput::KeepLinks,
    }
}

fn hello() -> Vec<u8> {
    ReceiverToSender::Hello(Hello {
        version: PROTOCOL_VERSION,
        resume: None,
    })
    .encode()
}

fn password(p: &str) -> Vec<u8> {
    ReceiverToSender::Password(p.into()).encode()
}

fn plain(label: &str) -> NewLink {
    NewLink {
        label: label.into(),
        expires: None,
        shown: Shown::Whole,
        upload: None,
        password_hash: None,
        started: false,
    }
}

fn started(out: &[ShareOutput], peer: PeerId) -> bool {
    out.iter()
        .any(|o| matches!(o, ShareOutput::StartSession { peer: p, .. } if *p == peer))
}

fn told(out: &[ShareOutput], peer: PeerId) -> Option<(GoodbyeCode, String)> {
    out.iter().find_map(|o| match o {
        ShareOutput::EndVisitor {
            peer: p,
            code,
            words,
        } if *p == peer => Some((*code, words.clone())),
        ShareOutput::Transmit { peer: p, frame } if *p == peer => {
            match SenderToReceiver::decode(frame) {
                Ok(SenderToReceiver::Goodbye(g)) => Some((g.code, g.message)),
                _ => None,
            }
        }
        _ => None,
    })
}

#[test]
fn a_visitor_of_the_main_link_gets_its_session_at_its_first_frame() {
    let mut w = world(4);
    let main = w.main.clone();
    let out = w.visit(PeerId(1), &main);
    assert!(started(&out, PeerId(1)), "{out:?}");
    assert!(out.iter().any(|o| matches!(
        o,
        ShareOutput::News(ShareNews::VisitorConnected { visitors: 1, who, .. }) if who == "visitor 1 (main link)"
    )));
    assert_eq!(w.share.connected(), 1);
    let gone = w.share.visitor_ended(
        w.now,
        PeerId(1),
        Figures {
            served: 5,
            uploads: None,
        },
    );
    assert_eq!((gone.visitors, gone.link), (0, LinkId(0)));
    assert_eq!(w.share.served_by_departed(LinkId(0)), 5);
}

#[test]
fn a_link_expires_at_its_second_and_only_its_visitors_are_ended() {
    let mut w = world(8);
    let (soon, soon_link) = w.link(
        NewLink {
            expires: Some(UNIX + 90),
            ..plain("soon")
        },
        11,
    );
    let (_, later_link) = w.link(plain("later"), 12);
    assert!(started(&w.visit(PeerId(1), &soon_link), PeerId(1)));
    assert!(started(&w.visit(PeerId(2), &later_link), PeerId(2)));
    // The share asks to be woken at the expiry's second, not later.
    assert_eq!(w.deadline(), Some(Millis(w.now.mono.0 + 90_000)));
    w.advance(89_000);
    assert!(
        told(&w.drain(), PeerId(1)).is_none(),
        "ended before its time"
    );
    w.advance(1_000);
    let out = w.drain();
    let (code, words) = told(&out, PeerId(1)).expect("its visitor is ended at its second");
    assert_eq!(code, GoodbyeCode::LinkExpired);
    assert!(words.contains("expired"), "{words}");
    assert!(
        told(&out, PeerId(2)).is_none(),
        "another link's visitor was ended"
    );
    assert!(out.iter().any(|o| matches!(o, ShareOutput::News(ShareNews::Links(w)) if w.contains(&format!("link {soon} expired")))));
    assert!(out.iter().any(|o| matches!(o, ShareOutput::KeepLinks)));
}

#[test]
fn a_revoke_ends_that_links_visitors_within_one_poll_and_leaves_another_links_reading() {
    let mut w = world(8);
    let (ann, ann_link) = w.link(plain("for Ann"), 11);
    let (_, bob_link) = w.link(plain("for Bob"), 12);
    assert!(started(&w.visit(PeerId(1), &ann_link), PeerId(1)));
    assert!(started(&w.visit(PeerId(2), &bob_link), PeerId(2)));
    assert_eq!(w.share.revoke(w.now, ann), Ok(1));
    let out = w.drain();
    let (code, words) = told(&out, PeerId(1)).expect("Ann's visitor is told at once");
    assert_eq!(code, GoodbyeCode::LinkWithdrawn);
    assert!(words.contains("withdrawn"), "{words}");
    assert!(told(&out, PeerId(2)).is_none());
    // A new guest of the withdrawn link gets no further.
    let again = w.offer(PeerId(3), &ann_link);
    assert!(
        !again
            .iter()
            .any(|o| matches!(o, ShareOutput::Answer { .. })),
        "{again:?}"
    );
}

#[test]
fn a_kick_sends_one_visitor_away_and_its_link_still_admits() {
    let mut w = world(8);
    let main = w.main.clone();
    assert!(started(&w.visit(PeerId(1), &main), PeerId(1)));
    w.share.kick(w.now, PeerId(1)).unwrap();
    let (code, words) = told(&w.drain(), PeerId(1)).expect("told");
    assert_eq!(code, GoodbyeCode::SentAway);
    assert!(words.contains("disconnected you"), "{words}");
    assert!(w.share.kick(w.now, PeerId(9)).is_err());
    w.share.visitor_ended(w.now, PeerId(1), Figures::default());
    assert!(started(&w.visit(PeerId(2), &main), PeerId(2)));
}

fn locked(w: &mut World) -> ShareLink {
    w.link(
        NewLink {
            password_hash: Some("$argon2id$stand-in".into()),
            ..plain("locked")
        },
        20,
    )
    .1
}

#[test]
fn twelve_guesses_at_once_five_are_checked_and_a_right_one_opens_its_session() {
    let mut w = world(32);
    let link = locked(&mut w);
    // Twelve visitors from one address at the prompt.
    let one_address = GuessSource(Some([10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]));
    for p in 1..=12 {
        let out = w.visit_from(PeerId(p), &link, one_address);
        assert!(!started(&out, PeerId(p)), "a session before the password");
        assert!(out.iter().any(|o| matches!(o, ShareOutput::Transmit { frame, .. } if SenderToReceiver::decode(frame) == Ok(SenderToReceiver::PasswordNeeded))));
    }
    // They all guess before any check is done.
    let mut jobs = Vec::new();
    let mut waited = 0;
    for p in 1..=12 {
        w.share.frame(w.now, PeerId(p), &password("guess"));
        for o in w.drain() {
            match o {
                ShareOutput::CheckPassword { job, .. } => jobs.push((p, job)),
                ShareOutput::Transmit { frame, .. } => {
                    if let Ok(SenderToReceiver::Goodbye(g)) = SenderToReceiver::decode(&frame) {
                        assert_eq!(g.code, GoodbyeCode::TooManyTries);
                        assert!(g.message.contains("Try again in 12 s"), "{}", g.message);
                        waited += 1;
                    }
                }
                _ => {}
            }
        }
    }
    // Twelve guesses from one address: five go to Argon2, seven wait.
    assert_eq!((jobs.len(), waited), (5, 7));
    for (p, job) in &jobs[..4] {
        w.share.password_checked(w.now, *job, false);
        let (code, words) = told(&w.drain(), PeerId(*p)).expect("told");
        assert_eq!(
            (code, words.as_str()),
            (GoodbyeCode::WrongPassword, WRONG_PASSWORD)
        );
    }
    // The fifth was right: its session starts with the Hello it sent first.
    let (p, job) = jobs[4];
    w.share.password_checked(w.now, job, true);
    let out = w.drain();
    assert!(out.iter().any(|o| matches!(o, ShareOutput::StartSession { peer, first: Some(f), .. } if *peer == PeerId(p) && *f == hello())), "{out:?}");
}

#[test]
fn visitors_at_a_prompt_hold_no_slot_and_a_prompt_left_unanswered_closes_after_a_minute() {
    let mut w = world(2);
    let link = locked(&mut w);
    for p in 1..=3 {
        w.visit(PeerId(p), &link);
    }
    // The main link still admits its two.
    let main = w.main.clone();
    assert!(started(&w.visit(PeerId(10), &main), PeerId(10)));
    assert!(started(&w.visit(PeerId(11), &main), PeerId(11)));
    // A right password into the full share: told so.
    w.share.frame(w.now, PeerId(1), &password("x"));
    let job = w
        .drain()
        .into_iter()
        .find_map(|o| match o {
            ShareOutput::CheckPassword { job, .. } => Some(job),
            _ => None,
        })
        .unwrap();
    w.share.password_checked(w.now, job, true);
    let (_, words) = told(&w.drain(), PeerId(1)).expect("told");
    assert!(words.contains("2 visitors"), "{words}");
    // A minute at the prompt: closed.
    w.advance(59_000);
    assert!(
        !w.drain()
            .iter()
            .any(|o| matches!(o, ShareOutput::CloseLink { peer } if *peer == PeerId(2)))
    );
    w.advance(1_000);
    let out = w.drain();
    assert!(
        out.iter()
            .any(|o| matches!(o, ShareOutput::CloseLink { peer } if *peer == PeerId(2))),
        "{out:?}"
    );
}

#[test]
fn a_lost_relay_is_tried_again_on_the_backoff_and_visitors_stay() {
    let mut w = world(4);
    let main = w.main.clone();
    assert!(started(&w.visit(PeerId(1), &main), PeerId(1)));
    w.share.relay_closed(w.now);
    let _ = w.drain();
    let at = w.deadline().expect("an attempt is scheduled");
    w.advance(at.0 - w.now.mono.0);
    assert!(
        w.drain()
            .iter()
            .any(|o| matches!(o, ShareOutput::ConnectRelay))
    );
    w.share.relay_failed(w.now);
    let next = w.deadline().expect("and another after a failure");
    assert!(next > w.now.mono);
    assert_eq!(w.share.connected(), 1, "the connected visitor stayed");
}

#[test]
fn a_link_that_selects_paths_cannot_take_files() {
    let mut w = world(4);
    let e = w
        .share
        .add_link(
            w.now,
            NewLink {
                shown: Shown::Selection(vec!["a".into(), "b".into()]),
                upload: Some(UploadRights::default()),
                ..plain("x")
            },
            ShareSecret::from_bytes([5; 16]),
        )
        .unwrap_err();
    assert!(e.to_string().contains("cannot take files"), "{e}");
}
