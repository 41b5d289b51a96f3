//! `linkfs put`: adding files and folders to a share through a link that
//! takes them.
//!
//! The files are gathered first (a folder with everything in it; symlinks,
//! sockets and devices are skipped and said), each hashed (BLAKE3, the hash
//! the sharer compares before the file lands), then sent a few at a time
//! ([`FILES_AT_ONCE`] open files at most, whatever the number of files). A
//! lost connection is resumed by the visit at the byte the sharer holds; a
//! run stopped and started again resumes each unfinished file the same way
//! (the sharer keeps its part under the file's path, size and hash).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use linkfs_core::UploadEvent;
use linkfs_proto::{UploadId, UploadRefusal};
use tokio::sync::mpsc;

use super::Client;

/// Files sent at once (each holds one open file here).
pub const FILES_AT_ONCE: usize = 8;

/// One file to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    pub local: PathBuf,
    /// Where it goes, '/'-separated, relative to the link's folder.
    pub remote: String,
    pub size: u64,
}

/// The files under `paths` (each file itself, each folder with everything
/// in it, under its own name), to go under `to`; and what was skipped, in words.
pub fn gather(paths: &[PathBuf], to: &str) -> (Vec<Outgoing>, Vec<String>) {
    let to = to.trim_end_matches('/');
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for p in paths {
        let name = p.file_name().unwrap_or(p.as_os_str());
        let Some(name) = utf8_name(p, name, &mut skipped) else {
            continue;
        };
        let remote = if to.is_empty() {
            name
        } else {
            format!("{to}/{name}")
        };
        add(p, &remote, &mut files, &mut skipped);
    }
    (files, skipped)
}

/// `name` (of `path`) as UTF-8, or None and the reason in `skipped`: the
/// sharer refuses other names, and changing them here would land a file
/// under a name nobody chose.
fn utf8_name(path: &Path, name: &std::ffi::OsStr, skipped: &mut Vec<String>) -> Option<String> {
    match name.to_str() {
        Some(n) => Some(n.to_owned()),
        None => {
            skipped.push(format!(
                "{}: its name is not UTF-8, which uploads do not take; rename it to send it",
                path.display()
            ));
            None
        }
    }
}

fn add(local: &Path, remote: &str, files: &mut Vec<Outgoing>, skipped: &mut Vec<String>) {
    let meta = match std::fs::symlink_metadata(local) {
        Ok(m) => m,
        Err(e) => {
            skipped.push(format!("{}: {e}", local.display()));
            return;
        }
    };
    if meta.file_type().is_symlink() {
        skipped.push(format!("{}: a symlink (not followed)", local.display()));
    } else if meta.is_file() {
        files.push(Outgoing {
            local: local.to_path_buf(),
            remote: remote.to_owned(),
            size: meta.len(),
        });
    } else if meta.is_dir() {
        let entries = match std::fs::read_dir(local) {
            Ok(e) => e,
            Err(e) => {
                skipped.push(format!("{}: {e}", local.display()));
                return;
            }
        };
        let mut names: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        names.sort();
        for n in names {
            let path = local.join(&n);
            let Some(name) = utf8_name(&path, &n, skipped) else {
                continue;
            };
            let child = format!("{remote}/{name}");
            add(&path, &child, files, skipped);
        }
    } else {
        skipped.push(format!(
            "{}: not a file or folder (a socket, pipe or device)",
            local.display()
        ));
    }
}

/// The BLAKE3 hash of the file at `path`, and its size.
pub fn hash_file(path: &Path) -> std::io::Result<([u8; 32], u64)> {
    let mut f = std::fs::File::open(path)?;
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        size += n as u64;
    }
    Ok((*h.finalize().as_bytes(), size))
}

/// What one run did.
#[derive(Debug, Default, Clone)]
pub struct PutSummary {
    pub files: u64,
    /// Bytes the sharer wrote in this run (resumed bytes not counted twice).
    pub bytes_sent: u64,
    /// Files that went on from an earlier run's bytes.
    pub resumed: u64,
    /// (asked path, landed path) of files that landed under another name.
    pub renamed: Vec<(String, String)>,
    /// Changes made to names to make them safe, in words.
    pub name_changes: Vec<String>,
    /// Files refused or failed, in words.
    pub failed: Vec<(String, UploadRefusal, String)>,
}

/// What the caller is told as it goes (for a progress bar).
pub trait PutProgress {
    /// `bytes` more were written by the sharer (or were already there).
    fn advanced(&self, bytes: u64);
    /// Something to say (a file resumed, renamed, refused).
    fn say(&self, line: String);
}

