//! `linkfs get`: downloads a file or a folder of the share beneath `--out`.
//!
//! - **Never outside `--out`.** Every name is checked again here (the index
//!   already refuses them): empty, `.`, `..`, a `/` or a NUL inside a name is
//!   refused with the entry's path in words, and its subtree is skipped. Folders
//!   are created and entered one component at a time with `openat` +
//!   `O_NOFOLLOW | O_DIRECTORY` relative to the folder above, so a symlink on
//!   disk (left by an earlier run, or planted) is never followed.
//! - **Verified.** Bytes come from the core receiver, which checks every chunk's
//!   BLAKE3 hash before handing it over.
//! - **Resumable.** A file is written to a hidden part file named after the
//!   source's name, size, mtime and version (`.linkfs-part.<hash>`), then given the
//!   sharer's mtime and mode and renamed into place: a file under its final name
//!   with the sharer's size and mtime is complete, and a re-run skips it. A
//!   re-run continues a part file from its last whole block (data is written in
//!   order), and a part file of another version of the source is not used.
//! - **On disk before it is complete.** A finished part file is renamed into
//!   place only after its file system was synced, so a file under its final name
//!   survives a crash or a power cut. Finished files are synced in groups, one
//!   `syncfs` a group ([`FINISH_GROUP`] files or [`FINISH_WAIT`]), rather than
//!   one `fdatasync` each: 100,000 files of 1 KiB took 82 s with one each and
//!   41 s with none, on one host.
//! - **Modes are permissions only, under the umask.** Set-user-id,
//!   set-group-id and sticky bits from the sharer are dropped, and the umask
//!   applies as it would to any file this user makes: a hostile sharer cannot
//!   plant a setuid or world-writable file (even when `get` runs as root).
//! - Folders get the sharer's mtime and mode after everything inside them is
//!   written, except that the owner keeps read, write and search (a re-run
//!   must be able to continue inside).
//! - **Few open files, whatever the tree.** No folder is held open: each is
//!   opened (component by component, never through a symlink) when it is
//!   listed, when a file in it is created, synced or renamed, and when its time
//!   is set, then closed. A file of more than one piece holds one descriptor
//!   while it is fetched (at most `--parallel` of them); a smaller one is
//!   fetched first and written whole, holding none while it waits. So a tree of
//!   any number of folders and files works under the usual limit of 1,024 open
//!   files.
//! - Files are fetched several at a time ([`GetOptions::parallel_files`]), each
//!   with up to [`PIPELINE`] reads of [`PIECE`] bytes in flight, and at most
//!   [`PIECES_IN_MEMORY`] of pieces held at once in all (a file whose first
//!   piece is not asked for yet always may: no download waits on another).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use indicatif::ProgressBar;
use linkfs_core::{ReadFailure, StartReadError};
use linkfs_proto::{Entry, EntryId, EntryKind, Generation, ReadErrorCode};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, fstatat, mkdirat};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::Client;

/// Bytes per read request of a download.
pub const PIECE: u64 = 4 << 20;
/// Reads in flight per file: at a distance a piece can wait seconds for one
/// chunk held up on one connection while the others go on (12 pieces kept
/// 100 ms / 0.5 % loss moving where 6 emptied; docs/webrtc-notes.md).
pub const PIPELINE: usize = 12;
/// Bytes of pieces a download holds at once, all files together (asked for
/// and not yet written): its memory bound.
pub const PIECES_IN_MEMORY: u64 = 64 << 20;
/// The unit the bound is counted in.
const BUDGET_UNIT: u64 = 64 << 10;
/// A group of finished files is synced (one `syncfs`) and renamed into place
/// once it holds this many, or its first waited [`FINISH_WAIT`], or nothing else
/// is left to fetch; one group at a time.
pub const FINISH_GROUP: usize = 256;
/// See [`FINISH_GROUP`].
pub const FINISH_WAIT: Duration = Duration::from_millis(100);
/// Files fetched at once when they are small (one piece or less; `--parallel`
/// bounds the bigger ones): each costs about a round trip, so a long path needs
/// many in flight. 100,000 files of 1 KiB at 20 ms: 8 at once moved ~400 a second.
pub const FILES_IN_FLIGHT: usize = 256;
/// Finished files that may wait for a sync at once: no more files start while
/// this many wait.
pub const FINISH_WAITING: usize = 4096;
/// A file that changed while it was fetched is fetched again, its new version
/// whole, up to this many versions in all (a file being written all the time
/// fails with words rather than being fetched forever).
pub const MAX_VERSIONS: u32 = 4;
/// How long a file that changed waits for the sharer to send its new version
/// (its watch, or the read that found it changed, tells every visitor).
pub const NEW_VERSION_WITHIN: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct GetOptions {
    /// What to download: a path in the share ("" for all of it), as bytes
    /// (names need not be UTF-8).
    pub path: Vec<u8>,
    /// Where to put it (created if missing).
    pub out: PathBuf,
    /// Files downloaded at once.
    pub parallel_files: usize,
}

