//! The sharing side of a share, sans IO: the peer of [`crate::visit::Visit`].
//! One [`Share`] holds the share's links and their rights, the relay
//! handshake of every guest ([`HostSignaling`]), the visitors and their slots,
//! the password exchange, and ends visitors when their link is withdrawn,
//! expires, or they are sent away. The shell carries its IO and serves each
//! visitor's session ([`crate::sender::SenderSession`], one per visitor, in
//! a task of its own so sessions run side by side).
//!
//! # IO
//!
//! | the shell tells the share                    | the share tells the shell (`poll_output`)          |
//! | --- | --- |
//! | `relay_text(now, text)`, `relay_closed(now)`, `relay_opened(now)`, `relay_failed(now)` | `Relay(text)` to send; `ConnectRelay` (then `relay_opened`/`relay_failed`); `CloseRelay` |
//! |                                              | `Registered { ice_servers, again }`, `IceServers`, `Failed(why)` (before the room was ever held: sharing cannot start) |
//! | `answer_made(peer, sdp)`, `local_candidate(peer, c)` | `Answer { peer, offer, link }` (start its handshake), `AddCandidate` |
//! | `cannot_show(peer, words)` (its link's view is gone) | the guest is told, sealed, and forgotten |
//! | `link_opened(now, peer, source)`             |                                                    |
//! | `lane(peer)` (its first frame joined a session) |                                                 |
//! | `first_frame(now, peer, frame)`, `frame(now, peer, frame)` (before its session) | `Transmit { peer, frame }`, `CloseLink { peer }`, `StartSession { peer, link, first }` |
//! | `password_checked(now, job, right)`          | `CheckPassword { job, hash, attempt }` (Argon2 off the loop) |
//! | `add_link`, `revoke`, `kick` (the control socket) | `EndVisitor { peer, code, words }` (say why, end); `KeepLinks` |
//! | `visitor_ended(now, peer, figures)`          | `News(...)` for the user                           |
//! | `handle_timeout(now)`                        | `Timeout(at)`: prompts that waited too long, expiries, the relay's next attempt |
//!
//! Time is [`Now`]: a monotonic clock for deadlines, the wall clock (unix
//! seconds) for expiries and the times people read.
//!
//! # Decided here
//!
//! - A visitor is a visitor (takes one of `max_visitors` slots) only once its
//!   session starts: at a password prompt it is one of
//!   [`crate::signaling::MAX_AT_PROMPT`], for [`ShareConfig::answer_within_ms`].
//! - A password guess is counted before it is checked ([`PasswordGate`], per
//!   address and per link); a right one is given back.
//! - A withdrawn or expired link: its key ends first (no guest of it gets
//!   further, those in their handshake are told), then each of its visitors
//!   is told why, whatever its phase. An expiry ends the link at its second.
//! - The relay connection, lost, is tried again on [`Backoff`]'s schedule,
//!   never given up; visitors already connected stay.
//!
//! Bounds: the links' ([`links`]), the signaling machine's, one visitor per
//! admitted guest (the slots bound them), one held frame per visitor at a prompt.

pub mod ledger;
pub mod links;
pub mod rights;
pub mod visitors;

use std::collections::{BTreeMap, HashMap, VecDeque};

use linkfs_proto::signal::{IceServer, PeerId};
use linkfs_proto::{GoodbyeCode, ReceiverToSender, SenderToReceiver};

use crate::Millis;
use crate::backoff::{Backoff, BackoffConfig, Retry};
use crate::link::{ShareLink, ShareSecret};
use crate::password_gate::{GuessSource, PasswordGate};
use crate::signaling::{
    HostAction, HostFailure, HostSignaling, IceCandidate, LinkEnd, LinkId, Refusal, TooManyLinks,
};
use links::{EndedWhy, LinkRecord, Links, LinksError, UploadRights};
use rights::{RightsError, Shown};
use visitors::{Phase, Visitor};

/// What a visitor at a password prompt is told of a wrong one.
pub const WRONG_PASSWORD: &str = "The password is wrong.";
/// What a visitor sent away is told.
pub const SENT_AWAY: &str =
    "The sharer disconnected you. Open the link again if they let you back.";
