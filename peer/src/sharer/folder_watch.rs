//! Watching the shared folder: `notify` (inotify on Linux) with one watch per
//! folder, and the thread that turns its events into changes of the index.
//!
//! ```text
//!  notify's thread --(bounded queue of raw events)--> watch thread
//!                                                      core Settler: per-path debounce, tick
//!                                                      reconciler (index write lock)
//!                                                      bumps index_changed -> every session
//! ```
//!
//! - Folders are watched as the walk reaches them (before they are listed, so
//!   nothing created after the listing is missed) and as they appear later.
//! - Watches are added, and events named, through the shared folder held open
//!   (`/proc/self/fd/N/...`), not through its path: a shared folder renamed or
//!   moved while it is shared (a scoped link's folder, say) is still followed
//!   whole, its new subfolders included.
//! - notify's thread only forwards: events are queued (at most [`EVENT_QUEUE`]);
//!   a full queue, inotify's own overflow or any watcher error never loses a
//!   change silently: the settler asks for a rescan of everything, which
//!   compares the folder with the index.
//! - When the system's limit on watches is reached (`fs.inotify.max_user_watches`),
//!   the user is told once, with the fix, and the whole folder is rescanned every
//!   [`RESCAN_WITHOUT_WATCHES`] so that unwatched folders are still followed.
//! - A read that finds a file changed on disk that the index holds as it was
//!   (written through another hard link, on a file system that sends no
//!   events) names its path here as an event would
//!   ([`ShareRoot::found_stale`]): the reader then gets the new version.
//! - Changes are applied only after the initial walk (or the comparison of a
//!   saved index with the folder) is over: the walk numbers entries itself,
//!   and events that came meanwhile settle and are applied then.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linkfs_core::{Millis, Ready, SettleConfig, Settler, ShareIndex};
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};

use super::disk::ShareRoot;
use super::event::ShareEvent;
use super::reconcile::{
    FolderWatches, Named, ReconcileStats, RescanOptions, reconcile_paths_shared, rescan_shared,
};

/// Raw events waiting for the watch thread: 16,384.
pub const EVENT_QUEUE: usize = 16_384;
/// How often everything is compared when some folders could not be watched.
pub const RESCAN_WITHOUT_WATCHES: Duration = Duration::from_secs(30);
/// The longest the watch thread sleeps (to notice the end of the walk, or a stop).
const MAX_SLEEP: Duration = Duration::from_millis(100);

/// What notify's thread forwards.
#[derive(Debug)]
pub enum RawEvent {
    /// Something happened at these paths (relative to the shared root).
    Paths(Vec<Vec<u8>>),
    /// These files were closed after writing: their contents changed, whatever
    /// their size and times say.
    Written(Vec<Vec<u8>>),
    /// Something was renamed from or to these paths.
    Moved(Vec<Vec<u8>>),
    /// Events were lost.
    Lost,
}

/// The watches on the shared folder's folders.
pub struct FolderWatch {
    watcher: Mutex<notify::RecommendedWatcher>,
    /// Where watches are added and events are named from: the shared folder
    /// held open (`/proc/self/fd/N`), or its path where that is not available.
    root: PathBuf,
    /// The shared folder's path when sharing started (the walk names folders from it).
    given: PathBuf,
    /// The shared folder, held open for `root`.
    _held: Option<std::os::fd::OwnedFd>,
    limit_reached: AtomicBool,
    unwatched: AtomicU64,
    /// Set when an event could not be queued (the queue was full): the watch
    /// thread looks at it on every turn, so events lost at the end of a burst
    /// are not left waiting for a next event that may never come.
    lost: Arc<AtomicBool>,
}

impl std::fmt::Debug for FolderWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FolderWatch")
            .field("root", &self.root)
            .field("limit_reached", &self.limit_reached)
            .finish_non_exhaustive()
    }
}

fn relative(root: &Path, path: &Path) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let rel = path.strip_prefix(root).ok()?;
    Some(rel.as_os_str().as_bytes().to_vec())
}

