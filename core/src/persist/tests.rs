//! The persistence policy against a real sender session, over a perfect
//! in-memory link, with a store modelled as a list of frames.

use linkfs_proto::{EntryKind, Epoch};

use crate::index::Index;

use super::*;
use crate::sender::{SenderConfig, SenderSession};
use crate::share_index::{NewEntry, ShareIndex};

fn share(files: u32, sizes_scatter: bool) -> ShareIndex {
    let mut ix = ShareIndex::new(Epoch(77));
    let entry = |id: u32, parent: u32, kind: EntryKind, name: &str, size: u64| {
        (id, parent, kind, name.to_owned(), size)
    };
    let mut all = vec![entry(0, 0, EntryKind::Dir, "root", 0)];
    for i in 0..files {
        let size = if sizes_scatter {
            u64::from(i).wrapping_mul(2_654_435_761) % 1_000_000_007
        } else {
            3
        };
        all.push(entry(
            i + 1,
            0,
            EntryKind::File,
            &format!("file {i:06}"),
            size,
        ));
    }
    for (id, parent, kind, name, size) in &all {
        ix.push(&NewEntry {
            id: linkfs_proto::EntryId(*id),
            parent: linkfs_proto::EntryId(*parent),
            kind: *kind,
            name: name.as_bytes(),
            size: *size,
            mtime: 1_700_000_000 + i64::from(*id),
            mtime_nsec: 0,
            mode: 0o644,
            target: b"",
            dev: 1,
            ino: u64::from(*id),
            ctime_ns: 0,
        })
        .unwrap();
    }
    ix.mark_snapshot_complete();
    ix
}

/// A store: the state, the snapshot's parts and the frames by first sequence number.
#[derive(Default)]
struct Store {
    state: Option<StoredState>,
    parts: Vec<Vec<u8>>,
    frames: Vec<(Seq, Vec<u8>)>,
    writes: usize,
}

impl Store {
    fn apply(&mut self, w: StoreWrite<Vec<u8>>) {
        for op in w.ops {
            match op {
                StoreOp::Clear => {
                    self.frames.clear();
                    self.parts.clear();
                    self.state = None;
                }
                StoreOp::Batch { first, frame } => self.frames.push((first, frame)),
            }
        }
        self.frames.sort_by_key(|(s, _)| *s);
        self.state = Some(w.state);
        self.writes += 1;
    }

    fn rebuilt(&self) -> Rebuilt {
        rebuild(self.state, &self.parts, self.frames.iter().map(|(_, f)| f))
    }

    /// Takes the snapshot the receiver asks for at `now`, as the browser's
    /// store does: the parts replace the batches before it, in one write.
    fn snapshot(&mut self, r: &mut PersistentReceiver<Vec<u8>>, now: Millis) -> bool {
        let Some(state) = r.poll_snapshot(now) else {
            return false;
        };
        self.parts = std::iter::from_fn(|| r.snapshot_part()).collect();
        let next = state.snapshot.expect("a snapshot state").next;
        self.frames.retain(|(first, _)| *first >= next);
        self.state = Some(state);
        self.writes += 1;
        r.snapshot_done(Ok(()));
        true
    }
}

/// Moves frames both ways until nothing moves; `store` commits writes when given.
fn pump(
    sender: &mut SenderSession,
    ix: &ShareIndex,
    r: &mut PersistentReceiver<Vec<u8>>,
    mut store: Option<&mut Store>,
) {
    for _ in 0..100_000 {
        let mut moved = false;
        if let Some(f) = sender.poll_transmit(Millis(1), ix) {
            r.handle_frame(Millis(1), &f, &f);
            moved = true;
        }
        if let Some(f) = r.poll_transmit(Millis(1)) {
            let _ = sender.handle_frame(Millis(1), &f, ix);
            moved = true;
        }
        if let Some(s) = store.as_deref_mut()
            && let Some(w) = r.poll_write()
        {
            s.apply(w);
            r.write_done(Ok(()));
            moved = true;
        }
        if !moved {
            return;
        }
    }
    panic!("the sessions never went idle");
}

