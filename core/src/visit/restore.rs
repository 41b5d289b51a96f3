//! The cached index restored in steps: what to read from storage first, what
//! next, and how much to apply per step, so a reopened share lists its first
//! folders before the whole cache is applied.
//!
//! ```text
//! Visit                                   Restore
//!  Load(First) answered ----------------> first(state, parts, frames)
//!  Load(Rest) wanted? <------------------ rest_request()      (once the first screen is shown)
//!  Load(Rest) answered -----------------> rest(parts, frames)
//!  a step of work ----------------------> step(until, clock) -> done?
//!  queries meanwhile -------------------> index() / index_mut()  (the part applied so far)
//!  done --------------------------------> finish() -> Rebuilt
//! ```
//!
//! Bounds: what is held is what storage returned (the shell's frame handles);
//! nothing is copied until it is applied.

use std::collections::VecDeque;

use linkfs_proto::{BatchReader, Seq};

use crate::Millis;
use crate::index::Index;
use crate::persist::{Rebuilder, Rebuilt, StoredFrame, StoredState};

/// Batch frames (about 2,000 entries each) read before the rest, when the
/// store holds no snapshot.
pub const FIRST_FRAMES: u32 = 8;
/// Snapshot parts (16,384 entry slots, about 0.65 MB each) read before the
/// rest: the head and the first folders' entries (the walk numbers the top of
/// the tree first), little enough to read and restore at once.
pub const FIRST_PARTS: u32 = 3;

/// What the visit asks storage for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadRequest {
    /// The stored state, the first `parts` snapshot parts and the first
    /// `frames` stored batches (with a snapshot, those batches are not used:
    /// the rest request reads every batch after it).
    First { parts: u32, frames: u32 },
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
    /// What is still in storage beyond what was read; `asked`: requested.
    rest: Option<LoadRequest>,
    rest_asked: bool,
}

impl<F: StoredFrame> Restore<F> {
    /// The answer to [`LoadRequest::First`].
    pub(crate) fn first(state: Option<StoredState>, parts: Vec<F>, frames: Vec<F>) -> Self {
        let snapshot = state.and_then(|s| s.snapshot);
        let (parts, frames, rest) = match snapshot {
            Some(s) => {
                let from_part = parts.len() as u32;
                let rest = LoadRequest::Rest {
                    from_part: Some(from_part),
                    from_seq: s.next,
                };
                (parts, Vec::new(), Some(rest))
            }
            None => {
                let rest = (frames.len() as u32 >= FIRST_FRAMES)
                    .then(|| frames.last().and_then(|f| end_of(f)))
                    .flatten()
                    .map(|from_seq| LoadRequest::Rest {
                        from_part: None,
                        from_seq,
                    });
                (Vec::new(), frames, rest)
            }
        };
        Restore {
            rebuilder: Rebuilder::new(state),
            parts: parts.into(),
            frames: frames.into(),
            rest,
            rest_asked: false,
        }
    }

    /// Nothing could be read: an empty index, no resume point.
    pub(crate) fn nothing() -> Self {
        Self::first(None, Vec::new(), Vec::new())
    }

    /// The next read to ask storage for, once.
    pub(crate) fn rest_request(&mut self) -> Option<LoadRequest> {
        if self.rest_asked || self.rebuilder.failed() {
            return None;
        }
        self.rest_asked = true;
        self.rest
    }

    /// The answer to [`LoadRequest::Rest`].
    pub(crate) fn rest(&mut self, parts: Vec<F>, frames: Vec<F>) {
        self.parts.extend(parts);
        self.frames.extend(frames);
        self.rest = None;
    }

    /// Reading the rest failed: what was applied so far cannot be resumed from.
    pub(crate) fn rest_failed(&mut self) {
        self.rest = None;
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
            || (self.rest.is_none() && self.parts.is_empty() && self.frames.is_empty())
    }

    /// Applies parts, then frames, until `clock` reaches `until` (one at least).
    pub(crate) fn step(&mut self, until: Millis, clock: &mut dyn FnMut() -> Millis) {
        while !self.rebuilder.failed() {
            if let Some(part) = self.parts.pop_front() {
                self.rebuilder.push_part(&part.bytes());
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

/// The sequence number after a stored batch frame.
fn end_of<F: StoredFrame>(frame: &F) -> Option<Seq> {
    BatchReader::new(&frame.bytes())
        .ok()
        .map(|r| r.header().end())
}
