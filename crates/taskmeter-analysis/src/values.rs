//! The values a row keeps exactly (32 bits each), in memory of their own, and those that ended
//! rows leave for the next.
//!
//! Each list is a private anonymous mapping that a child does not inherit (`MADV_DONTFORK`).
//! taskmeter forks to start each worker, and a fork write-protects every page its parent has
//! written: the parent's next write to each faults, about 3 µs here, while the worker measures
//! (in the `lost` run, 3.5 % of taskmeter's CPU was such faults on the values of lists held for
//! the next rows, issue 58), and the fork copies the page tables of all of them. A list is never
//! memory the allocator could hand to anything else, which that advice needs: the child, between
//! fork and exec, would find such memory unmapped.

use std::ptr::NonNull;
use std::sync::Mutex;

/// A growable list of `u32` in a mapping of its own (the part of `Vec` that a kept list uses).
pub(crate) struct Values {
    /// `capacity` values' room, mapped (dangling while the capacity is 0).
    start: NonNull<u32>,
    len: usize,
    capacity: usize,
}

// SAFETY: the mapping belongs to its `Values` alone.
unsafe impl Send for Values {}
unsafe impl Sync for Values {}

const PAGE_BYTES: usize = 4096;
/// The first mapping of a list that grows: 4 pages.
const FIRST_CAPACITY: usize = 4 * PAGE_BYTES / 4;

impl Values {
    pub(crate) const fn new() -> Values {
        Values { start: NonNull::dangling(), len: 0, capacity: 0 }
    }

    /// An empty list with room for `capacity` values (rounded up to a whole page).
    pub(crate) fn with_capacity(capacity: usize) -> Values {
        let mut values = Values::new();
        if capacity > 0 {
            values.remap(capacity.checked_next_multiple_of(PAGE_BYTES / 4).unwrap_or_else(|| too_large(capacity)));
        }
        values
    }

    #[inline(always)]
    pub(crate) fn push(&mut self, value: u32) {
        if self.len == self.capacity {
            self.grow_to(self.len + 1);
        }
        // SAFETY: `len` is below the capacity, within the mapping.
        unsafe { self.start.as_ptr().add(self.len).write(value) };
        self.len += 1;
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Moves `other`'s values to the end of these, leaving it empty.
    pub(crate) fn append(&mut self, other: &mut Values) {
        let total = self.len + other.len;
        if total > self.capacity {
            self.grow_to(total);
        }
        // SAFETY: room for `total` values; two mappings never overlap.
        unsafe { std::ptr::copy_nonoverlapping(other.start.as_ptr(), self.start.as_ptr().add(self.len), other.len) };
        self.len = total;
        other.clear();
    }

    /// Writes every page of its room once, so that filling it takes no fault (before the workers
    /// measure). The values it holds stay.
    pub(crate) fn write_every_page(&mut self) {
        let base = self.start.as_ptr().cast::<u8>();
        let bytes = self.capacity * 4;
        for offset in (self.len * 4..bytes).step_by(PAGE_BYTES) {
            // SAFETY: within the mapping; a volatile write, which the compiler cannot leave out.
            unsafe { base.add(offset).write_volatile(0) };
        }
    }

    /// Room for at least `wanted` values: the capacity doubled (or `FIRST_CAPACITY`) until it
    /// holds them, the mapping moved by the kernel if it must (`mremap`: no copy of the values).
    #[cold]
    #[inline(never)]
    fn grow_to(&mut self, wanted: usize) {
        let mut capacity = self.capacity.max(FIRST_CAPACITY);
        while capacity < wanted {
            capacity = capacity.checked_mul(2).unwrap_or_else(|| too_large(wanted));
        }
        self.remap(capacity);
    }

    /// Maps room for `capacity` values (a whole number of pages), or moves these there.
    fn remap(&mut self, capacity: usize) {
        let bytes = capacity.checked_mul(4).unwrap_or_else(|| too_large(capacity));
        // SAFETY: a new private anonymous mapping, or our own one grown: no other reference to
        // it lives across this `&mut self`.
        let map = unsafe {
            match self.capacity {
                0 => libc::mmap(
                    std::ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                ),
                old => libc::mremap(self.start.as_ptr().cast(), old * 4, bytes, libc::MREMAP_MAYMOVE),
            }
        };
        if map == libc::MAP_FAILED {
            too_large(capacity);
        }
        // Advice only (a kernel without it forks them, as before); a moved mapping keeps it.
        // SAFETY: madvise on our own mapping.
        unsafe { libc::madvise(map, bytes, libc::MADV_DONTFORK) };
        self.start = NonNull::new(map.cast()).expect("mmap never maps address 0 here");
        self.capacity = capacity;
    }
}

/// Out of memory (or address space) for `wanted` values: as `Vec` does.
fn too_large(wanted: usize) -> ! {
    std::alloc::handle_alloc_error(
        std::alloc::Layout::array::<u32>(wanted).unwrap_or_else(|_| std::alloc::Layout::new::<u32>()),
    )
}

impl Drop for Values {
    fn drop(&mut self) {
        if self.capacity > 0 {
            // SAFETY: unmaps our own mapping, which no slice outlives (they borrow self).
            unsafe { libc::munmap(self.start.as_ptr().cast(), self.capacity * 4) };
        }
    }
}

impl std::ops::Deref for Values {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        // SAFETY: `len` values written, in the mapping (or none, at a dangling aligned pointer).
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.len) }
    }
}

