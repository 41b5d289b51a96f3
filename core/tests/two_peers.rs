//! Sender and receiver together, in memory, over perfect and bad simulated links.

mod sim;

use linkfs_core::*;
use linkfs_proto::{
    BatchEncoder, EntryId, EntryKind, EntryView, Epoch, FRAME_READ_CHUNK, Generation,
    ReadErrorCode, Seq,
};
use sim::*;

fn visitor(persist: bool, resume: Option<(Epoch, Seq)>, index: Index) -> Visitor {
    let rebuilt = Rebuilt {
        index,
        resume,
        complete: false,
        ..Rebuilt::default()
    };
    Visitor::new(rebuilt, ReceiverConfig::default(), persist)
}

#[test]
fn the_whole_index_arrives_over_a_perfect_link() {
    let (ix, files) = build_tree(50, 100, 20_000, |i| u64::from(i % 300));
    let mut sharer = Sharer::new(ix, files, SenderConfig::default());
    let mut v = visitor(false, None, Index::new());
    let mut net = Net::new(1, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 60_000);
    assert_same_index(&sharer.index, v.receiver.index());
    let p = v.receiver.progress();
    assert!(p.complete, "{p:?}");
    assert_eq!(p.received, 1 + 50 + 5000 + 1 + 20_000);
    assert_eq!(p.announced, p.received);
    assert_eq!(sharer.session.acked(), sharer.index.log_end());
    // Compact on the wire: well under 24 bytes per entry for this tree.
    let per_entry = sharer.session.stats().batch_bytes_sent as f64 / p.received as f64;
    assert!(per_entry < 16.0, "{per_entry} B/entry on the wire");
    // Lookups work in the big directory and in small ones.
    let idx = v.receiver.index_mut();
    let big = idx.lookup(b"big").expect("big dir");
    assert_eq!(idx.child_count(big), 20_000);
    let e = idx.lookup(b"big/e12345").expect("entry in big dir");
    assert_eq!(idx.get(e).unwrap().name, b"e12345");
    assert!(idx.lookup(b"dir 0007/file-00042.txt").is_some());
    assert!(idx.lookup(b"dir 0007/nope").is_none());
}

#[test]
fn the_whole_index_arrives_over_a_lossy_reordering_link() {
    for seed in 1..=5 {
        let (ix, files) = build_tree(30, 200, 5_000, |i| u64::from(i % 5_000));
        let config = SenderConfig {
            batch_cap: 4096,
            retransmit_ms: 200,
            ..SenderConfig::default()
        };
        let mut sharer = Sharer::new(ix, files, config);
        let mut v = visitor(false, None, Index::new());
        let mut net = Net::new(seed, LinkModel::BAD);
        progress(&mut net, &mut sharer, &mut v, 600_000);
        assert!(
            net.to_receiver.dropped > 0,
            "the link must actually lose frames"
        );
        assert_same_index(&sharer.index, v.receiver.index());
        assert!(v.receiver.progress().complete, "seed {seed}");
        assert!(v.refused_ops.is_empty());
    }
}

#[test]
fn batches_stream_while_the_walk_is_still_running() {
    let (full, files) = build_tree(20, 50, 0, |_| 1);
    // Feed the sharer's index a few entries at a time, as a walk would.
    let mut growing = ShareIndex::new(full.epoch());
    let mut sharer = Sharer::new(ShareIndex::new(Epoch(0)), files, SenderConfig::default());
    std::mem::swap(&mut sharer.index, &mut growing);
    let mut v = visitor(false, None, Index::new());
    let mut net = Net::new(7, LinkModel::PERFECT);
    let mut saw_partial = false;
    for id in 0..full.next_id().0 {
        let e = full.view(EntryId(id)).unwrap();
        let ne = NewEntry {
            id: e.id,
            parent: e.parent,
            kind: e.kind,
            name: e.name,
            size: e.size,
            mtime: e.mtime,
            mtime_nsec: 0,
            mode: e.mode,
            target: e.target,
            dev: 1,
            ino: u64::from(id),
            ctime_ns: 0,
        };
        sharer.index.push(&ne).unwrap();
        if id % 97 == 0 {
            progress(&mut net, &mut sharer, &mut v, 50);
            let p = v.receiver.progress();
            if p.received > 0 && !p.complete {
                saw_partial = true;
                assert!(p.received <= p.announced);
            }
        }
    }
    sharer.index.mark_snapshot_complete();
    progress(&mut net, &mut sharer, &mut v, 10_000);
    assert!(
        saw_partial,
        "the receiver should see entries before the walk ends"
    );
    assert!(v.receiver.progress().complete);
    assert_same_index(&sharer.index, v.receiver.index());
}

