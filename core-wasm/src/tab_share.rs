//! Sharing from a browser tab: [`TabShare`], the shell around core's sharing
//! side (`linkfs_core::share::Share`, the same machine `linkfs share` drives)
//! on the page. The tab holds the share's index (`ShareIndex`, fed by the
//! page's walk of the folder) and one `SenderSession` per visitor, and
//! answers every guest's peer connection itself: Chromium cannot hand a
//! data channel to a worker, so the whole sharing side runs on the page.
//!
//! # IO
//!
//! | what happens                                  | what the shell does |
//! | --- | --- |
//! | the relay line: open, text, closed            | `Share::relay_opened`, `relay_text`, `relay_closed` / `relay_failed` |
//! | the share says `Relay`, `ConnectRelay`, `CloseRelay` | the line sends, connects (a fresh proof), closes |
//! | the share says `Answer { peer, offer }`       | a [`guest::GuestLink`] answers it; its answer and candidates go back in |
//! | a guest's channel opens, its first frame      | `link_opened`, then `first_frame` (or `frame` at a prompt) |
//! | the share says `StartSession`                 | the visitor gets its `SenderSession`; its frames go there from now |
//! | a session says `Read(io)`                     | `handlers.read(...)` (the page: `File.slice()`), the bytes back into `handle_io` |
//! | a read finds the file changed on disk         | the index takes its new size and time (a new generation; visitors hear of it), the read is refused as changed |
//! | a session says `Transmit` (only with room)    | the channel sends; room = less than [`guest::HIGH_WATER`] queued |
//! | a session ends, a channel closes              | `visitor_ended` with its figures; the page hears who left |
//! | the share or a session says when to wake      | one browser timer, for the earliest |
//! | the page: `kick`, `stop`                      | `Share::kick`; every session closed with "the sharer stopped sharing" |
//!
//! Every rule is the machines'. Bounds: the share's (visitors, prompts,
//! candidates), each session's (its window, reads in flight), and the
//! relay line's outbox.

mod folder;
mod guest;
mod links;
mod password;
mod qr;
mod relay_line;
mod rescan;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::{Rc, Weak};

use js_sys::Uint8Array;
use linkfs_core::share::links::Links;
use linkfs_core::share::rights::Shown;
use linkfs_core::share::{Figures, Now, SCOPE_GONE, Share, ShareConfig, ShareNews, ShareOutput};
use linkfs_core::{
    GuessSource, IoFailure, LinkId, Millis, PartIndex, ReadIo, Ready, SenderConfig, SenderOutput,
    SenderSession, SettleConfig, Settler, ShareIndex, ShareLink, ShareSecret, UploadResult,
};
use linkfs_proto::sharer_key::SharerKey;
use linkfs_proto::signal::{IceServer, PeerId, Role};
use linkfs_proto::{
    EntryId, Epoch, Goodbye, GoodbyeCode, ReadErrorCode, SenderToReceiver, UploadRefusal,
};
use serde::Serialize;
use tsify::{Ts, Tsify};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{JsFuture, spawn_local};

use crate::data_link::{js_message, monotonic_ms};
use guest::{GuestLink, GuestNews, Report};
use relay_line::{RelayLine, RelayNews, RelayReport};

#[wasm_bindgen(typescript_custom_section)]
const HANDLERS_TS: &str = r#"
/** What a sharing tab asks of the page. */
export interface TabShareHandlers {
  /**
   * Bytes [offset, offset + len) of the file `entry` (as the walk numbered it),
   * read afresh. If the file is no longer `size` bytes last modified at
   * `mtimeMs`, reject with `{ changed: { size, mtimeMs } }` (what it is now),
   * or `{ gone: true }` if it is not there; anything else rejected is an error.
   */
  read(entry: number, offset: number, len: number, size: number, mtimeMs: number): Promise<Uint8Array>;
  /** Whether `attempt` matches the Argon2id `hash` (checked off the page's loop). */
  checkPassword(hash: string, attempt: string): Promise<boolean>;
  /** Something the person sharing should see. */
  onEvent(event: TabShareEvent): void;
}
"#;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(typescript_type = "TabShareHandlers")]
    pub type TabShareHandlers;

    #[wasm_bindgen(method, catch)]
    fn read(
        this: &TabShareHandlers,
        entry: u32,
        offset: f64,
        len: u32,
        size: f64,
        mtime_ms: f64,
    ) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(method, catch, js_name = checkPassword)]
    fn check_password(
        this: &TabShareHandlers,
        hash: &str,
        attempt: &str,
    ) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(method, js_name = onEvent)]
    fn on_event(this: &TabShareHandlers, event: JsValue);
}

/// What the person sharing is told.
#[derive(Debug, Clone, Serialize, Tsify)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TabShareEvent {
    /// The relay holds the share's room: visitors can come (`again`: after it was lost).
    Sharing { again: bool },
    /// The relay refused the share: it cannot start.
    Failed { message: String },
    /// The relay connection was lost; it is tried again, visitors stay.
    RelayLost,
    /// A visitor's session started.
    VisitorCame {
        peer: u32,
        who: String,
        visitors: u32,
    },
    /// A visitor left.
    VisitorLeft {
        peer: u32,
        who: String,
        visitors: u32,
        why: String,
    },
    /// A file changed since it was listed (a read found it); visitors are told.
    FileChanged { entry: u32 },
    /// Changes on disk settled at these paths (relative to the folder): look
    /// at each and hand what was found to `applyLooked`.
    Settled { paths: Vec<String> },
    /// Too much changed, or changes were lost: compare the whole folder.
    Rescan,
    /// The share's links changed: keep `keptLinks()` for the next time.
    LinksChanged,
    /// Anything else worth a line.
    Note { message: String },
}

/// A rescan's outcome: for each file it found, its id in the rescan's
/// listing and in the share (`pairs`, flattened), and what changed.
#[derive(Debug, Clone, Serialize, Tsify)]
pub struct RescanDone {
    pub pairs: Vec<u32>,
    pub added: f64,
    pub updated: f64,
    pub removed: f64,
}

