//! A share that changes while receivers follow it: adds, changes, moves (also
//! into folders created later), removals of whole folders, a file replaced by a
//! folder. Over perfect and bad simulated links, receivers end with exactly the
//! sharer's index, never refuse an operation, and a resuming receiver gets only
//! what changed.

mod sim;

use linkfs_core::*;
use linkfs_proto::{EntryId, EntryKind, Epoch, Seq};
use sim::*;

fn visitor(persist: bool) -> Visitor {
    Visitor::new(Rebuilt::default(), ReceiverConfig::default(), persist)
}

fn live_ids(ix: &ShareIndex) -> Vec<EntryId> {
    (0..ix.next_id().0)
        .map(EntryId)
        .filter(|id| ix.view(*id).is_some())
        .collect()
}

fn new_entry(parent: EntryId, kind: EntryKind, name: &[u8], size: u64, mtime: i64) -> NewEntry<'_> {
    NewEntry {
        id: EntryId(0),
        parent,
        kind,
        name,
        size,
        mtime,
        mtime_nsec: 0,
        mode: if kind == EntryKind::Dir { 0o755 } else { 0o644 },
        target: b"",
        dev: 1,
        ino: 0,
        ctime_ns: 0,
    }
}

/// One random change to the share (and its files), as a watcher would make it.
fn random_change(sharer: &mut Sharer, rng: &mut Rng, n: u64) {
    let ix = &mut sharer.index;
    let ids = live_ids(ix);
    let dirs: Vec<EntryId> = ids
        .iter()
        .copied()
        .filter(|id| ix.view(*id).is_some_and(|v| v.kind == EntryKind::Dir))
        .collect();
    let pick = |rng: &mut Rng, v: &[EntryId]| v[rng.below(v.len() as u64) as usize];
    let name = format!("new-{n}");
    match rng.below(7) {
        0 | 1 => {
            let parent = pick(rng, &dirs);
            let size = rng.below(5000);
            let id = ix
                .add(&new_entry(
                    parent,
                    EntryKind::File,
                    name.as_bytes(),
                    size,
                    1_800_000_000,
                ))
                .expect("a new file");
            sharer.files.insert(id, vec![n as u8; size as usize]);
        }
        2 => {
            let parent = pick(rng, &dirs);
            ix.add(&new_entry(
                parent,
                EntryKind::Dir,
                name.as_bytes(),
                0,
                1_800_000_000,
            ))
            .expect("a new folder");
        }
        3 => {
            // Change a file's contents.
            let files: Vec<EntryId> = ids
                .iter()
                .copied()
                .filter(|id| ix.view(*id).is_some_and(|v| v.kind == EntryKind::File))
                .collect();
            if files.is_empty() {
                return;
            }
            let id = pick(rng, &files);
            let v = ix.view(id).expect("live").to_entry();
            let size = rng.below(5000);
            ix.update(id, &new_entry(v.parent, v.kind, &v.name, size, v.mtime + 1))
                .expect("a change");
            sharer.files.insert(id, vec![(n >> 3) as u8; size as usize]);
        }
        4 => {
            // Move anything (not the root) to another folder, maybe renamed.
            let movable: Vec<EntryId> = ids.iter().copied().filter(|id| id.0 != 0).collect();
            if movable.is_empty() {
                return;
            }
            let id = pick(rng, &movable);
            let to = pick(rng, &dirs);
            let v = ix.view(id).expect("live").to_entry();
            let renamed = format!("moved-{n}");
            // A move into itself is refused by the index: then nothing changes.
            let _ = ix.update(
                id,
                &new_entry(to, v.kind, renamed.as_bytes(), v.size, v.mtime),
            );
        }
        5 => {
            let removable: Vec<EntryId> = ids.iter().copied().filter(|id| id.0 != 0).collect();
            if removable.is_empty() {
                return;
            }
            ix.remove(pick(rng, &removable)).expect("a removal");
        }
        _ => {
            // A file replaced by a folder of the same name.
            let files: Vec<EntryId> = ids
                .iter()
                .copied()
                .filter(|id| ix.view(*id).is_some_and(|v| v.kind == EntryKind::File))
                .collect();
            if files.is_empty() {
                return;
            }
            let id = pick(rng, &files);
            let v = ix.view(id).expect("live").to_entry();
            ix.update(
                id,
                &new_entry(v.parent, EntryKind::Dir, &v.name, 0, v.mtime),
            )
            .expect("file to folder");
        }
    }
}