/// Sends `files` through `client`. Each file is hashed just before it is
/// sent (its hash is what the sharer checks).
pub async fn put(client: &Client, files: Vec<Outgoing>, progress: &dyn PutProgress) -> PutSummary {
    let mut summary = PutSummary::default();
    let (tx, mut rx) = mpsc::unbounded_channel::<(UploadId, UploadEvent)>();
    let mut open: HashMap<UploadId, (Outgoing, u64)> = HashMap::new();
    let mut queue = files.into_iter();
    loop {
        while open.len() < FILES_AT_ONCE {
            let Some(file) = queue.next() else { break };
            let local = file.local.clone();
            let hashed = tokio::task::spawn_blocking(move || {
                let (hash, size) = hash_file(&local)?;
                let f = std::fs::File::open(&local)?;
                Ok::<_, std::io::Error>((hash, size, f))
            })
            .await;
            let (hash, size, f) = match hashed {
                Ok(Ok(x)) => x,
                Ok(Err(e)) => {
                    summary.failed.push((
                        file.remote.clone(),
                        UploadRefusal::Failed,
                        format!("cannot read {}: {e}", file.local.display()),
                    ));
                    continue;
                }
                Err(e) => {
                    summary.failed.push((
                        file.remote.clone(),
                        UploadRefusal::Failed,
                        e.to_string(),
                    ));
                    continue;
                }
            };
            match client.upload(f, &file.remote, size, hash).await {
                Ok((id, mut events)) => {
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        while let Some(e) = events.recv().await {
                            if tx.send((id, e)).is_err() {
                                break;
                            }
                        }
                    });
                    open.insert(id, (Outgoing { size, ..file }, 0));
                }
                Err(e) => {
                    summary.failed.push((
                        file.remote.clone(),
                        UploadRefusal::Failed,
                        e.to_string(),
                    ));
                    // The session is over: nothing else can go.
                    for rest in queue.by_ref() {
                        summary
                            .failed
                            .push((rest.remote, UploadRefusal::Failed, e.to_string()));
                    }
                }
            }
        }
        if open.is_empty() {
            break;
        }
        let next = tokio::select! {
            next = rx.recv() => next,
            reason = ended(client) => {
                let words = session_ended(&reason);
                for (_, (file, _)) in open.drain() {
                    summary.failed.push((file.remote, UploadRefusal::Failed, words.clone()));
                }
                for rest in queue.by_ref() {
                    summary.failed.push((rest.remote, UploadRefusal::Failed, words.clone()));
                }
                break;
            }
        };
        let Some((id, event)) = next else {
            break;
        };
        let Some((file, counted)) = open.get_mut(&id) else {
            continue;
        };
        match event {
            UploadEvent::Ready {
                offset,
                path,
                changes,
                ..
            } => {
                if offset > *counted {
                    progress.advanced(offset - *counted);
                    *counted = offset;
                }
                if offset > 0 {
                    summary.resumed += 1;
                    progress.say(format!("{}: going on from byte {offset}", file.remote));
                }
                for c in changes.lines().filter(|l| !l.is_empty()) {
                    summary.name_changes.push(c.to_owned());
                    progress.say(format!("{path}: name made safe: {c}"));
                }
            }
            UploadEvent::Progress { written, .. } => {
                if written > *counted {
                    progress.advanced(written - *counted);
                    summary.bytes_sent += written - *counted;
                    *counted = written;
                }
            }
            UploadEvent::Done { path, renamed, .. } => {
                if file.size > *counted {
                    progress.advanced(file.size - *counted);
                    summary.bytes_sent += file.size - *counted;
                }
                summary.files += 1;
                if renamed {
                    progress.say(format!(
                        "{}: that name was taken; saved as {path}",
                        file.remote
                    ));
                    summary.renamed.push((file.remote.clone(), path));
                }
                open.remove(&id);
            }
            UploadEvent::Refused { code, message, .. } => {
                progress.say(format!("{}: not added: {message}", file.remote));
                summary.failed.push((file.remote.clone(), code, message));
                open.remove(&id);
            }
            UploadEvent::Interrupted { message, .. } => {
                summary.failed.push((
                    file.remote.clone(),
                    UploadRefusal::Failed,
                    session_ended(&message),
                ));
                open.remove(&id);
            }
        }
    }
    summary
}

/// What a file not added because the session ended says.
fn session_ended(why: &dyn std::fmt::Display) -> String {
    format!("the session with the sharer ended: {why}")
}

/// Resolves when the client's session has ended, with why.
async fn ended(client: &Client) -> linkfs_core::EndReason {
    let mut watch = client.watch();
    loop {
        if let Some(reason) = watch.borrow_and_update().ended.clone() {
            return reason;
        }
        if watch.changed().await.is_err() {
            return linkfs_core::EndReason::ClosedHere;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What broke: a name that is not UTF-8 was sent with U+FFFD in its place.
    #[test]
    fn a_name_that_is_not_utf8_is_skipped_and_said_not_renamed() {
        use std::os::unix::ffi::OsStrExt;
        let dir = std::env::temp_dir().join(format!("linkfs-put-utf8-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("up")).unwrap();
        std::fs::write(dir.join("up/fine.txt"), b"1").unwrap();
        let bad = dir
            .join("up")
            .join(std::ffi::OsStr::from_bytes(b"bad\xffname"));
        std::fs::write(&bad, b"2").unwrap();
        let (files, skipped) = gather(&[dir.join("up"), bad.clone()], "");
        let _ = std::fs::remove_dir_all(&dir);
        let remotes: Vec<&str> = files.iter().map(|f| f.remote.as_str()).collect();
        assert_eq!(remotes, ["up/fine.txt"]);
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        assert!(
            skipped.iter().all(|s| s.contains("not UTF-8")),
            "{skipped:?}"
        );
    }
}
