//! The sharer's desk: the share's links and who came through them. The
//! share loop hands it the control socket's requests ([`super::control`]),
//! visitors as they are admitted and leave, and the time; it tells the
//! host's signaling machine which links admit whom, and ends the sessions of
//! a link that is withdrawn or expires, or of a visitor sent away, with a
//! goodbye that says so.
//!
//! ```text
//! control request --> Desk::handle(request, host, now) --> Answer
//! admitted(peer, link) --> a ServeContext whose cancel and farewell are the visitor's own
//! lane(peer) / left(peer)
//! next_expiry() --> the loop sleeps until then --> expire(host, now)
//! ```
//!
//! Revoking a link or a visitor's expiry: its key ends in the host's machine
//! first (no new guest of it gets further), then each of its visitors is told
//! why and its session closes (the goodbye goes out first; the drive loop
//! gives it [`crate::drive`]'s goodbye time).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use linkfs_core::{HostSignaling, LinkId, Selection, SettleConfig, ShareLink, ShareSecret};
use linkfs_proto::signal::PeerId;
use linkfs_proto::{Epoch, GoodbyeCode};
use tokio::sync::{mpsc, watch};

use super::activity::{ActivityLog, VisitorWatch};
use super::control::{Answer, LinkView, Request, VisitorView};
use super::event::ShareEvent;
use super::intake::{UploadLedger, UploadPlace};
use super::landing::Dock;
use super::live_index::{IndexStart, LiveIndex};
use super::password::LinkPassword;
use super::serve::{Farewell, ServeContext};
use super::share_state::ShareState;
use linkfs_core::share::links::{EndedWhy, LinkRecord, Links, UploadRights, parse_expiry};
use std::sync::Arc;

/// What a scoped link's visitor is told when its folder cannot be shown.
pub const SCOPE_GONE: &str =
    "The folder this link shows is not there any more. Ask the sharer for a new link.";

/// A folder shown as the root of the links scoped to it: its own walk,
/// watch and index (nothing above or beside it is ever read), shared by
/// every link with that scope.
#[derive(Debug)]
struct ScopeView {
    live: LiveIndex,
    ctx: ServeContext,
}

/// What a link shows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Shown {
    /// The whole share (the main link's view).
    Whole,
    /// One folder, as the link's root.
    Folder(String),
    /// Several paths (or a file), at their places under the share's root.
    Selection(Vec<String>),
}

impl Shown {
    /// What `record` shows.
    fn of(record: &LinkRecord) -> Shown {
        if !record.selection.is_empty() {
            Shown::Selection(record.selection.clone())
        } else if record.scope.is_empty() {
            Shown::Whole
        } else {
            Shown::Folder(record.scope.clone())
        }
    }

    /// As [`LinkRecord::view_key`] has it.
    fn key(&self) -> String {
        match self {
            Shown::Whole => String::new(),
            Shown::Folder(scope) => scope.clone(),
            Shown::Selection(paths) => paths.iter().map(|p| format!("\0{p}")).collect(),
        }
    }
}

/// What the desk needs to show a folder of the share on its own.
#[derive(Debug, Clone)]
pub struct Scoping {
    /// The shared folder.
    pub root: PathBuf,
    pub watch: bool,
    pub settle: SettleConfig,
    pub events: mpsc::Sender<ShareEvent>,
    /// `--activity-log`.
    pub log: Option<ActivityLog>,
}

/// What a visitor sent away is told.
pub const SENT_AWAY: &str =
    "The sharer disconnected you. Open the link again if they let you back.";

/// One admitted visitor.
#[derive(Debug)]
struct Visitor {
    link: LinkId,
    since: u64,
    connected: bool,
    ctx: ServeContext,
    watch: Arc<VisitorWatch>,
}

/// See the module docs.
#[derive(Debug)]
pub struct Desk {
    main: ShareLink,
    links: Links,
    visitors: BTreeMap<PeerId, Visitor>,
    /// Every visitor's session context starts from this (the whole share).
    base: ServeContext,
    scoping: Scoping,
    scopes: HashMap<String, ScopeView>,
    /// The passwords of links that have one, by link id.
    passwords: HashMap<LinkId, Arc<LinkPassword>>,
    /// Bytes served to the main link's visitors who left, since the start.
    main_served: u64,
    /// Each upload link's caps and what it took, shared by its sessions.
    ledgers: HashMap<LinkId, Arc<UploadLedger>>,
    /// Where uploads land (opened with the first upload link's visitor).
    dock: Option<Dock>,
}

