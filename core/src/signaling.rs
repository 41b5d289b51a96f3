//! The signaling handshake, sans-IO: how a guest (a browser or a native
//! receiver) and the host (the sharer) trade sealed offers, answers and ICE
//! candidates through the relay until their data link opens.
//!
//! ```text
//! guest machine                         relay                         host machine
//!   <- welcome {peer N, ice_servers}     |             welcome -> Registered {ice_servers}
//!   MakeOffer -> shell: offer_made(sdp)  |  joined {N} (nothing yet)
//!   Send(seal_N(knock)) ---------------> | ----> the knock opens with link L's key:
//!   (the offer waits) <----------------- | <------------ Send(seal_N(challenge)) with L's key
//!   Send(seal_N,c(offer)) -------------> | ------------------------> Answer {peer, offer}
//!                                        |     shell: answer_made(peer, sdp)
//!   ApplyAnswer <----------------------- | <------------------------- Send(seal(answer))
//!   shell: answer_applied()              |
//!   local_candidate -> Send(seal(c)) --> | --> AddCandidate {peer, c}
//!   AddCandidate <---------------------- | <-- Send(seal(c)) <- local_candidate(peer, c)
//!   channel_open() -> CloseRelay         |     visitor_connected(peer) ... visitor_ended(peer)
//! ```
//!
//! Both machines take relay messages ([`RelayToClient`], or the raw text) and
//! local events in, and hand [`GuestAction`]s / [`HostAction`]s out through
//! `poll_action`. The shell does only the IO: the relay socket and the WebRTC
//! peer connection. The native guest (`linkfs mount/ls/get`), the native host
//! (`linkfs share`) and the browser all drive these two machines.
//!
//! Every payload between guest and host is sealed with the key derived from
//! the link's secret ([`crate::seal`]); nonces come from one [`NonceSequence`]
//! per machine. A share may have several links (one room, a secret each,
//! [`HostSignaling::add_link`]): the guest's first message, its knock, tells
//! the host which one by the key it opens with, so the relay never learns
//! which link a guest holds, nor how many there are. A knock that opens with
//! no key gets a challenge sealed with a key no one has (the guest fails as
//! an invalid link after the same one message every guest gets); one that
//! opens with a withdrawn or expired link's key gets that reason, sealed
//! ([`LinkEnd`]). Each is also *bound* to the guest: its peer number and, after
//! the first message, a challenge the host made fresh for that guest. The
//! host's first message to a guest is that challenge; the guest sends its
//! offer (and everything after) only once it has it, bound to it. So an offer
//! captured on the way (by the relay, or anyone who can watch it) and replayed
//! from another connection does not open: it neither takes a visitor slot nor
//! makes the host send anything to the original visitor's addresses.
//! A challenge that does not open means the guest's secret is wrong:
//! [`GuestFailure::InvalidLink`]. The host never answers a message that does
//! not open: such a guest costs it one challenge.
//!
//! # Bounds (each tested in this module)
//!
//! | what | bound |
//! | --- | --- |
//! | a relay message (text) | [`MAX_SIGNAL_MESSAGE`] bytes; longer ones are ignored |
//! | remote candidates a guest keeps until the answer is applied | [`EARLY_CANDIDATE_LIMIT`] |
//! | local candidates a guest keeps until its offer is sent | [`EARLY_CANDIDATE_LIMIT`] |
//! | candidates the host takes from one visitor | [`CANDIDATES_PER_VISITOR`] |
//! | visitors admitted and not yet ended | [`HostSignaling::new`]'s `max_visitors` |
//! | visitors of a password link not yet past its prompt | [`MAX_AT_PROMPT`], apart from `max_visitors`: they take a visitor slot only once the shell says they passed ([`HostSignaling::visitor_passed`]) |
//! | refusals | one per guest; the last [`REFUSALS_REMEMBERED`] guests are remembered |
//! | challenges | one per guest; those of the last [`CHALLENGES_KEPT`] guests not yet admitted are kept |

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use linkfs_proto::signal::{
    ClientToRelay, IceServer, MAX_SIGNAL_MESSAGE, PeerId, RejectCode, RelayErrorCode,
    RelayToClient, SignalPayload,
};

use linkfs_proto::sharer_key::{SharerKey, answer_message, challenge_message, verify_for_room};

use crate::link::{ShareLink, ShareSecret};
use crate::seal::{Direction, NonceSequence, SignalKey};

/// Most remote candidates a guest keeps before the answer is applied (and
/// local ones before its offer is sent): 64.
pub const EARLY_CANDIDATE_LIMIT: usize = 64;
/// Most candidates the host takes from one visitor: 64. More are dropped.
pub const CANDIDATES_PER_VISITOR: usize = 64;
/// Guests whose refusal the host remembers (so each is refused once): 4,096.
pub const REFUSALS_REMEMBERED: usize = 4096;
/// Challenges the host keeps for guests not yet admitted: 4,096 (peer numbers
/// only grow; the oldest go first, and such a guest must connect again).
pub const CHALLENGES_KEPT: usize = 4096;
/// Visitors of password links at their prompt at once, share-wide: 16. They
/// hold no visitor slot, so people at a prompt never turn others away.
pub const MAX_AT_PROMPT: usize = 16;

/// A challenge: 16 bytes the host made for one guest.
type Challenge = [u8; 16];

