//! Two peers in memory over a simulated network (docs/code-style.md): a sharer shell with
//! files in memory and a receiver shell, joined by links that can lose,
//! duplicate, delay and reorder frames. `progress` runs both sides until
//! nothing is left to do or the time limit passes.

#![allow(dead_code)]

use std::collections::HashMap;

pub use linkfs_core::sim::{LinkModel, Rng, SimLink as Link};
use linkfs_core::*;
use linkfs_proto::{EntryId, EntryKind, Epoch, ReadErrorCode};

/// Files the sharer shell serves, by entry id.
pub type Files = HashMap<EntryId, Vec<u8>>;

/// The sharer: a share index, file contents and one session.
pub struct Sharer {
    pub index: ShareIndex,
    pub files: Files,
    pub session: SenderSession,
    /// Entries whose reads fail as if the file changed on disk.
    pub changed_on_disk: Vec<EntryId>,
}

/// The receiver shell: core's persistent receiver (what the browser runs) plus
/// what it got, with a store modelled as a list of frames.
pub struct Visitor {
    pub receiver: PersistentReceiver<Vec<u8>>,
    /// Stop committing writes (simulates a stalled storage).
    pub storage_stalled: bool,
    /// The stored batch frames, in log order, the stored snapshot's parts
    /// (taken whenever the receiver asks, as the browser does), and the state.
    pub stored: Vec<Vec<u8>>,
    pub snapshot: Vec<Vec<u8>>,
    pub snapshots_taken: u32,
    pub stored_state: Option<StoredState>,
    pub reads: HashMap<ReadHandle, Vec<u8>>,
    pub done: Vec<ReadHandle>,
    pub failed: Vec<(ReadHandle, ReadFailure)>,
    pub ended: Option<EndReason>,
    pub refused_ops: Vec<IndexError>,
    pub fresh_starts: u32,
}

impl Visitor {
    /// `persist`: keep batches in the modelled store and acknowledge them only
    /// once stored (as the browser does); otherwise acknowledge at once.
    pub fn new(rebuilt: Rebuilt, config: ReceiverConfig, persist: bool) -> Self {
        let storage = (!persist).then(|| "no storage in this test".to_owned());
        let mut receiver = PersistentReceiver::new(rebuilt, config, storage);
        receiver.channel_opened();
        Visitor {
            receiver,
            storage_stalled: false,
            stored: Vec::new(),
            snapshot: Vec::new(),
            snapshots_taken: 0,
            stored_state: None,
            reads: HashMap::new(),
            done: Vec::new(),
            failed: Vec::new(),
            ended: None,
            refused_ops: Vec::new(),
            fresh_starts: 0,
        }
    }

    fn drain_events(&mut self) {
        while let Some(ev) = self.receiver.poll_event() {
            match ev {
                StoredEvent::Reset => self.fresh_starts += 1,
                StoredEvent::Refused(e) => self.refused_ops.push(e),
                StoredEvent::Read(ReadEvent::Data {
                    handle,
                    offset,
                    data,
                }) => {
                    let buf = self.reads.entry(handle).or_default();
                    assert_eq!(
                        buf.len() as u64 + first_offset(offset, buf),
                        offset,
                        "bytes delivered out of order"
                    );
                    buf.extend_from_slice(&data);
                }
                StoredEvent::Read(ReadEvent::Done { handle }) => self.done.push(handle),
                StoredEvent::Read(ReadEvent::Failed { handle, error }) => {
                    self.failed.push((handle, error))
                }
                StoredEvent::Ended { reason } => self.ended = Some(reason),
                _ => {}
            }
        }
        if !self.storage_stalled {
            while let Some(write) = self.receiver.poll_write() {
                for op in write.ops {
                    match op {
                        StoreOp::Clear => {
                            self.stored.clear();
                            self.snapshot.clear();
                        }
                        StoreOp::Batch { frame, .. } => self.stored.push(frame),
                    }
                }
                self.stored_state = Some(write.state);
                self.receiver.write_done(Ok(()));
            }
        }
    }

