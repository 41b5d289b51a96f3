//! A lister thread: takes folders from the stack and reads each with one
//! `readdir` pass and one `fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW)` per
//! entry (no path lookup, nothing followed), plus a `readlinkat` for symlinks.
//! Entries go to the numbering thread in chunks of at most
//! [`CHUNK_LEN`](super::CHUNK_LEN).
//!
//! A folder is opened `O_DIRECTORY | O_NOFOLLOW` and its `fstat` must show the
//! device and inode it had when it was found: a folder (or any folder above
//! it) swapped for a symlink between being found and being listed (to `/`, to
//! `/etc`) would otherwise be listed through the link, sharing names, sizes
//! and modes from outside the share. Such a folder is reported, not listed.
//!
//! A folder whose path is longer than the kernel takes in one call (4,096
//! bytes, about a thousand levels) is opened a part at a time ([`open_long`]).

use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::sync::mpsc::SyncSender;

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, open, readlinkat};
use nix::sys::stat::{Mode, fstat, fstatat};

use linkfs_proto::{EntryId, EntryKind};

use super::found::{CHUNK_LEN, WalkedEntry};
use super::shared::{Shared, io_reason};
use super::stack::FolderJob;
use crate::disk_entry::DiskEntry;

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

/// Longest part of a path opened in one call when the whole is longer than
/// the kernel takes (`PATH_MAX`, 4,096 bytes: a tree about a thousand levels deep).
const PATH_PART: usize = 2048;

/// Opens `path` with `flags`; a path longer than the kernel takes in one call
/// is opened a part at a time (each part a folder, `O_PATH`, relative to the
/// one before; cut at a '/'), as the kernel would resolve it whole.
fn open_long(path: &std::path::Path, flags: OFlag) -> nix::Result<std::os::fd::OwnedFd> {
    use std::os::fd::AsFd;
    match open(path, flags, Mode::empty()) {
        Err(Errno::ENAMETOOLONG) => {}
        other => return other,
    }
    let mut rest = path.as_os_str().as_bytes();
    let mut held: Option<std::os::fd::OwnedFd> = None;
    while rest.len() > PATH_PART {
        let cut = rest[..PATH_PART]
            .iter()
            .rposition(|b| *b == b'/')
            .ok_or(Errno::ENAMETOOLONG)?;
        // An absolute path's first part is "/" itself.
        let head = if cut == 0 { &b"/"[..] } else { &rest[..cut] };
        let at = held.as_ref().map_or(nix::fcntl::AT_FDCWD, |h| h.as_fd());
        let fd = nix::fcntl::openat(
            at,
            OsStr::from_bytes(head),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        held = Some(fd);
        rest = &rest[cut + 1..];
    }
    let at = held.as_ref().map_or(nix::fcntl::AT_FDCWD, |h| h.as_fd());
    nix::fcntl::openat(at, OsStr::from_bytes(rest), flags, Mode::empty())
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
    // The shared folder itself may be given as a symlink (the user named it):
    // followed there, and nowhere else.
    let mut flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    if job.id != EntryId::ROOT {
        flags |= OFlag::O_NOFOLLOW;
    }
    let opened = open_long(&job.path, flags).and_then(|fd| {
        let st = fstat(&fd)?;
        Ok((fd, st))
    });
    let dir_fd = match opened {
        Ok((fd, st)) if st.st_dev == job.dev && st.st_ino == job.ino => fd,
        Ok(_) | Err(Errno::ELOOP | Errno::ENOTDIR) => {
            shared.problem(
                &job.path,
                "not listed: it was replaced (by a symlink or another folder) while the share was being indexed".into(),
            );
            return finish(chunk, tx);
        }
        Err(e) => {
            let e = std::io::Error::from_raw_os_error(e as i32);
            shared.problem(&job.path, io_reason("cannot read this folder", &e));
            return finish(chunk, tx);
        }
    };
    // One descriptor to iterate, one to look entries up by (nix's Dir owns its own).
    let listing = dir_fd
        .try_clone()
        .map_err(|e| e.raw_os_error().map_or(Errno::EIO, Errno::from_raw))
        .and_then(Dir::from_fd);
    let mut listing = match listing {
        Ok(listing) => listing,
        Err(e) => {
            let e = std::io::Error::from_raw_os_error(e as i32);
            shared.problem(&job.path, io_reason("cannot read this folder", &e));
            return finish(chunk, tx);
        }
    };
    for item in listing.iter() {
        if shared.cancelled() {
            // Wake the other listers so they stop too, and with them the
            // numbering thread waiting for their chunks.
            shared.stack.close();
            return Err(Stopped);
        }
        let dirent = match item {
            Ok(dirent) => dirent,
            Err(e) => {
                let e = std::io::Error::from_raw_os_error(e as i32);
                shared.problem(
                    &job.path,
                    io_reason("cannot read the rest of this folder", &e),
                );
                break;
            }
        };
        let name_c = dirent.file_name();
        let name = name_c.to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        // Uploads being written aside are never shared.
        if job.id == EntryId::ROOT && name == crate::sharer::landing::STAGING.as_bytes() {
            continue;
        }
        let path = || job.path.join(OsStr::from_bytes(name));
        // A link that selects paths: what is beside them is not even looked at.
        let selected = shared
            .selection
            .as_ref()
            .map(|s| (s, rel_of(&shared.root, &job.path, name)));
        if let Some((selection, rel)) = &selected
            && !selection.holds(rel)
            && !selection.leads_to(rel)
        {
            continue;
        }
        let st = match fstatat(&dir_fd, name_c, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(e) => {
                let e = std::io::Error::from_raw_os_error(e as i32);
                shared.problem(&path(), io_reason("cannot read its details", &e));
                continue;
            }
        };
        let Some(kind) = DiskEntry::kind_of(st.st_mode) else {
            // A socket, fifo or device: not shared.
            chunk.skipped_special += 1;
            continue;
        };
        if let Some((selection, rel)) = &selected
            && !selection.shows(rel, kind == EntryKind::Dir)
        {
            continue;
        }
        let mut folder_path = None;
        let target = match kind {
            EntryKind::Symlink => match readlinkat(&dir_fd, name_c) {
                Ok(target) => target.into_vec(),
                Err(e) => {
                    let e = std::io::Error::from_raw_os_error(e as i32);
                    shared.problem(&path(), io_reason("cannot read where this link points", &e));
                    continue;
                }
            },
            EntryKind::Dir => {
                folder_path = Some(path());
                Vec::new()
            }
            EntryKind::File => Vec::new(),
        };
        chunk.found.push(Found {
            entry: WalkedEntry::found(name.to_vec(), DiskEntry::from_stat(kind, target, &st)),
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

/// The path of `name` in the folder at `folder`, relative to the walked `root`.
fn rel_of(root: &std::path::Path, folder: &std::path::Path, name: &[u8]) -> Vec<u8> {
    let mut rel = folder
        .strip_prefix(root)
        .map(|p| p.as_os_str().as_bytes().to_vec())
        .unwrap_or_default();
    if !rel.is_empty() {
        rel.push(b'/');
    }
    rel.extend_from_slice(name);
    rel
}

fn finish(mut chunk: Chunk, tx: &SyncSender<Chunk>) -> Result<(), Stopped> {
    chunk.last = true;
    tx.send(chunk).map_err(|_| Stopped)
}