/// What a message between the host and guest `peer` is bound to (see the module docs).
fn binding(peer: PeerId, challenge: Option<&Challenge>) -> Vec<u8> {
    let mut b = peer.0.to_le_bytes().to_vec();
    if let Some(c) = challenge {
        b.extend_from_slice(c);
    }
    b
}

fn decode_challenge(nonce: &str) -> Option<Challenge> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(nonce)
        .ok()?
        .try_into()
        .ok()
}

/// One ICE candidate as it travels through signaling: the fields of
/// [`SignalPayload::Candidate`], in the browser's `RTCIceCandidateInit` shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IceCandidate {
    /// The `candidate:...` attribute line.
    pub candidate: String,
    /// The media id it belongs to; `None` when unknown.
    pub sdp_mid: Option<String>,
    /// The m-line index it belongs to; `None` when unknown.
    pub sdp_mline_index: Option<u16>,
}

impl IceCandidate {
    /// The signaling payload carrying this candidate.
    pub fn into_payload(self) -> SignalPayload {
        SignalPayload::Candidate {
            candidate: self.candidate,
            sdp_mid: self.sdp_mid,
            sdp_mline_index: self.sdp_mline_index,
        }
    }

    /// The candidate in a signaling payload, or `None` if the payload is something else.
    pub fn from_payload(payload: &SignalPayload) -> Option<Self> {
        match payload {
            SignalPayload::Candidate {
                candidate,
                sdp_mid,
                sdp_mline_index,
            } => Some(Self {
                candidate: candidate.clone(),
                sdp_mid: sdp_mid.clone(),
                sdp_mline_index: *sdp_mline_index,
            }),
            _ => None,
        }
    }

    /// The end-of-candidates marker (an empty candidate line): nothing to add.
    pub fn is_end_marker(&self) -> bool {
        self.candidate.trim().is_empty()
    }
}

/// Parses one relay text frame; `None` for anything too long or not understood
/// (a newer relay may send messages this version does not know: they are skipped).
pub fn parse_relay_text(text: &str) -> Option<RelayToClient> {
    if text.len() > MAX_SIGNAL_MESSAGE {
        return None;
    }
    serde_json::from_str(text).ok()
}

fn relay_text(to: PeerId, data: String) -> String {
    // Serializing this plain enum of a number and a string cannot fail.
    serde_json::to_string(&ClientToRelay::Msg { to, data }).unwrap_or_default()
}

// ---------------------------------------------------------------------------
// Guest
// ---------------------------------------------------------------------------

/// What the guest's shell must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GuestAction {
    /// Send this text frame to the relay.
    Send(String),
    /// The relay let us in: create the peer connection with these ICE servers
    /// and the data channel, make the offer, then call [`GuestSignaling::offer_made`].
    MakeOffer { ice_servers: Vec<IceServer> },
    /// Set the sharer's answer as the remote description, then call
    /// [`GuestSignaling::answer_applied`].
    ApplyAnswer { sdp: String },
    /// Add one of the sharer's candidates (only ever after the answer is
    /// applied). One that cannot be used concerns only itself: log and go on.
    AddCandidate(IceCandidate),
    /// The data link is open: close the relay socket (frees the relay's slot).
    CloseRelay,
    /// The attempt failed; nothing more will come.
    Fail(GuestFailure),
}

/// Why a guest could not reach the sharer, in words for the person holding the link.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GuestFailure {
    /// The sharer's messages do not open with this link's secret.
    #[error("this link is not valid: its secret does not match the share")]
    InvalidLink,
    /// No sharer in the room, or the sharer left before the link opened.
    #[error("the share is not there any more: the sharer stopped sharing, or the link is old")]
    SharerGone,
    /// The sharer turned this guest away (for example: too many visitors).
    #[error("the sharer turned the connection down: {0}")]
    Refused(String),
    /// The relay refused something; its message says what.
    #[error("the relay says: {message}")]
    Relay {
        code: RelayErrorCode,
        message: String,
    },
    /// A challenge or answer that opened with the secret but was not signed by
    /// the key the room belongs to: someone who knows the link posed as the sharer.
    #[error(
        "the answer at this link did not come from its sharer (someone else who knows the link answered); nothing was connected"
    )]
    NotTheSharer,
    /// The relay socket closed before the sharer's answer arrived.
    #[error("lost the connection to the relay before the sharer answered")]
    RelayLost,
    /// The sharer withdrew this link (the sharer's words).
    #[error("{0}")]
    LinkWithdrawn(String),
    /// This link's time ran out (the sharer's words, with when).
    #[error("{0}")]
    LinkExpired(String),
}

