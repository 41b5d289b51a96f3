//! A column in pages of [`PAGE`] entries, each page held as narrow as its
//! values allow.
//!
//! Most pages of a walked tree hold few distinct parents (the entries of a
//! page are siblings from a few folders), few kinds and modes, sizes that
//! differ little (every file empty, or all under 64 KiB), and name offsets
//! that grow a name at a time. So a page is one of:
//!
//! | page | bytes per entry | holds |
//! | --- | --- | --- |
//! | `Same(v)` | 0 | every entry the same value (a page not yet written: 0) |
//! | `Dict` | 1 | at most 256 distinct values, each entry an index into them |
//! | `Near` | 2 | each block of 256 entries within 65,536 of its own base (`u32` columns) |
//! | `Wide` | the value's | anything |
//!
//! A page only ever gets wider (`Same` < `Dict` < `Near` < `Wide`): a value
//! that does not fit makes the page take the narrowest form, no narrower than
//! it was, that holds its values and the new one. So a page changes form at
//! most three times in its life, each change one pass over its 4,096 values,
//! and a set that fits costs a lookup (a `Dict` page: a scan of its values,
//! at most 256). A page built whole (a snapshot restored) takes the narrowest
//! form at once. The widest a column gets is what a plain column of `T` costs.

/// Entries per column page (of every column of the index, packed or not).
pub const PAGE: usize = 4096;

/// Entries sharing one base in a `Near` page.
const BLOCK: usize = 256;
const BLOCKS: usize = PAGE / BLOCK;
/// Most distinct values a `Dict` page holds.
const DICT_MAX: usize = 256;
/// A `Near` offset meaning 0 (`T::default()`): entries not written yet read
/// as 0, and must not pull a block's base down to 0.
const NEAR_ZERO: u16 = u16::MAX;

/// A value a packed column holds.
pub(super) trait Cell: Copy + Default + PartialEq + std::fmt::Debug {
    fn to_u32(self) -> u32;
    /// Only ever given values that came from [`to_u32`](Cell::to_u32).
    fn from_u32(v: u32) -> Self;
}

impl Cell for u32 {
    fn to_u32(self) -> u32 {
        self
    }
    fn from_u32(v: u32) -> Self {
        v
    }
}

impl Cell for u16 {
    fn to_u32(self) -> u32 {
        u32::from(self)
    }
    fn from_u32(v: u32) -> Self {
        v as u16
    }
}

/// Which narrow forms a column may take besides `Same` and `Wide`.
#[derive(Debug, Clone, Copy)]
struct Forms {
    /// `Dict` pages (parents, kinds and modes, sizes). Off for values that are
    /// all different (name offsets), where a dictionary only fills up.
    dict: bool,
    /// `Near` pages (offsets, sizes); never for a 2-byte `T`, where they save nothing.
    near: bool,
}

#[derive(Debug)]
enum Page<T> {
    Same(T),
    Dict {
        values: Vec<T>,
        index: Box<[u8]>,
    },
    Near {
        bases: Box<[u32]>,
        offsets: Box<[u16]>,
    },
    Wide(Box<[T]>),
}

impl<T: Cell> Page<T> {
    fn rank(&self) -> u8 {
        match self {
            Page::Same(_) => 0,
            Page::Dict { .. } => 1,
            Page::Near { .. } => 2,
            Page::Wide(_) => 3,
        }
    }

    #[inline(always)]
    fn get(&self, k: usize) -> T {
        match self {
            Page::Same(v) => *v,
            Page::Dict { values, index } => values[index[k] as usize],
            Page::Near { bases, offsets } => match offsets[k] {
                NEAR_ZERO => T::default(),
                off => T::from_u32(bases[k / BLOCK].wrapping_add(u32::from(off))),
            },
            Page::Wide(w) => w[k],
        }
    }

    /// Stores `v` at `k` if the page's form holds it.
    fn try_set(&mut self, k: usize, v: T) -> bool {
        match self {
            Page::Same(s) => *s == v,
            Page::Dict { values, index } => match values.iter().position(|x| *x == v) {
                Some(at) => {
                    index[k] = at as u8;
                    true
                }
                None if values.len() < DICT_MAX => {
                    index[k] = values.len() as u8;
                    values.push(v);
                    true
                }
                None => false,
            },
            Page::Near { bases, offsets } => {
                if v == T::default() {
                    offsets[k] = NEAR_ZERO;
                    return true;
                }
                let base = &mut bases[k / BLOCK];
                // A base of 0: no value in the block yet but 0s (any other
                // value is 1 or more, and so is a base made from them).
                if *base == 0 {
                    *base = v.to_u32();
                }
                match v.to_u32().checked_sub(*base).map(u16::try_from) {
                    Some(Ok(off)) if off != NEAR_ZERO => {
                        offsets[k] = off;
                        true
                    }
                    _ => false,
                }
            }
            Page::Wide(w) => {
                w[k] = v;
                true
            }
        }
    }

