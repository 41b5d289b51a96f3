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
            dev: md.dev(),
            ino: md.ino(),
            stamp: linkfs_core::change_stamp(
                md.mtime_nsec() as u32,
                linkfs_core::ctime_ns(md.ctime(), md.ctime_nsec()),
            ),
        },
        last: true,
        short: true,
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

/// Rewrites `path` in place with `bytes` (same length) and puts its mtime back,
/// as `cp -p`, `rsync -t` or `touch -r` leave a file.
fn rewrite_keeping_size_and_mtime(path: &std::path::Path, bytes: &[u8]) {
    let before = fs::metadata(path).unwrap();
    assert_eq!(before.len(), bytes.len() as u64);
    // A coarse file-system clock ticks every few ms: let it move.
    std::thread::sleep(Duration::from_millis(20));
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, bytes))
        .unwrap();
    let mtime = before.modified().unwrap();
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let after = fs::metadata(path).unwrap();
    assert_eq!(
        (after.len(), after.modified().unwrap()),
        (before.len(), mtime)
    );
}

#[test]
fn a_read_in_flight_across_a_same_size_same_mtime_rewrite_ends_changed_while_reading() {
    let tmp = temp("rewrite");
    let file = tmp.0.join("data.bin");
    let old = vec![b'a'; 128 * 1024];
    fs::write(&file, &old).unwrap();
    let md = fs::metadata(&file).unwrap();
    let target = ReadTarget {
        path: b"data.bin".to_vec(),
        size: md.len(),
        mtime: md.mtime(),
        dev: md.dev(),
        ino: md.ino(),
        stamp: linkfs_core::change_stamp(
            md.mtime_nsec() as u32,
            linkfs_core::ctime_ns(md.ctime(), md.ctime_nsec()),
        ),
    };
    let chunk = |offset: u64, last: bool| ReadIo {
        read: ReadId(1),
        entry: EntryId(1),
        generation: Generation(0),
        offset,
        len: 64 * 1024,
        target: target.clone(),
        last,
        short: false,
    };
    let root = ShareRoot::open(&tmp.0).unwrap();
    let mut files = OpenFiles::default();
    let first = files
        .read(&root, &chunk(0, false))
        .expect("the first chunk");
    assert_eq!(first, old[..64 * 1024]);
    rewrite_keeping_size_and_mtime(&file, &vec![b'b'; 128 * 1024]);
    let err = files
        .read(&root, &chunk(64 * 1024, true))
        .expect_err("the second chunk comes from other bytes: refused, never mixed");
    assert_eq!(err.code, ReadErrorCode::Changed);
    assert!(err.message.contains("changed"), "{}", err.message);
    // A new read of the old version (as the index knew it) is refused at open too.
    let err = OpenFiles::default()
        .read(&root, &chunk(0, true))
        .expect_err("the old version is gone");
    assert_eq!(err.code, ReadErrorCode::Changed);
}
