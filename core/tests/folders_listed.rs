//! Folders listed: a receiver learns that a folder is whole (every child the
//! walk found is in its index) before the whole index is there, so a mount
//! can answer a listing of it at once. Over perfect and bad simulated links:
//! a folder is never said whole while a child of it is missing, the folders
//! the walk finished are said whole before the index is complete, and a
//! saved index reopened tells a fresh receiver each folder as it comes.

mod sim;

use linkfs_core::*;
use linkfs_proto::{EntryId, EntryKind, Epoch};
use sim::*;

fn entry(id: u32, parent: u32, kind: EntryKind, name: &str) -> (u32, u32, EntryKind, String) {
    (id, parent, kind, name.to_owned())
}

fn push(ix: &mut ShareIndex, (id, parent, kind, name): &(u32, u32, EntryKind, String)) {
    ix.push(&NewEntry {
        id: EntryId(*id),
        parent: EntryId(*parent),
        kind: *kind,
        name: name.as_bytes(),
        size: 0,
        mtime: 1_700_000_000 + i64::from(*id),
        mtime_nsec: 0,
        mode: if *kind == EntryKind::Dir {
            0o755
        } else {
            0o644
        },
        target: b"",
        dev: 1,
        ino: u64::from(*id),
        ctime_ns: 0,
    })
    .expect("a valid entry");
}

/// Every folder the receiver says is whole has the sharer's children, and
/// the number of such folders (to see the check was not empty).
fn check_listed(share: &ShareIndex, visitor: &Visitor) -> usize {
    let got = visitor.receiver.index();
    let mut whole = 0;
    for id in 0..share.next_id().0 {
        let id = EntryId(id);
        if share.view(id).map(|v| v.kind) != Some(EntryKind::Dir)
            || !visitor.receiver.folder_listed(id)
        {
            continue;
        }
        let mut want: Vec<u32> = share.children(id).collect();
        let mut have: Vec<u32> = got.children(id).to_vec();
        want.sort_unstable();
        have.sort_unstable();
        assert_eq!(
            have.len(),
            want.len(),
            "folder {id:?} said whole with {} of its {} children",
            have.len(),
            want.len()
        );
        assert_eq!(have, want);
        whole += 1;
    }
    whole
}

/// Runs in short steps, checking the rule after each; the most folders seen
/// whole before the index was complete.
fn run_checking(
    net: &mut Net,
    sharer: &mut Sharer,
    visitor: &mut Visitor,
    steps: u32,
    step_ms: u64,
) -> usize {
    let mut most = 0;
    for _ in 0..steps {
        // `progress` stops short of an event beyond its limit: time moves on.
        let start = net.now;
        progress(net, sharer, visitor, step_ms);
        net.now = net.now.max(start + step_ms);
        let whole = check_listed(&sharer.index, visitor);
        if visitor.receiver.progress().complete {
            break;
        }
        most = most.max(whole);
    }
    most
}

/// The walk's order: the root, its children, then each folder's children;
/// a folder is marked listed after its last child. `big` files in "a".
fn walk_entries(big: u32) -> Vec<(u32, u32, EntryKind, String)> {
    let mut e = vec![
        entry(0, 0, EntryKind::Dir, "root"),
        entry(1, 0, EntryKind::Dir, "a"),
        entry(2, 0, EntryKind::Dir, "b"),
        entry(3, 0, EntryKind::File, "top.txt"),
        entry(4, 0, EntryKind::Dir, "empty"),
    ];
    for f in 0..big {
        e.push(entry(5 + f, 1, EntryKind::File, &format!("a-{f:05}")));
    }
    e
}

