//! What a hostile sharer can make a receiver do: refused, bounded, no panic.

use linkfs_core::{
    Index, Millis, NewEntry, ReadEvent, ReadFailure, Receiver, ReceiverConfig, ReceiverEvent,
    SenderConfig, SenderSession, ShareIndex,
};
use linkfs_proto::frame::encode_chunk_into;
use linkfs_proto::{
    EntryId, EntryKind, Epoch, Generation, ReadChunk, ReceiverToSender, chunk_hash,
};

fn share() -> ShareIndex {
    let mut ix = ShareIndex::new(Epoch(3));
    for (id, kind, name) in [(0, EntryKind::Dir, "root"), (1, EntryKind::File, "a.bin")] {
        ix.push(&NewEntry {
            id: EntryId(id),
            parent: EntryId::ROOT,
            kind,
            name: name.as_bytes(),
            size: 100,
            mtime: 1,
            mtime_nsec: 0,
            mode: 0o644,
            target: b"",
            dev: 1,
            ino: u64::from(id),
            ctime_ns: 0,
        })
        .unwrap();
    }
    ix.mark_snapshot_complete();
    ix
}

/// Exchanges frames until both sides are quiet; returns what the receiver sent.
fn pump(s: &mut SenderSession, r: &mut Receiver, ix: &ShareIndex) -> Vec<Vec<u8>> {
    let mut sent = Vec::new();
    loop {
        let mut moved = false;
        while let Some(f) = r.poll_transmit(Millis(0)) {
            let _ = s.handle_frame(Millis(0), &f, ix);
            sent.push(f);
            moved = true;
        }
        while let Some(f) = s.poll_transmit(Millis(0), ix) {
            r.handle_frame(Millis(0), &f);
            moved = true;
        }
        if !moved {
            return sent;
        }
    }
}

#[test]
fn a_chunk_offset_near_the_end_of_u64_is_refused_as_corrupt_not_wrapped() {
    let ix = share();
    let mut s = SenderSession::new(SenderConfig::default());
    let mut r = Receiver::new(ReceiverConfig::default(), Index::new(), None);
    pump(&mut s, &mut r, &ix);
    assert!(r.index().get(EntryId(1)).is_some(), "the file is listed");
    let handle = r.start_read(EntryId(1), None, 0, 100).unwrap();
    let sent = pump(&mut s, &mut r, &ix);
    let read = sent
        .iter()
        .find_map(|f| match ReceiverToSender::decode(f) {
            Ok(ReceiverToSender::Read(q)) => Some(q.read),
            _ => None,
        })
        .expect("the receiver asked for the bytes");
    // A chunk whose offset + length wraps around to inside the request.
    let data = [7u8; 50];
    let offset = u64::MAX - 20;
    let mut frame = Vec::new();
    encode_chunk_into(
        &mut frame,
        &ReadChunk {
            read,
            offset,
            hash: chunk_hash(EntryId(1), Generation(0), offset, &data),
            data: &data,
        },
    );
    r.handle_frame(Millis(0), &frame);
    let failed = std::iter::from_fn(|| r.poll_event()).find_map(|e| match e {
        ReceiverEvent::Read(ReadEvent::Failed { handle: h, error }) if h == handle => Some(error),
        _ => None,
    });
    assert_eq!(failed, Some(ReadFailure::Corrupt));
}

fn upsert(
    ix: &mut Index,
    id: u32,
    parent: u32,
    kind: EntryKind,
) -> Result<(), linkfs_core::IndexError> {
    let name = format!("n{id}");
    ix.apply(linkfs_proto::OpView::Upsert(linkfs_proto::EntryView {
        id: EntryId(id),
        parent: EntryId(parent),
        kind,
        name: name.as_bytes(),
        size: 0,
        mtime: 0,
        mode: 0o755,
        generation: Generation(0),
        target: b"",
    }))
}