impl GuestFailure {
    /// What kind of failure this is, for exit codes and the page's state.
    pub fn kind(&self) -> crate::FailureKind {
        match self {
            GuestFailure::InvalidLink => crate::FailureKind::InvalidLink,
            GuestFailure::SharerGone => crate::FailureKind::SharerGone,
            GuestFailure::RelayLost => crate::FailureKind::Unreachable,
            GuestFailure::LinkWithdrawn(_) | GuestFailure::LinkExpired(_) => {
                crate::FailureKind::LinkEnded
            }
            GuestFailure::Refused(_) | GuestFailure::Relay { .. } | GuestFailure::NotTheSharer => {
                crate::FailureKind::Other
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GuestStage {
    AwaitingWelcome,
    MakingOffer,
    AwaitingAnswer,
    ApplyingAnswer,
    Answered,
    Open,
    Failed,
}

/// The guest's side of the handshake. See the module docs.
#[derive(Debug)]
pub struct GuestSignaling {
    room: String,
    key: SignalKey,
    nonces: NonceSequence,
    stage: GuestStage,
    /// This guest's peer number, from the relay's welcome.
    me: PeerId,
    /// The host's challenge for this guest, once it came.
    challenge: Option<Challenge>,
    /// The offer, made but waiting for the challenge.
    offer: Option<String>,
    /// The sharer's public key, from its signed challenge.
    sharer: Option<String>,
    relay_open: bool,
    /// Remote candidates waiting for the answer to be applied.
    early_remote: Vec<IceCandidate>,
    /// Local candidates waiting for the offer to be sent.
    early_local: Vec<IceCandidate>,
    actions: VecDeque<GuestAction>,
}

impl GuestSignaling {
    /// A guest for `link`; `nonce_seed` must be fresh random bytes.
    pub fn new(link: &ShareLink, nonce_seed: [u8; 16]) -> Self {
        GuestSignaling {
            room: link.room.clone(),
            key: SignalKey::from_secret(&link.secret),
            nonces: NonceSequence::new(nonce_seed),
            stage: GuestStage::AwaitingWelcome,
            me: PeerId::HOST,
            challenge: None,
            offer: None,
            sharer: None,
            relay_open: true,
            early_remote: Vec::new(),
            early_local: Vec::new(),
            actions: VecDeque::new(),
        }
    }

    /// The next thing to do, if any.
    pub fn poll_action(&mut self) -> Option<GuestAction> {
        self.actions.pop_front()
    }

    /// The data link is open (or the attempt failed): nothing more to negotiate.
    pub fn is_done(&self) -> bool {
        matches!(self.stage, GuestStage::Open | GuestStage::Failed)
    }

    fn fail(&mut self, failure: GuestFailure) {
        if self.is_done() {
            return;
        }
        self.stage = GuestStage::Failed;
        self.early_remote.clear();
        self.early_local.clear();
        self.actions.push_back(GuestAction::Fail(failure));
    }

    fn send_sealed(&mut self, payload: &SignalPayload) {
        if !self.relay_open {
            return;
        }
        let data = self.key.seal_payload_bound(
            &self.room,
            Direction::GuestToHost,
            &binding(self.me, self.challenge.as_ref()),
            self.nonces.next_nonce(),
            payload,
        );
        self.actions
            .push_back(GuestAction::Send(relay_text(PeerId::HOST, data)));
    }

    /// One text frame from the relay. Frames that are too long or not
    /// understood are skipped.
    pub fn handle_relay_text(&mut self, text: &str) {
        if let Some(msg) = parse_relay_text(text) {
            self.handle_relay(msg);
        }
    }

    /// One message from the relay.
    pub fn handle_relay(&mut self, msg: RelayToClient) {
        if self.is_done() {
            return;
        }
        match msg {
            RelayToClient::Welcome {
                peer, ice_servers, ..
            } if self.stage == GuestStage::AwaitingWelcome => {
                self.me = peer;
                self.stage = GuestStage::MakingOffer;
                self.actions
                    .push_back(GuestAction::MakeOffer { ice_servers });
                // First, so the host knows which of its links this is.
                self.send_sealed(&SignalPayload::Knock { pad: String::new() });
            }
            RelayToClient::Msg { from, data } if from == PeerId::HOST => {
                self.handle_host_message(&data)
            }
            RelayToClient::Left { peer } if peer == PeerId::HOST => {
                self.fail(GuestFailure::SharerGone)
            }
            RelayToClient::Error { code, message } => match code {
                RelayErrorCode::NoSuchRoom | RelayErrorCode::UnknownPeer => {
                    self.fail(GuestFailure::SharerGone)
                }
                _ => self.fail(GuestFailure::Relay { code, message }),
            },
            _ => {}
        }
    }

    fn handle_host_message(&mut self, data: &str) {
        let dir = Direction::HostToGuest;
        let bound = binding(self.me, self.challenge.as_ref());
        match self.key.open_payload_bound(&self.room, dir, &bound, data) {
            Ok(SignalPayload::Challenge { nonce, key, sig }) if self.challenge.is_none() => {
                let Some(challenge) = decode_challenge(&nonce) else {
                    return self.fail(GuestFailure::InvalidLink);
                };
                let signed = challenge_message(&self.room, self.me.0, &challenge);
                if !verify_for_room(&self.room, &key, &signed, &sig) {
                    return self.fail(GuestFailure::NotTheSharer);
                }
                self.sharer = Some(key);
                self.challenge = Some(challenge);
                if let Some(sdp) = self.offer.take() {
                    self.send_offer(sdp);
                }
            }
            Ok(payload) => self.handle_payload(payload),
            Err(_) => {
                // A challenge sent twice is bound to the peer only: not an error.
                let repeated = self.challenge.is_some()
                    && self
                        .key
                        .open_payload_bound(&self.room, dir, &binding(self.me, None), data)
                        .is_ok();
                if !repeated {
                    self.fail(GuestFailure::InvalidLink);
                }
            }
        }
    }

    fn send_offer(&mut self, sdp: String) {
        self.stage = GuestStage::AwaitingAnswer;
        self.send_sealed(&SignalPayload::Offer { sdp });
        for c in std::mem::take(&mut self.early_local) {
            self.send_sealed(&c.into_payload());
        }
    }

    fn handle_payload(&mut self, payload: SignalPayload) {
        match payload {
            SignalPayload::Answer { sdp, sig } if self.stage == GuestStage::AwaitingAnswer => {
                let (Some(key), Some(challenge)) = (&self.sharer, &self.challenge) else {
                    return;
                };
                let signed = answer_message(&self.room, self.me.0, challenge, &sdp);
                if !verify_for_room(&self.room, key, &signed, &sig) {
                    return self.fail(GuestFailure::NotTheSharer);
                }
                self.stage = GuestStage::ApplyingAnswer;
                self.actions.push_back(GuestAction::ApplyAnswer { sdp });
            }
            ref c @ SignalPayload::Candidate { .. } => {
                let Some(c) = IceCandidate::from_payload(c) else {
                    return;
                };
                if c.is_end_marker() {
                    return;
                }
                if self.stage == GuestStage::Answered {
                    self.actions.push_back(GuestAction::AddCandidate(c));
                } else if self.early_remote.len() < EARLY_CANDIDATE_LIMIT {
                    self.early_remote.push(c);
                }
            }
            SignalPayload::Reject { reason, code } => self.fail(match code {
                Some(RejectCode::LinkWithdrawn) => GuestFailure::LinkWithdrawn(reason),
                Some(RejectCode::LinkExpired) => GuestFailure::LinkExpired(reason),
                _ => GuestFailure::Refused(reason),
            }),
            // A second answer, an offer from the host: not part of this handshake.
            _ => {}
        }
    }

    /// The shell made the offer (after [`GuestAction::MakeOffer`]): it goes to
    /// the host, followed by any local candidates gathered meanwhile, as soon
    /// as the host's challenge is here.
    pub fn offer_made(&mut self, sdp: String) {
        if self.stage != GuestStage::MakingOffer || self.offer.is_some() {
            return;
        }
        if self.challenge.is_some() {
            self.send_offer(sdp);
        } else {
            self.offer = Some(sdp);
        }
    }

    /// The shell applied the answer: candidates that came early are released.
    pub fn answer_applied(&mut self) {
        if self.stage != GuestStage::ApplyingAnswer {
            return;
        }
        self.stage = GuestStage::Answered;
        for c in std::mem::take(&mut self.early_remote) {
            self.actions.push_back(GuestAction::AddCandidate(c));
        }
    }

    /// A candidate gathered here, for the host.
    pub fn local_candidate(&mut self, candidate: IceCandidate) {
        if self.is_done() || candidate.is_end_marker() {
            return;
        }
        if self.stage == GuestStage::MakingOffer || self.stage == GuestStage::AwaitingWelcome {
            if self.early_local.len() < EARLY_CANDIDATE_LIMIT {
                self.early_local.push(candidate);
            }
            return;
        }
        self.send_sealed(&candidate.into_payload());
    }

    /// The data channel opened: signaling is over.
    pub fn channel_open(&mut self) {
        if self.is_done() {
            return;
        }
        self.stage = GuestStage::Open;
        self.early_remote.clear();
        self.early_local.clear();
        if self.relay_open {
            self.relay_open = false;
            self.actions.push_back(GuestAction::CloseRelay);
        }
    }

    /// The relay socket closed. Before the answer arrived nothing can complete
    /// the handshake; after it, ICE may still finish with what was traded.
    pub fn relay_closed(&mut self) {
        self.relay_open = false;
        if matches!(
            self.stage,
            GuestStage::AwaitingWelcome | GuestStage::MakingOffer | GuestStage::AwaitingAnswer
        ) {
            self.fail(GuestFailure::RelayLost);
        }
    }
}

// ---------------------------------------------------------------------------
// Host
// ---------------------------------------------------------------------------

/// Names one of a share's links on the sharer's side. Never on the wire:
/// a guest's link is known by the key its knock opens with.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct LinkId(pub u32);

impl std::fmt::Display for LinkId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A link's number as people write it (`linkfs link revoke 3`).
impl std::str::FromStr for LinkId {
    type Err = std::num::ParseIntError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.trim().parse().map(LinkId)
    }
}

/// Why a link no longer admits anyone, with the words its guests are told.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkEnd {
    Withdrawn { words: String },
    Expired { words: String },
}

/// A host holds [`MAX_LINK_KEYS`] link keys already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a share has at most {MAX_LINK_KEYS} links (live and ended ones kept)")]
pub struct TooManyLinks;

/// Most link keys a host tries a knock with (live links and ended ones it
/// still answers with their reason): 256.
pub const MAX_LINK_KEYS: usize = 256;

/// Why the host turned a guest away.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// Every visitor slot is taken.
    Full { max: usize },
    /// [`MAX_AT_PROMPT`] visitors of password links were at their prompt.
    AtPrompt { max: usize },
    /// The guest's link was withdrawn or has expired.
    LinkEnded(LinkEnd),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Full { max } => write!(f, "{max} visitors are connected, the most allowed"),
            Refusal::AtPrompt { max } => write!(
                f,
                "{max} visitors are at a password prompt, the most allowed"
            ),
            Refusal::LinkEnded(LinkEnd::Withdrawn { .. }) => write!(f, "its link was withdrawn"),
            Refusal::LinkEnded(LinkEnd::Expired { .. }) => write!(f, "its link has expired"),
        }
    }
}

