//! The reconciler against a real folder: after each kind of change, told only
//! which paths changed (as the watcher would), the share index equals the disk;
//! moves keep ids; a rescan finds what nobody reported.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use linkfs_core::{NewEntry, ShareIndex};
use linkfs_peer::sharer::ShareRoot;
use linkfs_peer::sharer::reconcile::{NoWatches, reconcile_paths, rescan};
use linkfs_proto::{EntryId, EntryKind, Epoch};

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let base = std::env::temp_dir().join(format!(
            "linkfs-reconcile-{tag}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        fs::create_dir_all(base.join("share")).unwrap();
        fs::create_dir_all(base.join("outside")).unwrap();
        TempDir(base)
    }
    fn share(&self) -> PathBuf {
        self.0.join("share")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

type Seen = BTreeMap<Vec<u8>, (EntryKind, u64, i64, u32, Vec<u8>)>;

/// What the disk holds below `root`, as the index should show it.
fn on_disk(root: &Path) -> Seen {
    let mut out = Seen::new();
    let mut stack = vec![(root.to_path_buf(), Vec::new())];
    while let Some((dir, rel)) = stack.pop() {
        for item in fs::read_dir(&dir).unwrap() {
            let item = item.unwrap();
            let md = fs::symlink_metadata(item.path()).unwrap();
            let name = item.file_name().into_encoded_bytes();
            let mut child = rel.clone();
            if !child.is_empty() {
                child.push(b'/');
            }
            child.extend_from_slice(&name);
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

fn in_index(ix: &ShareIndex) -> Seen {
    let mut out = Seen::new();
    for id in 1..ix.next_id().0 {
        if let Some(v) = ix.view(EntryId(id)) {
            let path = ix.relative_path(EntryId(id)).unwrap();
            out.insert(path, (v.kind, v.size, v.mtime, v.mode, v.target.to_vec()));
        }
    }
    out
}

fn assert_equal(ix: &ShareIndex, root: &Path, what: &str) {
    let disk = on_disk(root);
    let index = in_index(ix);
    if disk != index {
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
            "{what}: the index differs from the disk\n only on disk: {only_disk:?}\n only in index: {only_index:?}\n different: {differ:?}"
        );
    }
    assert_eq!(ix.entries(), disk.len() as u64 + 1, "{what}: entry count");
}

/// An index of just the root, filled by a rescan (what a walk would give).
fn index_of(root: &Path) -> (ShareIndex, ShareRoot) {
    let md = fs::metadata(root).unwrap();
    let mut ix = ShareIndex::new(Epoch(3));
    ix.push(&NewEntry {
        id: EntryId::ROOT,
        parent: EntryId::ROOT,
        kind: EntryKind::Dir,
        name: b"share",
        size: 0,
        mtime: md.mtime(),
        mtime_nsec: md.mtime_nsec() as u32,
        mode: md.mode() & 0o7777,
        target: b"",
        dev: md.dev(),
        ino: md.ino(),
        ctime_ns: linkfs_core::ctime_ns(md.ctime(), md.ctime_nsec()),
    })
    .unwrap();
    let share_root = ShareRoot::open(root).unwrap();
    rescan(&mut ix, &share_root, &NoWatches);
    ix.mark_snapshot_complete();
    (ix, share_root)
}

fn p(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

#[test]
fn every_kind_of_change_reported_by_path_ends_equal_to_the_disk() {
    let tmp = TempDir::new("kinds");
    let root = tmp.share();
    fs::create_dir_all(root.join("docs/deep")).unwrap();
    fs::write(root.join("docs/a.txt"), b"hello").unwrap();
    fs::write(root.join("docs/deep/b.txt"), b"world").unwrap();
    fs::write(root.join("top.txt"), b"top").unwrap();
    symlink("docs/a.txt", root.join("link")).unwrap();
    let (mut ix, share_root) = index_of(&root);
    assert_equal(&ix, &root, "after the first scan");
    let step = |ix: &mut ShareIndex, what: &str, paths: &[&str]| {
        let paths: Vec<Vec<u8>> = paths.iter().map(|s| p(s)).collect();
        let stats = reconcile_paths(ix, &share_root, &NoWatches, &paths, &[]);
        assert_equal(ix, &root, what);
        stats
    };

    for n in 0..1000 {
        fs::write(root.join(format!("docs/new-{n}.txt")), n.to_string()).unwrap();
    }
    let names: Vec<String> = (0..1000).map(|n| format!("docs/new-{n}.txt")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let s = step(&mut ix, "1,000 files created", &refs);
    assert_eq!(s.added, 1000);

    let top = ix.lookup(b"top.txt").unwrap();
    let gen_before = ix.generation(top);
    fs::OpenOptions::new()
        .append(true)
        .open(root.join("top.txt"))
        .unwrap();
    {
        use std::io::Write;
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(root.join("top.txt"))
            .unwrap();
        f.write_all(b" and more").unwrap();
    }
    step(&mut ix, "appended", &["top.txt"]);
    assert!(ix.generation(top) > gen_before, "a new generation");

    fs::OpenOptions::new()
        .write(true)
        .open(root.join("top.txt"))
        .unwrap()
        .set_len(1)
        .unwrap();
    step(&mut ix, "truncated", &["top.txt"]);

    fs::set_permissions(root.join("docs/a.txt"), fs::Permissions::from_mode(0o600)).unwrap();
    step(&mut ix, "chmod", &["docs/a.txt"]);

    fs::remove_file(root.join("docs/new-7.txt")).unwrap();
    step(&mut ix, "deleted", &["docs/new-7.txt"]);

    let id = ix.lookup(b"docs/new-8.txt").unwrap();
    fs::rename(
        root.join("docs/new-8.txt"),
        root.join("docs/deep/renamed.txt"),
    )
    .unwrap();
    let s = step(
        &mut ix,
        "renamed into a subfolder",
        &["docs/new-8.txt", "docs/deep/renamed.txt"],
    );
    assert_eq!((s.moved, s.added, s.removed), (1, 0, 0));
    assert_eq!(
        ix.lookup(b"docs/deep/renamed.txt"),
        Some(id),
        "a move keeps the id"
    );

    fs::remove_file(root.join("link")).unwrap();
    symlink("top.txt", root.join("link")).unwrap();
    step(&mut ix, "symlink retargeted", &["link"]);

    fs::remove_file(root.join("top.txt")).unwrap();
    fs::create_dir(root.join("top.txt")).unwrap();
    fs::write(root.join("top.txt/inside"), b"x").unwrap();
    step(
        &mut ix,
        "a file replaced by a folder of the same name",
        &["top.txt"],
    );

    // A folder moved out of the share, another moved in (with its contents).
    fs::rename(root.join("docs/deep"), tmp.0.join("outside/deep")).unwrap();
    fs::create_dir_all(tmp.0.join("outside/incoming/sub")).unwrap();
    fs::write(tmp.0.join("outside/incoming/sub/f"), b"f").unwrap();
    fs::rename(tmp.0.join("outside/incoming"), root.join("incoming")).unwrap();
    let s = step(&mut ix, "moved out and in", &["docs/deep", "incoming"]);
    assert_eq!(s.removed, 1, "the folder moved out goes in one removal");
    assert_eq!(s.added, 3, "the folder moved in comes with its subtree");
}

#[test]
fn a_folder_of_3000_entries_renamed_is_one_move_and_keeps_every_id() {
    let tmp = TempDir::new("bigmove");
    let root = tmp.share();
    fs::create_dir_all(root.join("big/sub")).unwrap();
    for n in 0..2999 {
        fs::write(root.join(format!("big/sub/{n}")), b"").unwrap();
    }
    let (mut ix, share_root) = index_of(&root);
    let ids: Vec<EntryId> = (0..2999)
        .map(|n| ix.lookup(format!("big/sub/{n}").as_bytes()).unwrap())
        .collect();
    let log_before = ix.log_end();
    // Whole seconds: a folder's mtime is logged only when its seconds change (what
    // the wire carries); comparing nanoseconds too made this test fail whenever the
    // rename landed within the second the root last changed.
    let root_mtime = |r: &std::path::Path| fs::metadata(r).unwrap().mtime();
    let root_before = root_mtime(&root);
    fs::rename(root.join("big"), root.join("renamed")).unwrap();
    // The root's own mtime changes with the rename, unless it stays within the
    // same second (then there is nothing to log for it).
    let root_changed = root_mtime(&root) != root_before;
    // The watcher also reports stale paths under the old name.
    let stats = reconcile_paths(
        &mut ix,
        &share_root,
        &NoWatches,
        &[p("big"), p("renamed"), p("big/sub/5")],
        &[],
    );
    assert_eq!((stats.moved, stats.added, stats.removed), (1, 0, 0));
    // The move, and the new mtime of the folder that holds it (the root).
    assert_eq!(
        ix.log_end().0 - log_before.0,
        1 + u64::from(root_changed),
        "one move in the log, not 3,000 entries"
    );
    for (n, id) in ids.iter().enumerate() {
        assert_eq!(ix.lookup(format!("renamed/sub/{n}").as_bytes()), Some(*id));
    }
    assert_equal(&ix, &root, "after the rename");
}

#[test]
fn a_rescan_finds_what_nobody_reported() {
    let tmp = TempDir::new("rescan");
    let root = tmp.share();
    fs::create_dir_all(root.join("a/b")).unwrap();
    for n in 0..50 {
        fs::write(root.join(format!("a/b/{n}")), vec![n as u8; n]).unwrap();
    }
    let (mut ix, share_root) = index_of(&root);
    fs::remove_dir_all(root.join("a/b")).unwrap();
    fs::create_dir_all(root.join("c/d")).unwrap();
    fs::write(root.join("c/d/e"), b"e").unwrap();
    fs::write(root.join("a/b"), b"now a file").unwrap();
    let stats = rescan(&mut ix, &share_root, &NoWatches);
    assert!(stats.changes() > 0);
    assert_equal(&ix, &root, "after the rescan");
    assert_eq!(
        rescan(&mut ix, &share_root, &NoWatches).changes(),
        0,
        "a second rescan finds nothing"
    );
}

#[test]
fn a_path_that_leads_through_a_symlink_is_not_looked_through() {
    let tmp = TempDir::new("symlink");
    let root = tmp.share();
    fs::create_dir_all(root.join("d")).unwrap();
    fs::write(root.join("d/f"), b"inside").unwrap();
    fs::write(tmp.0.join("outside/secret"), b"outside").unwrap();
    let (mut ix, share_root) = index_of(&root);
    // The folder is swapped for a symlink to the outside.
    fs::remove_dir_all(root.join("d")).unwrap();
    symlink(tmp.0.join("outside"), root.join("d")).unwrap();
    reconcile_paths(
        &mut ix,
        &share_root,
        &NoWatches,
        &[p("d"), p("d/secret"), p("d/f")],
        &[],
    );
    assert_eq!(
        ix.lookup(b"d/secret"),
        None,
        "nothing outside the share is listed"
    );
    assert_equal(&ix, &root, "after the swap");
}

/// Rewrites `path` in place (same length) and puts its mtime back, as `cp -p`,
/// `rsync -t` or `touch -r` do.
fn rewrite_keeping_size_and_mtime(path: &Path, bytes: &[u8]) {
    let before = fs::metadata(path).unwrap();
    assert_eq!(before.len(), bytes.len() as u64);
    // A coarse file-system clock ticks every few ms: let it move.
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::write(path, bytes).unwrap();
    let f = fs::File::options().write(true).open(path).unwrap();
    f.set_modified(before.modified().unwrap()).unwrap();
    let after = fs::metadata(path).unwrap();
    assert_eq!(
        (after.len(), after.mtime(), after.mtime_nsec()),
        (before.len(), before.mtime(), before.mtime_nsec())
    );
}

#[test]
fn a_same_size_rewrite_with_its_mtime_restored_gets_a_new_generation() {
    let tmp = TempDir::new("same-size");
    let root = tmp.share();
    fs::write(root.join("a.txt"), b"old bytes").unwrap();
    fs::write(root.join("b.txt"), b"old bytes").unwrap();
    let (mut ix, share_root) = index_of(&root);
    let a = ix.lookup(b"a.txt").unwrap();
    let b = ix.lookup(b"b.txt").unwrap();
    rewrite_keeping_size_and_mtime(&root.join("a.txt"), b"new bytes");
    let stats = reconcile_paths(&mut ix, &share_root, &NoWatches, &[p("a.txt")], &[]);
    assert_eq!(stats.updated, 1, "the watcher's path is a change");
    assert_eq!(ix.generation(a).0, 1, "receivers drop the old bytes");
    // Found by a rescan too (what a sharer restarted from its saved index does).
    rewrite_keeping_size_and_mtime(&root.join("b.txt"), b"NEW BYTES");
    let stats = rescan(&mut ix, &share_root, &NoWatches);
    assert_eq!(stats.updated, 1);
    assert_eq!(ix.generation(b).0, 1);
    assert_eq!(ix.generation(a).0, 1, "nothing else moved");
}

#[test]
fn a_file_the_watcher_saw_written_gets_a_new_generation_even_with_the_same_attributes() {
    let tmp = TempDir::new("written");
    let root = tmp.share();
    fs::write(root.join("a.txt"), b"bytes").unwrap();
    let (mut ix, share_root) = index_of(&root);
    let a = ix.lookup(b"a.txt").unwrap();
    let stats = reconcile_paths(&mut ix, &share_root, &NoWatches, &[p("a.txt")], &[]);
    assert_eq!(
        (stats.updated, ix.generation(a).0),
        (0, 0),
        "nothing changed"
    );
    let stats = reconcile_paths(
        &mut ix,
        &share_root,
        &NoWatches,
        &[p("a.txt")],
        &[p("a.txt")],
    );
    assert_eq!((stats.updated, ix.generation(a).0), (1, 1));
}
