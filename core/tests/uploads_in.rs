//! The sharer's session and a visitor's uploads: rights, names, hashes,
//! order, window and how many at once, checked before the shell writes a byte.

use linkfs_core::{
    MAX_UPLOADS, Millis, SenderConfig, SenderSession, ShareIndex, UploadIo, UploadResult,
};
use linkfs_proto::{
    Epoch, Hello, PROTOCOL_VERSION, ReceiverToSender, Rights, SESSION_UPLOAD_WINDOW,
    SenderToReceiver, UPLOAD_CHUNK_LEN, UPLOAD_WINDOW, UploadBegin, UploadChunk, UploadId,
    UploadRefusal, upload_chunk_hash,
};

fn session(rights: Rights) -> (SenderSession, ShareIndex) {
    let mut ix = ShareIndex::new(Epoch(1));
    ix.mark_snapshot_complete();
    let mut s = SenderSession::new(SenderConfig {
        rights,
        ..SenderConfig::default()
    });
    let hello = ReceiverToSender::Hello(Hello {
        version: PROTOCOL_VERSION,
        resume: None,
    })
    .encode();
    s.handle_frame(Millis(0), &hello, &ix).unwrap();
    (s, ix)
}

fn uploads() -> Rights {
    Rights {
        list: true,
        upload: true,
        ..Rights::default()
    }
}

fn sent(s: &mut SenderSession, ix: &ShareIndex) -> Vec<Vec<u8>> {
    std::iter::from_fn(|| s.poll_transmit(Millis(0), ix)).collect()
}

fn begin(s: &mut SenderSession, ix: &ShareIndex, id: u32, path: &str, data: &[u8]) {
    let f = ReceiverToSender::UploadBegin(UploadBegin {
        upload: UploadId(id),
        size: data.len() as u64,
        hash: *blake3::hash(data).as_bytes(),
        path: path.as_bytes().to_vec(),
    })
    .encode();
    s.handle_frame(Millis(0), &f, ix).unwrap();
}

fn chunk(id: u32, file: &[u8], offset: usize, len: usize) -> Vec<u8> {
    let data = &file[offset..offset + len];
    ReceiverToSender::UploadChunk(UploadChunk {
        upload: UploadId(id),
        offset: offset as u64,
        hash: upload_chunk_hash(blake3::hash(file).as_bytes(), offset as u64, data),
        data,
    })
    .encode()
}

fn refusal(frames: &[Vec<u8>]) -> Option<(UploadRefusal, String)> {
    frames
        .iter()
        .find_map(|f| match SenderToReceiver::decode(f) {
            Ok(SenderToReceiver::UploadRefused(r)) => Some((r.code, r.message)),
            _ => None,
        })
}

#[test]
fn the_link_says_what_its_visitor_may_do_and_a_read_only_link_refuses_uploads() {
    let (mut s, ix) = session(SenderConfig::default().rights);
    let frames = sent(&mut s, &ix);
    let rights = frames
        .iter()
        .find_map(|f| match SenderToReceiver::decode(f) {
            Ok(SenderToReceiver::Rights(r)) => Some(r),
            _ => None,
        });
    assert_eq!(rights.map(|r| (r.list, r.upload)), Some((true, false)));
    begin(&mut s, &ix, 1, "a.txt", b"abc");
    let (code, words) = refusal(&sent(&mut s, &ix)).expect("refused");
    assert_eq!(code, UploadRefusal::NotAllowed);
    assert!(words.contains("does not let visitors add files"), "{words}");
    assert_eq!(s.poll_upload_io(), None, "nothing for the disk");
}

