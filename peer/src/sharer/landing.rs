//! Where uploaded files land on the sharer's disk.
//!
//! An upload is written aside, in `.linkfs-incoming/` at the top of the
//! shared folder (0700, never shared: the walk, the watch and every read
//! skip it), as a part file named after what is being uploaded (link,
//! folder, path, size and whole-file hash), so an upload that stopped, or a
//! sharer that restarted, resumes at the part's length. Once every byte is
//! there and the whole file's BLAKE3 hash is what the uploader said, the part
//! is synced and renamed into place:
//! - every folder on the way is opened beneath the shared folder with no
//!   symlink followed and no `..` (`openat2`, `RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS`), at the moment of landing: a folder swapped for a
//!   symlink mid-upload is refused, never followed;
//! - missing folders are made then (a folder upload keeps its structure,
//!   and merges into a folder of the same name);
//! - the file never replaces anything: `renameat2(RENAME_NOREPLACE)` under
//!   the name, else `name (2)`, `name (3)`, ... A name a visitor could take
//!   for an existing one (case or Unicode normalisation aside) counts as taken.
//!
//! - the way there is checked before the first byte is taken ([`Dock::begin`]):
//!   a folder on the way that is a file or a symlink refuses the upload then,
//!   not after its bytes came;
//! - a drop link's uploads ([`Incoming::drop`]) land in the link's own folder
//!   and are never refused for what is there: a name taken, or a folder on the
//!   way that is a file, gets the next numbered name, and the visitor is told
//!   only the name it asked for, so a drop link answers the same whatever the
//!   folder holds.
//!
//! Nothing half-written is ever in place, and nothing refused is kept: a
//! refused, corrupt or cancelled upload's part goes at once. A part stays only
//! when its visitor's connection ended mid-upload (so it can resume), and
//! [`Dock::trim`] bounds those: [`IDLE_PART_AGE`] at most, and the oldest go
//! first beyond [`IDLE_PART_BYTES`] and [`IDLE_PARTS`] (the newest one is
//! always kept, so one big upload cut off can resume).

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use linkfs_core::LinkId;
use linkfs_core::upload_name::{SafePath, numbered, same_name};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, RenameFlags, ResolveFlag, openat, openat2, renameat2};
use nix::sys::stat::{Mode, fchmod, fstat, fstatat, mkdirat};

/// The staging folder's name, at the top of the shared folder.
pub const STAGING: &str = ".linkfs-incoming";

/// Free space an upload must leave on the sharer's disk: this, or 1% of a
/// smaller file system.
pub const RESERVE_BYTES: u64 = 64 << 20;

/// Most numbered names tried for one file (`a (2)` ... `a (1000)`).
const MAX_NUMBER: u32 = 1000;

/// A part nobody has written to for this long goes.
pub const IDLE_PART_AGE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
/// Parts not being written hold at most this many bytes (beyond the newest)...
pub const IDLE_PART_BYTES: u64 = 4 << 30;
/// ...and number at most this many.
pub const IDLE_PARTS: usize = 256;

/// Whether `rel` (relative to a shared folder) is the staging folder or in it.
pub fn is_staging(rel: &[u8]) -> bool {
    let s = STAGING.as_bytes();
    rel.starts_with(s) && (rel.len() == s.len() || rel[s.len()] == b'/')
}

/// Why an upload cannot go on, in words for the uploader.
#[derive(Debug, thiserror::Error)]
pub enum LandingError {
    #[error("the sharer's disk is full (or would be with this file): nothing was saved")]
    DiskFull,
    #[error("the file is {size} bytes but {sent} were sent")]
    WrongLength { size: u64, sent: u64 },
    #[error("bytes were sent out of order (at {at}, expected {expected})")]
    OutOfOrder { at: u64, expected: u64 },
    #[error("the file's bytes do not match its hash: nothing was saved; send it again")]
    HashMismatch,
    #[error(
        "'{0}' is a symlink or not a folder on the sharer's side; the upload cannot go through it"
    )]
    NotAFolder(String),
    #[error("this file is being uploaded by another connection now; try again when it ends")]
    Busy,
    #[error("every name from '{0}' to '{0} ({MAX_NUMBER})' is taken")]
    NoFreeName(String),
    #[error("the sharer cannot write there: {0}")]
    Io(#[from] io::Error),
    /// A drop link's upload could not land (the way there changed under it):
    /// said in the same words whatever the reason, so it tells nothing of the folder.
    #[error("the sharer could not take this file: nothing was saved; send it again")]
    NotTaken,
}