/// One visitor, for the page's list.
#[derive(Debug, Clone, Serialize, Tsify)]
pub struct TabVisitor {
    pub peer: u32,
    pub who: String,
    /// Unix seconds.
    pub since: f64,
    /// Bytes of files sent to it.
    pub served: f64,
    /// Reads it asked for.
    pub reads: f64,
    /// Bytes the browser holds for it, not yet sent.
    pub queued: f64,
    /// The file it read last (relative to the folder; empty before any).
    pub reading: String,
}

/// What a visitor's session is told when the tab stops sharing.
const STOPPED: &str = "the sharer stopped sharing";

/// Where a guest is.
enum Phase {
    /// Its handshake runs; no channel yet.
    Connecting,
    /// Its channel is open; no frame yet.
    Opened,
    /// Its first frame went to the share (a password prompt).
    Prompted,
    Serving(Box<SenderSession>),
    /// Its session ended, or it was ended before one.
    Gone,
}

struct Guest {
    link: GuestLink,
    phase: Phase,
    /// What its link shows, if not the whole share (a key of `Host::parts`).
    part: Option<String>,
    /// Until its first frame: when it must have connected by.
    connect_by: Option<Millis>,
    /// Its session closed: when its goodbye must have left by.
    flush_by: Option<Millis>,
    /// The file (the whole share's id) it read last.
    reading: Option<EntryId>,
}

/// How long a guest may take from its offer to its first frame (as the
/// native sharer's `connect_timeout`): one that never connects frees its slot.
const CONNECT_WITHIN_MS: u64 = 15_000;
/// How long a closed session's last frames may wait for room before the
/// visitor is let go anyway (as the native drive loop's `GOODBYE_FLUSH`).
const GOODBYE_FLUSH_MS: u64 = 2_000;

struct Host {
    share: Share,
    index: ShareIndex,
    /// What each link that shows a part of the share sees, by `Shown::key`.
    parts: HashMap<String, PartIndex>,
    /// A rescan's listing while it is made.
    fresh: Option<ShareIndex>,
    sender: SenderConfig,
    main: ShareLink,
    sharer_seed: [u8; 32],
    relay: RelayLine,
    relay_report: RelayReport,
    guest_report: Report,
    /// What the browser said, waiting for the next pump.
    inbox: Inbox,
    ice_servers: Vec<IceServer>,
    guests: BTreeMap<PeerId, Guest>,
    started_ms: f64,
    /// The browser timer: when it fires (share time) and its handle.
    timer: Option<(Millis, i32)>,
    tick: Option<Closure<dyn FnMut()>>,
    handlers: TabShareHandlers,
    registered: bool,
    stopped: bool,
    /// Changes on disk settling before they are looked at (the native sharer's rules).
    settler: Settler,
    /// When the share started (ms since the epoch): a new folder's time.
    started_unix_ms: f64,
}

type Shared = Rc<RefCell<Host>>;

/// What the browser says, queued apart from the host, so that an event the
/// browser fires while the host is busy (inside a call into the browser) is
/// taken in order by the pump that holds it, never dropped.
enum Inbound {
    Guest(PeerId, GuestNews),
    Relay(RelayNews),
    /// The browser timer fired.
    Tick,
}

type Inbox = Rc<RefCell<VecDeque<Inbound>>>;

/// What the shell does once the host is no longer borrowed (these call into
/// the page, which may call back).
enum Effect {
    /// A session's read, and the entry to read (the whole share's id).
    Read(PeerId, ReadIo, EntryId),
    CheckPassword {
        job: u64,
        hash: String,
        attempt: String,
    },
    Event(TabShareEvent),
    ConnectRelay,
}

impl Host {
    fn now(&self) -> Now {
        Now {
            mono: Millis((monotonic_ms() - self.started_ms).max(0.0) as u64),
            unix: (js_sys::Date::now() / 1000.0) as u64,
        }
    }

    /// Runs the machines until they wait; what must call the page is returned.
    fn run(&mut self) -> Vec<Effect> {
        let mut fx = Vec::new();
        self.prune_parts();
        for part in self.parts.values_mut() {
            part.follow(&mut self.index);
        }
        loop {
            let now = self.now();
            let share_at = self.drain_share(now, &mut fx);
            let (ended, sessions_at) = self.drain_sessions(now, &mut fx);
            if ended.is_empty() {
                while let Some(ready) = self.settler.poll_ready(now.mono) {
                    fx.push(Effect::Event(settled_event(ready)));
                }
                let settle_at = self.settler.poll_timeout();
                self.set_timer(earliest(earliest(share_at, sessions_at), settle_at));
                return fx;
            }
            for (peer, why) in ended {
                self.visitor_gone(now, peer, &why, &mut fx);
            }
        }
    }

    fn drain_share(&mut self, now: Now, fx: &mut Vec<Effect>) -> Option<Millis> {
        loop {
            match self.share.poll_output() {
                ShareOutput::Relay(text) => self.relay.send(text),
                ShareOutput::ConnectRelay => fx.push(Effect::ConnectRelay),
                ShareOutput::CloseRelay => self.relay.close(),
                ShareOutput::Registered { ice_servers, again } => {
                    self.ice_servers = ice_servers;
                    self.registered = true;
                    fx.push(Effect::Event(TabShareEvent::Sharing { again }));
                }
                ShareOutput::IceServers(servers) => self.ice_servers = servers,
                ShareOutput::Failed(why) => fx.push(Effect::Event(TabShareEvent::Failed {
                    message: why.to_string(),
                })),
                ShareOutput::Answer { .. } if self.stopped => {}
                ShareOutput::Answer { peer, offer, link } => {
                    let part = match self.part_of(link) {
                        Ok(part) => part,
                        Err(words) => {
                            self.share.cannot_show(peer, words);
                            continue;
                        }
                    };
                    match GuestLink::start(peer, offer, &self.ice_servers, &self.guest_report) {
                        Ok(link) => {
                            self.guests.insert(
                                peer,
                                Guest {
                                    link,
                                    phase: Phase::Connecting,
                                    part,
                                    connect_by: Some(Millis(now.mono.0 + CONNECT_WITHIN_MS)),
                                    flush_by: None,
                                    reading: None,
                                },
                            );
                        }
                        Err(e) => {
                            fx.push(Effect::Event(TabShareEvent::Note {
                                message: format!("could not answer a visitor: {e}"),
                            }));
                            self.share.visitor_ended(now, peer, Figures::default());
                        }
                    }
                }
                ShareOutput::AddCandidate { peer, candidate } => {
                    if let Some(g) = self.guests.get_mut(&peer) {
                        g.link.add(candidate);
                    }
                }
                ShareOutput::Transmit { peer, frame } => {
                    if let Some(g) = self.guests.get(&peer) {
                        g.link.send(&frame);
                    }
                }
                ShareOutput::CloseLink { peer } => {
                    self.visitor_gone(now, peer, "its link was closed", fx);
                }
                ShareOutput::CheckPassword { job, hash, attempt } => {
                    fx.push(Effect::CheckPassword { job, hash, attempt });
                }
                ShareOutput::StartSession { peer, first, .. } => {
                    self.start_session(now, peer, first);
                }
                ShareOutput::EndVisitor { peer, code, words }
                    if self.end_visitor(peer, code, &words) =>
                {
                    // Told before its session: gone now.
                    self.visitor_gone(now, peer, &words, fx);
                }
                ShareOutput::EndVisitor { .. } => {}
                ShareOutput::KeepLinks => fx.push(Effect::Event(TabShareEvent::LinksChanged)),
                ShareOutput::News(news) => {
                    if let Some(e) = news_event(news) {
                        fx.push(Effect::Event(e));
                    }
                }
                ShareOutput::Timeout(at) => return at,
                _ => {}
            }
        }
    }

