//! The folder walk behind `linkfs share`: every entry under a root folder, with
//! dense ids, streamed in batches while the walk is still running.
//!
//! # Design
//!
//! ```text
//!  listers (N threads)             numbering (1 thread)              consumer
//!  pop a folder from the stack     gives ids 0,1,2... in arrival     recv() batches of
//!  readdir + one lstat per entry   order, pushes sub-folders on  --> up to `batch_len`
//!  chunks of <= 1024 entries  -->  the stack, keeps the counts       entries, then
//!  (bounded channel)               (bounded channel)                 join() -> summary
//! ```
//!
//! * **Work unit:** reading one folder. Listers take folders from a shared stack
//!   (last in, first out, so the stack holds about depth x fan-out folders, never
//!   the whole tree), read them with one `lstat` per entry (`fstatat` relative to
//!   the open folder, no path lookups) and `readlink` only for symlinks. No file
//!   is opened.
//! * **Ids:** one thread, the numbering thread, assigns every id, in the order it
//!   emits entries. So ids are dense (0, 1, 2, ... with no gap), a batch holds a
//!   contiguous run of ids, and since a folder is only put on the stack after it
//!   got its id, every child's id is higher than its parent's and arrives later.
//!   The root is `EntryId(0)`, its own parent, named after the shared folder.
//! * **Symlinks are never followed.** A symlink is reported as a symlink with its
//!   target bytes, wherever it points (outside the root, to itself, nowhere).
//!   Only the root itself is resolved if it is a symlink: the user named it.
//! * **Special files** (sockets, fifos, devices) are skipped and counted.
//! * **Unreadable entries** (deleted between `readdir` and `lstat`, permission
//!   denied, I/O errors) are skipped and counted; the first few paths are kept
//!   with the reason. An unreadable folder is reported as an empty folder.
//! * **Mount points:** the walk crosses into other filesystems (a share of
//!   `~/` includes a USB disk mounted under it) unless
//!   [`WalkOptions::one_file_system`] is set, but it never enters a folder whose
//!   (device, inode) it has already entered: a bind mount of a folder inside
//!   itself is reported as a folder and not entered, so no mount layout makes the
//!   walk loop.
//! * **Bounds:** lister -> numbering channel: [`CHUNKS_QUEUED`] chunks of at most
//!   [`CHUNK_LEN`] entries; numbering -> consumer channel: [`OUTPUT_BATCHES`]
//!   batches of at most `batch_len` entries. A slow consumer stalls the walk; it
//!   never makes it buffer more. The folder stack and the set of entered folders
//!   (16 bytes per folder) are the only structures that grow with the tree.
//! * **Cancel:** [`WalkHandle::cancel`] (or the flag from
//!   [`WalkHandle::cancel_flag`]) stops listers between two entries; dropping the
//!   handle cancels too.

mod found;
mod lister;
mod numbering;
mod problems;
mod shared;
mod stack;

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use linkfs_proto::{EntryId, EntryKind};

use crate::disk_entry::DiskEntry;

pub use found::{
    CHUNK_LEN, FolderHook, OUTPUT_BATCHES, WalkBatch, WalkOptions, WalkSummary, WalkedEntry,
    default_workers,
};
pub use problems::WalkProblem;
use shared::Shared;
use stack::FolderJob;

/// Chunks queued between the listers and the numbering thread, however many
/// listers there are: the numbering thread keeps up with them (the walk waits
/// on the disk and on the consumer, not on numbering), and each queued chunk
/// holds up to [`CHUNK_LEN`] entries of the sharer's memory.
pub const CHUNKS_QUEUED: usize = 4;

/// Why a walk could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WalkError {
    #[error("cannot share {}: no such directory", .path.display())]
    NoSuchDirectory { path: PathBuf },
    #[error("cannot share {}: it is not a directory", .path.display())]
    NotADirectory { path: PathBuf },
    #[error("cannot share {}: permission denied", .path.display())]
    PermissionDenied { path: PathBuf },
    #[error("cannot share {}: {source}", .path.display())]
    Unreadable { path: PathBuf, source: io::Error },
    #[error("cannot start the folder walk: {0}")]
    Spawn(io::Error),
}

/// Starts walks.
#[derive(Debug)]
pub struct Walker;

impl Walker {
    /// Checks that `root` is a readable directory and starts walking it on
    /// background threads.
    // `Walker::new(..) -> WalkHandle` reads as "a new walker", which is what
    // starting a walk is; there is no `Walker` value to hand back.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(root: impl AsRef<Path>, options: WalkOptions) -> Result<WalkHandle, WalkError> {
        walk(root.as_ref(), options)
    }
}

/// A running walk: batches come from [`recv`](WalkHandle::recv), the summary from
/// [`join`](WalkHandle::join).
#[derive(Debug)]
pub struct WalkHandle {
    batches: Receiver<WalkBatch>,
    cancel: Arc<AtomicBool>,
    numbering: Option<JoinHandle<WalkSummary>>,
}