impl FolderWatch {
    /// Starts the watcher (no folder watched yet). Raw events go to the returned queue.
    pub fn start(root: &Path) -> notify::Result<(Arc<FolderWatch>, Receiver<RawEvent>)> {
        use std::os::fd::AsRawFd;
        let (tx, rx) = sync_channel(EVENT_QUEUE);
        let lost = Arc::new(AtomicBool::new(false));
        let held = nix::fcntl::open(
            root,
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok();
        let through_fd = held
            .as_ref()
            .map(|fd| PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())))
            .filter(|p| p.is_dir());
        let watch_root = through_fd.unwrap_or_else(|| root.to_path_buf());
        let handler_root = watch_root.clone();
        let handler_lost = lost.clone();
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            forward(&handler_root, &tx, &handler_lost, res);
        })?;
        Ok((
            Arc::new(FolderWatch {
                watcher: Mutex::new(watcher),
                root: watch_root,
                given: root.to_path_buf(),
                _held: held,
                limit_reached: AtomicBool::new(false),
                unwatched: AtomicU64::new(0),
                lost,
            }),
            rx,
        ))
    }

    /// Whether events were lost (the queue was full) since the last call.
    pub fn take_lost(&self) -> bool {
        self.lost.swap(false, Ordering::Relaxed)
    }

    /// Watches one folder (not its subfolders) by its full path as the walk
    /// names it (from the shared folder's path when sharing started).
    pub fn watch_path(&self, path: &Path) {
        let path = match path.strip_prefix(&self.given) {
            Ok(rel) if !rel.as_os_str().is_empty() => self.root.join(rel),
            Ok(_) => self.root.clone(),
            Err(_) => path.to_path_buf(),
        };
        self.watch_at(&path);
    }

    /// Watches one folder (not its subfolders) at `path` (under `root`).
    fn watch_at(&self, path: &Path) {
        let result = match self.watcher.lock() {
            Ok(mut w) => w.watch(path, RecursiveMode::NonRecursive),
            Err(_) => return,
        };
        if let Err(e) = result {
            match e.kind {
                notify::ErrorKind::MaxFilesWatch => {
                    self.limit_reached.store(true, Ordering::Relaxed);
                    self.unwatched.fetch_add(1, Ordering::Relaxed);
                }
                // Gone already: its removal will be seen.
                notify::ErrorKind::PathNotFound => {}
                // Gone (or no longer a folder) between the watch and notify's
                // own look at it: its removal will be seen too. Counting it
                // would compare the whole share every 30 s for good.
                _ if !path.is_dir() => {}
                _ => {
                    tracing::info!(path = %path.display(), error = %e, "cannot watch a folder");
                    self.unwatched.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Whether the system's limit on watches was reached.
    pub fn limit_reached(&self) -> bool {
        self.limit_reached.load(Ordering::Relaxed)
    }

    /// Folders that could not be watched.
    pub fn unwatched(&self) -> u64 {
        self.unwatched.load(Ordering::Relaxed)
    }
}

impl FolderWatches for FolderWatch {
    fn watch(&self, rel: &[u8]) {
        use std::os::unix::ffi::OsStrExt;
        self.watch_at(&self.root.join(std::ffi::OsStr::from_bytes(rel)));
    }

    fn unwatch(&self, rel: &[u8]) {
        use std::os::unix::ffi::OsStrExt;
        let path = self.root.join(std::ffi::OsStr::from_bytes(rel));
        if let Ok(mut w) = self.watcher.lock() {
            // The kernel drops the watch of a deleted folder itself; this keeps
            // notify's own table of paths right after moves.
            let _ = w.unwatch(&path);
        }
    }
}

/// notify's handler: forwards, never blocks.
fn forward(
    root: &Path,
    tx: &SyncSender<RawEvent>,
    lost: &AtomicBool,
    res: notify::Result<notify::Event>,
) {
    let event = match res {
        Ok(ev) if ev.need_rescan() => RawEvent::Lost,
        // The sharer's own reads open and close files: not changes.
        Ok(ev)
            if matches!(
                ev.kind,
                EventKind::Access(notify::event::AccessKind::Open(_))
                    | EventKind::Access(notify::event::AccessKind::Close(
                        notify::event::AccessMode::Read
                    ))
                    | EventKind::Access(notify::event::AccessKind::Read)
            ) =>
        {
            return;
        }
        Ok(ev) => {
            let paths: Vec<Vec<u8>> = ev.paths.iter().filter_map(|p| relative(root, p)).collect();
            if paths.is_empty() {
                return;
            }
            if ev.kind
                == EventKind::Access(notify::event::AccessKind::Close(
                    notify::event::AccessMode::Write,
                ))
            {
                RawEvent::Written(paths)
            } else if matches!(
                ev.kind,
                EventKind::Modify(notify::event::ModifyKind::Name(_))
            ) {
                RawEvent::Moved(paths)
            } else {
                RawEvent::Paths(paths)
            }
        }
        Err(_) => RawEvent::Lost,
    };
    let event = if lost.swap(false, Ordering::Relaxed) {
        RawEvent::Lost
    } else {
        event
    };
    if let Err(TrySendError::Full(_)) = tx.try_send(event) {
        lost.store(true, Ordering::Relaxed);
    }
}

/// What the watch thread works with.
#[derive(Debug)]
pub struct WatchContext {
    pub index: Arc<RwLock<ShareIndex>>,
    pub root: Arc<ShareRoot>,
    pub watch: Arc<FolderWatch>,
    pub events: Receiver<RawEvent>,
    /// Bumped after every change, so sessions cut new batches.
    pub changed: watch::Sender<u64>,
    /// Warnings for the user.
    pub report: mpsc::Sender<ShareEvent>,
    pub stop: Arc<AtomicBool>,
    pub settle: SettleConfig,
    /// The walk (or the comparison of a saved index with the folder) is over.
    pub initial_done: Arc<AtomicBool>,
}

/// Starts the watch thread. It ends when `stop` is set or the watcher is gone.
pub fn spawn_watch_thread(ctx: WatchContext) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("linkfs-watch".into())
        .spawn(move || run(ctx))
}

fn run(ctx: WatchContext) {
    let start = Instant::now();
    let now = || Millis(start.elapsed().as_millis() as u64);
    let mut settler = Settler::new(ctx.settle);
    let mut warned_limit = false;
    let mut last_full_rescan = Instant::now();
    loop {
        if ctx.stop.load(Ordering::Relaxed) {
            return;
        }
        let sleep = settler
            .poll_timeout()
            .map_or(MAX_SLEEP, |t| {
                Duration::from_millis(t.0.saturating_sub(now().0))
            })
            .min(MAX_SLEEP);
        match ctx.events.recv_timeout(sleep) {
            Ok(first) => {
                let mut next = Some(first);
                while let Some(ev) = next {
                    match ev {
                        RawEvent::Paths(paths) => {
                            for p in paths {
                                settler.event(now(), &p);
                            }
                        }
                        RawEvent::Written(paths) => {
                            for p in paths {
                                settler.written(now(), &p);
                            }
                        }
                        RawEvent::Moved(paths) => {
                            for p in paths {
                                settler.moved(now(), &p);
                            }
                        }
                        RawEvent::Lost => settler.overflow(now()),
                    }
                    next = ctx.events.try_recv().ok();
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if ctx.watch.take_lost() {
            settler.overflow(now());
        }
        // Files a read found changed that no event named (see ShareRoot::found_stale).
        let (stale, overflowed) = ctx.root.take_stale();
        for p in stale {
            settler.event(now(), &p);
        }
        if overflowed {
            settler.overflow(now());
        }
        if !ctx.initial_done.load(Ordering::Acquire) {
            continue;
        }
        if ctx.watch.limit_reached() && !warned_limit {
            // Said once; tried again on the next turn if the queue was full.
            warned_limit = ctx.report.try_send(ShareEvent::Warning(format!(
                "{} folders cannot be watched: the system's limit on inotify watches is reached. Changes there are still found, by comparing the whole folder every {} s. To watch everything, raise the limit: sudo sysctl fs.inotify.max_user_watches=1048576",
                ctx.watch.unwatched(),
                RESCAN_WITHOUT_WATCHES.as_secs()
            )))
            .is_ok();
        }
        // A rescan after lost events watches every folder again: a folder
        // deleted and made again under its name meanwhile is matched to its
        // entry, and only a watch added now follows what happens in it. The
        // periodic one (for folders the system would not let be watched)
        // leaves the watches as they are.
        let (ready, after_loss) = match settler.poll_ready(now()) {
            Some(ready) => (ready, true),
            None if ctx.watch.unwatched() > 0
                && last_full_rescan.elapsed() >= RESCAN_WITHOUT_WATCHES =>
            {
                (Ready::Rescan, false)
            }
            None => continue,
        };
        let stats = match &ready {
            Ready::Paths {
                paths,
                written,
                moved,
            } => reconcile_paths_shared(
                &ctx.index,
                &ctx.root,
                &*ctx.watch,
                Named {
                    paths,
                    written,
                    moved,
                },
                || {
                    ctx.changed.send_modify(|n| *n += 1);
                },
            ),
            Ready::Rescan => {
                last_full_rescan = Instant::now();
                let options = RescanOptions {
                    install_watches: after_loss,
                };
                rescan_shared(&ctx.index, &ctx.root, &*ctx.watch, options, || {
                    ctx.changed.send_modify(|n| *n += 1);
                })
            }
        };
        log_changes(&ready, &stats);
        if stats.changes() > 0 {
            ctx.changed.send_modify(|n| *n += 1);
        }
    }
}

fn log_changes(ready: &Ready, stats: &ReconcileStats) {
    let what = match ready {
        Ready::Paths {
            paths,
            written,
            moved,
        } => format!(
            "{} changed paths ({} written, {} renamed)",
            paths.len(),
            written.len(),
            moved.len()
        ),
        Ready::Rescan => "a rescan of everything".to_owned(),
    };
    tracing::debug!(
        %what,
        added = stats.added,
        updated = stats.updated,
        moved = stats.moved,
        removed = stats.removed,
        "applied changes"
    );
}