    /// Forgets the parts no live link shows and no guest is served from (a
    /// withdrawn or expired link's): each holds a copy of what it shows.
    fn prune_parts(&mut self) {
        if self.parts.is_empty() {
            return;
        }
        let shown: std::collections::HashSet<String> = self
            .share
            .links()
            .live()
            .map(|l| Shown::of(l).key())
            .collect();
        let guests = &self.guests;
        self.parts.retain(|key, _| {
            shown.contains(key) || guests.values().any(|g| g.part.as_deref() == Some(key))
        });
    }

    /// The part of the share a guest of `link` is shown (its index made
    /// the first time), none for the whole; the words for the guest if what
    /// its link shows is not there.
    fn part_of(&mut self, link: LinkId) -> Result<Option<String>, String> {
        let Some(record) = self.share.links().get(link) else {
            return Ok(None);
        };
        let shown = Shown::of(record);
        let key = shown.key();
        if !self.parts.contains_key(&key) {
            let epoch = Epoch(u64::from_le_bytes(random::<8>().map_err(|_| SCOPE_GONE)?));
            let part = match &shown {
                Shown::Whole => return Ok(None),
                Shown::Folder(scope) => PartIndex::folder(&mut self.index, scope, epoch),
                Shown::Selection(paths) => {
                    let selection =
                        linkfs_core::Selection::new(paths).map_err(|_| SCOPE_GONE.to_owned())?;
                    PartIndex::selection(&mut self.index, selection, epoch)
                }
            };
            self.parts.insert(key.clone(), part);
        }
        if self.parts[&key].showing() {
            Ok(Some(key))
        } else {
            Err(SCOPE_GONE.to_owned())
        }
    }

    fn start_session(&mut self, now: Now, peer: PeerId, first: Option<Vec<u8>>) {
        let Some(g) = self.guests.get_mut(&peer) else {
            return;
        };
        let mut session = SenderSession::new(self.sender.clone());
        if let Some(frame) = first {
            // A frame that breaks the protocol ends the session; its poll says so.
            let index = index_of(&self.index, &self.parts, g.part.as_deref());
            let _ = session.handle_frame(now.mono, &frame, index);
        }
        g.phase = Phase::Serving(Box::new(session));
    }

    /// Ends `peer`: a session says its goodbye and ends by its poll; a guest
    /// before its session is told and is gone now (true).
    fn end_visitor(&mut self, peer: PeerId, code: GoodbyeCode, words: &str) -> bool {
        let Some(g) = self.guests.get_mut(&peer) else {
            return false;
        };
        match &mut g.phase {
            Phase::Serving(session) => {
                session.close_with(code, words);
                false
            }
            Phase::Gone => false,
            _ => {
                let goodbye = SenderToReceiver::Goodbye(Goodbye {
                    code,
                    message: words.to_owned(),
                });
                g.link.send(&goodbye.encode());
                true
            }
        }
    }

    /// Each session's outputs until it waits: the earliest it wants waking,
    /// and the sessions that ended.
    fn drain_sessions(
        &mut self,
        now: Now,
        fx: &mut Vec<Effect>,
    ) -> (Vec<(PeerId, String)>, Option<Millis>) {
        let mut ended = Vec::new();
        let mut at: Option<Millis> = None;
        for (peer, g) in &mut self.guests {
            if matches!(g.phase, Phase::Connecting | Phase::Opened) {
                match g.connect_by {
                    Some(by) if now.mono >= by => ended.push((
                        *peer,
                        format!("it did not connect within {} s", CONNECT_WITHIN_MS / 1000),
                    )),
                    by => at = earliest(at, by),
                }
                continue;
            }
            let Phase::Serving(session) = &mut g.phase else {
                continue;
            };
            let mut over = false;
            let (index, part) = match g.part.as_deref().and_then(|k| self.parts.get(k)) {
                Some(p) => (p.index(), Some(p)),
                None => (&self.index, None),
            };
            loop {
                // A stopping tab says its goodbyes whatever the channel holds.
                let room = g.link.has_room() || (self.stopped && g.link.is_open());
                match session.poll_output(now.mono, index, room) {
                    SenderOutput::Read(io) => {
                        let whole = match part {
                            Some(p) => p.whole_id(io.entry),
                            None => Some(io.entry),
                        };
                        match whole {
                            Some(entry) => {
                                g.reading = Some(entry);
                                fx.push(Effect::Read(*peer, io, entry));
                            }
                            None => session.handle_io(
                                &io,
                                Err(IoFailure {
                                    code: ReadErrorCode::NoSuchEntry,
                                    message: "the file is not there any more".into(),
                                }),
                            ),
                        }
                    }
                    SenderOutput::Upload(io) => {
                        // The tab's links take no files (nothing asks; a visitor
                        // that tries is refused in words).
                        if let linkfs_core::UploadIo::Begin { upload, .. } = io {
                            session.handle_upload_io(
                                upload,
                                UploadResult::Refused {
                                    code: UploadRefusal::NotAllowed,
                                    message: "this share takes no files".into(),
                                },
                            );
                        }
                    }
                    SenderOutput::Transmit(frame) | SenderOutput::TransmitBulk(frame) => {
                        g.link.send(&frame)
                    }
                    SenderOutput::Ended(why) => {
                        let why = why.map_or_else(|| STOPPED.to_owned(), |e| e.to_string());
                        ended.push((*peer, why));
                        over = true;
                        break;
                    }
                    SenderOutput::Wait(wake) => {
                        at = earliest(at, wake);
                        break;
                    }
                }
            }
            // Its session closed, its last frames waiting for room: not forever.
            if !over && !session.is_open() {
                let by = *g
                    .flush_by
                    .get_or_insert(Millis(now.mono.0 + GOODBYE_FLUSH_MS));
                if now.mono >= by {
                    ended.push((*peer, "its last frames could not be sent in time".into()));
                } else {
                    at = earliest(at, Some(by));
                }
            }
        }
        (ended, at)
    }