impl Default for Values {
    fn default() -> Values {
        Values::new()
    }
}

impl Clone for Values {
    fn clone(&self) -> Values {
        let mut copy = Values::with_capacity(self.len);
        // SAFETY: room for `len` values in the new mapping.
        unsafe { std::ptr::copy_nonoverlapping(self.start.as_ptr(), copy.start.as_ptr(), self.len) };
        copy.len = self.len;
        copy
    }
}

impl std::fmt::Debug for Values {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Values {{ len: {}, capacity: {} }}", self.len, self.capacity)
    }
}

/// The lists that ended rows kept, held for the next rows to fill (up to 64 MiB, emptied, in
/// increasing order of capacity): a row of 10,000 units keeps millions of values, and memory
/// fresh from the kernel costs a page fault for each 4 KiB (together with the copies of a growing
/// `Vec`, about a tenth of taskmeter's CPU at 10,000 units, issue 28). 64 MiB holds what a row
/// at the default budget keeps: 4 million values of each of 4 metrics.
static SPARE: Mutex<Vec<Values>> = Mutex::new(Vec::new());
pub(crate) const SPARE_AT_MOST: usize = 16 << 20;
/// Smaller lists are not worth holding.
pub(crate) const SPARE_EACH_AT_LEAST: usize = 8 << 10;

/// The largest spare list (empty); a new one if there is none.
pub(crate) fn spare() -> Values {
    SPARE.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_default()
}

/// Holds `values` (emptied) for the next rows, if it is large enough and there is room.
pub(crate) fn give_back(values: Values) {
    hold(&mut SPARE.lock().unwrap_or_else(|e| e.into_inner()), values);
}

/// Puts `values` (emptied) among the spare lists, in order, if it is large enough and there is
/// room (else drops it); whether it did.
fn hold(spare: &mut Vec<Values>, mut values: Values) -> bool {
    let held: usize = spare.iter().map(Values::capacity).sum();
    if values.capacity() < SPARE_EACH_AT_LEAST || held + values.capacity() > SPARE_AT_MOST {
        return false;
    }
    values.clear();
    let at = spare.partition_point(|v| v.capacity() <= values.capacity());
    spare.insert(at, values);
    true
}

/// Adds spare lists of `capacities` values each (in whole pages), the largest first, as far as
/// [`hold`] takes them, each written once: so that their pages are the process's before a row
/// fills them (one fault a 4 KiB page otherwise, 3 µs each here, while workers measure). The
/// bytes added.
pub(crate) fn prepare(mut capacities: Vec<usize>) -> usize {
    capacities.sort_unstable_by(|a, b| b.cmp(a));
    let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
    let mut added = 0;
    for capacity in capacities {
        let held: usize = spare.iter().map(Values::capacity).sum();
        let whole = capacity.checked_next_multiple_of(PAGE_BYTES / 4).unwrap_or(usize::MAX);
        if whole < SPARE_EACH_AT_LEAST || held.saturating_add(whole) > SPARE_AT_MOST {
            continue;
        }
        let mut values = Values::with_capacity(whole);
        values.write_every_page();
        added += values.capacity() * 4;
        hold(&mut spare, values);
    }
    added
}

/// What the spare lists are: (each empty, capacity) in order.
#[cfg(test)]
pub(crate) fn spare_lists() -> Vec<(bool, usize)> {
    SPARE.lock().unwrap().iter().map(|v| (v.is_empty(), v.capacity())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list reads back what was pushed, across growths, appends, clears and clones.
    #[test]
    fn a_list_holds_what_was_pushed_as_a_vec_would() {
        let mut values = Values::new();
        let mut reference = Vec::new();
        for i in 0..100_000u32 {
            values.push(i.wrapping_mul(2_654_435_761));
            reference.push(i.wrapping_mul(2_654_435_761));
        }
        assert_eq!(&values[..], &reference[..]);
        assert!(values.capacity() >= 100_000 && values.capacity().is_power_of_two());
        let mut more = Values::with_capacity(3);
        [7, 8, 9].into_iter().for_each(|v| more.push(v));
        values.append(&mut more);
        reference.extend([7, 8, 9]);
        assert_eq!((&values[..], more.len()), (&reference[..], 0));
        let copy = values.clone();
        values.clear();
        assert_eq!((&copy[..], values.len()), (&reference[..], 0));
        values.push(5);
        assert_eq!(&values[..], &[5]);
        assert!(Values::new().is_empty() && Values::default().capacity() == 0);
    }

    /// A list's pages are not the child's: the mapping says `dc` (do not copy) in smaps.
    #[test]
    fn a_list_is_not_inherited_by_a_child() {
        let values = Values::with_capacity(1 << 16);
        let flags = taskmeter_machine::smaps::flags_of_mapping_at(values.start.as_ptr() as usize).expect("in smaps");
        assert!(flags.iter().any(|flag| flag == "dc"), "VmFlags: {flags:?}");
    }
}