fn small_window() -> SenderConfig {
    SenderConfig {
        window_bytes: 8 * 1024,
        batch_cap: 4 * 1024,
        ..SenderConfig::default()
    }
}

#[test]
fn batches_are_acknowledged_only_after_their_write_commits() {
    let ix = share(20_000, true);
    let mut sender = SenderSession::new(small_window());
    let mut r = PersistentReceiver::new(Rebuilt::default(), ReceiverConfig::default(), None);
    r.channel_opened();
    pump(&mut sender, &ix, &mut r, None);
    assert_eq!(sender.acked(), Seq(0), "nothing is stored yet");
    let first = r.poll_write().expect("a write waits");
    assert!(r.poll_write().is_none(), "one write at a time");
    pump(&mut sender, &ix, &mut r, None);
    assert_eq!(sender.acked(), Seq(0), "the write has not committed");
    let end = first.state.next;
    let mut store = Store::default();
    store.apply(first);
    r.write_done(Ok(()));
    pump(&mut sender, &ix, &mut r, None);
    assert_eq!(
        sender.acked(),
        end,
        "acknowledged up to the committed write"
    );
    assert!(r.progress().persisted > 0);
    pump(&mut sender, &ix, &mut r, Some(&mut store));
    assert!(r.progress().complete);
    assert_eq!(r.progress().persisted, ix.entries());
    assert_eq!(sender.acked(), ix.log_end());
    assert!(store.writes >= 2);
}

#[test]
fn a_stored_index_is_rebuilt_and_only_the_rest_is_sent() {
    let ix = share(5_000, false);
    let mut store = Store::default();
    let mut sender = SenderSession::new(small_window());
    let mut r = PersistentReceiver::new(Rebuilt::default(), ReceiverConfig::default(), None);
    r.channel_opened();
    pump(&mut sender, &ix, &mut r, Some(&mut store));
    assert!(r.progress().complete);
    assert_eq!(store.state.map(|s| s.complete), Some(true));

    // The page is closed and opened again: the cache shows at once, complete.
    let rebuilt = store.rebuilt();
    assert_eq!(rebuilt.resume, Some((Epoch(77), ix.log_end())));
    let mut again = PersistentReceiver::new(rebuilt, ReceiverConfig::default(), None);
    let p = again.progress();
    assert_eq!((p.from_cache, p.received), (ix.entries(), ix.entries()));
    assert!(
        p.complete,
        "a complete cache counts while no session is open"
    );
    again.channel_opened();
    let mut sender = SenderSession::new(small_window());
    pump(&mut sender, &ix, &mut again, Some(&mut store));
    assert_eq!(sender.stats().ops_sent, 0, "nothing changed: nothing sent");
    assert!(again.progress().complete);
    assert!(!std::iter::from_fn(|| again.poll_event()).any(|e| e == StoredEvent::Reset));
}

#[test]
fn a_fresh_snapshot_clears_the_store_before_its_batches() {
    let ix = share(50, false);
    let mut store = Store::default();
    // A cache from another epoch: the sharer starts over.
    let stale = share(10, false);
    let mut s0 = SenderSession::new(SenderConfig::default());
    let mut r0 = PersistentReceiver::new(Rebuilt::default(), ReceiverConfig::default(), None);
    r0.channel_opened();
    pump(&mut s0, &stale, &mut r0, Some(&mut store));
    store.state = store.state.map(|s| StoredState {
        epoch: Epoch(1),
        ..s
    });
    let rebuilt = store.rebuilt();
    assert!(rebuilt.resume.is_some());
    let mut r = PersistentReceiver::new(rebuilt, ReceiverConfig::default(), None);
    r.channel_opened();
    let mut sender = SenderSession::new(SenderConfig::default());
    pump(&mut sender, &ix, &mut r, None);
    let w = r.poll_write().expect("a write");
    assert_eq!(w.ops[0], StoreOp::Clear);
    assert!(std::iter::from_fn(|| r.poll_event()).any(|e| e == StoredEvent::Reset));
    assert_eq!(r.progress().from_cache, 0);
}

