//! What a sharer keeps between runs: the link per folder, the index after a
//! clean stop, file modes, the lock against a second sharer of the same folder.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use linkfs_core::{NewEntry, ShareIndex};
use linkfs_peer::sharer::share_state::{KeptLink, ShareState, StateError};
use linkfs_proto::{EntryId, EntryKind, Epoch};

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let base = std::env::temp_dir().join(format!(
            "linkfs-state-test-{tag}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        fs::create_dir_all(base.join("folder")).unwrap();
        TempDir(base)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn index() -> ShareIndex {
    let mut ix = ShareIndex::new(Epoch(42));
    ix.push(&NewEntry {
        id: EntryId::ROOT,
        parent: EntryId::ROOT,
        kind: EntryKind::Dir,
        name: b"folder",
        size: 0,
        mtime: 1,
        mtime_nsec: 0,
        mode: 0o755,
        target: b"",
        dev: 1,
        ino: 2,
        ctime_ns: 0,
    })
    .unwrap();
    ix.mark_snapshot_complete();
    ix
}

#[test]
fn the_link_is_kept_per_folder_readable_only_by_its_owner() {
    let tmp = TempDir::new("link");
    let states = tmp.0.join("state");
    let folder = tmp.0.join("folder");
    let sharer = linkfs_proto::sharer_key::SharerKey::from_seed([5; 32]);
    let link = KeptLink {
        key: format!("{}.AAAAAAAAAAAAAAAAAAAAAA", sharer.room()),
        sharer_seed: sharer.seed(),
        embedded_port: Some(4321),
    };
    {
        let state = ShareState::open(&states, &folder).unwrap();
        assert_eq!(state.kept_link(), None);
        state.keep_link(&link).unwrap();
        let mode = fs::metadata(state.dir().join("share.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "share.json holds the secret");
        let dir_mode = fs::metadata(state.dir()).unwrap().permissions().mode();
        assert_eq!(dir_mode & 0o777, 0o700);
    }
    // The same folder named another way finds the same state.
    let other_name = folder.join("..").join("folder");
    let state = ShareState::open(&states, &other_name).unwrap();
    assert_eq!(state.kept_link(), Some(link.clone()));
    state.forget().unwrap();
    assert_eq!(state.kept_link(), None, "--new-link forgets the key");
    // A kept room that is not the kept sharer key's is not used.
    let mismatched = KeptLink {
        key: "abcdefghijklmnop.AAAAAAAAAAAAAAAAAAAAAA".into(),
        ..link
    };
    state.keep_link(&mismatched).unwrap();
    assert_eq!(state.kept_link(), None);
}

#[test]
fn a_second_sharer_of_the_same_folder_is_told_it_is_in_use() {
    let tmp = TempDir::new("lock");
    let states = tmp.0.join("state");
    let folder = tmp.0.join("folder");
    let held = ShareState::open(&states, &folder).unwrap();
    let second = ShareState::open(&states, &folder).unwrap_err();
    assert!(matches!(second, StateError::InUse(_)), "{second}");
    assert!(second.to_string().contains("already shared"), "{second}");
    drop(held);
    ShareState::open(&states, &folder).expect("free again once the first stops");
}

#[test]
fn a_saved_index_is_taken_once_and_a_damaged_one_is_refused() {
    let tmp = TempDir::new("index");
    let state = ShareState::open(&tmp.0.join("state"), &tmp.0.join("folder")).unwrap();
    assert!(state.take_index().unwrap().is_none());
    state.save_bytes(&index().to_saved()).unwrap();
    let mode = fs::metadata(state.dir().join("index.bin"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let back = state.take_index().unwrap().expect("the saved index");
    assert_eq!(back.epoch(), Epoch(42));
    // Taken: a crash from here on leaves nothing to reuse log positions from.
    assert!(state.take_index().unwrap().is_none());

    let mut damaged = index().to_saved();
    let at = damaged.len() / 2;
    damaged[at] ^= 1;
    state.save_bytes(&damaged).unwrap();
    let err = state.take_index().unwrap_err().to_string();
    assert!(
        err.contains("not usable") && err.contains("damaged"),
        "{err}"
    );
    assert!(
        state.take_index().unwrap().is_none(),
        "a damaged index is removed too"
    );
}

/// `linkfs share DIR` with its state under `states`, stopped (SIGTERM, so it
/// saves its index) once its index is complete: its peak memory while it ran,
/// read before the stop (kB).
fn share_until_indexed_then_stop(dir: &std::path::Path, states: &std::path::Path) -> u64 {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_linkfs"))
        .arg("share")
        .arg(dir)
        .arg("--no-qr")
        .env("LINKFS_STATE_DIR", states)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start linkfs share");
    let pid = child.id();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("linkfs share ended before its index was complete: {seen:?}"))
            .unwrap();
        let done = line.starts_with("indexed ") || line.starts_with("checked the kept index");
        seen.push(line);
        if done {
            break;
        }
    }
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let running: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status");
    // Keep reading its stderr so it never blocks on a full pipe.
    let drain = std::thread::spawn(move || lines.count());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "linkfs share exits 0 on SIGTERM ({status})"
    );
    drain.join().unwrap();
    running
}

/// The most memory any child of this process that has ended held (kB): only
/// this test starts processes in this file.
fn children_peak() -> u64 {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage");
    usage.max_rss() as u64
}

/// Every stop saves the index, and the next start reads it back. The save
/// built the whole file in memory beside the index, and a start read the
/// whole file before building the index from it: at ten million entries the
/// walk peaked at 1.04 GB, the stop after it at 2.04 GB and a restart at
/// 1.88 GB. Both now go through the file as they write and read it.
#[test]
fn stopping_and_restarting_a_big_share_take_no_more_memory_than_walking_it() {
    const FOLDERS: usize = 150;
    const FILES: usize = 1_000;
    let tmp = TempDir::new("peak");
    let tree = tmp.0.join("folder");
    for d in 0..FOLDERS {
        let dir = tree.join(format!("folder {d:03}"));
        fs::create_dir(&dir).unwrap();
        for f in 0..FILES {
            fs::File::create(dir.join(format!("a file with a longer name {f:04}.txt"))).unwrap();
        }
    }
    let states = tmp.0.join("state");
    // The index of these 150,000 entries is about 17 MB; its file about 12.
    let walking = share_until_indexed_then_stop(&tree, &states);
    let slack = walking / 10;
    let stop = children_peak();
    assert!(
        stop <= walking + slack,
        "the stop (saving the index) peaked at {stop} kB, the walk at {walking} kB"
    );
    let restart = share_until_indexed_then_stop(&tree, &states);
    let restart_and_stop = children_peak();
    assert!(
        restart_and_stop <= walking + slack,
        "the restart from the saved index (or its stop) peaked at {restart_and_stop} kB \
         (while it ran: {restart} kB), the first walk at {walking} kB"
    );
}
