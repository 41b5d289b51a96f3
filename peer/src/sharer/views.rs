//! What each link shows and what each visitor holds, on the sharer's side:
//! the IO half of the share's links. Who may come, when a link ends and who
//! is sent away are decided by core's [`linkfs_core::share::Share`]; this
//! keeps the walks, watches, upload places and figures those decisions need.
//!
//! ```text
//! the share says Answer { peer, link } --> admit(peer, link, record) --> its ServeContext:
//!      its link's view (the whole share; a folder's own walk and watch; a
//!      selection's), its upload place and ledger, its figures
//!      (or Err: what its link shows is gone -> the share's cannot_show)
//! the share says StartSession          --> joined(peer)
//! the share says EndVisitor            --> end(peer, code, words): the farewell, then its cancel
//! its task ended                       --> left(peer, why) -> Figures, for the share
//! ```
//!
//! Bounds: one view per distinct thing the live links show (the links
//! bound them), one seat per visitor the share admitted.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use linkfs_core::share::Figures;
use linkfs_core::share::links::{LinkRecord, Links};
use linkfs_core::share::rights::{RightsError, Shown, normal_scope};
use linkfs_core::{LinkId, Selection, SelectionError, SettleConfig};
use linkfs_proto::signal::PeerId;
use linkfs_proto::{Epoch, GoodbyeCode};
use tokio::sync::{mpsc, watch};

use super::activity::{ActivityLog, Doing, VisitorWatch};
use super::event::{ShareError, ShareEvent};
use super::intake::{UploadLedger, UploadPlace};
use super::landing::Dock;
use super::live_index::{IndexStart, LiveIndex};
use super::serve::{Farewell, ServeContext};
use super::shown_paths::{PathError, scope_folder, selected_path};
use crate::random::RandomError;