#[test]
fn folders_the_walk_finished_are_whole_at_the_receiver_before_the_index_is() {
    for (seed, model, perfect) in [
        (1, LinkModel::PERFECT, true),
        (2, LinkModel::BAD, false),
        (3, LinkModel::BAD, false),
    ] {
        let mut ix = ShareIndex::new(Epoch(9));
        let entries = walk_entries(3000);
        for e in &entries[..5] {
            push(&mut ix, e);
        }
        ix.mark_listed(EntryId::ROOT);
        ix.mark_listed(EntryId(4));
        for e in &entries[5..] {
            push(&mut ix, e);
        }
        ix.mark_listed(EntryId(1));
        // "b" is being listed: two of its children so far.
        let next = entries.len() as u32;
        push(&mut ix, &entry(next, 2, EntryKind::File, "b-1"));
        push(&mut ix, &entry(next + 1, 2, EntryKind::File, "b-2"));
        let config = SenderConfig {
            window_bytes: 4096,
            ..SenderConfig::default()
        };
        let mut sharer = Sharer::new(ix, Files::new(), config);
        let mut visitor = Visitor::new(Rebuilt::default(), ReceiverConfig::default(), false);
        let mut net = Net::new(seed, model);
        run_checking(&mut net, &mut sharer, &mut visitor, 200, 50);
        let r = &visitor.receiver;
        assert!(!r.progress().complete, "the walk is not over");
        let whole = [0, 1, 4].map(|d| r.folder_listed(EntryId(d)));
        if perfect {
            assert_eq!(whole, [true; 3], "root, a and empty are whole");
        }
        assert!(!r.folder_listed(EntryId(2)), "b is still being listed");
        // "b" ends; then the walk.
        push(
            &mut sharer.index,
            &entry(next + 2, 2, EntryKind::File, "b-3"),
        );
        sharer.index.mark_listed(EntryId(2));
        run_checking(&mut net, &mut sharer, &mut visitor, 100, 50);
        if perfect {
            assert!(visitor.receiver.folder_listed(EntryId(2)), "b is whole");
        }
        sharer.index.mark_snapshot_complete();
        run_checking(&mut net, &mut sharer, &mut visitor, 12_000, 50);
        let r = &visitor.receiver;
        assert!(
            r.progress().complete,
            "seed {seed}: complete; ended: {:?}, {:?}",
            visitor.ended,
            r.progress()
        );
        assert!(r.folder_listed(EntryId(2)) && r.folder_listed(EntryId(1)));
        assert_eq!(r.folders_listed(), 0, "nothing kept once complete");
    }
}

#[test]
fn a_reopened_saved_index_says_each_folder_whole_as_its_children_reach_a_fresh_receiver() {
    let (ix, files) = build_tree(40, 300, 0, |_| 0);
    let reopened = ShareIndex::from_saved(&ix.to_saved()).expect("reopens");
    // A slow link (200 bytes a millisecond), so the index takes many steps
    // however well zstd packs these names.
    let slow = |m: LinkModel| LinkModel {
        bytes_per_ms: 200,
        ..m
    };
    for (seed, model) in [(4, slow(LinkModel::PERFECT)), (5, slow(LinkModel::BAD))] {
        let reopened = ShareIndex::from_saved(&reopened.to_saved()).expect("reopens");
        // Small batches (about 300 of these entries each), so the index comes
        // in many steps whatever the compression makes of its names.
        let config = SenderConfig {
            window_bytes: 4096,
            batch_cap: linkfs_proto::batch::MIN_BATCH_CAP,
            ..SenderConfig::default()
        };
        let mut sharer = Sharer::new(reopened, files.clone(), config);
        let mut visitor = Visitor::new(Rebuilt::default(), ReceiverConfig::default(), false);
        let mut net = Net::new(seed, model);
        let most = run_checking(&mut net, &mut sharer, &mut visitor, 120_000, 5);
        assert!(
            visitor.receiver.progress().complete,
            "seed {seed}: the index arrives"
        );
        assert!(
            most >= 2,
            "seed {seed}: folders were said whole before the index was complete ({most})"
        );
        assert_same_index(&sharer.index, visitor.receiver.index());
    }
}

#[test]
fn a_receiver_drops_what_a_sharer_says_of_entries_that_are_not_folders() {
    // A lying sharer names files and ids it never sent: nothing is kept.
    let mut ix = ShareIndex::new(Epoch(3));
    for e in &walk_entries(10) {
        push(&mut ix, e);
    }
    let mut sharer = Sharer::new(ix, Files::new(), SenderConfig::default());
    let mut visitor = Visitor::new(Rebuilt::default(), ReceiverConfig::default(), false);
    let mut net = Net::new(6, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut visitor, 1000);
    let upto = sharer.index.log_end();
    for frame in linkfs_proto::encode_folders_listed(upto, &[3, 7, 4_000_000_000].map(EntryId)) {
        visitor
            .receiver
            .handle_frame(Millis(net.now), &frame, &frame);
    }
    assert_eq!(visitor.receiver.folders_listed(), 0);
    assert!(!visitor.receiver.folder_listed(EntryId(3)));
}

