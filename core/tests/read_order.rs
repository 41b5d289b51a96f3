//! In what order a sharer's session serves the reads it has queued, as the
//! shell sees it: the drive loop takes a frame only when the link has room, so
//! what waits in the session's queues waits for the path.

use linkfs_core::{Millis, NewEntry, ReadIo, SHORT_READ, SenderConfig, SenderSession, ShareIndex};
use linkfs_proto::{
    EntryId, EntryKind, Epoch, Generation, Hello, PROTOCOL_VERSION, ReadId, ReadRequest,
    ReceiverToSender, SenderToReceiver,
};

const BIG: u64 = 64 << 20;
const SMALL: u64 = 3_000;

/// A share of a big file (id 1) and a small one (id 2).
fn share() -> ShareIndex {
    let mut ix = ShareIndex::new(Epoch(1));
    for (id, kind, name, size) in [
        (0, EntryKind::Dir, "root", 0),
        (1, EntryKind::File, "big.bin", BIG),
        (2, EntryKind::File, "small.txt", SMALL),
    ] {
        ix.push(&NewEntry {
            id: EntryId(id),
            parent: EntryId::ROOT,
            kind,
            name: name.as_bytes(),
            size,
            mtime: 1,
            mtime_nsec: 0,
            mode: 0o644,
            target: b"",
            dev: 1,
            ino: u64::from(id),
            ctime_ns: 1,
        })
        .unwrap();
    }
    ix.mark_snapshot_complete();
    ix
}

fn open_session(ix: &ShareIndex) -> SenderSession {
    let mut s = SenderSession::new(SenderConfig::default());
    let hello = ReceiverToSender::Hello(Hello {
        version: PROTOCOL_VERSION,
        resume: None,
    })
    .encode();
    s.handle_frame(Millis(0), &hello, ix).unwrap();
    // The welcome and the whole index go out first.
    while s.poll_transmit(Millis(0), ix).is_some() {}
    s
}

fn ask(s: &mut SenderSession, ix: &ShareIndex, read: u32, entry: u32, offset: u64, len: u64) {
    let frame = ReceiverToSender::Read(ReadRequest {
        read: ReadId(read),
        entry: EntryId(entry),
        generation: Generation(0),
        offset,
        len: len as u32,
    })
    .encode();
    s.handle_frame(Millis(0), &frame, ix).unwrap();
}

/// Does every piece of IO the session asks for, as a shell with a fast disk.
fn serve_io(s: &mut SenderSession) {
    while let Some(io) = s.poll_io() {
        let data = vec![byte_of(&io); io.len as usize];
        s.handle_io(&io, Ok(data));
    }
}

fn byte_of(io: &ReadIo) -> u8 {
    io.entry.0 as u8
}

/// The read each chunk frame the session sends next belongs to, in order.
fn next_chunks(s: &mut SenderSession, ix: &ShareIndex, n: usize) -> Vec<ReadId> {
    let mut reads = Vec::new();
    while reads.len() < n {
        serve_io(s);
        let Some(frame) = s.poll_transmit(Millis(0), ix) else {
            break;
        };
        if let Ok(SenderToReceiver::ReadChunk(c)) = SenderToReceiver::decode(&frame) {
            reads.push(c.read);
        }
    }
    reads
}

#[test]
fn a_small_file_asked_for_during_a_bulk_read_goes_ahead_of_the_bulk_reads_queued_chunks() {
    let ix = share();
    let mut s = open_session(&ix);
    // A bulk read of the big file, 1 MiB requests, as a receiver keeps them in flight.
    for i in 0..8u32 {
        ask(&mut s, &ix, 10 + i, 1, u64::from(i) << 20, 1 << 20);
    }
    // The bulk read is under way: its queue of chunks is full, the link is busy.
    assert_eq!(next_chunks(&mut s, &ix, 3).len(), 3);
    serve_io(&mut s);
    ask(&mut s, &ix, 99, 2, 0, SMALL);
    let order = next_chunks(&mut s, &ix, 4);
    assert_eq!(
        order.first(),
        Some(&ReadId(99)),
        "the small file's chunk is the next to go, not after the queued bulk chunks: {order:?}"
    );
    // The bulk read goes on after it.
    assert!(
        order[1..].iter().all(|r| r.0 >= 10 && r.0 < 18),
        "{order:?}"
    );
}