/// File sizes that do not compress away (so batches stay big).
fn scattered_size(i: u32) -> u64 {
    u64::from(i.wrapping_mul(2_654_435_761) % 100_000)
}

#[test]
fn the_window_bounds_what_is_not_yet_persisted() {
    let config = SenderConfig {
        window_bytes: 16 * 1024,
        batch_cap: 8 * 1024,
        ..SenderConfig::default()
    };
    // How many batch bytes the whole index takes (batches may be compressed).
    let total = {
        let (ix, files) = build_tree(10, 5_000, 0, scattered_size);
        let mut sharer = Sharer::new(ix, files, config.clone());
        let mut v = visitor(true, None, Index::new());
        progress(
            &mut Net::new(3, LinkModel::PERFECT),
            &mut sharer,
            &mut v,
            60_000,
        );
        sharer.session.stats().batch_bytes_sent
    };
    assert!(
        total > 4 * 16 * 1024,
        "the test needs an index much bigger than the window ({total} bytes)"
    );
    let (ix, files) = build_tree(10, 5_000, 0, scattered_size);
    let mut sharer = Sharer::new(ix, files, config);
    let mut v = visitor(true, None, Index::new());
    v.storage_stalled = true;
    let mut net = Net::new(3, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 2_000);
    let sent = sharer.session.stats().batch_bytes_sent;
    // At most the window plus the batch that crossed it (retransmissions aside).
    let retrans = sharer.session.stats().retransmits;
    assert!(
        sent <= 16 * 1024 + 8 * 1024 + retrans * 8 * 1024,
        "sent {sent} bytes unacknowledged"
    );
    assert!(!v.receiver.progress().complete);
    assert_eq!(sharer.session.acked(), Seq(0));
    v.storage_stalled = false;
    progress(&mut net, &mut sharer, &mut v, 60_000);
    assert!(v.receiver.progress().complete);
    assert_same_index(&sharer.index, v.receiver.index());
    assert_eq!(sharer.session.acked(), sharer.index.log_end());
}

#[test]
fn a_reconnecting_receiver_gets_only_what_came_after() {
    let (ix, files) = build_tree(40, 500, 0, |_| 3);
    let mut sharer = Sharer::new(ix, files, SenderConfig::default());
    let mut v = visitor(true, None, Index::new());
    let mut net = Net::new(5, LinkModel::PERFECT);
    // Persist only the first few batches, then "close the tab".
    let mut applied = 0;
    while applied < 3 {
        progress(&mut net, &mut sharer, &mut v, 1);
        applied = v.stored.len();
    }
    v.storage_stalled = true;
    progress(&mut net, &mut sharer, &mut v, 100);
    let stored = v.stored.clone();
    assert!(!stored.is_empty());

    // Reopen: rebuild the index from storage (core's rebuild), resume at its end.
    let rebuilt = v.rebuilt();
    let (epoch, end) = rebuilt.resume.expect("the store is a clean prefix");
    assert_eq!(epoch, sharer.index.epoch());
    let cached = rebuilt.index.len();
    sharer.session = SenderSession::new(SenderConfig::default());
    let mut v2 = Visitor::new(rebuilt, ReceiverConfig::default(), true);
    let mut net2 = Net::new(6, LinkModel::PERFECT);
    progress(&mut net2, &mut sharer, &mut v2, 60_000);
    assert_eq!(v2.fresh_starts, 0, "must resume, not start over");
    assert_same_index(&sharer.index, v2.receiver.index());
    let ops_sent = sharer.session.stats().ops_sent;
    assert_eq!(
        ops_sent,
        sharer.index.log_end().0 - end.0,
        "only the missing ops are sent"
    );
    assert!(cached > 0 && (ops_sent as usize) < sharer.index.entries() as usize);
}

