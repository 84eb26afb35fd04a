//! Spare lists: written once before the first worker starts, or filled and emptied by rows that
//! ended, held for the next rows, so that a row fills memory that is already the process's (one
//! fault a 4 KiB page otherwise, 3 µs each here, while workers measure).

use crate::list::{List, Mapping};
use crate::PAGE_BYTES;
use std::sync::{Mutex, MutexGuard};

/// A pool of spare lists, emptied, up to `at_most` bytes in all, none below `each_at_least`.
pub struct Spare {
    /// In increasing order of size.
    held: Mutex<Vec<Mapping>>,
    at_most: usize,
    each_at_least: usize,
}

impl Spare {
    pub const fn new(at_most: usize, each_at_least: usize) -> Spare {
        Spare { held: Mutex::new(Vec::new()), at_most, each_at_least }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Mapping>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The largest spare list (empty); a new one if there is none.
    pub fn largest<T: Copy>(&self) -> List<T> {
        self.lock().pop().map(List::in_mapping).unwrap_or_default()
    }

    /// The smallest spare list with room for `capacity` values (empty); a new one if none has.
    pub fn at_least<T: Copy>(&self, capacity: usize) -> List<T> {
        let mut held = self.lock();
        let bytes = capacity.saturating_mul(size_of::<T>());
        match held.iter().position(|map| map.bytes() >= bytes) {
            Some(at) => List::in_mapping(held.remove(at)),
            None => List::with_capacity(capacity),
        }
    }

    /// Holds `list` (emptied) for the next rows, if it is large enough and there is room (else
    /// drops it); whether it did.
    pub fn give_back<T: Copy>(&self, list: List<T>) -> bool {
        self.hold(&mut self.lock(), list.into_mapping())
    }

    fn hold(&self, held: &mut Vec<Mapping>, map: Mapping) -> bool {
        let total: usize = held.iter().map(Mapping::bytes).sum();
        if map.bytes() < self.each_at_least || total + map.bytes() > self.at_most {
            return false;
        }
        let at = held.partition_point(|other| other.bytes() <= map.bytes());
        held.insert(at, map);
        true
    }

    /// Adds spare lists of these many bytes each (in whole pages), the largest first, as far
    /// as there is room, each written once: so that their pages are the process's before a row
    /// fills them. The bytes added.
    pub fn prepare(&self, mut sizes: Vec<usize>) -> usize {
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        let mut held = self.lock();
        let mut added = 0;
        for size in sizes {
            let total: usize = held.iter().map(Mapping::bytes).sum();
            let whole = size.checked_next_multiple_of(PAGE_BYTES).unwrap_or(usize::MAX);
            if whole < self.each_at_least || total.saturating_add(whole) > self.at_most {
                continue;
            }
            let mut list = List::<u8>::with_capacity(whole);
            list.write_every_page();
            let map = list.into_mapping();
            added += map.bytes();
            self.hold(&mut held, map);
        }
        added
    }

    /// The bytes of each list held, in increasing order.
    pub fn held(&self) -> Vec<usize> {
        self.lock().iter().map(Mapping::bytes).collect()
    }
}

/// A list lent by a pool of spare ones, given back to it when dropped.
pub struct Lent<T: Copy> {
    list: List<T>,
    from: &'static Spare,
}

impl<T: Copy> Lent<T> {
    /// The smallest of `from`'s spare lists with room for `capacity` values, or a new one.
    pub fn at_least(from: &'static Spare, capacity: usize) -> Lent<T> {
        Lent { list: from.at_least(capacity), from }
    }

    /// An empty list, none lent yet (to be given to `from` when dropped, if it grew).
    pub const fn none(from: &'static Spare) -> Lent<T> {
        Lent { list: List::new(), from }
    }
}

impl<T: Copy> Drop for Lent<T> {
    fn drop(&mut self) {
        self.from.give_back(std::mem::take(&mut self.list));
    }
}

impl<T: Copy> std::ops::Deref for Lent<T> {
    type Target = List<T>;
    fn deref(&self) -> &List<T> {
        &self.list
    }
}

impl<T: Copy> std::ops::DerefMut for Lent<T> {
    fn deref_mut(&mut self) -> &mut List<T> {
        &mut self.list
    }
}

impl<T: Copy> Clone for Lent<T> {
    /// A copy in memory of its own (not a spare list: those are for the rows to come), given
    /// to the same pool when dropped.
    fn clone(&self) -> Lent<T> {
        Lent { list: self.list.clone(), from: self.from }
    }
}

impl<T: Copy + PartialEq> PartialEq for Lent<T> {
    fn eq(&self, other: &Lent<T>) -> bool {
        self.list == other.list
    }
}

impl<T: Copy + std::fmt::Debug> std::fmt::Debug for Lent<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.list.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static POOL: Spare = Spare::new(64 * PAGE_BYTES, 2 * PAGE_BYTES);

    /// Prepared lists are held largest first within the bound, whole pages, too small ones
    /// left out; a list lent is the smallest that fits, and comes back when dropped, emptied.
    #[test]
    fn lists_are_lent_from_the_pool_and_come_back() {
        let added = POOL.prepare(vec![PAGE_BYTES, 40 * PAGE_BYTES, 10 * PAGE_BYTES + 1, 30 * PAGE_BYTES]);
        assert_eq!(added, 51 * PAGE_BYTES, "40 pages, then 11 (30 would pass 64), not 1 (below 2)");
        assert_eq!(POOL.held(), [11 * PAGE_BYTES, 40 * PAGE_BYTES]);
        let mut lent: Lent<u64> = Lent::at_least(&POOL, 1000);
        assert_eq!((lent.capacity(), lent.len()), (11 * PAGE_BYTES / 8, 0));
        assert_eq!(POOL.held(), [40 * PAGE_BYTES]);
        lent.resize(1000, 7);
        let copy = lent.clone();
        assert_eq!((copy.len(), copy[999]), (1000, 7));
        drop(lent);
        assert_eq!(POOL.held(), [11 * PAGE_BYTES, 40 * PAGE_BYTES], "given back");
        let lent: Lent<u64> = Lent::at_least(&POOL, 11 * PAGE_BYTES / 8);
        assert!(lent.is_empty(), "emptied");
        drop((lent, copy));
        // The copy's room (a new mapping of 2 pages) comes too, within the bound.
        assert_eq!(POOL.held(), [2 * PAGE_BYTES, 11 * PAGE_BYTES, 40 * PAGE_BYTES]);
        assert_eq!(POOL.largest::<u8>().capacity(), 40 * PAGE_BYTES);
        let none: Lent<u32> = Lent::none(&POOL);
        drop(none);
        assert_eq!(POOL.held(), [2 * PAGE_BYTES, 11 * PAGE_BYTES], "an empty list is not held");
    }
}