/// What a download did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GetSummary {
    pub files: u64,
    pub folders: u64,
    pub symlinks: u64,
    /// Files already complete from an earlier run, not fetched again.
    pub already_complete: u64,
    /// Bytes fetched from the sharer in this run.
    pub bytes_fetched: u64,
    /// Entries refused (unsafe names), in words.
    pub refused: Vec<String>,
    /// Symlinks not made: the sharer does not show where they lead (out of
    /// the folder a scoped link shows).
    pub hidden_symlinks: Vec<String>,
    /// Entries that failed, in words.
    pub failed: Vec<String>,
}

/// Why a download could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GetError {
    #[error("{0}: no such file or folder in the share")]
    NotFound(String),
    #[error("cannot create or open the output folder {path}: {source}")]
    Out {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A name that is safe to create inside a folder.
pub fn safe_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.contains(&b'/') && !name.contains(&0)
}

/// The most of a path a message shows: its last bytes, after "…" (a sharer's
/// tree can be thousands of folders deep).
const SHOWN_PATH_BYTES: usize = 1024;

fn shown(path: &[u8]) -> String {
    match path.len().checked_sub(SHOWN_PATH_BYTES) {
        Some(cut) if cut > 0 => format!("…{}", crate::terminal::escaped_name(&path[cut..])),
        _ => crate::terminal::escaped_name(path),
    }
}

/// A folder beneath `--out`: its name and the folder it is in. Held as a chain,
/// so each folder costs its own name however deep it is (a list of every
/// component per folder made a sharer's chain of 20,000 folders cost
/// gigabytes: the square of the depth).
struct FolderNode {
    name: Vec<u8>,
    up: Option<Folder>,
}

type Folder = Arc<FolderNode>;

impl FolderNode {
    /// `--out` itself.
    fn top() -> Folder {
        Arc::new(FolderNode {
            name: Vec::new(),
            up: None,
        })
    }

    fn child(self: &Arc<Self>, name: Vec<u8>) -> Folder {
        Arc::new(FolderNode {
            name,
            up: Some(self.clone()),
        })
    }

    /// Its path components below `--out`, from the top.
    fn components(&self) -> Vec<&[u8]> {
        let mut parts = Vec::new();
        let mut at = Some(self);
        while let Some(f) = at {
            if f.up.is_some() {
                parts.push(&f.name[..]);
            }
            at = f.up.as_deref();
        }
        parts.reverse();
        parts
    }

    /// The path of `name` in it, below `--out` (for messages).
    fn path_of(&self, name: &[u8]) -> Vec<u8> {
        let mut path = self.components().join(&b'/');
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(name);
        path
    }

    /// Its own path below `--out` (for messages).
    fn path(&self) -> Vec<u8> {
        self.components().join(&b'/')
    }
}

impl Drop for FolderNode {
    /// Lets go of the chain a folder at a time (dropping it whole would
    /// recurse once per folder).
    fn drop(&mut self) {
        let mut up = self.up.take();
        while let Some(f) = up {
            up = match Arc::try_unwrap(f) {
                Ok(mut node) => node.up.take(),
                Err(_) => None,
            };
        }
    }
}

/// One file to fetch.
#[derive(Clone)]
struct FileJob {
    /// The folder the file goes into.
    dir: Folder,
    name: Vec<u8>,
    entry: EntryId,
    /// Its folder in the share (a new version must still be there).
    parent: EntryId,
    size: u64,
    mtime: i64,
    mode: u32,
    /// The version fetched: every piece is read of it.
    generation: Generation,
}

/// The part file's name for a version of a source file: its name, size,
/// mtime and generation (a rewrite within one second at the same size is
/// another generation, so a later run never continues the old one's part).
fn part_name(name: &[u8], size: u64, mtime: i64, generation: Generation) -> Vec<u8> {
    let mut h = blake3::Hasher::new();
    h.update(name);
    h.update(&size.to_le_bytes());
    h.update(&mtime.to_le_bytes());
    h.update(&generation.0.to_le_bytes());
    let hex = h.finalize().to_hex();
    format!(".linkfs-part.{}", &hex[..24]).into_bytes()
}

