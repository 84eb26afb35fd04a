//! The distribution of a row's samples. A row's statistics count it at 5 significant digits
//! (exact below 262 µs, within 0.001 % above), and keep exactly, within its budget, the values
//! they need for exact percentiles. `run.json` stores it, for the charts to be redrawn from it
//! alone, as an HdrHistogram of 3 significant digits (exact below 2,048 ns, within 1/1,024 of a
//! value above it: a pixel of a chart is coarser), serialised in the V2 format with deflate,
//! then base64. At 5 digits, encoding and compressing the stored distributions of a 10,000-unit
//! run (4 MB of counts) was a sixth of taskmeter's CPU (issue 28); at 3 they are a hundredth of
//! that size.

use crate::values::{self, Values};
use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use std::sync::Mutex;
use taskmeter_memory::List;

/// The precision of a row's counters, from which its statistics come past its exact budget.
pub const SIGNIFICANT_DIGITS: u8 = 5;
/// The precision of the distributions `run.json` stores.
pub const STORED_DIGITS: u8 = 3;

/// Records the values as `run.json` stores them; negative ones (a wake-up before its deadline)
/// are recorded as 0 and counted by the caller, since the histogram holds only values >= 0.
/// Sorted values record fastest (each run of equal values at once, the counters in order).
pub fn of(values: &[i64]) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new(STORED_DIGITS).expect("3 significant digits are valid");
    for run in values.chunk_by(|a, b| a == b) {
        h.record_n(run[0].max(0) as u64, run.len() as u64).expect("an auto-resizing histogram takes any value");
    }
    h
}

/// Values below this are exact in a 5-significant-digit HdrHistogram: its first bucket counts
/// every integer.
pub const EXACT_BELOW: u64 = 1 << 18;

/// An HdrHistogram of signed values, 5 significant digits (exact below 262,144, within 1/2^17
/// above): the values >= 0 counted at their index in the library's layout ([`counts_index`]),
/// the magnitudes of the negative ones (a wake-up before its deadline) the same way apart. The
/// counters are in pages allocated as values reach them: a row's values cluster, so it touches
/// a few, where the library's dense array of up to millions of counters was zeroed, grown and
/// scanned whole for every question (most of taskmeter's CPU at 10,000 units). What it encodes
/// is the library's, byte for byte (tested).
/// An exact one ([`SignedHistogram::exact`]) keeps the values outside 0..262,144 as they are
/// until [`SignedHistogram::make_approximate`]: its ranks are then the values' own, at the cost
/// of 4 bytes for each such value only (8 below 0 or from 2^32).
/// Values are counted in batches grouped by page of counters: one at a time, each would touch a
/// random line of the counters (a cache miss per value while the worker's units share the CPUs
/// and caches); within a page, order does not matter (`fold_cost`, sorting each batch by counter
/// before: wide 74-75 to 52 ns a sample, narrow 37.6 to 26.7). The exception: values in
/// 0..262,144 folded in large batches back to back, whose counters stay in the caches, are
/// counted at once ([`SignedHistogram::record_exact`]).
#[derive(Clone, Debug, Default)]
pub struct SignedHistogram {
    /// The counters of 0..262,144, counted as each value comes (issue 58).
    exact: Exact,
    positive: Counters,
    negative: Counters,
    /// The values recorded, but those counted in `exact` since its last drain.
    len: u64,
    /// The values outside 0..262,144, while exact.
    outliers: Option<Kept>,
    /// Counter indices of values recorded since the last count, counted a batch at a time.
    uncounted_positive: Vec<u32>,
    uncounted_negative: Vec<u32>,
    /// The values counted in 0..262,144, summed as they are counted (see [`ExactSums`]).
    sums: ExactSums,
}

/// The count, sums and extremes of the values counted in 0..262,144, in all and below a pivot
/// (the reference of their deviations, [`SignedHistogram::set_pivot`]): kept as the values are
/// counted, so that their moments and their deviations' need no pass over the counters (a
/// quarter of a million of them, cold in the caches when a row ends: most of ending a short one).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ExactSums {
    pub count: u64,
    pub sum: u128,
    pub squares: u128,
    pub min: Option<i64>,
    pub max: Option<i64>,
    pub pivot: i64,
    /// Of the values below the pivot.
    pub below: u64,
    pub below_sum: u128,
    pub below_max: Option<i64>,
    /// The least value from the pivot up.
    pub above_min: Option<i64>,
}

impl ExactSums {
    #[inline(always)]
    fn add(&mut self, value: u64, count: u64) {
        let (v, c) = (value as i64, u128::from(count));
        self.count += count;
        self.sum += c * u128::from(value);
        self.squares += c * u128::from(value * value);
        self.min = Some(self.min.map_or(v, |m| m.min(v)));
        self.max = Some(self.max.map_or(v, |m| m.max(v)));
        if v < self.pivot {
            (self.below, self.below_sum) = (self.below + count, self.below_sum + c * u128::from(value));
            self.below_max = Some(self.below_max.map_or(v, |m| m.max(v)));
        } else {
            self.above_min = Some(self.above_min.map_or(v, |m| m.min(v)));
        }
    }

    /// Adds the values of `indices` below 262,144 (an index there is its value), once each:
    /// without a branch a value, in 64-bit sums a block at a time (as many values as a flush
    /// counts; with a branch each, summing them cost the fold of a slow row a fifth more).
    fn add_indices(&mut self, indices: &[u32]) {
        // Past a row's budget the counters of its values past 262 µs are noted here too. A
        // block whose least index is past 0..262,144 (found 16 a cycle) adds nothing and is
        // skipped: summing it took a tenth of the fold of `sample_cost SHAPE=volume`.
        for block in
            indices.chunks(1 << 16).filter(|block| block.iter().min().is_some_and(|m| u64::from(*m) < EXACT_BELOW))
        {
            let pivot = self.pivot;
            let (mut n, mut sum, mut squares, mut below, mut below_sum) = (0u64, 0u64, 0u64, 0u64, 0u64);
            let (mut min, mut max, mut below_end, mut above_min) = (u64::MAX, 0u64, 0u64, u64::MAX);
            for value in block.iter().map(|index| u64::from(*index)) {
                let exact = value < EXACT_BELOW;
                let is_below = exact & ((value as i64) < pivot);
                let (w, b) = (u64::from(exact), u64::from(is_below));
                n += w;
                sum += value * w;
                squares += value * value * w;
                min = min.min(if exact { value } else { u64::MAX });
                max = max.max(value * w);
                below += b;
                below_sum += value * b;
                // One past the value, so that 0 says none.
                below_end = below_end.max((value + 1) * b);
                above_min = above_min.min(if exact & !is_below { value } else { u64::MAX });
            }
            if n == 0 {
                continue;
            }
            let block_sums = ExactSums {
                count: n,
                sum: u128::from(sum),
                squares: u128::from(squares),
                min: Some(min as i64),
                max: Some(max as i64),
                pivot,
                below,
                below_sum: u128::from(below_sum),
                below_max: (below_end > 0).then(|| below_end as i64 - 1),
                above_min: (above_min < u64::MAX).then_some(above_min as i64),
            };
            self.merge(&block_sums);
        }
    }

    /// Adds another's (of the same pivot, or taking its pivot when empty).
    fn merge(&mut self, other: &ExactSums) {
        if self.count == 0 {
            self.pivot = other.pivot;
        }
        let either = |a: Option<i64>, b: Option<i64>, pick: fn(i64, i64) -> i64| match (a, b) {
            (Some(a), Some(b)) => Some(pick(a, b)),
            (a, b) => a.or(b),
        };
        self.count += other.count;
        self.sum += other.sum;
        self.squares += other.squares;
        self.below += other.below;
        self.below_sum += other.below_sum;
        self.min = either(self.min, other.min, i64::min);
        self.max = either(self.max, other.max, i64::max);
        self.below_max = either(self.below_max, other.below_max, i64::max);
        self.above_min = either(self.above_min, other.above_min, i64::min);
    }
}

/// The values an exact histogram keeps as they are, in runs, in no order: a histogram absorbed
/// whole brings its runs along (a row made of its priority classes takes theirs without a
/// copy), and a rank's value is selected among them ([`select`]), not read from a sorted list.
#[derive(Clone, Debug, Default)]
struct Kept {
    runs: Vec<Run>,
}

/// A run's values, in two lists: those from 262,144 to 2^32 - 1 (every late wake-up, every
/// sleep and period under 4.29 s: nearly all of them) in 32 bits, the others (below 0, or
/// beyond) in 64: half the bytes to store and read.
#[derive(Clone, Debug, Default)]
struct Run {
    narrow: Values,
    wide: Vec<i64>,
    /// The 32-bit values counted by bucket of a stored histogram, when there were as many as
    /// `counted` (see [`Run::count`]).
    narrow_counts: Vec<u64>,
    counted: Option<usize>,
}

/// Buckets of a stored histogram that 32-bit values reach.
const NARROW_BUCKETS: usize = stored_index(u32::MAX as u64) + 1;

impl Drop for Run {
    fn drop(&mut self) {
        values::give_back(std::mem::take(&mut self.narrow));
    }
}

impl Run {
    #[inline(always)]
    fn push(&mut self, value: i64) {
        match u32::try_from(value) {
            Ok(narrow) => self.narrow.push(narrow),
            Err(_) => self.wide.push(value),
        }
    }

    fn is_empty(&self) -> bool {
        self.narrow.is_empty() && self.wide.is_empty()
    }

    /// Its values, in no order.
    fn values(&self) -> impl Iterator<Item = i64> + '_ {
        self.narrow.iter().map(|v| i64::from(*v)).chain(self.wide.iter().copied())
    }

    /// Counts the 32-bit values by bucket of a stored histogram, once for all the questions
    /// after: each rank's bucket is found from these counts (a class's, then its row's, which
    /// takes the class's runs as they are), and the stored encoding is made of them.
    fn count(&mut self) {
        if self.counted == Some(self.narrow.len()) || self.narrow.is_empty() {
            return;
        }
        self.narrow_counts.clear();
        self.narrow_counts.resize(NARROW_BUCKETS, 0);
        count_by_stored_bucket(&mut self.narrow_counts, self.narrow.iter().map(|v| u64::from(*v)));
        self.counted = Some(self.narrow.len());
    }

    /// Its 32-bit values' counts by bucket (as far as the last bucket with any), if counted
    /// since the last came.
    fn narrow_counts(&self) -> Option<&[u64]> {
        match self.counted == Some(self.narrow.len()) {
            true => Some(&self.narrow_counts[..]),
            false => self.narrow.is_empty().then_some(&[]),
        }
    }
}

/// Past this many runs they are joined into one: every question looks at each run.
const MAX_RUNS: usize = 4;

impl Kept {
    /// Adds a value to the last run.
    #[inline(always)]
    fn push(&mut self, value: i64) {
        match self.runs.last_mut() {
            Some(run) => run.push(value),
            None => self.open().push(value),
        }
    }

    /// The first run.
    #[cold]
    fn open(&mut self) -> &mut Run {
        self.runs.push(Run { narrow: values::spare(), wide: Vec::new(), narrow_counts: Vec::new(), counted: None });
        self.runs.last_mut().expect("one run")
    }

