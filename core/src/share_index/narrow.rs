//! Columns held narrower than their values, the rare values that do not fit
//! kept apart: sizes (a file of 4 GiB or more), mtimes (before 1970 or after
//! 2106) and inodes (past 2^32: ext4's never are) in 4 bytes ([`Narrow`]);
//! each entry's latest log position in 4 bytes ([`Positions`]: a share's first
//! four billion operations); device numbers as an index into the few a share
//! spans, in 2 bytes ([`Devices`]).

use std::collections::HashMap;

/// Marks a value kept in [`Narrow::wide`].
const WIDE: u32 = u32::MAX;

#[derive(Debug, Default)]
pub(super) struct Narrow {
    narrow: Vec<u32>,
    wide: HashMap<u32, u64>,
}

impl Narrow {
    pub(super) fn with_capacity(n: usize) -> Narrow {
        Narrow {
            narrow: Vec::with_capacity(n),
            wide: HashMap::new(),
        }
    }

    pub(super) fn push(&mut self, v: u64) {
        let i = self.narrow.len() as u32;
        self.narrow.push(WIDE);
        self.set(i as usize, v);
    }

    pub(super) fn get(&self, i: usize) -> u64 {
        match self.narrow[i] {
            WIDE => self.wide.get(&(i as u32)).copied().unwrap_or(0),
            v => u64::from(v),
        }
    }

    pub(super) fn set(&mut self, i: usize, v: u64) {
        match u32::try_from(v) {
            Ok(n) if n != WIDE => {
                if self.narrow[i] == WIDE {
                    self.wide.remove(&(i as u32));
                }
                self.narrow[i] = n;
            }
            _ => {
                self.narrow[i] = WIDE;
                self.wide.insert(i as u32, v);
            }
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.narrow.capacity() * 4 + self.wide.capacity() * 16
    }
}

/// Each entry's latest log position, or none (an entry whose removal was
/// forgotten), in a [`Narrow`] as position + 1 (0: none).
#[derive(Debug, Default)]
pub(super) struct Positions(Narrow);

impl Positions {
    pub(super) fn with_capacity(n: usize) -> Positions {
        Positions(Narrow::with_capacity(n))
    }

    pub(super) fn push(&mut self, at: Option<u64>) {
        self.0.push(Self::code(at));
    }

    /// Entry `i`'s latest position (none past the end, too).
    pub(super) fn get(&self, i: usize) -> Option<u64> {
        if i >= self.0.narrow.len() {
            return None;
        }
        self.0.get(i).checked_sub(1)
    }

    pub(super) fn set(&mut self, i: usize, at: Option<u64>) {
        self.0.set(i, Self::code(at));
    }

    fn code(at: Option<u64>) -> u64 {
        // u64::MAX itself is never a position: the log ends far before it.
        at.map_or(0, |p| p.saturating_add(1))
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.0.heap_bytes()
    }
}

/// Marks a device kept in [`Devices::beyond`].
const BEYOND: u16 = u16::MAX;

/// Each entry's device, as an index into the devices seen (a share spans one
/// or a few); past 65,535 of them, the rest are kept per entry in a map.
///
/// While every entry is on the first device seen (a share without mount points
/// below it: nearly all), no column is held at all; the 2 bytes per entry are
/// spent only once a second device appears.
#[derive(Debug, Default)]
pub(super) struct Devices {
    /// Entries held.
    len: usize,
    /// Each entry's slot in `table`, or empty while every slot is 0.
    index: Vec<u16>,
    table: Vec<u64>,
    lookup: HashMap<u64, u16>,
    beyond: HashMap<u32, u64>,
}

impl Devices {
    pub(super) fn push(&mut self, dev: u64) {
        let i = self.len;
        self.len += 1;
        if !self.index.is_empty() {
            self.index.push(0);
        }
        self.set(i, dev);
    }

    fn slot(&self, i: usize) -> u16 {
        self.index.get(i).copied().unwrap_or(0)
    }

    pub(super) fn get(&self, i: usize) -> u64 {
        match self.slot(i) {
            BEYOND => self.beyond.get(&(i as u32)).copied().unwrap_or(0),
            k => self.table.get(usize::from(k)).copied().unwrap_or(0),
        }
    }

