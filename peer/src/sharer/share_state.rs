//! What a sharer keeps between runs, per shared folder: the link's room and
//! secret (so `linkfs share DIR` run again prints the same link) and, after a
//! clean stop, the share index (so entry ids, the epoch and log positions stay
//! what receivers hold, and a reopened link costs a few bytes).
//!
//! ```text
//! $LINKFS_STATE_DIR | $XDG_STATE_HOME/linkfs | ~/.local/state/linkfs   (0700)
//!   shares/<first 16 hex of BLAKE3(canonical folder path)>/            (0700)
//!     share.json   {"folder", "key": "room.secret", "sharer_key", "embedded_port"}   (0600)
//!     index.bin    the saved index (core's format), only after a clean stop (0600)
//!     lock         held (flock) while a sharer runs
//! ```
//!
//! - The saved index is **taken** at start (read, then deleted): a sharer that
//!   crashes leaves none, and the next start walks afresh under a new epoch
//!   (receivers then get a fresh snapshot). A saved index that cannot be read
//!   is the same: a warning, a fresh walk, nothing else lost.
//! - A second sharer of the same folder while one runs cannot hold the lock:
//!   it gets a link of its own for that run, not kept, and says so.
//! - `--new-link` forgets the kept key (and index) and makes a new one: the
//!   old link stops working.
//! - Files are written to a temporary name and renamed, so a stop at any
//!   moment leaves the old file or the new one, never half of one.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use linkfs_core::{SavedIndexError, ShareIndex, ShareLink};
use linkfs_proto::sharer_key::SharerKey;
use nix::fcntl::{Flock, FlockArg};

/// The file names inside a share's state folder.
const LINK_FILE: &str = "share.json";
const INDEX_FILE: &str = "index.bin";
const LOCK_FILE: &str = "lock";
const LINKS_FILE: &str = "links.json";
/// The running sharer's control socket (`linkfs link`, `visitors`, `kick`).
pub const CONTROL_SOCKET: &str = "control.sock";

/// Why the state could not be used (the share then runs without keeping anything).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    #[error(
        "no place to keep the link: set LINKFS_STATE_DIR (or HOME or XDG_STATE_HOME) to keep it between runs"
    )]
    NoStateDir,
    #[error("cannot use {path} to keep the link: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{0} is already shared by another `linkfs share`; this one gets a link of its own for this run"
    )]
    InUse(PathBuf),
}

/// Why the index saved at the last clean stop cannot be used (the share then
/// walks its folder afresh).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TakeIndexError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot remove {}: {source}", path.display())]
    Remove {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the saved index {} is not usable: {source}", path.display())]
    Unusable {
        path: PathBuf,
        source: SavedIndexError,
    },
}

/// The kept link of a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptLink {
    /// `room.secret`, as in the link's fragment.
    pub key: String,
    /// The seed of the sharer's key pair (its room is derived from it).
    pub sharer_seed: [u8; 32],
    /// The embedded relay's port the link was printed with.
    pub embedded_port: Option<u16>,
}

/// The state folder of one shared folder, held (locked) while sharing.
#[derive(Debug)]
pub struct ShareState {
    dir: PathBuf,
    folder: PathBuf,
    _lock: Flock<File>,
}

/// Where states are kept: `$LINKFS_STATE_DIR`, `$XDG_STATE_HOME/linkfs` or `~/.local/state/linkfs`.
pub fn default_state_root() -> Option<PathBuf> {
    let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(d) = non_empty("LINKFS_STATE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = non_empty("XDG_STATE_HOME") {
        return Some(PathBuf::from(d).join("linkfs"));
    }
    non_empty("HOME").map(|h| PathBuf::from(h).join(".local/state/linkfs"))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `bytes` to `path` with mode 0600, through a temporary file and a rename.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    write_private_with(path, |f| f.write_all(bytes))
}

