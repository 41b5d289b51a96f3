use linkfs_proto::{EntryId, EntryKind, EntryView, Generation, OpView};

use super::*;
use crate::SortKey;
use crate::sim::Rng;

fn upsert(ix: &mut Index, e: EntryView<'_>) {
    ix.apply(OpView::Upsert(e)).expect("a valid operation");
}

fn entry<'a>(id: u32, parent: u32, kind: EntryKind, name: &'a [u8]) -> EntryView<'a> {
    EntryView {
        id: EntryId(id),
        parent: EntryId(parent),
        kind,
        name,
        size: u64::from(id) * 3,
        mtime: 1_700_000_000 + i64::from(id),
        mode: if kind == EntryKind::Dir { 0o755 } else { 0o644 },
        generation: Generation(0),
        target: b"",
    }
}

/// A tree of `n` entries with every awkward value the columns keep aside, then
/// changes: renames, moves, removals (so ids have holes and names dead bytes).
fn awkward_index(n: u32, seed: u64) -> Index {
    awkward_index_from(Index::new(), n, seed)
}

/// The same, its names coded from the 200th entry on (the `names` module).
fn awkward_coded_index(n: u32, seed: u64) -> Index {
    let mut ix = Index::new();
    ix.learn_names_at(200);
    let ix = awkward_index_from(ix, n, seed);
    assert!(ix.names_coded() || n < 200);
    ix
}

fn awkward_index_from(mut ix: Index, n: u32, seed: u64) -> Index {
    let mut rng = Rng::new(seed);
    upsert(&mut ix, entry(0, 0, EntryKind::Dir, b""));
    let mut dirs = vec![0u32];
    let long = vec![b'L'; 300];
    for id in 1..n {
        let parent = dirs[rng.below(dirs.len() as u64) as usize];
        let kind = match rng.below(10) {
            0..=1 => EntryKind::Dir,
            2 => EntryKind::Symlink,
            _ => EntryKind::File,
        };
        let name = format!(
            "{}-{id}.{}",
            ["a", "B", "ça", "Z"][id as usize % 4],
            rng.below(100)
        );
        let mut e = entry(id, parent, kind, name.as_bytes());
        let mut long_name = long.clone();
        if id % 97 == 0 {
            long_name.extend_from_slice(id.to_string().as_bytes());
            e.name = &long_name;
        }
        if id % 89 == 0 {
            e.size = 5 << 32;
        }
        if id % 83 == 0 {
            e.mtime = -86_400;
        }
        if id % 79 == 0 {
            e.generation = Generation(id);
        }
        if id % 71 == 0 {
            e.mode = 0o4000 | id; // a mode table of its own for each
        }
        let target = format!("../target/{id}");
        if kind == EntryKind::Symlink {
            e.target = target.as_bytes();
        }
        upsert(&mut ix, e);
        if kind == EntryKind::Dir {
            dirs.push(id);
        }
    }
    // Renames and moves among files, then removals of some folders (with all below).
    for id in (1..n).step_by(13) {
        let Some(e) = ix.get(EntryId(id)) else {
            continue;
        };
        if e.kind == EntryKind::Dir {
            continue;
        }
        let parent = dirs[rng.below(dirs.len() as u64) as usize];
        if !ix.contains(EntryId(parent)) {
            continue;
        }
        let name = format!("renamed-{id}");
        let mut v = entry(id, parent, e.kind, name.as_bytes());
        v.target = b"t";
        upsert(&mut ix, v);
    }
    for &d in dirs.iter().skip(1).step_by(17) {
        let _ = ix.apply(OpView::Remove(EntryId(d)));
    }
    ix
}

/// Every entry and every folder's children (in every order) equal.
fn assert_same(a: &mut Index, b: &mut Index) {
    assert_eq!(a.len(), b.len(), "entry count");
    assert_eq!(a.id_bound(), b.id_bound(), "id bound");
    assert_eq!(a.file_bytes(), b.file_bytes(), "the files' bytes");
    for id in 0..a.id_bound() {
        let (ea, eb) = (a.get(EntryId(id)), b.get(EntryId(id)));
        assert_eq!(ea, eb, "entry {id}");
        if ea.is_some_and(|e| e.kind == EntryKind::Dir) {
            for key in [SortKey::Name, SortKey::Size, SortKey::Mtime, SortKey::Kind] {
                for desc in [false, true] {
                    assert_eq!(
                        a.list(EntryId(id), key, desc, 0, usize::MAX),
                        b.list(EntryId(id), key, desc, 0, usize::MAX),
                        "listing of {id} by {key:?}"
                    );
                }
            }
            for &c in a.children(EntryId(id)) {
                let name = a.name_of(EntryId(c)).expect("a child").to_vec();
                assert_eq!(b.lookup_child(EntryId(id), &name), Some(EntryId(c)));
            }
        }
    }
}

