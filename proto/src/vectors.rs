//! Byte-exact test vectors for every frame, annotated.
//!
//! They live in the library (not only in tests) so that every build checks the
//! same bytes: `cargo test` natively, and the wasm build in the browser through
//! `selfTest()` in core-wasm.

use crate::*;

/// One vector: a name, the frame bytes as annotated hex, and the message.
pub struct Vector {
    pub name: &'static str,
    pub hex: &'static str,
    pub message: Message,
}

/// The message a vector decodes to.
pub enum Message {
    ToSender(ReceiverToSender<'static>),
    /// Any other frame from the sharer.
    FromSender(SenderToReceiver<'static>),
    Welcome(Welcome),
    ReadError(ReadError),
    Goodbye(Goodbye),
    /// The sharer asks for the link's password.
    PasswordNeeded,
    /// A chunk of entry 5, generation 0: the hash is part of the vector.
    Chunk {
        read: ReadId,
        offset: u64,
        data: &'static [u8],
    },
    /// A chunk of an upload of the file "abc": the hash is part of the vector.
    UploadChunk {
        upload: UploadId,
        offset: u64,
        data: &'static [u8],
    },
    /// An index batch, with its operations; `columns`: in columns (protocol 2).
    Batch {
        header: BatchHeader,
        ops: Vec<IndexOp>,
        columns: bool,
    },
}

fn file(id: u32, name: &[u8], size: u64, mtime: i64) -> IndexOp {
    IndexOp::Upsert(Entry {
        id: EntryId(id),
        parent: EntryId(0),
        kind: EntryKind::File,
        name: name.to_vec(),
        size,
        mtime,
        mode: 0o644,
        generation: Generation(0),
        target: Vec::new(),
    })
}

/// Every vector. Comments: `|` separates fields.
pub fn all() -> Vec<Vector> {
    vec![
        Vector {
            name: "rights: list and upload, largest file 1 GiB, 100 files left",
            // type | flags list+upload | max_file 2^30 | bytes_left 0 (no cap) | files_left 100
            hex: "05 03 8080808004 00 64",
            message: Message::FromSender(SenderToReceiver::Rights(Rights {
                list: true,
                upload: true,
                max_file: 1 << 30,
                bytes_left: 0,
                files_left: 100,
            })),
        },
        Vector {
            name: "upload begin",
            // type | upload 1 | size 3 | BLAKE3("abc") | path "a/b.txt" (7 bytes)
            hex: "40 01 03 6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85 07 612f622e747874",
            message: Message::ToSender(ReceiverToSender::UploadBegin(UploadBegin {
                upload: UploadId(1),
                size: 3,
                hash: *blake3::hash(b"abc").as_bytes(),
                path: b"a/b.txt".to_vec(),
            })),
        },
        Vector {
            name: "upload chunk",
            // type | upload 1 | offset 0 | BLAKE3 derive_key("linkfs 2026-11 upload chunk v1",
            // file hash | offset u64 LE | data) | data "abc"
            hex: "41 01 00 0df0e5a80efd91b025c4ef8aadeff45340ed906c07dd767f3850a8292714bfed 616263",
            message: Message::UploadChunk {
                upload: UploadId(1),
                offset: 0,
                data: b"abc",
            },
        },
        Vector {
            name: "upload cancel",
            hex: "42 01",
            message: Message::ToSender(ReceiverToSender::UploadCancel {
                upload: UploadId(1),
            }),
        },
        Vector {
            name: "upload ready, resuming at 64 KiB",
            // type | upload 1 | offset 65536 | path "a/b.txt" | no changes
            hex: "48 01 808004 07 612f622e747874 00",
            message: Message::FromSender(SenderToReceiver::UploadReady(UploadReady {
                upload: UploadId(1),
                offset: 65536,
                path: "a/b.txt".into(),
                changes: String::new(),
            })),
        },
        Vector {
            name: "upload ack",
            hex: "49 01 808004",
            message: Message::FromSender(SenderToReceiver::UploadAck {
                upload: UploadId(1),
                written: 65536,
            }),
        },
        Vector {
            name: "folders listed: 5, 2 and 9 are whole at position 300",
            // type | upto 300 | 3 folders | ids as zigzag deltas: +5, -3, +7
            hex: "12 ac02 03 0a 05 0e",
            message: Message::FromSender(SenderToReceiver::FoldersListed(crate::FoldersListed {
                upto: crate::Seq(300),
                folders: vec![crate::EntryId(5), crate::EntryId(2), crate::EntryId(9)],
            })),
        },
        Vector {
            name: "upload window",
            // type | 32 MiB
            hex: "4c 80808010",
            message: Message::FromSender(SenderToReceiver::UploadWindow { bytes: 32 << 20 }),
        },
        Vector {
            name: "upload done, under another name",
            // type | upload 1 | path "a/b (2).txt" (11 bytes) | renamed
            hex: "4a 01 0b 612f62202832292e747874 01",
            message: Message::FromSender(SenderToReceiver::UploadDone(UploadDone {
                upload: UploadId(1),
                path: "a/b (2).txt".into(),
                renamed: true,
            })),
        },
        Vector {
            name: "upload refused: over the link's cap",
            // type | upload 1 | code 3 (over cap) | "too big"
            hex: "4b 01 03 07 746f6f20626967",
            message: Message::FromSender(SenderToReceiver::UploadRefused(UploadRefused {
                upload: UploadId(1),
                code: UploadRefusal::OverCap,
                message: "too big".into(),
            })),
        },
        Vector {
            name: "hello, fresh",
            // type Hello | version 1 | no resume
            hex: "02 01 00",
            message: Message::ToSender(ReceiverToSender::Hello(Hello {
                version: 1,
                resume: None,
            })),
        },
        Vector {
            name: "hello, resuming",
            // type | version 1 | resume | epoch (u64 LE) | next seq 300 (varint ac 02)
            hex: "02 01 01 0807060504030201 ac02",
            message: Message::ToSender(ReceiverToSender::Hello(Hello {
                version: 1,
                resume: Some((Epoch(0x0102_0304_0506_0708), Seq(300))),
            })),
        },
        Vector {
            name: "ack",
            // type Ack | next seq 300
            hex: "11 ac02",
            message: Message::ToSender(ReceiverToSender::Ack { next: Seq(300) }),
        },
        Vector {
            name: "read",
            // type | read 7 | entry 5 | generation 0 | offset 65536 (80 80 04) | len 61392 (d0 df 03)
            hex: "22 07 05 00 808004 d0df03",
            message: Message::ToSender(ReceiverToSender::Read(ReadRequest {
                read: ReadId(7),
                entry: EntryId(5),
                generation: Generation(0),
                offset: 65536,
                len: 61392,
            })),
        },
        Vector {
            name: "cancel read",
            hex: "23 07",
            message: Message::ToSender(ReceiverToSender::CancelRead { read: ReadId(7) }),
        },
        Vector {
            name: "welcome",
            // type | version 1 | epoch LE | start 0 | max_read 1 MiB (80 80 40) | 64 reads
            hex: "01 01 0102030405060708 00 808040 40",
            message: Message::Welcome(Welcome {
                version: 1,
                epoch: Epoch(0x0807_0605_0403_0201),
                start: Seq(0),
                max_read: 1 << 20,
                max_reads_in_flight: 64,
            }),
        },
        Vector {
            name: "read chunk",
            // type | read 7 | offset 0 | BLAKE3 derive_key("linkfs 2026-11 read chunk v1",
            // entry u32 LE | generation u32 LE | offset u64 LE | data) | data "abc".
            // The hash was checked against the Python blake3 package.
            hex: "20 07 00 3791ab666ebc25dba028016f29c15fc2d79ff923657ab22ad7427b813cee3038 616263",
            message: Message::Chunk {
                read: ReadId(7),
                offset: 0,
                data: b"abc",
            },
        },
        Vector {
            name: "read error",
            // type | read 7 | code 3 (changed) | "gone"
            hex: "21 07 03 04 676f6e65",
            message: Message::ReadError(ReadError {
                read: ReadId(7),
                code: ReadErrorCode::Changed,
                message: "gone".into(),
            }),
        },
        Vector {
            name: "goodbye",
            // type | code 1 (shutting down) | "bye"
            hex: "7f 01 03 627965",
            message: Message::Goodbye(Goodbye {
                code: GoodbyeCode::ShuttingDown,
                message: "bye".into(),
            }),
        },
        Vector {
            name: "password needed",
            // type, nothing else
            hex: "03",
            message: Message::PasswordNeeded,
        },
        Vector {
            name: "password",
            // type | length 6 | "sesame"
            hex: "04 06 736573616d65",
            message: Message::ToSender(ReceiverToSender::Password("sesame".into())),
        },
        Vector {
            name: "goodbye, wrong password",
            // type | code 7 (wrong password) | "no"
            hex: "7f 07 02 6e6f",
            message: Message::Goodbye(Goodbye {
                code: GoodbyeCode::WrongPassword,
                message: "no".into(),
            }),
        },
        Vector {
            name: "goodbye, link withdrawn",
            // type | code 4 (link withdrawn) | "gone"
            hex: "7f 04 04 676f6e65",
            message: Message::Goodbye(Goodbye {
                code: GoodbyeCode::LinkWithdrawn,
                message: "gone".into(),
            }),
        },
        Vector {
            name: "index batch",
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
            hex: "10 00 03 01 00 80c49fd50c 02 ed03 a403 04 \
                  01 00 00 01 72 00 \
                  10 00 00 05 612e747874 05 02 \
                  10 00 01 05 622e747874 ac02 03 \
                  07 0c",
            message: Message::Batch {
                header: BatchHeader {
                    first: Seq(0),
                    known: 3,
                    snapshot_complete: true,
                    ops: 4,
                    span: 4,
                },
                ops: vec![
                    IndexOp::Upsert(Entry {
                        id: EntryId(0),
                        parent: EntryId(0),
                        kind: EntryKind::Dir,
                        name: b"r".to_vec(),
                        size: 0,
                        mtime: 1_700_000_000,
                        mode: 0o755,
                        generation: Generation(0),
                        target: Vec::new(),
                    }),
                    file(1, b"a.txt", 5, 1_700_000_001),
                    file(2, b"ab.txt", 300, 1_699_999_999),
                    IndexOp::Remove(EntryId(9)),
                ],
                columns: false,
            },
        },
        Vector {
            name: "index batch in columns",
            // The same batch in columns (protocol version 2):
            // 10 00 03      type | first seq 0 | known 3
            // 09            flags: snapshot complete, in columns
            // 00 80c49fd50c 02 ed03 a403 04    first id | base mtime | modes | 4 ops
            // 00            column flags: none compressed (each under 256 bytes)
            // 11            column 0, 17 bytes: every field but names and mtimes
            //   01|00|00 01         dir, mode#0 | parent +0 | shared 0 | suffix of 1
            //   10|00|00 05|05      file, mode#1 | parent +0 | shared 0 | suffix of 5 | size 5
            //   10|00|01 05|ac02    file, mode#1 | parent +0 | shared 1 | suffix of 5 | size 300
            //   07 0c               remove, explicit id 9
            // 0b            column 1, 11 bytes: "r" "a.txt" "b.txt"
            // 03            column 2, 3 bytes: mtime +0, +1, -2
            hex: "10 00 03 09 00 80c49fd50c 02 ed03 a403 04 00 \
                  11 01000001 1000000505 10000105ac02 070c \
                  0b 72 612e747874 622e747874 \
                  03 00 02 03",
            message: Message::Batch {
                header: BatchHeader {
                    first: Seq(0),
                    known: 3,
                    snapshot_complete: true,
                    ops: 4,
                    span: 4,
                },
                ops: vec![
                    IndexOp::Upsert(Entry {
                        id: EntryId(0),
                        parent: EntryId(0),
                        kind: EntryKind::Dir,
                        name: b"r".to_vec(),
                        size: 0,
                        mtime: 1_700_000_000,
                        mode: 0o755,
                        generation: Generation(0),
                        target: Vec::new(),
                    }),
                    file(1, b"a.txt", 5, 1_700_000_001),
                    file(2, b"ab.txt", 300, 1_699_999_999),
                    IndexOp::Remove(EntryId(9)),
                ],
                columns: true,
            },
        },
        Vector {
            name: "index batch of changes, with a span",
            // 10            type IndexBatch
            // 64            first seq 100
            // 03            known: 3 entries
            // 04            flags: span follows
            // 07            first id 7
            // 80c49fd50c    base mtime 1700000000
            // 01 a403       mode table: 0644
            // 02            2 ops
            // 09            span: 9 log positions (7 superseded ones skipped)
            // 08|00|04 01 c|00|02|01    file, mode#0, generation follows | parent +0 | "c" | size 4 | mtime +0 | generation 1
            // 07 04                     remove, explicit id: 10 = (7 + 1) + 2
            hex: "10 64 03 04 07 80c49fd50c 01 a403 02 09 \
                  08 00 00 01 63 04 00 01 \
                  07 04",
            message: Message::Batch {
                header: BatchHeader {
                    first: Seq(100),
                    known: 3,
                    snapshot_complete: false,
                    ops: 2,
                    span: 9,
                },
                ops: vec![
                    IndexOp::Upsert(Entry {
                        generation: Generation(1),
                        ..match file(7, b"c", 4, 1_700_000_000) {
                            IndexOp::Upsert(e) => e,
                            IndexOp::Remove(_) => unreachable!("file() makes an upsert"),
                        }
                    }),
                    IndexOp::Remove(EntryId(10)),
                ],
                columns: false,
            },
        },
    ]
}

/// Why annotated hex could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadHex {
    #[error("odd number of hex digits")]
    OddDigits,
    /// Two characters that are not a hex byte.
    #[error("bad hex {0:?}")]
    NotHex(String),
}

/// Parses annotated hex (whitespace ignored).
pub fn hex_bytes(s: &str) -> Result<Vec<u8>, BadHex> {
    let clean: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !clean.len().is_multiple_of(2) {
        return Err(BadHex::OddDigits);
    }
    clean
        .chunks(2)
        .map(|p| {
            std::str::from_utf8(p)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok())
                .ok_or_else(|| BadHex::NotHex(String::from_utf8_lossy(p).into_owned()))
        })
        .collect()
}