#[test]
fn a_folder_upserted_as_a_file_under_itself_is_refused_not_left_parented_to_itself() {
    let mut ix = Index::new();
    upsert(&mut ix, 0, 0, EntryKind::Dir).unwrap();
    upsert(&mut ix, 1, 0, EntryKind::Dir).unwrap();
    upsert(&mut ix, 2, 1, EntryKind::Dir).unwrap();
    assert!(
        upsert(&mut ix, 1, 1, EntryKind::File).is_err(),
        "under itself"
    );
    assert!(
        upsert(&mut ix, 1, 2, EntryKind::File).is_err(),
        "under its own child"
    );
    let e = ix.get(EntryId(1)).expect("still there");
    assert_eq!((e.kind, e.parent), (EntryKind::Dir, EntryId::ROOT));
    assert_eq!(ix.lookup(b"n1/n2"), Some(EntryId(2)));
}

#[test]
fn a_reused_room_id_with_another_secret_gets_another_receiver_store() {
    let a =
        linkfs_core::ShareLink::parse_fragment("abcdefghijklmnop.AAAAAAAAAAAAAAAAAAAAAA").unwrap();
    let b =
        linkfs_core::ShareLink::parse_fragment("abcdefghijklmnop.AAAAAAAAAAAAAAAAAAAAAQ").unwrap();
    assert_ne!(a.store_name(), b.store_name());
    assert_eq!(a.store_name(), a.clone().store_name());
    assert!(a.store_name().starts_with("linkfs-abcdefghijklmnop-"));
    assert!(
        !a.store_name().contains("AAAA"),
        "the secret is not in the name"
    );
}

fn batch_of(first: u64, ops: &[linkfs_proto::EntryView<'_>], span: Option<u64>) -> Vec<u8> {
    let mut enc =
        linkfs_proto::BatchEncoder::new(linkfs_proto::Seq(first), linkfs_proto::MAX_FRAME_LEN);
    for op in ops {
        assert!(enc.push_upsert(op));
    }
    match span {
        Some(span) => enc.finish_span(ops.len() as u64, true, span),
        None => enc.finish(ops.len() as u64, true),
    }
}

fn dir_view(id: u32, parent: u32, name: &[u8]) -> linkfs_proto::EntryView<'_> {
    linkfs_proto::EntryView {
        id: EntryId(id),
        parent: EntryId(parent),
        kind: EntryKind::Dir,
        name,
        size: 0,
        mtime: 0,
        mode: 0o755,
        generation: Generation(0),
        target: b"",
    }
}

#[test]
fn an_entry_id_far_beyond_the_log_is_refused_without_allocating_the_id_space() {
    let mut ix = Index::new();
    let frame = batch_of(
        0,
        &[dir_view(0, 0, b"root"), dir_view(0xFFFF_FFF0, 0, b"far")],
        None,
    );
    let before = ix.heap_bytes();
    let (_, refused) = ix.apply_batch(&frame).unwrap();
    assert!(
        refused
            .iter()
            .any(|e| matches!(e, linkfs_core::IndexError::IdBeyondLog { .. })),
        "{refused:?}"
    );
    assert!(ix.get(EntryId(0xFFFF_FFF0)).is_none());
    let grew = ix.heap_bytes() - before;
    assert!(grew < 1 << 20, "the index grew by {grew} bytes");
    // A batch claiming to cover far more positions than it has operations is refused whole.
    let wide = batch_of(2, &[dir_view(1, 0, b"a")], Some(1 << 40));
    assert!(matches!(
        ix.apply_batch(&wide),
        Err(linkfs_core::IndexError::SpanTooLong { .. })
    ));
}