#[test]
fn changes_while_the_index_streams_arrive_whole_over_a_bad_link() {
    for seed in [1u64, 2, 3] {
        let (ix, files) = build_tree(20, 30, 200, |i| u64::from(i % 97));
        let mut sharer = Sharer::new(
            ix,
            files,
            SenderConfig {
                retransmit_ms: 300,
                batch_cap: 8 * 1024,
                ..SenderConfig::default()
            },
        );
        let mut v = visitor(seed % 2 == 0);
        let mut net = Net::new(seed, LinkModel::BAD);
        let mut rng = Rng::new(seed * 77);
        for n in 0..400 {
            random_change(&mut sharer, &mut rng, n);
            progress(&mut net, &mut sharer, &mut v, 5);
        }
        progress(&mut net, &mut sharer, &mut v, 600_000);
        assert!(v.receiver.progress().complete, "seed {seed}");
        assert_same_index(&sharer.index, v.receiver.index());
        assert!(
            v.refused_ops.is_empty(),
            "seed {seed}: the receiver refused {:?}",
            &v.refused_ops[..v.refused_ops.len().min(3)]
        );
    }
}

#[test]
fn a_fresh_receiver_after_many_moves_gets_a_consistent_tree() {
    let (ix, files) = build_tree(10, 20, 0, |_| 3);
    let mut sharer = Sharer::new(ix, files, SenderConfig::default());
    let mut rng = Rng::new(9);
    // Moves into folders created later, renames, removals: all before anyone connects.
    for n in 0..600 {
        random_change(&mut sharer, &mut rng, n);
    }
    // Deliberately: a folder made last, then an early file moved into it.
    let late = sharer
        .index
        .add(&new_entry(
            EntryId::ROOT,
            EntryKind::Dir,
            b"made-last",
            0,
            1,
        ))
        .unwrap();
    let early_file = live_ids(&sharer.index)
        .into_iter()
        .find(|id| {
            sharer
                .index
                .view(*id)
                .is_some_and(|v| v.kind == EntryKind::File)
        })
        .expect("a file");
    let v0 = sharer.index.view(early_file).unwrap().to_entry();
    sharer
        .index
        .update(
            early_file,
            &new_entry(late, v0.kind, &v0.name, v0.size, v0.mtime),
        )
        .unwrap();
    let mut v = visitor(true);
    let mut net = Net::new(4, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 60_000);
    assert!(v.receiver.progress().complete);
    assert_same_index(&sharer.index, v.receiver.index());
    assert!(
        v.refused_ops.is_empty(),
        "{:?}",
        &v.refused_ops[..v.refused_ops.len().min(3)]
    );
    // Every live entry was sent once, plus parents sent ahead of their children.
    let sent = sharer.session.stats().ops_sent;
    assert!(
        sent >= sharer.index.entries(),
        "{sent} ops for {} entries",
        sharer.index.entries()
    );
    assert!(
        sent < sharer.index.entries() * 2,
        "{sent} ops for {} entries",
        sharer.index.entries()
    );
}

