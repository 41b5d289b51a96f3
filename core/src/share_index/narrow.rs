//! A column of 64-bit values held in 4 bytes each, the rare values that do
//! not fit kept apart: sizes (a file of 4 GiB or more) and mtimes (before
//! 1970 or after 2106).

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
}