/// Why the relay would not hold the room.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostFailure {
    #[error("the relay refused the share: {message}")]
    Refused {
        code: RelayErrorCode,
        message: String,
    },
}

/// What the host's shell must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostAction {
    /// Send this text frame to the relay.
    Send(String),
    /// The relay holds the room: the link can be announced.
    Registered { ice_servers: Vec<IceServer> },
    /// Fresh ICE servers from the relay (short-lived TURN credentials renewed,
    /// or a new relay connection's): use them for visitors from now on.
    IceServers { ice_servers: Vec<IceServer> },
    /// A visitor was admitted (its slot is held) through `link`: answer its
    /// offer, then call [`HostSignaling::answer_made`]; call
    /// [`HostSignaling::visitor_ended`] when it is gone, whatever happened.
    Answer {
        peer: PeerId,
        offer: String,
        link: LinkId,
    },
    /// A candidate of an admitted visitor's, for its connection.
    AddCandidate {
        peer: PeerId,
        candidate: IceCandidate,
    },
    /// A guest was turned away (it was told, sealed). For the log.
    Refused { peer: PeerId, why: Refusal },
    /// Something worth telling the user that does not stop the share.
    Warning(String),
    /// The relay would not hold the room: the share cannot start.
    Fail(HostFailure),
}