    /// The narrowest page of rank `at_least` or more holding `values`.
    fn narrowest(values: &[T], at_least: u8, forms: Forms) -> Page<T> {
        debug_assert_eq!(values.len(), PAGE);
        if at_least == 0 && values.iter().all(|v| *v == values[0]) {
            return Page::Same(values[0]);
        }
        if at_least <= 1
            && forms.dict
            && let Some(page) = Self::dict(values)
        {
            return page;
        }
        if at_least <= 2 && forms.near && size_of::<T>() > 2 {
            let mut bases = Vec::with_capacity(BLOCKS);
            let fits = values.chunks(BLOCK).all(|block| {
                // Over the values written (a 0 is `NEAR_ZERO`, whatever the base).
                let (mut lo, mut hi) = (u32::MAX, 0);
                for v in block {
                    let x = v.to_u32();
                    if x != 0 {
                        lo = lo.min(x);
                        hi = hi.max(x);
                    }
                }
                let lo = if lo == u32::MAX { 0 } else { lo };
                bases.push(lo);
                hi.saturating_sub(lo) < u32::from(NEAR_ZERO)
            });
            if fits {
                let offsets = values
                    .iter()
                    .enumerate()
                    .map(|(k, v)| match v.to_u32() {
                        0 => NEAR_ZERO,
                        x => (x - bases[k / BLOCK]) as u16,
                    })
                    .collect();
                return Page::Near {
                    bases: bases.into_boxed_slice(),
                    offsets,
                };
            }
        }
        Page::Wide(values.into())
    }

    fn dict(values: &[T]) -> Option<Page<T>> {
        let mut distinct: Vec<T> = Vec::new();
        let mut index = vec![0u8; PAGE].into_boxed_slice();
        let mut last = (values[0], 0u8);
        for (k, v) in values.iter().enumerate() {
            if *v != last.0 {
                let at = match distinct.iter().position(|x| x == v) {
                    Some(at) => at,
                    None if distinct.len() < DICT_MAX => {
                        distinct.push(*v);
                        distinct.len() - 1
                    }
                    None => return None,
                };
                last = (*v, at as u8);
            } else if distinct.is_empty() {
                distinct.push(*v);
            }
            index[k] = last.1;
        }
        distinct.shrink_to_fit();
        Some(Page::Dict {
            values: distinct,
            index,
        })
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Page::Same(_) => 0,
            Page::Dict { values, .. } => values.capacity() * size_of::<T>() + PAGE,
            Page::Near { .. } => BLOCKS * 4 + PAGE * 2,
            Page::Wide(_) => PAGE * size_of::<T>(),
        }
    }
}

/// See the module docs. `DICT` and `NEAR`: whether pages may take those forms.
#[derive(Debug, Default)]
pub(super) struct Packed<T, const DICT: bool, const NEAR: bool> {
    pages: Vec<Page<T>>,
}

impl<T: Cell, const DICT: bool, const NEAR: bool> Packed<T, DICT, NEAR> {
    const FORMS: Forms = Forms {
        dict: DICT,
        near: NEAR,
    };

    #[inline(always)]
    pub(super) fn get(&self, i: usize) -> T {
        match self.pages.get(i / PAGE) {
            Some(p) => p.get(i % PAGE),
            None => T::default(),
        }
    }

    pub(super) fn set(&mut self, i: usize, v: T) {
        let (page, k) = (i / PAGE, i % PAGE);
        while self.pages.len() <= page {
            self.pages.push(Page::Same(T::default()));
        }
        let p = &mut self.pages[page];
        if p.try_set(k, v) {
            return;
        }
        let mut values: Vec<T> = (0..PAGE).map(|k| p.get(k)).collect();
        values[k] = v;
        *p = Page::narrowest(&values, p.rank() + 1, Self::FORMS);
    }