    /// A visitor is gone (its session ended, or its link closed): the share
    /// frees its slot, the page hears who left.
    fn visitor_gone(&mut self, now: Now, peer: PeerId, why: &str, fx: &mut Vec<Effect>) {
        let Some(mut g) = self.guests.remove(&peer) else {
            return;
        };
        let served = match &g.phase {
            Phase::Serving(s) => s.stats().chunk_bytes_sent,
            _ => 0,
        };
        let was_visitor = matches!(g.phase, Phase::Serving(_));
        g.phase = Phase::Gone;
        g.link.close();
        let departed = self.share.visitor_ended(
            now,
            peer,
            Figures {
                served,
                uploads: None,
            },
        );
        fx.push(Effect::Event(if was_visitor {
            TabShareEvent::VisitorLeft {
                peer: peer.0,
                who: departed.who,
                visitors: departed.visitors as u32,
                why: why.to_owned(),
            }
        } else {
            TabShareEvent::Note {
                message: format!("{} did not get in: {why}", departed.who),
            }
        }));
    }

    /// One guest's news.
    fn guest_news(&mut self, peer: PeerId, news: GuestNews, fx: &mut Vec<Effect>) {
        let now = self.now();
        if let GuestNews::Closed(why) = news {
            let why = if why.is_empty() {
                "it left".to_owned()
            } else {
                why
            };
            self.visitor_gone(now, peer, &why, fx);
            return;
        }
        let Some(g) = self.guests.get_mut(&peer) else {
            return;
        };
        match news {
            GuestNews::Answer(sdp) => {
                g.link.described();
                self.share.answer_made(peer, sdp);
            }
            GuestNews::Candidate(c) => self.share.local_candidate(peer, c),
            GuestNews::Channel(dc) => {
                let report = self.guest_report.clone();
                // One channel a guest: more are closed.
                g.link.take_channel(dc, peer, &report);
            }
            GuestNews::Opened => {
                if matches!(g.phase, Phase::Connecting) {
                    g.phase = Phase::Opened;
                    self.share.link_opened(now, peer, GuessSource(None));
                }
            }
            GuestNews::Frame(frame) => match &mut g.phase {
                Phase::Opened => {
                    g.connect_by = None;
                    g.phase = Phase::Prompted;
                    self.share.first_frame(now, peer, frame);
                }
                Phase::Prompted => self.share.frame(now, peer, &frame),
                Phase::Serving(session) => {
                    let index = index_of(&self.index, &self.parts, g.part.as_deref());
                    let _ = session.handle_frame(now.mono, &frame, index);
                }
                Phase::Connecting | Phase::Gone => {}
            },
            GuestNews::Room | GuestNews::Closed(_) => {}
        }
    }

    fn relay_news(&mut self, news: RelayNews, fx: &mut Vec<Effect>) {
        let now = self.now();
        match news {
            RelayNews::Opened => {
                self.relay.opened();
                self.share.relay_opened(now);
            }
            RelayNews::Text(text) => self.share.relay_text(now, &text),
            RelayNews::Closed => {
                let was_open = self.relay.closed();
                if self.stopped {
                    return;
                }
                if was_open && self.registered {
                    fx.push(Effect::Event(TabShareEvent::RelayLost));
                }
                // A connection that never opened failed (the share then tries
                // again on its schedule); one that was open was lost.
                if was_open {
                    self.share.relay_closed(now);
                } else {
                    self.share.relay_failed(now);
                }
            }
        }
    }

    /// A read came back.
    fn read_done(&mut self, peer: PeerId, io: &ReadIo, result: Result<Vec<u8>, IoFailure>) {
        if let Some(Guest {
            phase: Phase::Serving(session),
            ..
        }) = self.guests.get_mut(&peer)
        {
            session.handle_io(io, result);
        }
    }

    fn set_timer(&mut self, at: Option<Millis>) {
        let Some(at) = at else { return };
        if self.stopped && self.guests.is_empty() {
            return;
        }
        if self.timer.is_some_and(|(set, _)| set <= at) {
            return;
        }
        let Some(window) = web_sys::window() else {
            return;
        };
        if let Some((_, handle)) = self.timer.take() {
            window.clear_timeout_with_handle(handle);
        }
        let Some(tick) = &self.tick else { return };
        let delay = at.0.saturating_sub(self.now().mono.0).min(i32::MAX as u64) as i32;
        if let Ok(handle) = window.set_timeout_with_callback_and_timeout_and_arguments_0(
            tick.as_ref().unchecked_ref(),
            delay,
        ) {
            self.timer = Some((at, handle));
        }
    }