impl From<Errno> for LandingError {
    fn from(e: Errno) -> Self {
        if e == Errno::ENOSPC || e == Errno::EDQUOT {
            LandingError::DiskFull
        } else {
            LandingError::Io(e.into())
        }
    }
}

/// What is being uploaded: where (the folder a link shows, relative to the
/// shared folder; empty: the whole share), the path below it, its size and
/// its whole-file BLAKE3 hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    pub link: LinkId,
    pub folder: String,
    pub path: SafePath,
    pub size: u64,
    pub hash: [u8; 32],
    /// Through a drop link: see the module docs.
    pub drop: bool,
}

impl Incoming {
    /// The folders on the way to the file (the link's folder's, then the
    /// path's), and how many of them are the link's folder.
    fn way(&self) -> (Vec<String>, usize) {
        let link: Vec<String> = self
            .folder
            .split('/')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        let skip = link.len();
        let path = &self.path.parts[..self.path.parts.len().saturating_sub(1)];
        (link.into_iter().chain(path.iter().cloned()).collect(), skip)
    }

    /// The part file's name: the same upload always finds the same part.
    fn part_name(&self) -> String {
        let mut h = blake3::Hasher::new();
        h.update(b"linkfs upload part v1\0");
        h.update(&self.link.0.to_le_bytes());
        for p in [self.folder.as_str(), &self.path.joined()] {
            h.update(&(p.len() as u64).to_le_bytes());
            h.update(p.as_bytes());
        }
        h.update(&self.size.to_le_bytes());
        h.update(&self.hash);
        format!("{}.part", &h.finalize().to_hex()[..32])
    }
}

