//! Feeding the walk into the share index while receivers are already served.
//!
//! Runs on its own thread: each batch from the walk goes into the index under
//! one write lock, then the `index_changed` counter is bumped so every session
//! can cut new index batches. When the walk ends, the snapshot is marked
//! complete.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;

use linkfs_core::ShareIndex;
use tokio::sync::watch;

use super::reconcile::ReconcileStats;
use crate::walk::{WalkHandle, WalkSummary};

/// How far the walk has come.
#[derive(Debug, Clone, Default)]
pub struct WalkProgress {
    pub entries: u64,
    /// Set once the walk has finished.
    pub summary: Option<WalkSummary>,
    /// Set if an entry could not be indexed (the share then holds what came before it).
    pub failure: Option<String>,
    /// Set once a share that started from its saved index has compared it
    /// with the folder (instead of walking it).
    pub checked: Option<CheckSummary>,
}

/// What comparing a saved index with the folder found.
#[derive(Debug, Clone)]
pub struct CheckSummary {
    pub entries: u64,
    pub changes: ReconcileStats,
    pub elapsed: std::time::Duration,
}

pub fn spawn_feed(
    walk: WalkHandle,
    index: Arc<RwLock<ShareIndex>>,
    changed: watch::Sender<u64>,
    progress: watch::Sender<WalkProgress>,
    initial_done: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("linkfs-index-feed".into())
        .spawn(move || {
            let mut failure = None;
            while let Some(batch) = walk.recv() {
                let entries = {
                    let mut ix = index.write().unwrap_or_else(|p| p.into_inner());
                    for e in &batch {
                        let pushed = ix.push(&e.new_entry());
                        if let Err(err) = pushed {
                            failure = Some(err.to_string());
                            break;
                        }
                    }
                    ix.entries()
                };
                changed.send_modify(|n| *n += 1);
                progress.send_modify(|p| p.entries = entries);
                if failure.is_some() {
                    walk.cancel();
                    break;
                }
            }
            let summary = walk.join();
            index
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .mark_snapshot_complete();
            initial_done.store(true, Ordering::Release);
            changed.send_modify(|n| *n += 1);
            progress.send_modify(|p| {
                p.summary = Some(summary);
                p.failure = failure;
            });
        })
}