fn restore(parts: &[Vec<u8>]) -> Result<Index, SnapshotError> {
    let mut r = SnapshotRestorer::new(&parts[0])?;
    for p in &parts[1..] {
        r.push(p)?;
    }
    r.finish()
}

#[test]
fn a_restored_snapshot_equals_the_index_it_was_taken_of() {
    for (n, seed) in [(1, 1), (2, 2), (500, 3), (PART_SLOTS as u32 * 3 + 17, 4)] {
        let mut ix = awkward_index(n, seed);
        let parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
        assert_eq!(
            parts.len(),
            1 + (ix.id_bound() as usize).div_ceil(PART_SLOTS)
        );
        let mut back = restore(&parts).expect("restores");
        assert_same(&mut ix, &mut back);
        // The restored index goes on taking changes like the original.
        for x in [&mut ix, &mut back] {
            upsert(x, entry(n + 5, 0, EntryKind::File, b"after restore"));
        }
        assert_same(&mut ix, &mut back);
    }
}

#[test]
fn a_snapshot_compacts_the_names_of_renamed_entries() {
    let mut ix = awkward_index(3000, 9);
    assert!(ix.dead_name_bytes() > 0, "the fixture renames entries");
    let parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
    let back = restore(&parts).expect("restores");
    assert_eq!(back.dead_name_bytes(), 0);
    let live: usize = (0..back.id_bound())
        .filter_map(|id| back.name_of(EntryId(id)).map(|n| n.len()))
        .sum();
    assert_eq!(back.names.pages.iter().map(Vec::len).sum::<usize>(), live);
}

#[test]
fn the_same_index_gives_the_same_bytes() {
    let mut a = awkward_index(2000, 5);
    let mut b = awkward_index(2000, 5);
    let pa: Vec<Vec<u8>> = a.snapshot_parts().collect();
    let pb: Vec<Vec<u8>> = b.snapshot_parts().collect();
    assert_eq!(pa, pb);
}

#[test]
fn a_folder_lists_from_a_partial_restore_once_all_its_children_are_in() {
    // Two folders: "early" with children in the first part only, "late" with
    // one child in the second part.
    let mut ix = Index::new();
    upsert(&mut ix, entry(0, 0, EntryKind::Dir, b""));
    upsert(&mut ix, entry(1, 0, EntryKind::Dir, b"early"));
    upsert(&mut ix, entry(2, 0, EntryKind::Dir, b"late"));
    for id in 3..100 {
        upsert(
            &mut ix,
            entry(id, 1, EntryKind::File, format!("f{id}").as_bytes()),
        );
    }
    let far = PART_SLOTS as u32 + 10;
    upsert(&mut ix, entry(far, 2, EntryKind::File, b"far"));
    let parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
    assert_eq!(parts.len(), 3);
    let mut r = SnapshotRestorer::new(&parts[0]).expect("head");
    r.push(&parts[1]).expect("part 1");
    assert_eq!(r.index().child_count(EntryId(1)), 97, "'early' is listable");
    assert_eq!(
        r.index().child_count(EntryId(2)),
        0,
        "'late' waits for its child"
    );
    assert_eq!(
        r.index().child_count(EntryId(0)),
        2,
        "the root: both folders are in part 1"
    );
    r.push(&parts[2]).expect("part 2");
    assert_eq!(
        r.index().child_count(EntryId(2)),
        1,
        "'late' once its child is in"
    );
    let mut back = r.finish().expect("complete");
    assert_same(&mut ix, &mut back);
}

