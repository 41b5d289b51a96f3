//! A receiver whose data link drops again and again: it keeps its index, its
//! reads and their progress, resumes where it was on each new link, and ends
//! with exactly the sharer's index, having received about one index's worth.

mod sim;

use linkfs_core::*;
use linkfs_proto::EntryId;
use sim::*;

fn scattered(i: u32) -> u64 {
    u64::from(i).wrapping_mul(2_654_435_761) % 4093
}

#[test]
fn twenty_drops_during_the_fill_cost_about_one_index() {
    let (ix, files) = build_tree(40, 500, 5000, scattered);
    let config = SenderConfig {
        window_bytes: 64 * 1024,
        batch_cap: 16 * 1024,
        ..SenderConfig::default()
    };
    // One uninterrupted fill, for the reference size.
    let full = {
        let (ix, files) = build_tree(40, 500, 5000, scattered);
        let mut sharer = Sharer::new(ix, files, config.clone());
        let mut v = Visitor::new(Rebuilt::default(), ReceiverConfig::default(), true);
        progress(
            &mut Net::new(1, LinkModel::PERFECT),
            &mut sharer,
            &mut v,
            600_000,
        );
        assert!(v.receiver.progress().complete);
        sharer.session.stats().batch_bytes_sent
    };

    let mut sharer = Sharer::new(ix, files, config.clone());
    let mut v = Visitor::new(Rebuilt::default(), ReceiverConfig::default(), true);
    let mut sent = 0;
    for drop in 0..20 {
        let mut net = Net::new(100 + drop, LinkModel::PERFECT);
        progress(&mut net, &mut sharer, &mut v, 3 + drop % 4);
        // The link goes: what was in flight is lost; a new link, a new session.
        sent += sharer.session.stats().batch_bytes_sent;
        v.receiver.channel_closed();
        sharer.session = SenderSession::new(config.clone());
        v.receiver.channel_opened();
    }
    let mut net = Net::new(999, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 600_000);
    sent += sharer.session.stats().batch_bytes_sent;
    assert!(v.receiver.progress().complete);
    assert_same_index(&sharer.index, v.receiver.index());
    assert_eq!(v.fresh_starts, 0, "every new link resumed");
    let ratio = sent as f64 / full as f64;
    eprintln!("index bytes with 20 drops / without: {ratio:.3} ({sent} / {full})");
    assert!(ratio < 1.5, "{ratio:.3}x one index");
}

#[test]
fn a_read_continues_at_its_byte_after_a_drop() {
    let (ix, files) = build_tree(1, 1, 0, |_| 6_000_000);
    let config = SenderConfig::default();
    let mut sharer = Sharer::new(ix, files.clone(), config.clone());
    let mut v = Visitor::new(Rebuilt::default(), ReceiverConfig::default(), false);
    let mut net = Net::new(2, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 60_000);
    let file = EntryId(2);
    let want = files[&file].clone();
    let h = v
        .receiver
        .start_read(file, None, 0, want.len() as u64)
        .unwrap();
    // Part of the file arrives, then the link drops.
    let mut net = Net::new(3, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 2);
    let before = v.reads.get(&h).map_or(0, Vec::len);
    assert!(
        before > 0 && before < want.len(),
        "{before} bytes before the drop"
    );
    let chunks_before = sharer.session.stats().chunk_bytes_sent;
    v.receiver.channel_closed();
    assert!(v.failed.is_empty(), "the read waits, it does not fail");
    sharer.session = SenderSession::new(config);
    v.receiver.channel_opened();
    let mut net = Net::new(4, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 600_000);
    assert!(v.done.contains(&h), "the read finished after the new link");
    assert!(v.reads[&h] == want, "the bytes are the file's, in order");
    let after = sharer.session.stats().chunk_bytes_sent;
    assert!(
        after <= (want.len() - before) as u64 + (8 << 20),
        "the new session sent {after} bytes for the {} missing (plus at most what was in flight)",
        want.len() - before
    );
    let _ = chunks_before;
}

#[test]
fn giving_up_ends_the_session_and_fails_the_reads() {
    let (ix, files) = build_tree(1, 1, 0, |_| 1_000_000);
    let mut sharer = Sharer::new(ix, files, SenderConfig::default());
    let mut v = Visitor::new(Rebuilt::default(), ReceiverConfig::default(), false);
    progress(
        &mut Net::new(5, LinkModel::PERFECT),
        &mut sharer,
        &mut v,
        60_000,
    );
    let h = v
        .receiver
        .start_read(EntryId(2), None, 0, 1_000_000)
        .unwrap();
    v.receiver.channel_closed();
    v.receiver.give_up();
    let mut net = Net::new(6, LinkModel::PERFECT);
    progress(&mut net, &mut sharer, &mut v, 10);
    assert!(v.failed.iter().any(|(f, _)| *f == h));
    assert_eq!(v.ended, Some(EndReason::ConnectionLost));
}

/// Regression (both ends; the receiver persists, as the browser does): a receiver that reconnects with the complete index gets the
/// sharer's (empty) "complete" batch at the position it already has, and
/// acknowledges that same position. The sharer took an acknowledgement that
/// does not move forward for no acknowledgement at all, resent the batch on
/// its timer and, after 8 resends (about 70 s), ended the session "the receiver
/// stopped acknowledging the index", killing a long download in the browser.
#[test]
fn a_resumed_session_with_the_complete_index_is_not_ended_for_lack_of_acks() {
    let (ix, files) = build_tree(2, 10, 0, |_| 1_000);
    let config = SenderConfig::default();
    let mut sharer = Sharer::new(ix, files, config.clone());
    let mut v = Visitor::new(Rebuilt::default(), ReceiverConfig::default(), true);
    progress(
        &mut Net::new(7, LinkModel::PERFECT),
        &mut sharer,
        &mut v,
        60_000,
    );
    assert!(v.receiver.progress().complete);
    v.receiver.channel_closed();
    sharer.session = SenderSession::new(config);
    v.receiver.channel_opened();
    // Five simulated minutes on the new link, nothing else happening.
    progress(
        &mut Net::new(8, LinkModel::PERFECT),
        &mut sharer,
        &mut v,
        300_000,
    );
    assert!(
        sharer.session.is_open(),
        "the resumed session ended: {:?}",
        sharer.session.end_reason()
    );
    assert_eq!(v.ended, None);
    assert_eq!(
        sharer.session.stats().retransmits,
        0,
        "a batch that was acknowledged was sent again"
    );
}
