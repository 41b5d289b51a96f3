use super::*;

fn whole() -> ShareIndex {
    let mut w = ShareIndex::new(Epoch(1));
    w.push(&entry(EntryId::ROOT, EntryKind::Dir, b"share", 0))
        .unwrap();
    w
}

fn entry(parent: EntryId, kind: EntryKind, name: &[u8], size: u64) -> NewEntry<'_> {
    NewEntry {
        id: EntryId::ROOT,
        parent,
        kind,
        name,
        size,
        mtime: 10,
        mtime_nsec: 0,
        mode: 0o644,
        target: b"",
        dev: 0,
        ino: 0,
        ctime_ns: CTIME_UNKNOWN,
    }
}

/// Adds `path` (folders on the way made as needed); a trailing '/' makes a folder.
fn put(w: &mut ShareIndex, path: &str, size: u64) -> EntryId {
    let mut at = EntryId::ROOT;
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    for (i, name) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        if let Some(id) = w.lookup_child(at, name.as_bytes()) {
            at = id;
            continue;
        }
        let kind = if last && !path.ends_with('/') {
            EntryKind::File
        } else {
            EntryKind::Dir
        };
        at = w
            .add(&entry(
                at,
                kind,
                name.as_bytes(),
                if last { size } else { 0 },
            ))
            .unwrap();
    }
    at
}

/// The part's entry at `path`.
fn find(part: &PartIndex, path: &str) -> EntryId {
    let ix = part.index();
    let mut at = EntryId::ROOT;
    for name in path.split('/') {
        at = EntryId(
            ix.children(at)
                .find(|c| ix.view(EntryId(*c)).unwrap().name == name.as_bytes())
                .unwrap_or_else(|| panic!("no {path} in the part")),
        );
    }
    at
}