    fn visitor_rows(&self) -> Vec<TabVisitor> {
        self.share
            .visitors()
            .filter(|(_, _, _, serving)| *serving)
            .map(|(peer, _, since, _)| {
                let guest = self.guests.get(&peer);
                let stats = match guest.map(|g| &g.phase) {
                    Some(Phase::Serving(s)) => s.stats(),
                    _ => Default::default(),
                };
                let queued = guest.map_or(0, |g| g.link.queued());
                TabVisitor {
                    peer: peer.0,
                    who: self.share.who(peer),
                    since: since as f64,
                    served: stats.chunk_bytes_sent as f64,
                    reads: stats.reads_accepted as f64,
                    queued: f64::from(queued),
                    reading: guest
                        .and_then(|g| g.reading)
                        .and_then(|e| self.index.relative_path(e))
                        .map(|p| String::from_utf8_lossy(&p).into_owned())
                        .unwrap_or_default(),
                }
            })
            .collect()
    }
}

/// What settled, for the page to look at.
fn settled_event(ready: Ready) -> TabShareEvent {
    match ready {
        Ready::Paths { paths, .. } => TabShareEvent::Settled {
            paths: paths
                .into_iter()
                .map(|p| String::from_utf8_lossy(&p).into_owned())
                .collect(),
        },
        _ => TabShareEvent::Rescan,
    }
}

/// The index a guest's session serves: its link's part, or the whole share.
fn index_of<'a>(
    whole: &'a ShareIndex,
    parts: &'a HashMap<String, PartIndex>,
    part: Option<&str>,
) -> &'a ShareIndex {
    part.and_then(|k| parts.get(k))
        .map_or(whole, PartIndex::index)
}

fn earliest(a: Option<Millis>, b: Option<Millis>) -> Option<Millis> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn news_event(news: ShareNews) -> Option<TabShareEvent> {
    match news {
        ShareNews::VisitorConnected {
            peer,
            visitors,
            who,
        } => Some(TabShareEvent::VisitorCame {
            peer: peer.0,
            who,
            visitors: visitors as u32,
        }),
        ShareNews::Links(message) | ShareNews::Warning(message) => {
            Some(TabShareEvent::Note { message })
        }
        ShareNews::Refused { peer, why } => Some(TabShareEvent::Note {
            message: format!("turned visitor {} away: {why}", peer.0),
        }),
        _ => None,
    }
}

/// Takes what the browser said, runs the machines, then does what needs the
/// page; again while the page's callbacks said more.
fn pump(shared: &Shared) {
    loop {
        let effects = {
            let Ok(mut host) = shared.try_borrow_mut() else {
                // Called while the host is busy: its holder pumps before it is done.
                return;
            };
            // Each piece of news, then the machines, in turn: a frame right
            // after a visitor's first one finds its session started.
            let mut fx = host.run();
            while let Some(news) = host.next_inbound() {
                host.take(news, &mut fx);
                fx.extend(host.run());
            }
            fx
        };
        carry_out(shared, effects);
        let more = shared
            .try_borrow()
            .is_ok_and(|host| !host.inbox.borrow().is_empty());
        if !more {
            return;
        }
    }
}

impl Host {
    fn next_inbound(&self) -> Option<Inbound> {
        self.inbox.borrow_mut().pop_front()
    }

    fn take(&mut self, news: Inbound, fx: &mut Vec<Effect>) {
        match news {
            Inbound::Guest(peer, news) => self.guest_news(peer, news, fx),
            Inbound::Relay(news) => self.relay_news(news, fx),
            Inbound::Tick => {
                self.timer = None;
                let now = self.now();
                self.share.handle_timeout(now);
                for g in self.guests.values_mut() {
                    if let Phase::Serving(s) = &mut g.phase {
                        s.handle_timeout(now.mono);
                    }
                }
            }
        }
    }
}

fn carry_out(shared: &Shared, effects: Vec<Effect>) {
    for effect in effects {
        match effect {
            Effect::Event(event) => {
                let handlers: JsValue = {
                    let host = shared.borrow();
                    (*host.handlers).clone()
                };
                if let Ok(value) = serde_wasm_bindgen::to_value(&event) {
                    handlers
                        .unchecked_into::<TabShareHandlers>()
                        .on_event(value);
                }
            }
            Effect::ConnectRelay => {
                if shared.borrow().stopped {
                    continue;
                }
                let failed = {
                    let mut host = shared.borrow_mut();
                    let report = host.relay_report.clone();
                    host.relay.connect(&report).is_err()
                };
                if failed {
                    let mut host = shared.borrow_mut();
                    let now = host.now();
                    host.share.relay_failed(now);
                }
                pump(shared);
            }
            Effect::Read(peer, io, entry) => start_read(shared, peer, io, entry),
            Effect::CheckPassword { job, hash, attempt } => {
                check_password(shared, job, &hash, &attempt);
            }
        }
    }
}

/// Asks the page's worker whether a guess is the password; the answer goes
/// back into the share (a check that fails is a wrong guess).
fn check_password(shared: &Shared, job: u64, hash: &str, attempt: &str) {
    let handlers: TabShareHandlers = {
        let host = shared.borrow();
        let h: JsValue = (*host.handlers).clone();
        h.unchecked_into()
    };
    let promise = handlers.check_password(hash, attempt);
    let weak = Rc::downgrade(shared);
    spawn_local(async move {
        let right = match promise {
            Ok(p) => JsFuture::from(p).await.ok().and_then(|v| v.as_bool()),
            Err(_) => None,
        };
        let Some(shared) = weak.upgrade() else { return };
        {
            let mut host = shared.borrow_mut();
            let now = host.now();
            host.share.password_checked(now, job, right == Some(true));
        }
        pump(&shared);
    });
}

