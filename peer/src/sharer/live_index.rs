//! [`LiveIndex`]: the share index and what keeps it current: the walk (through
//! its feed thread) or, for a sharer that restarts with its saved index, a
//! comparison of that index with the folder (entries keep their ids; only what
//! changed while it was stopped is logged); then, unless turned off, the
//! folder watch. Every change bumps `changed`, which wakes every session to
//! cut new batches.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;

use linkfs_core::{Selection, SettleConfig, ShareIndex};
use linkfs_proto::Epoch;
use tokio::sync::{mpsc, watch};

use super::disk::ShareRoot;
use super::event::{ShareError, ShareEvent};
use super::feed::{CheckSummary, WalkProgress, spawn_feed};
use super::folder_watch::{FolderWatch, WatchContext, spawn_watch_thread};
use super::reconcile::{NoWatches, RescanOptions, rescan_shared};
use crate::walk::{FolderHook, WalkOptions, Walker};

/// Where the index starts from.
#[derive(Debug)]
pub enum IndexStart {
    /// A new index of this epoch, filled by a walk.
    Walk(Epoch),
    /// An index saved at the last stop, compared with the folder.
    Saved(Box<ShareIndex>),
}

/// See the module docs.
#[derive(Debug)]
pub struct LiveIndex {
    pub index: Arc<RwLock<ShareIndex>>,
    /// Bumped whenever the index changed (or the walk finished).
    pub changed: watch::Receiver<u64>,
    pub root: Arc<ShareRoot>,
    changed_tx: watch::Sender<u64>,
    feed: JoinHandle<()>,
    watcher: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl LiveIndex {
    /// Opens the folder, starts watching it (if `watch`), walks it into a new
    /// index (or compares the saved one with it), and keeps the index current.
    /// Progress goes to `walk_progress`, warnings (a watch limit reached) to
    /// `report`.
    pub fn start(
        folder: &Path,
        start: IndexStart,
        watch: bool,
        settle: SettleConfig,
        walk_progress: watch::Sender<WalkProgress>,
        report: mpsc::Sender<ShareEvent>,
    ) -> Result<LiveIndex, ShareError> {
        Self::start_selected(
            folder,
            None,
            None,
            start,
            watch,
            settle,
            walk_progress,
            report,
        )
    }

    /// [`LiveIndex::start`] for what `selection` shows of the folder (if
    /// given): nothing else is walked, looked at, watched or read.
    /// With `expected` (device, inode), the folder opened must be that one:
    /// see [`ShareRoot::open_expecting`]. The walk starts from the folder
    /// opened, whatever its path leads to by then.
    #[allow(clippy::too_many_arguments)]
    pub fn start_selected(
        folder: &Path,
        selection: Option<Arc<Selection>>,
        expected: Option<(u64, u64)>,
        start: IndexStart,
        watch: bool,
        settle: SettleConfig,
        walk_progress: watch::Sender<WalkProgress>,
        report: mpsc::Sender<ShareEvent>,
    ) -> Result<LiveIndex, ShareError> {
        let opened = match &selection {
            Some(s) => ShareRoot::open_selected(folder, s.clone()),
            None => ShareRoot::open(folder),
        };
        let root_error = |source| ShareError::Root {
            path: folder.to_path_buf(),
            source,
        };
        let root = Arc::new(opened.map_err(root_error)?);
        let identity = root.identity().map_err(root_error)?;
        if expected.is_some_and(|e| e != identity) {
            return Err(root_error(std::io::Error::other(format!(
                "{} was replaced while it was being opened (by a symlink or another folder); share it again",
                folder.display()
            ))));
        }
        let watching = if watch {
            Some(FolderWatch::start(folder)?)
        } else {
            None
        };
        let (changed_tx, changed) = watch::channel(0u64);
        let initial_done = Arc::new(AtomicBool::new(false));
        let (index, feed) = match start {
            IndexStart::Walk(epoch) => {
                let before_listing: Option<FolderHook> = watching.as_ref().map(|(w, _)| {
                    let w = w.clone();
                    Arc::new(move |path: &Path| w.watch_path(path)) as FolderHook
                });
                let walk = Walker::new(
                    folder,
                    WalkOptions {
                        before_listing,
                        selection,
                        root_identity: Some(identity),
                        ..WalkOptions::default()
                    },
                )?;
                let index = Arc::new(RwLock::new(ShareIndex::new(epoch)));
                let feed = spawn_feed(
                    walk,
                    index.clone(),
                    changed_tx.clone(),
                    walk_progress,
                    initial_done.clone(),
                )
                .map_err(ShareError::Thread)?;
                (index, feed)
            }
            IndexStart::Saved(saved) => {
                let index = Arc::new(RwLock::new(*saved));
                let check = spawn_check(
                    index.clone(),
                    root.clone(),
                    watching.as_ref().map(|(w, _)| w.clone()),
                    changed_tx.clone(),
                    walk_progress,
                    initial_done.clone(),
                )
                .map_err(ShareError::Thread)?;
                (index, check)
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let watcher = match watching {
            Some((watch, events)) => Some(
                spawn_watch_thread(WatchContext {
                    index: index.clone(),
                    root: root.clone(),
                    watch,
                    events,
                    changed: changed_tx.clone(),
                    report,
                    stop: stop.clone(),
                    settle,
                    initial_done,
                })
                .map_err(ShareError::Thread)?,
            ),
            None => None,
        };
        Ok(LiveIndex {
            index,
            changed,
            root,
            changed_tx,
            feed,
            watcher,
            stop,
        })
    }

    /// Stops following the folder (the watch thread notices within 100 ms).
    pub async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        drop(self.changed_tx);
        // The feed thread ends with the walk; it is not waited for (a huge walk may still run).
        drop(self.feed);
        if let Some(w) = self.watcher {
            let _ = tokio::task::spawn_blocking(move || w.join()).await;
        }
    }
}

/// Compares a saved index with the folder on its own thread, one folder at a
/// time (watching each before it is listed), then lets the watch thread go on.
fn spawn_check(
    index: Arc<RwLock<ShareIndex>>,
    root: Arc<ShareRoot>,
    watch: Option<Arc<FolderWatch>>,
    changed: watch::Sender<u64>,
    progress: watch::Sender<WalkProgress>,
    initial_done: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("linkfs-index-check".into())
        .spawn(move || {
            let started = std::time::Instant::now();
            let bump = || changed.send_modify(|n| *n += 1);
            let options = RescanOptions {
                install_watches: true,
            };
            let changes = match &watch {
                Some(w) => rescan_shared(&index, &root, &**w, options, bump),
                None => rescan_shared(&index, &root, &NoWatches, options, bump),
            };
            let entries = {
                let mut ix = index.write().unwrap_or_else(|p| p.into_inner());
                ix.mark_snapshot_complete();
                ix.entries()
            };
            initial_done.store(true, Ordering::Release);
            changed.send_modify(|n| *n += 1);
            progress.send_modify(|p| {
                p.entries = entries;
                p.checked = Some(CheckSummary {
                    entries,
                    changes,
                    elapsed: started.elapsed(),
                });
            });
        })
}