#[test]
fn a_receiver_from_another_epoch_starts_over() {
    let (ix, files) = build_tree(5, 50, 0, |_| 3);
    let mut sharer = Sharer::new(ix, files, SenderConfig::default());
    // A stale index from a previous run of the share.
    let (old, _) = build_tree(2, 3, 0, |_| 1);
    let mut stale = Index::new();
    let mut enc = BatchEncoder::new(Seq(0), 60_000);
    for id in 0..old.next_id().0 {
        assert!(enc.push_upsert(&old.view(EntryId(id)).unwrap()));
    }
    stale.apply_batch(&enc.finish(9, true)).unwrap();
    let mut v = visitor(true, Some((Epoch(999), Seq(9))), stale);
    let mut net = Net::new(8, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 60_000);
    assert_eq!(v.fresh_starts, 1, "the stale cache must be dropped");
    assert_same_index(&sharer.index, v.receiver.index());
}

fn read_all(v: &mut Visitor, entry: EntryId) -> ReadHandle {
    let size = v.receiver.index().get(entry).unwrap().size;
    v.receiver.start_read(entry, None, 0, size).unwrap()
}

#[test]
fn reads_verify_and_arrive_whole_over_a_bad_link() {
    let (ix, files) = build_tree(4, 5, 0, |i| {
        [0u64, 1, 61_392, 61_393, 1 << 20, 3_333_333][i as usize % 6]
    });
    let config = SenderConfig {
        retransmit_ms: 300,
        ..SenderConfig::default()
    };
    let mut sharer = Sharer::new(ix, files.clone(), config);
    let mut v = Visitor::new(
        Rebuilt::default(),
        ReceiverConfig {
            retry_ms: 400,
            max_retries: 50,
            ..ReceiverConfig::default()
        },
        false,
    );
    let mut net = Net::new(11, LinkModel::BAD);
    progress(&mut net, &mut sharer, &mut v, 600_000);
    assert!(v.receiver.progress().complete);
    let mut handles = Vec::new();
    for (id, bytes) in &files {
        handles.push((read_all(&mut v, *id), bytes.clone()));
    }
    progress(&mut net, &mut sharer, &mut v, 3_600_000);
    assert!(v.failed.is_empty(), "{:?}", v.failed);
    for (h, want) in handles {
        assert!(v.done.contains(&h), "read {h:?} did not finish");
        let got = v.reads.remove(&h).unwrap_or_default();
        assert!(
            got == want,
            "read {h:?}: {} bytes, want {}",
            got.len(),
            want.len()
        );
    }
}

#[test]
fn a_small_read_is_not_stuck_behind_a_big_one() {
    let (ix, files) = build_tree(1, 2, 0, |i| if i == 0 { 64 << 20 } else { 100 });
    let mut sharer = Sharer::new(ix, files, SenderConfig::default());
    let mut v = visitor(false, None, Index::new());
    let mut net = Net::new(12, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 10_000);
    let idx = v.receiver.index_mut();
    let big = idx.lookup(b"dir 0000/file-00000.txt").unwrap();
    let small = idx.lookup(b"dir 0000/file-00001.txt").unwrap();
    let hb = read_all(&mut v, big);
    // Let the big read get going, then ask for the small file.
    progress(&mut net, &mut sharer, &mut v, 3);
    let hs = read_all(&mut v, small);
    progress(&mut net, &mut sharer, &mut v, 10);
    assert!(
        v.done.contains(&hs),
        "small read must finish within a few round trips"
    );
    assert!(!v.done.contains(&hb), "the big read is still running");
    progress(&mut net, &mut sharer, &mut v, 600_000);
    assert!(v.done.contains(&hb));
    assert_eq!(v.reads[&hb].len(), 64 << 20);
}