/// What a visitor is told when what its link shows cannot be shown.
pub const SCOPE_GONE: &str =
    "The folder this link shows is not there any more. Ask the sharer for a new link.";

/// The time as the shell reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Now {
    /// A monotonic clock (deadlines).
    pub mono: Millis,
    /// The wall clock, unix seconds (expiries, the times people read).
    pub unix: u64,
}

#[derive(Debug, Clone)]
pub struct ShareConfig {
    /// Visitors served at once; more are turned away.
    pub max_visitors: usize,
    /// How long a visitor at a password prompt may take to answer.
    pub answer_within_ms: u64,
    /// When to try the relay again after losing it (never given up).
    pub relay_backoff: BackoffConfig,
}

impl Default for ShareConfig {
    fn default() -> Self {
        ShareConfig {
            max_visitors: 32,
            answer_within_ms: 60_000,
            relay_backoff: BackoffConfig {
                give_up_after_ms: None,
                ..BackoffConfig::default()
            },
        }
    }
}

/// The share's word for the shell. See the module docs.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShareOutput {
    /// Send this text to the relay.
    Relay(String),
    /// Connect to the relay again (answer `relay_opened` or `relay_failed`).
    ConnectRelay,
    /// Close the relay connection (registering again failed).
    CloseRelay,
    /// The relay holds the room (`again`: after it was lost).
    Registered {
        ice_servers: Vec<IceServer>,
        again: bool,
    },
    /// The relay's ICE servers changed (fresh TURN credentials).
    IceServers(Vec<IceServer>),
    /// The relay refused the room before it ever held it: sharing cannot start.
    Failed(HostFailure),
    /// Start this guest's handshake: answer `offer` (its link: `link`).
    Answer {
        peer: PeerId,
        offer: String,
        link: LinkId,
    },
    AddCandidate {
        peer: PeerId,
        candidate: IceCandidate,
    },
    /// A frame for a visitor before its session (the prompt, a goodbye).
    Transmit {
        peer: PeerId,
        frame: Vec<u8>,
    },
    /// Close a visitor's data link, after what was transmitted.
    CloseLink {
        peer: PeerId,
    },
    /// Check a password guess (Argon2, off the loop), then `password_checked(job, ..)`.
    CheckPassword {
        job: u64,
        hash: String,
        attempt: String,
    },
    /// Serve `peer`'s session of `link`; `first`: a frame it sent already.
    StartSession {
        peer: PeerId,
        link: LinkId,
        first: Option<Vec<u8>>,
    },
    /// End `peer` (its link withdrawn or expired, or it was sent away),
    /// telling it `words` if it has a data link.
    EndVisitor {
        peer: PeerId,
        code: GoodbyeCode,
        words: String,
    },
    /// The links changed: keep them ([`Share::links`]).
    KeepLinks,
    News(ShareNews),
    /// Call `handle_timeout` then (`None`: nothing is due).
    Timeout(Option<Millis>),
}

/// What the sharer's person is told.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShareNews {
    /// A visitor's session started (`who`: "visitor 4 (link 1, for Ann)").
    VisitorConnected {
        peer: PeerId,
        visitors: usize,
        who: String,
    },
    /// A change to the links, in words.
    Links(String),
    /// Something worth telling that does not stop the share.
    Warning(String),
    /// A guest was turned away (for the log).
    Refused { peer: PeerId, why: Refusal },
}

/// What a visitor's session did, when it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Figures {
    /// Bytes of files served to it.
    pub served: u64,
    /// What its link took so far (landed bytes, files, received bytes), if it takes files.
    pub uploads: Option<(u64, u64, u64)>,
}

/// A visitor that left: how to name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Departed {
    pub who: String,
    pub link: LinkId,
    /// Visitors whose session runs, now.
    pub visitors: usize,
}

/// A link to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLink {
    pub label: String,
    /// Unix seconds.
    pub expires: Option<u64>,
    /// What it shows (its paths checked on the disk by the shell).
    pub shown: Shown,
    pub upload: Option<UploadRights>,
    /// Its password's Argon2id hash.
    pub password_hash: Option<String>,
    /// Asked for on `linkfs share`'s command line.
    pub started: bool,
}