fn io_err(e: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e as i32)
}

/// The process's umask (from /proc; 022 where it cannot be read).
fn process_umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// The mode a downloaded file gets: the sharer's permission bits (never
/// set-user-id, set-group-id or sticky) under the umask.
pub fn file_mode(sharer_mode: u32, umask: u32) -> u32 {
    sharer_mode & 0o777 & !umask
}

/// The mode a downloaded folder gets: as a file's, and the owner keeps rwx.
pub fn folder_mode(sharer_mode: u32, umask: u32) -> u32 {
    file_mode(sharer_mode, umask) | 0o700
}

impl FileJob {
    /// Its path below `--out` (for messages).
    fn path(&self) -> Vec<u8> {
        self.dir.path_of(&self.name)
    }
}

/// Opens `folder` beneath `out`, one component at a time, never through a symlink.
fn open_folder(out: &impl AsFd, folder: &FolderNode) -> std::io::Result<OwnedFd> {
    let flags = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_RDONLY | OFlag::O_CLOEXEC;
    let mut fd = openat(out, ".", flags, Mode::empty()).map_err(io_err)?;
    for c in folder.components() {
        fd = openat(&fd, std::ffi::OsStr::from_bytes(c), flags, Mode::empty()).map_err(|e| {
            match e {
                Errno::ELOOP | Errno::ENOTDIR => std::io::Error::other(
                    "something that is not a folder (a file or a symlink) is in the way; move it and run again",
                ),
                e => io_err(e),
            }
        })?;
    }
    Ok(fd)
}

/// Opens (creating if needed) folder `name` inside `parent`, never through a symlink.
fn enter_dir(parent: &impl AsFd, name: &[u8]) -> std::io::Result<OwnedFd> {
    let name = std::ffi::OsStr::from_bytes(name);
    match mkdirat(parent, name, Mode::from_bits_truncate(0o755)) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(e) => return Err(io_err(e)),
    }
    openat(
        parent,
        name,
        OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        Errno::ELOOP | Errno::ENOTDIR => std::io::Error::other(
            "something that is not a folder (a file or a symlink) is in the way; move it and run again",
        ),
        e => io_err(e),
    })
}