#[test]
fn a_big_read_over_a_slow_link_is_not_given_up_while_data_keeps_coming() {
    // 200 KB/s: the last of 8 MiB of requests in flight waits ~40 s for its
    // first byte, far past retry_ms, while the link is busy with the others.
    let slow = LinkModel {
        latency_ms: 10,
        bytes_per_ms: 200,
        ..LinkModel::PERFECT
    };
    let (ix, files) = build_tree(1, 1, 0, |_| 12 << 20);
    let mut sharer = Sharer::new(ix, files, SenderConfig::default());
    let mut v = visitor(false, None, Index::new());
    let mut net = Net::new(17, slow);
    progress(&mut net, &mut sharer, &mut v, 10_000);
    let big = v
        .receiver
        .index_mut()
        .lookup(b"dir 0000/file-00000.txt")
        .unwrap();
    let h = read_all(&mut v, big);
    progress(&mut net, &mut sharer, &mut v, 600_000);
    assert_eq!(v.failed, Vec::new(), "the read must not time out");
    assert!(v.done.contains(&h));
    assert_eq!(v.reads[&h].len(), 12 << 20);
    // Nothing was asked twice: every byte crossed the slow link once.
    assert!(
        net.to_receiver.bytes < (13 << 20),
        "{} bytes sent for a 12 MiB read",
        net.to_receiver.bytes
    );
}

#[test]
fn a_big_read_survives_one_quiet_spell_of_the_link() {
    // Broke in the browser: SCTP backing off after losses kept a 64 MiB read's
    // link quiet for a little over retry_ms once; each of its many requests in
    // flight counted as a retry of the read, which failed at once with 'the
    // sharer did not answer the read'. One quiet spell is one retry.
    let link = LinkModel {
        latency_ms: 5,
        bytes_per_ms: 20_000,
        ..LinkModel::PERFECT
    };
    let (ix, files) = build_tree(1, 1, 0, |_| 64 << 20);
    let want = files.values().next().unwrap().clone();
    let mut sharer = Sharer::new(ix, files, SenderConfig::default());
    let mut v = visitor(false, None, Index::new());
    let mut net = Net::new(19, link);
    progress(&mut net, &mut sharer, &mut v, 10_000);
    let big = v
        .receiver
        .index_mut()
        .lookup(b"dir 0000/file-00000.txt")
        .unwrap();
    let h = read_all(&mut v, big);
    progress(&mut net, &mut sharer, &mut v, 200);
    assert!(
        !v.reads.get(&h).is_none_or(Vec::is_empty),
        "the read got going"
    );
    let config = ReceiverConfig::default();
    let until = net.now + config.retry_ms + 1_000;
    net.to_receiver.pause_until(until);
    net.to_sender.pause_until(until);
    progress(&mut net, &mut sharer, &mut v, 600_000);
    assert_eq!(
        v.failed,
        Vec::new(),
        "one quiet spell must not fail the read"
    );
    assert!(v.done.contains(&h));
    assert!(v.reads[&h] == want, "the bytes read are the file's");
}

