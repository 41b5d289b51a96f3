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
//! Nothing half-written is ever in place: a failed upload leaves at most its
//! part file, which a resume continues and [`Dock::sweep`] removes when old.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

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
    pub link: u32,
    pub folder: String,
    pub path: SafePath,
    pub size: u64,
    pub hash: [u8; 32],
}

impl Incoming {
    /// The part file's name: the same upload always finds the same part.
    fn part_name(&self) -> String {
        let mut h = blake3::Hasher::new();
        h.update(b"linkfs upload part v1\0");
        h.update(&self.link.to_le_bytes());
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

    /// Removes part files not written to for `older_than` (abandoned uploads).
    pub fn sweep(&self, older_than: std::time::Duration) -> io::Result<u64> {
        let fd = openat(
            &*self.staging,
            ".",
            OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let mut dir = nix::dir::Dir::from_fd(fd)?;
        let now = std::time::SystemTime::now();
        let mut removed = 0;
        let names: Vec<Vec<u8>> = dir
            .iter()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_bytes().to_vec())
            .filter(|n| n.ends_with(b".part"))
            .collect();
        for name in names {
            let Ok(st) = fstatat(
                &*self.staging,
                OsStr::from_bytes(&name),
                AtFlags::AT_SYMLINK_NOFOLLOW,
            ) else {
                continue;
            };
            let modified =
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(st.st_mtime.max(0) as u64);
            if now.duration_since(modified).unwrap_or_default() >= older_than
                && nix::unistd::unlinkat(
                    &*self.staging,
                    OsStr::from_bytes(&name),
                    nix::unistd::UnlinkatFlags::NoRemoveDir,
                )
                .is_ok()
            {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Opens the folder `parts` beneath the root, making what is missing;
    /// nothing followed through a symlink.
    fn folder(&self, parts: &[&str]) -> Result<OwnedFd, LandingError> {
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW;
        let mut at = beneath(&self.root, ".", flags)?;
        for (i, part) in parts.iter().enumerate() {
            let shown = || parts[..=i].join("/");
            match beneath(&at, part, flags) {
                Ok(fd) => at = fd,
                Err(Errno::ENOENT) => {
                    match mkdirat(&at, *part, Mode::from_bits_truncate(0o755)) {
                        Ok(()) | Err(Errno::EEXIST) => {}
                        Err(e) => return Err(e.into()),
                    }
                    at =
                        beneath(&at, part, flags).map_err(|_| LandingError::NotAFolder(shown()))?;
                }
                Err(Errno::ELOOP | Errno::ENOTDIR | Errno::EXDEV) => {
                    return Err(LandingError::NotAFolder(shown()));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(at)
    }
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
    /// Relative to the folder the link shows.
    pub path: String,
    /// The name it was asked to have, if a taken one made it another.
    pub renamed_from: Option<String>,
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

    /// Checks the whole file, syncs it and renames it into place.
    pub fn finish(self) -> Result<Landed, LandingError> {
        if self.written != self.incoming.size {
            return Err(LandingError::WrongLength {
                size: self.incoming.size,
                sent: self.written,
            });
        }
        if *self.hasher.finalize().as_bytes() != self.incoming.hash {
            self.abandon();
            return Err(LandingError::HashMismatch);
        }
        fchmod(&self.file, Mode::from_bits_truncate(0o644))?;
        self.file.sync_all()?;
        let folder_parts: Vec<&str> = self
            .incoming
            .folder
            .split('/')
            .filter(|p| !p.is_empty())
            .chain(
                self.incoming.path.parts[..self.incoming.path.parts.len() - 1]
                    .iter()
                    .map(String::as_str),
            )
            .collect();
        let dir = self.dock.folder(&folder_parts)?;
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
        let mut parts = self.incoming.path.parts.clone();
        let renamed_from = (name != wanted).then(|| parts.join("/"));
        if let Some(last) = parts.last_mut() {
            *last = name;
        }
        Ok(Landed {
            path: parts.join("/"),
            renamed_from,
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
            link: 1,
            folder: String::new(),
            path: safe_path(path.as_bytes()).unwrap(),
            size: bytes.len() as u64,
            hash: *blake3::hash(bytes).as_bytes(),
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
            walked.extend(batch.into_iter().map(|e| e.name));
        }
        assert!(
            !walked.iter().any(|n| n == STAGING.as_bytes()),
            "the walk found the staging folder"
        );
        assert!(walked.iter().any(|n| n == b"shared.txt"));
        u.abandon();
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
