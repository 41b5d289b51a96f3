//! Index batches from a sharer, applied to a receiver's index: no panic, and
//! the index stays consistent (every entry's parent chain reaches the root).
#![no_main]
use libfuzzer_sys::fuzz_target;
use linkfs_core::Index;
use linkfs_proto::EntryId;

fuzz_target!(|data: &[u8]| {
    let mut index = Index::new();
    for frame in data.split(|b| *b == 0xfe) {
        let _ = index.apply_batch(frame);
    }
    for id in 0..4096u32 {
        if index.contains(EntryId(id)) {
            assert!(!index.ancestry(EntryId(id)).is_empty(), "entry {id} is cut off from the root");
        }
    }
    let _ = index.lookup(b"a/b/c");
});