#[test]
fn a_file_changed_on_disk_fails_the_read_with_a_clear_error() {
    let (ix, files) = build_tree(1, 3, 0, |_| 200_000);
    let mut sharer = Sharer::new(ix, files, SenderConfig::default());
    let mut v = visitor(false, None, Index::new());
    let mut net = Net::new(13, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 10_000);
    let id = v
        .receiver
        .index_mut()
        .lookup(b"dir 0000/file-00001.txt")
        .unwrap();
    sharer.changed_on_disk.push(id);
    let h = read_all(&mut v, id);
    progress(&mut net, &mut sharer, &mut v, 10_000);
    let (fh, err) = &v.failed[0];
    assert_eq!(*fh, h);
    assert!(
        matches!(err, ReadFailure::Refused(_, ReadErrorCode::Changed)),
        "{err:?}"
    );
    assert!(err.to_string().contains("changed"), "{err}");
    assert!(
        !v.reads.contains_key(&h),
        "no bytes of a changed file are delivered"
    );
}

#[test]
fn a_corrupted_chunk_is_never_delivered() {
    let (ix, files) = build_tree(1, 1, 0, |_| 300_000);
    let mut sharer = Sharer::new(ix, files, SenderConfig::default());
    let mut v = visitor(false, None, Index::new());
    let mut net = Net::new(14, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 10_000);
    let id = v
        .receiver
        .index_mut()
        .lookup(b"dir 0000/file-00000.txt")
        .unwrap();
    let h = read_all(&mut v, id);
    let mut chunks = 0;
    progress_with(&mut net, &mut sharer, &mut v, 10_000, |_, f| {
        if f[0] == FRAME_READ_CHUNK {
            chunks += 1;
            if chunks == 3 {
                let last = f.len() - 1;
                f[last] ^= 0x80;
            }
        }
    });
    assert_eq!(v.failed.len(), 1);
    assert_eq!(v.failed[0], (h, ReadFailure::Corrupt));
    // Only the two chunks before the damaged one were delivered.
    assert_eq!(
        v.reads.get(&h).map_or(0, Vec::len),
        2 * linkfs_proto::CHUNK_LEN
    );
}

/// The receiver's index takes file `id`'s next generation, `grown` bytes
/// longer and a second later (as a batch from the sharer would bring it).
fn next_version_arrives(v: &mut Visitor, id: EntryId, grown: u64) {
    let e = v.receiver.index().get(id).unwrap();
    let (parent, name, size, mtime, mode, generation) = (
        e.parent,
        e.name.to_vec(),
        e.size,
        e.mtime,
        e.mode,
        e.generation,
    );
    v.receiver
        .index_mut()
        .apply(linkfs_proto::OpView::Upsert(EntryView {
            id,
            parent,
            kind: EntryKind::File,
            name: &name,
            size: size + grown,
            mtime: mtime + i64::from(grown > 0),
            mode,
            generation: Generation(generation.0 + 1),
            target: b"",
        }))
        .unwrap();
}

#[test]
fn a_read_of_an_old_version_is_refused() {
    let (ix, files) = build_tree(1, 1, 0, |_| 10);
    let mut sharer = Sharer::new(ix, files, SenderConfig::default());
    let mut v = visitor(false, None, Index::new());
    let mut net = Net::new(15, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 10_000);
    // Pretend the receiver holds generation 1 of the file (a newer one than the sharer).
    let id = v
        .receiver
        .index_mut()
        .lookup(b"dir 0000/file-00000.txt")
        .unwrap();
    next_version_arrives(&mut v, id, 0);
    read_all(&mut v, id);
    progress(&mut net, &mut sharer, &mut v, 10_000);
    assert!(
        matches!(&v.failed[0].1, ReadFailure::Refused(m, ReadErrorCode::Changed) if m.contains("version"))
    );
}