#[derive(Debug)]
struct Slot {
    candidates: usize,
    connected: bool,
    challenge: Challenge,
    link: LinkId,
    /// Its link asks a password, and the shell has not said it passed: it
    /// counts against [`MAX_AT_PROMPT`], not `max_visitors`.
    at_prompt: bool,
}

/// One link's key, and whether it still admits anyone.
#[derive(Debug)]
struct LinkKey {
    id: LinkId,
    key: SignalKey,
    ended: Option<LinkEnd>,
    /// Its visitors answer a password before they are visitors.
    asks_password: bool,
}

/// The host's side of the handshake for every guest of one room. See the module docs.
#[derive(Debug)]
pub struct HostSignaling {
    room: String,
    /// Every link's key, the first link first.
    links: Vec<LinkKey>,
    /// The sharer's key: it signs challenges and answers.
    sharer: SharerKey,
    nonces: NonceSequence,
    max_visitors: usize,
    registered: bool,
    relay_open: bool,
    slots: BTreeMap<PeerId, Slot>,
    /// Admitted connections that turned out to be lanes of a visitor's link:
    /// they hold no visitor slot (the sharer admits at most its offer of
    /// lanes per session, so they are bounded by the slots).
    lanes: BTreeSet<PeerId>,
    /// Challenges sent to guests not yet admitted, and their links.
    challenges: BTreeMap<u32, (Challenge, LinkId)>,
    refused: BTreeSet<u32>,
    actions: VecDeque<HostAction>,
}

impl HostSignaling {
    /// The host of `link`'s room (which `sharer` holds: see
    /// [`ShareLink::of_sharer`]), admitting at most `max_visitors` at once;
    /// `link` is its link [`LinkId`]`(0)` (more: [`add_link`](Self::add_link)).
    /// `nonce_seed` must be fresh random bytes.
    pub fn new(
        link: &ShareLink,
        sharer: SharerKey,
        max_visitors: usize,
        nonce_seed: [u8; 16],
    ) -> Self {
        HostSignaling {
            room: link.room.clone(),
            links: vec![LinkKey {
                id: LinkId(0),
                key: SignalKey::from_secret(&link.secret),
                ended: None,
                asks_password: false,
            }],
            sharer,
            nonces: NonceSequence::new(nonce_seed),
            max_visitors: max_visitors.max(1),
            registered: false,
            relay_open: true,
            slots: BTreeMap::new(),
            lanes: BTreeSet::new(),
            challenges: BTreeMap::new(),
            refused: BTreeSet::new(),
            actions: VecDeque::new(),
        }
    }

    pub fn poll_action(&mut self) -> Option<HostAction> {
        self.actions.pop_front()
    }

    /// Visitors admitted and not yet ended (connecting or connected), past
    /// any password prompt.
    pub fn admitted(&self) -> usize {
        self.slots.values().filter(|s| !s.at_prompt).count()
    }

    /// Visitors of password links at their prompt now.
    pub fn at_prompt(&self) -> usize {
        self.slots.values().filter(|s| s.at_prompt).count()
    }

    /// Visitors whose data link is open, past any password prompt.
    pub fn connected(&self) -> usize {
        self.slots
            .values()
            .filter(|s| s.connected && !s.at_prompt)
            .count()
    }

    pub fn is_registered(&self) -> bool {
        self.registered
    }

    /// Admits guests of another link of the same room (its own secret)
    /// from now on, under `id`. Another secret under an `id` already known
    /// replaces it. Refused past [`MAX_LINK_KEYS`].
    pub fn add_link(&mut self, id: LinkId, secret: &ShareSecret) -> Result<(), TooManyLinks> {
        let key = SignalKey::from_secret(secret);
        if let Some(l) = self.links.iter_mut().find(|l| l.id == id) {
            (l.key, l.ended) = (key, None);
            return Ok(());
        }
        if self.links.len() >= MAX_LINK_KEYS {
            return Err(TooManyLinks);
        }
        self.links.push(LinkKey {
            id,
            key,
            ended: None,
            asks_password: false,
        });
        Ok(())
    }

