//! A folder's children in the sharer's index: their ids in chunks of at most
//! [`CHUNK`] (a chunk may grow to twice that before it splits), so a child put
//! into or taken out of a big sorted folder moves one chunk, not the whole
//! list. As one `Vec`, 20,000 removals from a folder of a million took 10.6 s
//! and 20,000 names put in front of it 3 s, each under the index's write lock.
//!
//! The order is the caller's: the walk's (pushed in turn) until the folder is
//! sorted by name, then kept sorted by inserting each child where it goes.
//! Searches take a comparison of a child with what is sought; a child's
//! position is found by name in a sorted folder (a search over the chunks'
//! last children, then within one chunk), and from the end otherwise.
//!
//! Memory: the ids, 4 bytes each, plus 24 bytes per chunk (under 0.01 B per
//! child); no chunk is empty, and neighbours merge when a chunk falls under a
//! quarter of [`CHUNK`], so removals cannot leave many nearly empty ones.

use std::cmp::Ordering;

/// Children per chunk when a list is made whole (a sorted list, a walked one).
pub(super) const CHUNK: usize = 4096;

#[derive(Debug, Default, Clone)]
pub(super) struct Children {
    chunks: Vec<Vec<u32>>,
    len: usize,
}

impl Children {
    pub(super) fn from_vec(ids: Vec<u32>) -> Children {
        let len = ids.len();
        if len <= CHUNK {
            let chunks = if ids.is_empty() {
                Vec::new()
            } else {
                vec![ids]
            };
            return Children { chunks, len };
        }
        Children {
            chunks: ids.chunks(CHUNK).map(<[u32]>::to_vec).collect(),
            len,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.chunks.iter().flatten().copied()
    }

    pub(super) fn to_vec(&self) -> Vec<u32> {
        let mut all = Vec::with_capacity(self.len);
        for c in &self.chunks {
            all.extend_from_slice(c);
        }
        all
    }

    /// Appends `id` (a list in the walk's order).
    pub(super) fn push(&mut self, id: u32) {
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK => last.push(id),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK.min(self.len.max(4)));
                chunk.push(id);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }

    /// Sorts the whole list (made whole, sorted, cut into chunks again).
    pub(super) fn sort_unstable_by(&mut self, mut cmp: impl FnMut(u32, u32) -> Ordering) {
        let mut all = self.to_vec();
        all.sort_unstable_by(|a, b| cmp(*a, *b));
        *self = Children::from_vec(all);
    }

    /// The first position (chunk, index) whose child is not `below`, in a
    /// list sorted so that every child `below` comes first.
    fn partition(&self, below: impl Fn(u32) -> bool) -> (usize, usize) {
        let k = self
            .chunks
            .partition_point(|c| c.last().is_some_and(|last| below(*last)));
        match self.chunks.get(k) {
            Some(chunk) => (k, chunk.partition_point(|c| below(*c))),
            None => (k, 0),
        }
    }

    /// Puts `id` before the first child that is not `below` it (in a sorted list).
    pub(super) fn insert_sorted(&mut self, id: u32, below: impl Fn(u32) -> bool) {
        let (mut k, mut at) = self.partition(below);
        if k == self.chunks.len() {
            if k == 0 {
                self.chunks.push(Vec::new());
            }
            k = self.chunks.len() - 1;
            at = self.chunks[k].len();
        }
        let chunk = &mut self.chunks[k];
        chunk.insert(at, id);
        self.len += 1;
        if chunk.len() >= 2 * CHUNK {
            let rest = chunk.split_off(CHUNK);
            self.chunks.insert(k + 1, rest);
        }
    }

    /// The child for which `cmp` says `Equal`, in a list sorted so that `cmp`
    /// is `Less` for the children before it and `Greater` after.
    pub(super) fn binary_search_by(&self, cmp: impl Fn(u32) -> Ordering) -> Option<u32> {
        let (k, at) = self.partition(|c| cmp(c) == Ordering::Less);
        let found = *self.chunks.get(k)?.get(at)?;
        (cmp(found) == Ordering::Equal).then_some(found)
    }