#[test]
fn a_read_of_a_version_the_index_moved_past_is_refused_before_it_is_asked() {
    let (ix, files) = build_tree(1, 1, 0, |_| 10);
    let mut sharer = Sharer::new(ix, files, SenderConfig::default());
    let mut v = visitor(false, None, Index::new());
    let mut net = Net::new(16, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 10_000);
    let id = v
        .receiver
        .index_mut()
        .lookup(b"dir 0000/file-00000.txt")
        .unwrap();
    let (listed, size) = v
        .receiver
        .index()
        .get(id)
        .map(|e| (e.generation, e.size))
        .unwrap();
    // The sharer's next version arrives between a download's pieces.
    next_version_arrives(&mut v, id, 5);
    let refused = v
        .receiver
        .start_read(id, Some(listed), 5, 5)
        .expect_err("a piece of the version listed, after the index moved on");
    assert_eq!(
        refused,
        StartReadError::Changed {
            asked: listed.0,
            now: listed.0 + 1
        }
    );
    assert!(
        refused.to_string().contains("since it was listed"),
        "{refused}"
    );
    // The version the index holds starts, and so does a read of no version.
    let now = Generation(listed.0 + 1);
    v.receiver
        .start_read(id, Some(now), 0, size + 5)
        .expect("the version the index holds");
    v.receiver.start_read(id, None, 0, 1).expect("any version");
}

#[test]
fn unsafe_names_are_refused_and_the_rest_applies() {
    let mut enc = BatchEncoder::new(Seq(0), 60_000);
    let mk = |id: u32, parent: u32, kind: EntryKind, name: &'static [u8]| EntryView {
        id: EntryId(id),
        parent: EntryId(parent),
        kind,
        name,
        size: 1,
        mtime: 0,
        mode: 0o644,
        generation: Generation(0),
        target: b"",
    };
    for e in [
        mk(0, 0, EntryKind::Dir, b"root"),
        mk(1, 0, EntryKind::File, b".."),
        mk(2, 0, EntryKind::File, b"a/b"),
        mk(3, 0, EntryKind::File, b""),
        mk(4, 0, EntryKind::File, b"ok.txt"),
        mk(5, 4, EntryKind::File, b"under-a-file"),
        mk(6, 0, EntryKind::File, b"nul\0"),
    ] {
        assert!(enc.push_upsert(&e));
    }
    let mut ix = Index::new();
    let (_, refused) = ix.apply_batch(&enc.finish(7, true)).unwrap();
    assert_eq!(refused.len(), 5, "{refused:?}");
    assert!(
        refused
            .iter()
            .any(|e| e.to_string().contains("unsafe name"))
    );
    assert_eq!(ix.len(), 2);
    assert!(ix.lookup(b"ok.txt").is_some());
    assert!(ix.lookup(b"..").is_none());
}

#[test]
fn when_the_sharer_says_goodbye_reads_fail_in_words() {
    let (ix, files) = build_tree(1, 1, 0, |_| 50 << 20);
    let mut sharer = Sharer::new(ix, files, SenderConfig::default());
    let mut v = visitor(false, None, Index::new());
    let mut net = Net::new(16, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 10_000);
    let id = v
        .receiver
        .index_mut()
        .lookup(b"dir 0000/file-00000.txt")
        .unwrap();
    let h = read_all(&mut v, id);
    progress(&mut net, &mut sharer, &mut v, 5);
    sharer.session.close("sharing stopped");
    progress(&mut net, &mut sharer, &mut v, 10_000);
    assert_eq!(
        v.ended,
        Some(EndReason::SharerGoodbye("sharing stopped".into()))
    );
    let (fh, err) = &v.failed[0];
    assert_eq!(*fh, h);
    assert!(err.to_string().contains("stopped sharing"), "{err}");
    assert!(matches!(
        v.receiver.start_read(id, None, 0, 1),
        Err(StartReadError::Closed)
    ));
}

#[test]
fn garbage_from_a_receiver_ends_its_session_without_harm() {
    let (ix, _) = build_tree(1, 1, 0, |_| 1);
    let mut s = SenderSession::new(SenderConfig::default());
    let err = s
        .handle_frame(Millis(0), &[0x11, 0xff, 0xff], &ix)
        .unwrap_err();
    assert!(err.to_string().contains("not valid"), "{err}");
    let goodbye = s
        .poll_transmit(Millis(0), &ix)
        .expect("a goodbye saying why");
    assert_eq!(goodbye[0], linkfs_proto::FRAME_GOODBYE);
    assert!(s.poll_transmit(Millis(0), &ix).is_none());
    assert!(s.is_finished());
}