/// Every path the part shows, sorted (folders end in '/').
fn paths(part: &PartIndex) -> Vec<String> {
    let ix = part.index();
    let mut out = Vec::new();
    let mut stack = vec![EntryId::ROOT];
    while let Some(d) = stack.pop() {
        for c in ix.children(d) {
            let c = EntryId(c);
            let v = ix.view(c).unwrap();
            let mut p = String::from_utf8(ix.relative_path(c).unwrap()).unwrap();
            if v.kind == EntryKind::Dir {
                p.push('/');
                stack.push(c);
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn a_folder_part_shows_its_folder_as_the_root_and_nothing_above_or_beside_it() {
    let mut w = whole();
    put(&mut w, "top.txt", 1);
    put(&mut w, "photos/a.jpg", 2);
    put(&mut w, "photos/2024/b.jpg", 3);
    put(&mut w, "photos-old/c.jpg", 4);
    put(&mut w, "work/secret.xls", 5);
    let part = PartIndex::folder(&mut w, "photos", Epoch(2));
    assert!(part.showing());
    assert_eq!(part.root_name(), b"photos");
    assert_eq!(paths(&part), ["2024/", "2024/b.jpg", "a.jpg"]);
    let b = find(&part, "2024/b.jpg");
    let whole_b = part.whole_id(b).unwrap();
    assert_eq!(w.relative_path(whole_b).unwrap(), b"photos/2024/b.jpg");
    assert_eq!(part.index().view(b).unwrap().size, 3);
}

#[test]
fn what_changes_in_the_whole_reaches_the_part_and_only_what_it_shows() {
    let mut w = whole();
    put(&mut w, "photos/a.jpg", 2);
    let mut part = PartIndex::folder(&mut w, "photos", Epoch(2));
    put(&mut w, "photos/new/deep/c.jpg", 7);
    put(&mut w, "elsewhere/d.jpg", 8);
    let a = w.lookup(b"photos/a.jpg").unwrap();
    w.remove(a).unwrap();
    part.follow(&mut w);
    assert_eq!(paths(&part), ["new/", "new/deep/", "new/deep/c.jpg"]);
    // A changed file is a new version in the part.
    let c = w.lookup(b"photos/new/deep/c.jpg").unwrap();
    let pc = find(&part, "new/deep/c.jpg");
    let before = part.index().generation(pc);
    let parent = w.view(c).unwrap().parent;
    w.update_written(c, &entry(parent, EntryKind::File, b"c.jpg", 9))
        .unwrap();
    part.follow(&mut w);
    assert_eq!(part.index().view(pc).unwrap().size, 9);
    assert_ne!(part.index().generation(pc), before);
    // A folder removed takes what it held.
    let new = w.lookup(b"photos/new").unwrap();
    w.remove(new).unwrap();
    part.follow(&mut w);
    assert!(paths(&part).is_empty());
}

#[test]
fn a_child_logged_before_its_folder_still_comes_under_it() {
    let mut w = whole();
    put(&mut w, "photos/", 0);
    let mut part = PartIndex::folder(&mut w, "photos", Epoch(2));
    let f = put(&mut w, "photos/f/", 0);
    put(&mut w, "photos/f/x.jpg", 1);
    // The folder's latest operation now comes after its child's.
    let mut e = entry(w.view(f).unwrap().parent, EntryKind::Dir, b"f", 0);
    e.mtime = 99;
    assert!(w.update(f, &e).unwrap());
    part.follow(&mut w);
    assert_eq!(paths(&part), ["f/", "f/x.jpg"]);
}

#[test]
fn a_folder_part_empties_when_its_folder_goes_and_fills_when_it_comes_back() {
    let mut w = whole();
    let p = put(&mut w, "photos/a.jpg", 2);
    let mut part = PartIndex::folder(&mut w, "photos", Epoch(2));
    let photos = w.view(p).unwrap().parent;
    w.remove(photos).unwrap();
    part.follow(&mut w);
    assert!(!part.showing());
    assert!(paths(&part).is_empty());
    put(&mut w, "photos/b.jpg", 3);
    part.follow(&mut w);
    assert!(part.showing());
    assert_eq!(paths(&part), ["b.jpg"]);
    // A part asked for before its folder exists waits for it.
    let mut later = PartIndex::folder(&mut w, "music", Epoch(3));
    assert!(!later.showing());
    put(&mut w, "music/song.ogg", 4);
    later.follow(&mut w);
    assert_eq!(paths(&later), ["song.ogg"]);
}

#[test]
fn a_selection_part_shows_its_paths_in_place_and_the_folders_on_the_way() {
    let mut w = whole();
    put(&mut w, "work/budget.xls", 1);
    put(&mut w, "work/budget-secret.xls", 2);
    put(&mut w, "trip/p.jpg", 3);
    put(&mut w, "trip/q.jpg", 4);
    put(&mut w, "top.txt", 5);
    let selection = Selection::new(&["work/budget.xls", "trip"]).unwrap();
    let mut part = PartIndex::selection(&mut w, selection, Epoch(2));
    assert_eq!(part.root_name(), b"share");
    assert_eq!(
        paths(&part),
        [
            "trip/",
            "trip/p.jpg",
            "trip/q.jpg",
            "work/",
            "work/budget.xls"
        ]
    );
    put(&mut w, "trip/r.jpg", 6);
    put(&mut w, "work/other.doc", 7);
    part.follow(&mut w);
    assert_eq!(
        paths(&part),
        [
            "trip/",
            "trip/p.jpg",
            "trip/q.jpg",
            "trip/r.jpg",
            "work/",
            "work/budget.xls"
        ]
    );
}

#[test]
fn removals_the_whole_index_forgot_are_found_by_the_sweep() {
    let mut w = whole();
    for i in 0..130_000 {
        put(&mut w, &format!("photos/{i}.jpg"), 1);
    }
    put(&mut w, "keep/k.jpg", 1);
    let mut part = PartIndex::folder(&mut w, "photos", Epoch(2));
    assert_eq!(part.index().entries(), 130_001);
    // Enough removals that the whole index forgets the oldest.
    for i in 0..130_000 {
        let id = w.lookup(format!("photos/{i}.jpg").as_bytes()).unwrap();
        w.remove(id).unwrap();
    }
    assert!(!w.can_resume_from(Seq(0)));
    part.follow(&mut w);
    assert_eq!(part.index().entries(), 1, "only the root is left");
    assert!(part.showing());
}