impl WalkHandle {
    /// The next batch, in id order; `None` once the walk is over.
    pub fn recv(&self) -> Option<WalkBatch> {
        self.batches.recv().ok()
    }

    /// Stops the walk soon (between two entries).
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// The flag [`cancel`](Self::cancel) sets, for whoever stops the share.
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancel)
    }

    /// Waits for the walk to finish, discarding batches not received yet, and
    /// returns what it found.
    pub fn join(mut self) -> WalkSummary {
        while self.batches.recv().is_ok() {}
        match self.numbering.take().map(JoinHandle::join) {
            Some(Ok(summary)) => summary,
            // The numbering thread does not panic; if it ever did, report an
            // incomplete walk rather than propagate the panic.
            _ => WalkSummary {
                cancelled: true,
                ..WalkSummary::default()
            },
        }
    }
}

impl Iterator for WalkHandle {
    type Item = WalkBatch;

    fn next(&mut self) -> Option<Self::Item> {
        self.recv()
    }
}

impl Drop for WalkHandle {
    fn drop(&mut self) {
        if self.numbering.is_some() {
            self.cancel();
        }
    }
}

fn walk(root: &Path, options: WalkOptions) -> Result<WalkHandle, WalkError> {
    let started = Instant::now();
    // The root is the one place a symlink is followed: the user named it.
    let md = std::fs::metadata(root).map_err(|e| root_error(root, e))?;
    if !md.is_dir() {
        return Err(WalkError::NotADirectory {
            path: root.to_path_buf(),
        });
    }
    if options
        .root_identity
        .is_some_and(|id| id != (md.dev(), md.ino()))
    {
        return Err(root_error(
            root,
            io::Error::other(
                "the folder was replaced while sharing started (by a symlink or another folder); share it again",
            ),
        ));
    }
    // Refuse an unlistable root now, rather than share an empty folder.
    drop(std::fs::read_dir(root).map_err(|e| root_error(root, e))?);

    let mut root_entry = WalkedEntry::found(
        root_name(root),
        DiskEntry::from_metadata(EntryKind::Dir, Vec::new(), &md),
    );
    root_entry.id = EntryId::ROOT;
    root_entry.parent = EntryId::ROOT;

    let workers = options.workers.max(1);
    let cancel = Arc::new(AtomicBool::new(false));
    let shared = Arc::new(Shared {
        stack: stack::FolderStack::default(),
        problems: Mutex::new(problems::ProblemLog::new(options.max_problems)),
        cancel: Arc::clone(&cancel),
        before_listing: options.before_listing.clone(),
        root: root.to_path_buf(),
        selection: options.selection.clone(),
    });
    let (chunk_tx, chunk_rx) = sync_channel(CHUNKS_QUEUED);
    let (batch_tx, batch_rx) = sync_channel(OUTPUT_BATCHES);

    let mut listers = Vec::with_capacity(workers);
    for i in 0..workers {
        let lister_shared = Arc::clone(&shared);
        let tx = chunk_tx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("walk-lister-{i}"))
            .spawn(move || lister::run(&lister_shared, &tx));
        match spawned {
            Ok(handle) => listers.push(handle),
            Err(e) => {
                shared.stack.close();
                return Err(WalkError::Spawn(e));
            }
        }
    }
    drop(chunk_tx);

    let root_job = FolderJob {
        id: EntryId::ROOT,
        path: root.to_path_buf(),
        dev: md.dev(),
        ino: md.ino(),
    };
    let numbering = numbering::Numbering::new(root_entry, options, batch_tx, started);
    let thread_shared = Arc::clone(&shared);
    let spawned = std::thread::Builder::new()
        .name("walk-numbering".into())
        .spawn(move || numbering.run(&thread_shared, root_job, chunk_rx, listers));
    match spawned {
        Ok(handle) => Ok(WalkHandle {
            batches: batch_rx,
            cancel,
            numbering: Some(handle),
        }),
        Err(e) => {
            // The listers see the closed stack and end on their own.
            shared.stack.close();
            Err(WalkError::Spawn(e))
        }
    }
}

fn root_error(root: &Path, e: io::Error) -> WalkError {
    let path = root.to_path_buf();
    match e.kind() {
        io::ErrorKind::NotFound => WalkError::NoSuchDirectory { path },
        io::ErrorKind::NotADirectory => WalkError::NotADirectory { path },
        io::ErrorKind::PermissionDenied => WalkError::PermissionDenied { path },
        _ => WalkError::Unreadable { path, source: e },
    }
}

/// The bytes of the root folder's own name: its final component, or the final
/// component of its canonical path when given as `.`/`..`; `/` for the
/// filesystem root.
fn root_name(root: &Path) -> Vec<u8> {
    if let Some(name) = root.file_name() {
        return name.as_bytes().to_vec();
    }
    match std::fs::canonicalize(root) {
        Ok(real) => real
            .file_name()
            .unwrap_or(OsStr::new("/"))
            .as_bytes()
            .to_vec(),
        Err(_) => b"/".to_vec(),
    }
}
