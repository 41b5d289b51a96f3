//! A live share without WebRTC: the real walk, the real folder watch (inotify)
//! and reconciler, a sender session and the native receiver in the drive loop
//! over an in-memory link. The folder changes in every way a user changes it;
//! after each step the receiver's index equals the folder within a bounded wait,
//! and reads return the current bytes.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use linkfs_core::sim::LinkModel;
use linkfs_core::{Index, ReadFailure, SenderConfig, SettleConfig, ShareIndex};
use linkfs_peer::drive::memory::MemoryLink;
use linkfs_peer::sharer::{IndexStart, LiveIndex, ServeContext, WalkProgress, serve};
use linkfs_peer::visit::{Client, ReadError, native_receiver_config};
use linkfs_proto::{EntryId, EntryKind, Epoch, ReadErrorCode};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let base = std::env::temp_dir().join(format!(
            "linkfs-live-{tag}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        fs::create_dir_all(base.join("share")).unwrap();
        fs::create_dir_all(base.join("outside")).unwrap();
        TempDir(base)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

type Seen = BTreeMap<Vec<u8>, (EntryKind, u64, i64, u32, Vec<u8>)>;

fn on_disk(root: &Path) -> Seen {
    let mut out = Seen::new();
    let mut stack = vec![(root.to_path_buf(), Vec::new())];
    while let Some((dir, rel)) = stack.pop() {
        let Ok(listing) = fs::read_dir(&dir) else {
            continue;
        };
        for item in listing.flatten() {
            let Ok(md) = fs::symlink_metadata(item.path()) else {
                continue;
            };
            let mut child = rel.clone();
            if !child.is_empty() {
                child.push(b'/');
            }
            child.extend_from_slice(item.file_name().as_encoded_bytes());
            let ft = md.file_type();
            let (kind, size, target) = if ft.is_dir() {
                stack.push((item.path(), child.clone()));
                (EntryKind::Dir, 0, Vec::new())
            } else if ft.is_symlink() {
                let t = fs::read_link(item.path())
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes();
                (EntryKind::Symlink, t.len() as u64, t)
            } else {
                (EntryKind::File, md.len(), Vec::new())
            };
            out.insert(child, (kind, size, md.mtime(), md.mode() & 0o7777, target));
        }
    }
    out
}

fn in_index(ix: &Index) -> Seen {
    let mut out = Seen::new();
    let mut stack = vec![(EntryId::ROOT, Vec::new())];
    while let Some((dir, rel)) = stack.pop() {
        for c in ix.children(dir) {
            let Some(e) = ix.get(EntryId(*c)) else {
                continue;
            };
            let mut child = rel.clone();
            if !child.is_empty() {
                child.push(b'/');
            }
            child.extend_from_slice(&e.name);
            if e.kind == EntryKind::Dir {
                stack.push((e.id, child.clone()));
            }
            out.insert(child, (e.kind, e.size, e.mtime, e.mode, e.target.to_vec()));
        }
    }
    out
}

struct Live {
    client: Client,
    ctx: ServeContext,
    live: Option<LiveIndex>,
    root: PathBuf,
    _progress: watch::Receiver<WalkProgress>,
    _reports: mpsc::Receiver<linkfs_peer::sharer::ShareEvent>,
}

impl Live {
    async fn start(root: &Path) -> Live {
        Live::start_from(root, IndexStart::Walk(Epoch(11))).await
    }

    async fn start_from(root: &Path, start: IndexStart) -> Live {
        let settle = SettleConfig {
            debounce_ms: 50,
            tick_ms: 25,
            ..SettleConfig::default()
        };
        Live::start_settled(root, start, settle).await
    }

    async fn start_settled(root: &Path, start: IndexStart, settle: SettleConfig) -> Live {
        let (progress_tx, progress) = watch::channel(WalkProgress::default());
        let (report_tx, reports) = mpsc::channel(16);
        let live = LiveIndex::start(root, start, true, settle, progress_tx, report_tx).unwrap();
        let ctx = ServeContext {
            index: live.index.clone(),
            index_changed: live.changed.clone(),
            root: live.root.clone(),
            config: SenderConfig::default(),
            cancel: CancellationToken::new(),
            drop_links: None,
            farewell: Default::default(),
            watch: None,
            intake: None,
        };
        let (a, b) = MemoryLink::pair(LinkModel::PERFECT, 1);
        tokio::spawn(serve(a, ctx.clone()));
        let client = Client::start(b, native_receiver_config());
        tokio::time::timeout(Duration::from_secs(30), client.wait_complete())
            .await
            .expect("the index within 30 s")
            .expect("the index arrives");
        Live {
            client,
            ctx,
            live: Some(live),
            root: root.to_path_buf(),
            _progress: progress,
            _reports: reports,
        }
    }

    /// Waits until the receiver's index equals the folder; returns how long it took.
    async fn converge(&self, what: &str) -> Duration {
        let started = Instant::now();
        loop {
            let disk = on_disk(&self.root);
            let index = self.client.with_index(in_index);
            if disk == index {
                return started.elapsed();
            }
            if started.elapsed() > Duration::from_secs(10) {
                let only_disk: Vec<_> = disk
                    .keys()
                    .filter(|k| !index.contains_key(*k))
                    .take(5)
                    .map(|k| String::from_utf8_lossy(k).into_owned())
                    .collect();
                let only_index: Vec<_> = index
                    .keys()
                    .filter(|k| !disk.contains_key(*k))
                    .take(5)
                    .map(|k| String::from_utf8_lossy(k).into_owned())
                    .collect();
                let differ: Vec<_> = disk
                    .iter()
                    .filter(|(k, v)| index.get(*k).is_some_and(|w| w != *v))
                    .take(5)
                    .map(|(k, v)| {
                        format!(
                            "{}: disk {v:?} index {:?}",
                            String::from_utf8_lossy(k),
                            index.get(k)
                        )
                    })
                    .collect();
                panic!(
                    "{what}: not equal after 10 s\n only on disk: {only_disk:?}\n only in the receiver: {only_index:?}\n different: {differ:?}"
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn id(&self, path: &str) -> EntryId {
        self.client
            .with_index(|ix| ix.lookup(path.as_bytes()))
            .unwrap_or_else(|| panic!("{path} is not in the receiver's index"))
    }

    async fn read(&self, path: &str) -> Result<Vec<u8>, ReadError> {
        let id = self.id(path);
        let size = self
            .client
            .with_index(|ix| ix.get(id).map(|e| e.size))
            .unwrap_or(0);
        self.client.read(id, 0, size).await
    }

    async fn stop(mut self) {
        self.ctx.cancel.cancel();
        self.client.shutdown().await;
        if let Some(l) = self.live.take() {
            l.stop().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_a_user_makes_reaches_the_receiver() {
    let tmp = TempDir::new("changes");
    let root = tmp.0.join("share");
    fs::create_dir_all(root.join("docs")).unwrap();
    fs::write(root.join("docs/a.txt"), b"first").unwrap();
    fs::create_dir_all(root.join("big/sub")).unwrap();
    for n in 0..2999 {
        fs::write(root.join(format!("big/sub/{n}")), b"").unwrap();
    }
    symlink("docs/a.txt", root.join("link")).unwrap();
    let live = Live::start(&root).await;
    live.converge("the first walk").await;

    for n in 0..1000 {
        fs::write(root.join(format!("docs/new-{n}")), n.to_string()).unwrap();
    }
    let took = live.converge("1,000 files created").await;
    eprintln!("1,000 files created: converged in {took:?}");

    {
        let start = Instant::now();
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(root.join("docs/a.txt"))
            .unwrap();
        for n in 0..50 {
            write!(f, " {n}").unwrap();
            f.flush().unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(start.elapsed() < Duration::from_secs(2));
    }
    live.converge("appended to 50 times").await;
    assert_eq!(
        live.read("docs/a.txt").await.unwrap(),
        fs::read(root.join("docs/a.txt")).unwrap(),
        "the read gives the new bytes"
    );

    fs::OpenOptions::new()
        .write(true)
        .open(root.join("docs/a.txt"))
        .unwrap()
        .set_len(3)
        .unwrap();
    live.converge("truncated").await;
    assert_eq!(live.read("docs/a.txt").await.unwrap(), b"fir");

    fs::set_permissions(root.join("docs/new-1"), fs::Permissions::from_mode(0o600)).unwrap();
    live.converge("chmod").await;

    fs::remove_file(root.join("docs/new-2")).unwrap();
    live.converge("delete").await;

    let ids: Vec<EntryId> = (0..2999)
        .step_by(97)
        .map(|n| live.id(&format!("big/sub/{n}")))
        .collect();
    fs::rename(root.join("big"), root.join("renamed")).unwrap();
    live.converge("a folder of 3,000 entries renamed").await;
    for (k, n) in (0..2999).step_by(97).enumerate() {
        assert_eq!(
            live.id(&format!("renamed/sub/{n}")),
            ids[k],
            "the move kept the ids"
        );
    }
    // The renamed folder is still watched under its new name.
    fs::write(root.join("renamed/sub/late"), b"late").unwrap();
    live.converge("a file added inside the renamed folder")
        .await;

    fs::rename(root.join("renamed"), tmp.0.join("outside/renamed")).unwrap();
    fs::create_dir_all(tmp.0.join("outside/incoming/deep")).unwrap();
    fs::write(tmp.0.join("outside/incoming/deep/f"), b"from outside").unwrap();
    fs::rename(tmp.0.join("outside/incoming"), root.join("incoming")).unwrap();
    live.converge("a folder moved out, another moved in").await;
    assert_eq!(live.read("incoming/deep/f").await.unwrap(), b"from outside");

    fs::remove_file(root.join("docs/new-3")).unwrap();
    fs::create_dir(root.join("docs/new-3")).unwrap();
    fs::write(root.join("docs/new-3/inside"), b"i").unwrap();
    live.converge("a file replaced by a folder of the same name")
        .await;

    fs::remove_file(root.join("link")).unwrap();
    symlink("incoming", root.join("link")).unwrap();
    live.converge("a symlink retargeted").await;

    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_changing_while_it_is_read_never_gives_mixed_bytes() {
    let tmp = TempDir::new("midread");
    let root = tmp.0.join("share");
    let old: Vec<u8> = (0..8 << 20).map(|i: u32| (i % 251) as u8).collect();
    let new: Vec<u8> = (0..8 << 20).map(|i: u32| (i % 239) as u8 ^ 0x55).collect();
    fs::write(root.join("big.bin"), &old).unwrap();
    let live = Live::start(&root).await;
    let id = live.id("big.bin");
    let reading = live.client.start_read(id, None, 0, old.len() as u64);
    let path = root.join("big.bin");
    let writer = {
        let new = new.clone();
        std::thread::spawn(move || {
            // Rewrite in place, a piece at a time, while the read runs.
            let mut f = fs::OpenOptions::new().write(true).open(path).unwrap();
            for chunk in new.chunks(1 << 20) {
                f.write_all(chunk).unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let got = reading.await;
    writer.join().unwrap();
    match got {
        Ok(bytes) => assert!(
            bytes == old || bytes == new,
            "a read gives one version, never a mix"
        ),
        Err(ReadError::Failed(ReadFailure::Refused(message, code))) => {
            assert_eq!(code, ReadErrorCode::Changed, "{message}");
            assert!(message.contains("changed"), "{message}");
        }
        Err(e) => panic!("unexpected failure: {e}"),
    }
    // The rewrite may keep the size and the mtime's second: wait for the new version.
    let started = Instant::now();
    while live
        .client
        .with_index(|ix| ix.get(id).map(|e| e.generation.0))
        == Some(0)
    {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the change never arrived"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let again = live.read("big.bin").await;
    if let Err(e) = &again {
        let md = fs::metadata(root.join("big.bin")).unwrap();
        let seen = live
            .client
            .with_index(|ix| ix.get(id).map(|e| (e.size, e.mtime, e.generation)));
        let shared = live
            .ctx
            .index
            .read()
            .unwrap()
            .view(id)
            .map(|v| (v.size, v.mtime, v.generation));
        panic!(
            "{e}: disk {} {} {}; receiver {seen:?}; sharer {shared:?}",
            md.len(),
            md.mtime(),
            md.mtime_nsec()
        );
    }
    assert!(again.unwrap() == new, "the next read gets the new version");
    live.stop().await;
}

/// Every file beneath `dir`, relative path to bytes (part files included).
fn files_in(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for item in fs::read_dir(&d).unwrap().flatten() {
            let p = item.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_of_files_changed_after_they_were_listed_writes_their_new_versions_whole() {
    use linkfs_peer::visit::get::{GetOptions, PIECE, get};
    let tmp = TempDir::new("get-changed");
    let root = tmp.0.join("share");
    fs::create_dir(root.join("sub")).unwrap();
    fs::write(root.join("small.txt"), b"the first version\n").unwrap();
    let big_old: Vec<u8> = (0..(2 * PIECE + 7) as u32)
        .map(|i| (i % 251) as u8)
        .collect();
    fs::write(root.join("sub/big.bin"), &big_old).unwrap();
    fs::write(root.join("same.txt"), b"never changes\n").unwrap();
    let live = Live::start(&root).await;
    let listed = live.client.with_index(|ix| {
        ix.get(ix.lookup(b"sub/big.bin").unwrap())
            .unwrap()
            .generation
    });

    // Changed on disk after the visitor listed them: the get's first reads ask
    // for versions the sharer no longer has (its watch tells the visitor 50 ms on).
    let small_new = b"the second version, longer than the first\n".to_vec();
    let big_new: Vec<u8> = (0..(3 * PIECE + 3) as u32)
        .map(|i| (i % 239) as u8 ^ 0x5a)
        .collect();
    fs::write(root.join("small.txt"), &small_new).unwrap();
    fs::write(root.join("sub/big.bin"), &big_new).unwrap();
    let out = tmp.0.join("out");
    let bar = indicatif::ProgressBar::hidden();
    let summary = tokio::time::timeout(
        Duration::from_secs(60),
        get(
            &live.client,
            &GetOptions {
                path: Vec::new(),
                out: out.clone(),
                parallel_files: 4,
            },
            &bar,
        ),
    )
    .await
    .expect("the get ends within 60 s")
    .expect("the get runs");
    assert!(
        summary.failed.is_empty(),
        "a file changed after it was listed failed the get: {:?}",
        summary.failed
    );
    assert_eq!(summary.files, 3);
    let got = files_in(&out);
    let names: Vec<&String> = got.keys().collect();
    assert_eq!(
        names,
        ["same.txt", "small.txt", "sub/big.bin"],
        "only the shared files, no part file left"
    );
    assert!(
        got["small.txt"] == small_new,
        "small.txt holds its new version"
    );
    assert!(
        got["sub/big.bin"] == big_new,
        "sub/big.bin holds its new version whole"
    );
    assert_eq!(got["same.txt"], b"never changes\n");
    let whole = (small_new.len() + big_new.len() + b"never changes\n".len()) as u64;
    assert_eq!(
        (bar.position(), bar.length()),
        (whole, Some(whole)),
        "the progress bar ends full, at the new versions' bytes"
    );
    let now = live.client.with_index(|ix| {
        ix.get(ix.lookup(b"sub/big.bin").unwrap())
            .unwrap()
            .generation
    });
    assert_ne!(now, listed, "the visitor heard of the new version");
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_compares_a_folder_bigger_than_a_listing_chunk_whole() {
    use linkfs_peer::sharer::reconcile::LIST_CHUNK;
    // A folder of 2.5 chunks' names, changed while the sharer was stopped at
    // places spread over its listing (the order the disk lists it in is not
    // the names' order, so every chunk gets some).
    let tmp = TempDir::new("restart-chunks");
    let root = tmp.0.join("share");
    let big = root.join("big");
    fs::create_dir_all(&big).unwrap();
    let n = LIST_CHUNK * 5 / 2;
    for f in 0..n {
        fs::write(big.join(format!("f{f:06}")), format!("{f}")).unwrap();
    }
    fs::create_dir(big.join("sub")).unwrap();
    fs::write(big.join("sub/inner"), b"inner").unwrap();
    let first = Live::start(&root).await;
    first.converge("before the stop").await;
    let kept: Vec<(String, EntryId)> = (0..n)
        .step_by(997)
        .map(|f| format!("big/f{f:06}"))
        .filter(|p| !p.ends_with('3'))
        .map(|p| {
            let id = first.id(&p);
            (p, id)
        })
        .collect();
    let saved = first.ctx.index.read().unwrap().to_saved();
    first.stop().await;

    for f in (0..n).step_by(101) {
        fs::remove_file(big.join(format!("f{f:06}"))).unwrap();
    }
    for f in (50..n).step_by(103) {
        fs::write(big.join(format!("f{f:06}")), format!("changed {f}")).unwrap();
    }
    for f in 0..300 {
        fs::write(big.join(format!("new{f:04}")), b"new").unwrap();
    }
    fs::remove_file(big.join("f000013")).unwrap();
    fs::create_dir(big.join("f000013")).unwrap();
    fs::write(big.join("f000013/now a folder"), b"x").unwrap();
    fs::write(big.join("sub/inner"), b"inner, changed").unwrap();

    let index = ShareIndex::from_saved(&saved).expect("the saved index reads back");
    let second = Live::start_from(&root, IndexStart::Saved(Box::new(index))).await;
    second.converge("after the restart").await;
    for (path, id) in &kept {
        if fs::metadata(root.join(path)).is_ok() {
            assert_eq!(
                second.id(path),
                *id,
                "{path} kept its id across the restart"
            );
        }
    }
    assert_eq!(
        second.read("big/sub/inner").await.unwrap(),
        b"inner, changed"
    );
    assert_eq!(second.read("big/f000050").await.unwrap(), b"changed 50");
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_from_the_saved_index_keeps_ids_and_logs_only_what_changed() {
    let tmp = TempDir::new("restart");
    let root = tmp.0.join("share");
    for d in 0..5 {
        fs::create_dir_all(root.join(format!("d{d}"))).unwrap();
        for f in 0..40 {
            fs::write(root.join(format!("d{d}/f{f}")), format!("{d}/{f}")).unwrap();
        }
    }
    let first = Live::start(&root).await;
    first.converge("before the stop").await;
    let kept = ["d0/f0", "d1/f5", "d4", "d4/f39"].map(|p| (p, first.id(p)));
    let (saved, end, epoch) = {
        let ix = first.ctx.index.read().unwrap();
        (ix.to_saved(), ix.log_end(), ix.epoch())
    };
    first.stop().await;

    // While the sharer is stopped.
    fs::write(root.join("new.txt"), b"new").unwrap();
    fs::write(root.join("d2/f3"), b"changed contents").unwrap();
    fs::remove_file(root.join("d3/f7")).unwrap();
    fs::create_dir(root.join("d5")).unwrap();
    fs::write(root.join("d5/inner"), b"x").unwrap();

    let index = ShareIndex::from_saved(&saved).expect("the saved index reads back");
    let second = Live::start_from(&root, IndexStart::Saved(Box::new(index))).await;
    second.converge("after the restart").await;
    for (path, id) in kept {
        assert_eq!(second.id(path), id, "{path} kept its id across the restart");
    }
    assert_eq!(second.read("d2/f3").await.unwrap(), b"changed contents");
    let (kept_epoch, since) = {
        let ix = second.ctx.index.read().unwrap();
        (ix.epoch(), ix.ops_from(end).count())
    };
    assert_eq!(
        kept_epoch, epoch,
        "the epoch is kept, so receivers can resume"
    );
    // new.txt, d2/f3, d3/f7 (removed), d5, d5/inner, and the folders whose mtime changed.
    assert!(
        (5..=9).contains(&since),
        "only what changed is logged after the saved end, got {since} operations"
    );
    // The folders are watched again: changes after the restart are followed.
    fs::write(root.join("d1/after-restart"), b"seen").unwrap();
    fs::write(root.join("d5/inner"), b"changed again").unwrap();
    second.converge("a change after the restart").await;
    assert_eq!(second.read("d5/inner").await.unwrap(), b"changed again");
    second.stop().await;
}

/// Exchanges two paths in one step (`renameat2` with `RENAME_EXCHANGE`).
fn exchange(a: &Path, b: &Path) {
    nix::fcntl::renameat2(
        nix::fcntl::AT_FDCWD,
        a,
        nix::fcntl::AT_FDCWD,
        b,
        nix::fcntl::RenameFlags::RENAME_EXCHANGE,
    )
    .unwrap();
}

/// What broke: a folder renamed, rotated, swapped or made again, with a change
/// inside it straight after (before the watcher's events settled), kept the
/// old contents for good: notify drops the watches of what moves away, and the
/// folder at the path was taken for the same one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_straight_after_a_folder_is_renamed_or_replaced_is_not_lost() {
    let tmp = TempDir::new("rotate");
    let root = tmp.0.join("share");
    for d in ["photos/sub", "site", "site.new", "a", "b", "d/e", "x", "y"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    fs::write(root.join("photos/a.jpg"), b"1").unwrap();
    fs::write(root.join("site/index.html"), b"v1").unwrap();
    fs::write(root.join("site/old-only.css"), b"v1").unwrap();
    fs::write(root.join("site.new/index.html"), b"v2-longer").unwrap();
    fs::write(root.join("a/in-a"), b"a").unwrap();
    fs::write(root.join("b/in-b"), b"b").unwrap();
    fs::write(root.join("d/e/old"), b"old").unwrap();
    fs::write(root.join("x/in-x"), b"x").unwrap();
    fs::write(root.join("y/in-y"), b"y").unwrap();
    let live = Live::start(&root).await;
    live.converge("the first walk").await;

    fs::rename(root.join("photos"), root.join("photos-2026")).unwrap();
    fs::write(root.join("photos-2026/b.jpg"), b"2").unwrap();
    fs::write(root.join("photos-2026/sub/c.jpg"), b"3").unwrap();
    live.converge("a folder renamed, then written in").await;
    fs::write(root.join("photos-2026/sub/later.jpg"), b"4").unwrap();
    live.converge("the renamed folder written in later").await;

    fs::rename(root.join("site"), root.join("site.old")).unwrap();
    fs::rename(root.join("site.new"), root.join("site")).unwrap();
    live.converge("a folder rotated").await;
    assert_eq!(live.read("site/index.html").await.unwrap(), b"v2-longer");
    fs::write(root.join("site/new.css"), b"n").unwrap();
    fs::write(root.join("site.old/kept.css"), b"k").unwrap();
    live.converge("both rotated folders written in later").await;

    fs::rename(root.join("a"), root.join("swap-tmp")).unwrap();
    fs::rename(root.join("b"), root.join("a")).unwrap();
    fs::rename(root.join("swap-tmp"), root.join("b")).unwrap();
    live.converge("two folders swapped through a third name")
        .await;
    fs::write(root.join("a/after"), b"1").unwrap();
    live.converge("a swapped folder written in later").await;

    exchange(&root.join("x"), &root.join("y"));
    live.converge("two folders exchanged in one step").await;
    assert_eq!(live.read("x/in-y").await.unwrap(), b"y");
    fs::write(root.join("y/after"), b"1").unwrap();
    live.converge("an exchanged folder written in later").await;

    fs::remove_dir_all(root.join("d")).unwrap();
    fs::create_dir_all(root.join("d/e")).unwrap();
    fs::write(root.join("d/y"), b"new").unwrap();
    fs::write(root.join("d/e/z"), b"new").unwrap();
    live.converge("a folder removed and made again").await;
    fs::write(root.join("d/later"), b"1").unwrap();
    fs::write(root.join("d/e/later"), b"1").unwrap();
    live.converge("the folder made again written in later")
        .await;

    live.stop().await;
}

/// What broke: a file with two names (a hard link), written through one of
/// them, stayed stale under the other for good (the watcher names only the
/// path written), and every read of it was refused as changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hard_link_written_through_its_other_name_reads_its_new_bytes() {
    let tmp = TempDir::new("hardlink");
    let root = tmp.0.join("share");
    fs::create_dir_all(root.join("elsewhere")).unwrap();
    fs::write(root.join("h1"), b"first").unwrap();
    fs::hard_link(root.join("h1"), root.join("elsewhere/h2")).unwrap();
    let live = Live::start(&root).await;
    live.converge("the first walk").await;

    fs::write(root.join("h1"), b"second, longer").unwrap();
    let started = Instant::now();
    loop {
        match live.read("elsewhere/h2").await {
            Ok(bytes) if bytes == b"second, longer" => break,
            other => {
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "the other name still reads {other:?} after 10 s"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    live.converge("both names of the file").await;
    live.stop().await;
}

/// A small deterministic generator for the change sequences below.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// What is in the folder now: files and folders below `root`, relative.
fn current(root: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut files, mut dirs) = (Vec::new(), Vec::new());
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(listing) = fs::read_dir(root.join(&rel)) else {
            continue;
        };
        for item in listing.flatten() {
            let child = rel.join(item.file_name());
            match item.file_type() {
                Ok(t) if t.is_dir() => {
                    stack.push(child.clone());
                    dirs.push(child);
                }
                Ok(_) => files.push(child),
                Err(_) => {}
            }
        }
    }
    files.sort();
    dirs.sort();
    (files, dirs)
}

/// Bursts of changes of every kind, made as fast as the disk takes them (no
/// pause for the watcher): renames of folders with writes inside straight
/// after, swaps, folders removed and made again, files replaced by folders,
/// hard links written through. After each burst the receiver equals the disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_of_random_changes_without_pauses_end_equal_to_the_disk() {
    let tmp = TempDir::new("bursts");
    let root = tmp.0.join("share");
    for d in ["a/b/c", "d/e", "f"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    for (n, d) in ["a", "a/b", "a/b/c", "d", "d/e", "f", ""]
        .iter()
        .enumerate()
    {
        for k in 0..3 {
            fs::write(root.join(d).join(format!("file{n}-{k}")), format!("{n}{k}")).unwrap();
        }
    }
    let live = Live::start(&root).await;
    live.converge("the first walk").await;
    // Another sequence: LINKFS_BURST_SEED=N (a failure names its seed).
    let seed = std::env::var("LINKFS_BURST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let mut dice = Dice(seed);
    let mut made = 0u64;
    for burst in 0..12 {
        let mut done = Vec::new();
        for _ in 0..40 {
            let (files, dirs) = current(&root);
            let any_dir = |dice: &mut Dice| -> PathBuf {
                if dirs.is_empty() || dice.below(5) == 0 {
                    PathBuf::new()
                } else {
                    dirs[dice.below(dirs.len())].clone()
                }
            };
            made += 1;
            let fresh = format!("n{made}");
            let op = dice.below(11);
            let result = match op {
                0 | 1 => {
                    let at = any_dir(&mut dice).join(&fresh);
                    fs::write(root.join(&at), format!("new {made}"))
                }
                2 if !files.is_empty() => {
                    let f = &files[dice.below(files.len())];
                    fs::OpenOptions::new()
                        .append(true)
                        .open(root.join(f))
                        .and_then(|mut h| h.write_all(b" more"))
                }
                3 => fs::create_dir(root.join(any_dir(&mut dice).join(&fresh))),
                4 if !dirs.is_empty() => {
                    // A folder renamed, and written in straight after.
                    let from = dirs[dice.below(dirs.len())].clone();
                    let to = from.with_file_name(&fresh);
                    fs::rename(root.join(&from), root.join(&to))
                        .and_then(|()| fs::write(root.join(&to).join("after"), b"after"))
                }
                5 if dirs.len() >= 2 => {
                    let x = &dirs[dice.below(dirs.len())];
                    let y = &dirs[dice.below(dirs.len())];
                    if x.starts_with(y) || y.starts_with(x) {
                        Ok(())
                    } else {
                        let r = nix::fcntl::renameat2(
                            nix::fcntl::AT_FDCWD,
                            &root.join(x),
                            nix::fcntl::AT_FDCWD,
                            &root.join(y),
                            nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                        );
                        r.map_err(std::io::Error::from)
                    }
                }
                6 if !dirs.is_empty() => {
                    // Removed and made again at once, with something inside.
                    let d = dirs[dice.below(dirs.len())].clone();
                    fs::remove_dir_all(root.join(&d))
                        .and_then(|()| fs::create_dir_all(root.join(&d).join("again")))
                        .and_then(|()| fs::write(root.join(&d).join("again/y"), b"y"))
                }
                7 if !files.is_empty() => {
                    // A file replaced by a folder of the same name.
                    let f = files[dice.below(files.len())].clone();
                    fs::remove_file(root.join(&f))
                        .and_then(|()| fs::create_dir(root.join(&f)))
                        .and_then(|()| fs::write(root.join(&f).join("inside"), b"i"))
                }
                8 if !files.is_empty() => {
                    // Another name for a file, then written through the first.
                    let f = files[dice.below(files.len())].clone();
                    let link = any_dir(&mut dice).join(&fresh);
                    fs::hard_link(root.join(&f), root.join(&link)).and_then(|()| {
                        fs::OpenOptions::new()
                            .append(true)
                            .open(root.join(&f))
                            .and_then(|mut h| h.write_all(b" linked"))
                    })
                }
                9 if !files.is_empty() => {
                    fs::remove_file(root.join(&files[dice.below(files.len())]))
                }
                10 if !files.is_empty() => {
                    // Moved into another folder.
                    let f = files[dice.below(files.len())].clone();
                    fs::rename(root.join(&f), root.join(any_dir(&mut dice).join(&fresh)))
                }
                _ => Ok(()),
            };
            done.push(format!(
                "{op}: {}",
                result.map_or_else(|e| e.to_string(), |()| "ok".into())
            ));
        }
        // Hard links written through one name show under the other once read.
        let (files, _) = current(&root);
        for f in &files {
            let path = f.to_string_lossy().into_owned();
            let started = Instant::now();
            while let Some(id) = live.client.with_index(|ix| ix.lookup(path.as_bytes())) {
                let size = live
                    .client
                    .with_index(|ix| ix.get(id).map(|e| e.size))
                    .unwrap_or(0);
                match live.client.read(id, 0, size).await {
                    Ok(_) => break,
                    Err(_) if started.elapsed() < Duration::from_secs(10) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(e) => {
                        panic!("seed {seed}, burst {burst}: {path} cannot be read after 10 s: {e}")
                    }
                }
            }
        }
        live.converge(&format!("seed {seed}, burst {burst} ({done:?})"))
            .await;
    }
    live.stop().await;
}

/// After lost events (here: more paths changing at once than the settler
/// tracks), the rescan matched a folder deleted and made again under its
/// name to its old entry and did not watch it: files made in it later never
/// reached receivers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_made_again_while_events_were_lost_is_watched_after_the_rescan() {
    let tmp = TempDir::new("remade");
    let root = tmp.0.join("share");
    fs::create_dir_all(root.join("d/sub")).unwrap();
    fs::write(root.join("d/sub/old.txt"), b"old").unwrap();
    let settle = SettleConfig {
        debounce_ms: 50,
        tick_ms: 25,
        max_paths: 4,
        ..SettleConfig::default()
    };
    let live = Live::start_settled(&root, IndexStart::Walk(Epoch(12)), settle).await;
    live.converge("the first walk").await;
    fs::remove_dir_all(root.join("d")).unwrap();
    fs::create_dir_all(root.join("d/sub")).unwrap();
    for n in 0..20 {
        fs::write(root.join(format!("burst-{n}")), b"x").unwrap();
    }
    live.converge("the burst, rescanned").await;
    fs::write(root.join("d/new.txt"), b"new").unwrap();
    fs::write(root.join("d/sub/new.txt"), b"new").unwrap();
    live.converge("files made in the folders made again").await;
    live.stop().await;
}

/// A link scoped to a folder of the share checked that folder by its path
/// and then opened the path again, following symlinks: someone who can
/// write in the share and swaps the folder for a symlink (to their home, to
/// /etc) between the two made the view serve the symlink's target. The
/// view now names the folder it must be (reached from the share's held
/// folder through no symlink), and opening anything else is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_folder_swapped_for_a_symlink_after_its_check_is_not_shared() {
    let tmp = TempDir::new("swapped");
    let root = tmp.0.join("share");
    fs::create_dir_all(root.join("team")).unwrap();
    fs::write(tmp.0.join("outside/secret.txt"), b"secret").unwrap();
    let share = linkfs_peer::sharer::ShareRoot::open(&root).unwrap();
    let expected = share.identity_beneath(b"team").unwrap();
    // The swap, after the check.
    fs::rename(root.join("team"), root.join("team-away")).unwrap();
    symlink(tmp.0.join("outside"), root.join("team")).unwrap();
    let (progress_tx, _progress) = watch::channel(WalkProgress::default());
    let (report_tx, _reports) = mpsc::channel(16);
    let started = LiveIndex::start_selected(
        &root.join("team"),
        None,
        Some(expected),
        IndexStart::Walk(Epoch(13)),
        true,
        SettleConfig::default(),
        progress_tx,
        report_tx,
    );
    let err = match started {
        Ok(_) => panic!("a view of the symlink's target was started"),
        // As the user sees it: the error and what caused it.
        Err(e) => {
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                text.push_str(&format!(": {c}"));
                cause = c.source();
            }
            text
        }
    };
    assert!(err.contains("replaced"), "the error says why: {err}");
    // The folder itself, not swapped, starts.
    let (progress_tx, _progress) = watch::channel(WalkProgress::default());
    let (report_tx, _reports) = mpsc::channel(16);
    let live = LiveIndex::start_selected(
        &root.join("team-away"),
        None,
        Some(expected),
        IndexStart::Walk(Epoch(14)),
        true,
        SettleConfig::default(),
        progress_tx,
        report_tx,
    )
    .expect("the folder that was checked starts");
    live.stop().await;
}

/// notify drops the watches of a folder that moves away and of every folder
/// below it. A folder renamed and renamed back within the settle window is at
/// its path again with its inode, so it looked unchanged: only it was
/// watched again, and changes in its sub-folders never reached receivers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_renamed_and_back_at_once_keeps_its_sub_folders_followed() {
    let tmp = TempDir::new("round-trip");
    let root = tmp.0.join("share");
    fs::create_dir_all(root.join("a/sub/deeper")).unwrap();
    fs::write(root.join("a/sub/old.txt"), b"old").unwrap();
    let live = Live::start(&root).await;
    live.converge("the first walk").await;
    fs::rename(root.join("a"), root.join("b")).unwrap();
    fs::rename(root.join("b"), root.join("a")).unwrap();
    live.converge("renamed and back").await;
    fs::write(root.join("a/sub/new.txt"), b"new").unwrap();
    fs::write(root.join("a/sub/deeper/new.txt"), b"new").unwrap();
    fs::remove_file(root.join("a/sub/old.txt")).unwrap();
    live.converge("changes in its sub-folders").await;
    live.stop().await;
}
