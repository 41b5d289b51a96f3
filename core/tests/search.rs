//! Whole-share search over a real receiver index: bounded steps, an index that
//! changes between steps, the result cap.

use linkfs_core::{Index, MAX_RESULTS, Search};
use linkfs_proto::{EntryId, EntryKind, EntryView, Generation, OpView};

fn entry(id: u32, parent: u32, name: &[u8], kind: EntryKind) -> EntryView<'_> {
    EntryView {
        id: EntryId(id),
        parent: EntryId(parent),
        kind,
        name,
        size: 1,
        mtime: 0,
        mode: 0o644,
        generation: Generation(0),
        target: b"",
    }
}

/// A root, folder 1, and `n` files under it named `photo-<i>.jpg` (every 10th NFD "café-<i>.txt").
fn index_with(n: u32) -> Index {
    let mut ix = Index::new();
    ix.apply(OpView::Upsert(entry(0, 0, b"root", EntryKind::Dir)))
        .unwrap();
    ix.apply(OpView::Upsert(entry(1, 0, b"photos", EntryKind::Dir)))
        .unwrap();
    for i in 0..n {
        let name = if i % 10 == 0 {
            format!("cafe\u{301}-{i}.txt")
        } else {
            format!("photo-{i}.jpg")
        };
        ix.apply(OpView::Upsert(entry(
            2 + i,
            1,
            name.as_bytes(),
            EntryKind::File,
        )))
        .unwrap();
    }
    ix
}

fn run(ix: &Index, query: &str, per_step: u32) -> (Vec<EntryId>, usize, bool) {
    let mut s = Search::new(query);
    let mut all = Vec::new();
    for steps in 1.. {
        let step = s.step(ix, per_step);
        assert!(step.scanned <= step.total);
        all.extend(step.matches);
        if step.done {
            return (all, steps, step.truncated);
        }
        assert!(steps < 1_000_000, "the search never ended");
    }
    unreachable!()
}

#[test]
fn search_steps_scan_a_bounded_number_of_slots_and_find_every_match_once() {
    let ix = index_with(1_000);
    let (found, steps, truncated) = run(&ix, "Café", 64);
    assert_eq!(found.len(), 100, "every NFD café found by its NFC form");
    assert!(steps >= 1_002 / 64, "64 slots per step: {steps} steps");
    assert!(!truncated);
    let (globbed, _, _) = run(&ix, "PHOTO-9?.JPG", 1_000_000);
    assert_eq!(globbed.len(), 9, "photo-91..99 (photo-90 is a café)");
    assert_eq!(
        run(&ix, "photos", 1_000).0,
        vec![EntryId(1)],
        "folders are found too"
    );
    assert!(run(&ix, "", 10).0.is_empty());
}

#[test]
fn search_entries_removed_or_added_between_steps_are_never_reported_when_gone() {
    let mut ix = index_with(200);
    let mut s = Search::new("photo");
    let mut found = s.step(&ix, 50).matches;
    // Everything under "photos" goes, and new entries come at higher ids.
    ix.apply(OpView::Remove(EntryId(1))).unwrap();
    ix.apply(OpView::Upsert(entry(
        1_000,
        0,
        b"photo-new.jpg",
        EntryKind::File,
    )))
    .unwrap();
    loop {
        let step = s.step(&ix, 50);
        found.extend(step.matches);
        if step.done {
            break;
        }
    }
    assert!(
        found.contains(&EntryId(1_000)),
        "the entry added during the search is found"
    );
    for id in &found[found.len().min(1)..] {
        if *id != EntryId(1_000) {
            assert!(
                id.0 < 50,
                "entry {id} was removed before it was scanned, yet reported"
            );
        }
    }
}

#[test]
fn search_reports_at_most_max_results() {
    let ix = index_with(MAX_RESULTS as u32 + 500);
    let (found, _, truncated) = run(&ix, "-", 4_096);
    assert_eq!(found.len(), MAX_RESULTS);
    assert!(truncated);
}

#[test]
fn search_a_step_never_scans_more_than_asked() {
    let ix = index_with(1_000);
    let mut s = Search::new("photo");
    let mut before = 0;
    for max in [1, 7, 100, 0, 333, 5_000] {
        let step = s.step(&ix, max);
        assert!(
            step.scanned - before <= max,
            "asked {max}, scanned {}",
            step.scanned - before
        );
        assert!(step.matches.len() as u32 <= max);
        before = step.scanned;
    }
    assert!(s.step(&ix, 1).done);
}