    /// Whether link `id`'s visitors answer a password first: until the shell
    /// says one passed ([`visitor_passed`](Self::visitor_passed)) it holds no
    /// visitor slot, only one of the [`MAX_AT_PROMPT`] at a prompt.
    pub fn set_asks_password(&mut self, id: LinkId, asks: bool) {
        if let Some(l) = self.links.iter_mut().find(|l| l.id == id) {
            l.asks_password = asks;
        }
    }

    /// `peer` gave its link's password: it takes a visitor slot now, if one
    /// is free. `false`: the share is full, and `peer` is to be told so (its
    /// shell ends it; [`visitor_ended`](Self::visitor_ended) frees its place).
    pub fn visitor_passed(&mut self, peer: PeerId) -> bool {
        let admitted = self.admitted();
        let Some(slot) = self.slots.get_mut(&peer) else {
            return false;
        };
        if !slot.at_prompt {
            return true;
        }
        if admitted >= self.max_visitors {
            return false;
        }
        slot.at_prompt = false;
        true
    }

    /// What a visitor who passed its prompt into a full share is told.
    pub fn full_words(&self) -> String {
        full_words(self.max_visitors)
    }

    /// Link `id` admits no one from now on: its guests that knock are told
    /// `why` (sealed with its key). Visitors already admitted are the
    /// shell's to end.
    pub fn end_link(&mut self, id: LinkId, why: LinkEnd) {
        self.end_link_telling(id, why, true);
    }

    /// See [`end_link`](Self::end_link); `tell`: guests of it still in their
    /// handshake (a challenge, or admitted and not yet connected) are told
    /// why, sealed, so they end with the link's reason rather than a timeout.
    fn end_link_telling(&mut self, id: LinkId, why: LinkEnd, tell: bool) {
        if let Some(l) = self.links.iter_mut().find(|l| l.id == id) {
            l.ended = Some(why.clone());
        }
        let mut waiting: Vec<PeerId> = self
            .challenges
            .iter()
            .filter(|(_, (_, link))| *link == id)
            .map(|(peer, _)| PeerId(*peer))
            .collect();
        waiting.extend(
            self.slots
                .iter()
                .filter(|(_, s)| s.link == id && !s.connected)
                .map(|(peer, _)| *peer),
        );
        let (reason, code) = match &why {
            LinkEnd::Withdrawn { words } => (words.clone(), RejectCode::LinkWithdrawn),
            LinkEnd::Expired { words } => (words.clone(), RejectCode::LinkExpired),
        };
        for peer in waiting {
            if tell {
                let payload = SignalPayload::Reject {
                    reason: reason.clone(),
                    code: Some(code),
                };
                self.send_sealed(peer, &payload);
                self.remember_refused(peer);
                self.actions.push_back(HostAction::Refused {
                    peer,
                    why: Refusal::LinkEnded(why.clone()),
                });
            }
            // Guests of it still in their handshake get no further.
            self.challenges.remove(&peer.0);
        }
    }

    /// Forgets link `id` altogether: its guests are told the link is not valid.
    pub fn forget_link(&mut self, id: LinkId) {
        self.end_link_telling(
            id,
            LinkEnd::Withdrawn {
                words: String::new(),
            },
            false,
        );
        self.links.retain(|l| l.id != id);
    }

    /// The link of an admitted visitor.
    pub fn link_of(&self, peer: PeerId) -> Option<LinkId> {
        self.slots.get(&peer).map(|s| s.link)
    }

    /// The challenge of guest `peer`, if one was sent, and its link.
    fn challenge_of(&self, peer: PeerId) -> Option<(Challenge, LinkId)> {
        self.slots
            .get(&peer)
            .map(|s| (s.challenge, s.link))
            .or_else(|| self.challenges.get(&peer.0).copied())
    }

    fn key_of(&self, link: LinkId) -> Option<&SignalKey> {
        self.links.iter().find(|l| l.id == link).map(|l| &l.key)
    }

    fn send_sealed(&mut self, to: PeerId, payload: &SignalPayload) {
        if !self.relay_open {
            return;
        }
        let Some((challenge, link)) = self.challenge_of(to) else {
            return;
        };
        let bound = binding(to, Some(&challenge));
        let nonce = self.nonces.next_nonce();
        let Some(key) = self.key_of(link) else {
            return;
        };
        let data =
            key.seal_payload_bound(&self.room, Direction::HostToGuest, &bound, nonce, payload);
        self.actions
            .push_back(HostAction::Send(relay_text(to, data)));
    }

    /// A guest with no challenge yet sent `data`: its knock, if it opens
    /// with one of the links' keys. A live link's guest gets a challenge
    /// sealed with that key; an ended link's is told why; anything else gets
    /// a challenge sealed with a key no one has (it fails as an invalid
    /// link, after the same one message every guest gets).
    fn knocked(&mut self, peer: PeerId, data: &str) {
        if peer == PeerId::HOST
            || !self.relay_open
            || self.slots.contains_key(&peer)
            || self.challenges.contains_key(&peer.0)
            || self.refused.contains(&peer.0)
        {
            return;
        }
        let bound = binding(peer, None);
        let opened = self.links.iter().find_map(|l| {
            match l
                .key
                .open_payload_bound(&self.room, Direction::GuestToHost, &bound, data)
            {
                Ok(SignalPayload::Knock { .. }) => Some((l.id, l.ended.clone())),
                _ => None,
            }
        });
        match opened {
            Some((link, None)) => self.challenge(peer, Some(link)),
            Some((link, Some(why))) => {
                self.remember_refused(peer);
                let (reason, code) = match &why {
                    LinkEnd::Withdrawn { words } => (words.clone(), RejectCode::LinkWithdrawn),
                    LinkEnd::Expired { words } => (words.clone(), RejectCode::LinkExpired),
                };
                let payload = SignalPayload::Reject {
                    reason,
                    code: Some(code),
                };
                let nonce = self.nonces.next_nonce();
                if let Some(key) = self.key_of(link) {
                    let data = key.seal_payload_bound(
                        &self.room,
                        Direction::HostToGuest,
                        &binding(peer, None),
                        nonce,
                        &payload,
                    );
                    self.actions
                        .push_back(HostAction::Send(relay_text(peer, data)));
                }
                self.actions.push_back(HostAction::Refused {
                    peer,
                    why: Refusal::LinkEnded(why),
                });
            }
            None => {
                self.remember_refused(peer);
                self.challenge(peer, None);
            }
        }
    }