#[test]
fn a_chain_of_empty_batches_then_a_far_id_does_not_allocate_the_skipped_ids() {
    // Each batch skips as many positions as receivers accept; together they
    // reach ids the sharer never made, and one entry is put far out.
    let mut ix = Index::new();
    ix.apply_batch(&batch_of(0, &[dir_view(0, 0, b"root")], None))
        .unwrap();
    let skip = linkfs_proto::batch::MAX_SKIPPED_POSITIONS;
    let mut at = 1;
    for _ in 0..1_000 {
        ix.apply_batch(&batch_of(at, &[], Some(skip))).unwrap();
        at += skip;
    }
    let before = ix.heap_bytes();
    let far = (at - 10) as u32;
    let (_, refused) = ix
        .apply_batch(&batch_of(at, &[dir_view(far, 0, b"far")], None))
        .unwrap();
    assert!(refused.is_empty(), "{refused:?}");
    assert_eq!(
        ix.get(EntryId(far)).map(|e| e.name.to_vec()),
        Some(b"far".to_vec())
    );
    let grew = ix.heap_bytes() - before;
    // 65 million ids skipped: 5 bytes each were 328 MB.
    assert!(
        grew < 8 << 20,
        "the index grew by {grew} bytes for one entry"
    );
    let mut found = 0;
    ix.scan_names(0, u32::MAX, |_, _| {
        found += 1;
        true
    });
    assert_eq!(found, 2, "the root and the far entry");
}

#[test]
fn a_sender_never_skips_more_positions_in_one_batch_than_receivers_accept() {
    // One file rewritten 200,000 times: 200,000 superseded positions to skip.
    let mut ix = share();
    let file = EntryId(1);
    for n in 0..200_000u64 {
        ix.update(
            file,
            &NewEntry {
                id: file,
                parent: EntryId::ROOT,
                kind: EntryKind::File,
                name: b"a.bin",
                size: 100 + n,
                mtime: 1,
                mtime_nsec: 0,
                mode: 0o644,
                target: b"",
                dev: 1,
                ino: 1,
                ctime_ns: 0,
            },
        )
        .unwrap();
    }
    let mut s = SenderSession::new(SenderConfig::default());
    let mut r = Receiver::new(ReceiverConfig::default(), Index::new(), None);
    for _ in 0..100 {
        pump(&mut s, &mut r, &ix);
        if r.progress().complete {
            break;
        }
    }
    assert!(r.is_open(), "the receiver accepted every batch");
    assert!(r.progress().complete);
    assert_eq!(r.index().get(file).map(|e| e.size), Some(100 + 199_999));
}

#[test]
fn a_sharer_that_keeps_the_link_busy_cannot_hang_a_read_forever() {
    let ix = share();
    let mut s = SenderSession::new(SenderConfig::default());
    let mut r = Receiver::new(ReceiverConfig::default(), Index::new(), None);
    // The sharer's first answer (its Welcome), kept to be sent again and again:
    // frames that keep the link busy without answering anything.
    let hello = r.poll_transmit(Millis(0)).expect("a hello");
    let _ = s.handle_frame(Millis(0), &hello, &ix);
    let welcome = s.poll_transmit(Millis(0), &ix).expect("a welcome");
    r.handle_frame(Millis(0), &welcome);
    pump(&mut s, &mut r, &ix);
    let handle = r.start_read(EntryId(1), None, 0, 100).unwrap();
    let config = ReceiverConfig::default();
    let mut failed_at = None;
    for second in 1..=600u64 {
        let now = Millis(second * 1000);
        // The requests go nowhere; the link stays busy.
        while r.poll_transmit(now).is_some() {}
        r.handle_frame(now, &welcome);
        r.handle_timeout(now);
        if std::iter::from_fn(|| r.poll_event()).any(|e| {
            matches!(e, ReceiverEvent::Read(ReadEvent::Failed { handle: h, error: ReadFailure::TimedOut }) if h == handle)
        }) {
            failed_at = Some(now.0);
            break;
        }
    }
    let failed_at = failed_at.expect("the read fails in the end");
    // Not at the first quiet-link timeout (the link was never quiet), but after
    // each request went a capped while without progress.
    let per_request = config.retry_ms * linkfs_core::STALL_CAP;
    assert!(
        failed_at >= per_request * u64::from(config.max_retries + 1),
        "failed at {failed_at} ms"
    );
    assert!(
        failed_at <= (per_request + 1000) * u64::from(config.max_retries + 1),
        "failed at {failed_at} ms"
    );
}
