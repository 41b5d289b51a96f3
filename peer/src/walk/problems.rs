//! Entries the walk could not read: all counted, the first few kept with the
//! reason so the sharer can be told which ones and why.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One path the walk skipped, and why, in words for the sharer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkProblem {
    pub path: PathBuf,
    pub reason: String,
}

impl fmt::Display for WalkProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

/// Counts every problem and keeps the first `cap` of them.
#[derive(Debug)]
pub(super) struct ProblemLog {
    cap: usize,
    count: u64,
    first: Vec<WalkProblem>,
}

impl ProblemLog {
    pub(super) fn new(cap: usize) -> Self {
        ProblemLog {
            cap,
            count: 0,
            first: Vec::new(),
        }
    }

    pub(super) fn record(log: &Mutex<ProblemLog>, path: &Path, reason: String) {
        // Nothing panics while holding this lock; recover the data if it ever did.
        let mut log = log.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        log.count += 1;
        if log.first.len() < log.cap {
            log.first.push(WalkProblem {
                path: path.to_path_buf(),
                reason,
            });
        }
    }

    pub(super) fn take(log: &Mutex<ProblemLog>) -> (u64, Vec<WalkProblem>) {
        let mut log = log.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        (log.count, std::mem::take(&mut log.first))
    }
}
