use super::*;

pub(crate) fn entry<'a>(
    id: u32,
    parent: u32,
    kind: EntryKind,
    name: &'a [u8],
    size: u64,
) -> NewEntry<'a> {
    NewEntry {
        id: EntryId(id),
        parent: EntryId(parent),
        kind,
        name,
        size,
        mtime: 1_700_000_000 + i64::from(id),
        mtime_nsec: 0,
        mode: if kind == EntryKind::Dir { 0o755 } else { 0o644 },
        target: b"",
        dev: 1,
        ino: u64::from(id) + 100,
        ctime_ns: ctime_ns(1_700_000_000 + i64::from(id), 0),
    }
}

/// root(0) / a(1) / b.txt(2), and c.txt(3) at the root.
fn small() -> ShareIndex {
    let mut ix = ShareIndex::new(Epoch(1));
    ix.push(&entry(0, 0, EntryKind::Dir, b"root", 0)).unwrap();
    ix.push(&entry(1, 0, EntryKind::Dir, b"a", 0)).unwrap();
    ix.push(&entry(2, 1, EntryKind::File, b"b.txt", 5)).unwrap();
    ix.push(&entry(3, 0, EntryKind::File, b"c.txt", 7)).unwrap();
    ix.mark_snapshot_complete();
    ix
}

fn ops(ix: &ShareIndex, from: u64) -> Vec<(u64, u32, bool)> {
    ix.ops_from(Seq(from))
        .map(|(s, op)| (s.0, op.id().0, op.is_remove()))
        .collect()
}

#[test]
fn paths_and_read_targets() {
    let ix = small();
    assert_eq!(ix.relative_path(EntryId(2)).unwrap(), b"a/b.txt");
    assert_eq!(ix.relative_path(EntryId(0)).unwrap(), b"");
    let t = ix.read_target(EntryId(2), Generation(0)).unwrap();
    assert_eq!((t.size, t.ino), (5, 102));
    assert_eq!(
        ix.read_target(EntryId(1), Generation(0)).unwrap_err().0,
        ReadErrorCode::NotAFile
    );
    assert_eq!(
        ix.read_target(EntryId(9), Generation(0)).unwrap_err().0,
        ReadErrorCode::NoSuchEntry
    );
    assert_eq!(
        ix.read_target(EntryId(2), Generation(3)).unwrap_err().0,
        ReadErrorCode::Changed
    );
}

#[test]
fn ids_must_be_dense_and_parents_directories() {
    let mut ix = ShareIndex::new(Epoch(1));
    ix.push(&entry(0, 0, EntryKind::Dir, b"root", 0)).unwrap();
    assert!(matches!(
        ix.push(&entry(5, 0, EntryKind::File, b"x", 0)),
        Err(ShareIndexError::IdOutOfOrder { .. })
    ));
    ix.push(&entry(1, 0, EntryKind::File, b"f", 0)).unwrap();
    assert!(matches!(
        ix.push(&entry(2, 1, EntryKind::File, b"under-a-file", 0)),
        Err(ShareIndexError::BadParent { .. })
    ));
}

#[test]
fn a_change_supersedes_the_older_operation_and_bumps_the_generation() {
    let mut ix = small();
    assert_eq!(
        ops(&ix, 0),
        [(0, 0, false), (1, 1, false), (2, 2, false), (3, 3, false)]
    );
    let mut changed = entry(2, 1, EntryKind::File, b"b.txt", 9);
    changed.mtime += 10;
    assert!(ix.update(EntryId(2), &changed).unwrap());
    assert_eq!(ix.generation(EntryId(2)), Generation(1));
    assert_eq!(ix.view(EntryId(2)).unwrap().size, 9);
    // From 0: every live entry once, the changed one at its new position.
    assert_eq!(
        ops(&ix, 0),
        [(0, 0, false), (1, 1, false), (3, 3, false), (4, 2, false)]
    );
    // A receiver that held everything up to 4 gets only the change.
    assert_eq!(ops(&ix, 4), [(4, 2, false)]);
    assert_eq!(ix.log_end(), Seq(5));
    // The same state again changes nothing and logs nothing.
    assert!(!ix.update(EntryId(2), &changed).unwrap());
    assert_eq!(ix.log_end(), Seq(5));
    // A mode change is logged but keeps the generation (the bytes are the same).
    let mut chmod = changed;
    chmod.mode = 0o600;
    assert!(ix.update(EntryId(2), &chmod).unwrap());
    assert_eq!(ix.generation(EntryId(2)), Generation(1));
}