#[test]
fn rebuild_refuses_a_store_that_is_not_a_clean_prefix() {
    let ix = share(3_000, true);
    let mut store = Store::default();
    let mut sender = SenderSession::new(small_window());
    let mut r = PersistentReceiver::new(Rebuilt::default(), ReceiverConfig::default(), None);
    r.channel_opened();
    pump(&mut sender, &ix, &mut r, Some(&mut store));
    assert!(store.frames.len() >= 3, "the test needs several batches");
    assert!(store.rebuilt().resume.is_some());

    let mut gap = Store {
        state: store.state,
        frames: store.frames.clone(),
        ..Store::default()
    };
    gap.frames.remove(1);
    assert!(gap.rebuilt().resume.is_none(), "a missing batch");
    let mut short = Store {
        state: store.state,
        frames: store.frames.clone(),
        ..Store::default()
    };
    short.frames.pop();
    assert!(
        short.rebuilt().resume.is_none(),
        "ends before the state says"
    );
    let mut junk = Store {
        state: store.state,
        frames: store.frames.clone(),
        ..Store::default()
    };
    junk.frames[0].1.truncate(5);
    let rebuilt = junk.rebuilt();
    assert!(
        rebuilt.resume.is_none() && rebuilt.index.is_empty(),
        "a damaged batch"
    );
    assert!(
        rebuild(None, &store.parts, store.frames.iter().map(|(_, f)| f))
            .resume
            .is_none()
    );
}

#[test]
fn failed_storage_is_said_once_and_the_index_stays_in_memory() {
    let ix = share(20_000, true);
    let mut sender = SenderSession::new(small_window());
    let mut r = PersistentReceiver::new(Rebuilt::default(), ReceiverConfig::default(), None);
    r.channel_opened();
    for round in 0..10_000 {
        pump(&mut sender, &ix, &mut r, None);
        match r.poll_write() {
            Some(_) => r.write_done(Err(StorageError::new(format!(
                "the disk is full ({round})"
            )))),
            None => break,
        }
    }
    let p = r.progress();
    assert!(p.complete, "acknowledged anyway: the index still arrives");
    assert_eq!(p.received, ix.entries());
    assert_eq!(p.persisted, 0);
    assert_eq!(p.storage_problem.as_deref(), Some("the disk is full (0)"));
}

#[test]
fn without_storage_batches_are_acknowledged_at_once() {
    let ix = share(2_000, true);
    let mut sender = SenderSession::new(small_window());
    let mut r = PersistentReceiver::<Vec<u8>>::new(
        Rebuilt::default(),
        ReceiverConfig::default(),
        Some("this browser has no IndexedDB".into()),
    );
    r.channel_opened();
    pump(&mut sender, &ix, &mut r, None);
    assert!(r.poll_write().is_none());
    assert!(r.progress().complete);
    assert_eq!(sender.acked(), ix.log_end());
}

#[test]
fn a_cache_rebuilt_a_frame_at_a_time_lists_its_first_folders_early_and_ends_equal() {
    let ix = share(20_000, true);
    let mut store = Store::default();
    let mut sender = SenderSession::new(small_window());
    let mut r = PersistentReceiver::new(Rebuilt::default(), ReceiverConfig::default(), None);
    r.channel_opened();
    pump(&mut sender, &ix, &mut r, Some(&mut store));
    assert!(store.frames.len() >= 4, "the test needs several batches");
    let whole = store.rebuilt();

    let mut steps = Rebuilder::new(store.state);
    assert!(steps.push(&store.frames[0].1));
    // After the first frame the root already lists entries.
    assert!(
        steps.index().child_count(linkfs_proto::EntryId(0)) > 0,
        "the first batch holds the root's children"
    );
    for (_, f) in &store.frames[1..] {
        assert!(steps.push(f));
    }
    let stepped = steps.finish();
    assert_eq!(stepped.resume, whole.resume);
    assert_eq!(stepped.complete, whole.complete);
    assert_eq!(stepped.index.len(), whole.index.len());

    // A damaged frame in the middle: nothing after it applies, and nothing is resumed.
    let mut broken = Rebuilder::new(store.state);
    assert!(broken.push(&store.frames[0].1));
    assert!(!broken.push(&store.frames[1].1[..5]));
    assert!(broken.failed());
    assert!(!broken.push(&store.frames[2].1));
    let rebuilt = broken.finish();
    assert!(rebuilt.resume.is_none() && rebuilt.index.is_empty());
}

