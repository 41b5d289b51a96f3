//! Byte-exact test vectors: the annotated vectors live in `linkfs_proto::vectors`
//! (so the wasm build checks the same bytes in the browser); this file runs them
//! and adds checks that are not about one frame's bytes.

use linkfs_proto::*;

#[test]
fn every_vector_encodes_and_decodes_exactly() {
    let all = vectors::all();
    for v in &all {
        if let Err(e) = vectors::check(v) {
            panic!("{e}");
        }
    }
    assert_eq!(vectors::check_all(), Ok(all.len()));
}

#[test]
fn a_wrong_vector_is_caught() {
    let mut v = vectors::all().remove(0);
    v.hex = "02 01 01";
    assert!(vectors::check(&v).is_err());
}

#[test]
fn the_chunk_hash_binds_entry_generation_and_offset() {
    let hash = chunk_hash(EntryId(5), Generation(0), 0, b"abc");
    assert_ne!(hash, chunk_hash(EntryId(6), Generation(0), 0, b"abc"));
    assert_ne!(hash, chunk_hash(EntryId(5), Generation(1), 0, b"abc"));
    assert_ne!(hash, chunk_hash(EntryId(5), Generation(0), 1, b"abc"));
    assert_ne!(hash, chunk_hash(EntryId(5), Generation(0), 0, b"abd"));
}

#[test]
fn unknown_frames_are_skippable() {
    assert_eq!(
        SenderToReceiver::decode(&[0x55, 1, 2, 3]).unwrap(),
        SenderToReceiver::Unknown { kind: 0x55 }
    );
    assert_eq!(
        ReceiverToSender::decode(&[0x56]).unwrap(),
        ReceiverToSender::Unknown { kind: 0x56 }
    );
    assert_eq!(
        ReceiverToSender::decode(&[FRAME_WELCOME, 1]),
        Err(DecodeError::WrongDirection {
            kind: FRAME_WELCOME
        })
    );
}

fn entry(
    id: u32,
    parent: u32,
    kind: EntryKind,
    name: &[u8],
    size: u64,
    mtime: i64,
    mode: u32,
) -> Entry {
    Entry {
        id: EntryId(id),
        parent: EntryId(parent),
        kind,
        name: name.to_vec(),
        size,
        mtime,
        mode,
        generation: Generation(0),
        target: Vec::new(),
    }
}

#[test]
fn symlink_and_generation_in_a_batch() {
    let mut link = entry(4, 0, EntryKind::Symlink, b"l", 0, 5, 0o777);
    link.target = b"../outside".to_vec();
    link.generation = Generation(3);
    let mut enc = BatchEncoder::new(Seq(10), MAX_FRAME_LEN);
    assert!(enc.push_upsert(&view(&link)));
    let frame = enc.finish(5, false);
    let (_, ops) = decode_batch(&frame).unwrap();
    link.size = 10; // a symlink's size is its target's length
    assert_eq!(ops, vec![IndexOp::Upsert(link)]);
}

fn view(e: &Entry) -> EntryView<'_> {
    EntryView {
        id: e.id,
        parent: e.parent,
        kind: e.kind,
        name: &e.name,
        size: e.size,
        mtime: e.mtime,
        mode: e.mode,
        generation: e.generation,
        target: &e.target,
    }
}