/// Whether `name` in `dir` is already the complete file (size and mtime as the sharer has them).
fn is_complete(dir: &impl AsFd, name: &[u8], size: u64, mtime: i64) -> bool {
    fstatat(
        dir,
        std::ffi::OsStr::from_bytes(name),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .is_ok_and(|st| {
        (st.st_mode & libc_s_ifmt()) == libc_s_ifreg()
            && st.st_size as u64 == size
            && st.st_mtime == mtime
    })
}

const fn libc_s_ifmt() -> u32 {
    0o170_000
}
const fn libc_s_ifreg() -> u32 {
    0o100_000
}

/// Downloads `options.path` beneath `options.out`. Failures of single entries
/// are collected in the summary; the rest continues.
pub async fn get(
    client: &Client,
    options: &GetOptions,
    bar: &ProgressBar,
) -> Result<GetSummary, GetError> {
    let trimmed = super::listing::trim_slashes(&options.path);
    let not_found = || GetError::NotFound(shown(&options.path));
    let root_id = if trimmed.is_empty() || trimmed == b"." {
        EntryId(0)
    } else {
        client
            .with_index(|ix| ix.lookup(trimmed))
            .ok_or_else(not_found)?
    };
    std::fs::create_dir_all(&options.out).map_err(|source| GetError::Out {
        path: options.out.clone(),
        source,
    })?;
    let out_fd: OwnedFd = File::open(&options.out)
        .map_err(|source| GetError::Out {
            path: options.out.clone(),
            source,
        })?
        .into();
    let out_fd = Arc::new(out_fd);
    let umask = process_umask();

    let mut summary = GetSummary::default();
    // Files still to fetch (complete ones are counted and skipped as folders are listed).
    let mut todo: VecDeque<FileJob> = VecDeque::new();
    let mut total = 0u64;
    let mut add_job = |job: FileJob, dir_fd: &OwnedFd, summary: &mut GetSummary| {
        if is_complete(dir_fd, &job.name, job.size, job.mtime) {
            summary.already_complete += 1;
            summary.files += 1;
        } else {
            // Sizes are the sharer's word: summed so that no two can overflow.
            total = total.saturating_add(job.size);
            todo.push_back(job);
        }
    };
    // Folders get the sharer's mtime and mode once everything inside is written.
    let mut folder_times: Vec<(Folder, i64, u32)> = Vec::new();
    let (root_kind, root_name) = client
        .with_index(|ix| ix.get(root_id).map(|e| (e.kind, e.name.to_vec())))
        .ok_or_else(not_found)?;
    if root_kind != EntryKind::Dir {
        // One file (or symlink): into --out under its own name.
        let e = client.with_index(|ix| ix.get(root_id).map(|e| e.to_entry()));
        if let Some(Entry {
            parent,
            size,
            mtime,
            mode,
            generation,
            target,
            ..
        }) = e
        {
            if !safe_name(&root_name) {
                summary
                    .refused
                    .push(format!("{}: not a safe name", shown(&root_name)));
            } else if root_kind == EntryKind::Symlink {
                make_symlink(
                    &*out_fd,
                    &root_name,
                    &target,
                    mtime,
                    &root_name,
                    &mut summary,
                );
            } else {
                let job = FileJob {
                    dir: FolderNode::top(),
                    name: root_name,
                    entry: root_id,
                    parent,
                    size,
                    mtime,
                    mode,
                    generation,
                };
                add_job(job, &out_fd, &mut summary);
            }
        }
    } else {
        let top = FolderNode::top();
        if let Some((mtime, mode)) =
            client.with_index(|ix| ix.get(root_id).map(|e| (e.mtime, e.mode)))
        {
            folder_times.push((top.clone(), mtime, mode));
        }
        // Depth first; only the folder being listed is open.
        let mut stack: Vec<(EntryId, Folder)> = vec![(root_id, top)];
        while let Some((dir, folder)) = stack.pop() {
            let fd = match open_folder(&*out_fd, &folder) {
                Ok(fd) => fd,
                Err(e) => {
                    summary
                        .failed
                        .push(format!("{}: {e}", shown(&folder.path())));
                    continue;
                }
            };
            let children: Vec<Entry> = client.with_index(|ix| {
                ix.children(dir)
                    .iter()
                    .filter_map(|&c| ix.get(EntryId(c)))
                    .map(|e| e.to_entry())
                    .collect()
            });
            let mut subdirs = Vec::new();
            for child in children {
                let Entry {
                    id,
                    kind,
                    name,
                    size,
                    mtime,
                    mode,
                    generation,
                    target,
                    ..
                } = child;
                if !safe_name(&name) {
                    summary.refused.push(format!(
                        "{}: the sharer sent a name that could escape the output folder; skipped",
                        shown(&folder.path_of(&name))
                    ));
                    continue;
                }
                match kind {
                    EntryKind::Dir => match enter_dir(&fd, &name) {
                        Ok(_closed) => {
                            summary.folders += 1;
                            subdirs.push((id, folder.child(name), mtime, mode));
                        }
                        Err(e) => summary
                            .failed
                            .push(format!("{}: {e}", shown(&folder.path_of(&name)))),
                    },
                    EntryKind::Symlink => make_symlink(
                        &fd,
                        &name,
                        &target,
                        mtime,
                        &folder.path_of(&name),
                        &mut summary,
                    ),
                    _ => {
                        let job = FileJob {
                            dir: folder.clone(),
                            name,
                            entry: id,
                            parent: dir,
                            size,
                            mtime,
                            mode,
                            generation,
                        };
                        add_job(job, &fd, &mut summary);
                    }
                }
            }
            drop(fd);
            for (id, sub, mtime, mode) in subdirs.into_iter().rev() {
                folder_times.push((sub.clone(), mtime, mode));
                stack.push((id, sub));
            }
        }
    }

    // Fetch what is not complete, several files at once.
    bar.set_length(total);
    let mut running: JoinSet<(Vec<u8>, Result<Finished, FetchError>)> = JoinSet::new();
    let parallel = options.parallel_files.max(1);
    let budget = Arc::new(Semaphore::new((PIECES_IN_MEMORY / BUDGET_UNIT) as usize));
    // Finished files waiting for a sync, and the group being synced and renamed.
    let mut finished: Vec<Finished> = Vec::new();
    let mut finishing: Option<tokio::task::JoinHandle<Vec<Outcome>>> = None;
    let big_running = Arc::new(AtomicUsize::new(0));
    // When the first of `finished` finished.
    let mut group_since = tokio::time::Instant::now();
    loop {
        if finishing.is_none()
            && !finished.is_empty()
            && (finished.len() >= FINISH_GROUP
                || group_since.elapsed() >= FINISH_WAIT
                || (running.is_empty() && todo.is_empty()))
        {
            let (out, group) = (out_fd.clone(), std::mem::take(&mut finished));
            finishing = Some(tokio::task::spawn_blocking(move || {
                finish_group(&out, group)
            }));
        }
        // Up to `parallel` files of more than one piece at once, and small ones
        // beside them up to FILES_IN_FLIGHT in all: a small file costs a round
        // trip, and only many in flight fill a long path.
        while running.len() < FILES_IN_FLIGHT.max(parallel)
            && finished.len() < FINISH_WAITING
            && let Some(job) = todo.front()
            && (job.size <= PIECE || big_running.load(Ordering::Relaxed) < parallel)
            && (job.size > PIECE || running.len() < FILES_IN_FLIGHT)
        {
            let Some(job) = todo.pop_front() else { break };
            let (client, bar, out) = (client.clone(), bar.clone(), out_fd.clone());
            let budget = budget.clone();
            let big = (job.size > PIECE).then(|| BigFile::start(&big_running));
            running.spawn(async move {
                let _big = big;
                let path = job.path();
                (
                    path,
                    fetch_latest(&client, &out, job, umask, &bar, &budget).await,
                )
            });
        }
        if running.is_empty() && finishing.is_none() {
            break;
        }
        tokio::select! {
            Some(done) = running.join_next(), if !running.is_empty() => match done {
                Ok((_, Ok(f))) => {
                    if finished.is_empty() {
                        group_since = tokio::time::Instant::now();
                    }
                    finished.push(f);
                }
                Ok((path, Err(e))) => summary.failed.push(format!("{}: {e}", shown(&path))),
                Err(e) => summary.failed.push(format!("a download task failed: {e}")),
            },
            () = tokio::time::sleep_until(group_since + FINISH_WAIT), if finishing.is_none() && !finished.is_empty() => {}
            group = async { finishing.as_mut().expect("guarded").await }, if finishing.is_some() => {
                finishing = None;
                match group {
                    Ok(outcomes) => {
                        for (path, r) in outcomes {
                            match r {
                                Ok(fetched) => {
                                    summary.files += 1;
                                    summary.bytes_fetched += fetched;
                                }
                                Err(e) => summary.failed.push(format!("{}: {e}", shown(&path))),
                            }
                        }
                    }
                    Err(e) => summary.failed.push(format!("a download task failed: {e}")),
                }
            }
        }
    }
    // Deepest first, so that setting a folder's time does not disturb its parent's.
    for (folder, mtime, mode) in folder_times.iter().rev() {
        let Ok(fd) = open_folder(&*out_fd, folder) else {
            continue;
        };
        let mode = Mode::from_bits_truncate(folder_mode(*mode, umask) as nix::libc::mode_t);
        let _ = nix::sys::stat::fchmod(&fd, mode);
        let t = nix::sys::time::TimeSpec::new(*mtime, 0);
        let _ = nix::sys::stat::futimens(&fd, &nix::sys::time::TimeSpec::UTIME_OMIT, &t);
    }
    Ok(summary)
}

fn make_symlink(
    dir: &impl AsFd,
    name: &[u8],
    target: &[u8],
    mtime: i64,
    path: &[u8],
    summary: &mut GetSummary,
) {
    if target.is_empty() {
        summary.hidden_symlinks.push(shown(path));
        return;
    }
    let name_os = std::ffi::OsStr::from_bytes(name);
    let target_os = std::ffi::OsStr::from_bytes(target);
    match nix::unistd::symlinkat(target_os, dir, name_os) {
        Ok(()) => {
            summary.symlinks += 1;
            // The symlink's own time, not its target's.
            let t = nix::sys::time::TimeSpec::new(mtime, 0);
            let _ = nix::sys::stat::utimensat(
                dir,
                name_os,
                &nix::sys::time::TimeSpec::UTIME_OMIT,
                &t,
                nix::sys::stat::UtimensatFlags::NoFollowSymlink,
            );
        }
        Err(Errno::EEXIST) => {
            // Complete if it is the same symlink; anything else is in the way.
            let same = nix::fcntl::readlinkat(dir, name_os).is_ok_and(|t| t.as_bytes() == target);
            if same {
                summary.symlinks += 1;
            } else {
                summary.failed.push(format!(
                    "{}: something else is in the way of this symlink; move it and run again",
                    shown(path)
                ));
            }
        }
        Err(e) => summary
            .failed
            .push(format!("{}: cannot create the symlink: {e}", shown(path))),
    }
}

/// Why one file could not be downloaded (the rest go on).
#[derive(Debug, thiserror::Error)]
enum FetchError {
    /// Something on this machine's side: what, and the system's words.
    #[error("cannot {what}: {source}")]
    Local {
        what: &'static str,
        source: std::io::Error,
    },
    #[error(transparent)]
    Read(#[from] super::ReadError),
    #[error("the sharer sent {got} bytes where {want} were asked for")]
    WrongLength { got: usize, want: u64 },
    #[error("a read task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error(
        "a folder of that name is in the way; move it and run again (the file waits beside it, finished)"
    )]
    FolderInTheWay,
    #[error("it was removed from the share while it was being fetched")]
    Removed,
    #[error("it is no longer a file in the share")]
    NoLongerAFile,
    #[error(
        "it was renamed or moved in the share while it was being fetched; run the command again"
    )]
    Moved,
    #[error(
        "the file changed since it was listed, and the sharer did not send its new version within {} s; run the command again",
        NEW_VERSION_WITHIN.as_secs()
    )]
    NoNewVersion,
    #[error(
        "the file kept changing while it was fetched ({MAX_VERSIONS} versions); run the command again once it is no longer being written"
    )]
    KeptChanging,
}