    fn absorb(&mut self, other: Kept) {
        self.runs.extend(other.runs.into_iter().filter(|run| !run.is_empty()));
        if self.runs.len() > MAX_RUNS {
            let mut runs = std::mem::take(&mut self.runs).into_iter();
            let mut joined = runs.next().expect("more than one run");
            for mut run in runs {
                joined.narrow.append(&mut run.narrow);
                joined.wide.append(&mut run.wide);
            }
            self.runs.push(joined);
        }
    }

    fn values(&self) -> impl Iterator<Item = i64> + '_ {
        self.runs.iter().flat_map(Run::values)
    }

    fn len(&self) -> usize {
        self.runs.iter().map(|run| run.narrow.len() + run.wide.len()).sum()
    }

    /// The runs' 32-bit lists and their other lists.
    fn lists(&self) -> (Vec<&[u32]>, Vec<&[i64]>) {
        self.runs.iter().map(|run| (&run.narrow[..], &run.wide[..])).unzip()
    }

    fn count(&mut self) {
        self.runs.iter_mut().for_each(Run::count);
    }

    /// The 32-bit values' counts by bucket of a stored histogram (as far as the last bucket
    /// with any): the runs' own, added, if each was counted since its last value came, else
    /// counted now.
    fn narrow_counts(&self) -> std::borrow::Cow<'_, [u64]> {
        let runs: Vec<&Run> = self.runs.iter().filter(|run| !run.narrow.is_empty()).collect();
        match runs[..] {
            [] => return std::borrow::Cow::Borrowed(&[]),
            [only] => {
                if let Some(counted) = only.narrow_counts() {
                    return std::borrow::Cow::Borrowed(counted);
                }
            }
            _ => {}
        }
        let mut counts = vec![0u64; NARROW_BUCKETS];
        for run in runs {
            match run.narrow_counts() {
                Some(counted) => counts.iter_mut().zip(counted).for_each(|(sum, count)| *sum += count),
                None => count_by_stored_bucket(&mut counts, run.narrow.iter().map(|v| u64::from(*v))),
            }
        }
        std::borrow::Cow::Owned(counts)
    }
}

/// The values at 1-based `ranks` (ascending, each at most their count) of the values of `lists`
/// that `keep` keeps, in any order, without sorting them all: each value is counted by its
/// bucket of a stored histogram (exact below 2,048, then 1,024 buckets a doubling), each rank's
/// bucket found from the counts, and only the values of those few buckets sorted. Radix-sorting
/// an exact row's millions of kept values cost 10 ns a value alone and 25 in a real run (a
/// tenth of taskmeter's CPU at 10,000 units, issue 28); this reads them twice, and once more
/// for each set of them asked again (a class's values counted by [`Run::count`] are read once
/// for the class, once for its row). `negative`: the values are below 0, bucketed by their
/// magnitudes (whose order is theirs reversed).
fn select<T: KeptValue>(lists: &[&[T]], keep: impl Fn(i64) -> bool, ranks: &[u64], negative: bool) -> Vec<i64> {
    let bucket = |value: i64| stored_index(value.unsigned_abs());
    let mut counts = vec![0u64; stored_index(u64::MAX) + 1];
    counting(|| {
        for list in lists {
            for value in list.iter().map(|v| (*v).into()).filter(|v| keep(*v)) {
                counts[bucket(value)] += 1;
            }
        }
    });
    select_counted(lists, keep, &counts, ranks, negative)
}

/// [`select`], the values kept already counted by bucket (`counts`, as far as the last bucket
/// with any).
fn select_counted<T: KeptValue>(
    lists: &[&[T]],
    keep: impl Fn(i64) -> bool,
    counts: &[u64],
    ranks: &[u64],
    negative: bool,
) -> Vec<i64> {
    // Each rank's bucket and rank within it, the buckets taken in increasing order of value.
    let mut wanted: Vec<(usize, u64)> = Vec::with_capacity(ranks.len());
    let order: Box<dyn Iterator<Item = usize>> =
        if negative { Box::new((0..counts.len()).rev()) } else { Box::new(0..counts.len()) };
    let mut before = 0;
    for index in order {
        if wanted.len() == ranks.len() {
            break;
        }
        let count = counts[index];
        while let Some(rank) = ranks.get(wanted.len()).filter(|rank| **rank <= before + count) {
            wanted.push((index, rank - before));
        }
        before += count;
    }
    assert_eq!(wanted.len(), ranks.len(), "every rank is within the values' count");
    // The values of those buckets, each bucket's in order.
    let mut buckets: Vec<usize> = wanted.iter().map(|(index, _)| *index).collect();
    buckets.sort_unstable();
    buckets.dedup();
    let mut members = T::members(lists, &keep, &buckets, counts.len());
    members.iter_mut().for_each(|values| radsort::sort(values));
    let slot = |index: usize| buckets.binary_search(&index).expect("a wanted bucket");
    wanted.iter().map(|(index, rank)| members[slot(*index)][*rank as usize - 1]).collect()
}

/// A kept value's type: 32 or 64 bits.
trait KeptValue: Copy + Into<i64> {
    /// The values of `lists` that `keep` keeps in each of `buckets` (distinct, in increasing
    /// order, each below `slots`), in no order.
    fn members(lists: &[&[Self]], keep: impl Fn(i64) -> bool, buckets: &[usize], slots: usize) -> Vec<Vec<i64>> {
        members_of(lists, keep, buckets, slots)
    }
}

impl KeptValue for i64 {}

/// Up to this many buckets, 32-bit values are found by the buckets' ranges (a summary asks 5).
const RANGES: usize = 6;

impl KeptValue for u32 {
    /// Nearly every value is in none of a summary's few buckets: a block of 16 is first compared
    /// with the buckets' ranges, at once (the compiler makes vector instructions of it), and only
    /// a block with a member is looked at value by value: ending a wide exact row took 52 ms, 38
    /// so (`WIDE=1 CLASSES=2 BUDGET=4000000 fold_cost`).
    fn members(lists: &[&[u32]], keep: impl Fn(i64) -> bool, buckets: &[usize], slots: usize) -> Vec<Vec<i64>> {
        if buckets.is_empty() || buckets.len() > RANGES {
            return members_of(lists, keep, buckets, slots);
        }
        // Each bucket as its lowest value and width: `v - low <= width` (wrapping) is one compare.
        // The ranges left over repeat the last bucket's.
        let (mut low, mut width) = ([0u32; RANGES], [0u32; RANGES]);
        for i in 0..RANGES {
            let (lowest, highest) = layout_range(buckets[i.min(buckets.len() - 1)], STORED_HALF);
            let (lowest, highest) = (lowest.min(u32::MAX as u64) as u32, highest.min(u32::MAX as u64) as u32);
            (low[i], width[i]) = (lowest, highest - lowest);
        }
        let within = |v: u32| (0..RANGES).fold(0u32, |at, i| at | u32::from(v.wrapping_sub(low[i]) <= width[i]));
        let mut members = vec![Vec::new(); buckets.len()];
        for list in lists {
            for block in list.chunks(16) {
                if block.iter().fold(0, |any, v| any | within(*v)) == 0 {
                    continue;
                }
                for value in block.iter().filter(|v| within(**v) != 0).map(|v| i64::from(*v)) {
                    if keep(value) {
                        let at = buckets.binary_search(&stored_index(value as u64)).expect("within a bucket's range");
                        members[at].push(value);
                    }
                }
            }
        }
        members
    }
}

/// [`KeptValue::members`], each value's bucket's slot looked up in a table.
fn members_of<T: KeptValue>(
    lists: &[&[T]],
    keep: impl Fn(i64) -> bool,
    buckets: &[usize],
    slots: usize,
) -> Vec<Vec<i64>> {
    let mut slot = vec![u32::MAX; slots];
    for (i, index) in buckets.iter().enumerate() {
        slot[*index] = i as u32;
    }
    let mut members = vec![Vec::new(); buckets.len()];
    for list in lists {
        for value in list.iter().map(|v| (*v).into()) {
            let at = slot.get(stored_index(value.unsigned_abs())).copied().unwrap_or(u32::MAX);
            if at != u32::MAX && keep(value) {
                members[at as usize].push(value);
            }
        }
    }
    members
}

/// Counters by index, in pages of [`PAGE`] allocated on first use, with each page's total so
/// that a rank is found by skipping whole pages (a wide row's histogram has hundreds).
/// The counters are 32-bit while the histogram holds fewer values than that counts (no counter
/// can overflow then), 64-bit beyond: half the bytes that every value of a wide row reaches at
/// random (`WIDE=1 CLASSES=2 fold_cost`: 113-125 ns to 102-117 a sample, best of 5, 3 runs each).
#[derive(Clone, Debug, Default)]
struct Counters {
    pages: Pages,
    totals: Vec<u64>,
    total: u64,
}

#[derive(Clone, Debug)]
enum Pages {
    Narrow(Vec<Option<Box<[u32]>>>),
    Wide(Vec<Option<Box<[u64]>>>),
}

impl Default for Pages {
    fn default() -> Pages {
        Pages::Narrow(Vec::new())
    }
}

const PAGE: usize = 4096;
// Pages are read sixteen counters at a time.
const _: () = assert!(PAGE % 16 == 0);

/// Pages of counters in all: every index is below 48 << 17 (`counts_index` of `u64::MAX`).
const PAGES: usize = (48 << 17) / PAGE;

/// A counter's width.
trait Count: Copy + Default + PartialEq + Into<u64> + std::ops::AddAssign {
    /// `count`, known to fit.
    fn of(count: u64) -> Self;
}

impl Count for u32 {
    fn of(count: u64) -> u32 {
        count as u32
    }
}

impl Count for u64 {
    fn of(count: u64) -> u64 {
        count
    }
}

/// Adds `count` to the counter at `index` and to its page's total.
#[inline]
fn add_to<C: Count>(pages: &mut Vec<Option<Box<[C]>>>, totals: &mut Vec<u64>, index: usize, count: u64) {
    let page = index / PAGE;
    if page >= pages.len() {
        pages.resize(page + 1, None);
        totals.resize(page + 1, 0);
    }
    pages[page].get_or_insert_with(|| vec![C::default(); PAGE].into_boxed_slice())[index % PAGE] += C::of(count);
    totals[page] += count;
}

