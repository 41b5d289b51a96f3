//! What a receiver that misbehaves can cost a sharer's session: bounded.

use linkfs_core::{
    MAX_RETRANSMITS, Millis, NewEntry, SenderConfig, SenderSession, SessionError, ShareIndex,
};
use linkfs_proto::{
    EntryId, EntryKind, Epoch, Hello, PROTOCOL_VERSION, ReceiverToSender, SenderToReceiver,
};

fn index(files: u32) -> ShareIndex {
    let mut ix = ShareIndex::new(Epoch(1));
    for id in 0..=files {
        let name = format!("f{id}");
        ix.push(&NewEntry {
            id: EntryId(id),
            parent: EntryId::ROOT,
            kind: if id == 0 {
                EntryKind::Dir
            } else {
                EntryKind::File
            },
            name: name.as_bytes(),
            size: 1,
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

/// A receiver's first frame: a fresh start.
fn hello() -> Vec<u8> {
    ReceiverToSender::Hello(Hello {
        version: PROTOCOL_VERSION,
        resume: None,
    })
    .encode()
}

#[test]
fn a_receiver_that_never_acknowledges_costs_one_queued_resend_then_ends_the_session() {
    let ix = index(100);
    let mut s = SenderSession::new(SenderConfig::default());
    let hello = hello();
    s.handle_frame(Millis(0), &hello, &ix).unwrap();
    while s.poll_transmit(Millis(0), &ix).is_some() {}
    // The transport is stuck (nothing is polled) and no acknowledgement ever comes.
    for t in (0..3_600_000u64).step_by(1000) {
        s.handle_timeout(Millis(t));
    }
    let queued: Vec<Vec<u8>> =
        std::iter::from_fn(|| s.poll_transmit(Millis(3_600_000), &ix)).collect();
    assert!(
        queued.len() <= 2,
        "an hour without acknowledgements queued {} frames",
        queued.len()
    );
    assert!(!s.is_open(), "the session ends");
    assert_eq!(s.end_reason(), Some(&SessionError::NoAcks(MAX_RETRANSMITS)));
    let last = queued.last().expect("a goodbye");
    assert!(
        matches!(
            SenderToReceiver::decode(last),
            Ok(SenderToReceiver::Goodbye(_))
        ),
        "the receiver is told why"
    );
}

/// The shell's one poll: no frame without room, and the end only after the
/// last frame (the goodbye) was taken.
#[test]
fn poll_output_gives_no_frame_without_room_and_ends_after_the_goodbye_went() {
    use linkfs_core::SenderOutput;
    let ix = index(10);
    let mut s = SenderSession::new(SenderConfig::default());
    let hello = hello();
    s.handle_frame(Millis(0), &hello, &ix).unwrap();
    assert!(
        matches!(s.poll_output(Millis(0), &ix, false), SenderOutput::Wait(_)),
        "a welcome is waiting, but the link has no room"
    );
    s.close("the sharer stopped sharing");
    assert!(
        matches!(s.poll_output(Millis(0), &ix, false), SenderOutput::Wait(_)),
        "not ended while its goodbye has not gone"
    );
    let mut sent = Vec::new();
    let why = loop {
        match s.poll_output(Millis(0), &ix, true) {
            SenderOutput::Transmit(f) => sent.push(f),
            SenderOutput::Ended(why) => break why,
            other => panic!("{other:?} from a closed session"),
        }
        assert!(sent.len() < 100, "a closed session keeps sending");
    };
    assert!(matches!(why, Some(SessionError::ClosedHere(_))), "{why:?}");
    let last = sent.last().expect("frames before the end");
    assert!(
        matches!(
            SenderToReceiver::decode(last),
            Ok(SenderToReceiver::Goodbye(_))
        ),
        "the goodbye is the last frame"
    );
}

/// A visitor whose connection stays open but which reads nothing: its link
/// takes no frame, and the session ends at the bound, not never. One whose
/// link is slow but moves, or which has nothing to be sent, is not ended.
#[test]
fn a_visitor_that_stops_reading_loses_its_session_at_the_bound() {
    use linkfs_core::{STOPPED_READING_MS, SenderOutput};
    let ix = index(100);
    let mut s = SenderSession::new(SenderConfig::default());
    let hello = hello();
    s.handle_frame(Millis(0), &hello, &ix).unwrap();
    // The link takes one frame, then has no room (the loop holds the next).
    assert!(matches!(
        s.poll_output(Millis(0), &ix, true),
        SenderOutput::Transmit(_)
    ));
    let mut woken_at = Vec::new();
    let mut t = 0;
    let why = loop {
        match s.poll_output(Millis(t), &ix, false) {
            SenderOutput::Ended(why) => break why,
            SenderOutput::Wait(at) => {
                let at = at.expect("a session stuck behind a full link asks to be woken");
                woken_at.push(at.0);
                t = at.0.max(t + 1);
                s.handle_timeout(Millis(t));
            }
            other => panic!("{other:?}"),
        }
        assert!(t <= 10 * STOPPED_READING_MS, "never ended");
    };
    assert_eq!(
        why,
        Some(SessionError::StoppedReading(STOPPED_READING_MS / 1000))
    );
    assert!(
        (STOPPED_READING_MS..=STOPPED_READING_MS + 10_000).contains(&t),
        "ended at {t} ms"
    );
    assert!(
        woken_at.contains(&STOPPED_READING_MS),
        "woken at the bound: {woken_at:?}"
    );
    assert!(!s.is_open());

    // A link that takes a frame every 30 s is slow, not stopped: the loop
    // holds a frame (no room) only between the frames it hands on.
    let mut slow = SenderSession::new(SenderConfig::default());
    slow.handle_frame(Millis(0), &hello, &ix).unwrap();
    let mut holding = false;
    let mut taken = 0;
    for step in 0..10u64 {
        let now = Millis(step * 30_000);
        if holding {
            let out = slow.poll_output(now, &ix, false);
            assert!(
                !matches!(
                    out,
                    SenderOutput::Ended(Some(SessionError::StoppedReading(_)))
                ),
                "a slow link ended at {now:?}"
            );
        }
        holding = matches!(slow.poll_output(now, &ix, true), SenderOutput::Transmit(_));
        taken += usize::from(holding);
    }
    assert!(taken >= 2, "frames moved: {taken}");
}

/// A visitor fetching many small files asks for each with a request of its
/// own; across a path of 20 ms the queue's bound is its files per 20 ms. At 64,
/// `linkfs get` of 100,000 files of 1 KiB moved 2,400 a second where rsync
/// moved 5,000. 256 are queued (and the welcome says so); the next is refused
/// as busy, in words, and no more is held.
#[test]
fn a_visitor_asking_for_many_small_files_at_once_has_256_queued_and_the_next_is_busy() {
    use linkfs_proto::{Generation, ReadErrorCode, ReadId, ReadRequest};
    let ix = index(300);
    let mut s = SenderSession::new(SenderConfig::default());
    s.handle_frame(Millis(0), &hello(), &ix).unwrap();
    let welcome = std::iter::from_fn(|| s.poll_transmit(Millis(0), &ix))
        .find_map(|f| match SenderToReceiver::decode(&f) {
            Ok(SenderToReceiver::Welcome(w)) => Some(w),
            _ => None,
        })
        .expect("a welcome");
    assert_eq!(welcome.max_reads_in_flight, 256);
    for read in 1..=257u32 {
        let frame = ReceiverToSender::Read(ReadRequest {
            read: ReadId(read),
            entry: EntryId(read),
            generation: Generation(0),
            offset: 0,
            len: 1,
        })
        .encode();
        s.handle_frame(Millis(0), &frame, &ix).unwrap();
    }
    let refused: Vec<_> = std::iter::from_fn(|| s.poll_transmit(Millis(0), &ix))
        .filter_map(|f| match SenderToReceiver::decode(&f) {
            Ok(SenderToReceiver::ReadError(e)) => Some((e.read, e.code, e.message)),
            _ => None,
        })
        .collect();
    assert_eq!(refused.len(), 1, "only the 257th is refused: {refused:?}");
    let (read, code, message) = &refused[0];
    assert_eq!((*read, *code), (ReadId(257), ReadErrorCode::Busy));
    assert!(message.contains("at most 256 reads"), "{message}");
}
