//! A chunk held up on one of several connections (a lane waiting out a
//! retransmission timeout) while later bytes of its file came: it is asked
//! for again after `hedge_ms`, the read completes with the right bytes, and
//! the late copy changes nothing.

use linkfs_core::{
    Index, Millis, NewEntry, ReadEvent, ReadHandle, Receiver, ReceiverConfig, ReceiverEvent,
    SenderConfig, SenderSession, ShareIndex,
};
use linkfs_proto::frame::encode_chunk_into;
use linkfs_proto::{
    CHUNK_LEN, EntryId, EntryKind, Epoch, Generation, ReadChunk, ReadId, ReadRequest,
    ReceiverToSender, chunk_hash,
};

const FILE: EntryId = EntryId(1);
const SIZE: u64 = 4 * CHUNK_LEN as u64;

fn share() -> ShareIndex {
    let mut ix = ShareIndex::new(Epoch(3));
    for (id, kind, size) in [(0, EntryKind::Dir, 0), (1, EntryKind::File, SIZE)] {
        ix.push(&NewEntry {
            id: EntryId(id),
            parent: EntryId::ROOT,
            kind,
            name: if id == 0 { b"root" } else { b"big.bin" },
            size,
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

fn byte_at(offset: u64) -> u8 {
    (offset % 251) as u8
}

fn chunk(read: ReadId, offset: u64) -> Vec<u8> {
    let len = (SIZE - offset).min(CHUNK_LEN as u64);
    let data: Vec<u8> = (offset..offset + len).map(byte_at).collect();
    let mut frame = Vec::new();
    encode_chunk_into(
        &mut frame,
        &ReadChunk {
            read,
            offset,
            hash: chunk_hash(FILE, Generation(0), offset, &data),
            data: &data,
        },
    );
    frame
}

/// A receiver that holds the index, reading the whole file: the request it sent.
fn reading(config: ReceiverConfig) -> (Receiver, ReadHandle, ReadRequest) {
    let mut r = welcomed(config);
    let handle = r.start_read(FILE, None, 0, SIZE).unwrap();
    let request = requests(&mut r, Millis(0));
    assert_eq!(request.len(), 1, "one request for the whole file");
    (r, handle, request[0])
}

/// A receiver that holds the index.
fn welcomed(config: ReceiverConfig) -> Receiver {
    let ix = share();
    let mut s = SenderSession::new(SenderConfig::default());
    let mut r = Receiver::new(config, Index::new(), None);
    loop {
        let mut moved = false;
        while let Some(f) = r.poll_transmit(Millis(0)) {
            let _ = s.handle_frame(Millis(0), &f, &ix);
            moved = true;
        }
        while let Some(f) = s.poll_transmit(Millis(0), &ix) {
            r.handle_frame(Millis(0), &f);
            moved = true;
        }
        if !moved {
            return r;
        }
    }
}

fn requests(r: &mut Receiver, now: Millis) -> Vec<ReadRequest> {
    std::iter::from_fn(|| r.poll_transmit(now))
        .filter_map(|f| match ReceiverToSender::decode(&f) {
            Ok(ReceiverToSender::Read(q)) => Some(q),
            _ => None,
        })
        .collect()
}

/// The bytes delivered so far, and whether the read is done (or failed: panics).
fn delivered(r: &mut Receiver, into: &mut Vec<u8>) -> bool {
    let mut done = false;
    while let Some(e) = r.poll_event() {
        match e {
            ReceiverEvent::Read(ReadEvent::Data { offset, data, .. }) => {
                assert_eq!(offset, into.len() as u64, "bytes in order");
                into.extend_from_slice(&data);
            }
            ReceiverEvent::Read(ReadEvent::Done { .. }) => done = true,
            ReceiverEvent::Read(ReadEvent::Failed { error, .. }) => {
                panic!("the read failed: {error:?}")
            }
            _ => {}
        }
    }
    done
}

#[test]
fn a_chunk_held_up_while_later_ones_came_is_asked_for_again_after_hedge_ms() {
    let config = ReceiverConfig::default();
    let hedge = config.hedge_ms;
    let (mut r, _, first) = reading(config);
    let mut bytes = Vec::new();
    // Chunk 1 is held up; 0, 2 and 3 come.
    let c = CHUNK_LEN as u64;
    for (t, offset) in [(100, 0), (150, 2 * c), (200, 3 * c)] {
        r.handle_frame(Millis(t), &chunk(first.read, offset));
    }
    assert!(!delivered(&mut r, &mut bytes));
    assert_eq!(bytes.len() as u64, c, "only what is in order");
    assert_eq!(
        r.poll_timeout(),
        Some(Millis(100 + hedge)),
        "held up since chunk 0 came"
    );
    r.handle_timeout(Millis(100 + hedge - 1));
    assert!(
        requests(&mut r, Millis(100 + hedge - 1)).is_empty(),
        "not before hedge_ms"
    );
    r.handle_timeout(Millis(100 + hedge));
    let again = requests(&mut r, Millis(100 + hedge));
    assert_eq!(again.len(), 1, "one request for the hole: {again:?}");
    assert_eq!((again[0].offset, again[0].len), (c, CHUNK_LEN as u32));
    assert_ne!(again[0].read, first.read);
    // The late copy on the old request first: dropped, not taken as corrupt.
    r.handle_frame(Millis(700), &chunk(first.read, c));
    assert!(!delivered(&mut r, &mut bytes));
    r.handle_frame(Millis(800), &chunk(again[0].read, c));
    assert!(delivered(&mut r, &mut bytes), "the read completes");
    let want: Vec<u8> = (0..SIZE).map(byte_at).collect();
    assert!(bytes == want, "bytes equal");
    assert_eq!(r.poll_timeout(), None, "nothing left in flight");
}

#[test]
fn chunks_in_order_leave_no_hole_to_ask_for() {
    let (mut r, _, first) = reading(ReceiverConfig::default());
    let mut bytes = Vec::new();
    r.handle_frame(Millis(100), &chunk(first.read, 0));
    r.handle_frame(Millis(100), &chunk(first.read, CHUNK_LEN as u64));
    assert!(!delivered(&mut r, &mut bytes));
    // Only the link-quiet retry is due, seconds away.
    let next = r.poll_timeout().expect("a stall deadline");
    assert!(
        next.0 >= 100 + ReceiverConfig::default().retry_ms,
        "{next:?}"
    );
    r.handle_timeout(Millis(2000));
    assert!(requests(&mut r, Millis(2000)).is_empty());
}

#[test]
fn no_hedging_when_hedge_ms_is_zero() {
    let (mut r, _, first) = reading(ReceiverConfig {
        hedge_ms: 0,
        ..ReceiverConfig::default()
    });
    r.handle_frame(Millis(100), &chunk(first.read, 2 * CHUNK_LEN as u64));
    r.handle_timeout(Millis(3000));
    assert!(requests(&mut r, Millis(3000)).is_empty());
}

#[test]
fn nothing_is_asked_again_while_no_later_bytes_come() {
    // A read waiting its turn on a slow path: no later bytes of the file
    // came, so nothing was overtaken.
    let (mut r, _, first) = reading(ReceiverConfig::default());
    r.handle_frame(Millis(100), &chunk(first.read, 0));
    r.handle_timeout(Millis(3000));
    assert!(requests(&mut r, Millis(3000)).is_empty());
}

#[test]
fn one_hedge_asks_for_at_most_four_chunks_and_the_next_waits_hedge_ms() {
    let config = ReceiverConfig::default();
    let hedge = config.hedge_ms;
    let (mut r, _, first) = reading(config);
    let c = CHUNK_LEN as u64;
    // Only the last chunk came: three are held up before it.
    r.handle_frame(Millis(100), &chunk(first.read, 3 * c));
    // The read started at 0 and never moved: held up since its request went.
    r.handle_timeout(Millis(hedge));
    let again = requests(&mut r, Millis(hedge));
    assert_eq!(
        again.iter().map(|q| (q.offset, q.len)).collect::<Vec<_>>(),
        vec![(0, 3 * CHUNK_LEN as u32)],
        "what is missing before the chunk that came"
    );
    assert!(linkfs_core::HEDGE_MAX_BYTES >= 3 * CHUNK_LEN as u32);
    // Not asked again before another hedge_ms.
    r.handle_timeout(Millis(2 * hedge - 1));
    assert!(requests(&mut r, Millis(2 * hedge - 1)).is_empty());
    let mut bytes = Vec::new();
    for k in 0..3 {
        r.handle_frame(Millis(2 * hedge), &chunk(again[0].read, k * c));
    }
    assert!(delivered(&mut r, &mut bytes), "the read completes");
    assert!(
        bytes == (0..SIZE).map(byte_at).collect::<Vec<u8>>(),
        "bytes equal"
    );
}

#[test]
fn the_tail_of_a_piece_held_up_while_the_next_piece_flows_is_asked_for_again() {
    // `linkfs get` keeps several pieces of a file in flight (each its own
    // read) and writes them in order; the first one's last chunk is held up.
    let config = ReceiverConfig::default();
    let hedge = config.hedge_ms;
    let mut r2 = welcomed(config);
    let c = CHUNK_LEN as u64;
    r2.start_read(FILE, None, 0, 2 * c).unwrap();
    r2.start_read(FILE, None, 2 * c, 2 * c).unwrap();
    let asked = requests(&mut r2, Millis(0));
    assert_eq!(asked.len(), 2, "{asked:?}");
    let (a, b) = (asked[0].read, asked[1].read);
    r2.handle_frame(Millis(100), &chunk(a, 0));
    r2.handle_frame(Millis(150), &chunk(b, 2 * c));
    r2.handle_frame(Millis(200), &chunk(b, 3 * c));
    r2.handle_timeout(Millis(100 + hedge));
    let again = requests(&mut r2, Millis(100 + hedge));
    assert_eq!(
        again.iter().map(|q| (q.offset, q.len)).collect::<Vec<_>>(),
        vec![(c, CHUNK_LEN as u32)],
        "the first piece's tail, nothing of the second"
    );
}