impl Desk {
    /// The desk of a share whose main link is `main` (its origin is the one
    /// printed), with the links kept from earlier runs; each is told to `host`.
    pub fn new(
        main: ShareLink,
        links: Links,
        host: &mut HostSignaling,
        base: ServeContext,
        scoping: Scoping,
    ) -> Desk {
        for l in links.all() {
            let Some(secret) = l.secret() else { continue };
            if host.add_link(l.link_id(), &secret).is_err() {
                continue;
            }
            host.set_asks_password(l.link_id(), l.password.is_some());
            if let Some(end) = l.end() {
                host.end_link(l.link_id(), end);
            }
        }
        let mut desk = Desk {
            main,
            links,
            visitors: BTreeMap::new(),
            base,
            scoping,
            scopes: HashMap::new(),
            passwords: HashMap::new(),
            main_served: 0,
            ledgers: HashMap::new(),
            dock: None,
        };
        let passwords: Vec<(LinkId, String)> = desk
            .links
            .live()
            .filter_map(|l| l.password.clone().map(|h| (l.id, h)))
            .collect();
        for (id, hash) in passwords {
            desk.passwords.insert(id, Arc::new(LinkPassword::new(hash)));
        }
        let shown: Vec<Shown> = desk.links.live().map(Shown::of).collect();
        for shown in shown {
            let _ = desk.view_of(&shown);
        }
        desk
    }

    /// The session context of what a link shows, its view started if it is
    /// not yet (the whole share's is the base one).
    fn view_of(&mut self, shown: &Shown) -> Result<&ServeContext, String> {
        let key = shown.key();
        if *shown == Shown::Whole {
            return Ok(&self.base);
        }
        if !self.scopes.contains_key(&key) {
            let (folder, selection) = match shown {
                Shown::Folder(scope) => (scope_folder(&self.scoping.root, scope)?, None),
                Shown::Selection(paths) => {
                    for p in paths {
                        selected_path(&self.scoping.root, p)?;
                    }
                    let selection = Selection::new(paths).map_err(|e| e.to_string())?;
                    (self.scoping.root.clone(), Some(Arc::new(selection)))
                }
                Shown::Whole => unreachable!("the whole share's view is the base one"),
            };
            let epoch = Epoch(u64::from_le_bytes(
                crate::random::random_bytes().map_err(|e| e.to_string())?,
            ));
            let (progress, _) = watch::channel(Default::default());
            let live = LiveIndex::start_selected(
                &folder,
                selection.clone(),
                IndexStart::Walk(epoch),
                self.scoping.watch,
                self.scoping.settle,
                progress,
                self.scoping.events.clone(),
            )
            .map_err(|e| e.to_string())?;
            let mut ctx = self.base.clone();
            ctx.index = live.index.clone();
            ctx.index_changed = live.changed.clone();
            ctx.root = live.root.clone();
            ctx.config.confine_symlinks = true;
            ctx.config.selection = selection;
            self.scopes.insert(key.clone(), ScopeView { live, ctx });
        }
        self.scopes
            .get(&key)
            .map(|v| &v.ctx)
            .ok_or_else(|| "no such scope".into())
    }

    /// What a link asked for with `scope` (one path: a folder becomes the
    /// root, a file a selection of one) and `selection` (several paths)
    /// shows, checked against the share.
    fn rights(&self, scope: Option<&str>, selection: &[String]) -> Result<Shown, String> {
        let mut paths: Vec<String> = selection
            .iter()
            .map(|p| normal_scope(p))
            .collect::<Result<_, _>>()?;
        let scope = scope.map(normal_scope).transpose()?.unwrap_or_default();
        if paths.is_empty() {
            if scope.is_empty() {
                return Ok(Shown::Whole);
            }
            if selected_path(&self.scoping.root, &scope)? {
                return Ok(Shown::Folder(scope));
            }
            return Ok(Shown::Selection(vec![scope]));
        }
        if !scope.is_empty() {
            paths.push(scope);
        }
        if paths.iter().any(String::is_empty) {
            return Err("a selection names paths inside the share; '/' is the whole share: give no --scope for it".into());
        }
        for p in &paths {
            selected_path(&self.scoping.root, p)?;
        }
        let selection = Selection::new(&paths).map_err(|e| e.to_string())?;
        Ok(Shown::Selection(
            selection
                .paths()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect(),
        ))
    }

