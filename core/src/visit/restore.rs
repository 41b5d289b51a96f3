//! The cached index restored in steps: what to read from storage first, what
//! next, and how much to apply per step, so a reopened share lists its first
//! folders before the whole cache is applied.
//!
//! ```text
//! Visit                                   Restore
//!  Load(First) answered ----------------> first(state, parts, frames)
//!  the next read? <---------------------- rest_request()  -> Load(Parts), ..., Load(Rest)
//!  it is answered ----------------------> rest(parts, frames)
//!  a step of work ----------------------> step(until, clock) -> done?
//!  queries meanwhile -------------------> index() / index_mut()  (the part applied so far)
//!  done --------------------------------> finish() -> Rebuilt
//! ```
//!
//! A stored snapshot's parts after the first are read in chunks of
//! [`REST_CHUNK_PARTS`], up to `reads_ahead` reads at a time (one unless the
//! shell says; `VisitConfig::restore_reads_ahead`), and the next is asked for
//! while the chunk before is being applied: storage reads (in the browser, in
//! IndexedDB's own process, and the parts unsealed in a worker of their own)
//! and the worker's restoring overlap. The shell answers reads in the order
//! they were asked for. The last
//! read ([`LoadRequest::Rest`]) also brings the batches stored after the
//! snapshot. Without a snapshot, the batches after the first are one read.
//!
//! Bounds: what is held is what storage returned and is not applied yet (the
//! shell's frame handles), under `reads_ahead + 1` chunks of parts: a read is
//! asked for only while fewer than a chunk wait and fewer than `reads_ahead`
//! are out (`VisitConfig::restore_chunk_parts`, [`REST_CHUNK_PARTS`] unless a
//! test says). Nothing is copied until it is applied.

use std::collections::VecDeque;

use linkfs_proto::{BatchReader, Seq};

use crate::Millis;
use crate::index::{Index, StoredPart};
use crate::persist::{Rebuilder, Rebuilt, StoredFrame, StoredState};

/// Batch frames (about 2,000 entries each) read before the rest, when the
/// store holds no snapshot.
pub const FIRST_FRAMES: u32 = 8;
/// Snapshot parts (16,384 entry slots, about 0.45 MB each as stored) read before the
/// rest: the head and the first folders' entries (the walk numbers the top of
/// the tree first), little enough to read and restore at once.
pub const FIRST_PARTS: u32 = 3;

/// Snapshot parts read at once after the first (about 6 MB at 16,384 entry
/// slots a part): a chunk is applied in a few hundred milliseconds, while
/// the next is read. 64 was tried at 10M (2026-11-29): its reads took
/// 1.5 s in all against 2.4, but the whole reopen was no sooner (3.6 s
/// against 3.4) and a task on the page's main thread took 82 ms.
pub const REST_CHUNK_PARTS: u32 = 16;

/// What the visit asks storage for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadRequest {
    /// The stored state, the first `parts` snapshot parts and the first
    /// `frames` stored batches (with a snapshot, those batches are not used:
    /// the rest request reads every batch after it).
    First { parts: u32, frames: u32 },
    /// Snapshot parts `from_part .. from_part + count`, no batches: a chunk
    /// of a snapshot's rest, with more to read after it.
    Parts { from_part: u32, count: u32 },
    /// Snapshot parts from number `from_part` on (none when `None`), and every
    /// stored batch whose first sequence number is `from_seq` or above.
    Rest {
        from_part: Option<u32>,
        from_seq: Seq,
    },
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Restore<F> {
    rebuilder: Rebuilder,
    parts: VecDeque<F>,
    frames: VecDeque<F>,
    /// The reads still to ask for, in order (chunks of parts, then the rest).
    reads: VecDeque<LoadRequest>,
    /// Reads asked for and not answered yet.
    reading: u32,
    /// Reads that may be out at once (1 or more).
    ahead: u32,
    /// Parts a read asks for at most; a read is asked for only while fewer wait.
    chunk: u32,
}