/// Why a link cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddLinkError {
    #[error(transparent)]
    Rights(#[from] RightsError),
    #[error(transparent)]
    Links(#[from] LinksError),
    #[error(transparent)]
    Keys(#[from] TooManyLinks),
}

/// Why a visitor cannot be sent away.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("there is no visitor {0} now (`linkfs visitors` lists them)")]
pub struct NoSuchVisitor(pub u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RelayState {
    Open,
    /// Lost; the next attempt at this time.
    Waiting(Option<Millis>),
    Connecting,
}

/// See the module docs.
#[derive(Debug)]
pub struct Share {
    config: ShareConfig,
    signaling: HostSignaling,
    main: ShareLink,
    links: Links,
    gates: HashMap<LinkId, PasswordGate>,
    visitors: BTreeMap<PeerId, Visitor>,
    /// Bytes served to the main link's visitors who left, since the start.
    main_served: u64,
    relay: RelayState,
    backoff: Backoff,
    ever_registered: bool,
    next_job: u64,
    now: Now,
    queue: VecDeque<ShareOutput>,
}

impl Share {
    /// The share of `main` (the room `sharer` holds), with the links kept
    /// from earlier runs, over a relay connection the shell has opened.
    /// `seed`: fresh random bytes.
    pub fn new(
        now: Now,
        main: &ShareLink,
        sharer: linkfs_proto::sharer_key::SharerKey,
        links: Links,
        config: ShareConfig,
        seed: [u8; 16],
    ) -> Share {
        let mut signaling = HostSignaling::new(main, sharer, config.max_visitors, seed);
        let mut gates = HashMap::new();
        for l in links.all() {
            let Some(secret) = l.secret() else { continue };
            if signaling.add_link(l.id, &secret).is_err() {
                continue;
            }
            signaling.set_asks_password(l.id, l.password.is_some());
            if l.password.is_some() {
                gates.insert(l.id, PasswordGate::new(now.mono));
            }
            if let Some(end) = l.end() {
                signaling.end_link(l.id, end);
            }
        }
        let backoff = Backoff::new(
            config.relay_backoff,
            u64::from_le_bytes([
                seed[0], seed[1], seed[2], seed[3], seed[4], seed[5], seed[6], seed[7],
            ]),
        );
        Share {
            config,
            signaling,
            main: main.clone(),
            links,
            gates,
            visitors: BTreeMap::new(),
            main_served: 0,
            relay: RelayState::Open,
            backoff,
            ever_registered: false,
            next_job: 1,
            now,
            queue: VecDeque::new(),
        }
    }

    // ----- what the shell asks -------------------------------------------

    pub fn links(&self) -> &Links {
        &self.links
    }

    /// The main link (the one printed when no rights were asked for).
    pub fn main_link(&self) -> &ShareLink {
        &self.main
    }

    /// `record`'s link as people open it.
    pub fn url_of(&self, record: &LinkRecord) -> String {
        record.secret().map_or_else(String::new, |secret| {
            ShareLink {
                secret,
                ..self.main.clone()
            }
            .to_url()
        })
    }

    /// The link `peer` came through, while it is a visitor.
    pub fn link_of(&self, peer: PeerId) -> Option<LinkId> {
        self.visitors.get(&peer).map(|v| v.link)
    }

    /// Visitors whose session runs.
    pub fn connected(&self) -> usize {
        self.signaling.connected()
    }

    /// Visitors of `link` (any phase, lanes aside).
    pub fn visitors_of(&self, link: LinkId) -> usize {
        self.visitors
            .values()
            .filter(|v| v.link == link && v.counts())
            .count()
    }

    /// Every visitor (lanes aside): its number, link, since (unix seconds), session running.
    pub fn visitors(&self) -> impl Iterator<Item = (PeerId, LinkId, u64, bool)> + '_ {
        self.visitors
            .iter()
            .filter(|(_, v)| v.counts())
            .map(|(p, v)| (*p, v.link, v.since, v.serving()))
    }

    /// Bytes served to the visitors of `link` who left (the main link's: since the start).
    pub fn served_by_departed(&self, link: LinkId) -> u64 {
        if link == LinkId(0) {
            self.main_served
        } else {
            self.links.get(link).map_or(0, |l| l.served)
        }
    }

    /// "main" or the link's label.
    pub fn label_of(&self, link: LinkId) -> String {
        if link == LinkId(0) {
            return "main".into();
        }
        self.links
            .get(link)
            .map(|l| l.label.clone())
            .unwrap_or_default()
    }

    /// "visitor 4 (link 1, for Ann)".
    pub fn who(&self, peer: PeerId) -> String {
        match self.visitors.get(&peer) {
            Some(v) if v.link == LinkId(0) => format!("visitor {} (main link)", peer.0),
            Some(v) => {
                let label = self.label_of(v.link);
                if label.is_empty() {
                    format!("visitor {} (link {})", peer.0, v.link)
                } else {
                    format!("visitor {} (link {}, {label})", peer.0, v.link)
                }
            }
            None => format!("visitor {}", peer.0),
        }
    }

    pub fn poll_output(&mut self) -> ShareOutput {
        self.drain_signaling();
        if let Some(out) = self.queue.pop_front() {
            return out;
        }
        ShareOutput::Timeout(self.next_deadline())
    }

    // ----- the relay -----------------------------------------------------

    pub fn relay_text(&mut self, now: Now, text: &str) {
        self.at(now);
        self.signaling.handle_relay_text(text);
    }

    pub fn relay_closed(&mut self, now: Now) {
        self.at(now);
        if self.relay != RelayState::Open {
            return;
        }
        self.signaling.relay_closed();
        self.relay_lost();
    }

    pub fn relay_opened(&mut self, now: Now) {
        self.at(now);
        self.relay = RelayState::Open;
        self.signaling.relay_reopened();
    }

    pub fn relay_failed(&mut self, now: Now) {
        self.at(now);
        self.relay_lost();
    }

    fn relay_lost(&mut self) {
        let at = match self.backoff.failed(self.now.mono) {
            Retry::At(t) => Some(t),
            Retry::GiveUp => None,
        };
        self.relay = RelayState::Waiting(at);
    }

    // ----- a visitor's handshake and first frames ------------------------

    pub fn answer_made(&mut self, peer: PeerId, sdp: String) {
        self.signaling.answer_made(peer, sdp);
    }

    pub fn local_candidate(&mut self, peer: PeerId, candidate: IceCandidate) {
        self.signaling.local_candidate(peer, candidate);
    }

    /// What `peer`'s link shows cannot be shown now: it is told `words`,
    /// sealed, and forgotten (the shell started nothing for it).
    pub fn cannot_show(&mut self, peer: PeerId, words: String) {
        self.signaling.turn_away(peer, words);
        self.visitors.remove(&peer);
    }

    /// `peer`'s data link opened; `source`: where its packets come from.
    pub fn link_opened(&mut self, now: Now, peer: PeerId, source: GuessSource) {
        self.at(now);
        if let Some(v) = self.visitors.get_mut(&peer)
            && matches!(v.phase, Phase::Connecting)
        {
            v.source = source;
            v.phase = Phase::Opened;
        }
    }

    /// `peer`'s first frame joined another visitor's session: it is a lane.
    pub fn lane(&mut self, peer: PeerId) {
        if let Some(v) = self.visitors.get_mut(&peer) {
            v.phase = Phase::Lane;
        }
        self.signaling.visitor_is_lane(peer);
    }

    /// `peer`'s first frame (not a lane's): its session starts, or its link
    /// asks a password first (the frame is kept for its session).
    pub fn first_frame(&mut self, now: Now, peer: PeerId, frame: Vec<u8>) {
        self.at(now);
        let Some(v) = self.visitors.get_mut(&peer) else {
            return;
        };
        if !matches!(v.phase, Phase::Opened) {
            return;
        }
        if self.gates.contains_key(&v.link) {
            let held = matches!(
                ReceiverToSender::decode(&frame),
                Ok(ReceiverToSender::Hello(_))
            )
            .then_some(frame);
            v.phase = Phase::AtPrompt {
                until: Millis(now.mono.0 + self.config.answer_within_ms),
                held,
            };
            self.queue.push_back(ShareOutput::Transmit {
                peer,
                frame: SenderToReceiver::PasswordNeeded.encode(),
            });
            return;
        }
        self.start_session(peer, Some(frame));
    }

    /// A frame from `peer` before its session (at its password prompt).
    pub fn frame(&mut self, now: Now, peer: PeerId, frame: &[u8]) {
        self.at(now);
        let Some(v) = self.visitors.get_mut(&peer) else {
            return;
        };
        let Phase::AtPrompt { held, .. } = &mut v.phase else {
            return;
        };
        let attempt = match ReceiverToSender::decode(frame) {
            Ok(ReceiverToSender::Password(p)) => p,
            Ok(ReceiverToSender::Hello(_)) if held.is_none() => {
                *held = Some(frame.to_vec());
                return;
            }
            _ => return,
        };
        let held = held.take();
        let (link, source) = (v.link, v.source);
        let Some(gate) = self.gates.get_mut(&link) else {
            return;
        };
        match gate.take(now.mono, source) {
            Err(wait_ms) => {
                let words = too_many(wait_ms);
                self.send_away(peer, GoodbyeCode::TooManyTries, &words);
            }
            Ok(ticket) => {
                let job = self.next_job;
                self.next_job += 1;
                let hash = self
                    .links
                    .get(link)
                    .and_then(|l| l.password.clone())
                    .unwrap_or_default();
                if let Some(v) = self.visitors.get_mut(&peer) {
                    v.phase = Phase::Checking { job, ticket, held };
                }
                self.queue
                    .push_back(ShareOutput::CheckPassword { job, hash, attempt });
            }
        }
    }

    /// Argon2's verdict on job `job`.
    pub fn password_checked(&mut self, now: Now, job: u64, right: bool) {
        self.at(now);
        let Some((peer, v)) = self
            .visitors
            .iter_mut()
            .find(|(_, v)| matches!(&v.phase, Phase::Checking { job: j, .. } if *j == job))
        else {
            return;
        };
        let peer = *peer;
        let Phase::Checking { ticket, held, .. } = std::mem::replace(&mut v.phase, Phase::Opened)
        else {
            return;
        };
        if let Some(gate) = self.gates.get_mut(&v.link) {
            gate.settle(ticket, right);
        }
        if right {
            self.start_session(peer, held);
        } else {
            self.send_away(peer, GoodbyeCode::WrongPassword, WRONG_PASSWORD);
        }
    }

    /// Past any prompt: `peer` takes a visitor slot and its session starts,
    /// or it is told the share is full.
    fn start_session(&mut self, peer: PeerId, first: Option<Vec<u8>>) {
        if !self.signaling.visitor_passed(peer) {
            let words = self.signaling.full_words();
            self.send_away(peer, GoodbyeCode::SentAway, &words);
            return;
        }
        let Some(v) = self.visitors.get_mut(&peer) else {
            return;
        };
        v.phase = Phase::Serving;
        let link = v.link;
        self.signaling.visitor_connected(peer);
        self.queue
            .push_back(ShareOutput::StartSession { peer, link, first });
        let news = ShareNews::VisitorConnected {
            peer,
            visitors: self.signaling.connected(),
            who: self.who(peer),
        };
        self.queue.push_back(ShareOutput::News(news));
    }

    /// Tells `peer` (before its session) why it goes, and closes its link.
    fn send_away(&mut self, peer: PeerId, code: GoodbyeCode, words: &str) {
        if let Some(v) = self.visitors.get_mut(&peer) {
            v.phase = Phase::Leaving;
        }
        let frame = SenderToReceiver::Goodbye(linkfs_proto::Goodbye {
            code,
            message: words.to_owned(),
        })
        .encode();
        self.queue.push_back(ShareOutput::Transmit { peer, frame });
        self.queue.push_back(ShareOutput::CloseLink { peer });
    }

    /// `peer`'s task ended (however): its slot is free. What it did is
    /// counted with its link; how to name it is returned.
    pub fn visitor_ended(&mut self, now: Now, peer: PeerId, figures: Figures) -> Departed {
        self.at(now);
        let who = self.who(peer);
        self.signaling.visitor_ended(peer);
        let link = self.visitors.remove(&peer).map_or(LinkId(0), |v| v.link);
        if link == LinkId(0) {
            self.main_served = self.main_served.saturating_add(figures.served);
        } else {
            self.links.add_served(link, figures.served);
            if let (Some((landed, files, received)), Some(rights)) =
                (figures.uploads, self.links.get(link).and_then(|l| l.upload))
            {
                let rights = UploadRights {
                    added_bytes: landed,
                    added_files: files,
                    received_bytes: received,
                    ..rights
                };
                self.links.set_upload(link, Some(rights));
            }
            self.queue.push_back(ShareOutput::KeepLinks);
        }
        Departed {
            who,
            link,
            visitors: self.signaling.connected(),
        }
    }

    // ----- the links (the control socket) ---------------------------------

    /// Makes a link with `secret` (told to the signaling machine at once).
    pub fn add_link(
        &mut self,
        now: Now,
        new: NewLink,
        secret: ShareSecret,
    ) -> Result<LinkRecord, AddLinkError> {
        self.at(now);
        rights::check_new(
            &new.shown,
            new.upload.is_some(),
            new.password_hash.as_deref(),
        )?;
        let (scope, selection) = new.shown.as_record();
        let id = self
            .links
            .add(&new.label, new.expires, &scope, secret.clone(), now.unix)?
            .id;
        if let Err(e) = self.signaling.add_link(id, &secret) {
            let _ = self.links.revoke(id, now.unix);
            return Err(e.into());
        }
        if !selection.is_empty() {
            self.links.set_selection(id, selection);
        }
        if let Some(upload) = new.upload {
            let upload = UploadRights {
                added_bytes: 0,
                added_files: 0,
                received_bytes: 0,
                ..upload
            };
            self.links.set_upload(id, Some(upload));
        }
        if new.started {
            self.links.mark_started(id);
        }
        if let Some(hash) = new.password_hash {
            self.links.set_password(id, hash);
            self.gates.insert(id, PasswordGate::new(now.mono));
            self.signaling.set_asks_password(id, true);
        }
        self.queue.push_back(ShareOutput::KeepLinks);
        Ok(self.links.get(id).cloned().expect("just added"))
    }

    /// Withdraws link `id`: its visitors are told and ended. How many.
    pub fn revoke(&mut self, now: Now, id: LinkId) -> Result<usize, LinksError> {
        self.at(now);
        self.links.revoke(id, now.unix)?;
        let gone = self.visitors_of(id);
        self.end_link(id);
        self.queue.push_back(ShareOutput::KeepLinks);
        Ok(gone)
    }

    /// Sends visitor `peer` away ("The sharer disconnected you.").
    pub fn kick(&mut self, now: Now, peer: PeerId) -> Result<(), NoSuchVisitor> {
        self.at(now);
        match self.visitors.get(&peer) {
            Some(v) if v.counts() => {
                self.end_visitor(peer, GoodbyeCode::SentAway, SENT_AWAY.to_owned());
                Ok(())
            }
            _ => Err(NoSuchVisitor(peer.0)),
        }
    }

    /// The link `id` ended (withdrawn or expired): its key first, then its visitors.
    fn end_link(&mut self, id: LinkId) {
        let Some(record) = self.links.get(id) else {
            return;
        };
        let Some(end) = record.end() else { return };
        let code = match record.ended.map(|e| e.why) {
            Some(EndedWhy::Expired) => GoodbyeCode::LinkExpired,
            _ => GoodbyeCode::LinkWithdrawn,
        };
        let words = match &end {
            LinkEnd::Withdrawn { words } | LinkEnd::Expired { words } => words.clone(),
        };
        self.signaling.end_link(id, end);
        let theirs: Vec<PeerId> = self
            .visitors
            .iter()
            .filter(|(_, v)| v.link == id && v.counts())
            .map(|(p, _)| *p)
            .collect();
        for peer in theirs {
            self.end_visitor(peer, code, words.clone());
        }
    }

    fn end_visitor(&mut self, peer: PeerId, code: GoodbyeCode, words: String) {
        if let Some(v) = self.visitors.get_mut(&peer) {
            if matches!(v.phase, Phase::Leaving) {
                return;
            }
            v.phase = Phase::Leaving;
        }
        self.queue
            .push_back(ShareOutput::EndVisitor { peer, code, words });
    }

    // ----- time -----------------------------------------------------------

    pub fn handle_timeout(&mut self, now: Now) {
        self.at(now);
        // Prompts left unanswered: the link closes (the visitor connects again when its person answers).
        let waited: Vec<PeerId> = self
            .visitors
            .iter()
            .filter(|(_, v)| matches!(v.phase, Phase::AtPrompt { until, .. } if until <= now.mono))
            .map(|(p, _)| *p)
            .collect();
        for peer in waited {
            if let Some(v) = self.visitors.get_mut(&peer) {
                v.phase = Phase::Leaving;
            }
            self.queue.push_back(ShareOutput::CloseLink { peer });
        }
        // Links whose time ran out.
        let due = self.links.expire_due(now.unix);
        if !due.is_empty() {
            for id in &due {
                self.end_link(*id);
                self.queue
                    .push_back(ShareOutput::News(ShareNews::Links(format!(
                        "link {id} expired; its visitors were disconnected"
                    ))));
            }
            self.queue.push_back(ShareOutput::KeepLinks);
        }
        // The relay's next attempt.
        if let RelayState::Waiting(Some(at)) = self.relay
            && at <= now.mono
        {
            self.relay = RelayState::Connecting;
            self.queue.push_back(ShareOutput::ConnectRelay);
        }
    }

    fn next_deadline(&self) -> Option<Millis> {
        let prompt = self
            .visitors
            .values()
            .filter_map(|v| match v.phase {
                Phase::AtPrompt { until, .. } => Some(until),
                _ => None,
            })
            .min();
        let expiry = self.links.next_expiry().map(|at| {
            // The wall clock's second, on the monotonic clock.
            Millis(
                self.now
                    .mono
                    .0
                    .saturating_add(at.saturating_sub(self.now.unix).saturating_mul(1000)),
            )
        });
        let relay = match self.relay {
            RelayState::Waiting(at) => at,
            _ => None,
        };
        [prompt, expiry, relay].into_iter().flatten().min()
    }

    fn at(&mut self, now: Now) {
        self.now = Now {
            mono: self.now.mono.max(now.mono),
            unix: now.unix.max(self.now.unix),
        };
    }

    // ----- the signaling machine's actions --------------------------------

    fn drain_signaling(&mut self) {
        while let Some(action) = self.signaling.poll_action() {
            let out = match action {
                HostAction::Send(text) => ShareOutput::Relay(text),
                HostAction::Registered { ice_servers } => {
                    let again = std::mem::replace(&mut self.ever_registered, true);
                    if again {
                        self.backoff.succeeded();
                        self.queue.push_back(ShareOutput::News(ShareNews::Warning(
                            "the relay holds the share again; new visitors can join".into(),
                        )));
                    }
                    ShareOutput::Registered { ice_servers, again }
                }
                HostAction::IceServers { ice_servers } => ShareOutput::IceServers(ice_servers),
                HostAction::Fail(why) if !self.ever_registered => ShareOutput::Failed(why),
                HostAction::Fail(_) => {
                    // Registering again failed (the relay may still hold the old
                    // connection's room for a moment): try again later.
                    self.signaling.relay_closed();
                    self.relay_lost();
                    ShareOutput::CloseRelay
                }
                HostAction::Answer { peer, offer, link } => {
                    self.visitors
                        .insert(peer, Visitor::new(link, self.now.unix));
                    ShareOutput::Answer { peer, offer, link }
                }
                HostAction::AddCandidate { peer, candidate } => {
                    ShareOutput::AddCandidate { peer, candidate }
                }
                HostAction::Refused { peer, why } => {
                    ShareOutput::News(ShareNews::Refused { peer, why })
                }
                HostAction::Warning(w) => ShareOutput::News(ShareNews::Warning(w)),
            };
            self.queue.push_back(out);
        }
    }
}

/// The words for too many wrong guesses.
pub fn too_many(wait_ms: u64) -> String {
    format!(
        "Too many wrong passwords for this link lately. Try again in {} s.",
        wait_ms.div_ceil(1000).max(1)
    )
}
