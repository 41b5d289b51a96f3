//! Reading shared files for receivers, safely.
//!
//! A read names an entry; the index gives its path relative to the shared root
//! and what the walk saw (device, inode, size, mtime). Files are opened with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` relative to the root folder,
//! so no symlink and no `..` can take a read outside the share, even if the tree
//! changed after the walk; then `fstat` must show the same device, inode, size
//! and mtime, and it is checked again after every chunk, so a file that was
//! replaced or written to gives a clear "changed" error, never mixed bytes.
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

use linkfs_core::{IoFailure, ReadIo, ReadTarget};
use linkfs_proto::{EntryId, ReadErrorCode};
use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, open, openat, openat2};
use nix::sys::stat::Mode;

/// Files kept open per receiver session (most recently used first).
pub const OPEN_FILES: usize = 16;

/// The shared folder, held open so reads resolve beneath it.
#[derive(Debug)]
pub struct ShareRoot {
    dir: OwnedFd,
    path: PathBuf,
}

impl ShareRoot {
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
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn open_beneath(&self, rel: &[u8]) -> Result<File, Errno> {
        let rel = OsStr::from_bytes(rel);
        let how = OpenHow::new()
            .flags(OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
        match openat2(&self.dir, rel, how) {
            Ok(fd) => Ok(File::from(fd)),
            Err(Errno::ENOSYS) => openat(
                &self.dir,
                rel,
                OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
                Mode::empty(),
            )
            .map(File::from),
            Err(e) => Err(e),
        }
    }
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
            "the file was replaced since it was listed; reload to see the current version",
        ));
    }
    if meta.len() != t.size || meta.mtime() != t.mtime || meta.mtime_nsec() as u32 != t.mtime_nsec {
        return Err(changed(
            "the file changed since it was listed; reload to see the current version",
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