#[test]
fn a_rewrite_of_the_same_size_with_its_mtime_restored_gets_a_new_generation() {
    // `cp -p`, `rsync -t`, `touch -r`: other bytes, same size and mtime; only
    // the ctime (which no user can set) moved.
    let mut ix = small();
    let mut rewritten = entry(2, 1, EntryKind::File, b"b.txt", 5);
    rewritten.ctime_ns += 1;
    assert!(ix.update(EntryId(2), &rewritten).unwrap());
    assert_eq!(ix.generation(EntryId(2)), Generation(1));
    assert_eq!(
        ix.read_target(EntryId(2), Generation(0)).unwrap_err().0,
        ReadErrorCode::Changed,
        "a read of the old version is refused"
    );
    let t = ix.read_target(EntryId(2), Generation(1)).unwrap();
    assert_eq!(
        t.stamp,
        change_stamp(rewritten.mtime_nsec, rewritten.ctime_ns),
        "reads check the new ctime"
    );
    assert!(!t.stamp_differs(rewritten.mtime_nsec, rewritten.ctime_ns));
    assert!(t.stamp_differs(rewritten.mtime_nsec, rewritten.ctime_ns + 1));
    // A folder's ctime alone is nothing a receiver sees: not logged.
    let end = ix.log_end();
    let mut dir = entry(1, 0, EntryKind::Dir, b"a", 0);
    dir.ctime_ns += 5;
    assert!(!ix.update(EntryId(1), &dir).unwrap());
    assert_eq!(ix.log_end(), end);
}

#[test]
fn a_file_closed_after_writing_gets_a_new_generation_whatever_its_attributes_say() {
    // Coarse timestamps: two writes in one tick leave size, mtime and ctime alike.
    let mut ix = small();
    let same = entry(2, 1, EntryKind::File, b"b.txt", 5);
    assert!(!ix.update(EntryId(2), &same).unwrap());
    assert!(ix.update_written(EntryId(2), &same).unwrap());
    assert_eq!(ix.generation(EntryId(2)), Generation(1));
    // A folder named by such an event is not a file: nothing to bump.
    let dir = entry(1, 0, EntryKind::Dir, b"a", 0);
    assert!(!ix.update_written(EntryId(1), &dir).unwrap());
}

#[test]
fn an_unknown_ctime_is_learnt_without_a_new_generation() {
    let mut ix = ShareIndex::new(Epoch(1));
    ix.push(&entry(0, 0, EntryKind::Dir, b"root", 0)).unwrap();
    let unknown = NewEntry {
        ctime_ns: CTIME_UNKNOWN,
        ..entry(1, 0, EntryKind::File, b"f", 3)
    };
    ix.push(&unknown).unwrap();
    let seen = entry(1, 0, EntryKind::File, b"f", 3);
    assert!(
        !ix.update(EntryId(1), &seen).unwrap(),
        "nothing to announce"
    );
    assert_eq!(ix.generation(EntryId(1)), Generation(0));
    assert_eq!(
        ix.read_target(EntryId(1), Generation(0)).unwrap().stamp,
        change_stamp(seen.mtime_nsec, seen.ctime_ns)
    );
    let mut later = seen;
    later.ctime_ns += 1;
    assert!(ix.update(EntryId(1), &later).unwrap());
    assert_eq!(ix.generation(EntryId(1)), Generation(1));
}

