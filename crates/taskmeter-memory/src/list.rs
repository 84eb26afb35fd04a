//! A growable list of plain values in a mapping of its own (the part of `Vec` taskmeter's rows
//! use).

use crate::PAGE_BYTES;
use std::marker::PhantomData;
use std::ptr::NonNull;

/// A list of `T` in a private anonymous mapping that a child does not inherit.
pub struct List<T: Copy> {
    map: Mapping,
    len: usize,
    values: PhantomData<T>,
}

/// Whole pages of a private anonymous mapping, advised `MADV_DONTFORK` (none while `bytes` is 0).
pub(crate) struct Mapping {
    start: NonNull<u8>,
    bytes: usize,
}

// SAFETY: the mapping belongs to its owner alone.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    /// No mapping: its start dangles at an address aligned for any value a list holds.
    pub(crate) const NONE: Mapping = Mapping {
        // SAFETY: PAGE_BYTES is not 0.
        start: unsafe { NonNull::new_unchecked(std::ptr::without_provenance_mut(PAGE_BYTES)) },
        bytes: 0,
    };

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Maps `bytes` (whole pages), or moves these there (`mremap`: the kernel moves the pages,
    /// nothing is copied); aborts as `Vec` does when the kernel refuses.
    fn remap(&mut self, bytes: usize) {
        debug_assert!(bytes % PAGE_BYTES == 0 && bytes > 0);
        // SAFETY: a new private anonymous mapping, or our own one moved: no other reference to
        // it lives across this `&mut self`.
        let map = unsafe {
            match self.bytes {
                0 => libc::mmap(
                    std::ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                ),
                old => libc::mremap(self.start.as_ptr().cast(), old, bytes, libc::MREMAP_MAYMOVE),
            }
        };
        if map == libc::MAP_FAILED {
            too_large(bytes);
        }
        // Advice only (a kernel without it forks them, as before); a moved mapping keeps it.
        // SAFETY: madvise on our own mapping.
        unsafe { libc::madvise(map, bytes, libc::MADV_DONTFORK) };
        self.start = NonNull::new(map.cast()).expect("mmap never maps address 0 here");
        self.bytes = bytes;
    }

    /// Writes every page from byte `from` on once, so that filling them takes no fault.
    pub(crate) fn write_every_page(&mut self, from: usize) {
        for offset in (from..self.bytes).step_by(PAGE_BYTES) {
            // SAFETY: within the mapping; a volatile write, which the compiler cannot leave out.
            unsafe { self.start.as_ptr().add(offset).write_volatile(0) };
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.bytes > 0 {
            // SAFETY: unmaps our own mapping, which no slice outlives (they borrow its owner).
            unsafe { libc::munmap(self.start.as_ptr().cast(), self.bytes) };
        }
    }
}

/// Out of memory (or address space) for `bytes`: as `Vec` does.
fn too_large(bytes: usize) -> ! {
    std::alloc::handle_alloc_error(
        std::alloc::Layout::from_size_align(bytes, PAGE_BYTES).unwrap_or_else(|_| std::alloc::Layout::new::<u8>()),
    )
}

/// Whole pages that hold at least `bytes`.
fn whole_pages(bytes: usize) -> usize {
    bytes.checked_next_multiple_of(PAGE_BYTES).unwrap_or_else(|| too_large(bytes))
}

impl<T: Copy> List<T> {
    const SIZE: usize = {
        assert!(size_of::<T>() > 0 && align_of::<T>() <= PAGE_BYTES, "values with a size, page-aligned at most");
        size_of::<T>()
    };

    pub const fn new() -> List<T> {
        List { map: Mapping::NONE, len: 0, values: PhantomData }
    }

    /// An empty list with room for at least `capacity` values (in whole pages).
    pub fn with_capacity(capacity: usize) -> List<T> {
        let mut list = List::new();
        if capacity > 0 {
            list.map.remap(whole_pages(capacity.checked_mul(Self::SIZE).unwrap_or_else(|| too_large(usize::MAX))));
        }
        list
    }

    /// An empty list in `map`.
    pub(crate) fn in_mapping(map: Mapping) -> List<T> {
        List { map, len: 0, values: PhantomData }
    }

    /// Its mapping, the values left behind.
    pub(crate) fn into_mapping(mut self) -> Mapping {
        std::mem::replace(&mut self.map, Mapping::NONE)
    }

    pub fn capacity(&self) -> usize {
        self.map.bytes() / Self::SIZE
    }

    fn start(&self) -> *mut T {
        self.map.start.as_ptr().cast()
    }

    #[inline(always)]
    pub fn push(&mut self, value: T) {
        if self.len == self.capacity() {
            self.grow_to(self.len + 1);
        }
        // SAFETY: `len` is below the capacity, within the mapping.
        unsafe { self.start().add(self.len).write(value) };
        self.len += 1;
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// `len` values: those it holds up to `len`, then copies of `value`.
    pub fn resize(&mut self, len: usize, value: T) {
        if len > self.capacity() {
            self.grow_to(len);
        }
        for at in self.len..len {
            // SAFETY: below the capacity, within the mapping.
            unsafe { self.start().add(at).write(value) };
        }
        self.len = len;
    }

    /// Moves `other`'s values to the end of these, leaving it empty.
    pub fn append(&mut self, other: &mut List<T>) {
        let total = self.len + other.len;
        if total > self.capacity() {
            self.grow_to(total);
        }
        // SAFETY: room for `total` values; two mappings never overlap.
        unsafe { std::ptr::copy_nonoverlapping(other.start(), self.start().add(self.len), other.len) };
        self.len = total;
        other.clear();
    }

    /// Writes every page of its room once, so that filling it takes no fault (before the workers
    /// measure). The values it holds stay.
    pub fn write_every_page(&mut self) {
        self.map.write_every_page(self.len * Self::SIZE);
    }

    /// Room for at least `wanted` values: the room doubled (from 4 pages) until it holds them.
    #[cold]
    #[inline(never)]
    fn grow_to(&mut self, wanted: usize) {
        let wanted = wanted.checked_mul(Self::SIZE).unwrap_or_else(|| too_large(usize::MAX));
        let mut bytes = self.map.bytes().max(4 * PAGE_BYTES);
        while bytes < wanted {
            bytes = bytes.checked_mul(2).unwrap_or_else(|| too_large(wanted));
        }
        self.map.remap(bytes);
    }
}

impl List<u8> {
    /// `len` bytes of 0, fresh from the kernel: each page becomes memory only when first touched
    /// (from the allocator, a block reused was zeroed, and so made resident, whole).
    pub fn zeroed(len: usize) -> List<u8> {
        let mut list = List::with_capacity(len);
        list.len = len;
        list
    }
}

impl<T: Copy> std::ops::Deref for List<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` values written, in the mapping (or none, at a dangling aligned pointer).
        unsafe { std::slice::from_raw_parts(self.start(), self.len) }
    }
}

impl<T: Copy> std::ops::DerefMut for List<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as `deref`, borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.start(), self.len) }
    }
}

impl<T: Copy> Default for List<T> {
    fn default() -> List<T> {
        List::new()
    }
}

impl<T: Copy> Clone for List<T> {
    fn clone(&self) -> List<T> {
        let mut copy = List::with_capacity(self.len);
        // SAFETY: room for `len` values in the new mapping.
        unsafe { std::ptr::copy_nonoverlapping(self.start(), copy.start(), self.len) };
        copy.len = self.len;
        copy
    }
}

impl<T: Copy + PartialEq> PartialEq for List<T> {
    fn eq(&self, other: &List<T>) -> bool {
        self[..] == other[..]
    }
}

/// Its values while they are few (a test's), else its length and capacity (a row's millions).
impl<T: Copy + std::fmt::Debug> std::fmt::Debug for List<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.len <= 32 {
            true => f.debug_list().entries(self.iter()).finish(),
            false => write!(f, "List {{ len: {}, capacity: {} }}", self.len, self.capacity()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list reads back what was pushed, across growths, appends, resizes, clears and clones.
    #[test]
    fn a_list_holds_what_was_pushed_as_a_vec_would() {
        let mut list = List::new();
        let mut reference = Vec::new();
        for i in 0..100_000u32 {
            list.push(i.wrapping_mul(2_654_435_761));
            reference.push(i.wrapping_mul(2_654_435_761));
        }
        assert_eq!(&list[..], &reference[..]);
        assert!(list.capacity() >= 100_000 && list.capacity().is_power_of_two());
        let mut more = List::with_capacity(3);
        [7, 8, 9].into_iter().for_each(|v| more.push(v));
        list.append(&mut more);
        reference.extend([7, 8, 9]);
        assert_eq!((&list[..], more.len()), (&reference[..], 0));
        let copy = list.clone();
        assert_eq!(copy, list);
        list.clear();
        assert_eq!((&copy[..], list.len()), (&reference[..], 0));
        list.resize(3, 5);
        list[1] = 6;
        assert_eq!(&list[..], &[5, 6, 5]);
        assert!(List::<u32>::new().is_empty() && List::<u32>::default().capacity() == 0);
    }

    /// Values of any size and alignment up to a page: room in whole pages, filled as a `Vec`.
    #[test]
    fn wide_values_fill_whole_pages() {
        let mut list: List<(u64, i128)> = List::with_capacity(1000);
        assert_eq!(list.capacity(), 8 * PAGE_BYTES / 32, "1,000 of 32 bytes: 8 pages");
        list.resize(100_000, (1, -2));
        list[99_999].1 = i128::MIN;
        assert_eq!((list.len(), list[0], list[99_999]), (100_000, (1, -2), (1, i128::MIN)));
        let mut odd: List<[u8; 24]> = List::with_capacity(1);
        assert_eq!(odd.capacity(), PAGE_BYTES / 24);
        odd.resize(1000, [3; 24]);
        assert!(odd.iter().all(|v| *v == [3; 24]));
    }

    /// Zeroed bytes from the kernel: whole pages, every byte 0; debugged briefly once long.
    #[test]
    fn zeroed_bytes_are_zero() {
        let zeroed = List::zeroed(10_000);
        assert_eq!((zeroed.len(), zeroed.capacity()), (10_000, 3 * PAGE_BYTES));
        assert!(zeroed.iter().all(|b| *b == 0));
        assert_eq!(format!("{zeroed:?}"), "List { len: 10000, capacity: 12288 }");
        assert_eq!(format!("{:?}", List::zeroed(2)), "[0, 0]");
    }

    /// A list's pages are not the child's: the mapping says `dc` (do not copy) in smaps.
    #[test]
    fn a_list_is_not_inherited_by_a_child() {
        let list: List<u64> = List::with_capacity(1 << 16);
        let address = list.start() as usize;
        // The area holding it (the kernel may have merged it with a neighbour of the same kind).
        let holds = |line: &str| {
            let range = line.split_whitespace().next().and_then(|range| range.split_once('-'));
            let bounds =
                range.and_then(|(a, b)| Some((usize::from_str_radix(a, 16).ok()?, usize::from_str_radix(b, 16).ok()?)));
            bounds.is_some_and(|(start, end)| (start..end).contains(&address))
        };
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let flags = smaps
            .lines()
            .skip_while(|line| !holds(line))
            .find_map(|line| line.strip_prefix("VmFlags:"))
            .expect("the list's mapping in smaps");
        assert!(flags.split_whitespace().any(|flag| flag == "dc"), "VmFlags: {flags}");
    }
}