impl FetchError {
    /// The file changed since the version being fetched was listed.
    fn is_changed(&self) -> bool {
        use super::ReadError;
        matches!(
            self,
            FetchError::Read(ReadError::Failed(ReadFailure::Refused(
                _,
                ReadErrorCode::Changed
            ))) | FetchError::Read(ReadError::NotStarted(StartReadError::Changed { .. }))
                | FetchError::Read(ReadError::Failed(ReadFailure::NotStarted(
                    StartReadError::Changed { .. }
                )))
        )
    }
}

/// Fetches `job`; when the file changes under the fetch (the sharer refuses
/// the version asked for, or the index moves on), its part file is dropped and
/// the new version fetched whole once the index has it, up to
/// [`MAX_VERSIONS`] in all. Never a file of two versions' bytes.
async fn fetch_latest(
    client: &Client,
    out: &OwnedFd,
    mut job: FileJob,
    umask: u32,
    bar: &ProgressBar,
    budget: &Arc<Semaphore>,
) -> Result<Finished, FetchError> {
    let mut versions = 1;
    loop {
        let mut counted = 0;
        let fetched = fetch_file(client, out, job.clone(), umask, bar, budget, &mut counted);
        let error = match fetched.await {
            Err(error) if error.is_changed() => error,
            done => return done,
        };
        tracing::info!(path = %shown(&job.path()), %error, "the file changed while it was fetched");
        drop_part(out, &job);
        // The old version leaves the progress bar: its length and what was counted of it.
        bar.dec(counted);
        bar.dec_length(job.size);
        if versions >= MAX_VERSIONS {
            return Err(FetchError::KeptChanging);
        }
        job = next_version(client, job, NEW_VERSION_WITHIN).await?;
        bar.inc_length(job.size);
        versions += 1;
    }
}