/// Asks the page for a read's bytes; the answer goes back into the session.
fn start_read(shared: &Shared, peer: PeerId, io: ReadIo, entry: EntryId) {
    // The page is called with the host free: it may call back.
    let handlers: TabShareHandlers = {
        let host = shared.borrow();
        let h: JsValue = (*host.handlers).clone();
        h.unchecked_into()
    };
    let mtime_ms = folder::ms_of(io.target.mtime, io.target.mtime_nsec());
    let promise = handlers.read(
        entry.0,
        io.offset as f64,
        io.len,
        io.target.size as f64,
        mtime_ms,
    );
    let weak = Rc::downgrade(shared);
    spawn_local(async move {
        let result = match promise {
            Ok(p) => JsFuture::from(p).await,
            Err(e) => Err(e),
        };
        let Some(shared) = weak.upgrade() else { return };
        let mut fx = Vec::new();
        {
            let mut host = shared.borrow_mut();
            let result = match result {
                Ok(bytes) => {
                    let bytes = Uint8Array::new(&bytes).to_vec();
                    if bytes.len() == io.len as usize {
                        Ok(bytes)
                    } else {
                        Err(IoFailure {
                            code: ReadErrorCode::Changed,
                            message: "the file is shorter than it was".into(),
                        })
                    }
                }
                Err(why) => {
                    let (failure, updated) = host.read_failed(entry, &why);
                    if updated {
                        fx.push(Effect::Event(TabShareEvent::FileChanged { entry: entry.0 }));
                    }
                    Err(failure)
                }
            };
            host.read_done(peer, &io, result);
        }
        carry_out(&shared, fx);
        pump(&shared);
    });
}

impl Host {
    /// Why a read failed, in the protocol's terms; a file found changed goes
    /// into the index as an update (and whether that changed the index).
    fn read_failed(&mut self, entry: EntryId, why: &JsValue) -> (IoFailure, bool) {
        let field = |v: &JsValue, name: &str| js_sys::Reflect::get(v, &JsValue::from_str(name));
        if let Ok(changed) = field(why, "changed")
            && changed.is_object()
        {
            let size = field(&changed, "size").ok().and_then(|v| v.as_f64());
            let mtime = field(&changed, "mtimeMs").ok().and_then(|v| v.as_f64());
            let updated = match (size, mtime) {
                (Some(size), Some(mtime)) => folder::changed(&mut self.index, entry, size, mtime),
                _ => false,
            };
            let failure = IoFailure {
                code: ReadErrorCode::Changed,
                message: "the file changed since it was listed".into(),
            };
            return (failure, updated);
        }
        if field(why, "gone").ok().and_then(|v| v.as_bool()) == Some(true) {
            let failure = IoFailure {
                code: ReadErrorCode::NoSuchEntry,
                message: "the file is not there any more".into(),
            };
            return (failure, false);
        }
        let failure = IoFailure {
            code: ReadErrorCode::Io,
            message: format!(
                "the sharer's browser could not read the file: {}",
                js_message(why)
            ),
        };
        (failure, false)
    }
}

/// A folder shared from this tab. See the module docs.
#[wasm_bindgen]
pub struct TabShare {
    host: Shared,
}

#[wasm_bindgen]
impl TabShare {
    /// Starts sharing through the relay at `origin` (this page's): the link
    /// is known at once (`link()`), entries follow (`addEntries`). `kept`: a
    /// share kept from before (`kept()`), to share under the same link.
    #[wasm_bindgen(constructor)]
    pub fn new(
        origin: &str,
        folder_name: &str,
        folder_mtime_ms: f64,
        kept: Option<String>,
        kept_links: Option<String>,
        handlers: TabShareHandlers,
    ) -> Result<TabShare, JsError> {
        crate::install_panic_hook();
        let (seed, secret) = match kept.as_deref().and_then(parse_kept) {
            Some(k) => k,
            None => (random::<32>()?, random::<16>()?),
        };
        let sharer = SharerKey::from_seed(seed);
        let main = ShareLink::of_sharer(origin, &sharer, secret);
        let mut index = ShareIndex::new(Epoch(u64::from_le_bytes(random::<8>()?)));
        folder::root(&mut index, folder_name, folder_mtime_ms);
        let started_ms = monotonic_ms();
        let now = Now {
            mono: Millis(0),
            unix: (js_sys::Date::now() / 1000.0) as u64,
        };
        let share = Share::new(
            now,
            &main,
            sharer.clone(),
            kept_links
                .and_then(|json| Links::from_json(json.as_bytes()).ok())
                .unwrap_or_default(),
            ShareConfig::default(),
            random::<16>()?,
        );
        let url = main.signal_url(Role::Host);
        let inbox: Inbox = Rc::default();
        let host = Rc::new_cyclic(|weak: &Weak<RefCell<Host>>| {
            let (w, inbox2) = (weak.clone(), inbox.clone());
            let guest_report: Report = Rc::new(move |peer, news| {
                inbox2.borrow_mut().push_back(Inbound::Guest(peer, news));
                if let Some(shared) = w.upgrade() {
                    pump(&shared);
                }
            });
            let (w, inbox2) = (weak.clone(), inbox.clone());
            let relay_report: RelayReport = Rc::new(move |news| {
                inbox2.borrow_mut().push_back(Inbound::Relay(news));
                if let Some(shared) = w.upgrade() {
                    pump(&shared);
                }
            });
            let (w, inbox2) = (weak.clone(), inbox.clone());
            let tick = Closure::<dyn FnMut()>::new(move || {
                inbox2.borrow_mut().push_back(Inbound::Tick);
                if let Some(shared) = w.upgrade() {
                    pump(&shared);
                }
            });
            RefCell::new(Host {
                share,
                index,
                parts: HashMap::new(),
                fresh: None,
                sender: SenderConfig::default(),
                main,
                sharer_seed: seed,
                relay: RelayLine::new(url, sharer),
                relay_report,
                guest_report,
                inbox: inbox.clone(),
                ice_servers: Vec::new(),
                guests: BTreeMap::new(),
                started_ms,
                timer: None,
                tick: Some(tick),
                handlers,
                registered: false,
                stopped: false,
                settler: Settler::new(SettleConfig::default()),
                started_unix_ms: js_sys::Date::now(),
            })
        });
        {
            let mut h = host.borrow_mut();
            let report = h.relay_report.clone();
            h.relay
                .connect(&report)
                .map_err(|e| JsError::new(&format!("could not reach the relay: {e}")))?;
        }
        pump(&host);
        Ok(TabShare { host })
    }

    /// The share's link, as people open it.
    pub fn link(&self) -> String {
        self.host.borrow().main.to_url()
    }

    /// What to keep to share under the same link after a reload (the
    /// sharer's key and the link's secret: keep it as private as the link).
    pub fn kept(&self) -> String {
        let h = self.host.borrow();
        format!("{}.{}", hex::encode(h.sharer_seed), h.main.secret.encode())
    }