/// Every entry of two indexes equal (what a visitor sees).
fn assert_same_index(a: &Index, b: &Index) {
    assert_eq!(a.len(), b.len(), "entry count");
    for id in 0..a.id_bound().max(b.id_bound()) {
        let id = linkfs_proto::EntryId(id);
        assert_eq!(a.get(id), b.get(id), "entry {id}");
        assert_eq!(a.children(id), b.children(id), "children of {id}");
    }
}

fn new_file(name: &str) -> NewEntry<'_> {
    NewEntry {
        id: linkfs_proto::EntryId(0),
        parent: linkfs_proto::EntryId(0),
        kind: EntryKind::File,
        name: name.as_bytes(),
        size: 9,
        mtime: 1_800_000_000,
        mtime_nsec: 0,
        mode: 0o600,
        target: b"",
        dev: 1,
        ino: 9,
        ctime_ns: 0,
    }
}

#[test]
fn a_complete_index_is_snapshotted_once_batches_pause_and_reopens_from_it() {
    let mut ix = share(40_000, true);
    let mut store = Store::default();
    let mut sender = SenderSession::new(small_window());
    let mut r = PersistentReceiver::new(Rebuilt::default(), ReceiverConfig::default(), None);
    r.channel_opened();
    pump(&mut sender, &ix, &mut r, Some(&mut store));
    assert!(r.progress().complete);
    let batches = store.frames.len();
    assert!(batches as u64 >= SNAPSHOT_MIN_BATCHES, "{batches} batches");
    // Batches came at t = 1 ms: not yet quiet for long enough.
    assert!(r.poll_snapshot(Millis(1 + SNAPSHOT_QUIET_MS - 1)).is_none());
    assert_eq!(r.poll_timeout(), Some(Millis(1 + SNAPSHOT_QUIET_MS)));
    assert!(store.snapshot(&mut r, Millis(1 + SNAPSHOT_QUIET_MS)));
    assert!(store.frames.is_empty(), "the snapshot replaces every batch");
    assert!(
        !store.snapshot(&mut r, Millis(10_000)),
        "one is enough until more batches come"
    );

    // Reopened: the snapshot alone gives the same index, complete, resumable.
    let rebuilt = store.rebuilt();
    assert_eq!(rebuilt.resume, Some((Epoch(77), ix.log_end())));
    assert!(rebuilt.complete);
    assert_same_index(&rebuilt.index, r.index());

    // Changes after it are stored as batches after the snapshot, and a reopen
    // applies them on top of it.
    let mut again = PersistentReceiver::new(rebuilt, ReceiverConfig::default(), None);
    again.channel_opened();
    let mut sender = SenderSession::new(small_window());
    for n in 0..5 {
        ix.add(&new_file(&format!("new {n}"))).expect("added");
        ix.remove(linkfs_proto::EntryId(100 + n)).expect("removed");
        pump(&mut sender, &ix, &mut again, Some(&mut store));
    }
    assert_eq!(sender.stats().ops_sent, 10, "only the changes are sent");
    assert!(!store.frames.is_empty());
    let reopened = store.rebuilt();
    assert_eq!(reopened.resume, Some((Epoch(77), ix.log_end())));
    assert_same_index(&reopened.index, again.index());
    assert!(reopened.index.lookup(b"new 4").is_some());
}

#[test]
fn a_failed_snapshot_write_loses_nothing_and_is_tried_again_later() {
    let ix = share(40_000, true);
    let mut store = Store::default();
    let mut sender = SenderSession::new(small_window());
    let mut r = PersistentReceiver::new(Rebuilt::default(), ReceiverConfig::default(), None);
    r.channel_opened();
    pump(&mut sender, &ix, &mut r, Some(&mut store));
    let t = Millis(1 + SNAPSHOT_QUIET_MS);
    let state = r.poll_snapshot(t).expect("due");
    assert!(state.snapshot.is_some());
    r.snapshot_done(Err(StorageError::new("the quota is used up")));
    assert!(
        r.progress().storage_problem.is_none(),
        "batches are still stored"
    );
    assert!(r.poll_snapshot(t).is_none(), "not again at once");
    assert!(store.rebuilt().resume.is_some());
}

