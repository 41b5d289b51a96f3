//! Sorting a big folder's children by name in short steps.
//!
//! The walk adds a folder's children in the order the disk lists them; a lookup
//! by name sorts them first, under the sharer's write lock. A million names take
//! about 600 ms to sort, and every session waits that long behind the first live
//! change (or read by path) in such a folder. A [`FolderSort`] does the same
//! sort as a bottom-up merge sort whose every [`FolderSort::step`] needs only
//! shared access to the index and does a bounded amount of work, so the caller
//! holds a read lock for a few milliseconds at a time and writers get in between.
//!
//! ```text
//!   start_folder_sort (copy of the ids)
//!        │
//!        ▼
//!   Runs: sort one run of RUN ids per step ──all runs──▶ Merge: merge pairs of
//!        │                                               runs into the other
//!        │                                               buffer, STEP ids per step;
//!        │                                               width doubles per pass
//!        ▼                                                      │ one run left
//!   Stale (a child came or went: given up)          Done ◀──────┘
//!                                                     │ install_order (write lock)
//! ```
//!
//! Bounds: two `u32` buffers (8 bytes per child); a step compares at most about
//! `RUN` log2 `RUN` or [`STEP`] pairs of names.

use std::cmp::Ordering;

use super::ShareIndex;

/// Ids sorted in place per step in the first phase.
const RUN: usize = 16_384;
/// Ids merged per step in the merge phase.
pub const STEP: usize = 65_536;

/// What a step left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortStep {
    /// More steps are needed.
    Going,
    /// Sorted: hand it to [`ShareIndex::install_order`].
    Done,
    /// A child came or went, or the folder is gone: the sort is given up.
    Stale,
}

/// A folder's children being sorted by name. See the module docs.
#[derive(Debug)]
pub struct FolderSort {
    dir: u32,
    changed_at: u64,
    src: Vec<u32>,
    dst: Vec<u32>,
    phase: Phase,
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Sorting runs of `RUN`; the next run starts here.
    Runs {
        next: usize,
    },
    /// Merging runs of `width` from `src` into `dst`: the pair starting at
    /// `pair`, its left half read up to `i`, its right up to `j`, written up to `k`.
    Merge {
        width: usize,
        pair: usize,
        i: usize,
        j: usize,
        k: usize,
    },
    Done,
    Stale,
}

impl FolderSort {
    pub(super) fn new(dir: u32, changed_at: u64, ids: Vec<u32>) -> FolderSort {
        let phase = if ids.len() <= 1 {
            Phase::Done
        } else {
            Phase::Runs { next: 0 }
        };
        FolderSort {
            dir,
            changed_at,
            src: ids,
            dst: Vec::new(),
            phase,
        }
    }

    /// How many children it sorts.
    pub fn len(&self) -> usize {
        self.src.len()
    }

    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }

    /// One bounded piece of the sort, with the index as it is now.
    pub fn step(&mut self, index: &ShareIndex) -> SortStep {
        if matches!(self.phase, Phase::Runs { .. } | Phase::Merge { .. })
            && index.folder_changed(self.dir, self.changed_at)
        {
            self.phase = Phase::Stale;
            self.src = Vec::new();
            self.dst = Vec::new();
        }
        let cmp =
            |a: &u32, b: &u32| -> Ordering { index.name(*a as usize).cmp(index.name(*b as usize)) };
        let n = self.src.len();
        match self.phase {
            Phase::Runs { next } => {
                let end = (next + RUN).min(n);
                self.src[next..end].sort_unstable_by(cmp);
                self.phase = if end < n {
                    Phase::Runs { next: end }
                } else if RUN >= n {
                    Phase::Done
                } else {
                    self.dst = vec![0; n];
                    Phase::Merge {
                        width: RUN,
                        pair: 0,
                        i: 0,
                        j: RUN.min(n),
                        k: 0,
                    }
                };
            }
            Phase::Merge {
                width,
                mut pair,
                mut i,
                mut j,
                mut k,
            } => {
                let mut budget = STEP;
                loop {
                    let mid = (pair + width).min(n);
                    let end = (pair + 2 * width).min(n);
                    while budget > 0 && k < end {
                        let take_left = j >= end
                            || (i < mid && cmp(&self.src[i], &self.src[j]) != Ordering::Greater);
                        if take_left {
                            self.dst[k] = self.src[i];
                            i += 1;
                        } else {
                            self.dst[k] = self.src[j];
                            j += 1;
                        }
                        k += 1;
                        budget -= 1;
                    }
                    if k < end {
                        self.phase = Phase::Merge {
                            width,
                            pair,
                            i,
                            j,
                            k,
                        };
                        break;
                    }
                    // This pair is merged: the next, or the next pass.
                    pair = end;
                    if pair >= n {
                        std::mem::swap(&mut self.src, &mut self.dst);
                        let width = width * 2;
                        if width >= n {
                            self.dst = Vec::new();
                            self.phase = Phase::Done;
                        } else {
                            self.phase = Phase::Merge {
                                width,
                                pair: 0,
                                i: 0,
                                j: width.min(n),
                                k: 0,
                            };
                        }
                        break;
                    }
                    i = pair;
                    j = (pair + width).min(n);
                    k = pair;
                    if budget == 0 {
                        self.phase = Phase::Merge {
                            width,
                            pair,
                            i,
                            j,
                            k,
                        };
                        break;
                    }
                }
            }
            Phase::Done | Phase::Stale => {}
        }
        match self.phase {
            Phase::Done => SortStep::Done,
            Phase::Stale => SortStep::Stale,
            _ => SortStep::Going,
        }
    }

    /// The folder, when it started, and the ids in name order, if done.
    pub(super) fn into_order(self) -> Option<(u32, u64, Vec<u32>)> {
        matches!(self.phase, Phase::Done).then_some((self.dir, self.changed_at, self.src))
    }
}