#[test]
fn a_resuming_receiver_gets_only_what_changed() {
    // Sizes that do not compress away, so bytes compare with or without zstd.
    let (ix, files) = build_tree(30, 100, 0, |i| {
        u64::from(i).wrapping_mul(2_654_435_761) % 4093
    });
    let mut sharer = Sharer::new(ix, files, SenderConfig::default());
    let mut v = visitor(true);
    let mut net = Net::new(5, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 60_000);
    assert!(v.receiver.progress().complete);
    let first_bytes = sharer.session.stats().batch_bytes_sent;

    // The page is closed; the share changes a little; the page comes back.
    let mut rng = Rng::new(21);
    for n in 0..20 {
        random_change(&mut sharer, &mut rng, n);
    }
    let rebuilt = v.rebuilt();
    assert!(rebuilt.resume.is_some());
    sharer.session = SenderSession::new(SenderConfig::default());
    let mut v2 = Visitor::new(rebuilt, ReceiverConfig::default(), true);
    let mut net2 = Net::new(6, LinkModel::PERFECT);
    progress(&mut net2, &mut sharer, &mut v2, 60_000);
    assert_eq!(v2.fresh_starts, 0, "resumed, not started over");
    assert_same_index(&sharer.index, v2.receiver.index());
    assert!(v2.refused_ops.is_empty(), "{:?}", v2.refused_ops);
    let again = sharer.session.stats().batch_bytes_sent;
    assert!(
        again * 10 < first_bytes,
        "{again} bytes to resume against {first_bytes} for the first visit"
    );
    let ops = sharer.session.stats().ops_sent;
    assert!(ops <= 40, "{ops} operations for 20 changes");
}

#[test]
fn an_unchanged_share_resumes_with_a_handful_of_bytes() {
    let (ix, files) = build_tree(30, 100, 0, |_| 3);
    let mut sharer = Sharer::new(ix, files, SenderConfig::default());
    let mut v = visitor(true);
    progress(
        &mut Net::new(7, LinkModel::PERFECT),
        &mut sharer,
        &mut v,
        60_000,
    );
    let first = sharer.session.stats().batch_bytes_sent;
    let rebuilt = v.rebuilt();
    sharer.session = SenderSession::new(SenderConfig::default());
    let mut v2 = Visitor::new(rebuilt, ReceiverConfig::default(), true);
    progress(
        &mut Net::new(8, LinkModel::PERFECT),
        &mut sharer,
        &mut v2,
        60_000,
    );
    assert!(v2.receiver.progress().complete);
    let again = sharer.session.stats().batch_bytes_sent;
    assert!(
        again < 64,
        "{again} batch bytes to resume an unchanged share (first visit {first})"
    );
    assert_eq!(v2.fresh_starts, 0);
    let _ = Seq(0);
    let _ = Epoch(0);
}

#[test]
fn a_reopened_page_restores_its_snapshot_and_gets_only_what_changed() {
    // Small batches, so the log is long enough for the receiver to ask for a
    // snapshot once the index is complete and quiet.
    let small = || SenderConfig {
        batch_cap: 512,
        ..SenderConfig::default()
    };
    let (ix, files) = build_tree(100, 300, 0, |i| u64::from(i) % 977);
    let mut sharer = Sharer::new(ix, files, small());
    let mut v = visitor(true);
    let mut net = Net::new(11, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 60_000);
    assert!(v.receiver.progress().complete);
    assert_eq!(v.snapshots_taken, 1, "one snapshot of the complete index");
    assert!(v.stored.is_empty(), "it replaced the stored batches");

    // Changes while the page is open are stored as batches after it.
    let mut rng = Rng::new(31);
    for n in 0..10 {
        random_change(&mut sharer, &mut rng, n);
    }
    progress(&mut net, &mut sharer, &mut v, 60_000);
    assert!(!v.stored.is_empty());

    // Closed, changed again, reopened: snapshot + batches, then only the news.
    for n in 10..20 {
        random_change(&mut sharer, &mut rng, n);
    }
    let rebuilt = v.rebuilt();
    assert!(rebuilt.resume.is_some(), "the store restores");
    assert!(rebuilt.snapshot.is_some());
    sharer.session = SenderSession::new(small());
    let mut v2 = Visitor::new(rebuilt, ReceiverConfig::default(), true);
    progress(
        &mut Net::new(12, LinkModel::PERFECT),
        &mut sharer,
        &mut v2,
        60_000,
    );
    assert_eq!(v2.fresh_starts, 0, "resumed, not started over");
    assert_same_index(&sharer.index, v2.receiver.index());
    let ops = sharer.session.stats().ops_sent;
    assert!(ops <= 20, "{ops} operations for 10 changes");
}