    /// Stops every scope's walk and watch.
    pub async fn stop(self) {
        for (_, view) in self.scopes {
            view.live.stop().await;
        }
    }

    pub fn links(&self) -> &Links {
        &self.links
    }

    /// Whether what `link` shows can be shown now; else the words its visitor is told.
    pub fn can_show(&mut self, link: LinkId) -> Result<(), String> {
        let shown = self.links.get(link).map_or(Shown::Whole, Shown::of);
        self.view_of(&shown)
            .map(|_| ())
            .map_err(|_| SCOPE_GONE.to_owned())
    }

    /// A visitor admitted through `link`: its own cancel token and farewell
    /// beside what its link shows (the whole share, or its scope's view).
    pub fn admitted(&mut self, peer: PeerId, link: LinkId, now: u64) -> ServeContext {
        let shown = self.links.get(link).map_or(Shown::Whole, Shown::of);
        let shown = self.view_of(&shown).cloned();
        let mut ctx = shown.clone().unwrap_or_else(|_| self.base.clone());
        ctx.cancel = self.base.cancel.child_token();
        ctx.farewell = Farewell::default();
        let watch = Arc::new(VisitorWatch::new(
            peer.0,
            link.0,
            self.label_of(link),
            self.scoping.log.clone(),
        ));
        ctx.watch = Some(watch.clone());
        ctx.password = self.passwords.get(&link).cloned();
        self.give_upload_rights(link, &mut ctx);
        if shown.is_err() {
            // Never the whole share instead: the visitor is told, at once.
            ctx.farewell
                .set(GoodbyeCode::LinkWithdrawn, SCOPE_GONE.into());
            ctx.cancel.cancel();
        }
        self.visitors.insert(
            peer,
            Visitor {
                link,
                since: now,
                connected: false,
                ctx: ctx.clone(),
                watch,
            },
        );
        ctx
    }

    /// A visitor of an upload link: what it may add, where it lands, and
    /// (a drop link) an index that shows nothing of the share.
    fn give_upload_rights(&mut self, link: LinkId, ctx: &mut ServeContext) {
        let Some(record) = self.links.get(link) else {
            return;
        };
        let Some(rights) = record.upload else {
            return;
        };
        let drop_link = rights.drop;
        // A drop link's files land in its own folder, apart from the sharer's.
        let folder = match record.drop_folder() {
            Some(own) if record.scope.is_empty() => own,
            Some(own) => format!("{}/{own}", record.scope),
            None => record.scope.clone(),
        };
        let ledger = self
            .ledgers
            .entry(link)
            .or_insert_with(|| {
                Arc::new(UploadLedger::new(
                    rights.max_bytes,
                    rights.max_files,
                    rights.added_bytes,
                    rights.added_files,
                    rights.received_bytes,
                ))
            })
            .clone();
        if self.dock.is_none() {
            match Dock::open(&self.scoping.root) {
                Ok(dock) => {
                    // Parts left by uploads cut off are bounded (age, bytes, count).
                    let _ = dock.trim(std::time::SystemTime::now());
                    self.dock = Some(dock);
                }
                Err(e) => {
                    let _ = self.scoping.events.try_send(ShareEvent::Warning(format!(
                        "visitors cannot add files: {e}"
                    )));
                }
            }
        }
        let (bytes_left, files_left) = ledger.left();
        ctx.config.rights = linkfs_proto::Rights {
            list: !drop_link,
            upload: self.dock.is_some(),
            max_file: rights.max_file,
            bytes_left,
            files_left,
        };
        ctx.config.upload_names = linkfs_core::upload_name::NameRules {
            hidden: rights.hidden,
        };
        ctx.intake = self.dock.clone().map(|dock| UploadPlace {
            dock,
            folder,
            link: link.0,
            ledger,
            drop: drop_link,
        });
        if drop_link {
            let (index, changed) = nothing_shown(&record.label);
            ctx.index = index;
            ctx.index_changed = changed;
        }
    }