/// `e` again with another size and mtime: a change found after the walk
/// (it moves the entry's latest operation to the end of the log).
fn change(ix: &mut ShareIndex, (id, parent, kind, name): &(u32, u32, EntryKind, String)) {
    let changed = ix
        .update(
            EntryId(*id),
            &NewEntry {
                id: EntryId(*id),
                parent: EntryId(*parent),
                kind: *kind,
                name: name.as_bytes(),
                size: if *kind == EntryKind::Dir { 0 } else { 7 },
                mtime: 1_800_000_000,
                mtime_nsec: 0,
                mode: if *kind == EntryKind::Dir {
                    0o755
                } else {
                    0o644
                },
                target: b"",
                dev: 1,
                ino: u64::from(*id),
                ctime_ns: 1,
            },
        )
        .expect("a valid change");
    assert!(changed, "{name} changed");
}

/// A later visitor (or one while the walk runs) got a folder said whole
/// before a child of it that changed after the walk listed it: the child's
/// latest state is at the end of the log, past the position the walk gave
/// the folder. A mount listed the folder without it: `find` over a second
/// mount of a 10M share missed a folder of 100,000 names whose mtime had
/// changed, and everything in it.
#[test]
fn a_folder_is_not_said_whole_before_a_child_that_changed_since_the_walk_listed_it() {
    for (seed, model) in [(7, LinkModel::PERFECT), (8, LinkModel::BAD)] {
        for walk_over in [true, false] {
            let mut ix = ShareIndex::new(Epoch(9));
            // Enough for several batches whatever zstd makes of the names: a
            // folder whose late child did not fit in a batch is said whole
            // with the next, and that must not be the last.
            let entries = walk_entries(10_000);
            for e in &entries[..5] {
                push(&mut ix, e);
            }
            ix.mark_listed(EntryId::ROOT);
            ix.mark_listed(EntryId(4));
            for e in &entries[5..] {
                push(&mut ix, e);
            }
            ix.mark_listed(EntryId(1));
            if walk_over {
                ix.mark_snapshot_complete();
            }
            // A folder of the root ("b") and a file early in "a" change, and
            // a file and a folder with a file in it are made in the root
            // (ids past the positions of the first batches: a receiver
            // refuses those ahead of their place).
            change(&mut ix, &entries[2]);
            change(&mut ix, &entries[5]);
            let made = |ix: &mut ShareIndex, parent: u32, kind: EntryKind, name: &str| {
                let id = ix.next_id().0;
                push(ix, &entry(id, parent, kind, name));
                id
            };
            made(&mut ix, 0, EntryKind::File, "made later.txt");
            let folder = made(&mut ix, 0, EntryKind::Dir, "made later");
            made(&mut ix, folder, EntryKind::File, "inside.txt");
            // And a file of "a" moved into that new folder.
            let moved = &entries[6];
            ix.update(
                EntryId(moved.0),
                &NewEntry {
                    id: EntryId(moved.0),
                    parent: EntryId(folder),
                    kind: moved.2,
                    name: moved.3.as_bytes(),
                    size: 0,
                    mtime: 1_700_000_000 + i64::from(moved.0),
                    mtime_nsec: 0,
                    mode: 0o644,
                    target: b"",
                    dev: 1,
                    ino: u64::from(moved.0),
                    ctime_ns: 0,
                },
            )
            .expect("a move");
            let config = SenderConfig {
                window_bytes: 4096,
                batch_cap: linkfs_proto::batch::MIN_BATCH_CAP,
                ..SenderConfig::default()
            };
            let mut sharer = Sharer::new(ix, Files::new(), config);
            let mut visitor = Visitor::new(Rebuilt::default(), ReceiverConfig::default(), false);
            // A slow link, so the index comes in many steps.
            let model = LinkModel {
                bytes_per_ms: 200,
                ..model
            };
            let mut net = Net::new(seed, model);
            let most = run_checking(&mut net, &mut sharer, &mut visitor, 8_000, 5);
            if !walk_over {
                sharer.index.mark_snapshot_complete();
                run_checking(&mut net, &mut sharer, &mut visitor, 20_000, 5);
            }
            assert!(
                visitor.receiver.progress().complete,
                "seed {seed}: the index arrives"
            );
            // The root waits for what was made in it, at the end of the log;
            // "empty" has nothing late.
            assert!(
                most >= 1,
                "seed {seed}, walk over {walk_over}: folders were said whole before the index was complete ({most})"
            );
            // Nothing sent ahead was refused and then skipped.
            assert_same_index(&sharer.index, visitor.receiver.index());
        }
    }
}
