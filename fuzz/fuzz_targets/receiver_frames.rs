//! Frames a sharer gets from a receiver, straight into a sender session: no
//! panic, and the session never asks to read anything for an invalid request.
//! A lane's first frame (`LaneJoin`) decodes without a panic and re-encodes the same.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linkfs_core::{Millis, SenderConfig, SenderSession, ShareIndex};
use linkfs_proto::{Epoch, LaneJoin, ReceiverToSender};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(join)) = LaneJoin::decode(data) {
        assert_eq!(LaneJoin::decode(&join.encode()), Ok(Some(join)));
    }
    if let Ok(frame) = ReceiverToSender::decode(data) {
        let _ = ReceiverToSender::decode(&frame.encode());
    }
    let index = ShareIndex::new(Epoch(1));
    let mut session = SenderSession::new(SenderConfig::default());
    for chunk in data.split(|b| *b == 0xff) {
        let _ = session.handle_frame(Millis(0), chunk, &index);
        while session.poll_transmit(Millis(0), &index).is_some() {}
        assert!(session.poll_io().is_none(), "an empty index has nothing to read");
    }
});