    /// Appends a page from up to [`PAGE`] values (the rest default).
    pub(super) fn push_page(&mut self, values: impl Iterator<Item = T>) {
        let mut page = vec![T::default(); PAGE];
        for (slot, v) in page.iter_mut().zip(values) {
            *slot = v;
        }
        self.pages.push(Page::narrowest(&page, 0, Self::FORMS));
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.pages.iter().map(Page::heap_bytes).sum::<usize>()
            + self.pages.capacity() * size_of::<Page<T>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every form against a plain vector, through sets that widen pages.
    fn agrees_with_a_vector<const D: bool, const N: bool>(values: impl Fn(usize, u64) -> u32) {
        let n = PAGE * 3 + 17;
        let mut column = Packed::<u32, D, N>::default();
        let mut model = vec![0u32; n];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..4 * n {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let i = if round < n {
                round
            } else {
                (seed % n as u64) as usize
            };
            let v = values(i, seed);
            column.set(i, v);
            model[i] = v;
            if round % 997 == 0 {
                for (j, want) in model.iter().enumerate() {
                    assert_eq!(column.get(j), *want, "entry {j} after {round} sets");
                }
            }
        }
        for (j, want) in model.iter().enumerate() {
            assert_eq!(column.get(j), *want, "entry {j}");
        }
        assert_eq!(column.get(n + PAGE), 0, "past the end reads as 0");
    }

    #[test]
    fn a_packed_column_reads_back_what_was_set_whatever_its_pages_become() {
        // Few values (parents): pages stay dictionaries.
        agrees_with_a_vector::<true, true>(|_, s| (s % 7) as u32 * 1_000_003);
        // Growing offsets, then some far away (a rename's name at the end).
        agrees_with_a_vector::<true, true>(|i, s| {
            if s % 50 == 0 {
                4_000_000_000
            } else {
                i as u32 * 21
            }
        });
        agrees_with_a_vector::<false, true>(|i, s| {
            if s % 50 == 0 {
                4_000_000_000
            } else {
                i as u32 * 21
            }
        });
        // Anything (mtimes): pages end wide.
        agrees_with_a_vector::<true, true>(|_, s| (s >> 17) as u32);
        agrees_with_a_vector::<false, false>(|_, s| (s % 3) as u32);
        // Offsets with 0s among them (entries not written).
        agrees_with_a_vector::<false, true>(|i, s| match s % 3 {
            0 => 0,
            _ => i as u32 * 255 + (s % 255) as u32,
        });
    }

    #[test]
    fn pages_take_the_narrowest_form_their_values_allow() {
        let plain = PAGE * 4;
        // Every value the same (all files empty): nothing per entry.
        let mut sizes = Packed::<u32, true, true>::default();
        for i in 0..PAGE * 2 {
            sizes.set(i, 0);
        }
        assert!(sizes.heap_bytes() < 200, "{}", sizes.heap_bytes());
        // A few parents: a byte each.
        let mut parents = Packed::<u32, true, true>::default();
        for i in 0..PAGE {
            parents.set(i, 500_000 + (i / 300) as u32);
        }
        assert!(
            parents.heap_bytes() <= PAGE + 400,
            "{}",
            parents.heap_bytes()
        );
        // Name offsets of names up to 255 bytes, written in order: two bytes.
        let mut offsets = Packed::<u32, false, true>::default();
        let mut at = 3_000_000_000u32;
        for i in 0..PAGE {
            offsets.set(i, at);
            at += (i % 256) as u32;
        }
        assert!(
            offsets.heap_bytes() <= PAGE * 2 + 400,
            "{}",
            offsets.heap_bytes()
        );
        // A page built whole takes the same forms.
        let mut restored = Packed::<u32, true, true>::default();
        restored.push_page((0..PAGE).map(|i| 7 + (i % 3) as u32));
        assert!(restored.heap_bytes() <= PAGE + 400);
        assert_eq!(restored.get(4), 8);
        // Random values: as wide as a plain column, never wider.
        let mut mtimes = Packed::<u32, true, true>::default();
        let mut s = 1u64;
        for i in 0..PAGE {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            mtimes.set(i, (s >> 33) as u32);
        }
        assert!(
            mtimes.heap_bytes() <= plain + 400,
            "{}",
            mtimes.heap_bytes()
        );
    }

    #[test]
    fn two_byte_cells_use_dictionaries_and_never_near_pages() {
        let mut meta = Packed::<u16, true, true>::default();
        for i in 0..PAGE {
            meta.set(i, 4 | ((i % 5) as u16) << 3);
        }
        assert!(meta.heap_bytes() <= PAGE + 400);
        for i in 0..PAGE {
            meta.set(i, i as u16);
        }
        for i in 0..PAGE {
            assert_eq!(meta.get(i), i as u16);
        }
        assert!(meta.heap_bytes() <= PAGE * 2 + 400);
    }
}