/// Removes the part file of a version no longer shared (best effort: a
/// left one is only a hidden file a later run ignores).
fn drop_part(out: &OwnedFd, job: &FileJob) {
    let part = part_name(&job.name, job.size, job.mtime, job.generation);
    if let Ok(dir) = open_folder(out, &job.dir) {
        let _ = nix::unistd::unlinkat(
            &dir,
            std::ffi::OsStr::from_bytes(&part),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
}

/// Waits (up to `within`) for the index to hold another version of `job`'s
/// file than the one that changed, and makes the job for it.
async fn next_version(
    client: &Client,
    job: FileJob,
    within: Duration,
) -> Result<FileJob, FetchError> {
    let deadline = tokio::time::Instant::now() + within;
    let mut watch = client.watch();
    loop {
        // Marked seen before the look, so a change after it wakes us.
        let (ended, complete) = {
            let s = watch.borrow_and_update();
            (s.ended.clone(), s.complete)
        };
        let now = client.with_index(|ix| {
            ix.get(job.entry).map(|e| {
                let same_place = e.parent == job.parent && e.name == job.name.as_slice();
                (e.kind, same_place, e.generation, e.size, e.mtime, e.mode)
            })
        });
        match now {
            // The sharer starting over sends its index again: wait for it whole.
            None if !complete => {}
            None => return Err(FetchError::Removed),
            Some((_, false, ..)) if complete => return Err(FetchError::Moved),
            Some((_, false, ..)) => {}
            Some((kind, ..)) if kind != EntryKind::File => return Err(FetchError::NoLongerAFile),
            Some((_, _, generation, size, mtime, mode)) if generation != job.generation => {
                return Ok(FileJob {
                    size,
                    mtime,
                    mode,
                    generation,
                    ..job
                });
            }
            Some(_) => {}
        }
        if let Some(reason) = ended {
            return Err(FetchError::Read(super::ReadError::Ended(reason)));
        }
        match tokio::time::timeout_at(deadline, watch.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => return Err(FetchError::NoNewVersion),
        }
    }
}

/// Turns a local failure (an `io::Error` or an errno) into a [`FetchError`]
/// that says what was being done.
fn local<E: Into<std::io::Error>>(what: &'static str) -> impl FnOnce(E) -> FetchError {
    move |e| FetchError::Local {
        what,
        source: e.into(),
    }
}

/// A part file written whole, with the sharer's mtime and mode: to be synced
/// and renamed into place ([`finish_group`]).
struct Finished {
    dir: Folder,
    part: Vec<u8>,
    name: Vec<u8>,
    path: Vec<u8>,
    /// The file system it is on (one `syncfs` each).
    dev: u64,
    /// Bytes fetched in this run.
    fetched: u64,
}

/// Fetches one file into its part file. It is renamed into place once synced
/// ([`finish_group`]).
async fn fetch_file(
    client: &Client,
    out: &OwnedFd,
    job: FileJob,
    umask: u32,
    bar: &ProgressBar,
    budget: &Arc<Semaphore>,
    counted: &mut u64,
) -> Result<Finished, FetchError> {
    let part = part_name(&job.name, job.size, job.mtime, job.generation);
    let part_os = std::ffi::OsStr::from_bytes(&part);
    // A file of one piece or less has nothing to resume: its bytes are fetched
    // first and its part file written whole, so the many small files in flight
    // hold no descriptor while they wait on the network.
    let small = if job.size > 0 && job.size <= PIECE {
        let units = job.size.div_ceil(BUDGET_UNIT) as u32;
        let held = budget
            .clone()
            .acquire_many_owned(units)
            .await
            .map_err(|_| local("hold the piece in memory")(std::io::ErrorKind::Other))?;
        let data = client
            .start_read(job.entry, Some(job.generation), 0, job.size)
            .await?;
        if data.len() as u64 != job.size {
            return Err(FetchError::WrongLength {
                got: data.len(),
                want: job.size,
            });
        }
        Some((data, held))
    } else {
        None
    };
    // A small file's part is written whole: one left by an earlier run is
    // emptied by O_TRUNC, which leaves a part file it creates alone. (An
    // `ftruncate` of a new file made ext4 write the file out at its `close`,
    // its "replace by truncate" guard: a fifth of `get`'s time over 100,000
    // files of 1 KiB; docs/benchmarks.md.)
    let truncate = if small.is_some() {
        OFlag::O_TRUNC
    } else {
        OFlag::empty()
    };
    let fd = {
        let dir = open_folder(out, &job.dir).map_err(local("open its folder"))?;
        openat(
            &dir,
            part_os,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | truncate,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(local("create the part file"))?
    };
    let mut file = File::from(fd);
    if let Some((data, _held)) = small {
        file.write_all(&data).map_err(local("write"))?;
        bar.inc(job.size);
        *counted += job.size;
        let fetched = job.size;
        return finish_part(file, job, part, umask, fetched);
    }
    let have = file.metadata().map_err(local("read the part file"))?.len();
    // Continue from the last whole piece written (earlier pieces were verified and written in order).
    let mut offset = (have / PIECE * PIECE).min(job.size);
    file.set_len(offset).map_err(local("trim the part file"))?;
    file.seek(SeekFrom::Start(offset))
        .map_err(local("seek in the part file"))?;
    bar.inc(offset);
    *counted += offset;
    let resumed = offset;
    let mut next = offset;
    let mut in_flight = VecDeque::new();
    while offset < job.size {
        while in_flight.len() < PIPELINE && next < job.size {
            let len = PIECE.min(job.size - next);
            let units = len.div_ceil(BUDGET_UNIT) as u32;
            // Wait for room only with nothing of this file in flight.
            let held = if in_flight.is_empty() {
                // The budget is never closed; should it be, say so.
                budget
                    .clone()
                    .acquire_many_owned(units)
                    .await
                    .map_err(|_| local("hold the piece in memory")(std::io::ErrorKind::Other))?
            } else {
                match budget.clone().try_acquire_many_owned(units) {
                    Ok(held) => held,
                    Err(_) => break,
                }
            };
            let read = tokio::spawn(client.start_read(job.entry, Some(job.generation), next, len));
            in_flight.push_back((len, read, held));
            next += len;
        }
        let Some((len, read, _held)) = in_flight.pop_front() else {
            break;
        };
        let data = read.await??;
        if data.len() as u64 != len {
            return Err(FetchError::WrongLength {
                got: data.len(),
                want: len,
            });
        }
        if data.iter().all(|b| *b == 0) {
            // A hole stays a hole: skipped here, the file's length set at the end.
            file.seek(SeekFrom::Current(len as i64))
                .map_err(local("seek in the part file"))?;
        } else {
            file.write_all(&data).map_err(local("write"))?;
        }
        offset += len;
        bar.inc(len);
        *counted += len;
    }
    // Zeros at the end were skipped: the length says where the file ends.
    let written = file.metadata().map_err(local("read the part file"))?.len();
    if written != job.size {
        file.set_len(job.size)
            .map_err(local("set the file's length"))?;
    }
    let fetched = job.size - resumed;
    finish_part(file, job, part, umask, fetched)
}

/// Gives a written part file the sharer's mtime and mode; it then waits for a
/// sync and its rename ([`finish_group`]).
fn finish_part(
    file: File,
    job: FileJob,
    part: Vec<u8>,
    umask: u32,
    fetched: u64,
) -> Result<Finished, FetchError> {
    let mtime = UNIX_EPOCH + Duration::from_secs(job.mtime.max(0).unsigned_abs());
    file.set_modified(mtime)
        .map_err(local("set the modification time"))?;
    file.set_permissions(std::fs::Permissions::from_mode(file_mode(job.mode, umask)))
        .map_err(local("set the mode"))?;
    let dev =
        std::os::unix::fs::MetadataExt::dev(&file.metadata().map_err(local("read the part file"))?);
    let path = job.path();
    Ok(Finished {
        dir: job.dir,
        part,
        name: job.name,
        path,
        dev,
        fetched,
    })
}

/// Counts a file of more than one piece being fetched, until dropped.
struct BigFile(Arc<AtomicUsize>);

impl BigFile {
    fn start(count: &Arc<AtomicUsize>) -> BigFile {
        count.fetch_add(1, Ordering::Relaxed);
        BigFile(count.clone())
    }
}

impl Drop for BigFile {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A file's path in the share, and its bytes fetched or why it is not in place.
type Outcome = (Vec<u8>, Result<u64, FetchError>);

/// Syncs a group of finished part files to disk (one `syncfs` per file system
/// they are on), then renames each into place. Each file's outcome: its bytes
/// fetched, or why it is not in place (a re-run continues it).
fn finish_group(out: &OwnedFd, group: Vec<Finished>) -> Vec<Outcome> {
    let mut synced: Vec<(u64, Result<(), Errno>)> = Vec::new();
    for f in &group {
        if !synced.iter().any(|(dev, _)| *dev == f.dev) {
            let r = open_folder(out, &f.dir)
                .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(nix::libc::EIO)))
                .and_then(nix::unistd::syncfs);
            synced.push((f.dev, r));
        }
    }
    // Files of one folder come together: its descriptor is kept for the next.
    let mut folder: Option<(Folder, OwnedFd)> = None;
    group
        .into_iter()
        .map(|f| {
            let sync = synced
                .iter()
                .find(|(dev, _)| *dev == f.dev)
                .map_or(Ok(()), |(_, r)| *r);
            let r = sync.map_err(local("write it to disk")).and_then(|()| {
                if !folder.as_ref().is_some_and(|(d, _)| Arc::ptr_eq(d, &f.dir)) {
                    folder = Some((
                        f.dir.clone(),
                        open_folder(out, &f.dir).map_err(local("open its folder"))?,
                    ));
                }
                let (_, dir) = folder.as_ref().expect("opened above");
                renameat(
                    dir,
                    std::ffi::OsStr::from_bytes(&f.part),
                    dir,
                    std::ffi::OsStr::from_bytes(&f.name),
                )
                .map_err(|e| match e {
                    nix::errno::Errno::EISDIR => FetchError::FolderInTheWay,
                    e => local("move the finished file into place")(e),
                })?;
                Ok(f.fetched)
            });
            (f.path, r)
        })
        .collect()
}

/// Where a path of the share lands beneath `out` (for messages).
pub fn destination(out: &Path, path: &[u8]) -> PathBuf {
    out.join(std::ffi::OsStr::from_bytes(path))
}
