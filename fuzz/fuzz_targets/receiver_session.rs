//! A receiver session fed arbitrary frames (as from a malicious sharer): no
//! panic, and no read ever delivers bytes that failed their check.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linkfs_core::{Index, Millis, ReadEvent, Receiver, ReceiverConfig, ReceiverEvent};

fuzz_target!(|data: &[u8]| {
    let mut r = Receiver::new(ReceiverConfig::default(), Index::new(), None);
    for (n, frame) in data.split(|b| *b == 0xfd).enumerate() {
        r.handle_frame(Millis(n as u64), frame);
        while r.poll_transmit(Millis(n as u64)).is_some() {}
        while let Some(ev) = r.poll_event() {
            if let ReceiverEvent::Read(ReadEvent::Data { .. }) = ev {
                panic!("no read was started, so no data may be delivered");
            }
        }
        r.handle_timeout(Millis(n as u64 * 1000));
    }
});
