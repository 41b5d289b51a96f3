//! The log's positions and operations, held as runs.
//!
//! A run is `len` consecutive positions from `seq` whose operations are
//! consecutive too: upserts (or removals) of ids `id, id + 1, ...`. The walk
//! numbers entries in the order it logs them, so a walked tree of ten million
//! entries is a handful of runs (16 bytes each) instead of ten million
//! position-operation pairs (12 bytes each). Later changes make runs of one;
//! the worst case, every run of one, costs 16 bytes a position.

use linkfs_proto::EntryId;

/// One operation of the log: an entry id, with the top bit set for a removal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOp(pub(super) u32);

impl LogOp {
    const REMOVE: u32 = 1 << 31;

    pub fn upsert(id: EntryId) -> LogOp {
        LogOp(id.0)
    }

    pub fn remove(id: EntryId) -> LogOp {
        LogOp(id.0 | Self::REMOVE)
    }

    pub fn id(self) -> EntryId {
        EntryId(self.0 & !Self::REMOVE)
    }

    pub fn is_remove(self) -> bool {
        self.0 & Self::REMOVE != 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    seq: u64,
    op: u32,
    len: u32,
}

impl Run {
    fn end(&self) -> u64 {
        self.seq + u64::from(self.len)
    }

    fn at(&self, k: u32) -> (u64, LogOp) {
        (self.seq + u64::from(k), LogOp(self.op + k))
    }
}

/// Log positions (ascending) and their operations.
#[derive(Debug, Default)]
pub(super) struct LogRuns {
    runs: Vec<Run>,
    len: usize,
}

impl LogRuns {
    /// Positions held.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The last position held.
    pub(super) fn last_seq(&self) -> Option<u64> {
        self.runs.last().map(|r| r.end() - 1)
    }

    /// Appends `op` at `seq`, which must be after every position held.
    pub(super) fn push(&mut self, seq: u64, op: LogOp) {
        debug_assert!(self.last_seq().is_none_or(|last| last < seq));
        self.len += 1;
        if let Some(r) = self.runs.last_mut()
            && r.end() == seq
            && r.len < u32::MAX
            && r.op.checked_add(r.len) == Some(op.0)
            // A run never crosses from upserts into removals.
            && LogOp(r.op).is_remove() == op.is_remove()
        {
            r.len += 1;
            return;
        }
        self.runs.push(Run {
            seq,
            op: op.0,
            len: 1,
        });
    }

    /// Every position at or after `from`, in order.
    pub(super) fn iter_from(&self, from: u64) -> impl Iterator<Item = (u64, LogOp)> + '_ {
        let first = self.runs.partition_point(|r| r.end() <= from);
        self.runs[first..].iter().flat_map(move |r| {
            let skip = from.saturating_sub(r.seq).min(u64::from(r.len)) as u32;
            (skip..r.len).map(move |k| r.at(k))
        })
    }

    /// Keeps the positions `keep` says yes to.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(u64, LogOp) -> bool) {
        let mut kept = LogRuns::default();
        for (seq, op) in self.iter_from(0) {
            if keep(seq, op) {
                kept.push(seq, op);
            }
        }
        kept.runs.shrink_to_fit();
        *self = kept;
    }

    /// Heap bytes held.
    pub(super) fn heap_bytes(&self) -> usize {
        self.runs.capacity() * std::mem::size_of::<Run>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_logged_in_id_order_is_one_run_and_reads_back_from_any_position() {
        let mut log = LogRuns::default();
        for i in 0..1_000u32 {
            log.push(u64::from(i) + 5, LogOp::upsert(EntryId(i)));
        }
        assert_eq!(log.runs.len(), 1);
        assert_eq!(log.len(), 1_000);
        let from: Vec<_> = log.iter_from(900).collect();
        assert_eq!(from.len(), 105);
        assert_eq!(from[0], (900, LogOp::upsert(EntryId(895))));
        assert_eq!(log.iter_from(0).count(), 1_000);
        assert_eq!(log.iter_from(2_000).count(), 0);
        assert_eq!(log.last_seq(), Some(1_004));
    }

    #[test]
    fn changes_out_of_order_removals_and_gaps_start_new_runs_and_read_back_exactly() {
        let mut log = LogRuns::default();
        let mut want = Vec::new();
        let ops = [
            (0, LogOp::upsert(EntryId(0))),
            (1, LogOp::upsert(EntryId(1))),
            (2, LogOp::remove(EntryId(2))),
            (3, LogOp::remove(EntryId(3))),
            (4, LogOp::upsert(EntryId(4))),
            (7, LogOp::upsert(EntryId(5))),
            (8, LogOp::upsert(EntryId(1))),
            (9, LogOp::upsert(EntryId(2))),
        ];
        for (seq, op) in ops {
            log.push(seq, op);
            want.push((seq, op));
        }
        assert_eq!(log.iter_from(0).collect::<Vec<_>>(), want);
        assert_eq!(log.runs.len(), 5);
        assert_eq!(
            log.iter_from(3).collect::<Vec<_>>(),
            want[3..].to_vec(),
            "from inside a run"
        );
        assert_eq!(
            log.iter_from(5).collect::<Vec<_>>(),
            want[5..].to_vec(),
            "from a gap"
        );
        log.retain(|seq, _| seq % 2 == 1);
        let odd: Vec<_> = want.iter().copied().filter(|(s, _)| s % 2 == 1).collect();
        assert_eq!(log.iter_from(0).collect::<Vec<_>>(), odd);
        assert_eq!(log.len(), odd.len());
    }

    #[test]
    fn the_last_id_before_the_removal_bit_does_not_run_into_removals() {
        let mut log = LogRuns::default();
        log.push(0, LogOp::upsert(EntryId((1 << 31) - 1)));
        log.push(1, LogOp::remove(EntryId(0)));
        assert_eq!(
            log.iter_from(0).collect::<Vec<_>>(),
            vec![
                (0, LogOp::upsert(EntryId((1 << 31) - 1))),
                (1, LogOp::remove(EntryId(0)))
            ]
        );
    }
}