    /// The share's links besides the main one, to keep with `kept()`.
    #[wasm_bindgen(js_name = keptLinks)]
    pub fn kept_links(&self) -> String {
        String::from_utf8_lossy(&self.host.borrow().share.links().to_json()).into_owned()
    }

    /// Makes a link: `label`; what it shows (`scope`: one folder as its
    /// root, or a file; `paths`: several, at their places; both empty: the
    /// whole folder); `expires` as people write it (`48h`, `7d`,
    /// `2026-12-01`; empty: never); `passwordHash` from `passwordHash()`.
    #[wasm_bindgen(js_name = addLink)]
    pub fn add_link(
        &self,
        label: &str,
        scope: &str,
        paths: Vec<String>,
        expires: &str,
        password_hash: Option<String>,
    ) -> Result<Ts<links::TabLink>, JsError> {
        let secret = random::<16>()?;
        let row = {
            let mut guard = self.host.borrow_mut();
            let h = &mut *guard;
            let now = h.now();
            let asked = links::Asked {
                label,
                scope,
                paths: &paths,
                expires,
                password_hash,
            };
            let record = links::add(&mut h.share, &mut h.index, now, asked, secret)
                .map_err(|e| JsError::new(&e))?;
            // Its part is made now, so its first visitor waits for nothing.
            let _ = h.part_of(record.id);
            links::row(&h.share, &record)
        };
        pump(&self.host);
        Ok(row.into_ts()?)
    }

    /// Every link, the main one first.
    pub fn links(&self) -> Result<Vec<Ts<links::TabLink>>, JsError> {
        let rows = links::rows(&self.host.borrow().share);
        Ok(rows
            .into_iter()
            .map(|r| r.into_ts())
            .collect::<Result<_, _>>()?)
    }

    /// Withdraws link `id`: its visitors are told and ended. How many.
    pub fn revoke(&self, id: u32) -> Result<u32, JsError> {
        let gone = {
            let mut h = self.host.borrow_mut();
            let now = h.now();
            h.share
                .revoke(now, LinkId(id))
                .map_err(|e| JsError::new(&e.to_string()))?
        };
        pump(&self.host);
        Ok(gone as u32)
    }

    /// Adds entries the walk found, in order (a folder before what it holds):
    /// `parents[i]` is an id this returned earlier (0: the shared folder),
    /// `dirs[i]` 1 for a folder, names joined by `/`. Returns each entry's
    /// id, or 4294967295 where the index refused it (skip what is under it).
    #[wasm_bindgen(js_name = addEntries)]
    pub fn add_entries(
        &self,
        parents: &[u32],
        dirs: &[u8],
        sizes: &[f64],
        mtimes_ms: &[f64],
        names: &str,
    ) -> Result<Vec<u32>, JsError> {
        let names = split_names(names, parents.len());
        let found = found_of(parents, dirs, sizes, mtimes_ms, &names)?;
        let ids = folder::add(&mut self.host.borrow_mut().index, &found);
        pump(&self.host);
        Ok(ids)
    }

    /// Starts a rescan: the folder is listed again with `rescanAdd` (as with
    /// `addEntries`, ids of the rescan's own), then `rescanDone` brings the
    /// share in line with it.
    #[wasm_bindgen(js_name = rescanBegin)]
    pub fn rescan_begin(&self, folder_name: &str) -> Result<(), JsError> {
        let mut fresh = ShareIndex::new(Epoch(0));
        folder::root(&mut fresh, folder_name, 0.0);
        self.host.borrow_mut().fresh = Some(fresh);
        Ok(())
    }

    /// A batch of the rescan's listing (see `addEntries`).
    #[wasm_bindgen(js_name = rescanAdd)]
    pub fn rescan_add(
        &self,
        parents: &[u32],
        dirs: &[u8],
        sizes: &[f64],
        mtimes_ms: &[f64],
        names: &str,
    ) -> Result<Vec<u32>, JsError> {
        let names = split_names(names, parents.len());
        let found = found_of(parents, dirs, sizes, mtimes_ms, &names)?;
        let mut h = self.host.borrow_mut();
        let fresh = h
            .fresh
            .as_mut()
            .ok_or_else(|| JsError::new("rescanAdd: no rescan was begun"))?;
        Ok(folder::add(fresh, &found))
    }

    /// The rescan's listing is whole: the share follows it (visitors hear of
    /// what changed).
    #[wasm_bindgen(js_name = rescanDone)]
    pub fn rescan_done(&self) -> Result<Ts<RescanDone>, JsError> {
        let done = {
            let mut guard = self.host.borrow_mut();
            let h = &mut *guard;
            let fresh = h
                .fresh
                .take()
                .ok_or_else(|| JsError::new("rescanDone: no rescan was begun"))?;
            let (pairs, changed) = rescan::reconcile(&mut h.index, &fresh);
            RescanDone {
                pairs: pairs.into_iter().flat_map(|(f, i)| [f, i]).collect(),
                added: changed.added as f64,
                updated: changed.updated as f64,
                removed: changed.removed as f64,
            }
        };
        pump(&self.host);
        Ok(done.into_ts()?)
    }

    /// The walk is over: visitors are told the listing is complete.
    #[wasm_bindgen(js_name = walkDone)]
    pub fn walk_done(&self) {
        self.host.borrow_mut().index.mark_snapshot_complete();
        pump(&self.host);
    }

    /// Paths (relative to the folder, `/`-separated) the browser said changed
    /// on disk: they settle (as the native sharer's do), then `Settled` asks
    /// the page to look at them.
    #[wasm_bindgen(js_name = pathsChanged)]
    pub fn paths_changed(&self, paths: Vec<String>) {
        {
            let mut h = self.host.borrow_mut();
            let now = h.now().mono;
            for p in &paths {
                h.settler.event(now, p.as_bytes());
            }
        }
        pump(&self.host);
    }

    /// The browser lost changes: the whole folder is compared once things are quiet.
    #[wasm_bindgen(js_name = changesLost)]
    pub fn changes_lost(&self) {
        {
            let mut h = self.host.borrow_mut();
            let now = h.now().mono;
            h.settler.overflow(now);
        }
        pump(&self.host);
    }

