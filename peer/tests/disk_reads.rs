//! Reads of shared files when the disk changes under them in hostile ways.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use linkfs_core::{ReadIo, ReadTarget};
use linkfs_peer::sharer::{OpenFiles, ShareRoot};
use linkfs_proto::{EntryId, Generation, ReadErrorCode, ReadId};

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn temp(tag: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!(
        "linkfs-disk-{tag}-{}-{:?}",
        std::process::id(),
        std::time::SystemTime::now()
    ));
    fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

#[test]
fn a_fifo_swapped_in_for_a_listed_file_is_refused_without_blocking_the_reader() {
    let tmp = temp("fifo");
    let file = tmp.0.join("a.txt");
    fs::write(&file, b"hello").unwrap();
    let md = fs::metadata(&file).unwrap();
    let io = ReadIo {
        read: ReadId(1),
        entry: EntryId(1),
        generation: Generation(0),
        offset: 0,
        len: 5,
        target: ReadTarget {
            path: b"a.txt".to_vec(),
            size: 5,
            mtime: md.mtime(),
            mtime_nsec: md.mtime_nsec() as u32,
            dev: md.dev(),
            ino: md.ino(),
        },
        last: true,
    };
    fs::remove_file(&file).unwrap();
    nix::unistd::mkfifo(&file, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let root = ShareRoot::open(&tmp.0).unwrap();
    let (tx, rx) = mpsc::channel();
    // On its own thread: before the fix, opening the FIFO blocked forever.
    std::thread::spawn(move || {
        let mut files = OpenFiles::default();
        let _ = tx.send(files.read(&root, &io));
    });
    let result = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("reading a FIFO swapped in for a file must not block");
    let err = result.expect_err("a FIFO is not served");
    assert_eq!(err.code, ReadErrorCode::Changed);
    assert!(err.message.contains("not a file"), "{}", err.message);
}
