//! Who came and what they read: each visitor's live figures (for
//! `linkfs visitors` and the share's terminal) and, with `--activity-log
//! FILE`, one JSON line per join, read, download and leave.
//!
//! ```text
//! {"at":1795635801123,"event":"join","visitor":4,"link":1,"link_label":"for Ann","route":"direct"}
//! {"at":...,"event":"read","visitor":4,"link":1,"path":"2026/june/sea.jpg"}
//! {"at":...,"event":"download","visitor":4,"link":1,"path":"2026/june/sea.jpg","bytes":5}
//! {"at":...,"event":"leave","visitor":4,"link":1,"bytes":5,"why":"..."}
//! ```
//!
//! - **read**: the first bytes a visitor asks of a file (once per file per
//!   visit); **download**: every byte of it served to that visitor.
//! - Paths are relative to what the visitor's link shows (a scoped link's
//!   folder), never above it.
//! - Bounds: a visitor's per-file tally holds [`FILES_TRACKED`] files (the
//!   oldest go first, and come back as a new read); lines wait in a queue of
//!   [`QUEUED_LINES`] (a line that finds it full is dropped and counted, and
//!   the next line written says how many); the file is rotated at
//!   [`ROTATE_AT`] bytes to `FILE.1` (one old file kept). Serving never waits
//!   for the log.

use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use linkfs_core::LinkId;
use linkfs_proto::EntryId;
use linkfs_proto::signal::PeerId;
use serde::Serialize;
use tokio::sync::mpsc;

/// Files whose bytes served are tallied per visitor.
pub const FILES_TRACKED: usize = 256;
/// Log lines waiting to be written.
pub const QUEUED_LINES: usize = 4096;
/// The log file is rotated past this size.
pub const ROTATE_AT: u64 = 16 << 20;

/// One line of the activity log.
#[derive(Debug, Clone, Serialize)]
pub struct LogLine {
    /// Unix milliseconds.
    pub at: u64,
    pub event: &'static str,
    pub visitor: PeerId,
    pub link: LinkId,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub link_label: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Lines dropped (queue full) just before this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped_before: Option<u64>,
}

pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The share's activity log (cloning shares it).
#[derive(Debug, Clone)]
pub struct ActivityLog {
    tx: mpsc::Sender<LogLine>,
    dropped: Arc<AtomicU64>,
}

impl ActivityLog {
    /// Appends to `file` (created 0600), rotating it; the writer runs until
    /// every clone is dropped.
    pub fn open(file: &Path) -> std::io::Result<ActivityLog> {
        let writer = LogFile::open(file)?;
        let (tx, rx) = mpsc::channel(QUEUED_LINES);
        let dropped = Arc::new(AtomicU64::new(0));
        std::thread::Builder::new()
            .name("linkfs-activity-log".into())
            .spawn(move || writer.run(rx))?;
        Ok(ActivityLog { tx, dropped })
    }

    /// Queues `line`; never waits.
    pub fn write(&self, mut line: LogLine) {
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            line.dropped_before = Some(dropped);
        }
        if self.tx.try_send(line).is_err() {
            self.dropped.fetch_add(1 + dropped, Ordering::Relaxed);
        }
    }
}

struct LogFile {
    path: PathBuf,
    file: std::fs::File,
    size: u64,
}

impl LogFile {
    fn open(path: &Path) -> std::io::Result<LogFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)?;
        let size = file.metadata()?.len();
        Ok(LogFile {
            path: path.to_path_buf(),
            file,
            size,
        })
    }

    fn run(mut self, mut rx: mpsc::Receiver<LogLine>) {
        while let Some(line) = rx.blocking_recv() {
            let Ok(mut bytes) = serde_json::to_vec(&line) else {
                continue;
            };
            bytes.push(b'\n');
            if self.size + bytes.len() as u64 > ROTATE_AT {
                let _ = self.file.flush();
                let mut old = self.path.clone().into_os_string();
                old.push(".1");
                let _ = std::fs::rename(&self.path, &old);
                match LogFile::open(&self.path) {
                    Ok(fresh) => self = fresh,
                    Err(e) => {
                        tracing::warn!(error = %e, "the activity log cannot be reopened; it stops");
                        return;
                    }
                }
            }
            if self.file.write_all(&bytes).is_ok() {
                self.size += bytes.len() as u64;
            }
        }
        let _ = self.file.flush();
    }
}

/// What one visitor is doing, now.
#[derive(Debug, Default, Clone)]
pub struct Doing {
    pub bytes_served: u64,
    /// Bytes of files it added (uploads that landed) and how many.
    pub bytes_uploaded: u64,
    pub files_uploaded: u64,
    /// The file it last read from (a path within its link's view).
    pub reading: Option<String>,
    /// "direct" or "turn", once known.
    pub route: Option<String>,
}

/// One visitor's figures, shared by its session (which counts) and the
/// sharer's desk (which shows them).
#[derive(Debug)]
pub struct VisitorWatch {
    pub visitor: PeerId,
    pub link: LinkId,
    pub link_label: String,
    doing: Mutex<Doing>,
    /// Bytes served per file, oldest first (bounded: [`FILES_TRACKED`]).
    files: Mutex<VecDeque<(EntryId, u64)>>,
    log: Option<ActivityLog>,
}