impl Counters {
    /// Counts one value at each of `indices` (in any order): grouped by page first, in one
    /// counting pass and one scatter, so that each page is found once and its counters are
    /// reached within its 16 KiB (a radix sort by page took a pass more, `fold_cost`).
    fn add_by_page(&mut self, indices: &[u32]) {
        if indices.is_empty() {
            return;
        }
        self.make_room(indices.len() as u64);
        // Where each page's indices start in `grouped`, then (after the scatter) end.
        let mut ends = [0u32; PAGES + 1];
        for index in indices {
            ends[*index as usize / PAGE + 1] += 1;
        }
        for page in 0..PAGES {
            ends[page + 1] += ends[page];
        }
        let mut grouped = vec![0u32; indices.len()];
        for index in indices {
            let at = &mut ends[*index as usize / PAGE];
            grouped[*at as usize] = *index;
            *at += 1;
        }
        fn count<C: Count>(pages: &mut Vec<Option<Box<[C]>>>, totals: &mut Vec<u64>, grouped: &[u32], ends: &[u32]) {
            let mut start = 0;
            for (page, end) in ends[..PAGES].iter().map(|e| *e as usize).enumerate() {
                if end == start {
                    continue;
                }
                add_to(pages, totals, page * PAGE, 0);
                let counters = pages[page].as_deref_mut().expect("allocated by add_to");
                for index in &grouped[start..end] {
                    counters[*index as usize % PAGE] += C::of(1);
                }
                totals[page] += (end - start) as u64;
                start = end;
            }
        }
        match &mut self.pages {
            Pages::Narrow(pages) => count(pages, &mut self.totals, &grouped, &ends),
            Pages::Wide(pages) => count(pages, &mut self.totals, &grouped, &ends),
        }
    }

    /// Adds the counts of page `page` (room made for them already: [`Counters::make_room`]).
    fn add_page(&mut self, page: usize, counts: &[u32]) {
        fn add<C: Count>(pages: &mut Vec<Option<Box<[C]>>>, totals: &mut Vec<u64>, page: usize, counts: &[u32]) {
            add_to(pages, totals, page * PAGE, 0);
            let mine = pages[page].as_deref_mut().expect("allocated by add_to");
            mine.iter_mut().zip(counts).for_each(|(mine, count)| *mine += C::of(u64::from(*count)));
            totals[page] += counts.iter().map(|c| u64::from(*c)).sum::<u64>();
        }
        match &mut self.pages {
            Pages::Narrow(pages) => add(pages, &mut self.totals, page, counts),
            Pages::Wide(pages) => add(pages, &mut self.totals, page, counts),
        }
    }

    #[cfg(test)]
    fn add(&mut self, index: usize, count: u64) {
        self.make_room(count);
        match &mut self.pages {
            Pages::Narrow(pages) => add_to(pages, &mut self.totals, index, count),
            Pages::Wide(pages) => add_to(pages, &mut self.totals, index, count),
        }
    }

    /// Widens the counters before `more` values could overflow a 32-bit one.
    fn make_room(&mut self, more: u64) {
        self.total += more;
        if self.total > u64::from(u32::MAX) {
            self.widen();
        }
    }

    fn widen(&mut self) {
        if let Pages::Narrow(pages) = &mut self.pages {
            let wide = std::mem::take(pages)
                .into_iter()
                .map(|page| page.map(|counts| counts.iter().map(|c| u64::from(*c)).collect()))
                .collect();
            self.pages = Pages::Wide(wide);
        }
    }

    fn page_count(&self) -> usize {
        self.totals.len()
    }

    fn get(&self, index: usize) -> u64 {
        let (page, slot) = (index / PAGE, index % PAGE);
        match &self.pages {
            Pages::Narrow(pages) => pages.get(page).and_then(|p| p.as_ref()).map_or(0, |p| u64::from(p[slot])),
            Pages::Wide(pages) => pages.get(page).and_then(|p| p.as_ref()).map_or(0, |p| p[slot]),
        }
    }

    /// Puts (index, count) of every counter above 0, in increasing order of index.
    fn for_each_nonzero(&self, put: impl FnMut(usize, u64)) {
        self.for_each_nonzero_below(usize::MAX, put);
    }

    /// Puts (index, count) of every counter above 0 of the first `pages` pages, in increasing
    /// order of index.
    fn for_each_nonzero_below(&self, pages: usize, mut put: impl FnMut(usize, u64)) {
        fn of<C: Count>(pages: &[Option<Box<[C]>>], put: &mut impl FnMut(usize, u64)) {
            for (first, page) in pages.iter().enumerate().filter_map(|(i, page)| Some((i * PAGE, page.as_deref()?))) {
                // Sixteen counters at a time, by a mask of those above 0: a test of each one was
                // a mispredicted branch for every other counter of a wide distribution.
                for (k, group) in page.chunks_exact(16).enumerate() {
                    let mut nonzero = group
                        .iter()
                        .enumerate()
                        .fold(0u32, |mask, (j, count)| mask | (u32::from(*count != C::default()) << j));
                    while nonzero != 0 {
                        let j = nonzero.trailing_zeros() as usize;
                        put(first + 16 * k + j, group[j].into());
                        nonzero &= nonzero - 1;
                    }
                }
            }
        }
        match &self.pages {
            Pages::Narrow(all) => of(&all[..pages.min(all.len())], &mut put),
            Pages::Wide(all) => of(&all[..pages.min(all.len())], &mut put),
        }
    }

    /// (index, count) of every counter above 0, in increasing order of index.
    #[cfg(test)]
    fn nonzero(&self) -> Vec<(usize, u64)> {
        let mut counts = Vec::new();
        self.for_each_nonzero(|index, count| counts.push((index, count)));
        counts
    }

    /// The highest index counted, if any.
    fn last_nonzero(&self) -> Option<usize> {
        let page = self.totals.iter().rposition(|total| *total > 0)?;
        (0..PAGE).rev().map(|slot| page * PAGE + slot).find(|index| self.get(*index) > 0)
    }

    /// The count of the pages in `pages`.
    fn total_of(&self, pages: std::ops::Range<usize>) -> u64 {
        self.totals
            .get(pages.start.min(self.totals.len())..pages.end.min(self.totals.len()))
            .unwrap_or_default()
            .iter()
            .sum()
    }

    fn total(&self) -> u64 {
        self.total
    }

    /// The index of the counter that holds the `rank`-th count (1-based, at most the pages'
    /// total) of the pages in `pages`, taken in increasing order of index or, `descending`, in
    /// decreasing order.
    fn index_at(&self, pages: std::ops::Range<usize>, descending: bool, rank: u64) -> usize {
        let pages = pages.start.min(self.page_count())..pages.end.min(self.page_count());
        let order: Box<dyn Iterator<Item = usize>> = if descending { Box::new(pages.rev()) } else { Box::new(pages) };
        let mut left = rank;
        for page in order {
            if self.totals[page] < left {
                left -= self.totals[page];
                continue;
            }
            let slots: Box<dyn Iterator<Item = usize>> =
                if descending { Box::new((0..PAGE).rev()) } else { Box::new(0..PAGE) };
            for slot in slots {
                let count = self.get(page * PAGE + slot);
                if count >= left {
                    return page * PAGE + slot;
                }
                left -= count;
            }
        }
        unreachable!("rank {rank} is within the pages' total")
    }

    /// Adds another's counts, page by page.
    fn absorb(&mut self, mut other: Counters) {
        self.make_room(other.total);
        if matches!(self.pages, Pages::Wide(_)) {
            other.widen();
        }
        if self.totals.len() < other.totals.len() {
            self.totals.resize(other.totals.len(), 0);
        }
        self.totals.iter_mut().zip(&other.totals).for_each(|(mine, theirs)| *mine += theirs);
        fn pages<C: Count>(mine: &mut Vec<Option<Box<[C]>>>, theirs: Vec<Option<Box<[C]>>>) {
            if mine.len() < theirs.len() {
                mine.resize(theirs.len(), None);
            }
            for (mine, theirs) in mine.iter_mut().zip(theirs) {
                match (mine.as_mut(), theirs) {
                    (_, None) => {}
                    (None, theirs) => *mine = theirs,
                    (Some(mine), Some(theirs)) => mine.iter_mut().zip(theirs.iter()).for_each(|(a, b)| *a += *b),
                }
            }
        }
        match (&mut self.pages, other.pages) {
            (Pages::Narrow(mine), Pages::Narrow(theirs)) => pages(mine, theirs),
            (Pages::Wide(mine), Pages::Wide(theirs)) => pages(mine, theirs),
            _ => unreachable!("both widened alike"),
        }
    }
}

/// The pages of counters below [`EXACT_BELOW`], where a counter's index is its value.
const EXACT_PAGES: usize = EXACT_BELOW as usize / PAGE;

/// The counters of the values 0..262,144 (whose index is their value), one array counted into
/// directly while a fast worker's samples are folded a thousand at a time, back to back: a row's
/// values there cluster (a lateness of 60-70 µs spans 10 KiB of counters), so the counters stay
/// in the caches and a value costs an increment, where noting it for a later count by page
/// cost twice the fold (issue 58: `sample_cost`, 15.6 to 8.2 ns a sample). The counters are a
/// byte each, a counter that wraps noted in `carried`: a row spread over all of 0..262 µs (the
/// lateness of a thread row at 10,000 units) reaches its counters at random, and a quarter of
/// the bytes stays in the caches where the 32-bit counters did not (`SPREAD=1 CLASSES=2
/// fold_cost`: 37-84 ns a sample to 27-28). The counts move into the paged counters (and the
/// sums) whenever the histogram is asked anything ([`Exact::drain_into`]), and before one of
/// them could overflow.
#[derive(Debug, Default)]
struct Exact {
    /// `EXACT_BELOW` counters, on the first value; all 0 outside the pages in `pages`.
    counts: Option<Mapped>,
    /// Bit p: page p (counters `p * PAGE..`) holds counts.
    pages: u64,
    /// The values whose counter wrapped from 255 to 0, once for each time: 256 counts each.
    /// Drained at [`MAX_CARRIED`], so that no count overflows 32 bits. (How many values were
    /// counted is found when they are drained: counting them at each value, twice, was 1.2 ns of
    /// the default shape's 17.5 a sample, `sample_cost`.)
    carried: Vec<u32>,
}

/// Carries before a drain: a count is then at most 255 + 256 x 2^20, well within 32 bits
/// (and the list 4 MiB at most).
const MAX_CARRIED: usize = 1 << 20;

const _: () = assert!(EXACT_PAGES == 64, "a page a bit of `Exact::pages`");

/// `EXACT_BELOW` zeroed byte counters in a mapping of their own (a `taskmeter_memory` list,
/// never the child's: spare ones are reached again after the next worker's fork): the kernel
/// gives memory to the pages a row reaches only (from the allocator, a reused block was zeroed,
/// and so made resident, whole). Ended rows leave theirs, zeroed, for the next rows
/// ([`SPARE_MAPPED`]): a page reached again costs no fault.
type Mapped = List<u8>;

const MAPPED_BYTES: usize = EXACT_BELOW as usize;

/// Zeroed mappings that ended rows left, for the next rows: at most 16, whose pages once reached
/// stay resident (4 MiB at the very most, for rows spread over all of 0..262 µs).
static SPARE_MAPPED: Mutex<Vec<Mapped>> = Mutex::new(Vec::new());
const SPARE_MAPPED_AT_MOST: usize = 16;

impl Exact {
    /// Counts `value`; true when the counts must be drained before the next.
    #[inline(always)]
    fn count(&mut self, value: usize) -> bool {
        let counts = self.counts.get_or_insert_with(Exact::zeroed);
        let count = counts[value].wrapping_add(1);
        counts[value] = count;
        self.pages |= 1 << (value / PAGE);
        count == 0 && self.carry(value)
    }