    /// What the page found at settled paths: `kinds[i]` 0 gone, 1 a file
    /// (`sizes[i]`, `mtimes_ms[i]`), 2 a folder. The index follows; returns for
    /// each path the id of an entry it added (the page keeps its source, and
    /// lists a new folder with `addEntries`), or 4294967295.
    #[wasm_bindgen(js_name = applyLooked)]
    pub fn apply_looked(
        &self,
        paths: Vec<String>,
        kinds: &[u8],
        sizes: &[f64],
        mtimes_ms: &[f64],
    ) -> Result<Vec<u32>, JsError> {
        let n = paths.len();
        if kinds.len() != n || sizes.len() != n || mtimes_ms.len() != n {
            return Err(JsError::new(
                "applyLooked: paths, kinds, sizes and mtimes differ in length",
            ));
        }
        let ids = {
            let mut h = self.host.borrow_mut();
            let folder_time = h.started_unix_ms;
            let looked: Vec<(&str, folder::Looked)> = (0..n)
                .map(|i| {
                    let found = match kinds[i] {
                        0 => folder::Looked::Gone,
                        1 => folder::Looked::File {
                            size: sizes[i],
                            mtime_ms: mtimes_ms[i],
                        },
                        _ => folder::Looked::Dir,
                    };
                    (paths[i].as_str(), found)
                })
                .collect();
            folder::apply_all(&mut h.index, &looked, folder_time)
        };
        pump(&self.host);
        Ok(ids)
    }

    /// Entries in the share now (the folder itself included).
    pub fn entries(&self) -> f64 {
        self.host.borrow().index.entries() as f64
    }

    /// Bytes the share's index holds (for the memory figures).
    #[wasm_bindgen(js_name = indexBytes)]
    pub fn index_bytes(&self) -> f64 {
        self.host.borrow().index.heap_bytes() as f64
    }

    /// Parts of the share held for links that show one (a folder, a selection).
    #[wasm_bindgen(js_name = partsHeld)]
    pub fn parts_held(&self) -> u32 {
        self.host.borrow().parts.len() as u32
    }

    /// Whether the relay holds the room now.
    pub fn registered(&self) -> bool {
        self.host.borrow().registered
    }

    /// The visitors now.
    pub fn visitors(&self) -> Result<Vec<Ts<TabVisitor>>, JsError> {
        let rows = self.host.borrow().visitor_rows();
        Ok(rows
            .into_iter()
            .map(|r| r.into_ts())
            .collect::<Result<_, _>>()?)
    }

    /// Visitor `peer`'s connection statistics (an `RTCStatsReport` Promise:
    /// direct or through TURN), or undefined if it is gone.
    #[wasm_bindgen(js_name = visitorStats)]
    pub fn visitor_stats(&self, peer: u32) -> Option<js_sys::Promise> {
        self.host
            .borrow()
            .guests
            .get(&PeerId(peer))
            .and_then(|g| g.link.stats())
    }

    /// Sends a visitor away (it is told so).
    pub fn kick(&self, peer: u32) -> Result<(), JsError> {
        {
            let mut h = self.host.borrow_mut();
            let now = h.now();
            h.share
                .kick(now, PeerId(peer))
                .map_err(|e| JsError::new(&e.to_string()))?;
        }
        pump(&self.host);
        Ok(())
    }

    /// Stops sharing: every visitor is told "the sharer stopped sharing"
    /// (what can be sent before the tab goes), and the relay line closes.
    pub fn stop(&self) {
        {
            let mut h = self.host.borrow_mut();
            if h.stopped {
                return;
            }
            h.stopped = true;
            for g in h.guests.values_mut() {
                match &mut g.phase {
                    Phase::Serving(s) => s.close(STOPPED),
                    Phase::Gone => {}
                    _ => {
                        let goodbye = SenderToReceiver::Goodbye(Goodbye {
                            code: GoodbyeCode::ShuttingDown,
                            message: STOPPED.into(),
                        });
                        g.link.send(&goodbye.encode());
                        g.link.close();
                    }
                }
            }
        }
        pump(&self.host);
        let mut h = self.host.borrow_mut();
        h.relay.close();
        for g in h.guests.values_mut() {
            g.link.close();
        }
        if let (Some((_, handle)), Some(w)) = (h.timer.take(), web_sys::window()) {
            w.clear_timeout_with_handle(handle);
        }
    }
}

/// A batch's names, joined by `/` (which no name holds).
fn split_names(names: &str, n: usize) -> Vec<&str> {
    if names.is_empty() && n == 0 {
        Vec::new()
    } else {
        names.split('/').collect()
    }
}

/// A batch of what a listing found, its arrays checked against each other.
fn found_of<'a>(
    parents: &[u32],
    dirs: &[u8],
    sizes: &[f64],
    mtimes_ms: &[f64],
    names: &[&'a str],
) -> Result<Vec<folder::Found<'a>>, JsError> {
    let n = parents.len();
    if dirs.len() != n || sizes.len() != n || mtimes_ms.len() != n || names.len() != n {
        return Err(JsError::new(
            "a listing's parents, dirs, sizes, mtimes and names differ in length",
        ));
    }
    Ok((0..n)
        .map(|i| folder::Found {
            parent: parents[i],
            dir: dirs[i] != 0,
            name: names[i],
            size: sizes[i],
            mtime_ms: mtimes_ms[i],
        })
        .collect())
}

/// `<seed hex>.<secret>` as `kept()` wrote it.
fn parse_kept(text: &str) -> Option<([u8; 32], [u8; 16])> {
    let (seed, secret) = text.split_once('.')?;
    let seed: [u8; 32] = hex::decode(seed).ok()?.try_into().ok()?;
    let secret = ShareSecret::decode(secret).ok()?;
    Some((seed, *secret.as_bytes()))
}

fn random<const N: usize>() -> Result<[u8; N], JsError> {
    let mut b = [0u8; N];
    getrandom::getrandom(&mut b).map_err(|_| {
        JsError::new("this browser has no secure random numbers (crypto.getRandomValues)")
    })?;
    Ok(b)
}