#[test]
fn a_move_keeps_the_id_and_changes_the_path() {
    let mut ix = small();
    assert!(
        ix.update(EntryId(3), &entry(3, 1, EntryKind::File, b"moved.txt", 7))
            .unwrap()
    );
    assert_eq!(ix.relative_path(EntryId(3)).unwrap(), b"a/moved.txt");
    assert_eq!(
        ix.generation(EntryId(3)),
        Generation(0),
        "a move alone keeps the bytes"
    );
    assert_eq!(ix.lookup(b"a/moved.txt"), Some(EntryId(3)));
    assert_eq!(ix.lookup(b"c.txt"), None);
    // A folder moved into itself is refused, and so is moving the root.
    let mut d = ShareIndex::new(Epoch(1));
    d.push(&entry(0, 0, EntryKind::Dir, b"root", 0)).unwrap();
    d.push(&entry(1, 0, EntryKind::Dir, b"x", 0)).unwrap();
    d.push(&entry(2, 1, EntryKind::Dir, b"y", 0)).unwrap();
    assert!(matches!(
        d.update(EntryId(1), &entry(1, 2, EntryKind::Dir, b"x", 0)),
        Err(ShareIndexError::Cycle { .. })
    ));
    assert!(matches!(
        d.update(EntryId(0), &entry(0, 0, EntryKind::Dir, b"other", 0)),
        Err(ShareIndexError::Root)
    ));
    assert!(matches!(d.remove(EntryId(0)), Err(ShareIndexError::Root)));
}

#[test]
fn removing_a_folder_logs_one_removal_and_takes_its_subtree() {
    let mut ix = small();
    assert_eq!(ix.remove(EntryId(1)).unwrap(), 2);
    assert_eq!(ix.entries(), 2);
    assert!(
        ix.view(EntryId(2)).is_none(),
        "the file under it is gone too"
    );
    assert_eq!(ops(&ix, 0), [(0, 0, false), (3, 3, false), (4, 1, true)]);
    assert_eq!(ops(&ix, 4), [(4, 1, true)]);
    assert!(matches!(
        ix.remove(EntryId(2)),
        Err(ShareIndexError::NoSuchEntry(_))
    ));
    // The freed name can be taken by a new entry, with a new id.
    let id = ix.add(&entry(0, 0, EntryKind::File, b"a", 1)).unwrap();
    assert_eq!(id, EntryId(4));
    assert_eq!(ix.lookup(b"a"), Some(EntryId(4)));
}

#[test]
fn a_folder_that_becomes_a_file_loses_its_children() {
    let mut ix = small();
    assert!(
        ix.update(EntryId(1), &entry(1, 0, EntryKind::File, b"a", 3))
            .unwrap()
    );
    assert_eq!(ix.entries(), 3);
    assert!(ix.view(EntryId(2)).is_none());
    assert_eq!(ix.view(EntryId(1)).unwrap().kind, EntryKind::File);
    assert!(matches!(
        ix.add(&entry(0, 1, EntryKind::File, b"under", 1)),
        Err(ShareIndexError::BadParent { .. })
    ));
}

#[test]
fn compaction_keeps_what_the_log_says() {
    let mut ix = small();
    // Many changes of one file: superseded positions pile up and are compacted.
    for n in 0..(COMPACT_SLACK as u64 + 10) {
        let mut e = entry(3, 0, EntryKind::File, b"c.txt", n);
        e.mtime += n as i64;
        ix.update(EntryId(3), &e).unwrap();
    }
    assert!(
        ix.log_len() < COMPACT_SLACK + 20,
        "{} positions kept",
        ix.log_len()
    );
    let end = ix.log_end().0;
    assert_eq!(
        ops(&ix, 0),
        [
            (0, 0, false),
            (1, 1, false),
            (2, 2, false),
            (end - 1, 3, false)
        ]
    );
    assert!(ix.can_resume_from(Seq(5)), "no removal was forgotten");
}

#[test]
fn forgotten_removals_move_the_horizon() {
    let mut ix = ShareIndex::new(Epoch(1));
    ix.push(&entry(0, 0, EntryKind::Dir, b"root", 0)).unwrap();
    let n = KEPT_REMOVALS + KEPT_REMOVALS / 4 + 10;
    for k in 0..n {
        let name = format!("f{k}");
        let id = ix
            .add(&entry(0, 0, EntryKind::File, name.as_bytes(), 1))
            .unwrap();
        ix.remove(id).unwrap();
    }
    assert!(ix.horizon() > Seq(0));
    assert!(
        !ix.can_resume_from(Seq(1)),
        "too far behind: a fresh snapshot"
    );
    assert!(ix.can_resume_from(ix.log_end()));
    let removals = ix.ops_from(Seq(0)).filter(|(_, op)| op.is_remove()).count();
    assert!(removals <= KEPT_REMOVALS + KEPT_REMOVALS / 4);
    assert_eq!(ix.entries(), 1);
}