    /// A counter that wrapped: 256 carried. True when the carried ones must be drained.
    #[cold]
    fn carry(&mut self, value: usize) -> bool {
        self.carried.push(value as u32);
        self.carried.len() >= MAX_CARRIED
    }

    #[cold]
    fn zeroed() -> Mapped {
        SPARE_MAPPED.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_else(|| List::zeroed(MAPPED_BYTES))
    }

    fn is_empty(&self) -> bool {
        self.pages == 0
    }

    /// The values counted since the last drain (a pass over their pages).
    fn len(&self) -> u64 {
        let Some(counts) = self.counts.as_ref() else { return 0 };
        let bytes: u64 = self
            .counted_pages()
            .map(|page| counts[page * PAGE..(page + 1) * PAGE].iter().map(|c| u64::from(*c)).sum::<u64>())
            .sum();
        bytes + 256 * self.carried.len() as u64
    }

    /// The pages that hold counts, by index.
    fn counted_pages(&self) -> impl Iterator<Item = usize> {
        let mut pages = self.pages;
        std::iter::from_fn(move || {
            let page = (pages != 0).then(|| pages.trailing_zeros() as usize)?;
            pages &= pages - 1;
            Some(page)
        })
    }

    /// Moves every count into `counters` (page by page) and `sums`, leaving these at 0; returns
    /// how many values they were.
    fn drain_into(&mut self, counters: &mut Counters, sums: &mut ExactSums) -> u64 {
        let pages = self.counted_pages();
        let Some(counts) = self.counts.as_mut() else { return 0 };
        let mut drained = 0;
        self.carried.sort_unstable();
        let mut carried = self.carried.iter().map(|value| *value as usize).peekable();
        let mut page_counts = vec![0u32; PAGE];
        for page in pages {
            let slice = &mut counts[page * PAGE..(page + 1) * PAGE];
            page_counts.iter_mut().zip(slice.iter()).for_each(|(count, byte)| *count = u32::from(*byte));
            while let Some(value) = carried.next_if(|value| *value < (page + 1) * PAGE) {
                page_counts[value % PAGE] += 256;
            }
            let values = page_counts.iter().map(|c| u64::from(*c)).sum::<u64>();
            counters.make_room(values);
            drained += values;
            counters.add_page(page, &page_counts);
            for (slot, count) in page_counts.iter().enumerate().filter(|(_, count)| **count > 0) {
                sums.add((page * PAGE + slot) as u64, u64::from(*count));
            }
            slice.fill(0);
        }
        self.carried.clear();
        self.pages = 0;
        drained
    }
}

impl Drop for Exact {
    /// Its mapping, zeroed, to the spare ones.
    fn drop(&mut self) {
        let Some(mut counts) = self.counts.take() else { return };
        for page in self.counted_pages() {
            counts[page * PAGE..(page + 1) * PAGE].fill(0);
        }
        let mut spare = SPARE_MAPPED.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() < SPARE_MAPPED_AT_MOST {
            spare.push(counts);
        }
    }
}

impl Clone for Exact {
    /// The counted pages copied (a copy is asked before a question of a histogram not settled).
    fn clone(&self) -> Exact {
        let counts = self.counts.as_ref().map(|counts| {
            let mut copy = Exact::zeroed();
            for page in self.counted_pages() {
                copy[page * PAGE..(page + 1) * PAGE].copy_from_slice(&counts[page * PAGE..(page + 1) * PAGE]);
            }
            copy
        });
        Exact { counts, carried: self.carried.clone(), ..*self }
    }
}

/// Values counted together.
const BATCH: usize = 8192;
/// Values outside 0..262,144 counted together, past a row's budget: their counters spread over
/// megabytes (a 5-digit counter every 1,024 ns at 150 ms), so that each of a batch of 8,192
/// reached a cache line of counters no other of its batch did, a miss each; 32 times as many at
/// once reach each line several times (`sample_cost SHAPE=volume`, behind: the fold 59-62 to
/// 47-53 ns a sample, BENCHMARKS.md), for at most 1 MiB of notes a sign (values from 0 up,
/// below 0) per histogram.
const OUTSIDE_BATCH: usize = 1 << 18;

impl SignedHistogram {
    /// One that keeps every value exactly.
    pub fn exact() -> SignedHistogram {
        SignedHistogram { outliers: Some(Kept::default()), ..Default::default() }
    }

    #[cfg(test)]
    fn is_exact(&self) -> bool {
        self.outliers.is_some()
    }

    /// Counts the value (in 0..262,144) or keeps it (exact, outside) or notes its counter for
    /// the next count: at once, where holding each value for a batch to sort out wrote and read
    /// it once more. Inlined into the fold, which calls it four times a sample: a call each cost
    /// a tenth of the fold (`WIDE=1 CLASSES=2 BUDGET=4000000 fold_cost`).
    #[inline(always)]
    pub fn record<const NOW: bool>(&mut self, value: i64) {
        if (value as u64) < EXACT_BELOW {
            self.record_exact::<NOW>(value as usize);
        } else {
            self.record_outside(value);
        }
    }

    /// Counts a value in 0..262,144: at once (`NOW`, for a caller folding a large batch, whose
    /// counters stay in the caches) or noted for the next count by page (a few values at a time,
    /// between which the counters leave the caches: an increment each missed them, and the fold
    /// of a default run's rows cost 4 times as much, issue 58).
    #[inline(always)]
    pub fn record_exact<const NOW: bool>(&mut self, value: usize) {
        if NOW {
            if self.exact.count(value) {
                self.drain_exact();
            }
            return;
        }
        self.len += 1;
        // A value below 262,144 is its own counter's index.
        self.uncounted_positive.push(value as u32);
        if self.uncounted_positive.len() >= BATCH {
            self.flush();
        }
    }

    /// Keeps (exact) or notes for the next count a value outside 0..262,144.
    #[inline(always)]
    pub fn record_outside(&mut self, value: i64) {
        self.len += 1;
        if let Some(kept) = &mut self.outliers {
            kept.push(value);
            return;
        }
        note_counter(value, &mut self.uncounted_positive, &mut self.uncounted_negative);
        if self.uncounted_positive.len().max(self.uncounted_negative.len()) >= OUTSIDE_BATCH {
            self.flush();
        }
    }

    /// (value, count) of every value in 0..262,144 counted, in increasing order of value.
    #[cfg(test)]
    fn for_each_exact(&self, mut put: impl FnMut(i64, u64)) {
        self.flushed(|this| {
            this.positive.for_each_nonzero_below(EXACT_PAGES, |index, count| put(index as i64, count));
        });
    }

    /// From now on, the values in 0..262,144 are summed apart below `pivot` (set before the
    /// first is counted; see [`ExactSums`]).
    pub fn set_pivot(&mut self, pivot: i64) {
        debug_assert_eq!(self.sums.count, 0, "no value summed yet");
        self.sums.pivot = pivot;
    }

    /// The sums of every value in 0..262,144 recorded, once settled ([`SignedHistogram::settle`]).
    pub fn settled_sums(&self) -> ExactSums {
        debug_assert!(!self.has_uncounted(), "settled");
        self.sums
    }

    /// The sums of every value in 0..262,144 recorded (counting those not yet counted).
    pub fn exact_sums(&mut self) -> ExactSums {
        self.flush();
        self.drain_exact();
        self.sums
    }

    /// Adds another's values as if each had been recorded here; exact only if both were.
    pub fn absorb(&mut self, mut other: SignedHistogram) {
        if self.outliers.is_some() && other.outliers.is_none() {
            self.make_approximate();
        }
        self.drain_exact();
        // Drained by `exact_sums`, its `len` counts every value it recorded.
        let theirs = other.exact_sums();
        self.len += other.len;
        self.sums.merge(&theirs);
        self.positive.absorb(std::mem::take(&mut other.positive));
        self.negative.absorb(std::mem::take(&mut other.negative));
        match (&mut self.outliers, other.outliers) {
            (Some(mine), Some(theirs)) => mine.absorb(theirs),
            (None, Some(theirs)) => self.count_values(theirs.values(), theirs.len()),
            (_, None) => {}
        }
    }

    /// Trades the values kept exactly for their counters.
    pub fn make_approximate(&mut self) {
        self.flush();
        if let Some(kept) = self.outliers.take() {
            self.count_values(kept.values(), kept.len());
        }
    }

    /// Counts the values recorded since the last count, page of counters by page.
    #[inline(never)]
    fn flush(&mut self) {
        self.sums.add_indices(&self.uncounted_positive);
        self.positive.add_by_page(&self.uncounted_positive);
        self.negative.add_by_page(&self.uncounted_negative);
        self.uncounted_positive.clear();
        self.uncounted_negative.clear();
    }

    /// Counts `len` values at once, none kept: a row's kept values, when it turns approximate,
    /// a block of counters at a time. (Noting all of them first took memory fresh from the
    /// kernel for each, twice: a page fault each 1,024 values, 3 % of a 100,000-unit run.)
    fn count_values(&mut self, values: impl Iterator<Item = i64>, len: usize) {
        const BLOCK: usize = 1 << 16;
        let (mut positive, mut negative) = (Vec::with_capacity(len.min(BLOCK)), Vec::new());
        counting(|| {
            for value in values {
                note_counter(value, &mut positive, &mut negative);
                if positive.len().max(negative.len()) >= BLOCK {
                    self.positive.add_by_page(&positive);
                    self.negative.add_by_page(&negative);
                    positive.clear();
                    negative.clear();
                }
            }
        });
        self.positive.add_by_page(&positive);
        self.negative.add_by_page(&negative);
    }

    fn has_uncounted(&self) -> bool {
        !(self.uncounted_positive.is_empty() && self.uncounted_negative.is_empty() && self.exact.is_empty())
    }

    /// Counts what is recorded, and the kept values by bucket (so that questions need no copy
    /// and no count of their own).
    pub fn settle(&mut self) {
        if self.has_uncounted() {
            self.flush();
            self.drain_exact();
        }
        if let Some(kept) = &mut self.outliers {
            kept.count();
        }
    }

    pub fn len(&self) -> u64 {
        self.len + self.exact.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0 && self.exact.is_empty()
    }

    /// Moves the values counted at once into the counters and their sums.
    fn drain_exact(&mut self) {
        self.len += self.exact.drain_into(&mut self.positive, &mut self.sums);
    }

    /// (value, count) of every bucket, in increasing order of value; a bucket's value is its
    /// end farthest from zero (for negative values, nearest zero), so a percentile read from
    /// it is never under-reported. An exact histogram's buckets are its distinct values. (The
    /// reference that [`SignedHistogram::at_ranks`] is tested against.)
    #[cfg(test)]
    fn buckets(&self) -> Vec<(i64, u64)> {
        self.flushed(|this| {
            let mut outliers: Vec<i64> = this.outliers.iter().flat_map(Kept::values).collect();
            outliers.sort();
            let split = outliers.partition_point(|v| *v < 0);
            let runs = |values: &[i64]| -> Vec<(i64, u64)> {
                values.chunk_by(|a, b| a == b).map(|run| (run[0], run.len() as u64)).collect()
            };
            let mut buckets = runs(&outliers[..split]);
            let mut negative: Vec<(i64, u64)> =
                this.negative.nonzero().into_iter().map(|(i, c)| (-(index_range(i).0 as i64), c)).collect();
            negative.reverse();
            buckets.extend(negative);
            // Exact values above the counted range and counters above it never coexist.
            let (low, high): (Vec<_>, Vec<_>) =
                this.positive.nonzero().into_iter().partition(|(i, _)| (*i as u64) < EXACT_BELOW);
            buckets.extend(low.into_iter().map(|(i, c)| (i as i64, c)));
            buckets.extend(runs(&outliers[split..]));
            buckets.extend(high.into_iter().map(|(i, c)| (index_range(i).1 as i64, c)));
            buckets
        })
    }

