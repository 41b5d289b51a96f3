//! A session's uploads carried out: the [`UploadIo`] its sans-IO session
//! leaves, done in order on one blocking worker per session (one part file
//! open per upload, at most `MAX_UPLOADS`), with the link's caps kept in its
//! [`UploadLedger`] (shared by every session of the link; the counting is
//! `linkfs_core::share::ledger`'s): the bytes an upload may still receive are
//! reserved before its first byte, and every byte received counts against
//! the link's cap.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use linkfs_core::LinkId;
use linkfs_core::share::ledger::{Hold, OverCap, UploadLedger as Ledger};
use linkfs_core::{UploadIo, UploadResult};
use linkfs_proto::{UploadId, UploadRefusal};
use tokio::sync::mpsc;

use super::landing::{Dock, Incoming, LandingError, Upload};

/// A link's upload caps and counts (the rule: `linkfs_core::share::ledger`),
/// shared by every session of the link.
#[derive(Debug, Default)]
pub struct UploadLedger {
    counts: Mutex<Ledger>,
}

impl UploadLedger {
    /// A link's ledger: its caps (0: none), and what landed (`landed` bytes
    /// in `files` files) and came (`received` bytes) through it before.
    pub fn new(max_bytes: u64, max_files: u64, landed: u64, files: u64, received: u64) -> Self {
        UploadLedger {
            counts: Mutex::new(Ledger::new(max_bytes, max_files, landed, files, received)),
        }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes and files that landed through the link, and the bytes received.
    pub fn added(&self) -> (u64, u64, u64) {
        self.counts().added()
    }

    /// Bytes and files the link may still take (0: no cap).
    pub fn left(&self) -> (u64, u64) {
        self.counts().left()
    }

    /// Room for one upload that may still receive `need` bytes.
    fn reserve(self: &Arc<Self>, need: u64) -> Result<Reservation, OverCap> {
        let hold = self.counts().reserve(need)?;
        Ok(Reservation {
            ledger: self.clone(),
            hold: Some(hold),
            landed: None,
        })
    }
}

/// Room held for one upload under way, given back when it is dropped (the
/// file counts if it landed).
#[derive(Debug)]
struct Reservation {
    ledger: Arc<UploadLedger>,
    hold: Option<Hold>,
    /// The file's size, once it lands.
    landed: Option<u64>,
}

impl Reservation {
    /// `n` more bytes came.
    fn received(&mut self, n: u64) {
        if let Some(hold) = self.hold.as_mut() {
            self.ledger.counts().received(hold, n);
        }
    }

    fn keep(mut self, size: u64) {
        self.landed = Some(size);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(hold) = self.hold.take() {
            self.ledger.counts().close(hold, self.landed);
        }
    }
}

/// Where a link's uploads go.
#[derive(Debug, Clone)]
pub struct UploadPlace {
    pub dock: Dock,
    /// The folder uploads land in, relative to the shared folder: the folder
    /// the link shows, or a drop link's own folder.
    pub folder: String,
    pub link: LinkId,
    pub ledger: Arc<UploadLedger>,
    /// A drop link (see `landing`): never refused for what is there, told
    /// only the name asked for.
    pub drop: bool,
}

/// What landed, for the visitor's figures and the activity log.
#[derive(Debug, Clone)]
pub struct LandedFile {
    /// Relative to the shared folder.
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
        | LandingError::Io(_)
        | LandingError::NotTaken => UploadRefusal::Failed,
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
            let incoming = Incoming {
                link: place.link,
                folder: place.folder.clone(),
                path,
                size,
                hash,
                drop: place.drop,
            };
            // The way there is checked before anything is kept.
            let u = match place.dock.begin(incoming) {
                Ok(u) => u,
                Err(e) => return (upload, from_landing(&e), None),
            };
            // What it may still receive is reserved before its first byte.
            let reservation = match place.ledger.reserve(size - u.offset()) {
                Ok(r) => r,
                Err(over) => {
                    if u.offset() == 0 {
                        u.abandon();
                    }
                    return (
                        upload,
                        refused(UploadRefusal::OverCap, over.to_string()),
                        None,
                    );
                }
            };
            let offset = u.offset();
            open.insert(upload, (u, reservation));
            (upload, UploadResult::Ready { offset }, None)
        }
        UploadIo::Write {
            upload,
            offset,
            data,
        } => {
            let Some((u, reservation)) = open.get_mut(&upload) else {
                return (
                    upload,
                    refused(UploadRefusal::Failed, "no such upload"),
                    None,
                );
            };
            // Received, whatever becomes of it.
            reservation.received(data.len() as u64);
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
                    reservation.keep(size);
                    let file = LandedFile {
                        path: landed.on_disk.clone(),
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