    pub(super) fn set(&mut self, i: usize, dev: u64) {
        if self.slot(i) == BEYOND {
            self.beyond.remove(&(i as u32));
        }
        let slot = match self.lookup.get(&dev) {
            Some(&k) => k,
            None if self.table.len() < usize::from(BEYOND) => {
                let k = self.table.len() as u16;
                self.table.push(dev);
                self.lookup.insert(dev, k);
                k
            }
            None => BEYOND,
        };
        if slot == BEYOND {
            self.beyond.insert(i as u32, dev);
        }
        if slot != 0 && self.index.is_empty() {
            self.index = vec![0; self.len];
        }
        if let Some(at) = self.index.get_mut(i) {
            *at = slot;
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.index.capacity() * 2
            + self.table.capacity() * 8
            + self.lookup.capacity() * 16
            + self.beyond.capacity() * 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_that_do_not_fit_in_four_bytes_read_back_and_can_change_either_way() {
        let mut c = Narrow::default();
        let values = [
            0,
            1,
            u64::from(u32::MAX) - 1,
            u64::from(u32::MAX),
            5 << 32,
            u64::MAX,
            (-3i64) as u64,
        ];
        for v in values {
            c.push(v);
        }
        for (i, v) in values.iter().enumerate() {
            assert_eq!(c.get(i), *v);
        }
        c.set(4, 7);
        c.set(0, 1 << 40);
        assert_eq!((c.get(4), c.get(0)), (7, 1 << 40));
        assert_eq!(
            c.wide.len(),
            4,
            "u32::MAX, u64::MAX, -3 and 1 << 40 are kept apart"
        );
        assert_eq!(c.narrow.len(), values.len());
    }

    #[test]
    fn positions_none_and_past_four_billion_read_back() {
        let mut p = Positions::default();
        let values = [
            Some(0),
            None,
            Some(u64::from(u32::MAX) - 2),
            Some(u64::from(u32::MAX)),
            Some(1 << 40),
        ];
        for v in values {
            p.push(v);
        }
        for (i, v) in values.iter().enumerate() {
            assert_eq!(p.get(i), *v, "position {i}");
        }
        assert_eq!(p.get(values.len()), None, "past the end");
        p.set(4, Some(7));
        p.set(0, None);
        assert_eq!((p.get(0), p.get(4)), (None, Some(7)));
        assert!(
            p.0.wide.len() == 1,
            "only the one past four billion stays wide"
        );
    }

    #[test]
    fn devices_past_the_table_read_back_and_an_entry_can_move_between_them() {
        let mut d = Devices::default();
        for i in 0..70_000u64 {
            d.push(1_000 + i);
        }
        d.push(1_000);
        assert_eq!(d.table.len(), usize::from(BEYOND));
        assert_eq!(d.beyond.len(), 70_000 - usize::from(BEYOND));
        for i in 0..70_000usize {
            assert_eq!(d.get(i), 1_000 + i as u64);
        }
        assert_eq!(d.get(70_000), 1_000);
        // Into the table, and out of it again.
        d.set(69_999, 1_001);
        assert_eq!(d.get(69_999), 1_001);
        d.set(3, 5 << 40);
        assert_eq!(d.get(3), 5 << 40);
        assert_eq!(d.beyond.len(), 70_000 - usize::from(BEYOND));
    }

    #[test]
    fn a_share_on_one_device_holds_no_device_column_until_a_second_appears() {
        let mut d = Devices::default();
        for _ in 0..10_000 {
            d.push(42);
        }
        assert!(
            d.heap_bytes() < 1_000,
            "{} heap bytes for 10,000 entries on one device: a column per entry",
            d.heap_bytes()
        );
        assert_eq!((d.get(0), d.get(9_999)), (42, 42));
        // A mount point below the share: a second device, then more entries.
        d.set(5_000, 7);
        d.push(7);
        d.push(42);
        assert_eq!(d.index.len(), 10_002, "the column is made whole");
        assert_eq!((d.get(4_999), d.get(5_000), d.get(5_001)), (42, 7, 42));
        assert_eq!((d.get(10_000), d.get(10_001)), (7, 42));
        d.set(5_000, 42);
        assert_eq!(d.get(5_000), 42);
    }
}