#[test]
fn a_damaged_or_misordered_snapshot_is_refused_with_what_is_wrong() {
    let mut ix = awkward_index(PART_SLOTS as u32 * 2 + 5, 7);
    let parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
    assert_eq!(parts.len(), 4);

    let mut flipped = parts.clone();
    flipped[2][40] ^= 1;
    assert_eq!(
        restore(&flipped).unwrap_err(),
        SnapshotError::Checksum { part: 2 }
    );

    let mut swapped = parts.clone();
    swapped.swap(1, 2);
    assert!(matches!(
        restore(&swapped).unwrap_err(),
        SnapshotError::OutOfOrder { part: 1, .. }
    ));

    let missing = &parts[..3];
    assert_eq!(
        restore(missing).unwrap_err(),
        SnapshotError::Incomplete { got: 3, want: 4 }
    );

    assert!(matches!(
        SnapshotRestorer::new(&parts[1]).unwrap_err(),
        SnapshotError::OutOfOrder { part: 0, .. }
    ));
    assert_eq!(
        SnapshotRestorer::new(&parts[0][..10]).unwrap_err(),
        SnapshotError::Truncated { part: 0 }
    );
    assert_eq!(
        SnapshotRestorer::new(&[]).unwrap_err(),
        SnapshotError::Truncated { part: 0 }
    );
}

/// Recomputes a stored part's checksum after a deliberate change to its
/// stored (compressed) bytes: what the decompressor must then refuse.
fn reseal(part: &mut [u8]) {
    let body = part.len() - CHECK_LEN;
    let check = blake3::hash(&part[..body]);
    part[body..].copy_from_slice(&check.as_bytes()[..CHECK_LEN]);
}

/// A part's plain form (magic, kind, its fields uncompressed), to change a
/// field in; [`sealed_part`] stores it again, checksum and all.
fn plain(part: &[u8]) -> Vec<u8> {
    unsealed_part(part).expect("a part this index sealed")
}

fn two_folder_index() -> Index {
    let mut ix = Index::new();
    upsert(&mut ix, entry(0, 0, EntryKind::Dir, b""));
    upsert(&mut ix, entry(1, 0, EntryKind::Dir, b"a"));
    upsert(&mut ix, entry(2, 1, EntryKind::Dir, b"b"));
    upsert(&mut ix, entry(3, 2, EntryKind::File, b"c"));
    ix
}

#[test]
fn a_snapshot_whose_folders_loop_or_leave_entries_out_is_refused() {
    // Well-formed parts (checksums right) whose structure lies: the restorer
    // must refuse them, not loop or list garbage.
    let mut ix = two_folder_index();
    let parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    // Directory records are the part's tail: dir id, folders, count, children.
    let rec = |dir: u32, dirs: u32, children: &[u32]| {
        let mut v = Vec::new();
        for x in [dir, dirs, children.len() as u32].iter().chain(children) {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v
    };
    let root_rec = rec(0, 1, &[1]);
    let a_rec = rec(1, 1, &[2]);
    let part1 = plain(&parts[1]);
    let at = find(&part1, &root_rec).expect("the root's record is in part 1");
    assert!(find(&part1, &a_rec).is_some());

    // Entry 1's parent said to be 2 and 2's to be 1 would need children moved
    // as well; the simplest lie: the root lists nothing and 'a' lists itself.
    let mut lie = parts.clone();
    let bad_root = rec(0, 1, &[2]);
    let mut lying = part1.clone();
    lying[at..at + bad_root.len()].copy_from_slice(&bad_root);
    lie[1] = sealed_part(&lying);
    assert!(matches!(
        restore(&lie).unwrap_err(),
        SnapshotError::BadEntry {
            what: "a child listed under another folder than its parent",
            ..
        }
    ));

    // A head that counts one entry fewer than there are.
    let mut more = parts.clone();
    let mut head = plain(&parts[0]);
    head[9] -= 1; // live, low byte (after magic 4, kind 1, end 4)
    more[0] = sealed_part(&head);
    assert!(matches!(
        restore(&more).unwrap_err(),
        SnapshotError::NotATree { .. }
    ));
}

#[test]
fn a_snapshot_of_a_loop_is_refused() {
    // Build the loop by hand: entries 1 and 2 are folders, each the other's
    // parent and child; the root lists only file 3 (whose parent is the root).
    let mut ix = Index::new();
    upsert(&mut ix, entry(0, 0, EntryKind::Dir, b""));
    upsert(&mut ix, entry(1, 0, EntryKind::Dir, b"a"));
    upsert(&mut ix, entry(2, 1, EntryKind::Dir, b"b"));
    upsert(&mut ix, entry(3, 0, EntryKind::File, b"c"));
    // Tamper with the in-memory index (the sharer can never make this: moves
    // into oneself are refused), then take the snapshot of it.
    ix.parent.set(1, 2);
    ix.dirs
        .get_mut(&0)
        .expect("root")
        .children
        .retain(|c| *c != 1);
    ix.dirs.get_mut(&0).expect("root").sorted = 1;
    ix.dirs.get_mut(&0).expect("root").dirs = 0;
    let d2 = ix.dirs.get_mut(&2).expect("b");
    d2.children = vec![1];
    d2.sorted = 1;
    d2.dirs = 1;
    let parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
    assert_eq!(
        restore(&parts).unwrap_err(),
        SnapshotError::NotATree {
            what: "some folders are not under the root"
        }
    );
}

/// The parts with a few random bytes changed in one of them: `how` 0 in the
/// stored bytes (the checksum refuses them), 1 there with the checksum made
/// right (the decompressor must refuse them, or the structure checks), 2 in
/// the plain fields, sealed again (past the checksum and the decompressor:
/// the structure checks must hold).
fn damaged(parts: &[Vec<u8>], rng: &mut Rng, how: u32) -> Vec<Vec<u8>> {
    let mut p = parts.to_vec();
    let which = rng.below(p.len() as u64) as usize;
    let mut bytes = if how == 2 {
        plain(&p[which])
    } else {
        p[which].clone()
    };
    let len = bytes.len();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(len as u64) as usize;
        bytes[at] = rng.below(256) as u8;
    }
    p[which] = match how {
        0 => bytes,
        1 => {
            reseal(&mut bytes);
            bytes
        }
        _ => sealed_part(&bytes),
    };
    p
}

