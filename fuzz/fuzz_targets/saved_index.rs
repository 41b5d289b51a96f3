//! A saved share index read back from the sharer's state folder (any bytes the
//! file system could hold): no panic, and what loads is usable (every live
//! entry's path looks up to itself).
#![no_main]
use libfuzzer_sys::fuzz_target;
use linkfs_core::ShareIndex;
use linkfs_proto::Seq;

fuzz_target!(|data: &[u8]| {
    let Ok(mut ix) = ShareIndex::from_saved(data) else { return };
    let ops: Vec<_> = ix.ops_from(Seq(0)).collect();
    for (_, op) in ops {
        if let Some(path) = ix.relative_path(op.id()) {
            assert_eq!(ix.lookup(&path), Some(op.id()));
        }
    }
});