impl VisitorWatch {
    pub fn new(
        visitor: PeerId,
        link: LinkId,
        link_label: String,
        log: Option<ActivityLog>,
    ) -> Self {
        VisitorWatch {
            visitor,
            link,
            link_label,
            doing: Mutex::default(),
            files: Mutex::default(),
            log,
        }
    }

    pub fn doing(&self) -> Doing {
        self.doing.lock().map(|d| d.clone()).unwrap_or_default()
    }

    pub fn set_route(&self, route: &str) {
        if let Ok(mut d) = self.doing.lock() {
            d.route = Some(route.to_owned());
        }
    }

    fn line(&self, event: &'static str) -> LogLine {
        LogLine {
            at: unix_ms(),
            event,
            visitor: self.visitor,
            link: self.link,
            link_label: String::new(),
            path: None,
            bytes: None,
            route: None,
            why: None,
            dropped_before: None,
        }
    }

    pub fn joined(&self) {
        if let Some(log) = &self.log {
            log.write(LogLine {
                link_label: self.link_label.clone(),
                route: self.doing().route,
                ..self.line("join")
            });
        }
    }

    pub fn left(&self, why: &str) {
        if let Some(log) = &self.log {
            log.write(LogLine {
                bytes: Some(self.doing().bytes_served),
                why: Some(why.to_owned()),
                ..self.line("leave")
            });
        }
    }

    /// A file it uploaded landed at `path` (within the link's view).
    pub fn uploaded(&self, path: &str, size: u64) {
        if let Ok(mut d) = self.doing.lock() {
            d.bytes_uploaded = d.bytes_uploaded.saturating_add(size);
            d.files_uploaded += 1;
        }
        if let Some(log) = &self.log {
            log.write(LogLine {
                path: Some(path.to_owned()),
                bytes: Some(size),
                ..self.line("upload")
            });
        }
    }

    /// `len` bytes of file `entry` (`size` bytes in all) were served; `path`
    /// gives its path within the link's view when it is needed.
    pub fn served(
        &self,
        entry: EntryId,
        len: u64,
        size: u64,
        path: impl FnOnce() -> Option<String>,
    ) {
        let (first, done) = {
            let Ok(mut files) = self.files.lock() else {
                return;
            };
            match files.iter_mut().find(|(e, _)| *e == entry) {
                Some((_, total)) => {
                    let was = *total;
                    *total = total.saturating_add(len);
                    (false, was < size && *total >= size)
                }
                None => {
                    if files.len() >= FILES_TRACKED {
                        files.pop_front();
                    }
                    files.push_back((entry, len));
                    (true, len >= size)
                }
            }
        };
        let path = if first || done { path() } else { None };
        if let Ok(mut d) = self.doing.lock() {
            d.bytes_served = d.bytes_served.saturating_add(len);
            if first {
                d.reading.clone_from(&path);
            }
        }
        if let Some(log) = &self.log {
            if first {
                log.write(LogLine {
                    path: path.clone(),
                    ..self.line("read")
                });
            }
            if done {
                log.write(LogLine {
                    path,
                    bytes: Some(size),
                    ..self.line("download")
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(path: &Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    #[test]
    fn a_visit_is_logged_as_join_read_download_leave() {
        let dir = std::env::temp_dir().join(format!("linkfs-activity-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("activity.jsonl");
        let _ = std::fs::remove_file(&file);
        let log = ActivityLog::open(&file).unwrap();
        let v = VisitorWatch::new(PeerId(4), LinkId(1), "for Ann".into(), Some(log));
        v.set_route("direct");
        v.joined();
        let path = || Some("june/sea.jpg".to_owned());
        v.served(EntryId(9), 60, 100, path);
        v.served(EntryId(9), 40, 100, path);
        v.served(EntryId(9), 10, 100, path); // read again: no second download
        assert_eq!(v.doing().bytes_served, 110);
        assert_eq!(v.doing().reading.as_deref(), Some("june/sea.jpg"));
        v.left("it said goodbye");
        drop(v);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let got = loop {
            let got = lines(&file);
            if got.len() >= 4 || std::time::Instant::now() > deadline {
                break got;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let events: Vec<&str> = got.iter().map(|l| l["event"].as_str().unwrap()).collect();
        assert_eq!(events, ["join", "read", "download", "leave"]);
        assert_eq!(got[0]["link_label"], "for Ann");
        assert_eq!(got[0]["route"], "direct");
        assert_eq!(got[2]["path"], "june/sea.jpg");
        assert_eq!(got[3]["bytes"], 110);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_visitors_file_tally_is_bounded() {
        let v = VisitorWatch::new(PeerId(1), LinkId(0), String::new(), None);
        for i in 0..(FILES_TRACKED as u32 + 50) {
            v.served(EntryId(i), 1, 10, || None);
        }
        assert_eq!(v.files.lock().unwrap().len(), FILES_TRACKED);
    }

    #[test]
    fn the_log_is_rotated_and_keeps_one_old_file() {
        let dir = std::env::temp_dir().join(format!("linkfs-rotate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("a.jsonl");
        // A file already at the limit: the next line starts a new one.
        std::fs::write(&file, vec![b'x'; ROTATE_AT as usize]).unwrap();
        let log = ActivityLog::open(&file).unwrap();
        VisitorWatch::new(PeerId(1), LinkId(0), String::new(), Some(log)).joined();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while lines(&file).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(lines(&file).len(), 1);
        assert_eq!(
            std::fs::metadata(dir.join("a.jsonl.1")).unwrap().len(),
            ROTATE_AT
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
