//! Byte-exact test vectors for every frame, annotated. The same vectors are
//! decoded by the wasm build in the browser (see core-wasm's self-test).

use linkfs_proto::*;

fn hex(s: &str) -> Vec<u8> {
    let clean: String = s.split_whitespace().collect();
    hex::decode(clean).expect("test vector is valid hex")
}

fn r2s(bytes: &str, msg: ReceiverToSender) {
    let b = hex(bytes);
    assert_eq!(
        hex::encode(msg.encode()),
        hex::encode(&b),
        "encoding {msg:?}"
    );
    assert_eq!(ReceiverToSender::decode(&b).unwrap(), msg);
}

fn s2r(bytes: &str, msg: SenderToReceiver<'_>) {
    let b = hex(bytes);
    assert_eq!(
        hex::encode(msg.encode()),
        hex::encode(&b),
        "encoding {msg:?}"
    );
    assert_eq!(SenderToReceiver::decode(&b).unwrap(), msg);
}

#[test]
fn hello_fresh() {
    r2s(
        "02      \
         01      \
         00",
        ReceiverToSender::Hello(Hello {
            version: 1,
            resume: None,
        }),
    );
    // type Hello | version 1 | no resume
}

#[test]
fn hello_resume() {
    // type | version 1 | resume | epoch (u64 LE) | next seq 300 (varint ac 02)
    r2s(
        "02 01 01 0807060504030201 ac02",
        ReceiverToSender::Hello(Hello {
            version: 1,
            resume: Some((Epoch(0x0102_0304_0506_0708), Seq(300))),
        }),
    );
}

#[test]
fn welcome() {
    // type | version 1 | epoch LE | start 0 | max_read 1 MiB (80 80 40) | 64 reads
    s2r(
        "01 01 0102030405060708 00 808040 40",
        SenderToReceiver::Welcome(Welcome {
            version: 1,
            epoch: Epoch(0x0807_0605_0403_0201),
            start: Seq(0),
            max_read: 1 << 20,
            max_reads_in_flight: 64,
        }),
    );
}

#[test]
fn ack() {
    r2s("11 ac02", ReceiverToSender::Ack { next: Seq(300) });
}

#[test]
fn read_request() {
    // type | read 7 | entry 5 | generation 0 | offset 65536 (80 80 04) | len 61392 (d0 df 03)
    r2s(
        "22 07 05 00 808004 d0df03",
        ReceiverToSender::Read(ReadRequest {
            read: ReadId(7),
            entry: EntryId(5),
            generation: Generation(0),
            offset: 65536,
            len: 61392,
        }),
    );
}

#[test]
fn cancel_read() {
    r2s("23 07", ReceiverToSender::CancelRead { read: ReadId(7) });
}

#[test]
fn read_chunk_and_its_hash() {
    let hash = chunk_hash(EntryId(5), Generation(0), 0, b"abc");
    // The hash definition is part of the wire: it must not drift. (Checked
    // against the Python blake3 package: derive_key_context + the same bytes.)
    assert_eq!(
        hex::encode(hash),
        "3791ab666ebc25dba028016f29c15fc2d79ff923657ab22ad7427b813cee3038"
    );
    // type | read 7 | offset 0 | hash[32] | data "abc"
    let frame = format!("20 07 00 {} 616263", hex::encode(hash));
    s2r(
        &frame,
        SenderToReceiver::ReadChunk(ReadChunk {
            read: ReadId(7),
            offset: 0,
            hash,
            data: b"abc",
        }),
    );
    // The hash binds entry, generation and offset.
    assert_ne!(hash, chunk_hash(EntryId(6), Generation(0), 0, b"abc"));
    assert_ne!(hash, chunk_hash(EntryId(5), Generation(1), 0, b"abc"));
    assert_ne!(hash, chunk_hash(EntryId(5), Generation(0), 1, b"abc"));
}

#[test]
fn read_error() {
    // type | read 7 | code 3 (changed) | "gone"
    s2r(
        "21 07 03 04 676f6e65",
        SenderToReceiver::ReadError(ReadError {
            read: ReadId(7),
            code: ReadErrorCode::Changed,
            message: "gone".into(),
        }),
    );
}

#[test]
fn goodbye_both_ways() {
    let g = Goodbye {
        code: GoodbyeCode::ShuttingDown,
        message: "bye".into(),
    };
    s2r("7f 01 03 627965", SenderToReceiver::Goodbye(g.clone()));
    r2s("7f 01 03 627965", ReceiverToSender::Goodbye(g));
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
fn index_batch() {
    let ops = vec![
        IndexOp::Upsert(entry(0, 0, EntryKind::Dir, b"r", 0, 1_700_000_000, 0o755)),
        IndexOp::Upsert(entry(
            1,
            0,
            EntryKind::File,
            b"a.txt",
            5,
            1_700_000_001,
            0o644,
        )),
        IndexOp::Upsert(entry(
            2,
            0,
            EntryKind::File,
            b"ab.txt",
            300,
            1_699_999_999,
            0o644,
        )),
        IndexOp::Remove(EntryId(9)),
    ];
    let mut enc = BatchEncoder::new(Seq(0), MAX_FRAME_LEN);
    for op in &ops {
        let ok = match op {
            IndexOp::Upsert(e) => enc.push_upsert(&view(e)),
            IndexOp::Remove(id) => enc.push_remove(*id),
        };
        assert!(ok);
    }
    let frame = enc.finish(3, true);
    let expected = hex("10                 \
         00                 \
         03                 \
         01                 \
         00                 \
         80c49fd50c         \
         02 ed03 a403       \
         04                 \
         01 00 00 01 72 00  \
         10 00 00 05 612e747874 05 02 \
         10 00 01 05 622e747874 ac02 03 \
         07 0c");
    // 10            type IndexBatch
    // 00            first seq 0
    // 03            known: 3 entries found so far
    // 01            flags: snapshot complete
    // 00            first id 0
    // 80c49fd50c    base mtime 1700000000 (zigzag varint)
    // 02 ed03 a403  mode table: 0755, 0644
    // 04            4 ops
    // 01|00|00 01 72|00          dir, mode#0 | parent +0 | "r" | mtime +0
    // 10|00|00 05 a.txt|05|02    file, mode#1 | parent +0 | "a.txt" | size 5 | mtime +1
    // 10|00|01 05 b.txt|ac02|03  file, mode#1 | parent +0 | "a"+"b.txt" | size 300 | mtime -2
    // 07 0c                      remove, explicit id: 9 = (2 + 1) + 6
    assert_eq!(hex::encode(&frame), hex::encode(&expected));
    let (header, decoded) = decode_batch(&frame).unwrap();
    assert_eq!(
        header,
        BatchHeader {
            first: Seq(0),
            known: 3,
            snapshot_complete: true,
            ops: 4
        }
    );
    assert_eq!(decoded, ops);
    assert!(matches!(
        SenderToReceiver::decode(&frame).unwrap(),
        SenderToReceiver::IndexBatch { header: h, .. } if h.end() == Seq(4)
    ));
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