#[test]
fn short_reads_first_never_starves_a_bulk_read_of_its_bytes() {
    // Many small reads queued with a bulk one: every byte of every read still
    // goes out, the bulk read's too, and nothing is sent twice.
    let ix = share();
    let mut s = open_session(&ix);
    ask(&mut s, &ix, 1, 1, 0, 1 << 20);
    for i in 0..50u32 {
        ask(&mut s, &ix, 100 + i, 2, 0, SMALL);
    }
    let mut bytes: std::collections::HashMap<u32, u64> = Default::default();
    loop {
        serve_io(&mut s);
        let Some(frame) = s.poll_transmit(Millis(0), &ix) else {
            break;
        };
        if let Ok(SenderToReceiver::ReadChunk(c)) = SenderToReceiver::decode(&frame) {
            *bytes.entry(c.read.0).or_default() += c.data.len() as u64;
        }
    }
    assert_eq!(
        bytes.get(&1),
        Some(&(1 << 20)),
        "the bulk read arrived whole"
    );
    for i in 0..50u32 {
        assert_eq!(bytes.get(&(100 + i)), Some(&SMALL), "small read {i}");
    }
    const { assert!(SMALL <= SHORT_READ && (1 << 20) > SHORT_READ) };
}

#[test]
fn a_files_reads_end_in_the_order_of_their_bytes() {
    // A download keeps several pieces of one file in flight and writes them
    // in order: the first must not end last, even when it was asked for
    // last (a hole asked for again). Regression: the reads of one
    // file were served turn by turn, so all of them ended together and the
    // download's pipeline emptied while it waited for its first piece.
    let ix = share();
    let mut s = open_session(&ix);
    for i in [1u32, 2, 0, 3, 4, 5] {
        ask(&mut s, &ix, 10 + i, 1, u64::from(i) << 20, 1 << 20);
    }
    let per_read = (1u64 << 20).div_ceil(linkfs_proto::CHUNK_LEN as u64) as usize;
    let order = next_chunks(&mut s, &ix, 6 * per_read);
    assert_eq!(order.len(), 6 * per_read);
    let ends: Vec<u32> = (0..6u32)
        .map(|i| {
            order
                .iter()
                .rposition(|r| r.0 == 10 + i)
                .expect("every read sent") as u32
        })
        .collect();
    assert!(
        ends.windows(2).all(|w| w[0] < w[1]),
        "the reads end in order: {ends:?}"
    );
    assert!(
        order[..per_read].iter().all(|r| r.0 == 10),
        "the first read's bytes come first: {:?}",
        &order[..per_read]
    );
}

#[test]
fn a_small_file_still_gets_its_turn_beside_a_files_many_reads() {
    let ix = share();
    let mut s = open_session(&ix);
    for i in 0..8u32 {
        ask(&mut s, &ix, 10 + i, 1, u64::from(i) << 20, 1 << 20);
    }
    assert_eq!(next_chunks(&mut s, &ix, 3).len(), 3);
    ask(&mut s, &ix, 99, 2, 0, SMALL);
    let order = next_chunks(&mut s, &ix, 8);
    assert!(order.contains(&ReadId(99)), "{order:?}");
}

/// A long read's chunks are marked bulk (a shell with lanes keeps them off
/// the session's own link); a small file's chunks, the index and every other
/// frame are not, so they never wait there behind a bulk packet's repair.
#[test]
fn only_long_reads_chunks_are_bulk() {
    use linkfs_core::SenderOutput;
    let ix = share();
    let mut s = SenderSession::new(SenderConfig::default());
    let hello = ReceiverToSender::Hello(Hello {
        version: PROTOCOL_VERSION,
        resume: None,
    })
    .encode();
    s.handle_frame(Millis(0), &hello, &ix).unwrap();
    ask(&mut s, &ix, 10, 1, 0, 1 << 20);
    ask(&mut s, &ix, 99, 2, 0, SMALL);
    let (mut bulk, mut other) = (Vec::new(), Vec::new());
    loop {
        match s.poll_output(Millis(0), &ix, true) {
            SenderOutput::Read(io) => {
                let data = vec![byte_of(&io); io.len as usize];
                s.handle_io(&io, Ok(data));
            }
            SenderOutput::Transmit(f) => other.push(f),
            SenderOutput::TransmitBulk(f) => bulk.push(f),
            SenderOutput::Wait(_) => break,
            o => panic!("{o:?}"),
        }
    }
    let bulk: Vec<_> = bulk
        .iter()
        .map(|f| SenderToReceiver::decode(f).unwrap())
        .collect();
    let other: Vec<_> = other
        .iter()
        .map(|f| SenderToReceiver::decode(f).unwrap())
        .collect();
    let long_bytes: usize = bulk
        .iter()
        .map(|f| match f {
            SenderToReceiver::ReadChunk(c) if c.read == ReadId(10) => c.data.len(),
            f => panic!("a frame marked bulk that is not the long read's chunk: {f:?}"),
        })
        .sum();
    assert_eq!(
        long_bytes,
        1 << 20,
        "every byte of the long read, marked bulk"
    );
    let small: Vec<_> = other
        .iter()
        .filter_map(|f| match f {
            SenderToReceiver::ReadChunk(c) => Some(c.read),
            _ => None,
        })
        .collect();
    assert_eq!(
        small,
        vec![ReadId(99)],
        "the small file's one chunk, not bulk"
    );
    assert!(
        other
            .iter()
            .any(|f| matches!(f, SenderToReceiver::Welcome(_))),
        "the welcome is not bulk"
    );
}
