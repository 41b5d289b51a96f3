//! [`LiveIndex`]: the share index and what keeps it current: the walk (through
//! its feed thread) and, unless turned off, the folder watch. Every change
//! bumps `changed`, which wakes every session to cut new batches.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;

use linkfs_core::{SettleConfig, ShareIndex};
use linkfs_proto::Epoch;
use tokio::sync::{mpsc, watch};

use super::disk::ShareRoot;
use super::feed::{WalkProgress, spawn_feed};
use super::folder_watch::{FolderWatch, WatchContext, spawn_watch_thread};
use super::{ShareError, ShareEvent};
use crate::walk::{FolderHook, WalkOptions, Walker};

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
    /// index of `epoch`, and keeps the index current. Walk progress goes to
    /// `walk_progress`, warnings (a watch limit reached) to `report`.
    pub fn start(
        folder: &Path,
        epoch: Epoch,
        watch: bool,
        settle: SettleConfig,
        walk_progress: watch::Sender<WalkProgress>,
        report: mpsc::Sender<ShareEvent>,
    ) -> Result<LiveIndex, ShareError> {
        let root = Arc::new(ShareRoot::open(folder).map_err(|source| ShareError::Root {
            path: folder.to_path_buf(),
            source,
        })?);
        let watching = if watch {
            Some(FolderWatch::start(folder)?)
        } else {
            None
        };
        let before_listing: Option<FolderHook> = watching.as_ref().map(|(w, _)| {
            let w = w.clone();
            Arc::new(move |path: &Path| w.watch_path(path)) as FolderHook
        });
        let walk = Walker::new(
            folder,
            WalkOptions {
                before_listing,
                ..WalkOptions::default()
            },
        )?;
        let index = Arc::new(RwLock::new(ShareIndex::new(epoch)));
        let (changed_tx, changed) = watch::channel(0u64);
        let feed = spawn_feed(walk, index.clone(), changed_tx.clone(), walk_progress)
            .map_err(ShareError::Thread)?;
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
