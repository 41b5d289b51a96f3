//! The signaling machines fed anything a relay (or a guest through it) could send:
//! no panic, and the bounds hold (visitors admitted, visitors at a password
//! prompt, actions per input), with a password link and visitors passing it.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linkfs_core::signaling::MAX_AT_PROMPT;
use linkfs_core::{GuestSignaling, HostAction, HostSignaling, IceCandidate, LinkId, ShareLink, ShareSecret};
use linkfs_proto::signal::PeerId;

const MAX_VISITORS: usize = 3;

fuzz_target!(|data: &[u8]| {
    let sharer = linkfs_proto::sharer_key::SharerKey::from_seed([6; 32]);
    let link = ShareLink::of_sharer("http://127.0.0.1:1", &sharer, [5; 16]);
    let mut guest = GuestSignaling::new(&link, [1; 16]);
    let mut host = HostSignaling::new(&link, sharer, MAX_VISITORS, [2; 16]);
    let _ = host.add_link(LinkId(1), &ShareSecret::from_bytes([3; 16]));
    host.set_asks_password(LinkId(1), true);
    for (i, chunk) in data.split(|b| *b == 0xfe).enumerate() {
        let Ok(text) = std::str::from_utf8(chunk) else { continue };
        guest.handle_relay_text(text);
        host.handle_relay_text(text);
        match i % 7 {
            5 => {
                let _ = host.visitor_passed(PeerId(i as u32 % 7));
            }
            6 => host.visitor_connected(PeerId(i as u32 % 7)),
            0 => guest.offer_made("v=0".into()),
            1 => guest.answer_applied(),
            2 => guest.local_candidate(IceCandidate {
                candidate: text.into(),
                sdp_mid: None,
                sdp_mline_index: Some(0),
            }),
            3 => host.visitor_ended(PeerId(i as u32 % 7)),
            _ => host.answer_made(PeerId(i as u32 % 7), "v=0".into()),
        }
        let guest_actions = std::iter::from_fn(|| guest.poll_action()).count();
        assert!(guest_actions <= 2 + 64, "{guest_actions} guest actions for one input");
        while let Some(action) = host.poll_action() {
            if let HostAction::Answer { .. } = action {
                assert!(host.admitted() <= MAX_VISITORS);
            }
        }
        assert!(host.admitted() <= MAX_VISITORS, "{} admitted", host.admitted());
        assert!(host.at_prompt() <= MAX_AT_PROMPT, "{} at a prompt", host.at_prompt());
    }
});