impl<F: StoredFrame> Restore<F> {
    /// The answer to [`LoadRequest::First`].
    pub(crate) fn first(
        state: Option<StoredState>,
        parts: Vec<F>,
        frames: Vec<F>,
        chunk: u32,
        ahead: u32,
    ) -> Self {
        let chunk = chunk.max(1);
        let snapshot = state.and_then(|s| s.snapshot);
        let (parts, frames, reads) = match snapshot {
            Some(s) => {
                let read = parts.len() as u32;
                (
                    parts,
                    Vec::new(),
                    snapshot_reads(read, s.parts, s.next, chunk),
                )
            }
            None => {
                let rest = (frames.len() as u32 >= FIRST_FRAMES)
                    .then(|| frames.last().and_then(|f| end_of(f)))
                    .flatten()
                    .map(|from_seq| LoadRequest::Rest {
                        from_part: None,
                        from_seq,
                    });
                (Vec::new(), frames, rest.into_iter().collect())
            }
        };
        Restore {
            rebuilder: Rebuilder::new(state),
            parts: parts.into(),
            frames: frames.into(),
            reads,
            reading: 0,
            ahead: ahead.max(1),
            chunk,
        }
    }

    /// Nothing could be read: an empty index, no resume point.
    pub(crate) fn nothing() -> Self {
        Self::first(None, Vec::new(), Vec::new(), REST_CHUNK_PARTS, 1)
    }

    /// The next read to ask storage for: up to `ahead` at a time, and only
    /// while fewer than a chunk of parts wait to be applied.
    pub(crate) fn rest_request(&mut self) -> Option<LoadRequest> {
        if self.reading >= self.ahead
            || self.rebuilder.failed()
            || self.parts.len() >= self.chunk as usize
        {
            return None;
        }
        let read = self.reads.pop_front()?;
        self.reading += 1;
        Some(read)
    }

    /// The answer to the oldest read [`rest_request`](Self::rest_request)
    /// gave that is not answered yet.
    pub(crate) fn rest(&mut self, parts: Vec<F>, frames: Vec<F>) {
        self.parts.extend(parts);
        self.frames.extend(frames);
        self.reading = self.reading.saturating_sub(1);
    }

    /// Reading the rest failed: what was applied so far cannot be resumed from.
    pub(crate) fn rest_failed(&mut self) {
        self.reads.clear();
        self.reading = 0;
        self.parts.clear();
        self.frames.clear();
        self.rebuilder.abandon();
    }

    /// Whether a step would apply something now.
    pub(crate) fn has_work(&self) -> bool {
        !self.rebuilder.failed() && (!self.parts.is_empty() || !self.frames.is_empty())
    }

    /// Whether everything is applied (or the rebuild failed): `finish` now.
    pub(crate) fn is_done(&self) -> bool {
        self.rebuilder.failed()
            || (self.reads.is_empty()
                && self.reading == 0
                && self.parts.is_empty()
                && self.frames.is_empty())
    }

    /// Applies parts, then frames, until `clock` reaches `until` (one at least).
    pub(crate) fn step(&mut self, until: Millis, clock: &mut dyn FnMut() -> Millis) {
        while !self.rebuilder.failed() {
            if let Some(part) = self.parts.pop_front() {
                let bytes = part.bytes();
                self.rebuilder.push_stored_part(if part.unsealed() {
                    StoredPart::Unsealed(&bytes)
                } else {
                    StoredPart::Sealed(&bytes)
                });
            } else if self.rebuilder.parts_left() == 0
                && let Some(frame) = self.frames.pop_front()
            {
                self.rebuilder.push(&frame.bytes());
            } else {
                return;
            }
            if clock() >= until {
                return;
            }
        }
    }

    pub(crate) fn index(&self) -> &Index {
        self.rebuilder.index()
    }

    pub(crate) fn index_mut(&mut self) -> &mut Index {
        self.rebuilder.index_mut()
    }

    pub(crate) fn opened_from_snapshot(&self) -> bool {
        self.rebuilder.snapshot().is_some()
    }

    pub(crate) fn finish(self) -> Rebuilt {
        self.rebuilder.finish()
    }
}

/// The reads of a snapshot's rest: parts `read..total` in chunks, the last
/// read (from the last chunk's first part on) with the batches after it.
fn snapshot_reads(read: u32, total: u32, from_seq: Seq, chunk: u32) -> VecDeque<LoadRequest> {
    let mut reads = VecDeque::new();
    let mut from = read;
    while total.saturating_sub(from) > chunk {
        reads.push_back(LoadRequest::Parts {
            from_part: from,
            count: chunk,
        });
        from += chunk;
    }
    reads.push_back(LoadRequest::Rest {
        from_part: Some(from),
        from_seq,
    });
    reads
}

/// The sequence number after a stored batch frame.
fn end_of<F: StoredFrame>(frame: &F) -> Option<Seq> {
    BatchReader::new(&frame.bytes())
        .ok()
        .map(|r| r.header().end())
}