/// Why a vector failed its check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VectorError {
    /// The vector's hex is not hex.
    #[error(transparent)]
    Hex(#[from] BadHex),
    /// The bytes and the message do not agree.
    #[error("vector {name:?}: {mismatch}")]
    Mismatch {
        name: &'static str,
        mismatch: Mismatch,
    },
}

/// How a vector's bytes and message disagree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Mismatch {
    /// The bytes do not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("decodes to another message")]
    OtherMessage,
    #[error("decodes to another batch")]
    OtherBatch,
    #[error("does not fit a batch")]
    DoesNotFit,
    #[error("encodes to other bytes")]
    OtherBytes,
}

fn encode(op: &IndexOp, enc: &mut BatchEncoder) -> bool {
    match op {
        IndexOp::Upsert(e) => enc.push_upsert(&EntryView {
            id: e.id,
            parent: e.parent,
            kind: e.kind,
            name: &e.name,
            size: e.size,
            mtime: e.mtime,
            mode: e.mode,
            generation: e.generation,
            target: &e.target,
        }),
        IndexOp::Remove(id) => enc.push_remove(*id),
    }
}

/// Checks one vector both ways: encoding gives the bytes, decoding gives the message.
pub fn check(v: &Vector) -> Result<(), VectorError> {
    let bytes = hex_bytes(v.hex)?;
    check_bytes(v, &bytes).map_err(|mismatch| VectorError::Mismatch {
        name: v.name,
        mismatch,
    })
}