    /// The value at each 1-based rank in `ranks` (ascending), within the histogram's precision:
    /// that of [`SignedHistogram::buckets`], found without listing them (each run of counters is
    /// skipped by its pages' totals, and the kept values are selected from, not sorted).
    pub fn at_ranks(&self, ranks: &[u64]) -> Vec<i64> {
        self.flushed(|this| {
            let (narrow, wide) = this.outliers.as_ref().map(Kept::lists).unwrap_or_default();
            let below = wide.iter().flat_map(|list| list.iter()).filter(|v| **v < 0).count() as u64;
            let beyond = wide.iter().map(|list| list.len() as u64).sum::<u64>() - below;
            let all_pages = this.positive.page_count().max(EXACT_PAGES);
            fn counted(
                counters: &Counters,
                pages: std::ops::Range<usize>,
                descending: bool,
                value: fn(usize) -> i64,
            ) -> impl Fn(&[u64]) -> Vec<i64> + '_ {
                move |ranks| {
                    ranks.iter().map(|rank| value(counters.index_at(pages.clone(), descending, *rank))).collect()
                }
            }
            // The regions of values in increasing order, as `buckets` lists them: how many
            // values each holds, and the values at ranks within it.
            let regions: [(u64, ValuesAt<'_>); 6] = [
                (below, Box::new(|r: &[u64]| select(&wide, |v| v < 0, r, true))),
                (
                    this.negative.total(),
                    Box::new(counted(&this.negative, 0..this.negative.page_count(), true, |i| {
                        -(index_range(i).0 as i64)
                    })),
                ),
                (
                    this.positive.total_of(0..EXACT_PAGES),
                    Box::new(counted(&this.positive, 0..EXACT_PAGES, false, |i| i as i64)),
                ),
                (
                    narrow.iter().map(|list| list.len() as u64).sum(),
                    Box::new(|r: &[u64]| {
                        let counts = this.outliers.as_ref().map(Kept::narrow_counts).unwrap_or_default();
                        select_counted(&narrow, |_| true, &counts, r, false)
                    }),
                ),
                (beyond, Box::new(|r: &[u64]| select(&wide, |v| v >= 0, r, false))),
                (
                    this.positive.total_of(EXACT_PAGES..all_pages),
                    Box::new(counted(&this.positive, EXACT_PAGES..all_pages, false, |i| index_range(i).1 as i64)),
                ),
            ];
            let ranks: Vec<u64> = ranks.iter().copied().take_while(|r| *r <= this.len()).collect();
            let (mut values, mut before, mut at) = (Vec::with_capacity(ranks.len()), 0, 0);
            for (count, values_at) in &regions {
                let end = at + ranks[at..].partition_point(|rank| *rank <= before + count);
                if end > at {
                    let within: Vec<u64> = ranks[at..end].iter().map(|rank| rank - before).collect();
                    values.extend(values_at(&within));
                }
                (before, at) = (before + count, end);
            }
            values
        })
    }

    /// The magnitudes of the negative values (how early each wake-up was), if any.
    #[cfg(test)]
    fn negatives(&self) -> Option<Histogram<u64>> {
        self.encode_negatives().map(|text| decode(&text).expect("our own encoding"))
    }

    /// The histogram as stored in run.json: negative values recorded as 0.
    #[cfg(test)]
    fn clamped(&self) -> Histogram<u64> {
        decode(&self.encode_clamped()).expect("our own encoding")
    }

    /// The histogram as stored in run.json (negative values recorded as 0), encoded.
    pub fn encode_clamped(&self) -> String {
        encode(&self.flushed(|this| {
            let (narrow, wide) =
                this.outliers.as_ref().map(|kept| (kept.narrow_counts(), kept.lists().1)).unwrap_or_default();
            let wide = || wide.iter().flat_map(|list| list.iter().map(|v| v.max(&0).unsigned_abs()));
            let narrow_highest = narrow.iter().rposition(|count| *count > 0).map(|index| stored_lowest(index + 1) - 1);
            let highest = [this.positive.last_nonzero().map(|i| index_range(i).1), narrow_highest, wide().max()];
            let mut stored = stored_up_to(highest.into_iter().flatten().max());
            stored.saturating_record_n(0, this.negative.total());
            record_counters(&mut stored, &this.positive);
            for (index, count) in narrow.iter().enumerate().filter(|(_, count)| **count > 0) {
                stored.saturating_record_n(stored_lowest(index), *count);
            }
            record_each(&mut stored, wide());
            stored
        }))
    }

    /// How early the values below 0 were (their magnitudes), encoded; None without any.
    pub fn encode_negatives(&self) -> Option<String> {
        let stored = self.flushed(|this| {
            let kept_below = || this.outliers.iter().flat_map(Kept::values).filter(|v| *v < 0);
            let highest =
                this.negative.last_nonzero().map(|i| index_range(i).1).max(kept_below().min().map(i64::unsigned_abs));
            let mut stored = stored_up_to(highest);
            record_counters(&mut stored, &this.negative);
            record_each(&mut stored, kept_below().map(i64::unsigned_abs));
            stored
        });
        (!stored.is_empty()).then(|| encode(&stored))
    }

    /// `read` of this histogram with every value counted or kept (the kept ones in any order).
    fn flushed<T>(&self, read: impl FnOnce(&SignedHistogram) -> T) -> T {
        if !self.has_uncounted() {
            return read(self);
        }
        let mut flushed = self.clone();
        flushed.flush();
        flushed.drain_exact();
        read(&flushed)
    }
}

/// The values at ranks (ascending) within one region of a histogram's values.
type ValuesAt<'a> = Box<dyn Fn(&[u64]) -> Vec<i64> + 'a>;

/// An empty histogram as `run.json` stores one, for values up to `highest`.
fn stored_up_to(highest: Option<u64>) -> Histogram<u64> {
    Histogram::new_with_bounds(1, highest.unwrap_or(0).max(2), STORED_DIGITS).expect("valid bounds")
}

/// Records the values of `counters` (5 digits) in `stored` (3 digits), each stored bucket once:
/// a wide row has hundreds of thousands of counters above 0, a hundred or so to a bucket of
/// 3 digits (a call of the library's `record_n` for each was most of ending such a row).
fn record_counters(stored: &mut Histogram<u64>, counters: &Counters) {
    let mut pending: Option<(usize, u64)> = None;
    counters.for_each_nonzero(|index, count| {
        // A counter of 5 digits lies within one bucket of 3 (both are the library's layout).
        let bucket = stored_index(index_range(index).0);
        match &mut pending {
            Some((at, sum)) if *at == bucket => *sum += count,
            _ => {
                if let Some((at, sum)) = pending.replace((bucket, count)) {
                    stored.saturating_record_n(stored_lowest(at), sum);
                }
            }
        }
    });
    if let Some((at, sum)) = pending {
        stored.saturating_record_n(stored_lowest(at), sum);
    }
}

/// Records `values` (at most `stored`'s highest) in `stored`: counted first in a plain array of
/// its counters, then each counter at once. A wide exact row keeps millions of values; the
/// library's `record` checks and tracks more per value (ending such a row took 12 % longer
/// than counting its sorted values; the array, a few thousand counters for values up to
/// seconds, stays in the caches, so the values count in any order).
fn record_each(stored: &mut Histogram<u64>, values: impl Iterator<Item = u64>) {
    let mut counts = vec![0u64; stored_index(stored.high()) + 1];
    count_by_stored_bucket(&mut counts, values);
    for (index, count) in counts.iter().enumerate().filter(|(_, count)| **count > 0) {
        stored.saturating_record_n(stored_lowest(index), *count);
    }
}

/// Half the counters of a bucket of the stored histograms, as a power of two: 3 significant
/// digits take 2,048 counters a bucket (the first counts 0 to 2,047 one by one, each later one
/// has its upper half, twice as wide as the one before).
const STORED_HALF: u32 = 10;

/// The index of `value` among the counters of a stored histogram.
const fn stored_index(value: u64) -> usize {
    layout_index(value, STORED_HALF)
}

/// Adds each value to its counter of a stored histogram (`counts`, as far as the last value's).
fn count_by_stored_bucket(counts: &mut [u64], values: impl Iterator<Item = u64>) {
    counting(|| values.for_each(|value| counts[stored_index(value)] += 1));
}

/// The lowest value counted at `index` of a stored histogram (the inverse of [`stored_index`]).
fn stored_lowest(index: usize) -> u64 {
    layout_range(index, STORED_HALF).0
}

/// The V2 deflate format (`V2DeflateSerializer`'s: a cookie, the compressed length, a zlib
/// stream of the plain V2 encoding). Any zlib reader reads it.
pub fn encode(h: &Histogram<u64>) -> String {
    let mut plain = Vec::new();
    V2Serializer::new().serialize(h, &mut plain).expect("serialising to memory cannot fail");
    compress(&plain)
}

