//! Relay messages and sealed payloads from the network: parsing and opening never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linkfs_core::{Direction, ShareLink, ShareSecret, SignalKey};
use linkfs_proto::signal::{ClientToRelay, RelayToClient, SignalPayload};

fuzz_target!(|data: &[u8]| {
    let _ = serde_json::from_slice::<RelayToClient>(data);
    let _ = serde_json::from_slice::<ClientToRelay>(data);
    let _ = serde_json::from_slice::<SignalPayload>(data);
    let key = SignalKey::from_secret(&ShareSecret::from_bytes([7; 16]));
    let _ = key.open("roomroom", Direction::HostToGuest, data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = key.open_payload("roomroom", Direction::GuestToHost, text);
        let _ = ShareLink::parse(text);
    }
});