    /// `peer`'s link opened: how to name it to the sharer.
    pub fn connected(&mut self, peer: PeerId) -> String {
        let Some(v) = self.visitors.get_mut(&peer) else {
            return format!("visitor {}", peer.0);
        };
        v.connected = true;
        v.watch.joined();
        self.who(peer)
    }

    /// "visitor 4 (link 1, for Ann)".
    fn who(&self, peer: PeerId) -> String {
        match self.visitors.get(&peer) {
            Some(v) if v.link == LinkId(0) => format!("visitor {} (main link)", peer.0),
            Some(v) => {
                let label = self.label_of(v.link);
                if label.is_empty() {
                    format!("visitor {} (link {})", peer.0, v.link.0)
                } else {
                    format!("visitor {} (link {}, {label})", peer.0, v.link.0)
                }
            }
            None => format!("visitor {}", peer.0),
        }
    }

    /// `peer` turned out to be a lane of another visitor's link: not a
    /// visitor of its own (it ends with that visitor's session).
    pub fn lane(&mut self, peer: PeerId) {
        self.visitors.remove(&peer);
    }

    /// `peer` left (`why`, in words): how to name it, and the bytes it was served.
    pub fn left(&mut self, peer: PeerId, why: &str) -> (String, u64) {
        let who = self.who(peer);
        match self.visitors.remove(&peer) {
            Some(v) => {
                if v.connected {
                    v.watch.left(why);
                }
                let served = v.watch.doing().bytes_served;
                if let (Some(ledger), Some(mut rights)) = (
                    self.ledgers.get(&v.link),
                    self.links.get(v.link).and_then(|l| l.upload),
                ) {
                    (
                        rights.added_bytes,
                        rights.added_files,
                        rights.received_bytes,
                    ) = ledger.added();
                    self.links.set_upload(v.link, Some(rights));
                }
                if v.link == LinkId(0) {
                    self.main_served = self.main_served.saturating_add(served);
                } else {
                    self.links.add_served(v.link, served);
                }
                (who, served)
            }
            None => (who, 0),
        }
    }

    /// When the next live link expires (unix seconds).
    pub fn next_expiry(&self) -> Option<u64> {
        self.links.next_expiry()
    }

    /// Ends the links whose time ran out by `now`: their ids.
    pub fn expire(&mut self, host: &mut HostSignaling, now: u64) -> Vec<LinkId> {
        let due = self.links.expire_due(now);
        for id in &due {
            self.end_link(host, *id);
        }
        due
    }

    fn end_link(&mut self, host: &mut HostSignaling, id: LinkId) {
        let Some(record) = self.links.get(id) else {
            return;
        };
        let Some(end) = record.end() else { return };
        let code = match record.ended.map(|e| e.why) {
            Some(EndedWhy::Expired) => GoodbyeCode::LinkExpired,
            _ => GoodbyeCode::LinkWithdrawn,
        };
        let words = match &end {
            linkfs_core::LinkEnd::Withdrawn { words } | linkfs_core::LinkEnd::Expired { words } => {
                words.clone()
            }
            _ => String::new(),
        };
        host.end_link(id, end);
        for v in self.visitors.values().filter(|v| v.link == id) {
            v.ctx.farewell.set(code, words.clone());
            v.ctx.cancel.cancel();
        }
    }