/// The shared folder's landing place (see the module docs).
#[derive(Debug, Clone)]
pub struct Dock {
    root: Arc<OwnedFd>,
    staging: Arc<OwnedFd>,
    /// Part files open now (one writer each).
    busy: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

impl Dock {
    /// The dock of the shared folder `root`; makes its staging folder.
    pub fn open(root: &Path) -> io::Result<Dock> {
        let root = nix::fcntl::open(
            root,
            OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Dock::open_in(root)
    }

    /// The dock of the shared folder held open as `root`.
    pub fn open_in(root: OwnedFd) -> io::Result<Dock> {
        match mkdirat(&root, STAGING, Mode::from_bits_truncate(0o700)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let staging = openat(
            &root,
            STAGING,
            OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
            Mode::empty(),
        )
        .map_err(|e| {
            io::Error::other(format!(
                "{STAGING} in the shared folder is not a folder of its own ({e}); move it away"
            ))
        })?;
        let st = fstat(&staging)?;
        if st.st_uid != nix::unistd::geteuid().as_raw() {
            return Err(io::Error::other(format!(
                "{STAGING} in the shared folder belongs to someone else; move it away"
            )));
        }
        Ok(Dock {
            root: Arc::new(root),
            staging: Arc::new(staging),
            busy: Arc::default(),
        })
    }

    /// Starts (or resumes) `incoming`: its part file, and how much of it is
    /// already there.
    pub fn begin(&self, incoming: Incoming) -> Result<Upload, LandingError> {
        self.check_way(&incoming)?;
        let _ = self.trim(std::time::SystemTime::now());
        let part_name = incoming.part_name();
        if !self
            .busy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(part_name.clone())
        {
            return Err(LandingError::Busy);
        }
        // From here the name is released when the upload (or this attempt) ends.
        let held = Held {
            busy: self.busy.clone(),
            name: part_name.clone(),
        };
        let fd = openat(
            &*self.staging,
            part_name.as_str(),
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
            Mode::from_bits_truncate(0o600),
        )?;
        let file = File::from(fd);
        let mut have = file.metadata()?.len();
        if have > incoming.size {
            file.set_len(0)?;
            have = 0;
        }
        let need = incoming.size - have;
        let vfs = nix::sys::statvfs::fstatvfs(&*self.staging)?;
        let free = vfs.blocks_available().saturating_mul(vfs.fragment_size());
        let whole = vfs.blocks().saturating_mul(vfs.fragment_size());
        let reserve = RESERVE_BYTES.min(whole / 100);
        if need.saturating_add(reserve) > free {
            drop(file);
            let _ = nix::unistd::unlinkat(
                &*self.staging,
                part_name.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
            return Err(LandingError::DiskFull);
        }
        // What is already there counts towards the hash.
        let mut hasher = blake3::Hasher::new();
        let mut left = have;
        let mut buf = vec![0u8; 1 << 20];
        let mut reader = &file;
        while left > 0 {
            let n = reader.read(&mut buf[..(left.min(1 << 20)) as usize])?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            left -= n as u64;
        }
        Ok(Upload {
            dock: self.clone(),
            incoming,
            part_name,
            file,
            written: have - left,
            hasher,
            _held: held,
        })
    }

    /// Bounds the parts left by uploads cut off (see the module docs): those
    /// idle for [`IDLE_PART_AGE`] go, then the oldest beyond the newest while
    /// they hold more than [`IDLE_PART_BYTES`] or number more than
    /// [`IDLE_PARTS`]. Parts being written are left alone. How many went.
    pub fn trim(&self, now: std::time::SystemTime) -> io::Result<u64> {
        let fd = openat(
            &*self.staging,
            ".",
            OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let mut dir = nix::dir::Dir::from_fd(fd)?;
        let busy = self.busy.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut idle: Vec<(std::time::SystemTime, u64, Vec<u8>)> = dir
            .iter()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_bytes().to_vec())
            .filter(|n| n.ends_with(b".part") && !busy.contains(&*String::from_utf8_lossy(n)))
            .filter_map(|name| {
                let st = fstatat(
                    &*self.staging,
                    OsStr::from_bytes(&name),
                    AtFlags::AT_SYMLINK_NOFOLLOW,
                )
                .ok()?;
                let modified = std::time::UNIX_EPOCH
                    + std::time::Duration::from_secs(st.st_mtime.max(0) as u64);
                Some((modified, st.st_size.max(0) as u64, name))
            })
            .collect();
        // Newest first: the first is always kept (unless it is too old).
        idle.sort_by_key(|p| std::cmp::Reverse(p.0));
        let mut removed = 0;
        let mut kept_bytes = 0u64;
        let mut kept = 0usize;
        for (i, (modified, size, name)) in idle.into_iter().enumerate() {
            let too_old = now.duration_since(modified).unwrap_or_default() >= IDLE_PART_AGE;
            let over =
                i > 0 && (kept_bytes.saturating_add(size) > IDLE_PART_BYTES || kept >= IDLE_PARTS);
            if (too_old || over)
                && nix::unistd::unlinkat(
                    &*self.staging,
                    OsStr::from_bytes(&name),
                    nix::unistd::UnlinkatFlags::NoRemoveDir,
                )
                .is_ok()
            {
                removed += 1;
            } else {
                kept_bytes = kept_bytes.saturating_add(size);
                kept += 1;
            }
        }
        Ok(removed)
    }

    /// The folders on the way to `incoming`, as they are now: for a link
    /// that is not a drop link, one that is a file or a symlink refuses the
    /// upload before its first byte. Missing folders are fine (made at the landing).
    fn check_way(&self, incoming: &Incoming) -> Result<(), LandingError> {
        if incoming.drop {
            return Ok(());
        }
        let (parts, skip) = incoming.way();
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW;
        let mut at = beneath(&self.root, ".", flags)?;
        for (i, part) in parts.iter().enumerate() {
            match beneath(&at, part, flags) {
                Ok(fd) => at = fd,
                Err(Errno::ENOENT) => return Ok(()),
                Err(Errno::ELOOP | Errno::ENOTDIR | Errno::EXDEV) => {
                    return Err(LandingError::NotAFolder(shown_from(&parts, skip, i)));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Opens the folder `parts` beneath the root, making what is missing;
    /// nothing followed through a symlink. The first `skip` parts are the
    /// link's own folder (left out of what a visitor is told). With
    /// `numbered` (a drop link) a part that is a file or a symlink is passed
    /// by for the next numbered name (`a (2)`) that is a folder or free; the
    /// parts taken are returned.
    fn folder(
        &self,
        parts: &[String],
        skip: usize,
        numbered_way: bool,
    ) -> Result<(OwnedFd, Vec<String>), LandingError> {
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW;
        let mut at = beneath(&self.root, ".", flags)?;
        let mut taken = Vec::with_capacity(parts.len());
        for (i, part) in parts.iter().enumerate() {
            let mut n = 1;
            loop {
                let name = if n == 1 {
                    part.clone()
                } else {
                    numbered(part, n)
                };
                match beneath(&at, &name, flags) {
                    Ok(fd) => {
                        at = fd;
                        taken.push(name);
                        break;
                    }
                    Err(Errno::ENOENT) => {
                        match mkdirat(&at, name.as_str(), Mode::from_bits_truncate(0o755)) {
                            Ok(()) | Err(Errno::EEXIST) => {}
                            Err(e) => return Err(e.into()),
                        }
                        match beneath(&at, &name, flags) {
                            Ok(fd) => {
                                at = fd;
                                taken.push(name);
                                break;
                            }
                            Err(_) if numbered_way && n < MAX_NUMBER => n += 1,
                            Err(_) => {
                                return Err(LandingError::NotAFolder(shown_from(parts, skip, i)));
                            }
                        }
                    }
                    Err(Errno::ELOOP | Errno::ENOTDIR | Errno::EXDEV)
                        if numbered_way && n < MAX_NUMBER =>
                    {
                        n += 1
                    }
                    Err(Errno::ELOOP | Errno::ENOTDIR | Errno::EXDEV) => {
                        return Err(LandingError::NotAFolder(shown_from(parts, skip, i)));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok((at, taken))
    }
}

/// What a visitor is told of the way to its file: the parts after the link's
/// own folder (the first `skip`), up to part `i`.
fn shown_from(parts: &[String], skip: usize, i: usize) -> String {
    parts[skip.min(i)..=i].join("/")
}

/// Opens `name` beneath `dir`, following no symlink and never climbing.
fn beneath(dir: &impl AsFd, name: &str, flags: OFlag) -> Result<OwnedFd, Errno> {
    let how = OpenHow::new()
        .flags(flags)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    match openat2(dir, name, how) {
        Err(Errno::ENOSYS) => openat(dir, name, flags, Mode::empty()),
        other => other,
    }
}

/// One upload being written (see [`Dock::begin`]).
#[derive(Debug)]
pub struct Upload {
    dock: Dock,
    incoming: Incoming,
    part_name: String,
    file: File,
    written: u64,
    hasher: blake3::Hasher,
    _held: Held,
}

/// A part file's name held open by one upload; released when it ends.
#[derive(Debug)]
struct Held {
    busy: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    name: String,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.busy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.name);
    }
}

/// Where a finished upload landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Landed {
    /// What the visitor is told: where it landed, relative to the folder the
    /// link shows (a drop link: the path it asked for).
    pub path: String,
    /// The name it was asked to have, if a taken one made it another (never
    /// for a drop link).
    pub renamed_from: Option<String>,
    /// Where it is, relative to the shared folder (for the sharer's log).
    pub on_disk: String,
}

impl Upload {
    /// Bytes already written (where the uploader goes on).
    pub fn offset(&self) -> u64 {
        self.written
    }

    pub fn incoming(&self) -> &Incoming {
        &self.incoming
    }

    /// Writes the next bytes, which must start where the last ones ended.
    pub fn write(&mut self, at: u64, bytes: &[u8]) -> Result<(), LandingError> {
        if at != self.written {
            return Err(LandingError::OutOfOrder {
                at,
                expected: self.written,
            });
        }
        let end = self.written + bytes.len() as u64;
        if end > self.incoming.size {
            return Err(LandingError::WrongLength {
                size: self.incoming.size,
                sent: end,
            });
        }
        self.file
            .write_all_at(bytes, at)
            .map_err(|e| match e.raw_os_error() {
                Some(code) => LandingError::from(Errno::from_raw(code)),
                None => LandingError::Io(e),
            })?;
        self.hasher.update(bytes);
        self.written = end;
        Ok(())
    }

    /// Gives up: the part file goes (a later upload of it starts over).
    pub fn abandon(self) {
        let _ = nix::unistd::unlinkat(
            &*self.dock.staging,
            self.part_name.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }

    /// Checks the whole file, syncs it and renames it into place. Whatever
    /// goes wrong, its part goes too: nothing refused is kept.
    pub fn finish(self) -> Result<Landed, LandingError> {
        let staging = self.dock.staging.clone();
        let part = self.part_name.clone();
        let drop_link = self.incoming.drop;
        let landed = self.land();
        if landed.is_err() {
            let _ = nix::unistd::unlinkat(
                &*staging,
                part.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
        landed.map_err(|e| match e {
            // A drop link tells nothing of what is there.
            LandingError::NotAFolder(_) | LandingError::NoFreeName(_) if drop_link => {
                LandingError::NotTaken
            }
            e => e,
        })
    }

    fn land(self) -> Result<Landed, LandingError> {
        if self.written != self.incoming.size {
            return Err(LandingError::WrongLength {
                size: self.incoming.size,
                sent: self.written,
            });
        }
        if *self.hasher.finalize().as_bytes() != self.incoming.hash {
            return Err(LandingError::HashMismatch);
        }
        fchmod(&self.file, Mode::from_bits_truncate(0o644))?;
        self.file.sync_all()?;
        let (way, skip) = self.incoming.way();
        let (dir, taken_way) = self.dock.folder(&way, skip, self.incoming.drop)?;
        let wanted = self.incoming.path.parts.last().cloned().unwrap_or_default();
        let taken = look_alikes(&dir, &wanted)?;
        let mut n = 1;
        let name = loop {
            let candidate = if n == 1 {
                wanted.clone()
            } else {
                numbered(&wanted, n)
            };
            if !taken.contains(&same_name(&candidate)) {
                match renameat2(
                    &*self.dock.staging,
                    self.part_name.as_str(),
                    &dir,
                    candidate.as_str(),
                    RenameFlags::RENAME_NOREPLACE,
                ) {
                    Ok(()) => break candidate,
                    Err(Errno::EEXIST) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            n += 1;
            if n > MAX_NUMBER {
                return Err(LandingError::NoFreeName(wanted));
            }
        };
        let _ = nix::unistd::fsync(&dir);
        let asked = self.incoming.path.joined();
        if self.incoming.drop {
            // Told only what it asked for: where it went says what was there.
            return Ok(Landed {
                path: asked,
                renamed_from: None,
                on_disk: taken_way
                    .into_iter()
                    .chain(std::iter::once(name))
                    .collect::<Vec<_>>()
                    .join("/"),
            });
        }
        let mut parts = self.incoming.path.parts.clone();
        let renamed_from = (name != wanted).then(|| asked.clone());
        if let Some(last) = parts.last_mut() {
            *last = name;
        }
        Ok(Landed {
            path: parts.join("/"),
            renamed_from,
            on_disk: taken_way
                .into_iter()
                .chain(parts.last().cloned())
                .collect::<Vec<_>>()
                .join("/"),
        })
    }
}

/// The look-alike keys of the names in `dir` that `wanted` could be taken
/// for (compared by [`same_name`]; only those, to stay small).
fn look_alikes(
    dir: &OwnedFd,
    wanted: &str,
) -> Result<std::collections::HashSet<String>, LandingError> {
    let fd = openat(
        dir,
        ".",
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let mut listing = nix::dir::Dir::from_fd(fd)?;
    // Every numbered form of `wanted` shares its stem: keep names starting
    // with the folded stem's first characters, and fold those.
    let key = same_name(wanted);
    let stem_end = key
        .char_indices()
        .skip(1)
        .find(|(_, c)| *c == '.')
        .map_or(key.len(), |(at, _)| at);
    let stem: String = key[..stem_end].chars().take(8).collect();
    let mut taken = std::collections::HashSet::new();
    for e in listing.iter() {
        let e = e?;
        let Ok(name) = std::str::from_utf8(e.file_name().to_bytes()) else {
            continue;
        };
        let folded = same_name(name);
        if folded.starts_with(&stem) {
            taken.insert(folded);
        }
    }
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkfs_core::upload_name::safe_path;

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("linkfs-landing-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn incoming(path: &str, bytes: &[u8]) -> Incoming {
        Incoming {
            link: LinkId(1),
            folder: String::new(),
            path: safe_path(path.as_bytes()).unwrap(),
            size: bytes.len() as u64,
            hash: *blake3::hash(bytes).as_bytes(),
            drop: false,
        }
    }

    fn upload(dock: &Dock, path: &str, bytes: &[u8]) -> Result<Landed, LandingError> {
        let mut u = dock.begin(incoming(path, bytes))?;
        u.write(0, bytes)?;
        u.finish()
    }

    #[test]
    fn a_file_lands_whole_in_its_folders_and_never_over_another() {
        let d = tmp("whole");
        std::fs::write(d.join("a.txt"), b"mine").unwrap();
        let dock = Dock::open(&d).unwrap();
        let landed = upload(&dock, "a.txt", b"theirs").unwrap();
        assert_eq!(landed.path, "a (2).txt");
        assert_eq!(landed.renamed_from.as_deref(), Some("a.txt"));
        assert_eq!(std::fs::read(d.join("a.txt")).unwrap(), b"mine");
        assert_eq!(std::fs::read(d.join("a (2).txt")).unwrap(), b"theirs");
        // A look-alike counts as taken too.
        assert_eq!(upload(&dock, "A.TXT", b"x").unwrap().path, "A (3).TXT");
        // Folders are made, and merge.
        assert_eq!(
            upload(&dock, "trip/day 1/p.jpg", b"jpg").unwrap().path,
            "trip/day 1/p.jpg"
        );
        assert_eq!(
            upload(&dock, "trip/day 2/q.jpg", b"jpg").unwrap().path,
            "trip/day 2/q.jpg"
        );
        assert_eq!(std::fs::read(d.join("trip/day 2/q.jpg")).unwrap(), b"jpg");
        // Nothing left aside.
        assert_eq!(std::fs::read_dir(d.join(STAGING)).unwrap().count(), 0);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_stopped_upload_resumes_at_its_byte_and_a_wrong_hash_saves_nothing() {
        let d = tmp("resume");
        let dock = Dock::open(&d).unwrap();
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i * 7) as u8).collect();
        let mut u = dock.begin(incoming("big.bin", &bytes)).unwrap();
        u.write(0, &bytes[..100_000]).unwrap();
        assert!(matches!(
            u.write(200_000, &bytes[200_000..]),
            Err(LandingError::OutOfOrder { .. })
        ));
        drop(u);
        let mut u = dock.begin(incoming("big.bin", &bytes)).unwrap();
        assert_eq!(u.offset(), 100_000);
        u.write(100_000, &bytes[100_000..]).unwrap();
        u.finish().unwrap();
        assert_eq!(std::fs::read(d.join("big.bin")).unwrap(), bytes);

        let mut bad = incoming("bad.bin", b"what was promised");
        bad.size = 5;
        let mut u = dock.begin(bad).unwrap();
        u.write(0, b"other").unwrap();
        assert!(matches!(u.finish(), Err(LandingError::HashMismatch)));
        assert!(!d.join("bad.bin").exists());
        assert_eq!(std::fs::read_dir(d.join(STAGING)).unwrap().count(), 0);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_upload_never_goes_through_a_symlink_even_one_swapped_in_mid_upload() {
        let d = tmp("symlink");
        let outside = tmp("symlink-outside");
        std::fs::create_dir_all(d.join("inbox")).unwrap();
        std::os::unix::fs::symlink(&outside, d.join("escape")).unwrap();
        let dock = Dock::open(&d).unwrap();
        assert!(matches!(
            upload(&dock, "escape/x.txt", b"x"),
            Err(LandingError::NotAFolder(_))
        ));
        // Swapped after the upload began.
        let mut u = dock.begin(incoming("inbox/y.txt", b"y")).unwrap();
        u.write(0, b"y").unwrap();
        std::fs::remove_dir(d.join("inbox")).unwrap();
        std::os::unix::fs::symlink(&outside, d.join("inbox")).unwrap();
        assert!(matches!(u.finish(), Err(LandingError::NotAFolder(_))));
        assert_eq!(
            std::fs::read_dir(&outside).unwrap().count(),
            0,
            "something landed outside"
        );
        // A file where a folder is needed.
        std::fs::write(d.join("plain"), b"").unwrap();
        assert!(matches!(
            upload(&dock, "plain/z.txt", b"z"),
            Err(LandingError::NotAFolder(_))
        ));
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_dir_all(&outside);
    }

    #[test]
    fn uploads_being_written_are_not_walked_listed_or_read() {
        let d = tmp("hidden");
        std::fs::write(d.join("shared.txt"), b"s").unwrap();
        let dock = Dock::open(&d).unwrap();
        let mut u = dock.begin(incoming("half.bin", b"half of it")).unwrap();
        u.write(0, b"half").unwrap();
        let root = super::super::disk::ShareRoot::open(&d).unwrap();
        let names: Vec<Vec<u8>> = root
            .list(b"")
            .unwrap()
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, vec![b"shared.txt".to_vec()]);
        assert!(root.lstat(STAGING.as_bytes()).unwrap().is_none());
        let walk = crate::walk::Walker::new(&d, crate::walk::WalkOptions::default()).unwrap();
        let mut walked = Vec::new();
        while let Some(batch) = walk.recv() {
            walked.extend(batch.entries.into_iter().map(|e| e.name));
        }
        assert!(
            !walked.iter().any(|n| n == STAGING.as_bytes()),
            "the walk found the staging folder"
        );
        assert!(walked.iter().any(|n| n == b"shared.txt"));
        u.abandon();
        let _ = std::fs::remove_dir_all(&d);
    }

    fn parts_in(d: &Path) -> usize {
        std::fs::read_dir(d.join(STAGING)).unwrap().count()
    }

    #[test]
    fn a_file_where_a_folder_is_named_refuses_the_upload_before_its_first_byte() {
        // Regression: the target was checked only after every byte came, and
        // the refused file's bytes stayed in the staging folder for a week.
        let d = tmp("before");
        std::fs::create_dir_all(d.join("inbox")).unwrap();
        std::fs::write(d.join("inbox/plain"), b"the sharer's").unwrap();
        let dock = Dock::open(&d).unwrap();
        let mut scoped = incoming("plain/x.bin", b"visitor's bytes");
        scoped.folder = "inbox".into();
        match dock.begin(scoped) {
            Err(LandingError::NotAFolder(shown)) => {
                assert_eq!(
                    shown, "plain",
                    "named from the link's folder, not the share's root"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(parts_in(&d), 0, "a part was made for a refused upload");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_upload_refused_at_its_landing_leaves_no_part() {
        // Regression: a folder swapped for a symlink after the bytes came left
        // the whole file in the staging folder.
        let d = tmp("refused-part");
        let outside = tmp("refused-part-outside");
        std::fs::create_dir_all(d.join("inbox")).unwrap();
        let dock = Dock::open(&d).unwrap();
        let mut u = dock
            .begin(incoming("inbox/y.bin", &[7u8; 100_000]))
            .unwrap();
        u.write(0, &[7u8; 100_000]).unwrap();
        std::fs::remove_dir(d.join("inbox")).unwrap();
        std::os::unix::fs::symlink(&outside, d.join("inbox")).unwrap();
        assert!(matches!(u.finish(), Err(LandingError::NotAFolder(_))));
        assert_eq!(parts_in(&d), 0, "the refused upload's bytes were kept");
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_dir_all(&outside);
    }

    #[test]
    fn a_drop_link_lands_in_its_own_folder_and_answers_the_same_whatever_is_there() {
        let d = tmp("drop");
        let dock = Dock::open(&d).unwrap();
        let drop_in = |path: &str, bytes: &[u8]| {
            let mut i = incoming(path, bytes);
            i.folder = "drop link 3".into();
            i.drop = true;
            let mut u = dock.begin(i).unwrap();
            u.write(0, bytes).unwrap();
            u.finish()
        };
        let first = drop_in("secret.txt", b"one").unwrap();
        let second = drop_in("secret.txt", b"two").unwrap();
        // Both told the name they asked for; both kept.
        assert_eq!(
            (first.path.as_str(), first.renamed_from.clone()),
            ("secret.txt", None)
        );
        assert_eq!(
            (second.path.as_str(), second.renamed_from.clone()),
            ("secret.txt", None)
        );
        assert_eq!(first.on_disk, "drop link 3/secret.txt");
        assert_eq!(second.on_disk, "drop link 3/secret (2).txt");
        // A folder named where a file is: the next numbered folder, silently.
        let third = drop_in("secret.txt/inner.txt", b"three").unwrap();
        assert_eq!(third.path, "secret.txt/inner.txt");
        // ("secret (2).txt" is the second file: the next number is free.)
        assert_eq!(third.on_disk, "drop link 3/secret (3).txt/inner.txt");
        assert_eq!(
            std::fs::read(d.join("drop link 3/secret.txt")).unwrap(),
            b"one"
        );
        // The link's folder itself taken by a file of the sharer's: numbered too.
        std::fs::write(d.join("drop link 4"), b"the sharer's").unwrap();
        let mut i = incoming("a.txt", b"a");
        i.folder = "drop link 4".into();
        i.drop = true;
        let mut u = dock.begin(i).unwrap();
        u.write(0, b"a").unwrap();
        assert_eq!(u.finish().unwrap().on_disk, "drop link 4 (2)/a.txt");
        assert_eq!(
            std::fs::read(d.join("drop link 4")).unwrap(),
            b"the sharer's"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn parts_left_by_uploads_cut_off_are_bounded_and_the_newest_is_kept() {
        let d = tmp("trim");
        let dock = Dock::open(&d).unwrap();
        for n in 0..(IDLE_PARTS + 10) {
            let bytes = format!("part {n}");
            let mut u = dock
                .begin(incoming(&format!("f{n}.bin"), &[0u8; 64]))
                .unwrap();
            u.write(0, &bytes.as_bytes()[..bytes.len().min(64)])
                .unwrap();
            drop(u);
        }
        assert!(
            parts_in(&d) <= IDLE_PARTS + 1,
            "{} parts kept",
            parts_in(&d)
        );
        // A day later only what is being written would stay.
        let later =
            std::time::SystemTime::now() + IDLE_PART_AGE + std::time::Duration::from_secs(1);
        dock.trim(later).unwrap();
        assert_eq!(parts_in(&d), 0);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_staging_folder_is_never_shared() {
        assert!(is_staging(b".linkfs-incoming"));
        assert!(is_staging(b".linkfs-incoming/abc.part"));
        assert!(!is_staging(b".linkfs-incoming2"));
        assert!(!is_staging(b"a/.linkfs-incoming"));
    }
}
