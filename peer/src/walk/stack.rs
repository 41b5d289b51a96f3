//! The folders waiting to be listed: a last-in, first-out stack shared by the
//! listers, so the walk goes depth first and the stack holds about
//! depth x fan-out folders rather than a whole level of the tree.
//!
//! It is the one queue of the walk without a fixed cap: the numbering thread
//! must never block on it (the listers it would wait for are themselves
//! waiting for the numbering thread), and every folder on it is a real folder
//! of the tree, so the tree bounds it.

use std::path::PathBuf;
use std::sync::{Condvar, Mutex, MutexGuard};

use linkfs_proto::EntryId;

/// A folder waiting to be listed.
#[derive(Debug)]
pub(super) struct FolderJob {
    pub(super) id: EntryId,
    pub(super) path: PathBuf,
    /// The device and inode the folder had when it was found: the folder
    /// opened for listing must be this one (see `lister`).
    pub(super) dev: u64,
    pub(super) ino: u64,
}

#[derive(Debug, Default)]
pub(super) struct FolderStack {
    state: Mutex<State>,
    ready: Condvar,
}

#[derive(Debug, Default)]
struct State {
    folders: Vec<FolderJob>,
    closed: bool,
}

impl FolderStack {
    /// Adds folders to list and wakes listers for them.
    pub(super) fn push_all(&self, jobs: &mut Vec<FolderJob>) {
        if jobs.is_empty() {
            return;
        }
        let woken = jobs.len();
        self.lock().folders.append(jobs);
        if woken == 1 {
            self.ready.notify_one();
        } else {
            self.ready.notify_all();
        }
    }

    /// The next folder to list; `None` once the walk is over.
    pub(super) fn pop(&self) -> Option<FolderJob> {
        let mut state = self.lock();
        loop {
            if state.closed {
                return None;
            }
            if let Some(job) = state.folders.pop() {
                return Some(job);
            }
            state = self
                .ready
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// Ends the walk: every waiting and future `pop` returns `None`.
    pub(super) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.folders.clear();
        drop(state);
        self.ready.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // No code holding this lock can panic; recover the data if it ever did.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