    fn remember_refused(&mut self, peer: PeerId) {
        self.refused.insert(peer.0);
        if self.refused.len() > REFUSALS_REMEMBERED {
            // Peer numbers only grow: forget the oldest.
            self.refused.pop_first();
        }
    }

    /// Sends `peer` a fresh challenge for `link`, sealed with its key (or,
    /// for no link, with a key no one has).
    fn challenge(&mut self, peer: PeerId, link: Option<LinkId>) {
        // Unique per guest: a hash of this machine's next nonce (random prefix, counter).
        let fresh = blake3::hash(&self.nonces.next_nonce());
        let mut challenge = [0u8; 16];
        challenge.copy_from_slice(&fresh.as_bytes()[..16]);
        let nonce = {
            use base64::Engine as _;
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(challenge)
        };
        // Signed, so the guest knows the sharer (not just someone with the
        // link) made it; sealed, bound to the guest's peer number only.
        let sig = self
            .sharer
            .sign_text(&challenge_message(&self.room, peer.0, &challenge));
        let payload = SignalPayload::Challenge {
            nonce,
            key: self.sharer.public_text(),
            sig,
        };
        let nonce = self.nonces.next_nonce();
        let nobodys;
        let key = match link.and_then(|l| self.key_of(l)) {
            Some(key) => key,
            None => {
                let fresh = blake3::hash(&self.nonces.next_nonce());
                let mut secret = [0u8; 16];
                secret.copy_from_slice(&fresh.as_bytes()[16..]);
                nobodys = SignalKey::from_secret(&ShareSecret::from_bytes(secret));
                &nobodys
            }
        };
        let data = key.seal_payload_bound(
            &self.room,
            Direction::HostToGuest,
            &binding(peer, None),
            nonce,
            &payload,
        );
        self.actions
            .push_back(HostAction::Send(relay_text(peer, data)));
        if let Some(link) = link {
            self.challenges.insert(peer.0, (challenge, link));
            while self.challenges.len() > CHALLENGES_KEPT {
                self.challenges.pop_first();
            }
        }
    }

    /// Tells `peer` (which has a challenge) it is turned away for lack of
    /// room, once per guest.
    fn refuse_full(&mut self, peer: PeerId, max: usize) {
        if self.refused.contains(&peer.0) {
            return;
        }
        let reason = full_words(max);
        self.send_sealed(peer, &SignalPayload::Reject { reason, code: None });
        self.remember_refused(peer);
        self.actions.push_back(HostAction::Refused {
            peer,
            why: Refusal::Full { max },
        });
    }

    /// Tells `peer` too many are at a password prompt now, once per guest.
    fn refuse_at_prompt(&mut self, peer: PeerId) {
        if self.refused.contains(&peer.0) {
            return;
        }
        let reason = format!(
            "{MAX_AT_PROMPT} visitors are at this share's password prompt now, the most it allows. Try again in a minute."
        );
        self.send_sealed(peer, &SignalPayload::Reject { reason, code: None });
        self.remember_refused(peer);
        self.actions.push_back(HostAction::Refused {
            peer,
            why: Refusal::AtPrompt { max: MAX_AT_PROMPT },
        });
    }

    /// One text frame from the relay (skipped if too long or not understood).
    pub fn handle_relay_text(&mut self, text: &str) {
        if let Some(msg) = parse_relay_text(text) {
            self.handle_relay(msg);
        }
    }

    /// One message from the relay.
    pub fn handle_relay(&mut self, msg: RelayToClient) {
        match msg {
            RelayToClient::Welcome { ice_servers, .. } if !self.registered => {
                self.registered = true;
                self.actions
                    .push_back(HostAction::Registered { ice_servers });
            }
            RelayToClient::Welcome { ice_servers, .. }
            | RelayToClient::IceServers { ice_servers } => {
                self.actions
                    .push_back(HostAction::IceServers { ice_servers });
            }
            RelayToClient::Msg { from, data } => self.handle_guest_message(from, &data),
            // A visitor's page closes its relay socket as soon as its data link is
            // open, so "left" says nothing about the visitor: its slot ends when
            // its shell calls `visitor_ended` (handshake failed, or the link closed).
            RelayToClient::Left { peer } => {
                // Not admitted yet: its challenge is of no more use.
                self.challenges.remove(&peer.0);
            }
            // Its knock says which link it holds: nothing to do before it.
            RelayToClient::Joined { .. } => {}
            RelayToClient::Error { code, message } => {
                if !self.registered {
                    self.actions
                        .push_back(HostAction::Fail(HostFailure::Refused { code, message }));
                } else if code != RelayErrorCode::UnknownPeer {
                    self.actions
                        .push_back(HostAction::Warning(format!("the relay says: {message}")));
                }
            }
            _ => {}
        }
    }