    /// One request from the control socket. `secret` makes a new link's
    /// secret; links are kept in `state` after every change.
    pub fn handle(
        &mut self,
        request: Request,
        host: &mut HostSignaling,
        state: Option<&ShareState>,
        secret: impl FnOnce() -> Option<ShareSecret>,
        now: u64,
    ) -> Answer {
        let answer = match request {
            Request::List => Answer {
                links: self.link_views(),
                ..Answer::done("")
            },
            Request::Visitors => Answer {
                visitors: self.visitor_views(),
                ..Answer::done("")
            },
            Request::Add {
                label,
                expires,
                scope,
                selection,
                upload,
                password,
            } => {
                let shown = match self.rights(scope.as_deref(), &selection) {
                    Ok(shown) => shown,
                    Err(words) => return Answer::failed(words),
                };
                let record = match self.add_link(
                    host,
                    &label,
                    expires.as_deref(),
                    &shown,
                    upload,
                    password.as_deref(),
                    false,
                    secret,
                    now,
                ) {
                    Ok(r) => r,
                    Err(words) => return Answer::failed(words),
                };
                Answer {
                    links: vec![self.view(&record)],
                    ..Answer::done(format!("link {} added", record.id))
                }
            }
            Request::Revoke { id } => match self.links.revoke(id, now) {
                Ok(_) => {
                    let gone = self.visitors_of(id);
                    self.end_link(host, id);
                    Answer::done(format!(
                        "link {id} withdrawn; {gone} visitor{} disconnected",
                        if gone == 1 { "" } else { "s" }
                    ))
                }
                Err(e) => return Answer::failed(e),
            },
            Request::Kick { visitor } => match self.visitors.get(&PeerId(visitor)) {
                Some(v) => {
                    v.ctx.farewell.set(GoodbyeCode::SentAway, SENT_AWAY.into());
                    v.ctx.cancel.cancel();
                    Answer::done(format!("visitor {visitor} disconnected"))
                }
                None => {
                    return Answer::failed(format!(
                        "there is no visitor {visitor} now (`linkfs visitors` lists them)"
                    ));
                }
            },
        };
        if let Some(state) = state
            && let Err(e) = state.keep_links(&self.links)
        {
            return Answer {
                said: format!(
                    "{}; but the links could not be kept for the next run: {e}",
                    answer.said
                ),
                ..answer
            };
        }
        answer
    }

    /// A new link (checked, told to `host`); `started`: asked for on
    /// `linkfs share`'s command line.
    #[allow(clippy::too_many_arguments)]
    fn add_link(
        &mut self,
        host: &mut HostSignaling,
        label: &str,
        expires: Option<&str>,
        shown: &Shown,
        upload: Option<UploadRights>,
        password: Option<&str>,
        started: bool,
        secret: impl FnOnce() -> Option<ShareSecret>,
        now: u64,
    ) -> Result<LinkRecord, String> {
        let expires = expires
            .map(|e| parse_expiry(e, now))
            .transpose()
            .map_err(|e| e.to_string())?;
        if password.is_some_and(str::is_empty) {
            return Err("an empty password is no password: give one, or none".into());
        }
        let hash = password.map(super::password::hash).transpose()?;
        if upload.is_some() && matches!(shown, Shown::Selection(_)) {
            return Err("a link that selects paths cannot take files: give it one folder (--scope DIR) or the whole share".into());
        }
        self.view_of(shown)?;
        let (scope, selection) = match shown {
            Shown::Whole => (String::new(), Vec::new()),
            Shown::Folder(scope) => (scope.clone(), Vec::new()),
            Shown::Selection(paths) => (String::new(), paths.clone()),
        };
        let secret = secret().ok_or("no secure random numbers for the link's secret")?;
        let mut record = self
            .links
            .add(label, expires, &scope, secret.clone(), now)
            .map_err(|e| e.to_string())?
            .clone();
        if !selection.is_empty() {
            self.links.set_selection(record.id, selection.clone());
            record.selection = selection;
        }
        if let Some(upload) = upload {
            let upload = UploadRights {
                added_bytes: 0,
                added_files: 0,
                received_bytes: 0,
                ..upload
            };
            self.links.set_upload(record.id, Some(upload));
            record.upload = Some(upload);
            if let Some(kept) = self.links.get(record.id) {
                record.drop_folder = kept.drop_folder.clone();
            }
        }
        if let Err(e) = host.add_link(record.link_id(), &secret) {
            let _ = self.links.revoke(record.id, now);
            return Err(e.to_string());
        }
        if started {
            self.links.mark_started(record.id);
            record.started = true;
        }
        if let Some(hash) = hash {
            self.links.set_password(record.id, hash.clone());
            self.passwords
                .insert(record.id, Arc::new(LinkPassword::new(hash.clone())));
            record.password = Some(hash);
            host.set_asks_password(record.link_id(), true);
        }
        Ok(record)
    }

