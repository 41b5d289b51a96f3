//! A link's upload caps ([`UploadLedger`]): every byte received counts,
//! uploads side by side cannot pass a cap together, and what an upload did
//! not receive goes back.

use linkfs_core::share::ledger::{OverCap, UploadLedger};

#[test]
fn bytes_sent_to_an_upload_that_did_not_land_still_count() {
    let mut l = UploadLedger::new(150, 0, 0, 0, 0);
    let mut hold = l.reserve(100).unwrap();
    l.received(&mut hold, 60);
    // Refused or cancelled after 60 bytes came: they stay counted.
    l.close(hold, None);
    assert_eq!(l.added(), (0, 0, 60));
    assert_eq!(l.left().0, 90);
    assert_eq!(
        l.reserve(100),
        Err(OverCap::Bytes {
            max: 150,
            left: 90,
            need: 100
        })
    );
    let again = l.reserve(90).expect("what is left fits");
    l.close(again, None);
    assert_eq!(l.added(), (0, 0, 60), "nothing received, nothing counted");
}

#[test]
fn uploads_side_by_side_cannot_pass_the_cap_together() {
    let mut l = UploadLedger::new(100, 0, 0, 0, 0);
    let first = l.reserve(60).unwrap();
    let refused = l.reserve(60).unwrap_err();
    assert_eq!(
        refused,
        OverCap::Bytes {
            max: 100,
            left: 40,
            need: 60
        }
    );
    assert!(refused.to_string().contains("40 are left"), "{refused}");
    l.close(first, None);
    assert!(
        l.reserve(60).is_ok(),
        "a reservation given back frees its room"
    );
}

#[test]
fn a_file_cap_counts_files_that_landed_and_those_under_way() {
    let mut l = UploadLedger::new(0, 2, 0, 0, 0);
    let mut a = l.reserve(10).unwrap();
    l.received(&mut a, 10);
    l.close(a, Some(10));
    let b = l.reserve(10).unwrap();
    assert_eq!(
        l.reserve(10),
        Err(OverCap::Files { max: 2 }),
        "one landed, one under way"
    );
    l.close(b, None);
    let mut c = l.reserve(5).unwrap();
    l.received(&mut c, 5);
    l.close(c, Some(5));
    assert_eq!(l.added(), (15, 2, 15));
    assert_eq!(l.reserve(1), Err(OverCap::Files { max: 2 }));
    assert_eq!(
        l.left(),
        (0, 1),
        "no byte cap; the file cap reads 1, never 0"
    );
}

#[test]
fn bytes_past_a_reservation_are_not_counted_twice_and_no_cap_takes_anything() {
    let mut l = UploadLedger::new(0, 0, 0, 0, 0);
    let mut hold = l.reserve(u64::MAX / 2).unwrap();
    l.received(&mut hold, 1 << 40);
    assert_eq!(hold.left(), u64::MAX / 2 - (1 << 40));
    l.close(hold, Some(1 << 40));
    assert_eq!(l.added(), (1 << 40, 1, 1 << 40));
    assert_eq!(l.left(), (0, 0));
    let mut small = UploadLedger::new(10, 0, 0, 0, 0);
    let mut h = small.reserve(10).unwrap();
    small.received(&mut h, 25);
    small.close(h, None);
    assert_eq!(small.added().2, 10, "never more than it reserved");
}

#[test]
fn counts_from_before_a_restart_carry_over() {
    let mut l = UploadLedger::new(100, 3, 50, 1, 80);
    assert_eq!(l.added(), (50, 1, 80));
    assert_eq!(l.left(), (20, 2));
    assert!(l.reserve(21).is_err());
    // Received is never below what landed (an older state that did not count it).
    assert_eq!(UploadLedger::new(0, 0, 50, 1, 0).added(), (50, 1, 50));
}
