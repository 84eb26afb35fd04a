//! The values a row keeps exactly (32 bits each), in lists of their own (`taskmeter_memory`'s:
//! never inherited by a worker), and those that ended rows leave for the next.

use taskmeter_memory::{List, Spare};

/// A row's kept values.
pub(crate) type Values = List<u32>;

/// The lists that ended rows kept, held for the next rows to fill (up to 64 MiB, emptied): a
/// row of 10,000 units keeps millions of values, and memory fresh from the kernel costs a page
/// fault for each 4 KiB (together with the copies of a growing `Vec`, about a tenth of
/// taskmeter's CPU at 10,000 units, issue 28). 64 MiB holds what a row at the default budget
/// keeps: 4 million values of each of 4 metrics.
static SPARE: Spare = Spare::new(SPARE_AT_MOST * 4, SPARE_EACH_AT_LEAST * 4);
/// In values.
pub(crate) const SPARE_AT_MOST: usize = 16 << 20;
/// Smaller lists are not worth holding.
pub(crate) const SPARE_EACH_AT_LEAST: usize = 8 << 10;

/// The largest spare list (empty); a new one if there is none.
pub(crate) fn spare() -> Values {
    SPARE.largest()
}

/// Holds `values` (emptied) for the next rows, if it is large enough and there is room.
pub(crate) fn give_back(values: Values) {
    SPARE.give_back(values);
}

/// Adds spare lists of `capacities` values each (in whole pages), the largest first, as far as
/// there is room, each written once: so that their pages are the process's before a row fills
/// them (one fault a 4 KiB page otherwise, 3 µs each here, while workers measure). The bytes
/// added.
pub(crate) fn prepare(capacities: Vec<usize>) -> usize {
    SPARE.prepare(capacities.into_iter().map(|capacity| capacity.saturating_mul(4)).collect())
}

/// The capacity of each spare list, in increasing order.
#[cfg(test)]
pub(crate) fn spare_lists() -> Vec<usize> {
    SPARE.held().into_iter().map(|bytes| bytes / 4).collect()
}