/// A plain V2 encoding in the V2 deflate frame, base64. The zlib stream is Huffman-coded
/// without looking for repeated strings: a plain V2 encoding is mostly one-byte counts and
/// runs of empty counters, whose bytes code short and rarely repeat. Of a 10,000-unit run's 24
/// histograms (4.3 MB plain), zlib's fastest level made 1.95 MB, Huffman alone 1.67 MB, in
/// about half the time (the default level: 1.80 MB, 7 times as long).
fn compress(plain: &[u8]) -> String {
    use zlib_rs::{DeflateConfig, ReturnCode, Strategy};
    const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
    let config = DeflateConfig { strategy: Strategy::HuffmanOnly, ..DeflateConfig::new(1) };
    let mut bytes = vec![0u8; 8 + zlib_rs::compress_bound(plain.len())];
    let (compressed, code) = zlib_rs::compress_slice(&mut bytes[8..], plain, config);
    assert_eq!(code, ReturnCode::Ok, "compressing to memory, into room for the bound, cannot fail");
    let len = compressed.len();
    bytes[..4].copy_from_slice(&V2_COMPRESSED_COOKIE.to_be_bytes());
    bytes[4..8].copy_from_slice(&(len as u32).to_be_bytes());
    bytes.truncate(8 + len);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Notes the counter of `value` (below 0: of its magnitude, among the negative counters).
#[inline]
fn note_counter(value: i64, positive: &mut Vec<u32>, negative: &mut Vec<u32>) {
    // Every index is below 48 << 17: it fits 32 bits.
    match value {
        ..0 => negative.push(counts_index(value.unsigned_abs()) as u32),
        _ => positive.push(counts_index(value as u64) as u32),
    }
}

/// The index of `value` in the counts of an HdrHistogram of 5 significant digits.
#[inline]
fn counts_index(value: u64) -> usize {
    layout_index(value, HALF_MAGNITUDE)
}

/// Half of the 2^18 counters of a bucket, as a power of two.
const HALF_MAGNITUDE: u32 = 17;
const _: () = assert!(EXACT_BELOW == 2 << HALF_MAGNITUDE);

/// The lowest and highest value counted at `index` (the inverse of [`counts_index`]).
fn index_range(index: usize) -> (u64, u64) {
    layout_range(index, HALF_MAGNITUDE)
}

/// The index of `value` among the counters of an HdrHistogram from 1 whose buckets hold
/// `2 << half` counters (the library's layout: bucket 0 counts 0 to `(2 << half) - 1` one by one,
/// each later bucket has its upper half, twice as wide as the one before).
#[inline]
const fn layout_index(value: u64, half: u32) -> usize {
    let bucket = 64 - (half + 1) - (value | ((2 << half) - 1)).leading_zeros();
    let sub_bucket = (value >> bucket) as usize;
    ((bucket as usize + 1) << half) + sub_bucket - (1 << half)
}

/// Runs `count`, a loop that finds the buckets of many values ([`layout_index`] of each), with
/// LZCNT where the CPU has it (every x86-64 CPU from Intel's Haswell, 2013, and AMD's since
/// 2007): x86-64's baseline counts leading zeros with BSR, which costs AMD's Zen several cycles
/// where LZCNT costs one, and counting a row's kept values by bucket took 3.6 ns a value, 1.7
/// with it (issue 58). Elsewhere, as it is.
#[inline]
fn counting<R>(count: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        /// `count` inlined here is compiled with LZCNT.
        #[target_feature(enable = "lzcnt")]
        fn with_lzcnt<R>(count: impl FnOnce() -> R) -> R {
            count()
        }
        if std::arch::is_x86_feature_detected!("lzcnt") {
            // SAFETY: the CPU has LZCNT.
            return unsafe { with_lzcnt(count) };
        }
    }
    count()
}

/// The lowest and highest value counted at `index` in that layout (the inverse of
/// [`layout_index`]).
fn layout_range(index: usize, half: u32) -> (u64, u64) {
    if index < 2 << half {
        return (index as u64, index as u64);
    }
    let bucket = (index >> half) as u32 - 1;
    let sub_bucket = ((index & ((1 << half) - 1)) + (1 << half)) as u64;
    (sub_bucket << bucket, ((sub_bucket + 1) << bucket) - 1)
}

pub fn decode(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("a histogram is not valid base64: {e}"))?;
    Deserializer::new().deserialize(&mut bytes.as_slice()).map_err(|e| format!("a histogram cannot be read: {e:?}"))
}

/// Several stored histograms as one (e.g. the repetitions of a runtime at a point).
pub fn merge<'a>(texts: impl IntoIterator<Item = &'a String>) -> Result<Histogram<u64>, String> {
    // A fresh histogram resizes itself to any value; a decoded one may not.
    let mut merged = Histogram::<u64>::new(STORED_DIGITS).expect("3 significant digits are valid");
    for text in texts {
        merged.add(decode(text)?).map_err(|e| format!("cannot merge histograms: {e:?}"))?;
    }
    Ok(merged)
}

/// (value, count) at every distinct recorded value, in increasing order, for the rank tests.
pub fn counts(h: &Histogram<u64>) -> Vec<(i64, u64)> {
    h.iter_recorded().map(|v| (h.lowest_equivalent(v.value_iterated_to()) as i64, v.count_at_value())).collect()
}