#[test]
fn random_bytes_never_panic_the_restorer() {
    let mut ix = awkward_index(300, 11);
    let parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
    let mut rng = Rng::new(12);
    for round in 0..3000 {
        let _ = restore(&damaged(&parts, &mut rng, round % 3));
    }
}

#[test]
fn a_snapshot_of_coded_names_restores_equal_and_codes_new_names_alike() {
    for (n, seed) in [(500, 21), (PART_SLOTS as u32 + 900, 22)] {
        let mut ix = awkward_coded_index(n, seed);
        let parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
        let mut back = restore(&parts).expect("restores");
        assert!(back.names_coded());
        assert_same(&mut ix, &mut back);
        // New names after the restore are coded with the stored table.
        for x in [&mut ix, &mut back] {
            upsert(
                x,
                entry(n + 5, 0, EntryKind::File, "après la reprise ✓".as_bytes()),
            );
            upsert(x, entry(n + 6, 0, EntryKind::File, &[b'x'; 280]));
        }
        assert_same(&mut ix, &mut back);
        let again: Vec<Vec<u8>> = back.snapshot_parts().collect();
        let ours: Vec<Vec<u8>> = ix.snapshot_parts().collect();
        assert_eq!(
            again, ours,
            "the restored index snapshots to the same bytes"
        );
    }
}

/// The head's symbol table (in its plain form): where it starts, and its symbols.
fn symbols_of(head: &[u8]) -> (usize, Vec<(u8, [u8; 8])>) {
    // Magic, kind 0, end, live, parts, modes count and modes.
    let modes = u32::from_le_bytes(head[17..21].try_into().unwrap()) as usize;
    let at = 21 + 4 * modes;
    let n = head[at] as usize;
    let symbols = (0..n)
        .map(|k| {
            let s = at + 1 + 9 * k;
            (head[s], head[s + 1..s + 9].try_into().unwrap())
        })
        .collect();
    (at, symbols)
}