#[test]
fn an_upload_is_checked_chunk_by_chunk_and_lands_after_its_last_byte() {
    let (mut s, ix) = session(uploads());
    sent(&mut s, &ix);
    let file: Vec<u8> = (0..(UPLOAD_CHUNK_LEN * 2 + 10)).map(|i| i as u8).collect();
    begin(&mut s, &ix, 7, "photos/a\u{7}.jpg", &file);
    let Some(UploadIo::Begin { upload, path, .. }) = s.poll_upload_io() else {
        panic!("no begin for the shell");
    };
    assert_eq!(path.joined(), "photos/a.jpg");
    s.handle_upload_io(upload, UploadResult::Ready { offset: 0 });
    let ready = sent(&mut s, &ix)
        .iter()
        .find_map(|f| match SenderToReceiver::decode(f) {
            Ok(SenderToReceiver::UploadReady(r)) => Some(r),
            _ => None,
        })
        .expect("ready");
    assert_eq!((ready.offset, ready.path.as_str()), (0, "photos/a.jpg"));
    assert!(ready.changes.contains("control characters removed"));
    let mut offset = 0;
    while offset < file.len() {
        let len = (file.len() - offset).min(UPLOAD_CHUNK_LEN);
        s.handle_frame(Millis(0), &chunk(7, &file, offset, len), &ix)
            .unwrap();
        offset += len;
    }
    let mut written = Vec::new();
    let mut finished = false;
    while let Some(io) = s.poll_upload_io() {
        match io {
            UploadIo::Write { offset, data, .. } => {
                assert_eq!(offset as usize, written.len(), "in order");
                written.extend_from_slice(&data);
                s.handle_upload_io(
                    UploadId(7),
                    UploadResult::Written {
                        end: written.len() as u64,
                    },
                );
            }
            UploadIo::Finish { .. } => finished = true,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(finished && written == file);
    s.handle_upload_io(
        UploadId(7),
        UploadResult::Landed {
            path: "photos/a.jpg".into(),
            renamed: false,
        },
    );
    let frames = sent(&mut s, &ix);
    let acks = frames
        .iter()
        .filter(|f| {
            matches!(
                SenderToReceiver::decode(f),
                Ok(SenderToReceiver::UploadAck { .. })
            )
        })
        .count();
    assert!(acks <= 1, "acks coalesce: {acks}");
    assert!(frames.iter().any(|f| matches!(
        SenderToReceiver::decode(f),
        Ok(SenderToReceiver::UploadDone(d)) if d.path == "photos/a.jpg"
    )));
}

#[test]
fn a_chunk_that_does_not_match_its_hash_saves_nothing_and_is_said() {
    let (mut s, ix) = session(uploads());
    let file = vec![1u8; 1000];
    begin(&mut s, &ix, 1, "x.bin", &file);
    s.poll_upload_io();
    s.handle_upload_io(UploadId(1), UploadResult::Ready { offset: 0 });
    sent(&mut s, &ix);
    let mut bad = chunk(1, &file, 0, 1000);
    let last = bad.len() - 1;
    bad[last] ^= 1;
    s.handle_frame(Millis(0), &bad, &ix).unwrap();
    assert_eq!(
        s.poll_upload_io(),
        Some(UploadIo::Cancel {
            upload: UploadId(1)
        })
    );
    let (code, _) = refusal(&sent(&mut s, &ix)).expect("refused");
    assert_eq!(code, UploadRefusal::Corrupt);
}

#[test]
fn bad_names_too_many_at_once_and_a_visitor_past_its_window_are_refused() {
    let (mut s, ix) = session(uploads());
    sent(&mut s, &ix);
    begin(&mut s, &ix, 1, "../../etc/passwd", b"x");
    let (code, words) = refusal(&sent(&mut s, &ix)).expect("refused");
    assert_eq!(code, UploadRefusal::BadName);
    assert!(words.contains("not a name"), "{words}");

    for id in 10..10 + MAX_UPLOADS as u32 {
        begin(&mut s, &ix, id, &format!("f{id}"), b"abc");
    }
    begin(&mut s, &ix, 99, "one-too-many", b"abc");
    let (code, _) = refusal(&sent(&mut s, &ix)).expect("refused");
    assert_eq!(code, UploadRefusal::Busy);

    // Past the window (nothing acknowledged): the session ends.
    let (mut s, ix) = session(uploads());
    let file = vec![0u8; (SESSION_UPLOAD_WINDOW as usize) + 2 * UPLOAD_CHUNK_LEN];
    begin(&mut s, &ix, 1, "big", &file);
    s.poll_upload_io();
    s.handle_upload_io(UploadId(1), UploadResult::Ready { offset: 0 });
    let mut offset = 0;
    let mut ended = false;
    while offset + UPLOAD_CHUNK_LEN <= file.len() {
        if s.handle_frame(Millis(0), &chunk(1, &file, offset, UPLOAD_CHUNK_LEN), &ix)
            .is_err()
        {
            ended = true;
            break;
        }
        offset += UPLOAD_CHUNK_LEN;
    }
    assert!(
        ended && !s.is_open(),
        "a visitor past its window ends its session"
    );
    assert!(
        offset as u64 <= SESSION_UPLOAD_WINDOW,
        "held {offset} bytes"
    );
}

/// The window is the session's: every upload's bytes not yet written count
/// together, so four uploads cannot hold four windows.
#[test]
fn the_window_counts_every_upload_of_the_session_together() {
    let (mut s, ix) = session(uploads());
    let told = sent(&mut s, &ix)
        .iter()
        .find_map(|f| match SenderToReceiver::decode(f) {
            Ok(SenderToReceiver::UploadWindow { bytes }) => Some(bytes),
            _ => None,
        });
    assert_eq!(
        told,
        Some(SESSION_UPLOAD_WINDOW),
        "the sharer says its window"
    );
    assert!(
        SESSION_UPLOAD_WINDOW >= MAX_UPLOADS as u64 * UPLOAD_WINDOW,
        "a visitor that was not told stays within it"
    );
    let each = (SESSION_UPLOAD_WINDOW as usize) / 2 + UPLOAD_CHUNK_LEN;
    let file = vec![9u8; each];
    for id in [1, 2] {
        begin(&mut s, &ix, id, &format!("f{id}"), &file);
        s.poll_upload_io();
        s.handle_upload_io(UploadId(id), UploadResult::Ready { offset: 0 });
    }
    let mut ended = None;
    'send: for id in [1u32, 2] {
        let mut offset = 0;
        while offset < file.len() {
            let len = (file.len() - offset).min(UPLOAD_CHUNK_LEN);
            if let Err(e) = s.handle_frame(Millis(0), &chunk(id, &file, offset, len), &ix) {
                ended = Some((id, offset, e.to_string()));
                break 'send;
            }
            offset += len;
        }
    }
    let (id, offset, words) = ended.expect("two uploads past the session's window end it");
    assert_eq!(id, 2, "the first upload fits alone");
    assert!(
        (file.len() + offset) as u64 <= SESSION_UPLOAD_WINDOW + UPLOAD_CHUNK_LEN as u64,
        "ended at {offset} of the second"
    );
    assert!(words.contains("ahead of the sharer"), "{words}");
}

#[test]
fn a_sharer_whose_link_takes_no_files_says_no_window() {
    let (mut s, ix) = session(SenderConfig::default().rights);
    assert!(!sent(&mut s, &ix).iter().any(|f| matches!(
        SenderToReceiver::decode(f),
        Ok(SenderToReceiver::UploadWindow { .. })
    )));
}

/// What a visitor with lanes sends: one upload's chunks spread over several
/// connections, so they come in any order.
#[test]
fn chunks_that_come_out_of_order_are_written_in_order_and_land_whole() {
    let (mut s, ix) = session(uploads());
    sent(&mut s, &ix);
    let file: Vec<u8> = (0..(UPLOAD_CHUNK_LEN * 5 + 77))
        .map(|i| (i * 7 + i / 251) as u8)
        .collect();
    begin(&mut s, &ix, 3, "lanes.bin", &file);
    s.poll_upload_io();
    s.handle_upload_io(UploadId(3), UploadResult::Ready { offset: 0 });
    let chunks: Vec<(usize, usize)> = (0..file.len())
        .step_by(UPLOAD_CHUNK_LEN)
        .map(|o| (o, (file.len() - o).min(UPLOAD_CHUNK_LEN)))
        .collect();
    let mut written = Vec::new();
    let mut finished = false;
    // Last first, then the rest from the second-to-last down to the first.
    for &(offset, len) in chunks.iter().rev() {
        s.handle_frame(Millis(0), &chunk(3, &file, offset, len), &ix)
            .unwrap();
        while let Some(io) = s.poll_upload_io() {
            match io {
                UploadIo::Write { offset, data, .. } => {
                    assert_eq!(offset as usize, written.len(), "written in order");
                    written.extend_from_slice(&data);
                    s.handle_upload_io(
                        UploadId(3),
                        UploadResult::Written {
                            end: written.len() as u64,
                        },
                    );
                }
                UploadIo::Finish { .. } => finished = true,
                other => panic!("unexpected {other:?}"),
            }
        }
        if offset > 0 {
            assert!(
                written.is_empty(),
                "nothing written before the first byte came"
            );
        }
    }
    assert!(finished, "every byte came: it lands");
    assert_eq!(written, file);
}

#[test]
fn the_same_bytes_sent_twice_end_the_session_out_of_order_too() {
    let (mut s, ix) = session(uploads());
    sent(&mut s, &ix);
    let file = vec![5u8; UPLOAD_CHUNK_LEN * 4];
    begin(&mut s, &ix, 1, "twice.bin", &file);
    s.poll_upload_io();
    s.handle_upload_io(UploadId(1), UploadResult::Ready { offset: 0 });
    // Held ahead, then a chunk that overlaps it.
    s.handle_frame(
        Millis(0),
        &chunk(1, &file, 2 * UPLOAD_CHUNK_LEN, UPLOAD_CHUNK_LEN),
        &ix,
    )
    .unwrap();
    let err = s
        .handle_frame(
            Millis(0),
            &chunk(1, &file, 2 * UPLOAD_CHUNK_LEN + 10, UPLOAD_CHUNK_LEN),
            &ix,
        )
        .expect_err("overlapping bytes end the session");
    assert!(err.to_string().contains("came already"), "{err}");
    assert!(!s.is_open());
}

/// The window bounds the bytes a visitor's chunks hold on the sharer; this,
/// their number: a visitor sending 1-byte chunks ahead of a gap would
/// otherwise hold millions of them within 32 MiB.
#[test]
fn tiny_chunks_held_ahead_end_the_session_before_they_pile_up() {
    let (mut s, ix) = session(uploads());
    sent(&mut s, &ix);
    let file = vec![3u8; 3 * linkfs_core::uploads_in::MAX_PIECES];
    begin(&mut s, &ix, 1, "tiny.bin", &file);
    s.poll_upload_io();
    s.handle_upload_io(UploadId(1), UploadResult::Ready { offset: 0 });
    let mut held = 0;
    let err = loop {
        // Every byte but the first: all held ahead of the gap.
        match s.handle_frame(Millis(0), &chunk(1, &file, 1 + held, 1), &ix) {
            Ok(_) => held += 1,
            Err(e) => break e,
        }
        assert!(held <= file.len() - 2, "never ended");
    };
    assert_eq!(held, linkfs_core::uploads_in::MAX_PIECES);
    assert!(err.to_string().contains("pieces"), "{err}");
    assert!(!s.is_open());
}

/// A shell as the sharer's upload worker is: it carries out steps in order
/// and keeps a part open from `Begin` until `Finish` or `Cancel`.
#[derive(Default)]
struct ModelShell {
    open: std::collections::BTreeSet<UploadId>,
    most_open: usize,
}

impl ModelShell {
    fn carry_out(&mut self, io: UploadIo) -> (UploadId, UploadResult) {
        match io {
            UploadIo::Begin { upload, .. } => {
                self.open.insert(upload);
                self.most_open = self.most_open.max(self.open.len());
                (upload, UploadResult::Ready { offset: 0 })
            }
            UploadIo::Write { upload, .. } | UploadIo::Finish { upload } => (
                upload,
                UploadResult::Refused {
                    code: UploadRefusal::Failed,
                    message: "not in this test".into(),
                },
            ),
            UploadIo::Cancel { upload } => {
                self.open.remove(&upload);
                (
                    upload,
                    UploadResult::Refused {
                        code: UploadRefusal::Failed,
                        message: "cancelled".into(),
                    },
                )
            }
        }
    }
}

#[test]
fn an_upload_begun_again_under_its_cancelled_id_leaves_no_part_open_uncounted() {
    let (mut s, ix) = session(uploads());
    sent(&mut s, &ix);
    let cancel = |id: u32| {
        ReceiverToSender::UploadCancel {
            upload: UploadId(id),
        }
        .encode()
    };
    let mut shell = ModelShell::default();
    let mut refused_busy = 0;
    // A visitor begins, cancels and begins again, faster than the shell
    // answers: the shell is handed the steps, then answers them all.
    for round in 0..10u32 {
        for k in 0..4u32 {
            let id = round * 4 + k + 1;
            begin(&mut s, &ix, id, &format!("f{id}"), b"some bytes");
            s.handle_frame(Millis(0), &cancel(id), &ix).unwrap();
            begin(&mut s, &ix, id, &format!("f{id}"), b"some bytes");
        }
        refused_busy += sent(&mut s, &ix)
            .iter()
            .filter(|f| {
                matches!(SenderToReceiver::decode(f),
                    Ok(SenderToReceiver::UploadRefused(r)) if r.code == UploadRefusal::Busy)
            })
            .count();
        let mut answers = Vec::new();
        while let Some(io) = s.poll_upload_io() {
            answers.push(shell.carry_out(io));
        }
        for (upload, result) in answers {
            s.handle_upload_io(upload, result);
        }
        sent(&mut s, &ix);
    }
    assert_eq!(
        shell.open.len(),
        0,
        "parts left open at the shell that the session does not count: {:?}",
        shell.open
    );
    assert!(
        shell.most_open <= 2 * MAX_UPLOADS + MAX_UPLOADS,
        "the shell held {} parts open at once",
        shell.most_open
    );
    assert_eq!(refused_busy, 40, "each begin under a closing id is refused");
    // Once every step is answered, a new id begins and is open as usual.
    begin(&mut s, &ix, 1000, "later", b"some bytes");
    assert!(matches!(s.poll_upload_io(), Some(UploadIo::Begin { .. })));
}

#[test]
fn begins_and_cancels_faster_than_the_shell_answers_are_held_to_a_bound() {
    let (mut s, ix) = session(uploads());
    sent(&mut s, &ix);
    let mut handed = 0;
    for id in 1..=100u32 {
        begin(&mut s, &ix, id, &format!("f{id}"), b"some bytes");
        s.handle_frame(
            Millis(0),
            &ReceiverToSender::UploadCancel {
                upload: UploadId(id),
            }
            .encode(),
            &ix,
        )
        .unwrap();
        while let Some(io) = s.poll_upload_io() {
            handed += usize::from(matches!(io, UploadIo::Begin { .. }));
        }
    }
    assert_eq!(
        handed,
        linkfs_core::MAX_CLOSING,
        "parts the shell was asked to open while none was closed"
    );
    let (code, message) = refusal(&sent(&mut s, &ix)).expect("the rest refused");
    assert_eq!(code, UploadRefusal::Busy);
    assert!(message.contains("being closed"), "{message}");
}