    /// Takes `id` out of a sorted list, where `cmp` places it (`Equal` for it
    /// and any child of the same name, which sit side by side): true if it
    /// was there. A list whose order does not hold is searched whole.
    pub(super) fn remove_sorted(&mut self, id: u32, cmp: impl Fn(u32) -> Ordering) -> bool {
        let (mut k, mut at) = self.partition(|c| cmp(c) == Ordering::Less);
        while let Some(chunk) = self.chunks.get(k) {
            let Some(&c) = chunk.get(at) else {
                k += 1;
                at = 0;
                continue;
            };
            if c == id {
                self.remove_at(k, at);
                return true;
            }
            if cmp(c) != Ordering::Equal {
                break;
            }
            at += 1;
        }
        self.remove_any(id)
    }

    /// Takes `id` out of a list in any order, searching from the end (where a
    /// folder's newest children are): true if it was there.
    pub(super) fn remove_any(&mut self, id: u32) -> bool {
        for k in (0..self.chunks.len()).rev() {
            if let Some(at) = self.chunks[k].iter().rposition(|c| *c == id) {
                self.remove_at(k, at);
                return true;
            }
        }
        false
    }

    fn remove_at(&mut self, k: usize, at: usize) {
        self.chunks[k].remove(at);
        self.len -= 1;
        let left = self.chunks[k].len();
        if left == 0 {
            self.chunks.remove(k);
        } else if left < CHUNK / 4 {
            // Merge with a neighbour when both fit in a chunk.
            let with = if k + 1 < self.chunks.len() {
                Some(k)
            } else {
                k.checked_sub(1)
            };
            if let Some(j) = with
                && self.chunks[j].len() + self.chunks[j + 1].len() <= CHUNK
            {
                let next = self.chunks.remove(j + 1);
                self.chunks[j].extend_from_slice(&next);
            }
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.capacity() * 4).sum::<usize>()
            + self.chunks.capacity() * std::mem::size_of::<Vec<u32>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list sorted by value, against a `Vec` kept the same way.
    #[test]
    fn a_big_sorted_list_takes_and_gives_children_as_one_vec_would() {
        let mut list = Children::default();
        let mut model: Vec<u32> = Vec::new();
        let mut seed = 7u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..40_000 {
            let v = (next() % 1_000_000) as u32;
            if next() % 3 == 0 && !model.is_empty() {
                let gone = model[(next() as usize) % model.len()];
                let at = model.iter().position(|c| *c == gone).unwrap();
                model.remove(at);
                assert!(list.remove_sorted(gone, |c| c.cmp(&gone)));
            } else {
                let at = model.partition_point(|c| *c < v);
                model.insert(at, v);
                list.insert_sorted(v, |c| c < v);
            }
        }
        assert_eq!(list.len(), model.len());
        assert_eq!(list.to_vec(), model);
        for v in model.iter().step_by(97) {
            assert_eq!(list.binary_search_by(|c| c.cmp(v)), Some(*v));
        }
        assert_eq!(list.binary_search_by(|c| c.cmp(&2_000_000)), None);
        assert!(
            list.chunks
                .iter()
                .all(|c| !c.is_empty() && c.len() < 2 * CHUNK)
        );
        // Taken out from the front, as `rm` of the first names does.
        for v in model.clone() {
            assert!(list.remove_sorted(v, |c| c.cmp(&v)));
        }
        assert_eq!((list.len(), list.chunks.len()), (0, 0));
    }

    #[test]
    fn a_walked_list_is_pushed_sorted_and_searched_in_chunks() {
        let mut list = Children::default();
        for v in (0..10_000u32).rev() {
            list.push(v);
        }
        assert_eq!(list.chunks.len(), 3);
        assert!(list.remove_any(5_000));
        assert!(!list.remove_any(5_000));
        list.sort_unstable_by(|a, b| a.cmp(&b));
        let all = list.to_vec();
        assert_eq!(all.len(), 9_999);
        assert!(all.windows(2).all(|w| w[0] < w[1]));
        // Two children sorting equal (one name twice): each found and taken.
        let mut twice = Children::from_vec(vec![1, 5, 5, 9]);
        assert!(twice.remove_sorted(5, |c| c.cmp(&5)));
        assert_eq!(twice.to_vec(), vec![1, 5, 9]);
        // A list whose order does not hold: found by searching it whole.
        let mut odd = Children::from_vec(vec![9, 1, 5]);
        assert!(odd.remove_sorted(9, |c| c.cmp(&9)));
        assert_eq!(odd.to_vec(), vec![1, 5]);
    }
}