    /// The link `linkfs share` prints when its command line gives rights:
    /// a live one it printed before with the same label and scope, or a new
    /// one. Kept in `state`.
    pub fn start_link(
        &mut self,
        host: &mut HostSignaling,
        state: Option<&ShareState>,
        start: &super::event::StartLink,
        now: u64,
    ) -> Result<ShareLink, String> {
        let shown = match start.scopes.as_slice() {
            [] => Shown::Whole,
            [one] => self.rights(Some(one), &[])?,
            several => self.rights(None, several)?,
        };
        let same_password = |l: &LinkRecord| match (&l.password, &start.password) {
            (None, None) => true,
            (Some(h), Some(p)) => super::password::matches(h, p),
            _ => false,
        };
        let kept = self
            .links
            .live()
            .find(|l| {
                l.started
                    && l.label == start.label
                    && l.view_key() == shown.key()
                    && l.upload
                        .map(|u| (u.drop, u.max_bytes, u.max_files, u.max_file))
                        == start
                            .upload
                            .map(|u| (u.drop, u.max_bytes, u.max_files, u.max_file))
                    && same_password(l)
            })
            .cloned();
        let record = match kept {
            Some(r) => r,
            None => {
                let secret = || {
                    crate::random::random_bytes()
                        .ok()
                        .map(ShareSecret::from_bytes)
                };
                let r = self.add_link(
                    host,
                    &start.label,
                    start.expires.as_deref(),
                    &shown,
                    start.upload,
                    start.password.as_deref(),
                    true,
                    secret,
                    now,
                )?;
                if let Some(state) = state {
                    state.keep_links(&self.links).map_err(|e| e.to_string())?;
                }
                r
            }
        };
        let secret = record.secret().ok_or("the kept link's secret is damaged")?;
        Ok(ShareLink {
            secret,
            ..self.main.clone()
        })
    }

    fn visitors_of(&self, link: LinkId) -> usize {
        self.visitors.values().filter(|v| v.link == link).count()
    }

    /// Bytes served to `link`'s visitors connected now.
    fn serving_now(&self, link: LinkId) -> u64 {
        self.visitors
            .values()
            .filter(|v| v.link == link)
            .map(|v| v.watch.doing().bytes_served)
            .sum()
    }

    fn url_of(&self, secret: &str) -> String {
        match ShareSecret::decode(secret) {
            Ok(secret) => ShareLink {
                secret,
                ..self.main.clone()
            }
            .to_url(),
            Err(_) => String::new(),
        }
    }

    fn view(&self, l: &LinkRecord) -> LinkView {
        LinkView {
            id: l.id,
            label: l.label.clone(),
            url: self.url_of(&l.secret),
            scope: l.scope.clone(),
            selection: l.selection.clone(),
            upload: l.upload,
            drop_folder: l.drop_folder().map(|own| {
                if l.scope.is_empty() {
                    own
                } else {
                    format!("{}/{own}", l.scope)
                }
            }),
            password: l.password.is_some(),
            created: Some(l.created),
            expires: l.expires,
            ended: l.ended.map(|e| match e.why {
                EndedWhy::Withdrawn => "withdrawn".into(),
                EndedWhy::Expired => "expired".into(),
            }),
            visitors: self.visitors_of(l.link_id()),
            bytes_served: l.served + self.serving_now(l.link_id()),
        }
    }

    fn link_views(&self) -> Vec<LinkView> {
        let main = LinkView {
            id: LinkId(0),
            label: "main".into(),
            url: self.main.to_url(),
            scope: String::new(),
            selection: Vec::new(),
            upload: None,
            drop_folder: None,
            password: false,
            created: None,
            expires: None,
            ended: None,
            visitors: self.visitors_of(LinkId(0)),
            bytes_served: self.main_served + self.serving_now(LinkId(0)),
        };
        std::iter::once(main)
            .chain(self.links.all().iter().map(|l| self.view(l)))
            .collect()
    }

