//! A session that confines symlinks (a link scoped to a subfolder) sends no
//! target that leads out of the shared folder: such a link arrives with an
//! empty target, and one that stays inside arrives as it is.

use linkfs_core::{
    Index, Millis, NewEntry, Receiver, ReceiverConfig, SenderConfig, SenderSession, ShareIndex,
    target_leaves_root,
};
use linkfs_proto::{EntryId, EntryKind, Epoch};

/// id, parent, kind, name, symlink target.
type Row = (u32, u32, EntryKind, &'static [u8], &'static [u8]);

fn share() -> ShareIndex {
    let mut ix = ShareIndex::new(Epoch(5));
    let entries: [Row; 6] = [
        (0, 0, EntryKind::Dir, b"scope", b""),
        (1, 0, EntryKind::File, b"a.txt", b""),
        (2, 0, EntryKind::Dir, b"sub", b""),
        (3, 2, EntryKind::Symlink, b"in", b"../a.txt"),
        (4, 2, EntryKind::Symlink, b"out", b"../../secret/plans.txt"),
        (5, 0, EntryKind::Symlink, b"abs", b"/home/someone/else"),
    ];
    for (id, parent, kind, name, target) in entries {
        ix.push(&NewEntry {
            id: EntryId(id),
            parent: EntryId(parent),
            kind,
            name,
            size: 1,
            mtime: 1,
            mtime_nsec: 0,
            mode: 0o644,
            target,
            dev: 1,
            ino: u64::from(id),
            ctime_ns: 1,
        })
        .unwrap();
    }
    ix.mark_snapshot_complete();
    ix
}

fn received(confine: bool) -> Receiver {
    let ix = share();
    let mut s = SenderSession::new(SenderConfig {
        confine_symlinks: confine,
        ..SenderConfig::default()
    });
    let mut r = Receiver::new(ReceiverConfig::default(), Index::new(), None);
    for _ in 0..20 {
        while let Some(f) = r.poll_transmit(Millis(0)) {
            let _ = s.handle_frame(Millis(0), &f, &ix);
        }
        while let Some(f) = s.poll_transmit(Millis(0), &ix) {
            r.handle_frame(Millis(0), &f);
        }
    }
    assert!(r.progress().complete, "the index arrived");
    r
}

fn target(r: &Receiver, id: u32) -> Vec<u8> {
    r.index().get(EntryId(id)).expect("listed").target.to_vec()
}

#[test]
fn a_confined_session_sends_no_symlink_target_that_leads_out() {
    let r = received(true);
    assert_eq!(target(&r, 3), b"../a.txt", "inside: as it is");
    assert_eq!(target(&r, 4), b"", "climbs out: no target");
    assert_eq!(target(&r, 5), b"", "absolute: no target");
    // The links themselves are listed.
    assert_eq!(r.index().len(), 6);
    // Whole-share sessions are unchanged.
    let whole = received(false);
    assert_eq!(target(&whole, 4), b"../../secret/plans.txt");
}

#[test]
fn targets_are_judged_by_where_they_lead_from_the_link() {
    assert!(!target_leaves_root(0, b"a/b"));
    assert!(!target_leaves_root(1, b"../a"));
    assert!(target_leaves_root(1, b"../../a"));
    assert!(target_leaves_root(0, b".."));
    assert!(!target_leaves_root(2, b"./x/../../y"));
    assert!(target_leaves_root(0, b"x/../../y"));
    assert!(target_leaves_root(3, b"/etc/passwd"));
    assert!(!target_leaves_root(0, b""));
}
