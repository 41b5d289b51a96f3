//! What the walk's listers and its numbering thread share: the folders
//! waiting to be listed, the problems met, the cancel flag.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::found::FolderHook;
use super::{problems, stack};

/// State the listers and the numbering thread share.
pub(super) struct Shared {
    pub(super) stack: stack::FolderStack,
    pub(super) problems: Mutex<problems::ProblemLog>,
    pub(super) cancel: Arc<AtomicBool>,
    pub(super) before_listing: Option<FolderHook>,
    /// The walked folder, and the selection of it to walk (if any).
    pub(super) root: PathBuf,
    pub(super) selection: Option<Arc<linkfs_core::Selection>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("stack", &self.stack)
            .field("cancel", &self.cancel)
            .finish_non_exhaustive()
    }
}

impl Shared {
    pub(super) fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    pub(super) fn problem(&self, path: &Path, reason: String) {
        problems::ProblemLog::record(&self.problems, path, reason);
    }
}

/// Words a user understands for why an entry could not be read.
pub(super) fn io_reason(action: &str, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => {
            format!("{action}: it was deleted during the walk")
        }
        io::ErrorKind::PermissionDenied => format!("{action}: permission denied"),
        _ => format!("{action}: {e}"),
    }
}
