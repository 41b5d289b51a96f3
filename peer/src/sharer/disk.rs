//! Reading shared files for receivers, safely.
//!
//! A read names an entry; the index gives its path relative to the shared root
//! and what the walk saw (device, inode, size, mtime). Files are opened with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` relative to the root folder,
//! so no symlink and no `..` can take a read outside the share, even if the tree
//! changed after the walk; then `fstat` must show the same device, inode, size,
//! mtime and ctime, and it is checked again after every chunk, so a file that
//! was replaced or written to gives a clear "changed" error, never mixed bytes.
//! (ctime is what catches a rewrite that kept the size and restored the mtime;
//! where a file system keeps no real ctime, see `docs/live-share.md`.)
//! (On kernels without `openat2`, before 5.6, the file is opened with
//! `O_NOFOLLOW` and the device/inode check is what catches a swapped path.)

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use std::os::unix::ffi::OsStringExt;

use linkfs_core::{IoFailure, ReadIo, ReadTarget, ctime_ns};

pub use crate::disk_entry::DiskEntry;
use linkfs_proto::{EntryId, EntryKind, ReadErrorCode};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag, open, openat, openat2, readlinkat};
use nix::sys::stat::{Mode, fstatat};

/// Files kept open per receiver session (most recently used first).
pub const OPEN_FILES: usize = 16;

/// The shared folder, held open so reads resolve beneath it.
#[derive(Debug)]
pub struct ShareRoot {
    dir: OwnedFd,
    path: PathBuf,
    /// A link that selects paths: anything else beneath the root is treated
    /// as not there (not looked at, listed or read).
    selection: Option<std::sync::Arc<linkfs_core::Selection>>,
    /// Paths a read found changed on disk that the index still holds as
    /// they were: the watch thread compares them again ([`ShareRoot::take_stale`]).
    stale: std::sync::Mutex<StalePaths>,
}

/// Stale paths waiting for the watch thread: at most this many, beyond
/// which the whole folder is compared.
pub const STALE_MAX: usize = 1024;

#[derive(Debug, Default)]
struct StalePaths {
    paths: Vec<Vec<u8>>,
    overflowed: bool,
}

impl ShareRoot {
    /// Says a read found the file at `rel` changed on disk. A change the
    /// watcher cannot see (another hard link of the same file written, a
    /// file system that sends no events) is then found all the same.
    pub fn found_stale(&self, rel: &[u8]) {
        let mut s = self.stale.lock().unwrap_or_else(|p| p.into_inner());
        if s.paths.iter().any(|p| p == rel) {
            return;
        }
        if s.paths.len() >= STALE_MAX {
            s.overflowed = true;
        } else {
            s.paths.push(rel.to_vec());
        }
    }

    /// The paths [`found_stale`](Self::found_stale) since the last call, and
    /// whether some were dropped (compare everything then).
    pub fn take_stale(&self) -> (Vec<Vec<u8>>, bool) {
        let mut s = self.stale.lock().unwrap_or_else(|p| p.into_inner());
        let taken = std::mem::take(&mut *s);
        (taken.paths, taken.overflowed)
    }

    /// The shared folder's device and inode, from the descriptor held.
    pub fn identity(&self) -> io::Result<(u64, u64)> {
        let st = nix::sys::stat::fstat(&self.dir).map_err(io::Error::from)?;
        Ok((st.st_dev as u64, st.st_ino as u64))
    }

    /// The device and inode of the folder `rel` below the shared folder,
    /// reached from the descriptor held and through no symlink: what a path
    /// opened by name later must turn out to be.
    pub fn identity_beneath(&self, rel: &[u8]) -> io::Result<(u64, u64)> {
        let fd = self.open_dir_beneath(rel).map_err(io::Error::from)?;
        let st = nix::sys::stat::fstat(&fd).map_err(io::Error::from)?;
        Ok((st.st_dev as u64, st.st_ino as u64))
    }

    /// A second descriptor of the shared folder (for what writes into it).
    pub fn dir_clone(&self) -> io::Result<OwnedFd> {
        self.dir.try_clone()
    }

