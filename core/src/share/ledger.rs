//! A link's upload caps and what came through it, counted before bytes are
//! taken: the rule every session of the link shares (the shell keeps one
//! ledger per link behind a lock, as its sessions run side by side).
//!
//! ```text
//!  an upload begins   reserve(need)   -> Hold (the bytes it may still receive
//!                                        and one file) | OverCap, refused
//!  bytes come          received(hold, n) (each counts as received at once)
//!  the upload ends     close(hold, landed) (what it did not receive goes
//!                                        back; the file counts if it landed)
//! ```
//!
//! Decided here: the byte cap counts every byte the sharer received through
//! the link, whether it landed, was refused or cancelled after it came, so a
//! visitor cannot walk around the cap by sending to a target that refuses;
//! what an upload may still receive is reserved before its first byte, so
//! uploads side by side cannot together pass the cap. 0 is no cap.

/// Why a link's caps leave no room for one more upload (told to the visitor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OverCap {
    #[error("this link takes at most {max} files, and has them")]
    Files { max: u64 },
    #[error(
        "this link takes at most {max} bytes in all (every byte sent to it counts, kept or not); {left} are left and this file needs {need}"
    )]
    Bytes { max: u64, left: u64, need: u64 },
}

/// One link's caps and counts (module docs).
#[derive(Debug, Default, Clone)]
pub struct UploadLedger {
    max_bytes: u64,
    max_files: u64,
    /// Bytes of files that landed, and their number.
    landed: u64,
    files: u64,
    /// Bytes received through the link, landed or not.
    received: u64,
    /// Of uploads under way: bytes they may still receive, and files.
    reserved_bytes: u64,
    reserved_files: u64,
}

/// Room held for one upload under way: the bytes it may still receive.
/// Give it back with [`UploadLedger::close`].
#[derive(Debug, PartialEq, Eq)]
pub struct Hold {
    left: u64,
}

impl Hold {
    /// Bytes the upload may still receive.
    pub fn left(&self) -> u64 {
        self.left
    }
}

impl UploadLedger {
    /// A link's ledger: its caps (0: none), and what landed (`landed` bytes
    /// in `files` files) and came (`received` bytes) through it before.
    pub fn new(max_bytes: u64, max_files: u64, landed: u64, files: u64, received: u64) -> Self {
        UploadLedger {
            max_bytes,
            max_files,
            landed,
            files,
            received: received.max(landed),
            reserved_bytes: 0,
            reserved_files: 0,
        }
    }

    /// Bytes and files that landed through the link, and the bytes received.
    pub fn added(&self) -> (u64, u64, u64) {
        (self.landed, self.files, self.received)
    }

    /// Bytes and files the link may still take (0: no cap; at least 1 where
    /// there is one, so "0 left" never reads as "no cap").
    pub fn left(&self) -> (u64, u64) {
        let left = |max: u64, used: u64| {
            if max == 0 {
                0
            } else {
                max.saturating_sub(used).max(1)
            }
        };
        (
            left(self.max_bytes, self.received + self.reserved_bytes),
            left(self.max_files, self.files + self.reserved_files),
        )
    }

    /// Room for one upload that may still receive `need` bytes.
    pub fn reserve(&mut self, need: u64) -> Result<Hold, OverCap> {
        if self.max_files > 0 && self.files + self.reserved_files >= self.max_files {
            return Err(OverCap::Files {
                max: self.max_files,
            });
        }
        let taken = self.received + self.reserved_bytes;
        if self.max_bytes > 0 && taken.saturating_add(need) > self.max_bytes {
            return Err(OverCap::Bytes {
                max: self.max_bytes,
                left: self.max_bytes.saturating_sub(taken),
                need,
            });
        }
        self.reserved_bytes += need;
        self.reserved_files += 1;
        Ok(Hold { left: need })
    }

    /// `n` more bytes came for the upload holding `hold` (never more than it
    /// reserved: the session refuses bytes past a file's size).
    pub fn received(&mut self, hold: &mut Hold, n: u64) {
        let n = n.min(hold.left);
        hold.left -= n;
        self.reserved_bytes = self.reserved_bytes.saturating_sub(n);
        self.received = self.received.saturating_add(n);
    }

    /// The upload holding `hold` ended: what it did not receive goes back;
    /// `landed` is the size of the file it left, if it landed.
    pub fn close(&mut self, hold: Hold, landed: Option<u64>) {
        self.reserved_bytes = self.reserved_bytes.saturating_sub(hold.left);
        self.reserved_files = self.reserved_files.saturating_sub(1);
        if let Some(size) = landed {
            self.landed = self.landed.saturating_add(size);
            self.files += 1;
        }
    }
}