fn check_bytes(v: &Vector, bytes: &[u8]) -> Result<(), Mismatch> {
    let encoded = match &v.message {
        Message::ToSender(m) => {
            if ReceiverToSender::decode(bytes)? != *m {
                return Err(Mismatch::OtherMessage);
            }
            m.encode()
        }
        Message::Welcome(w) => check_s2r(bytes, SenderToReceiver::Welcome(w.clone()))?,
        Message::ReadError(e) => check_s2r(bytes, SenderToReceiver::ReadError(e.clone()))?,
        Message::Goodbye(g) => check_s2r(bytes, SenderToReceiver::Goodbye(g.clone()))?,
        Message::PasswordNeeded => check_s2r(bytes, SenderToReceiver::PasswordNeeded)?,
        Message::FromSender(m) => check_s2r(bytes, m.clone())?,
        Message::UploadChunk {
            upload,
            offset,
            data,
        } => {
            let hash = upload_chunk_hash(blake3::hash(b"abc").as_bytes(), *offset, data);
            let want = ReceiverToSender::UploadChunk(UploadChunk {
                upload: *upload,
                offset: *offset,
                hash,
                data,
            });
            if ReceiverToSender::decode(bytes)? != want {
                return Err(Mismatch::OtherMessage);
            }
            want.encode()
        }
        Message::Chunk { read, offset, data } => {
            let hash = chunk_hash(EntryId(5), Generation(0), *offset, data);
            let chunk = SenderToReceiver::ReadChunk(ReadChunk {
                read: *read,
                offset: *offset,
                hash,
                data,
            });
            check_s2r(bytes, chunk)?
        }
        Message::Batch {
            header,
            ops,
            columns,
        } => {
            let (h, got) = decode_batch(bytes)?;
            if h != *header || got != *ops {
                return Err(Mismatch::OtherBatch);
            }
            let version = if *columns { 2 } else { 1 };
            let mut enc = BatchEncoder::for_version(header.first, MAX_FRAME_LEN, version);
            for op in ops {
                if !encode(op, &mut enc) {
                    return Err(Mismatch::DoesNotFit);
                }
            }
            enc.finish_span(header.known, header.snapshot_complete, header.span)
        }
    };
    if encoded != bytes {
        return Err(Mismatch::OtherBytes);
    }
    Ok(())
}

fn check_s2r(bytes: &[u8], want: SenderToReceiver<'_>) -> Result<Vec<u8>, Mismatch> {
    if SenderToReceiver::decode(bytes)? != want {
        return Err(Mismatch::OtherMessage);
    }
    Ok(want.encode())
}

/// Checks every vector; returns how many.
pub fn check_all() -> Result<usize, VectorError> {
    let all = all();
    for v in &all {
        check(v)?;
    }
    Ok(all.len())
}