    fn label_of(&self, link: LinkId) -> String {
        if link == LinkId(0) {
            return "main".into();
        }
        self.links
            .get(link)
            .map(|l| l.label.clone())
            .unwrap_or_default()
    }

    fn visitor_views(&self) -> Vec<VisitorView> {
        self.visitors
            .iter()
            .map(|(peer, v)| {
                let doing = v.watch.doing();
                VisitorView {
                    visitor: peer.0,
                    link: v.link,
                    link_label: self.label_of(v.link),
                    since: v.since,
                    connected: v.connected,
                    route: doing.route,
                    bytes_served: doing.bytes_served,
                    reading: doing.reading,
                    files_uploaded: doing.files_uploaded,
                    bytes_uploaded: doing.bytes_uploaded,
                }
            })
            .collect()
    }
}

/// The index a drop link's visitors get: its root folder (named after the
/// link's label) and nothing else.
fn nothing_shown(
    label: &str,
) -> (
    Arc<std::sync::RwLock<linkfs_core::ShareIndex>>,
    watch::Receiver<u64>,
) {
    let epoch = Epoch(u64::from_le_bytes(
        crate::random::random_bytes().unwrap_or([7; 8]),
    ));
    let mut index = linkfs_core::ShareIndex::new(epoch);
    let name = if label.is_empty() { "Add files" } else { label };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let _ = index.push(&linkfs_core::NewEntry {
        id: linkfs_proto::EntryId::ROOT,
        parent: linkfs_proto::EntryId::ROOT,
        kind: linkfs_proto::EntryKind::Dir,
        name: name.as_bytes(),
        size: 0,
        mtime: now,
        mtime_nsec: 0,
        mode: 0o755,
        target: b"",
        dev: 0,
        ino: 0,
        ctime_ns: 0,
    });
    index.mark_snapshot_complete();
    let (tx, rx) = watch::channel(0);
    drop(tx);
    (Arc::new(std::sync::RwLock::new(index)), rx)
}

/// A scope as given (`a/b`, `/a/b/`, `./a//b`): its '/'-separated form
/// relative to the shared folder, or why it cannot be one.
pub fn normal_scope(text: &str) -> Result<String, String> {
    let mut parts = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(format!(
                    "the scope '{text}' climbs out with '..': give a folder inside the share, relative to it"
                ));
            }
            p if p.contains('\0') => return Err("a scope cannot contain NUL".into()),
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

/// Whether the path `rel` of the share names a folder (else a file): every
/// component on the way a real folder, none (itself included) a symlink.
pub fn selected_path(root: &Path, rel: &str) -> Result<bool, String> {
    let mut at = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        let meta = std::fs::symlink_metadata(&at)
            .map_err(|e| format!("'{rel}' is not in the share ({e})"))?;
        if meta.file_type().is_symlink() {
            return Err(format!(
                "'{rel}' goes through a symlink ({part}): give what it points to, inside the share"
            ));
        }
        let last = i + 1 == parts.len();
        if meta.is_dir() {
            continue;
        }
        if !last {
            return Err(format!("'{rel}' is not in the share ({part} is a file)"));
        }
        if !meta.is_file() {
            return Err(format!("'{rel}' is neither a file nor a folder"));
        }
        return Ok(false);
    }
    Ok(true)
}

/// The folder `scope` names inside `root`: every component a real folder,
/// none a symlink (a scope shows only what is inside it).
pub fn scope_folder(root: &Path, scope: &str) -> Result<PathBuf, String> {
    let mut at = root.to_path_buf();
    for part in scope.split('/').filter(|p| !p.is_empty()) {
        at.push(part);
        let meta = std::fs::symlink_metadata(&at)
            .map_err(|e| format!("the scope '{scope}' is not a folder of the share ({e})"))?;
        if meta.file_type().is_symlink() {
            return Err(format!(
                "the scope '{scope}' goes through a symlink ({part}): give the folder itself"
            ));
        }
        if !meta.is_dir() {
            return Err(format!(
                "the scope '{scope}' is not a folder ({part} is a file)"
            ));
        }
    }
    Ok(at)
}