#[test]
fn a_receiver_of_an_older_protocol_gets_batches_it_can_read_and_a_newer_one_is_told_why_not() {
    let (ix, _) = build_tree(3, 50, 0, u64::from);
    let hello = |version: u16| {
        linkfs_proto::ReceiverToSender::Hello(linkfs_proto::Hello {
            version,
            resume: None,
        })
        .encode()
    };
    for (version, columns) in [(1u16, false), (2, true)] {
        let mut s = SenderSession::new(SenderConfig::default());
        s.handle_frame(Millis(0), &hello(version), &ix).unwrap();
        let (mut welcomed, mut batches, mut ops) = (None, 0, 0);
        while let Some(f) = s.poll_transmit(Millis(0), &ix) {
            match f[0] {
                linkfs_proto::FRAME_WELCOME => {
                    if let Ok(linkfs_proto::SenderToReceiver::Welcome(w)) =
                        linkfs_proto::SenderToReceiver::decode(&f)
                    {
                        welcomed = Some(w.version);
                    }
                }
                linkfs_proto::FRAME_INDEX_BATCH => {
                    let r = linkfs_proto::BatchReader::new(&f).unwrap();
                    assert_eq!(r.in_columns(), columns, "version {version}");
                    batches += 1;
                    ops += linkfs_proto::decode_batch(&f).unwrap().1.len();
                }
                _ => {}
            }
        }
        assert_eq!(
            welcomed,
            Some(version),
            "the welcome speaks the receiver's version"
        );
        assert!(
            batches > 0 && ops as u64 == ix.entries(),
            "version {version}: {ops} of {} entries",
            ix.entries()
        );
    }
    let mut s = SenderSession::new(SenderConfig::default());
    let err = s
        .handle_frame(Millis(0), &hello(linkfs_proto::PROTOCOL_VERSION + 1), &ix)
        .unwrap_err();
    assert!(err.to_string().contains("update the older"), "{err}");
}

#[test]
fn reads_are_checked_before_they_are_queued() {
    let (ix, _) = build_tree(1, 1, 0, |_| 10);
    let mut s = SenderSession::new(SenderConfig::default());
    s.handle_frame(
        Millis(0),
        &linkfs_proto::ReceiverToSender::Hello(linkfs_proto::Hello {
            version: 1,
            resume: None,
        })
        .encode(),
        &ix,
    )
    .unwrap();
    let mut read = |entry: u32, offset: u64, len: u32| {
        let req = linkfs_proto::ReceiverToSender::Read(linkfs_proto::ReadRequest {
            read: linkfs_proto::ReadId(entry * 100 + len),
            entry: EntryId(entry),
            generation: Generation(0),
            offset,
            len,
        });
        s.handle_frame(Millis(0), &req.encode(), &ix).unwrap();
    };
    read(1, 0, 1); // a directory
    read(2, 5, 6); // past the end of a 10-byte file
    read(77, 0, 1); // not in the index
    read(2, 0, 0); // empty
    let mut codes = Vec::new();
    while let Some(f) = s.poll_transmit(Millis(0), &ix) {
        if let Ok(linkfs_proto::SenderToReceiver::ReadError(e)) =
            linkfs_proto::SenderToReceiver::decode(&f)
        {
            codes.push(e.code);
        }
    }
    assert_eq!(
        codes,
        vec![
            ReadErrorCode::NotAFile,
            ReadErrorCode::BadRange,
            ReadErrorCode::NoSuchEntry,
            ReadErrorCode::BadRange
        ]
    );
    assert!(s.poll_io().is_none(), "nothing invalid reaches the disk");
}