#[test]
fn search_never_reports_an_id_gone_when_its_step_ran_while_the_index_churns() {
    let mut ix = index_with(2_000);
    let mut s = Search::new("*.jpg");
    let mut seen = std::collections::HashSet::new();
    for round in 0u32.. {
        let step = s.step(&ix, 97);
        for id in &step.matches {
            assert!(
                ix.contains(*id),
                "round {round}: {id} reported but not in the index"
            );
            assert!(seen.insert(*id), "{id} reported twice");
        }
        if step.done {
            break;
        }
        // Between steps: remove entries ahead of and behind the cursor, add some.
        for k in 0..5 {
            let victim = EntryId(2 + (round * 37 + k * 401) % 2_000);
            if ix.contains(victim) {
                ix.apply(OpView::Remove(victim)).unwrap();
            }
        }
        let added = 10_000 + round;
        let name = format!("new-{added}.jpg");
        ix.apply(OpView::Upsert(entry(
            added,
            1,
            name.as_bytes(),
            EntryKind::File,
        )))
        .unwrap();
    }
    assert!(
        seen.contains(&EntryId(10_000)),
        "an entry added ahead of the cursor is found"
    );
}

#[test]
fn search_with_exactly_max_results_is_not_truncated_and_one_more_is() {
    // index_with(11_112) holds 1,112 cafés and 10,000 photos.
    let (found, _, truncated) = run(&index_with(11_112), "*.jpg", 3_000);
    assert_eq!((found.len(), truncated), (MAX_RESULTS, false));
    let (found, _, truncated) = run(&index_with(11_113), "*.jpg", 3_000);
    assert_eq!((found.len(), truncated), (MAX_RESULTS, true));
}

/// The scan's shortcuts (ASCII names compared in place, long names, names past
/// 255 bytes, caseless scripts, entries over several column pages) find exactly
/// what folding each name and matching it the plain way finds.
#[test]
fn search_shortcuts_find_what_folding_every_name_finds() {
    use linkfs_core::search::fold;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    let parts: &[&str] = &[
        "Budget",
        "BUDGET",
        "budg",
        "et",
        "photo",
        "IMG_",
        "0042",
        ".jpg",
        ".PDF",
        " ",
        "-",
        "Straße",
        "STRASSE",
        "\u{212A}elvin",
        "\u{FB01}le",
        "東京",
        "写真",
        "😀",
        "İstanbul",
        "cafe\u{301}",
        "café",
        "ΟΔΟΣ",
        "οδος",
        "한국",
        "x",
    ];
    let name = prop::collection::vec(prop::sample::select(parts), 1..40).prop_map(|p| p.concat());
    let names = prop::collection::vec(name, 9_000..9_001);
    let query = prop::collection::vec(prop::sample::select(parts), 1..3).prop_map(|p| p.concat());
    let glob = prop::sample::select(&["*.jpg", "IMG_????.*", "*ss*", "*東*", "?udget*", "*K*"][..]);
    let queries = (
        prop::collection::vec(query, 4),
        prop::collection::vec(glob.prop_map(String::from), 2),
    )
        .prop_map(|(mut a, b)| {
            a.extend(b);
            a
        });
    let mut runner = TestRunner::new(Config {
        cases: 6,
        ..Config::default()
    });
    runner
        .run(&(names, queries), |(names, queries)| {
            let mut ix = Index::new();
            ix.apply(OpView::Upsert(entry(0, 0, b"root", EntryKind::Dir)))
                .unwrap();
            for (i, n) in names.iter().enumerate() {
                // Past 255 bytes a name's length lives outside its column.
                let n = if i % 97 == 0 { n.repeat(12) } else { n.clone() };
                ix.apply(OpView::Upsert(entry(
                    1 + i as u32,
                    0,
                    n.as_bytes(),
                    EntryKind::File,
                )))
                .unwrap();
            }
            // Some gone, so the scan skips slots that are not present.
            for id in (5..9_000).step_by(211) {
                ix.apply(OpView::Remove(EntryId(id))).unwrap();
            }
            for q in &queries {
                let Some(pattern) = linkfs_core::NamePattern::parse(q) else {
                    // Only spaces: an empty query, which finds nothing.
                    prop_assert!(run(&ix, q, 1_000).0.is_empty(), "{:?} found something", q);
                    continue;
                };
                let want: Vec<EntryId> = (1..ix.id_bound())
                    .filter(|&id| {
                        ix.name_of(EntryId(id))
                            .is_some_and(|n| pattern.matches(&fold(&String::from_utf8_lossy(&n))))
                    })
                    .map(EntryId)
                    .collect();
                let (got, _, truncated) = run(&ix, q, 1_000);
                prop_assert!(!truncated);
                prop_assert_eq!(got, want, "query {:?}", q);
            }
            Ok(())
        })
        .unwrap();
}