    pub fn open(path: &Path) -> io::Result<ShareRoot> {
        let dir = open(
            path,
            OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(io::Error::from)?;
        Ok(ShareRoot {
            dir,
            path: path.to_owned(),
            selection: None,
            stale: Default::default(),
        })
    }

    /// The folder at `path`, of which only `selection` is shown.
    pub fn open_selected(
        path: &Path,
        selection: std::sync::Arc<linkfs_core::Selection>,
    ) -> io::Result<ShareRoot> {
        let mut root = ShareRoot::open(path)?;
        root.selection = Some(selection);
        Ok(root)
    }

    /// Whether the selection (if any) shows what is at `rel`; uploads being
    /// written aside never are.
    fn shows(&self, rel: &[u8], is_folder: bool) -> bool {
        !super::landing::is_staging(rel)
            && self
                .selection
                .as_ref()
                .is_none_or(|s| s.shows(rel, is_folder))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens a folder beneath the root (`rel` empty: the root itself), never
    /// through a symlink or `..`.
    fn open_dir_beneath(&self, rel: &[u8]) -> Result<OwnedFd, Errno> {
        let rel = if rel.is_empty() { &b"."[..] } else { rel };
        let rel_os = OsStr::from_bytes(rel);
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW;
        let how = OpenHow::new()
            .flags(flags)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
        match openat2(&self.dir, rel_os, how) {
            Err(Errno::ENOSYS | Errno::ENAMETOOLONG) => {
                // Before Linux 5.6, or a path longer than the kernel takes in
                // one call (PATH_MAX): one component at a time, none followed.
                let mut fd = openat(&self.dir, ".", flags, Mode::empty())?;
                for part in rel
                    .split(|b| *b == b'/')
                    .filter(|p| !p.is_empty() && *p != b".")
                {
                    if part == b".." {
                        return Err(Errno::EXDEV);
                    }
                    fd = openat(&fd, OsStr::from_bytes(part), flags, Mode::empty())?;
                }
                Ok(fd)
            }
            other => other,
        }
    }

    /// What is at `rel` beneath the root now (`None`: nothing shareable is
    /// there: missing, a socket or device, or its path goes through a symlink).
    pub fn lstat(&self, rel: &[u8]) -> io::Result<Option<DiskEntry>> {
        let (parent, name) = match rel.iter().rposition(|b| *b == b'/') {
            Some(at) => (&rel[..at], &rel[at + 1..]),
            None => (&b""[..], rel),
        };
        if name.is_empty() || name == b"." || name == b".." {
            return Ok(None);
        }
        if !self.shows(rel, true) {
            return Ok(None);
        }
        let dir = match self.open_dir_beneath(parent) {
            Ok(fd) => fd,
            Err(e) if gone(e) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        Ok(stat_at(&dir, name)?.filter(|d| self.shows(rel, d.kind == EntryKind::Dir)))
    }

    /// The shared folder's own attributes now.
    pub fn stat_root(&self) -> io::Result<Option<DiskEntry>> {
        stat_at(&self.dir, b".")
    }

    /// The shareable entries of the folder at `rel` (empty: the root), by name.
    /// `None` if it is not a folder beneath the root any more.
    pub fn list(&self, rel: &[u8]) -> io::Result<Option<Listing>> {
        let mut all = Vec::new();
        let whole = self.list_in_chunks(rel, usize::MAX, |chunk| {
            if all.is_empty() {
                all = chunk;
            } else {
                all.extend(chunk);
            }
        })?;
        Ok(whole.then_some(all))
    }

    /// [`ShareRoot::list`] handed out `chunk` entries at a time, so a big
    /// folder's listing is never held whole: whether the folder was there to
    /// list (false: gone, or not shown). An error can come after some chunks.
    pub fn list_in_chunks(
        &self,
        rel: &[u8],
        chunk: usize,
        mut each: impl FnMut(Listing),
    ) -> io::Result<bool> {
        if !self.shows(rel, true) {
            return Ok(false);
        }
        let fd = match self.open_dir_beneath(rel) {
            Ok(fd) => fd,
            Err(e) if gone(e) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        let stat_fd = fd.try_clone()?;
        let mut dir = nix::dir::Dir::from_fd(fd)?;
        let chunk = chunk.max(1);
        let mut out = Vec::new();
        for item in dir.iter() {
            let item = item?;
            let name = item.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let child = || {
                let mut c = rel.to_vec();
                if !c.is_empty() {
                    c.push(b'/');
                }
                c.extend_from_slice(name);
                c
            };
            if !self.shows(&child(), true) {
                continue;
            }
            if let Some(e) = stat_at(&stat_fd, name)?
                && self.shows(&child(), e.kind == EntryKind::Dir)
            {
                out.push((name.to_vec(), e));
                if out.len() >= chunk {
                    each(std::mem::take(&mut out));
                }
            }
        }
        if !out.is_empty() {
            each(out);
        }
        Ok(true)
    }

    /// Opens a file to read beneath the root. Non-blocking: a FIFO (or a
    /// device) swapped in for a file after it was listed would otherwise block
    /// the opening thread until someone writes to it; the caller then refuses
    /// anything that is not a regular file.
    fn open_beneath(&self, rel: &[u8]) -> Result<File, Errno> {
        if super::landing::is_staging(rel) || self.selection.as_ref().is_some_and(|s| !s.holds(rel))
        {
            return Err(Errno::ENOENT);
        }
        let rel = OsStr::from_bytes(rel);
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK;
        let how = OpenHow::new()
            .flags(flags)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
        match openat2(&self.dir, rel, how) {
            Ok(fd) => Ok(File::from(fd)),
            Err(Errno::ENOSYS) => openat(&self.dir, rel, flags, Mode::empty()).map(File::from),
            // Longer than PATH_MAX: its folder a component at a time, then the file.
            Err(Errno::ENAMETOOLONG) => {
                let bytes = rel.as_bytes();
                let at = bytes
                    .iter()
                    .rposition(|b| *b == b'/')
                    .ok_or(Errno::ENAMETOOLONG)?;
                let dir = self.open_dir_beneath(&bytes[..at])?;
                let name = OsStr::from_bytes(&bytes[at + 1..]);
                openat2(&dir, name, how).map(File::from)
            }
            Err(e) => Err(e),
        }
    }
}

/// A folder's shareable entries: (name, what is there).
pub type Listing = Vec<(Vec<u8>, DiskEntry)>;

/// Errors that mean "not there (any more), or not beneath the root".
fn gone(e: Errno) -> bool {
    matches!(
        e,
        Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP | Errno::EXDEV
    )
}

fn stat_at(dir: &OwnedFd, name: &[u8]) -> io::Result<Option<DiskEntry>> {
    let name = OsStr::from_bytes(name);
    let st = match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(e) if gone(e) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    // Sockets, fifos and devices are not shared.
    let Some(kind) = DiskEntry::kind_of(st.st_mode) else {
        return Ok(None);
    };
    let target = if kind == EntryKind::Symlink {
        match readlinkat(dir, name) {
            Ok(t) => t.into_vec(),
            Err(e) if gone(e) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    } else {
        Vec::new()
    };
    Ok(Some(DiskEntry::from_stat(kind, target, &st)))
}

fn changed(message: impl Into<String>) -> IoFailure {
    IoFailure {
        code: ReadErrorCode::Changed,
        message: message.into(),
    }
}

fn io_failure(what: &str, e: impl std::fmt::Display) -> IoFailure {
    IoFailure {
        code: ReadErrorCode::Io,
        message: format!("the sharer could not {what}: {e}"),
    }
}

fn check_same(meta: &std::fs::Metadata, t: &ReadTarget) -> Result<(), IoFailure> {
    if meta.dev() != t.dev || meta.ino() != t.ino {
        return Err(changed(
            "the file was replaced on the sharer's disk since it was listed; the new version is on its way: read it again",
        ));
    }
    let nsec = u32::try_from(meta.mtime_nsec()).unwrap_or(0);
    if t.stamp_differs(nsec, ctime_ns(meta.ctime(), meta.ctime_nsec()))
        || meta.len() != t.size
        || meta.mtime() != t.mtime
    {
        return Err(changed(
            "the file changed on the sharer's disk while it was read; the new version is on its way: read it again",
        ));
    }
    Ok(())
}

/// The files one session has open.
#[derive(Debug, Default)]
pub struct OpenFiles {
    files: VecDeque<(EntryId, File)>,
}

impl OpenFiles {
    fn get(&mut self, root: &ShareRoot, io: &ReadIo) -> Result<&File, IoFailure> {
        if let Some(pos) = self.files.iter().position(|(id, _)| *id == io.entry) {
            let f = self.files.remove(pos).map(|(_, f)| f);
            if let Some(f) = f {
                self.files.push_front((io.entry, f));
            }
        } else {
            let file = root.open_beneath(&io.target.path).map_err(|e| match e {
                Errno::ENOENT => changed("the file is gone from the sharer's disk"),
                Errno::ELOOP | Errno::EXDEV => {
                    changed("the file's path now goes through a symlink; it is no longer served")
                }
                e => io_failure("open the file", e.desc()),
            })?;
            let meta = file
                .metadata()
                .map_err(|e| io_failure("check the file", e))?;
            if !meta.file_type().is_file() {
                return Err(changed(
                    "the file was replaced on the sharer's disk by something that is not a file; it is no longer served",
                ));
            }
            check_same(&meta, &io.target)?;
            self.files.push_front((io.entry, file));
            self.files.truncate(OPEN_FILES);
        }
        // Just pushed or moved to the front.
        self.files
            .front()
            .map(|(_, f)| f)
            .ok_or_else(|| io_failure("open the file", "no file"))
    }

    /// Reads exactly `io.len` bytes at `io.offset`, checking the file did not change.
    pub fn read(&mut self, root: &ShareRoot, io: &ReadIo) -> Result<Vec<u8>, IoFailure> {
        let result = self.read_inner(root, io);
        if let Err(f) = &result
            && f.code == ReadErrorCode::Changed
        {
            root.found_stale(&io.target.path);
        }
        if result.is_err() || io.last {
            self.files.retain(|(id, _)| *id != io.entry);
        }
        result
    }

    fn read_inner(&mut self, root: &ShareRoot, io: &ReadIo) -> Result<Vec<u8>, IoFailure> {
        let file = self.get(root, io)?;
        let mut buf = vec![0u8; io.len as usize];
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], io.offset + done as u64) {
                Ok(0) => return Err(changed("the file got shorter while it was read")),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_failure("read the file", e)),
            }
        }
        let meta = file
            .metadata()
            .map_err(|e| io_failure("check the file", e))?;
        check_same(&meta, &io.target)?;
        Ok(buf)
    }
}
