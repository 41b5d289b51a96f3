//! A stored snapshot of the index (the browser's IndexedDB), damaged: no panic,
//! no hang, and whatever restores is one tree under the root.
//!
//! Random bytes would never pass the parts' checksums, so the input builds a
//! small index, takes its snapshot, changes bytes of its parts' fields where
//! the input says and seals each part again (compressed, 16 bytes of BLAKE3
//! at its end) before restoring: the structure checks are what is fuzzed.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linkfs_core::index::{sealed_part, unsealed_part};
use linkfs_core::{Index, SnapshotRestorer};
use linkfs_proto::{EntryId, EntryKind, EntryView, Generation, OpView};

fuzz_target!(|data: &[u8]| {
    let (shape, edits) = data.split_at(data.len().min(64));
    let mut index = Index::new();
    let root = EntryView {
        id: EntryId(0),
        parent: EntryId(0),
        kind: EntryKind::Dir,
        name: b"",
        size: 0,
        mtime: 0,
        mode: 0o755,
        generation: Generation(0),
        target: b"",
    };
    let _ = index.apply(OpView::Upsert(root));
    for (i, b) in shape.iter().enumerate() {
        let id = i as u32 + 1;
        let name = format!("n{b}-{i}");
        let kind = match b % 4 {
            0 => EntryKind::Dir,
            1 => EntryKind::Symlink,
            _ => EntryKind::File,
        };
        let e = EntryView {
            id: EntryId(id),
            parent: EntryId(u32::from(*b) % id),
            kind,
            name: name.as_bytes(),
            size: u64::from(*b) << (b % 40),
            mtime: i64::from(*b) - 100,
            mode: u32::from(*b) * 7,
            generation: Generation(u32::from(*b)),
            target: if kind == EntryKind::Symlink { b"t" } else { b"" },
        };
        let _ = index.apply(OpView::Upsert(e));
    }
    // Each part's plain form (magic, kind, fields uncompressed): the edits
    // land in the fields, and sealing again compresses and checksums them.
    let mut parts: Vec<Vec<u8>> = index
        .snapshot_parts()
        .map(|p| unsealed_part(&p).expect("a part just sealed"))
        .collect();
    for edit in edits.chunks(4) {
        let [p, hi, lo, value] = [edit[0], *edit.get(1).unwrap_or(&0), *edit.get(2).unwrap_or(&0), *edit.get(3).unwrap_or(&0)];
        let n = parts.len();
        let part = &mut parts[usize::from(p) % n];
        if !part.is_empty() {
            let at = (usize::from(hi) << 8 | usize::from(lo)) % part.len();
            part[at] = value;
        }
    }
    let parts: Vec<Vec<u8>> = parts.iter().map(|p| sealed_part(p)).collect();
    let Ok(mut restorer) = SnapshotRestorer::new(&parts[0]) else { return };
    for p in &parts[1..] {
        if restorer.push(p).is_err() {
            return;
        }
        let _ = restorer.index_mut().lookup(b"n1-0");
    }
    if let Ok(restored) = restorer.finish() {
        for id in 0..restored.id_bound() {
            if restored.contains(EntryId(id)) {
                assert!(!restored.ancestry(EntryId(id)).is_empty(), "entry {id} is cut off from the root");
            }
        }
        let _ = restored.lookup(b"n1-0/n2-1");
    }
});