#[test]
fn a_stored_symbol_table_that_cannot_be_the_learned_one_is_refused_not_a_panic() {
    let mut ix = awkward_coded_index(600, 23);
    let parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
    let head = plain(&parts[0]);
    let (at, symbols) = symbols_of(&head);
    assert!(
        symbols.len() > 20,
        "the table learned symbols: {}",
        symbols.len()
    );
    let refused = |change: &dyn Fn(&mut Vec<u8>)| {
        let mut changed = head.clone();
        change(&mut changed);
        SnapshotRestorer::new(&sealed_part(&changed)).unwrap_err()
    };
    let slot = |k: usize| at + 1 + 9 * k;
    // A symbol with a slash in it: a name could decode to a path.
    let e = refused(&|h| {
        h[slot(0) + 1] = b'/';
    });
    assert_eq!(
        e,
        SnapshotError::OutOfOrder {
            part: 0,
            what: "a symbol holds a byte no name has"
        }
    );
    // A symbol of 9 bytes.
    let e = refused(&|h| h[slot(0)] = 9);
    assert_eq!(
        e,
        SnapshotError::OutOfOrder {
            part: 0,
            what: "a symbol of no or more than 8 bytes"
        }
    );
    // Lengths out of FSST's order (a long symbol after the one-byte ones).
    let last = symbols.len() - 1;
    assert_eq!(symbols[last].0, 1, "one-byte symbols come last");
    let e = refused(&|h| {
        h[slot(last)] = 3;
        h[slot(last) + 2] = b'q';
        h[slot(last) + 3] = b'q';
    });
    assert_eq!(
        e,
        SnapshotError::OutOfOrder {
            part: 0,
            what: "symbols out of FSST's order"
        }
    );
    // Two symbols of 3 bytes and more with the same first 3 bytes.
    let long: Vec<usize> = (0..symbols.len()).filter(|k| symbols[*k].0 >= 3).collect();
    if long.len() >= 2 {
        let (a, b) = (long[0], long[1]);
        let e = refused(&|h| {
            let copy: Vec<u8> = h[slot(a)..slot(a) + 9].to_vec();
            h[slot(b)..slot(b) + 9].copy_from_slice(&copy);
        });
        assert_eq!(
            e,
            SnapshotError::OutOfOrder {
                part: 0,
                what: "two symbols FSST cannot tell apart"
            }
        );
    }
}

#[test]
fn a_coded_name_that_does_not_decode_to_a_safe_name_is_refused() {
    let mut ix = awkward_coded_index(600, 24);
    let parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
    let (_, symbols) = symbols_of(&plain(&parts[0]));
    let part1 = plain(&parts[1]);
    // The first entry part's names follow its columns: 4+2+1+4+4 bytes a slot.
    let count = u32::from_le_bytes(part1[9..13].try_into().unwrap()) as usize;
    let names_at = 13 + 15 * count;
    let names_len = u32::from_le_bytes(part1[names_at..names_at + 4].try_into().unwrap()) as usize;
    assert!(names_len > 0);
    // The first stored name is the root's (empty); the second entry's is its code.
    let first = names_at + 4;
    let mut broken = parts.clone();
    // A code past the table's symbols.
    let mut p = part1.clone();
    p[first] = symbols.len() as u8;
    broken[1] = sealed_part(&p);
    assert!(matches!(
        restore(&broken),
        Err(SnapshotError::BadEntry {
            what: "unsafe name",
            ..
        })
    ));
    // An escaped slash.
    let mut broken = parts.clone();
    let mut p = part1.clone();
    p[first] = 255;
    p[first + 1] = b'/';
    broken[1] = sealed_part(&p);
    assert!(matches!(
        restore(&broken),
        Err(SnapshotError::BadEntry {
            what: "unsafe name",
            ..
        })
    ));
}

#[test]
fn random_bytes_never_panic_the_restorer_of_coded_names() {
    let mut ix = awkward_coded_index(400, 25);
    let parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
    let mut rng = Rng::new(26);
    for round in 0..3000 {
        let _ = restore(&damaged(&parts, &mut rng, 1 + round % 2));
    }
}