#[test]
fn no_batch_write_starts_while_a_snapshot_is_written() {
    let mut ix = share(40_000, true);
    let mut store = Store::default();
    let mut sender = SenderSession::new(small_window());
    let mut r = PersistentReceiver::new(Rebuilt::default(), ReceiverConfig::default(), None);
    r.channel_opened();
    pump(&mut sender, &ix, &mut r, Some(&mut store));
    let state = r.poll_snapshot(Millis(1 + SNAPSHOT_QUIET_MS)).expect("due");
    let entries = r.index().len();
    // Parts are built over several turns; a change arriving in between waits.
    let first = r.snapshot_part().expect("the head");
    ix.add(&new_file("during the snapshot")).expect("added");
    pump(&mut sender, &ix, &mut r, None);
    assert!(r.snapshot_building());
    assert_eq!(
        r.index().len(),
        entries,
        "the index does not change under the snapshot"
    );
    let mut parts = vec![first];
    parts.extend(std::iter::from_fn(|| r.snapshot_part()));
    assert!(!r.snapshot_building());
    assert_eq!(r.index().len(), entries + 1, "then the change applies");
    assert_eq!(parts.len() as u32, state.snapshot.expect("snapshot").parts);
    let restored = rebuild(Some(state), &parts, std::iter::empty::<Vec<u8>>());
    assert_eq!(
        restored.index.len(),
        entries,
        "the snapshot is of the index when it began"
    );
    pump(&mut sender, &ix, &mut r, None);
    assert!(r.poll_write().is_none(), "writes wait for the snapshot");
    r.snapshot_done(Ok(()));
    let w = r.poll_write().expect("then the batch is written");
    assert_eq!(
        w.state.snapshot, state.snapshot,
        "with a state that names the snapshot"
    );
}

/// Regression: after the sharer started over (a new index), the store kept
/// saying "complete" from the old one, so a page closed during the new fill
/// showed a partial index as complete when reopened.
#[test]
fn a_sharer_that_starts_over_leaves_the_store_incomplete_until_it_says_complete_again() {
    let old = share(500, false);
    let mut store = Store::default();
    let mut s0 = SenderSession::new(SenderConfig::default());
    let mut r0 = PersistentReceiver::new(Rebuilt::default(), ReceiverConfig::default(), None);
    r0.channel_opened();
    pump(&mut s0, &old, &mut r0, Some(&mut store));
    assert_eq!(store.state.map(|s| s.complete), Some(true));
    store.state = store.state.map(|s| StoredState {
        epoch: Epoch(1),
        ..s
    });
    // The new index is not complete yet: its walk still runs.
    let mut new = ShareIndex::new(Epoch(78));
    let mut root = new_file("root");
    root.kind = EntryKind::Dir;
    new.push(&root).expect("root");
    for n in 0..5_000 {
        let name = format!("new file {n}");
        new.push(&NewEntry {
            id: new.next_id(),
            ..new_file(&name)
        })
        .expect("pushed");
    }
    let mut r = PersistentReceiver::new(store.rebuilt(), ReceiverConfig::default(), None);
    r.channel_opened();
    let mut sender = SenderSession::new(small_window());
    pump(&mut sender, &new, &mut r, Some(&mut store));
    let state = store.state.expect("written");
    assert_eq!(state.epoch, Epoch(78));
    assert!(!state.complete, "the new index is not complete");
    let reopened =
        PersistentReceiver::<Vec<u8>>::new(store.rebuilt(), ReceiverConfig::default(), None);
    assert!(!reopened.progress().complete);
    let persisted = r.progress().persisted;
    assert!(persisted > 0, "some of the new index was stored");
    assert_eq!(reopened.progress().received, persisted);
}
