//! Frames a receiver gets from a sharer: decoding never panics, and what decodes
//! re-encodes to a frame that decodes the same; the same for a lane offer.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linkfs_proto::{LaneOffer, SenderToReceiver};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(offer)) = LaneOffer::decode(data) {
        assert_eq!(LaneOffer::decode(&offer.encode()), Ok(Some(offer)));
    }
    if let Ok(frame) = SenderToReceiver::decode(data) {
        let again = frame.encode();
        if !matches!(frame, SenderToReceiver::Unknown { .. }) {
            assert_eq!(SenderToReceiver::decode(&again).ok(), Some(frame));
        }
    }
});