#[test]
fn a_snapshot_of_a_walked_tree_is_stored_compressed_and_restores_equal() {
    // What a walk gives: folders of numbered files, empty, of one mode.
    let mut ix = Index::new();
    upsert(&mut ix, entry(0, 0, EntryKind::Dir, b""));
    let mut id = 1;
    for folder in 0..4u32 {
        let dir = id;
        upsert(
            &mut ix,
            entry(
                dir,
                0,
                EntryKind::Dir,
                format!("folder-{folder}").as_bytes(),
            ),
        );
        id += 1;
        for f in 0..PART_SLOTS as u32 / 2 {
            upsert(
                &mut ix,
                entry(
                    id,
                    dir,
                    EntryKind::File,
                    format!("IMG_{f:05}.jpg").as_bytes(),
                ),
            );
            id += 1;
        }
    }
    let parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
    let stored: usize = parts.iter().map(Vec::len).sum();
    let fields: usize = parts.iter().map(|p| plain(p).len()).sum();
    assert!(
        stored * 10 < fields * 6,
        "stored {stored} bytes for {fields} bytes of fields"
    );
    let mut back = restore(&parts).expect("restores");
    assert_same(&mut ix, &mut back);
}

#[test]
fn a_part_whose_fields_say_more_than_lz4_can_make_is_refused() {
    let mut ix = two_folder_index();
    let mut parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
    // The fields' length follows magic 4 and kind 1.
    parts[1][5..9].copy_from_slice(&u32::MAX.to_le_bytes());
    reseal(&mut parts[1]);
    assert_eq!(
        restore(&parts).unwrap_err(),
        SnapshotError::Truncated { part: 1 }
    );
    // One byte short of what the stored fields make: refused too.
    let mut parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
    let len = u32::from_le_bytes(parts[1][5..9].try_into().unwrap());
    parts[1][5..9].copy_from_slice(&(len - 1).to_le_bytes());
    reseal(&mut parts[1]);
    assert_eq!(
        restore(&parts).unwrap_err(),
        SnapshotError::Truncated { part: 1 }
    );
}

/// Restores from parts the shell already unsealed (another thread's work):
/// the head as stored, the entry parts in their plain form.
fn restore_unsealed(parts: &[Vec<u8>]) -> Result<Index, SnapshotError> {
    let mut r = SnapshotRestorer::from_head(StoredPart::Unsealed(&plain(&parts[0])))?;
    for p in &parts[1..] {
        r.push_part(StoredPart::Unsealed(&plain(p)))?;
    }
    r.finish()
}

#[test]
fn parts_the_shell_unsealed_restore_the_same_index_as_sealed_ones() {
    for (n, seed) in [(1, 21), (500, 22), (PART_SLOTS as u32 * 2 + 9, 23)] {
        let mut ix = awkward_coded_index(n, seed);
        let parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
        let mut back = restore_unsealed(&parts).expect("restores");
        assert_same(&mut ix, &mut back);
        // Sealed and unsealed parts mixed, as a shell whose helper stopped gives them.
        let mut r = SnapshotRestorer::new(&parts[0]).expect("the head");
        for (k, p) in parts[1..].iter().enumerate() {
            let unsealed = plain(p);
            r.push_part(if k % 2 == 0 {
                StoredPart::Unsealed(&unsealed)
            } else {
                StoredPart::Sealed(p)
            })
            .expect("a part");
        }
        assert_same(&mut ix, &mut r.finish().expect("restores"));
    }
}

#[test]
fn an_unsealed_part_that_is_not_one_is_refused_with_what_is_wrong() {
    let mut ix = two_folder_index();
    let parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
    let mut r = SnapshotRestorer::new(&parts[0]).expect("the head");
    // A sealed part handed over as unsealed: its magic is right, its fields are not.
    assert!(r.push_part(StoredPart::Unsealed(&parts[1])).is_err());
    let mut r = SnapshotRestorer::new(&parts[0]).expect("the head");
    let mut wrong = plain(&parts[1]);
    wrong[0] ^= 1;
    assert_eq!(
        r.push_part(StoredPart::Unsealed(&wrong)).unwrap_err(),
        SnapshotError::OutOfOrder {
            part: 1,
            what: "not a linkfs snapshot part of this version",
        }
    );
    assert_eq!(
        r.push_part(StoredPart::Unsealed(b"LXS")).unwrap_err(),
        SnapshotError::Truncated { part: 1 }
    );
}

#[test]
fn random_bytes_in_unsealed_parts_never_panic_the_restorer() {
    let mut ix = awkward_coded_index(600, 31);
    let parts: Vec<Vec<u8>> = ix.snapshot_parts().collect();
    let mut rng = Rng::new(32);
    for _ in 0..3000 {
        let p = damaged(&parts, &mut rng, 2);
        let _ = restore_unsealed(&p);
    }
}