    /// Stores a snapshot if the receiver asks for one at `now`: it stands for
    /// every batch stored so far (nothing else is stored or waits meanwhile).
    fn take_snapshot(&mut self, now: Millis) {
        if self.storage_stalled {
            return;
        }
        if let Some(state) = self.receiver.poll_snapshot(now) {
            self.snapshot = std::iter::from_fn(|| self.receiver.snapshot_part()).collect();
            self.stored.clear();
            self.stored_state = Some(state);
            self.snapshots_taken += 1;
            self.receiver.snapshot_done(Ok(()));
        }
    }

    /// What a reopened page rebuilds from this store.
    pub fn rebuilt(&self) -> Rebuilt {
        rebuild(self.stored_state, &self.snapshot, &self.stored)
    }
}

// Reads in these tests start at offset 0 unless a test says otherwise; the
// check above only needs the first delivery's offset.
fn first_offset(offset: u64, buf: &[u8]) -> u64 {
    if buf.is_empty() { offset } else { 0 }
}

pub struct Net {
    pub now: u64,
    pub rng: Rng,
    pub to_receiver: Link,
    pub to_sender: Link,
}

impl Net {
    pub fn new(seed: u64, model: LinkModel) -> Self {
        Net {
            now: 0,
            rng: Rng::new(seed),
            to_receiver: Link::new(model),
            to_sender: Link::new(model),
        }
    }
}

impl Sharer {
    pub fn new(index: ShareIndex, files: Files, config: SenderConfig) -> Self {
        Sharer {
            index,
            files,
            session: SenderSession::new(config),
            changed_on_disk: Vec::new(),
        }
    }

    fn read(&mut self, io: ReadIo) {
        let result = if self.changed_on_disk.contains(&io.entry) {
            Err(IoFailure {
                code: ReadErrorCode::Changed,
                message: "the file changed on the sharer's disk since it was listed".into(),
            })
        } else {
            let f = &self.files[&io.entry];
            let data = f[io.offset as usize..(io.offset + u64::from(io.len)) as usize].to_vec();
            Ok(data)
        };
        self.session.handle_io(&io, result);
    }

    /// The shell's one poll ([`SenderSession::poll_output`]): reads are done
    /// at once; the next frame, if there is one, and when to wake otherwise.
    fn poll(&mut self, now: Millis) -> (Option<Vec<u8>>, Option<Millis>) {
        loop {
            match self.session.poll_output(now, &self.index, true) {
                SenderOutput::Read(io) => self.read(io),
                SenderOutput::Upload(io) => panic!("these tests take no uploads: {io:?}"),
                SenderOutput::Transmit(frame) | SenderOutput::TransmitBulk(frame) => {
                    return (Some(frame), None);
                }
                SenderOutput::Ended(_) => return (None, None),
                SenderOutput::Wait(at) => return (None, at),
            }
        }
    }
}

/// Runs both sides until both are idle and nothing is in flight, or `limit_ms` of
/// simulated time passes. Returns the simulated time used.
pub fn progress(net: &mut Net, sharer: &mut Sharer, visitor: &mut Visitor, limit_ms: u64) -> u64 {
    progress_with(net, sharer, visitor, limit_ms, |_, _| {})
}

/// Like [`progress`], calling `tamper(net.now, frame)` on every frame to the receiver.
pub fn progress_with(
    net: &mut Net,
    sharer: &mut Sharer,
    visitor: &mut Visitor,
    limit_ms: u64,
    mut tamper: impl FnMut(u64, &mut Vec<u8>),
) -> u64 {
    let start = net.now;
    loop {
        let now = Millis(net.now);
        for f in net.to_sender.due(net.now) {
            let _ = sharer.session.handle_frame(now, &f, &sharer.index);
        }
        for f in net.to_receiver.due(net.now) {
            visitor.receiver.handle_frame(now, &f, &f);
            visitor.drain_events();
        }
        sharer.session.handle_timeout(now);
        visitor.receiver.handle_timeout(now);
        visitor.take_snapshot(now);
        let mut busy = false;
        let mut sharer_wakes = None;
        for _ in 0..10_000 {
            let mut moved = false;
            let (frame, wakes) = sharer.poll(now);
            sharer_wakes = wakes;
            if let Some(mut f) = frame {
                tamper(net.now, &mut f);
                net.to_receiver.send(&mut net.rng, net.now, f);
                moved = true;
            }
            visitor.drain_events();
            if let Some(f) = visitor.receiver.poll_transmit(now) {
                net.to_sender.send(&mut net.rng, net.now, f);
                moved = true;
            }
            if !moved {
                break;
            }
            busy = true;
        }
        visitor.drain_events();
        let next = [
            net.to_receiver.next_delivery(),
            net.to_sender.next_delivery(),
            sharer_wakes.map(|m| m.0),
            visitor.receiver.poll_timeout().map(|m| m.0),
        ]
        .into_iter()
        .flatten()
        .filter(|t| *t > net.now)
        .min();
        match next {
            Some(t) if t - start <= limit_ms => net.now = t,
            Some(_) => return net.now - start,
            None if busy => net.now += 1,
            None => return net.now - start,
        }
    }
}