/// Writes `path` with mode 0600 through `write`, via a temporary file synced
/// to disk and a rename.
fn write_private_with(
    path: &Path,
    write: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<(), StateError> {
    let tmp = path.with_extension("tmp");
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io(&tmp))?;
    write(&mut f).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

/// The state folder of `folder` under `state_root` (not created), and the
/// folder's canonical path.
pub fn share_dir(state_root: &Path, folder: &Path) -> Result<(PathBuf, PathBuf), StateError> {
    let folder = std::fs::canonicalize(folder).map_err(io(folder))?;
    let hash = blake3::hash(folder.as_os_str().as_encoded_bytes());
    let name: String = hash.to_hex().chars().take(16).collect();
    Ok((state_root.join("shares").join(name), folder))
}

impl ShareState {
    /// Opens (creating) the state folder of `folder` under `state_root` and locks it.
    pub fn open(state_root: &Path, folder: &Path) -> Result<ShareState, StateError> {
        let (dir, folder) = share_dir(state_root, folder)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(io(&dir))?;
        let lock_path = dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        let lock = Flock::lock(lock, FlockArg::LockExclusiveNonblock)
            .map_err(|_| StateError::InUse(folder.clone()))?;
        Ok(ShareState {
            dir,
            folder,
            _lock: lock,
        })
    }

    /// The state folder (for messages and tests).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The kept link, if there is a readable one.
    pub fn kept_link(&self) -> Option<KeptLink> {
        let path = self.dir.join(LINK_FILE);
        let text = std::fs::read_to_string(&path).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        let key = v.get("key")?.as_str()?.to_owned();
        // Only a key that parses, with the sharer key its room was derived
        // from, is kept; anything else (a link made by an older linkfs) makes
        // a new link.
        let link = ShareLink::parse_fragment(&key).ok()?;
        let sharer_seed: [u8; 32] = URL_SAFE_NO_PAD
            .decode(v.get("sharer_key")?.as_str()?)
            .ok()?
            .try_into()
            .ok()?;
        if SharerKey::from_seed(sharer_seed).room() != link.room {
            return None;
        }
        let embedded_port = v
            .get("embedded_port")
            .and_then(serde_json::Value::as_u64)
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0);
        Some(KeptLink {
            key,
            sharer_seed,
            embedded_port,
        })
    }

    /// Keeps `link` (its room and secret, and the embedded relay's port).
    pub fn keep_link(&self, link: &KeptLink) -> Result<(), StateError> {
        let v = serde_json::json!({
            "folder": self.folder.to_string_lossy(),
            "key": link.key,
            "sharer_key": URL_SAFE_NO_PAD.encode(link.sharer_seed),
            "embedded_port": link.embedded_port,
        });
        write_private(&self.dir.join(LINK_FILE), v.to_string().as_bytes())
    }

    /// Forgets the kept link and index (`--new-link`).
    /// The share's extra links (none if none were kept). A file that cannot
    /// be read is set aside (`links.json.damaged`) and said so.
    pub fn links(&self) -> (linkfs_core::share::links::Links, Option<String>) {
        let path = self.dir.join(LINKS_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => match linkfs_core::share::links::Links::from_json(&bytes) {
                Ok(links) => (links, None),
                Err(e) => {
                    let _ = std::fs::rename(&path, path.with_extension("json.damaged"));
                    (
                        linkfs_core::share::links::Links::default(),
                        Some(e.to_string()),
                    )
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Default::default(),
            Err(e) => (
                linkfs_core::share::links::Links::default(),
                Some(format!("cannot read {}: {e}", path.display())),
            ),
        }
    }

    /// Keeps the share's extra links (0600).
    pub fn keep_links(&self, links: &linkfs_core::share::links::Links) -> Result<(), StateError> {
        write_private(&self.dir.join(LINKS_FILE), &links.to_json())
    }

    pub fn forget(&self) -> Result<(), StateError> {
        for f in [LINK_FILE, INDEX_FILE, LINKS_FILE] {
            let path = self.dir.join(f);
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&path)(e)),
                _ => {}
            }
        }
        Ok(())
    }

    /// Takes the index saved at the last clean stop (see the module docs):
    /// `Ok(None)` if there is none, an error if there was one that cannot be
    /// used. Either way it is gone from disk afterwards.
    pub fn take_index(&self) -> Result<Option<ShareIndex>, TakeIndexError> {
        let path = self.dir.join(INDEX_FILE);
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(TakeIndexError::Read { path, source }),
        };
        // Read as it goes: no copy of the file beside the index it becomes.
        let read = file
            .metadata()
            .map_err(|source| TakeIndexError::Read {
                path: path.clone(),
                source,
            })
            .map(|m| ShareIndex::read_saved(std::io::BufReader::new(file), m.len()));
        // Gone before it is used: a crash from here on must not reuse its
        // log positions.
        if let Err(source) = std::fs::remove_file(&path) {
            return Err(TakeIndexError::Remove { path, source });
        }
        match read? {
            Ok(index) => Ok(Some(index)),
            Err(source) => Err(TakeIndexError::Unusable { path, source }),
        }
    }

    /// Saves `index` for the next start, written as it goes (see
    /// [`ShareIndex::write_saved`]).
    pub fn save_index(&self, index: &ShareIndex) -> Result<(), StateError> {
        write_private_with(&self.dir.join(INDEX_FILE), |f| index.write_saved(f))
    }

    /// Saves an index (made by [`ShareIndex::to_saved`]) for the next start.
    pub fn save_bytes(&self, saved: &[u8]) -> Result<(), StateError> {
        write_private(&self.dir.join(INDEX_FILE), saved)
    }
}