    fn handle_guest_message(&mut self, from: PeerId, data: &str) {
        if from == PeerId::HOST {
            return;
        }
        let Some((challenge, link)) = self.challenge_of(from) else {
            return self.knocked(from, data);
        };
        // Bound to this guest and its challenge: anything else (a wrong secret,
        // a message replayed from another connection) is dropped unanswered.
        let bound = binding(from, Some(&challenge));
        let Some(Ok(payload)) = self
            .key_of(link)
            .map(|k| k.open_payload_bound(&self.room, Direction::GuestToHost, &bound, data))
        else {
            return;
        };
        match payload {
            SignalPayload::Offer { sdp } => {
                if self.slots.contains_key(&from)
                    || self.lanes.contains(&from)
                    || self.refused.contains(&from.0)
                {
                    return;
                }
                let at_prompt = self.links.iter().any(|l| l.id == link && l.asks_password);
                if at_prompt && self.at_prompt() >= MAX_AT_PROMPT {
                    return self.refuse_at_prompt(from);
                }
                if !at_prompt && self.admitted() >= self.max_visitors {
                    let max = self.max_visitors;
                    return self.refuse_full(from, max);
                }
                self.challenges.remove(&from.0);
                self.slots.insert(
                    from,
                    Slot {
                        candidates: 0,
                        connected: false,
                        challenge,
                        link,
                        at_prompt,
                    },
                );
                self.actions.push_back(HostAction::Answer {
                    peer: from,
                    offer: sdp,
                    link,
                });
            }
            ref c @ SignalPayload::Candidate { .. } => {
                let Some(slot) = self.slots.get_mut(&from) else {
                    return;
                };
                let Some(candidate) = IceCandidate::from_payload(c) else {
                    return;
                };
                if candidate.is_end_marker() || slot.connected {
                    return;
                }
                if slot.candidates >= CANDIDATES_PER_VISITOR {
                    return;
                }
                slot.candidates += 1;
                self.actions.push_back(HostAction::AddCandidate {
                    peer: from,
                    candidate,
                });
            }
            _ => {}
        }
    }

    /// The shell answered `peer`'s offer.
    pub fn answer_made(&mut self, peer: PeerId, sdp: String) {
        if let Some(slot) = self.slots.get(&peer) {
            let sig =
                self.sharer
                    .sign_text(&answer_message(&self.room, peer.0, &slot.challenge, &sdp));
            self.send_sealed(peer, &SignalPayload::Answer { sdp, sig });
        }
    }

    /// A candidate gathered here for `peer`'s connection.
    pub fn local_candidate(&mut self, peer: PeerId, candidate: IceCandidate) {
        if self.slots.contains_key(&peer) && !candidate.is_end_marker() {
            self.send_sealed(peer, &candidate.into_payload());
        }
    }

    /// The shell cannot serve admitted `peer` (what its link shows is gone):
    /// it is told `words`, sealed, as a link that ended (so it stops, with
    /// those words), and its slot is free.
    pub fn turn_away(&mut self, peer: PeerId, words: String) {
        if !self.slots.contains_key(&peer) {
            return;
        }
        let payload = SignalPayload::Reject {
            reason: words,
            code: Some(RejectCode::LinkWithdrawn),
        };
        self.send_sealed(peer, &payload);
        self.slots.remove(&peer);
        self.remember_refused(peer);
    }

    /// `peer`'s data link opened.
    pub fn visitor_connected(&mut self, peer: PeerId) {
        if let Some(slot) = self.slots.get_mut(&peer) {
            slot.connected = true;
        }
    }

    /// `peer`'s link is a lane of another visitor's (its first frame joined
    /// a session): it gives back its visitor slot, so a visitor's lanes never
    /// turn another visitor away.
    pub fn visitor_is_lane(&mut self, peer: PeerId) {
        if self.slots.remove(&peer).is_some() {
            self.lanes.insert(peer);
        }
    }

    /// `peer` is gone (its handshake failed, its link closed, or its task
    /// ended in any other way): its slot is free.
    pub fn visitor_ended(&mut self, peer: PeerId) {
        self.slots.remove(&peer);
        self.lanes.remove(&peer);
    }

    /// The relay socket closed: visitors already connected stay; nothing more
    /// is sent until the shell reconnects ([`relay_reopened`](Self::relay_reopened)).
    pub fn relay_closed(&mut self) {
        if self.relay_open {
            self.relay_open = false;
            self.actions.push_back(HostAction::Warning(
                "lost the connection to the relay; connected visitors stay connected, new ones can join once it is back (reconnecting)".into(),
            ));
        }
    }

    /// The shell has a new relay socket: the room is registered again (a
    /// `Registered` action follows the relay's welcome). Visitors' slots stay.
    pub fn relay_reopened(&mut self) {
        self.relay_open = true;
        self.registered = false;
    }

    /// Whether the relay socket is open.
    pub fn relay_open(&self) -> bool {
        self.relay_open
    }
}

/// What a visitor turned away from a full share is told.
fn full_words(max: usize) -> String {
    format!("The sharer already has {max} visitors connected, the most it allows. Try again later.")
}

#[cfg(test)]
mod tests;