#[test]
fn lookups_follow_renames() {
    let mut ix = small();
    assert_eq!(ix.lookup(b"a/b.txt"), Some(EntryId(2)));
    ix.update(EntryId(1), &entry(1, 0, EntryKind::Dir, b"renamed", 0))
        .unwrap();
    assert_eq!(ix.lookup(b"renamed/b.txt"), Some(EntryId(2)));
    assert_eq!(ix.lookup(b"a/b.txt"), None);
    assert_eq!(ix.lookup(b""), Some(EntryId::ROOT));
    let mut kids: Vec<u32> = ix.children(EntryId::ROOT).collect();
    kids.sort_unstable();
    assert_eq!(kids, [1, 3]);
}

/// Everything a receiver or a reader could observe of an index.
fn observable(ix: &mut ShareIndex) -> Vec<String> {
    let mut out = vec![format!(
        "epoch {} end {} horizon {} entries {} done {}",
        ix.epoch().0,
        ix.log_end().0,
        ix.horizon().0,
        ix.entries(),
        ix.walk_done()
    )];
    for (seq, op) in ix.ops_from(Seq(0)).collect::<Vec<_>>() {
        let path = ix
            .relative_path(op.id())
            .map(|p| String::from_utf8_lossy(&p).into_owned());
        let view = ix.view(op.id()).map(|v| {
            format!(
                "{:?} {} {} {:o} g{} {:?} {:?} {:?}",
                v.kind,
                v.size,
                v.mtime,
                v.mode,
                v.generation.0,
                v.target,
                ix.disk_identity(op.id()),
                ix.read_target(op.id(), v.generation).map(|t| t.stamp)
            )
        });
        out.push(format!(
            "{} {} {} {path:?} {view:?}",
            seq.0,
            op.id().0,
            op.is_remove()
        ));
        if let Some(p) = ix.relative_path(op.id()) {
            assert_eq!(ix.lookup(&p), Some(op.id()), "lookup of {p:?}");
        }
    }
    out
}

fn changed_index() -> ShareIndex {
    let mut ix = small();
    let link = NewEntry {
        target: b"a/b.txt",
        ..entry(0, 0, EntryKind::Symlink, b"link", 7)
    };
    ix.add(&link).unwrap();
    let d = ix.add(&entry(0, 0, EntryKind::Dir, b"new", 0)).unwrap();
    ix.add(&entry(0, d.0, EntryKind::File, b"inner", 3))
        .unwrap();
    // A move under a folder with a higher id, a content change, a removal.
    ix.update(EntryId(3), &entry(3, d.0, EntryKind::File, b"c2.txt", 9))
        .unwrap();
    ix.remove(EntryId(1)).unwrap();
    ix
}

#[test]
fn a_saved_index_reads_back_the_same() {
    let mut ix = changed_index();
    let saved = ix.to_saved();
    let mut back = ShareIndex::from_saved(&saved).unwrap();
    assert_eq!(observable(&mut back), observable(&mut ix));
    assert_eq!(back.next_id(), ix.next_id(), "ids are never reused");
    assert_eq!(back.generation(EntryId(3)), Generation(1));
    // It goes on as the original would.
    for x in [&mut ix, &mut back] {
        x.add(&entry(0, 0, EntryKind::File, b"after", 1)).unwrap();
        x.remove(EntryId(3)).unwrap();
    }
    assert_eq!(observable(&mut back), observable(&mut ix));
    let from = ix.log_end().0 - 2;
    assert_eq!(ops(&back, from), ops(&ix, from));
}

/// Hands out at most `step` bytes a call, and fails after `fail_at` bytes.
struct Trickle<'a> {
    rest: &'a [u8],
    step: usize,
    fail_at: Option<usize>,
    given: usize,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.fail_at.is_some_and(|at| self.given >= at) {
            return Err(std::io::Error::other("the disk went away"));
        }
        let n = buf.len().min(self.step).min(self.rest.len());
        buf[..n].copy_from_slice(&self.rest[..n]);
        self.rest = &self.rest[n..];
        self.given += n;
        Ok(n)
    }
}

