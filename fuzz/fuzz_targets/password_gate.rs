//! Guesses at a link's password (`core::PasswordGate`) in any order, from any
//! sources, at any times, with any verdicts: no panic, a wait is never longer
//! than a source's refill, no source guesses more than its budget allows, and
//! the sources remembered stay bounded. The password frame's decoder too.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linkfs_core::password_gate::{MAX_SOURCES, SOURCE_BURST, SOURCE_REFILL_MS};
use linkfs_core::{GuessSource, Millis, PasswordGate};
use linkfs_proto::ReceiverToSender;

fuzz_target!(|data: &[u8]| {
    let _ = ReceiverToSender::decode(data);
    let mut gate = PasswordGate::new(Millis(0));
    let mut now = 0u64;
    let mut held = Vec::new();
    // Wrong guesses tried per source within its first refill, from time 0.
    let mut early_wrong = std::collections::HashMap::<u8, u32>::new();
    for op in data.chunks(3) {
        let pick = |n: usize| op.get(n).copied().unwrap_or(0);
        now += u64::from(pick(0)) * 37;
        let source = match pick(1) {
            0 => GuessSource(None),
            s => {
                let mut a = [0u8; 16];
                a[0] = s;
                a[1] = pick(2) & 0x3;
                GuessSource(Some(a))
            }
        };
        match gate.take(Millis(now), source) {
            Ok(ticket) => {
                if pick(2) & 0x80 != 0 {
                    held.push((ticket, pick(1)));
                } else {
                    let right = pick(2) & 0x40 != 0;
                    if !right && now < SOURCE_REFILL_MS {
                        *early_wrong.entry(pick(1)).or_default() += 1;
                    }
                    gate.settle(ticket, right);
                }
            }
            Err(wait) => assert!(wait > 0 && wait <= SOURCE_REFILL_MS, "wait {wait}"),
        }
        if held.len() > 4 {
            let (ticket, _) = held.remove(0);
            gate.settle(ticket, false);
        }
        assert!(gate.sources() <= MAX_SOURCES + 1, "{} sources", gate.sources());
    }
    for (source, wrong) in early_wrong {
        // Sources 1..: one address each per value of byte 2's low bits, so a
        // value of byte 1 covers at most 4 sources.
        let per = if source == 0 { 1 } else { 4 };
        assert!(wrong <= (SOURCE_BURST + 1) * per, "source {source}: {wrong} wrong guesses in the first refill");
    }
});