/// A tree: root, `dirs` directories under it, `files_per_dir` files in each, plus
/// one big directory. File contents are deterministic bytes of the given sizes.
pub fn build_tree(
    dirs: u32,
    files_per_dir: u32,
    big_dir: u32,
    file_size: impl Fn(u32) -> u64,
) -> (ShareIndex, Files) {
    let mut ix = ShareIndex::new(Epoch(42));
    let mut files = Files::new();
    let mut next = 0u32;
    let mut add = |ix: &mut ShareIndex,
                   files: &mut Files,
                   parent: u32,
                   kind: EntryKind,
                   name: String,
                   size: u64| {
        let id = next;
        next += 1;
        let e = NewEntry {
            id: EntryId(id),
            parent: EntryId(parent),
            kind,
            name: name.as_bytes(),
            size,
            mtime: 1_600_000_000 + i64::from(id) * 7,
            mtime_nsec: 0,
            mode: if kind == EntryKind::Dir { 0o755 } else { 0o644 },
            target: b"",
            dev: 1,
            ino: u64::from(id),
            ctime_ns: 0,
        };
        ix.push(&e).expect("tree entries are valid");
        if kind == EntryKind::File {
            let bytes: Vec<u8> = (0..size)
                .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(id) as u8)
                .collect();
            files.insert(EntryId(id), bytes);
        }
        id
    };
    add(&mut ix, &mut files, 0, EntryKind::Dir, "root".into(), 0);
    let mut n = 0;
    for d in 0..dirs {
        let dir = add(
            &mut ix,
            &mut files,
            0,
            EntryKind::Dir,
            format!("dir {d:04}"),
            0,
        );
        for f in 0..files_per_dir {
            add(
                &mut ix,
                &mut files,
                dir,
                EntryKind::File,
                format!("file-{f:05}.txt"),
                file_size(n),
            );
            n += 1;
        }
    }
    if big_dir > 0 {
        let big = add(&mut ix, &mut files, 0, EntryKind::Dir, "big".into(), 0);
        for f in 0..big_dir {
            add(
                &mut ix,
                &mut files,
                big,
                EntryKind::File,
                format!("e{f}"),
                u64::from(f % 7),
            );
        }
    }
    ix.mark_snapshot_complete();
    (ix, files)
}

/// Asserts that the receiver's index holds exactly the sharer's entries.
pub fn assert_same_index(share: &ShareIndex, got: &Index) {
    assert_eq!(got.len() as u64, share.entries(), "entry count");
    for id in 0..share.next_id().0 {
        let id = EntryId(id);
        match (share.view(id), got.get(id)) {
            (None, None) => {}
            (Some(want), Some(have)) => {
                assert_eq!(
                    (
                        want.parent,
                        want.kind,
                        want.name,
                        want.size,
                        want.mtime,
                        want.mode,
                        want.generation,
                        want.target
                    ),
                    (
                        have.parent,
                        have.kind,
                        &have.name[..],
                        have.size,
                        have.mtime,
                        have.mode,
                        have.generation,
                        have.target
                    ),
                    "entry {id}"
                );
            }
            (want, have) => panic!("entry {id}: sharer has {want:?}, receiver has {have:?}"),
        }
    }
}