/// (value, cumulative fraction) at every distinct recorded value, for CDF charts.
pub fn cdf(h: &Histogram<u64>) -> Vec<(u64, f64)> {
    let total = h.len() as f64;
    let mut seen = 0u64;
    h.iter_recorded()
        .map(|v| {
            seen += v.count_at_value();
            (h.highest_equivalent(v.value_iterated_to()), seen as f64 / total)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A xorshift generator: the same values every run.
    fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    /// The buckets found in a loop run by `counting` (with LZCNT, on a CPU that has it) are
    /// those found outside it (x86-64's baseline: BSR), and the layout's by hand, for every
    /// value at and around each power of two and a million more.
    #[test]
    fn counting_finds_the_buckets_found_without_it() {
        let mut values: Vec<u64> = (0..64).flat_map(|bit| [1u64 << bit, (1 << bit) - 1, (1 << bit) + 1]).collect();
        values.extend([0, u32::MAX as u64, u64::MAX]);
        let mut next = xorshift(0x2545_F491_4F6C_DD1D);
        values.extend((0..1_000_000).map(|i| next() >> (i % 64)));
        let plain: Vec<(usize, usize)> = values.iter().map(|v| (stored_index(*v), counts_index(*v))).collect();
        let counted: Vec<(usize, usize)> =
            counting(|| values.iter().map(|v| (stored_index(*v), counts_index(*v))).collect());
        assert_eq!(counted, plain);
        // Exact below 2,048, then 1,024 counters a doubling (each the upper half of its bucket).
        for (value, index) in
            [(0, 0), (2_047, 2_047), (2_048, 2_048), (4_095, 3_071), (4_096, 3_072), (u64::MAX, 56_319)]
        {
            assert_eq!(stored_index(value), index, "the stored index of {value}");
        }
        #[cfg(target_arch = "x86_64")]
        eprintln!("LZCNT {}", if std::arch::is_x86_feature_detected!("lzcnt") { "used" } else { "absent: BSR" });
    }

    #[test]
    fn round_trips_and_keeps_small_values_exact() {
        let values = [-5, 0, 1, 17, 2_046, 2_047, 250_000, 250_001, 1_000_000_007];
        let h = of(&values);
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(back.len(), 9);
        assert_eq!(back.count_at(0), 2, "the negative value is recorded as 0");
        assert_eq!(back.count_at(2_046), 1);
        assert_eq!(back.count_at(2_047), 1, "exact below 2,048 ns");
        assert_eq!(back.count_at(250_000), 2, "one counter 128 ns wide from 2^17 to 2^18");
        assert!(back.equivalent(back.max(), 1_000_000_007), "within 3 significant digits");
        assert!(back.max() - 1_000_000_007 < 1_000_000_007 / 1_024, "a counter is at most 1/1,024 of its values");
        // The same bytes the library's own deflate serialiser would frame, so any V2 reader
        // (HdrHistogram in Java, Python, Go) reads them.
        let mut reference = Vec::new();
        hdrhistogram::serialization::V2DeflateSerializer::new().serialize(&h, &mut reference).unwrap();
        let ours = base64::engine::general_purpose::STANDARD.decode(encode(&h)).unwrap();
        assert_eq!(ours[..4], reference[..4], "the V2 deflate cookie");
        assert_eq!(u32::from_be_bytes(ours[4..8].try_into().unwrap()) as usize, ours.len() - 8);
        assert!(decode("not base64!").is_err());
        assert!(decode("aGVsbG8=").is_err());
    }

    #[test]
    fn an_exact_histogram_ranks_every_value_as_a_sorted_list_would() {
        // Values on both sides of the counted range, out of order, with repeats, and on both
        // sides of 2^32 (kept in 32 bits below it, in 64 from it).
        let values = [
            300_000,
            -40,
            5,
            262_143,
            1 << 32,
            262_144,
            -40,
            7,
            u32::MAX as i64,
            1_000_000_007,
            5,
            -1,
            0,
            300_000,
            (1 << 32) + 1,
        ];
        let mut exact = SignedHistogram::exact();
        values.iter().for_each(|v| exact.record::<true>(*v));
        let mut sorted = values.to_vec();
        sorted.sort();
        let ranks: Vec<u64> = (1..=values.len() as u64).collect();
        assert_eq!(exact.at_ranks(&ranks), sorted);
        assert_eq!(exact.negatives().unwrap().len(), 3);
        assert_eq!(exact.clamped().count_at(0), 4, "three negative values and one 0");
        // Approximate afterwards: the same counts, ranks within 5 significant digits.
        exact.make_approximate();
        assert!(!exact.is_exact());
        assert_eq!(exact.len(), values.len() as u64);
        let approximate = exact.at_ranks(&ranks);
        assert_eq!(approximate[..8], sorted[..8], "exact below 262,144");
        for (a, v) in approximate.iter().zip(&sorted).skip(8) {
            assert!(a >= v && (a - v) as f64 / *v as f64 <= 1e-5, "{a} for {v}");
        }
    }

    #[test]
    fn counters_are_indexed_as_the_library_s_buckets() {
        let layout = Histogram::<u64>::new_with_bounds(1, u64::MAX >> 1, SIGNIFICANT_DIGITS).unwrap();
        let mut value = 0u64;
        while value < u64::MAX >> 2 {
            let (low, high) = index_range(counts_index(value));
            assert_eq!((low, high), (layout.lowest_equivalent(value), layout.highest_equivalent(value)), "{value}");
            assert_eq!(counts_index(low), counts_index(value));
            assert_eq!(counts_index(high + 1), counts_index(value) + 1, "the next counter starts after {high}");
            value = value * 3 / 2 + 1;
        }
    }

    /// Selected ranks are those of the sorted values: a few ranks or every one, values spread
    /// over many buckets or crowded into one, above and below 0.
    #[test]
    fn selected_ranks_are_the_sorted_values_ranks() {
        let mut next = xorshift(0x51_7cc1_b727_220a);
        let spread: Vec<i64> = (0..30_000).map(|_| 262_144 + (next() % 20_000_000) as i64).collect();
        let crowded: Vec<i64> = (0..30_000).map(|_| 1_000_000 + (next() % 300) as i64).collect();
        let below: Vec<i64> = (0..30_000).map(|_| -1 - (next() % 5_000_000) as i64).collect();
        for (values, negative) in [(spread, false), (crowded, false), (below, true)] {
            let mut sorted = values.clone();
            sorted.sort();
            let n = values.len() as u64;
            let percentiles: Vec<u64> = [1, n / 2, n * 9 / 10, n * 99 / 100, n * 999 / 1000, n - 1, n].to_vec();
            for ranks in [percentiles, (1..=n).collect()] {
                let expected: Vec<i64> = ranks.iter().map(|r| sorted[*r as usize - 1]).collect();
                let lists = [&values[..5_000], &values[5_000..]];
                assert_eq!(select(&lists, |_| true, &ranks, negative), expected, "negative {negative}");
            }
        }
    }

    /// 32-bit values, whose members of up to 6 buckets are found by the buckets' ranges: the
    /// same ranks as the sorted values', for each number of ranks, values spread, crowded, up to
    /// 2^32 - 1 or at the buckets' edges, in lists of any length (blocks of 16 and a rest), some
    /// left out by `keep`.
    #[test]
    fn narrow_values_are_selected_by_their_buckets_ranges() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let spread: Vec<u32> = (0..20_003).map(|_| 262_144 + (next() % 20_000_000) as u32).collect();
        let crowded: Vec<u32> = (0..20_003).map(|_| 1_000_000 + (next() % 300) as u32).collect();
        let top: Vec<u32> = (0..20_003).map(|_| u32::MAX - (next() % 100_000_000) as u32).collect();
        // Only the lowest and highest values of buckets: every rank's value is at an edge.
        let edges: Vec<u32> = (stored_index(262_144)..=stored_index(u32::MAX as u64))
            .step_by(7)
            .flat_map(|index| {
                let (lowest, highest) = layout_range(index, STORED_HALF);
                [lowest, highest.min(u32::MAX as u64), highest.min(u32::MAX as u64)].map(|v| v as u32)
            })
            .collect();
        for values in [spread, crowded, top, edges] {
            for keep_all in [true, false] {
                let keep = |v: i64| keep_all || v % 3 != 0;
                let mut sorted: Vec<i64> = values.iter().map(|v| i64::from(*v)).filter(|v| keep(*v)).collect();
                sorted.sort();
                let n = sorted.len() as u64;
                let all = [1, n / 2, n * 9 / 10, n * 99 / 100, n * 999 / 1000, n - 1, n];
                for count in 1..=all.len() {
                    let ranks = &all[all.len() - count..];
                    let expected: Vec<i64> = ranks.iter().map(|r| sorted[*r as usize - 1]).collect();
                    let half = values.len() / 2 + 1;
                    let lists = [&values[..7], &values[7..half], &values[half..]];
                    assert_eq!(select(&lists, keep, ranks, false), expected, "{count} ranks, keep all {keep_all}");
                }
            }
        }
    }

    /// Values past a budget are counted a batch at a time ([`OUTSIDE_BATCH`] of those outside
    /// 0..262,144, [`BATCH`] of those noted in it): across batches, each is counted once, in
    /// the library's bucket, whether the values in 0..262,144 are counted at once or noted.
    #[test]
    fn values_counted_in_batches_are_each_counted_once_in_their_bucket() {
        let mut next = xorshift(0x2f6b_4e1d_90a3_c5e7);
        // About 2.6 batches of values outside 0..262,144 and from 0 up (a fourth of the magnitudes
        // are in it, a seventh of the values below 0).
        let values: Vec<i64> = (0..4 * OUTSIDE_BATCH + 3 * BATCH + 7)
            .map(|i| {
                let random = next();
                let magnitude = match random % 4 {
                    0 => (random >> 8) % 262_144,
                    _ => 262_144 + (random >> 8) % 200_000_000,
                } as i64;
                if i % 7 == 0 {
                    -1 - magnitude
                } else {
                    magnitude
                }
            })
            .collect();
        let library = |values: &mut dyn Iterator<Item = u64>| {
            let mut h = Histogram::<u64>::new_with_bounds(1, u64::MAX >> 1, SIGNIFICANT_DIGITS).unwrap();
            values.for_each(|v| h.record(v).unwrap());
            // (lowest value, highest value, count) of each bucket with any.
            let buckets: Vec<(u64, u64, u64)> = h
                .iter_recorded()
                .map(|b| (h.lowest_equivalent(b.value_iterated_to()), b.value_iterated_to(), b.count_at_value()))
                .collect();
            buckets
        };
        let positive = library(&mut values.iter().filter(|v| **v >= 0).map(|v| *v as u64));
        let negative = library(&mut values.iter().filter(|v| **v < 0).map(|v| v.unsigned_abs()));
        // A bucket's value is its end farthest from 0, below 0 its end nearest 0
        // ([`SignedHistogram::buckets`]).
        let mut expected: Vec<(i64, u64)> = negative.iter().rev().map(|(low, _, n)| (-(*low as i64), *n)).collect();
        expected.extend(positive.iter().map(|(_, high, n)| (*high as i64, *n)));
        for now in [true, false] {
            let mut h = SignedHistogram::default();
            match now {
                true => values.iter().for_each(|v| h.record::<true>(*v)),
                false => values.iter().for_each(|v| h.record::<false>(*v)),
            }
            assert_eq!(h.len(), values.len() as u64);
            assert_eq!(h.buckets(), expected, "counted at once: {now}");
        }
    }

    /// Values that come after the kept ones were counted by bucket are counted too.
    #[test]
    fn values_after_a_settle_rank_and_encode_as_the_others() {
        let mut next = xorshift(77);
        let values: Vec<i64> = (0..20_000).map(|_| 262_144 + (next() % 9_000_000) as i64).collect();
        let (mut settled, mut one) = (SignedHistogram::exact(), SignedHistogram::exact());
        values[..12_000].iter().for_each(|v| settled.record::<true>(*v));
        settled.settle();
        values[12_000..].iter().for_each(|v| settled.record::<true>(*v));
        values.iter().for_each(|v| one.record::<false>(*v));
        let mut sorted = values.clone();
        sorted.sort();
        let ranks: Vec<u64> = (1..=values.len() as u64).step_by(7).collect();
        let expected: Vec<i64> = ranks.iter().map(|r| sorted[*r as usize - 1]).collect();
        assert_eq!(settled.at_ranks(&ranks), expected);
        assert_eq!(settled.encode_clamped(), one.encode_clamped());
        settled.settle();
        assert_eq!(settled.at_ranks(&ranks), expected);
        assert_eq!(settled.encode_clamped(), one.encode_clamped());
    }

    #[test]
    fn stored_counters_are_indexed_as_the_library_s_buckets() {
        let layout = Histogram::<u64>::new_with_bounds(1, u64::MAX >> 1, STORED_DIGITS).unwrap();
        let mut value = 0u64;
        while value < u64::MAX >> 2 {
            let index = stored_index(value);
            assert_eq!(stored_lowest(index), layout.lowest_equivalent(value), "{value}");
            assert_eq!(stored_index(layout.highest_equivalent(value)), index, "{value}");
            assert_eq!(stored_index(layout.highest_equivalent(value) + 1), index + 1, "{value}");
            value = value * 3 / 2 + 1;
        }
    }

    #[test]
    fn stored_distributions_count_as_the_library_s_histogram_of_the_values() {
        // Values in every region: 0, the range counted one by one, several buckets above it,
        // repeats, and negative ones (stored as 0; their magnitudes apart).
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let mut values: Vec<i64> = (0..20_000)
            .map(|_| {
                let random = next();
                let scale = [10u64, 1_000, 262_144, 300_000, 5_000_000, 3_000_000_000][(random % 6) as usize];
                (random >> 8) as i64 % scale as i64 - i64::from(random % 50 == 0) * 40_000
            })
            .collect();
        values.extend([0, 0, 2_047, 2_048, 262_143, 262_144, u32::MAX as i64, 1 << 32, 1 << 40]);
        // (lowest value, count) of each bucket, and the total.
        let library = |values: &mut dyn Iterator<Item = u64>| {
            let mut h = Histogram::<u64>::new(STORED_DIGITS).unwrap();
            values.for_each(|v| h.record(v).unwrap());
            (counts(&h), h.len())
        };
        let ours = |text: &str| {
            let h = decode(text).unwrap();
            assert_eq!(h.sigfig(), STORED_DIGITS);
            (counts(&h), h.len())
        };
        for exact in [true, false] {
            let mut h = if exact { SignedHistogram::exact() } else { SignedHistogram::default() };
            values.iter().for_each(|v| h.record::<true>(*v));
            // Counted at 5 digits or kept, each value lands in its own bucket of 3.
            let clamped = library(&mut values.iter().map(|v| (*v).max(0) as u64));
            assert_eq!(ours(&h.encode_clamped()), clamped, "exact: {exact}");
            let magnitudes = library(&mut values.iter().filter(|v| **v < 0).map(|v| v.unsigned_abs()));
            assert_eq!(ours(&h.encode_negatives().unwrap()), magnitudes, "exact: {exact}");
            // As the library's deflate serialiser frames it, so any V2 reader reads it.
            let bytes = base64::engine::general_purpose::STANDARD.decode(h.encode_clamped()).unwrap();
            assert_eq!(bytes[..4], 0x1c84_9314u32.to_be_bytes(), "the V2 deflate cookie");
        }
        assert_eq!(ours(&SignedHistogram::exact().encode_clamped()), (vec![], 0));
        assert!(SignedHistogram::exact().encode_negatives().is_none());
    }

    #[test]
    fn signed_histograms_rank_negative_values_first() {
        let mut h = SignedHistogram::default();
        for v in [-300, -5, 0, 7, 7, 1_000_000_007] {
            h.record::<true>(v);
        }
        assert_eq!(h.len(), 6);
        assert_eq!(h.at_ranks(&[1, 2, 3, 4, 5]), vec![-300, -5, 0, 7, 7]);
        // The same counts, bucket for bucket, as one HdrHistogram of the values >= 0.
        let reference = of(&[0, 7, 7, 1_000_000_007]);
        let ours = h.clamped();
        assert_eq!(ours.len(), 6);
        for v in [7, 1_000_000_007] {
            assert_eq!(ours.count_at(v), reference.count_at(v));
        }
        let top = h.at_ranks(&[6])[0];
        assert!(top >= 1_000_000_007 && (top - 1_000_000_007) as f64 / 1e9 < 1e-5, "{top}");
        assert_eq!(h.clamped().count_at(0), 3);
    }

    #[test]
    fn an_absorbed_histogram_is_as_if_its_values_were_recorded_here() {
        let (a, b) = ([300_000, -40, 5, 1_000_000_007, 5], [-1, 262_144, 7, 300_000, 0, -40_000_000]);
        let all: Vec<i64> = a.iter().chain(&b).copied().collect();
        let filled = |values: &[i64], exact: bool| {
            let mut h = if exact { SignedHistogram::exact() } else { SignedHistogram::default() };
            values.iter().for_each(|v| h.record::<true>(*v));
            h
        };
        // Both exact; and an exact one absorbing one that is not, which makes it approximate.
        for (a_exact, b_exact) in [(true, true), (true, false), (false, true), (false, false)] {
            let mut merged = filled(&a, a_exact);
            merged.absorb(filled(&b, b_exact));
            let one = filled(&all, a_exact && b_exact);
            assert_eq!(merged.len(), one.len());
            assert_eq!(merged.buckets(), one.buckets(), "{a_exact} {b_exact}");
            assert_eq!(merged.encode_clamped(), one.encode_clamped());
            assert_eq!(merged.encode_negatives(), one.encode_negatives());
            let ranks: Vec<u64> = (1..=all.len() as u64).collect();
            assert_eq!(merged.at_ranks(&ranks), one.at_ranks(&ranks), "{a_exact} {b_exact}");
        }
    }

    /// A histogram that fills a vector an ended one left holds its own values only.
    #[test]
    fn spare_vectors_hold_nothing_of_the_rows_that_left_them() {
        let mut random = xorshift(11);
        for round in 0..4u64 {
            let values: Vec<i64> =
                (0..5_000 + round * 3_000).map(|_| 262_144 + (random() % 1_000_000) as i64).collect();
            let mut h = SignedHistogram::exact();
            values.iter().for_each(|v| h.record::<true>(*v));
            let mut sorted = values.clone();
            sorted.sort();
            let ranks: Vec<u64> = (1..=values.len() as u64).collect();
            assert_eq!(h.at_ranks(&ranks), sorted, "round {round}");
            assert_eq!(h.len(), values.len() as u64);
        }
        let spare = values::spare_lists();
        assert!(spare.iter().all(|capacity| *capacity >= values::SPARE_EACH_AT_LEAST), "{spare:?}");
        assert!(spare.iter().sum::<usize>() <= values::SPARE_AT_MOST);
        assert!(spare.is_sorted());
    }

    /// Values in 0..262,144 counted directly: asked before and after a settle, cloned, absorbed
    /// and drained before a counter could overflow, they rank as the sorted values, and the
    /// arrays the histograms leave behind are all zeros for the next rows.
    #[test]
    fn directly_counted_values_rank_as_the_sorted_ones() {
        let mut random = xorshift(5);
        let values: Vec<i64> = (0..20_000).map(|_| (random() % 262_144) as i64).collect();
        let (mut one, mut half) = (SignedHistogram::exact(), SignedHistogram::exact());
        values.iter().for_each(|v| one.record::<true>(*v));
        values[..10_000].iter().for_each(|v| half.record::<true>(*v));
        let mut other = SignedHistogram::default();
        values[10_000..].iter().for_each(|v| other.record::<false>(*v));
        let copy = half.clone();
        half.absorb(other);
        let mut sorted = values.clone();
        sorted.sort();
        let ranks: Vec<u64> = (1..=values.len() as u64).step_by(7).collect();
        let want: Vec<i64> = ranks.iter().map(|r| sorted[*r as usize - 1]).collect();
        assert_eq!(one.at_ranks(&ranks), want, "before a settle");
        one.settle();
        assert_eq!(one.at_ranks(&ranks), want, "after");
        assert_eq!(half.at_ranks(&ranks), want, "absorbed");
        assert_eq!((copy.len(), one.len(), half.len()), (10_000, 20_000, 20_000));
        let mut counted = Vec::new();
        copy.for_each_exact(|value, count| counted.extend(std::iter::repeat_n(value, count as usize)));
        let mut first_half = values[..10_000].to_vec();
        first_half.sort();
        assert_eq!(counted, first_half, "a clone counts what its original had");
        // Counters that could overflow: at the carry that makes them so, the counts move to the
        // paged counters, whole.
        let mut full = SignedHistogram::default();
        full.exact.carried = vec![3; MAX_CARRIED - 1];
        full.record::<true>(3);
        assert_eq!(full.len(), 256 * (MAX_CARRIED as u64 - 1) + 1, "counted, not drained");
        (0..255).for_each(|_| full.record::<true>(3));
        assert!(full.exact.carried.is_empty() && full.exact.is_empty(), "drained at the carry");
        assert_eq!(full.len(), 256 * MAX_CARRIED as u64);
        assert_eq!(full.positive.get(3), 256 * MAX_CARRIED as u64);
        full.record::<true>(3);
        assert_eq!((full.len(), full.exact.len()), (256 * MAX_CARRIED as u64 + 1, 1), "counted again");
        // Drained, the counters are all 0 again.
        let mut drained = SignedHistogram::default();
        values.iter().for_each(|v| drained.record::<true>(*v));
        drained.settle();
        assert!(drained.exact.counts.as_ref().is_some_and(|counts| counts.iter().all(|c| *c == 0)));
        assert_eq!(drained.at_ranks(&ranks), want, "from the paged counters");
    }

    /// Byte counters that wrap (once, many times, to exactly 0, on pages of their own) count as
    /// the paged counters do: the same counts, sums and ranks, in a clone and after a settle.
    #[test]
    fn directly_counted_values_that_wrap_their_bytes_count_in_full() {
        let repeats = [(7i64, 1_000u64), (3 * 4096 + 5, 256), (262_143, 513), (100, 255), (4096, 70_000)];
        let mut values: Vec<i64> =
            repeats.iter().flat_map(|(value, times)| std::iter::repeat_n(*value, *times as usize)).collect();
        let mut random = xorshift(23);
        // In a shuffled order, as a fold brings them.
        for i in (1..values.len()).rev() {
            values.swap(i, (random() % (i as u64 + 1)) as usize);
        }
        let (mut direct, mut paged) = (SignedHistogram::exact(), SignedHistogram::exact());
        direct.set_pivot(150);
        paged.set_pivot(150);
        values.iter().for_each(|v| direct.record::<true>(*v));
        values.iter().for_each(|v| paged.record::<false>(*v));
        assert!(!direct.exact.carried.is_empty(), "some counters wrapped");
        let copy = direct.clone();
        let mut want = repeats.to_vec();
        want.sort();
        for histogram in [&copy, &direct] {
            let mut counted = Vec::new();
            histogram.for_each_exact(|value, count| counted.push((value, count)));
            assert_eq!(counted, want);
        }
        let ranks: Vec<u64> = (1..=values.len() as u64).step_by(97).collect();
        assert_eq!(direct.at_ranks(&ranks), paged.at_ranks(&ranks));
        assert_eq!(direct.exact_sums(), paged.exact_sums());
        direct.settle();
        assert!(direct.exact.carried.is_empty() && direct.exact.is_empty(), "drained whole");
        assert_eq!(direct.at_ranks(&ranks), paged.at_ranks(&ranks), "after a settle");
    }

    /// The sums of a flush's indices, taken a block at a time without a branch, are those of
    /// adding each value below 262,144 in turn, on both sides of the pivot; with none, nothing.
    #[test]
    fn indices_sum_as_their_values_one_by_one() {
        let mut random = xorshift(17);
        let indices: Vec<u32> = (0..70_000).map(|_| (random() % 400_000) as u32).collect();
        for pivot in [0, 100_000, 1 << 40] {
            let (mut blocks, mut each) =
                (ExactSums { pivot, ..Default::default() }, ExactSums { pivot, ..Default::default() });
            blocks.add_indices(&indices);
            indices.iter().filter(|i| u64::from(**i) < EXACT_BELOW).for_each(|i| each.add(u64::from(*i), 1));
            assert_eq!(blocks, each, "pivot {pivot}");
            assert!(each.count > 0 && (pivot == 0) == each.below_max.is_none());
        }
        let mut none = ExactSums::default();
        none.add_indices(&[300_000, 262_144]);
        assert_eq!(none, ExactSums::default());
    }

    /// Exact histograms absorbed whole keep their values in runs, each sorted once: ranks across
    /// the runs, and the stored encodings, are those of one histogram of every value, past the
    /// number of runs that are joined into one too.
    #[test]
    fn absorbed_runs_rank_and_encode_as_one_sorted_list() {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
        for parts in [2, MAX_RUNS, MAX_RUNS + 3] {
            let mut all = Vec::new();
            let mut merged = SignedHistogram::exact();
            for part in 0..parts {
                let mut h = SignedHistogram::exact();
                for _ in 0..2_000 + part * 100 {
                    // Repeats across runs, both signs, the counted range and far beyond it.
                    let v = match next() % 6 {
                        0 => -((next() % 1_000) as i64) * 1_000,
                        1 => (next() % 200_000) as i64,
                        2 => 300_000 + (next() % 50) as i64,
                        3 => (next() % 20_000_000) as i64,
                        // Around 2^32, where values leave 32 bits.
                        4 => u32::MAX as i64 - 2 + (next() % 5) as i64,
                        _ => [i64::MIN, i64::MAX, -1][(next() % 3) as usize],
                    };
                    h.record::<true>(v);
                    all.push(v);
                }
                h.settle();
                merged.absorb(h);
            }
            assert!(merged.outliers.as_ref().unwrap().runs.len() <= MAX_RUNS);
            let mut one = SignedHistogram::exact();
            all.iter().for_each(|v| one.record::<true>(*v));
            all.sort();
            let ranks: Vec<u64> = (1..=all.len() as u64).collect();
            assert_eq!(merged.at_ranks(&ranks), all, "{parts} parts");
            assert_eq!(merged.encode_clamped(), one.encode_clamped(), "{parts} parts");
            assert_eq!(merged.encode_negatives(), one.encode_negatives(), "{parts} parts");
        }
    }

    /// Counters turn 64-bit before a 32-bit one could overflow, and lose nothing.
    #[test]
    fn counters_widen_before_32_bits_overflow() {
        let mut counters = Counters::default();
        counters.add(5, u64::from(u32::MAX) - 1);
        counters.add_by_page(&[7]);
        assert!(matches!(counters.pages, Pages::Narrow(_)));
        counters.add_by_page(&[5, 5]);
        assert!(matches!(counters.pages, Pages::Wide(_)));
        counters.add(PAGE + 1, 1 << 40);
        assert_eq!(counters.nonzero(), vec![(5, u64::from(u32::MAX) + 1), (7, 1), (PAGE + 1, 1 << 40)]);
        assert_eq!(counters.total(), u64::from(u32::MAX) + 2 + (1 << 40));
        assert_eq!(counters.index_at(0..2, false, u64::from(u32::MAX) + 2), 7);
        let mut narrow = Counters::default();
        narrow.add(5, 1);
        narrow.absorb(counters.clone());
        assert_eq!(narrow.nonzero().first().copied(), Some((5, u64::from(u32::MAX) + 2)));
        counters.absorb(Counters::default());
        assert_eq!(counters.total(), u64::from(u32::MAX) + 2 + (1 << 40));
    }

    /// Ranks found by skipping pages are those read from the list of every bucket, for exact and
    /// approximate histograms of values on both sides of 0, narrow and wide (over many pages).
    #[test]
    fn ranks_skip_pages_and_land_where_the_bucket_list_does() {
        let mut next = xorshift(0x2545_F491_4F6C_DD1D);
        for (exact, spread, negative_share) in [
            (true, 1_000, 0),
            (true, 50_000_000, 10),
            (false, 300_000, 3),
            (false, 20_000_000, 0),
            (false, 1 << 40, 50),
        ] {
            let mut h = if exact { SignedHistogram::exact() } else { SignedHistogram::default() };
            for _ in 0..30_000 {
                let magnitude = (next() % spread) as i64;
                h.record::<true>(if next() % 100 < negative_share { -magnitude } else { magnitude });
            }
            h.settle();
            let mut seen = 0;
            let reference: Vec<(u64, i64)> = h
                .buckets()
                .into_iter()
                .flat_map(|(value, count)| {
                    seen += count;
                    // The first and last rank of each bucket.
                    [(seen - count + 1, value), (seen, value)]
                })
                .collect();
            let ranks: Vec<u64> = reference.iter().map(|(rank, _)| *rank).collect();
            let values: Vec<i64> = reference.iter().map(|(_, value)| *value).collect();
            assert_eq!(h.at_ranks(&ranks), values, "exact {exact}, spread {spread}");
            assert_eq!(h.at_ranks(&[seen, seen + 1]), vec![*values.last().unwrap()], "past the last rank: nothing");
        }
    }

    #[test]
    fn cdf_ends_at_one() {
        let h = of(&[1, 2, 2, 3]);
        assert_eq!(cdf(&h), vec![(1, 0.25), (2, 0.75), (3, 1.0)]);
    }
}