#[test]
fn a_saved_index_written_and_read_as_it_goes_is_the_same_and_a_failed_read_says_so() {
    let mut ix = changed_index();
    let saved = ix.to_saved();
    // Written through a writer that takes a few bytes at a time: the same file.
    struct Sip(Vec<u8>);
    impl std::io::Write for Sip {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let n = buf.len().min(3);
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut sip = Sip(Vec::new());
    ix.write_saved(&mut sip).unwrap();
    assert_eq!(sip.0, saved);
    for step in [1, 7, 4096] {
        let src = Trickle {
            rest: &saved,
            step,
            fail_at: None,
            given: 0,
        };
        let mut back = ShareIndex::read_saved(src, saved.len() as u64).unwrap();
        assert_eq!(
            observable(&mut back),
            observable(&mut ix),
            "{step} bytes a read"
        );
    }
    let failing = Trickle {
        rest: &saved,
        step: 5,
        fail_at: Some(saved.len() / 2),
        given: 0,
    };
    let err = ShareIndex::read_saved(failing, saved.len() as u64).unwrap_err();
    assert!(err.to_string().contains("the disk went away"), "{err}");
    // A file shorter than it was said to be is cut short, not a panic.
    let short = Trickle {
        rest: &saved[..saved.len() - 40],
        step: 64,
        fail_at: None,
        given: 0,
    };
    assert!(ShareIndex::read_saved(short, saved.len() as u64).is_err());
}

/// `saved` (format 3) as format `version` (1 or 2) held it: the stamps back to
/// the mtimes' nanoseconds (0 in these tests), and for format 2 a ctime column
/// of `ctime(row)` after the devices and inodes.
fn older_format(saved: &[u8], n: usize, version: u32, ctime: impl Fn(usize) -> i64) -> Vec<u8> {
    let head = 8 + 4 + 8 * 4;
    let stamp_at = head + n * (4 + 1 + 2 + 8 + 8);
    let ctime_at = stamp_at + n * (4 + 2 + 16);
    let mut old = saved[..saved.len() - 32].to_vec();
    old[stamp_at..stamp_at + 4 * n].fill(0);
    if version == 2 {
        let column: Vec<u8> = (0..n).flat_map(|i| ctime(i).to_le_bytes()).collect();
        old.splice(ctime_at..ctime_at, column);
    }
    old[8..12].copy_from_slice(&version.to_le_bytes());
    let hash = blake3::hash(&old);
    old.extend_from_slice(hash.as_bytes());
    old
}

#[test]
fn an_index_saved_with_ctimes_reads_into_the_same_stamps() {
    let mut ix = changed_index();
    let n = ix.next_id().0 as usize;
    let ctime = |i: usize| ctime_ns(1_700_000_000 + i as i64 * 7, 5);
    let old = older_format(&ix.to_saved(), n, 2, ctime);
    let mut back = ShareIndex::from_saved(&old).expect("format 2 is still read");
    assert_eq!(observable(&mut back).len(), observable(&mut ix).len());
    let t = back.read_target(EntryId(3), Generation(1)).unwrap();
    assert_eq!(t.stamp, change_stamp(0, ctime(3)));
    // The file as it was: nothing to announce; its ctime moved: a new version.
    let mut seen = NewEntry {
        ctime_ns: ctime(3),
        ..entry(3, 5, EntryKind::File, b"c2.txt", 9)
    };
    assert!(!back.update(EntryId(3), &seen).unwrap());
    seen.ctime_ns += 1;
    assert!(back.update(EntryId(3), &seen).unwrap());
    assert_eq!(back.generation(EntryId(3)), Generation(2));
}

#[test]
fn an_index_saved_before_ctimes_were_kept_still_reads_with_the_same_ids() {
    let mut ix = changed_index();
    let n = ix.next_id().0 as usize;
    let old = older_format(&ix.to_saved(), n, 1, |_| 0);
    let mut back = ShareIndex::from_saved(&old).expect("format 1 is still read");
    assert_eq!(back.next_id(), ix.next_id());
    assert_eq!(back.log_end(), ix.log_end());
    let t = back.read_target(EntryId(3), Generation(1)).unwrap();
    assert_eq!(
        t.stamp,
        change_stamp(0, CTIME_UNKNOWN),
        "no ctime: the stamp is the nanoseconds"
    );
    // The first look learns the ctime and announces nothing.
    let seen = entry(3, 5, EntryKind::File, b"c2.txt", 9);
    let end = back.log_end();
    assert!(!back.update(EntryId(3), &seen).unwrap());
    assert_eq!(
        (back.log_end(), back.generation(EntryId(3))),
        (end, Generation(1))
    );
    assert_eq!(observable(&mut back).len(), observable(&mut ix).len());
}

#[test]
fn a_damaged_saved_index_is_refused_not_used() {
    let saved = changed_index().to_saved();
    assert_eq!(
        ShareIndex::from_saved(b"hello").unwrap_err(),
        SavedIndexError::NotAnIndex
    );
    for cut in [saved.len() - 1, saved.len() / 2, 20] {
        assert!(
            ShareIndex::from_saved(&saved[..cut]).is_err(),
            "cut at {cut}"
        );
    }
    for at in (8..saved.len()).step_by(7) {
        let mut bad = saved.clone();
        bad[at] ^= 0x40;
        assert!(ShareIndex::from_saved(&bad).is_err(), "flip at {at}");
    }
}

/// Re-hashes a body that was changed on purpose, so the checks behind the
/// checksum are what refuse it.
fn rehash(mut body: Vec<u8>) -> Vec<u8> {
    body.truncate(body.len() - 32);
    let h = blake3::hash(&body);
    body.extend_from_slice(h.as_bytes());
    body
}

#[test]
fn an_inconsistent_saved_index_with_a_good_checksum_is_refused() {
    let ix = changed_index();
    let saved = ix.to_saved();
    let n = ix.next_id().0 as usize;
    let columns = 8 + 4 + 8 * 4;
    // A parent pointing at itself (entry 3's parent column; 3 is live).
    let mut bad = saved.clone();
    bad[columns + 4 * 3..columns + 4 * 4].copy_from_slice(&3u32.to_le_bytes());
    assert!(matches!(
        ShareIndex::from_saved(&rehash(bad)),
        Err(SavedIndexError::Inconsistent(_))
    ));
    // An unknown kind, and a folder's kind with a bit the entries' meta has
    // no room for (cut to its low bits it would read as a folder).
    for kind in [0x33, 0x11] {
        let mut bad = saved.clone();
        bad[columns + 4 * n + 3] = kind;
        assert!(
            matches!(
                ShareIndex::from_saved(&rehash(bad)),
                Err(SavedIndexError::Inconsistent(_))
            ),
            "kind byte {kind:#x}"
        );
    }
    // An entry count larger than the file.
    let mut bad = saved.clone();
    bad[columns - 8..columns].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(ShareIndex::from_saved(&rehash(bad)).is_err());
}

proptest::proptest! {
    #[test]
    fn any_bytes_after_the_magic_never_panic(tail in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
        let mut file = b"lfsindex".to_vec();
        file.extend_from_slice(&1u32.to_le_bytes());
        file.extend_from_slice(&tail);
        let _ = ShareIndex::from_saved(&file);
        let _ = ShareIndex::from_saved(&rehash([file.clone(), vec![0; 32]].concat()));
    }
}

#[test]
fn a_sorted_folder_stays_sorted_as_entries_are_added_one_by_one() {
    let mut ix = ShareIndex::new(Epoch(1));
    ix.push(&entry(0, 0, EntryKind::Dir, b"root", 0)).unwrap();
    // Interleaved as the watcher does it: look up, then add.
    let mut names: Vec<String> = (0..500)
        .map(|k| format!("f{}", (k * 7919) % 1000))
        .collect();
    for name in &names {
        assert_eq!(ix.lookup_child(EntryId::ROOT, name.as_bytes()), None);
        let id = ix
            .add(&entry(0, 0, EntryKind::File, name.as_bytes(), 1))
            .unwrap();
        assert_eq!(ix.lookup_child(EntryId::ROOT, name.as_bytes()), Some(id));
    }
    // Renames inside the sorted folder keep it sorted too.
    let id = ix.lookup(b"f0").unwrap();
    ix.update(id, &entry(0, 0, EntryKind::File, b"zz-renamed", 1))
        .unwrap();
    names.retain(|n| n != "f0");
    names.push("zz-renamed".into());
    for name in &names {
        assert!(
            ix.lookup_child(EntryId::ROOT, name.as_bytes()).is_some(),
            "{name}"
        );
    }
    assert_eq!(ix.lookup(b"f0"), None);
    let listed: Vec<Vec<u8>> = ix
        .children(EntryId::ROOT)
        .map(|c| ix.view(EntryId(c)).unwrap().name.to_vec())
        .collect();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(listed, sorted, "children kept in name order");
}

/// A folder of `n` files named in no order (as a disk lists them).
fn big_folder(n: u32) -> ShareIndex {
    let mut ix = ShareIndex::new(Epoch(1));
    ix.push(&entry(0, 0, EntryKind::Dir, b"root", 0)).unwrap();
    for k in 1..=n {
        let name = format!("f{}", (k * 7919) % (n + 1));
        ix.push(&entry(k, 0, EntryKind::File, name.as_bytes(), 1))
            .unwrap();
    }
    ix
}

fn names_in_order(ix: &ShareIndex, dir: EntryId) -> Vec<Vec<u8>> {
    ix.children(dir)
        .map(|c| ix.view(EntryId(c)).unwrap().name.to_vec())
        .collect()
}

/// Runs a folder sort to its end; the number of steps it took.
fn sort_to_end(ix: &ShareIndex, sort: &mut FolderSort) -> (SortStep, usize) {
    let mut steps = 0;
    loop {
        steps += 1;
        match sort.step(ix) {
            SortStep::Going => {}
            end => return (end, steps),
        }
    }
}

#[test]
fn a_big_folder_sorted_in_steps_is_taken_and_found_by_name() {
    // The first live change in a folder of a million names waited about 600 ms
    // for the folder to sort on its first lookup; the sharer now sorts big folders
    // in short steps after the walk and installs the order.
    let n = 100_003;
    let mut ix = big_folder(n);
    let small = ix
        .push(&entry(n + 1, 0, EntryKind::Dir, b"small", 0))
        .unwrap();
    ix.push(&entry(n + 2, small.0, EntryKind::File, b"x", 1))
        .unwrap();
    assert_eq!(ix.unsorted_folders(1000), vec![EntryId::ROOT]);
    assert_eq!(ix.unsorted_folders(1), vec![EntryId::ROOT, small]);
    let mut sort = ix.start_folder_sort(EntryId::ROOT).unwrap();
    assert_eq!(sort.len(), n as usize + 1);
    let (end, steps) = sort_to_end(&ix, &mut sort);
    assert_eq!(end, SortStep::Done);
    assert!(steps >= 10, "{steps} steps: each step is to be short");
    assert!(ix.install_order(sort));
    assert_eq!(ix.unsorted_folders(1000), Vec::<EntryId>::new());
    assert!(
        ix.start_folder_sort(EntryId::ROOT).is_none(),
        "already sorted"
    );
    let names = names_in_order(&ix, EntryId::ROOT);
    assert_eq!(names.len(), n as usize + 1);
    assert!(
        names.windows(2).all(|w| w[0] < w[1]),
        "children in name order"
    );
    for k in (1..=n).step_by(97) {
        let name = format!("f{}", (k * 7919) % (n + 1));
        assert_eq!(
            ix.lookup_child(EntryId::ROOT, name.as_bytes()),
            Some(EntryId(k)),
            "{name}"
        );
    }
    assert_eq!(ix.lookup(b"small/x"), Some(EntryId(n + 2)));
}

#[test]
fn folders_of_every_size_sort_to_name_order() {
    for n in [1, 2, 3, 16_383, 16_384, 16_385, 32_768, 40_000] {
        let mut ix = big_folder(n);
        let mut sort = ix.start_folder_sort(EntryId::ROOT).unwrap();
        assert_eq!(sort_to_end(&ix, &mut sort).0, SortStep::Done, "{n}");
        assert!(ix.install_order(sort), "{n}");
        let names = names_in_order(&ix, EntryId::ROOT);
        assert_eq!(names.len(), n as usize, "{n}");
        assert!(
            names.windows(2).all(|w| w[0] < w[1]),
            "{n}: children in name order"
        );
    }
}

#[test]
fn a_sort_during_which_a_child_came_or_went_is_not_taken() {
    let mut ix = big_folder(50_000);
    let mut sort = ix.start_folder_sort(EntryId::ROOT).unwrap();
    assert_eq!(sort.step(&ix), SortStep::Going);
    let added = ix
        .add(&entry(0, 0, EntryKind::File, b"a new one", 1))
        .unwrap();
    assert_eq!(
        sort.step(&ix),
        SortStep::Stale,
        "a child came between steps"
    );
    assert!(!ix.install_order(sort));
    // Finished before the change, installed after it.
    let mut sort = ix.start_folder_sort(EntryId::ROOT).unwrap();
    assert_eq!(sort_to_end(&ix, &mut sort).0, SortStep::Done);
    ix.remove(added).unwrap();
    let again = ix
        .add(&entry(0, 0, EntryKind::File, b"another", 1))
        .unwrap();
    assert!(
        !ix.install_order(sort),
        "one went and another came: the same count, other children"
    );
    assert_eq!(ix.lookup_child(EntryId::ROOT, b"another"), Some(again));
    assert_eq!(ix.lookup_child(EntryId::ROOT, b"a new one"), None);
    assert!(ix.lookup(b"f1").is_some());
}

#[test]
fn a_reopened_index_has_its_folders_sorted() {
    let ix = big_folder(2000);
    let back = ShareIndex::from_saved(&ix.to_saved()).unwrap();
    assert_eq!(back.unsorted_folders(0), Vec::<EntryId>::new());
    let names = names_in_order(&back, EntryId::ROOT);
    assert_eq!(names.len(), 2000);
    assert!(
        names.windows(2).all(|w| w[0] < w[1]),
        "children in name order"
    );
}

/// The log held a position and an operation per entry (12 bytes) even for
/// a walk, which logs entries in id order: ten million entries cost 120 MB
/// of the sharer's 1.07 GB there. Runs hold such a log in a few bytes. And
/// sizes and mtimes took 8 bytes each where nearly all fit in 4, and the
/// device 8 where a share spans one or a few.
#[test]
fn a_walked_index_holds_no_log_bytes_and_narrow_columns_per_entry() {
    // A power of two, so every column's capacity is exactly its length.
    const N: u32 = 1 << 17;
    let mut ix = ShareIndex::new(Epoch(1));
    ix.push(&entry(0, 0, EntryKind::Dir, b"root", 0)).unwrap();
    for id in 1..N {
        let name = format!("{id:08}");
        ix.push(&entry(id, 0, EntryKind::File, name.as_bytes(), 1))
            .unwrap();
    }
    // The columns: 38 bytes an entry, and an 8-byte name (89 with the log
    // as pairs, sizes, mtimes and devices in 8 bytes; 77 with the log as
    // runs; 69 with sizes and mtimes in 4; 63 with inodes and each entry's
    // latest log position in 8; 55 with the mtime's nanoseconds and the ctime
    // apart, 12 bytes, and the kind a byte of its own).
    let per_entry = ix.heap_bytes() as f64 / f64::from(N);
    assert!(
        per_entry < 49.0,
        "{per_entry:.1} heap bytes per entry: the log or the size, mtime, inode, position, stamp or kind columns hold more than they need"
    );
    assert_eq!(ix.ops_from(Seq(0)).count(), N as usize);
    assert_eq!(ix.log_len(), N as usize);
}

#[test]
fn many_names_looked_up_at_once_find_what_each_lookup_finds() {
    let n = 5_003;
    let mut ix = big_folder(n);
    let mut names: Vec<Vec<u8>> = (0..n + 40)
        .step_by(3)
        .map(|k| format!("f{k}").into_bytes())
        .collect();
    names.push(b"not there".to_vec());
    names.sort();
    let asked: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
    let found = ix.lookup_children(EntryId::ROOT, &asked);
    assert_eq!(found.len(), asked.len());
    let mut hits = 0;
    for (name, got) in asked.iter().zip(&found) {
        assert_eq!(*got, ix.lookup_child(EntryId::ROOT, name), "{name:?}");
        hits += usize::from(got.is_some());
    }
    assert!(
        hits > 1_600 && hits < asked.len(),
        "{hits} of {} found",
        asked.len()
    );
    assert_eq!(
        ix.lookup_children(EntryId(n + 7), &asked[..2]),
        vec![None, None],
        "no such folder"
    );
}
