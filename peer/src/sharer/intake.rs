//! A session's uploads carried out: the [`UploadIo`] its sans-IO session
//! leaves, done in order on one blocking worker per session (one part file
//! open per upload, at most `MAX_UPLOADS`), with the link's caps kept in its
//! [`UploadLedger`] (shared by every session of the link).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use linkfs_core::{UploadIo, UploadResult};
use linkfs_proto::{UploadId, UploadRefusal};
use tokio::sync::mpsc;

use super::landing::{Dock, Incoming, LandingError, Upload};

/// A link's upload caps (0: none) and what was added through it.
#[derive(Debug, Default)]
pub struct UploadLedger {
    pub max_bytes: u64,
    pub max_files: u64,
    used: Mutex<Used>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Used {
    bytes: u64,
    files: u64,
    /// Of uploads under way.
    reserved_bytes: u64,
    reserved_files: u64,
}

impl UploadLedger {
    pub fn new(max_bytes: u64, max_files: u64, bytes: u64, files: u64) -> Self {
        UploadLedger {
            max_bytes,
            max_files,
            used: Mutex::new(Used {
                bytes,
                files,
                ..Used::default()
            }),
        }
    }

    /// Bytes and files added through the link so far.
    pub fn added(&self) -> (u64, u64) {
        let u = *self.used.lock().unwrap_or_else(|p| p.into_inner());
        (u.bytes, u.files)
    }

    /// Bytes and files the link may still take (0: no cap).
    pub fn left(&self) -> (u64, u64) {
        let u = *self.used.lock().unwrap_or_else(|p| p.into_inner());
        let left = |max: u64, used: u64| {
            if max == 0 {
                0
            } else {
                max.saturating_sub(used).max(1)
            }
        };
        (
            left(self.max_bytes, u.bytes + u.reserved_bytes),
            left(self.max_files, u.files + u.reserved_files),
        )
    }

    fn reserve(self: &Arc<Self>, size: u64) -> Result<Reservation, String> {
        let mut u = self.used.lock().unwrap_or_else(|p| p.into_inner());
        if self.max_files > 0 && u.files + u.reserved_files >= self.max_files {
            return Err(format!(
                "this link takes at most {} files, and has them",
                self.max_files
            ));
        }
        if self.max_bytes > 0 && u.bytes + u.reserved_bytes + size > self.max_bytes {
            return Err(format!(
                "this link takes at most {} bytes in all; {} are left and the file is {size}",
                self.max_bytes,
                self.max_bytes.saturating_sub(u.bytes + u.reserved_bytes)
            ));
        }
        u.reserved_bytes += size;
        u.reserved_files += 1;
        Ok(Reservation {
            ledger: self.clone(),
            size,
            kept: false,
        })
    }
}

/// Room held for one upload under way; given back unless kept.
#[derive(Debug)]
struct Reservation {
    ledger: Arc<UploadLedger>,
    size: u64,
    kept: bool,
}

impl Reservation {
    fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut u = self.ledger.used.lock().unwrap_or_else(|p| p.into_inner());
        u.reserved_bytes = u.reserved_bytes.saturating_sub(self.size);
        u.reserved_files = u.reserved_files.saturating_sub(1);
        if self.kept {
            u.bytes += self.size;
            u.files += 1;
        }
    }
}

/// Where a link's uploads go.
#[derive(Debug, Clone)]
pub struct UploadPlace {
    pub dock: Dock,
    /// The folder the link shows, relative to the shared folder.
    pub folder: String,
    pub link: u32,
    pub ledger: Arc<UploadLedger>,
}

/// What landed, for the visitor's figures and the activity log.
#[derive(Debug, Clone)]
pub struct LandedFile {
    pub path: String,
    pub size: u64,
}

/// One session's upload worker: takes [`UploadIo`], answers on `done`.
pub fn start(
    place: UploadPlace,
    done: mpsc::UnboundedSender<(UploadId, UploadResult, Option<LandedFile>)>,
) -> mpsc::UnboundedSender<UploadIo> {
    let (tx, mut rx) = mpsc::unbounded_channel::<UploadIo>();
    tokio::task::spawn_blocking(move || {
        let mut open: HashMap<UploadId, (Upload, Reservation)> = HashMap::new();
        while let Some(io) = rx.blocking_recv() {
            let (upload, result, landed) = step(&place, &mut open, io);
            if done.send((upload, result, landed)).is_err() {
                break;
            }
        }
        // The session ended: parts stay for a resume; reservations go back.
        drop(open);
    });
    tx
}

fn refused(code: UploadRefusal, message: impl Into<String>) -> UploadResult {
    UploadResult::Refused {
        code,
        message: message.into(),
    }
}

fn from_landing(e: &LandingError) -> UploadResult {
    let code = match e {
        LandingError::DiskFull => UploadRefusal::DiskFull,
        LandingError::HashMismatch => UploadRefusal::Corrupt,
        LandingError::NotAFolder(_) | LandingError::NoFreeName(_) => UploadRefusal::BadName,
        LandingError::Busy => UploadRefusal::Busy,
        LandingError::WrongLength { .. }
        | LandingError::OutOfOrder { .. }
        | LandingError::Io(_) => UploadRefusal::Failed,
    };
    refused(code, e.to_string())
}

fn step(
    place: &UploadPlace,
    open: &mut HashMap<UploadId, (Upload, Reservation)>,
    io: UploadIo,
) -> (UploadId, UploadResult, Option<LandedFile>) {
    match io {
        UploadIo::Begin {
            upload,
            path,
            size,
            hash,
        } => {
            let reservation = match place.ledger.reserve(size) {
                Ok(r) => r,
                Err(words) => return (upload, refused(UploadRefusal::OverCap, words), None),
            };
            let incoming = Incoming {
                link: place.link,
                folder: place.folder.clone(),
                path,
                size,
                hash,
            };
            match place.dock.begin(incoming) {
                Ok(u) => {
                    let offset = u.offset();
                    open.insert(upload, (u, reservation));
                    (upload, UploadResult::Ready { offset }, None)
                }
                Err(e) => (upload, from_landing(&e), None),
            }
        }
        UploadIo::Write {
            upload,
            offset,
            data,
        } => {
            let Some((u, _)) = open.get_mut(&upload) else {
                return (
                    upload,
                    refused(UploadRefusal::Failed, "no such upload"),
                    None,
                );
            };
            match u.write(offset, &data) {
                Ok(()) => (upload, UploadResult::Written { end: u.offset() }, None),
                Err(e) => {
                    let result = from_landing(&e);
                    if let Some((u, _)) = open.remove(&upload) {
                        u.abandon();
                    }
                    (upload, result, None)
                }
            }
        }
        UploadIo::Finish { upload } => {
            let Some((u, reservation)) = open.remove(&upload) else {
                return (
                    upload,
                    refused(UploadRefusal::Failed, "no such upload"),
                    None,
                );
            };
            let size = u.incoming().size;
            match u.finish() {
                Ok(landed) => {
                    reservation.keep();
                    let file = LandedFile {
                        path: landed.path.clone(),
                        size,
                    };
                    (
                        upload,
                        UploadResult::Landed {
                            path: landed.path,
                            renamed: landed.renamed_from.is_some(),
                        },
                        Some(file),
                    )
                }
                Err(e) => (upload, from_landing(&e), None),
            }
        }
        UploadIo::Cancel { upload } => {
            if let Some((u, _)) = open.remove(&upload) {
                u.abandon();
            }
            (upload, refused(UploadRefusal::Failed, "cancelled"), None)
        }
    }
}
