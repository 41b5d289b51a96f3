//! A lister thread: takes folders from the stack and reads each with one
//! `readdir` pass and one `lstat` per entry (std's `DirEntry::metadata`, an
//! `fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW)`: no path lookup, nothing
//! followed), plus a `readlink` for symlinks. Entries go to the numbering
//! thread in chunks of at most [`CHUNK_LEN`](super::CHUNK_LEN).

use std::fs;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::sync::mpsc::SyncSender;

use linkfs_proto::{EntryId, EntryKind};

use super::{CHUNK_LEN, FolderJob, Shared, WalkedEntry, io_reason};

/// One entry found in a folder.
#[derive(Debug)]
pub(super) struct Found {
    pub(super) entry: WalkedEntry,
    /// For a folder: the path to list it by, if the numbering thread decides to.
    pub(super) folder_path: Option<PathBuf>,
}

/// Part of one folder's listing.
#[derive(Debug)]
pub(super) struct Chunk {
    /// The id of the folder listed.
    pub(super) parent: EntryId,
    pub(super) found: Vec<Found>,
    pub(super) skipped_special: u64,
    /// The folder's listing is complete with this chunk.
    pub(super) last: bool,
}

/// The numbering thread is gone (walk over or cancelled): stop.
struct Stopped;

pub(super) fn run(shared: &Shared, tx: &SyncSender<Chunk>) {
    while let Some(job) = shared.stack.pop() {
        if list_folder(shared, job, tx).is_err() {
            return;
        }
    }
}

fn list_folder(shared: &Shared, job: FolderJob, tx: &SyncSender<Chunk>) -> Result<(), Stopped> {
    let mut chunk = Chunk {
        parent: job.id,
        found: Vec::new(),
        skipped_special: 0,
        last: false,
    };
    if let Some(hook) = &shared.before_listing {
        hook(&job.path);
    }
    let listing = match fs::read_dir(&job.path) {
        Ok(listing) => listing,
        Err(e) => {
            shared.problem(&job.path, io_reason("cannot read this folder", &e));
            return finish(chunk, tx);
        }
    };
    for item in listing {
        if shared.cancelled() {
            // Wake the other listers so they stop too, and with them the
            // numbering thread waiting for their chunks.
            shared.stack.close();
            return Err(Stopped);
        }
        let dirent = match item {
            Ok(dirent) => dirent,
            Err(e) => {
                shared.problem(
                    &job.path,
                    io_reason("cannot read the rest of this folder", &e),
                );
                break;
            }
        };
        let md = match dirent.metadata() {
            Ok(md) => md,
            Err(e) => {
                shared.problem(&dirent.path(), io_reason("cannot read its details", &e));
                continue;
            }
        };
        let file_type = md.file_type();
        let kind = if file_type.is_file() {
            EntryKind::File
        } else if file_type.is_dir() {
            EntryKind::Dir
        } else if file_type.is_symlink() {
            EntryKind::Symlink
        } else {
            // A socket, fifo or device: not shared.
            chunk.skipped_special += 1;
            continue;
        };
        let mut folder_path = None;
        let target = match kind {
            EntryKind::Symlink => match fs::read_link(dirent.path()) {
                Ok(target) => target.into_os_string().into_vec(),
                Err(e) => {
                    shared.problem(
                        &dirent.path(),
                        io_reason("cannot read where this link points", &e),
                    );
                    continue;
                }
            },
            EntryKind::Dir => {
                folder_path = Some(dirent.path());
                Vec::new()
            }
            EntryKind::File => Vec::new(),
        };
        let name = dirent.file_name().into_vec();
        chunk.found.push(Found {
            entry: WalkedEntry::from_metadata(kind, name, target, &md),
            folder_path,
        });
        if chunk.found.len() == CHUNK_LEN {
            let full = Chunk {
                parent: job.id,
                found: Vec::with_capacity(CHUNK_LEN),
                skipped_special: 0,
                last: false,
            };
            tx.send(std::mem::replace(&mut chunk, full))
                .map_err(|_| Stopped)?;
        }
    }
    finish(chunk, tx)
}

fn finish(mut chunk: Chunk, tx: &SyncSender<Chunk>) -> Result<(), Stopped> {
    chunk.last = true;
    tx.send(chunk).map_err(|_| Stopped)
}