/// Why what a link names cannot be shown.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    #[error(transparent)]
    Rights(#[from] RightsError),
    #[error(transparent)]
    Path(#[from] PathError),
    #[error(transparent)]
    Selection(#[from] SelectionError),
    #[error(transparent)]
    Start(Box<ShareError>),
    #[error(transparent)]
    Random(#[from] RandomError),
}

/// What the views need to show a part of the share on its own.
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

/// A part of the share shown as the root of the links showing it: its own
/// walk, watch and index (nothing above or beside it is read), shared by
/// every link that shows it.
#[derive(Debug)]
struct PartView {
    live: LiveIndex,
    ctx: ServeContext,
}

/// One visitor's place.
#[derive(Debug)]
struct Seat {
    link: LinkId,
    ctx: ServeContext,
    watch: Arc<VisitorWatch>,
    /// Its session started.
    joined: bool,
}

/// See the module docs.
#[derive(Debug)]
pub struct Views {
    /// The whole share's context; every visitor's starts from it.
    base: ServeContext,
    scoping: Scoping,
    parts: HashMap<String, PartView>,
    seats: HashMap<PeerId, Seat>,
    /// Each upload link's caps and what it took, shared by its sessions.
    ledgers: HashMap<LinkId, Arc<UploadLedger>>,
    /// Where uploads land (opened with the first upload link's visitor).
    dock: Option<Dock>,
}

impl Views {
    pub fn new(base: ServeContext, scoping: Scoping) -> Views {
        Views {
            base,
            scoping,
            parts: HashMap::new(),
            seats: HashMap::new(),
            ledgers: HashMap::new(),
            dock: None,
        }
    }

    /// Starts the view of every live link (a scope renamed away meanwhile is
    /// found out when its visitor comes).
    pub fn start_all(&mut self, links: &Links) {
        let shown: Vec<Shown> = links.live().map(Shown::of).collect();
        for shown in shown {
            let _ = self.view_of(&shown);
        }
    }

    /// The context of what a link shows, its view started if it is not yet.
    fn view_of(&mut self, shown: &Shown) -> Result<&ServeContext, ViewError> {
        let (folder, selection) = match shown {
            Shown::Whole => return Ok(&self.base),
            _ if self.parts.contains_key(&shown.key()) => {
                return Ok(&self.parts[&shown.key()].ctx);
            }
            Shown::Folder(scope) => (scope_folder(&self.scoping.root, scope)?, None),
            Shown::Selection(paths) => {
                for p in paths {
                    selected_path(&self.scoping.root, p)?;
                }
                let selection = Selection::new(paths)?;
                (self.scoping.root.clone(), Some(Arc::new(selection)))
            }
        };
        // What the folder must be when it is opened by its path below: the
        // one reached from the whole share's held folder through no symlink
        // (a folder of the share swapped for a symlink between the check
        // above and the opening would make this view another folder).
        let rel = match shown {
            Shown::Folder(scope) => scope
                .split('/')
                .filter(|p| !p.is_empty())
                .collect::<Vec<_>>()
                .join("/"),
            _ => String::new(),
        };
        let expected = self
            .base
            .root
            .identity_beneath(rel.as_bytes())
            .map_err(|e| {
                ViewError::Start(Box::new(ShareError::Root {
                    path: folder.clone(),
                    source: e,
                }))
            })?;
        let epoch = Epoch(u64::from_le_bytes(crate::random::random_bytes()?));
        let (progress, _) = watch::channel(Default::default());
        let live = LiveIndex::start_selected(
            &folder,
            selection.clone(),
            Some(expected),
            IndexStart::Walk(epoch),
            self.scoping.watch,
            self.scoping.settle,
            progress,
            self.scoping.events.clone(),
        )
        .map_err(|e| ViewError::Start(Box::new(e)))?;
        let mut ctx = self.base.clone();
        ctx.index = live.index.clone();
        ctx.index_changed = live.changed.clone();
        ctx.root = live.root.clone();
        ctx.config.confine_symlinks = true;
        ctx.config.selection = selection;
        let view = self
            .parts
            .entry(shown.key())
            .or_insert(PartView { live, ctx });
        Ok(&view.ctx)
    }

    /// What a link asked for with `scope` (one path: a folder becomes the
    /// root, a file a selection of one) and `selection` (several paths)
    /// shows, checked against the share and started.
    pub fn rights(
        &mut self,
        scope: Option<&str>,
        selection: &[String],
    ) -> Result<Shown, ViewError> {
        let mut paths: Vec<String> = selection
            .iter()
            .map(|p| normal_scope(p))
            .collect::<Result<_, _>>()?;
        let scope = scope.map(normal_scope).transpose()?.unwrap_or_default();
        let shown = if paths.is_empty() {
            if scope.is_empty() {
                Shown::Whole
            } else if selected_path(&self.scoping.root, &scope)? {
                Shown::Folder(scope)
            } else {
                Shown::Selection(vec![scope])
            }
        } else {
            if !scope.is_empty() {
                paths.push(scope);
            }
            if paths.iter().any(String::is_empty) {
                return Err(RightsError::WholeInSelection.into());
            }
            for p in &paths {
                selected_path(&self.scoping.root, p)?;
            }
            let selection = Selection::new(&paths)?;
            Shown::Selection(
                selection
                    .paths()
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .collect(),
            )
        };
        self.view_of(&shown)?;
        Ok(shown)
    }

    /// `peer`, admitted through `link` (`record`: its record; `None`, the
    /// main link): its context, its cancel and farewell its own. `Err`: what
    /// its link shows cannot be shown (never the whole share instead).
    pub fn admit(
        &mut self,
        peer: PeerId,
        link: LinkId,
        record: Option<&LinkRecord>,
        label: String,
    ) -> Result<ServeContext, ViewError> {
        let shown = record.map_or(Shown::Whole, Shown::of);
        let mut ctx = self.view_of(&shown)?.clone();
        ctx.cancel = self.base.cancel.child_token();
        ctx.farewell = Farewell::default();
        let watch = Arc::new(VisitorWatch::new(
            peer,
            link,
            label,
            self.scoping.log.clone(),
        ));
        ctx.watch = Some(watch.clone());
        if let Some(record) = record {
            self.give_upload_rights(record, &mut ctx);
        }
        self.seats.insert(
            peer,
            Seat {
                link,
                ctx: ctx.clone(),
                watch,
                joined: false,
            },
        );
        Ok(ctx)
    }

    /// A visitor of an upload link: what it may add, where it lands, and
    /// (a drop link) an index that shows nothing of the share.
    fn give_upload_rights(&mut self, record: &LinkRecord, ctx: &mut ServeContext) {
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
            .entry(record.id)
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
            // The shared folder as held since sharing started, not its path
            // opened again: a path can lead elsewhere by now.
            match self.base.root.dir_clone().and_then(Dock::open_in) {
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
            link: record.id,
            ledger,
            drop: drop_link,
        });
        if drop_link {
            let (index, changed) = nothing_shown(&record.label);
            ctx.index = index;
            ctx.index_changed = changed;
        }
    }

    /// `peer`'s session started.
    pub fn joined(&mut self, peer: PeerId) {
        if let Some(seat) = self.seats.get_mut(&peer) {
            seat.joined = true;
            seat.watch.joined();
        }
    }

    /// `peer` is a lane of another visitor's session, not a visitor.
    pub fn lane(&mut self, peer: PeerId) {
        self.seats.remove(&peer);
    }

    /// Ends `peer`: it is told `code` and `words` (its farewell), then its
    /// task is cancelled.
    pub fn end(&self, peer: PeerId, code: GoodbyeCode, words: String) {
        if let Some(seat) = self.seats.get(&peer) {
            seat.ctx.farewell.set(code, words);
            seat.ctx.cancel.cancel();
        }
    }

    /// `peer`'s task ended (`why`, in words): what it did.
    pub fn left(&mut self, peer: PeerId, why: &str) -> Figures {
        let Some(seat) = self.seats.remove(&peer) else {
            return Figures::default();
        };
        if seat.joined {
            seat.watch.left(why);
        }
        Figures {
            served: seat.watch.doing().bytes_served,
            uploads: self.ledgers.get(&seat.link).map(|l| l.added()),
        }
    }

    /// What `peer` is doing now.
    pub fn doing(&self, peer: PeerId) -> Option<Doing> {
        self.seats.get(&peer).map(|s| s.watch.doing())
    }

    /// Bytes served to `link`'s visitors here now.
    pub fn serving_now(&self, link: LinkId) -> u64 {
        self.seats
            .values()
            .filter(|s| s.link == link)
            .map(|s| s.watch.doing().bytes_served)
            .sum()
    }

    /// Stops every view's walk and watch.
    pub async fn stop(self) {
        for (_, view) in self.parts {
            view.live.stop().await;
        }
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
