//! A row's statistics, folded in as its worker's samples arrive, in bounded memory.
//!
//! Count, mean, standard deviation, min, max and the deviation columns are always exact
//! (integer sums, see `Moments`). Percentiles are exact while the row's measured samples fit its
//! budget (`--exact-samples`): each metric's values from 0 to 262 µs are counted one by one,
//! the others kept, and the percentiles are the nearest ranks of the values, as `Summary::of`'s
//! (each selected among the kept values at the end). Past the budget the kept values are traded for HdrHistograms (5
//! significant digits), and the row says so (`basis: histogram`).

use crate::histogram::{ExactSums, SignedHistogram, EXACT_BELOW};
use taskmeter_memory::{Lent, UNIT_TABLES};
use taskmeter_model::run::{Basis, Histograms, Metric, PerMetric, Statistics, UnitSpread};
use taskmeter_protocol::SampleView;
use taskmeter_stats::{nearest_rank, Moments, Summary, PERCENTILES};

/// The measured samples a row keeps for exact percentiles unless told otherwise
/// (`--exact-samples`). A value kept costs 4 bytes (8 from 4.3 s) and less of taskmeter's CPU
/// than one counted at 5 digits past the budget, with the kept ones traded for counters there
/// (issue 58: from 1 million to 4, taskmeter took a sixth less CPU in the 10,000-unit volume run
/// and a tenth less in the `lost` run, BENCHMARKS.md); at 4 metrics a sample, a row keeps at most
/// 64 MiB.
pub const DEFAULT_EXACT_SAMPLES: u64 = 4_000_000;
const _: () = assert!(
    crate::values::SPARE_AT_MOST as u64 >= DEFAULT_EXACT_SAMPLES * taskmeter_model::run::METRICS.len() as u64,
    "the vectors held for the next rows hold a row's values at the default budget"
);

/// One metric of a set of samples. Its values in 0..262,144 (a lateness, sleep or busy time
/// under 262 µs: nearly all of a fast row's) are only counted, each at its own counter, and their
/// moments (and deviations) are made of the counters when asked; the others are added to
/// moments as they come. Every moment is rebased on the set's first value at the end (the
/// row's first, in the order the samples came, whatever their classes), so each
/// figure is the one adding the values one by one gives, bit for bit
/// (`tests/recorded_fold.rs`): a value costs a counter's increment (issue 58).
#[derive(Default)]
struct MetricStats {
    /// The first value (its sample's place among the row's measured ones) and its deviation.
    first: Option<(u64, i64, i64)>,
    /// The values from 262,144 up, and those below 0.
    above: Moments,
    below: Moments,
    /// |value - reference| added one by one: of the values not counted, and of every value
    /// once the counted ones' reference varied (not kept with a reference of 0).
    deviations: Moments,
    reference: Reference,
    /// Exact while the row is within its budget. (The deviations have their moments only: no
    /// table or verdict reads their percentiles, and their two distributions were a third of
    /// each sample's fold.)
    histogram: SignedHistogram,
}

/// What the counted values were compared with, for their deviations.
#[derive(Clone, Copy, Default, PartialEq)]
enum Reference {
    /// 0, always (lateness, busy): a deviation is the value's magnitude.
    Zero,
    /// No value counted yet.
    #[default]
    None,
    /// The same for every counted value: their deviations are made of the counters.
    Same(i64),
    /// Not the same: the counted values' deviations are in `deviations`.
    Varied,
}

/// |value - reference|, exact for any two values.
#[inline(always)]
fn deviation(value: i64, reference: i64) -> i64 {
    (value as i128 - reference as i128).unsigned_abs() as i64
}

impl MetricStats {
    /// `reference_zero`: every value is compared with 0 (lateness, busy).
    fn new(reference_zero: bool) -> MetricStats {
        let reference = if reference_zero { Reference::Zero } else { Reference::None };
        MetricStats { histogram: SignedHistogram::exact(), reference, ..Default::default() }
    }

    /// `order`: the sample's place among the row's measured samples; `NOW`: see
    /// [`SignedHistogram::record_exact`].
    #[inline(always)]
    fn add<const NOW: bool>(&mut self, value: i64, reference: i64, order: u64) {
        if self.first.is_none() {
            self.first = Some((order, value, deviation(value, reference)));
        }
        if (value as u64) < EXACT_BELOW {
            match self.reference {
                Reference::Zero => {}
                Reference::Same(same) if same == reference => {}
                _ => self.count_deviation(value, reference),
            }
            self.histogram.record_exact::<NOW>(value as usize);
            return;
        }
        self.add_outside(value, reference);
    }

    /// The deviation of a value about to be counted, whose reference is not the counted ones'.
    #[inline(never)]
    fn count_deviation(&mut self, value: i64, reference: i64) {
        match self.reference {
            Reference::None => {
                self.reference = Reference::Same(reference);
                self.histogram.set_pivot(reference);
            }
            Reference::Same(_) => {
                self.vary();
                self.deviations.add(deviation(value, reference));
            }
            Reference::Varied => self.deviations.add(deviation(value, reference)),
            Reference::Zero => unreachable!("a reference of 0 never varies"),
        }
    }

    /// A value outside the counted range.
    #[inline(never)]
    fn add_outside(&mut self, value: i64, reference: i64) {
        match value < 0 {
            true => self.below.add(value),
            false => self.above.add(value),
        }
        self.histogram.record_outside(value);
        if self.reference != Reference::Zero {
            self.deviations.add(deviation(value, reference));
        }
    }

    /// The counted values' deviations from their common reference go to `deviations`, which
    /// every later one's joins.
    fn vary(&mut self) {
        if let Reference::Same(_) = self.reference {
            self.deviations.merge(&counted(&self.histogram.exact_sums(), true).1);
        }
        if self.reference != Reference::Zero {
            self.reference = Reference::Varied;
        }
    }

    /// Adds another set's values, as if each had been added here.
    fn absorb(&mut self, mut other: MetricStats) {
        match (self.reference, other.reference) {
            (mine, theirs) if mine == theirs => {}
            (Reference::None, theirs) => self.reference = theirs,
            (_, Reference::None) => {}
            _ => {
                self.vary();
                other.vary();
            }
        }
        self.first = match (self.first, other.first) {
            (Some(mine), Some(theirs)) => Some(mine.min(theirs)),
            (mine, theirs) => mine.or(theirs),
        };
        self.above.merge(&other.above);
        self.below.merge(&other.below);
        self.deviations.merge(&other.deviations);
        self.histogram.absorb(other.histogram);
    }

    /// Trades the values kept exactly for histogram buckets.
    fn make_approximate(&mut self) {
        self.histogram.make_approximate();
    }

    /// Counts what is recorded (once: every question after reads the counters as they are).
    fn settle(&mut self) {
        self.histogram.settle();
    }

    /// The moments of the values and of their deviations, each rebased on the first (settled).
    fn moments(&self) -> (Moments, Moments) {
        let Some((_, first, first_deviation)) = self.first else { return Default::default() };
        let same = matches!(self.reference, Reference::Zero | Reference::Same(_));
        let (mut values, mut deviations) = counted(&self.histogram.settled_sums(), same);
        values.merge(&self.above);
        values.merge(&self.below);
        match self.reference {
            Reference::Zero => {
                deviations.merge(&self.above);
                deviations.merge(&self.below.negated());
            }
            _ => deviations.merge(&self.deviations),
        }
        (values.rebased(first), deviations.rebased(first_deviation))
    }

    fn summary(&self) -> Summary {
        let (moments, deviations) = self.moments();
        let h = &self.histogram;
        let percentiles = (!h.is_empty()).then(|| {
            let ranks = PERCENTILES.map(|(_, q)| nearest_rank(q, h.len() as usize) as u64);
            let at = h.at_ranks(&ranks);
            // Exact, or within the bucket's precision but never outside what was measured.
            std::array::from_fn(|i| at[i].clamp(moments.min, moments.max))
        });
        Summary::from_parts(&moments, percentiles, &deviations)
    }

    /// How early the values below 0 were (their magnitudes), encoded; None without any.
    fn early(&self) -> Option<String> {
        self.histogram.encode_negatives()
    }

    /// The distribution as run.json stores it.
    fn encoded(&self) -> String {
        self.histogram.encode_clamped()
    }
}

/// The moments of the counted values (in 0..262,144) and, with `deviations`, of their
/// deviations from the pivot of their sums (their common reference): each deviation's sum is
/// that of `pivot - value` below it and `value - pivot` from it; its square's, expanded.
fn counted(sums: &ExactSums, deviations: bool) -> (Moments, Moments) {
    let (Some(min), Some(max)) = (sums.min, sums.max) else { return Default::default() };
    let values = Moments::from_sums(sums.count, sums.sum as i128, sums.squares as i128, min, max);
    if !deviations {
        return (values, Moments::default());
    }
    let (n, below, sum, below_sum, r) =
        (sums.count as i128, sums.below as i128, sums.sum as i128, sums.below_sum as i128, sums.pivot as i128);
    let deviation_sum = (sum - below_sum - r * (n - below)) + (r * below - below_sum);
    // Exact modulo 2^128 (r * r may pass i128 on the way; the result does not).
    let deviation_squares = (sums.squares as i128)
        .wrapping_sub(2i128.wrapping_mul(r).wrapping_mul(sum))
        .wrapping_add(n.wrapping_mul(r).wrapping_mul(r));
    let nearest = [sums.above_min.map(|v| v as i128 - r), sums.below_max.map(|v| r - v as i128)];
    let farthest = [(max as i128 >= r).then(|| max as i128 - r), ((min as i128) < r).then(|| r - min as i128)];
    let deviations = Moments::from_sums(
        sums.count,
        deviation_sum,
        deviation_squares,
        nearest.into_iter().flatten().min().expect("a value") as i64,
        farthest.into_iter().flatten().max().expect("a value") as i64,
    );
    (values, deviations)
}

/// Every metric of a set of samples (a row, or one priority class of it).
struct MetricSet {
    metrics: PerMetric<MetricStats>,
}

impl MetricSet {
    fn new() -> MetricSet {
        // Lateness and busy are compared with 0, actual and full with the expected sleep.
        MetricSet { metrics: PerMetric::from_fn(|m| MetricStats::new(!matches!(m, Metric::Actual | Metric::Full))) }
    }

    /// `order`: the sample's place among the row's measured samples.
    #[inline(always)]
    fn add<const NOW: bool>(&mut self, view: &SampleView, order: u64) {
        let s = &view.sample;
        let diff = |a: u64, b: u64| a as i64 - b as i64;
        let expected = view.expected_ns as i64;
        let m = &mut self.metrics;
        m.lateness.add::<NOW>(diff(s.wake_ns, s.intended_ns), 0, order);
        m.actual.add::<NOW>(diff(s.wake_ns, s.start_ns), expected, order);
        if let Some(previous) = view.previous_wake_ns() {
            m.full.add::<NOW>(diff(s.wake_ns, previous), expected, order);
        }
        m.busy.add::<NOW>(diff(s.busy_end_ns, s.start_ns), 0, order);
    }

    fn absorb(&mut self, other: MetricSet) {
        let (m, o) = (&mut self.metrics, other.metrics);
        for (mine, theirs) in
            [(&mut m.lateness, o.lateness), (&mut m.actual, o.actual), (&mut m.full, o.full), (&mut m.busy, o.busy)]
        {
            mine.absorb(theirs);
        }
    }

    fn make_approximate(&mut self) {
        let m = &mut self.metrics;
        for stats in [&mut m.lateness, &mut m.actual, &mut m.full, &mut m.busy] {
            stats.make_approximate();
        }
    }

    fn settle(&mut self) {
        let m = &mut self.metrics;
        for stats in [&mut m.lateness, &mut m.actual, &mut m.full, &mut m.busy] {
            stats.settle();
        }
    }

    /// The summaries; every value is counted.
    fn statistics(&self) -> Statistics {
        PerMetric::from_fn(|metric| self.metrics.get(metric).summary())
    }
}

/// Counts of a row's samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleCounts {
    pub measured: u64,
    pub warmup: u64,
    pub missed: u64,
    pub missed_warmup: u64,
    /// Measured samples that woke before their intended time.
    pub early: u64,
    /// Measured samples after lost ones (they have no `full`).
    pub after_gap: u64,
    /// Measured samples left out: their iteration began right after their unit wrote its full
    /// ring itself (protocol `F` frame), which may have delayed it.
    pub left_out: u64,
}

/// What the live view shows of a running row: its measured samples so far and their lateness.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Live {
    pub samples: u64,
    pub p50: Option<i64>,
    pub p99: Option<i64>,
    pub max: Option<i64>,
}

/// What a row to come may keep, for [`prepare_kept_values`].
#[derive(Clone, Copy, Debug)]
pub struct RowToCome {
    pub classes: u32,
    /// The samples it measures if every unit wakes on time (`Plan::measured_on_time`).
    pub measured_on_time: u64,
    /// Its shortest expected sleep.
    pub shortest_sleep_ns: u64,
}

/// The metrics whose values a row of sleeps of 262 µs or more keeps: actual and full always, and
/// lateness once the row runs late (busy work is rarely that long).
const KEPT_METRICS: u64 = 3;

/// Writes, before the first worker starts, the memory that the rows run at once will keep their
/// values in ([`vectors_to_prepare`]), so that none of it is faulted in while workers measure.
/// Rows after the first also find the vectors that the rows before them left. The bytes written.
pub fn prepare_kept_values(batches: impl IntoIterator<Item = Vec<RowToCome>>, budget: u64) -> usize {
    crate::values::prepare(vectors_to_prepare(batches, budget))
}

/// The vectors of values (their capacities) that the batch of rows that may keep the most keeps
/// at most: for each row of sleeps of 262 µs or more, one of `measured_on_time / classes` values
/// (within the budget) for each kept metric of each class. (Within 64 MiB, the largest first,
/// once written.)
pub fn vectors_to_prepare(batches: impl IntoIterator<Item = Vec<RowToCome>>, budget: u64) -> Vec<usize> {
    let vectors = |rows: &[RowToCome]| -> Vec<usize> {
        rows.iter()
            .filter(|row| row.shortest_sleep_ns >= EXACT_BELOW)
            .flat_map(|row| {
                let classes = u64::from(row.classes.max(1));
                let each = row.measured_on_time.min(budget).div_ceil(classes);
                std::iter::repeat_n(usize::try_from(each).unwrap_or(usize::MAX), (KEPT_METRICS * classes) as usize)
            })
            .collect()
    };
    batches
        .into_iter()
        .map(|rows| vectors(&rows))
        .max_by_key(|sizes| sizes.iter().fold(0usize, |sum, size| sum.saturating_add(*size)))
        .unwrap_or_default()
}

/// The bytes of the tables of one entry per unit a row of `units` units fills (its per-unit
/// sums), to prepare in `taskmeter_memory::UNIT_TABLES` before the first worker starts.
pub fn unit_table_bytes(units: u32) -> usize {
    units as usize * size_of::<(u64, i128)>()
}

/// A row's running statistics.
pub struct RowStats {
    /// The row's samples: with classes, those of no class, and the classes' at the end.
    all: MetricSet,
    /// One per priority class when there are two. Each sample is folded into its class alone
    /// and the classes make the row at the end: folding it into both cost the harness as much
    /// again (issue 28).
    classes: Vec<MetricSet>,
    counts: SampleCounts,
    /// Measured samples this row may keep for exact percentiles.
    budget: u64,
    basis: Basis,
    /// For the live view only (None without one): every measured lateness, in the histogram the
    /// statistics use past their budget (exact below 262 us, 5 significant digits above), so the
    /// live line ends where the table starts.
    live: Option<SignedHistogram>,
    live_max: Option<i64>,
    /// Each unit's measured samples and their lateness sum (index: unit - 1): the statistics
    /// pool samples, so a unit that woke more often weighs more; this is each unit's own.
    /// In a spare table of `taskmeter_memory::UNIT_TABLES` (see [`RowStats::for_units`]).
    per_unit: Lent<(u64, i128)>,
    /// When the last batch was folded.
    last_batch: Option<std::time::Instant>,
}

/// A batch counts its values in 0..262,144 at once when it is of at least this many samples and
/// comes within [`BACK_TO_BACK`] of the one before: a reader kept busy by a fast worker hands on
/// a thousand at a time, back to back, and the counters stay in the caches. Otherwise (a flush
/// of a few hundred samples every 200 ms, the caches the workers' between) it notes them for a
/// count by page (see [`SignedHistogram::record_exact`]): counted at once, each value missed
/// the caches, and a default run's fold cost 3 to 4 times as much (issue 58).
const COUNT_AT_ONCE_FROM: usize = 1024;
const BACK_TO_BACK: std::time::Duration = std::time::Duration::from_millis(1);

/// What a row's statistics came to.
pub struct Finished {
    pub statistics: Statistics,
    /// The histograms hold lateness below 0 as 0: how early those wake-ups were is kept here.
    pub lateness_early: Option<String>,
    pub histograms: Histograms,
    /// Per class (empty with one class).
    pub classes: Vec<Statistics>,
    pub counts: SampleCounts,
    pub basis: Basis,
    pub unit_spread: Option<UnitSpread>,
}

impl RowStats {
    /// `live`: whether anyone will ask for [`RowStats::live`] while samples arrive.
    pub fn new(classes: u32, budget: u64, live: bool) -> RowStats {
        RowStats {
            all: MetricSet::new(),
            classes: if classes > 1 { (0..classes).map(|_| MetricSet::new()).collect() } else { Vec::new() },
            counts: SampleCounts::default(),
            budget,
            basis: Basis::Exact,
            live: live.then(SignedHistogram::default),
            live_max: None,
            per_unit: Lent::none(&UNIT_TABLES),
            last_batch: None,
        }
    }

    /// The row of a worker of `units` units: its table of per-unit sums is a spare one, written
    /// before the first worker started ([`unit_table_bytes`]), where there is one.
    pub fn for_units(mut self, units: u32) -> RowStats {
        self.per_unit = Lent::at_least(&UNIT_TABLES, units as usize);
        self
    }

    /// Folds in the checked samples of one `S` frame (or of a reader's batch of them).
    pub fn add(&mut self, views: &[SampleView]) {
        let back_to_back = self.last_batch.is_some_and(|last| last.elapsed() < BACK_TO_BACK);
        match views.len() >= COUNT_AT_ONCE_FROM && back_to_back {
            true => self.fold::<true>(views),
            false => self.fold::<false>(views),
        }
        self.last_batch = Some(std::time::Instant::now());
    }

    fn fold<const NOW: bool>(&mut self, views: &[SampleView]) {
        for view in views {
            let s = &view.sample;
            if !view.measured() {
                self.counts.warmup += 1;
                self.counts.missed_warmup += s.missed;
                continue;
            }
            if view.after_flush() {
                self.counts.left_out += 1;
                continue;
            }
            let unit = view.unit() as usize - 1;
            if unit >= self.per_unit.len() {
                self.per_unit.resize(unit + 1, (0, 0));
            }
            let own = &mut self.per_unit[unit];
            (own.0, own.1) = (own.0 + 1, own.1 + (s.wake_ns as i128 - s.intended_ns as i128));
            let c = &mut self.counts;
            c.measured += 1;
            c.missed += s.missed;
            c.early += u64::from(s.wake_ns < s.intended_ns);
            c.after_gap += u64::from(view.previous_wake_ns().is_none());
            match self.classes.get_mut(view.class() as usize) {
                Some(class) => class.add::<NOW>(view, c.measured),
                None => self.all.add::<NOW>(view, c.measured),
            }
            if let Some(live) = self.live.as_mut() {
                let lateness = s.wake_ns as i64 - s.intended_ns as i64;
                live.record::<NOW>(lateness);
                self.live_max = self.live_max.max(Some(lateness));
            }
        }
        if self.basis == Basis::Exact && self.counts.measured > self.budget {
            self.basis = Basis::Histogram;
            self.all.make_approximate();
            self.classes.iter_mut().for_each(MetricSet::make_approximate);
        }
    }

    /// The measured samples so far and their lateness p50, p99 (nearest rank, as the table's)
    /// and max.
    pub fn live(&mut self) -> Live {
        let samples = self.counts.measured;
        let (p50, p99) = match self.live.as_mut().filter(|h| !h.is_empty()) {
            Some(live) => {
                live.settle();
                let n = live.len() as usize;
                // Never beyond what was measured, as the table's (the max is exact).
                let most = self.live_max.unwrap_or(i64::MAX);
                match live.at_ranks(&[nearest_rank(50_000, n) as u64, nearest_rank(99_000, n) as u64])[..] {
                    [p50, p99] => (Some(p50.min(most)), Some(p99.min(most))),
                    _ => (None, None),
                }
            }
            None => (None, None),
        };
        Live { samples, p50, p99, max: self.live_max }
    }

    pub fn finish(mut self) -> Finished {
        self.classes.iter_mut().for_each(MetricSet::settle);
        let classes = self.classes.iter().map(MetricSet::statistics).collect();
        // The row takes the classes and any samples of no class (none: the checker gives every
        // sample its unit's class); its first values are the first to come, whatever the class.
        for set in std::mem::take(&mut self.classes) {
            self.all.absorb(set);
        }
        self.all.settle();
        let m = &self.all.metrics;
        let histograms = PerMetric::from_fn(|metric| m.get(metric).encoded());
        Finished {
            lateness_early: m.lateness.early(),
            statistics: self.all.statistics(),
            histograms,
            classes,
            unit_spread: UnitSpread::of(&self.per_unit[..]),
            counts: self.counts,
            basis: self.basis,
        }
    }
}

/// A metric's statistics over the list of the measured samples' values ([`Summary::of`]), the
/// fold bypassed: what a row's fold must give, for tests and tools to compare it with.
pub fn summary_of_list<'a>(views: impl Iterator<Item = &'a SampleView>, metric: Metric) -> Summary {
    let (values, references): (Vec<i64>, Vec<i64>) = views
        .filter(|v| v.measured() && !v.after_flush())
        .filter_map(|v| {
            let (s, expected) = (&v.sample, v.expected_ns as i64);
            Some(match metric {
                Metric::Lateness => (s.wake_ns as i64 - s.intended_ns as i64, 0),
                Metric::Actual => (s.wake_ns as i64 - s.start_ns as i64, expected),
                Metric::Full => (s.wake_ns as i64 - v.previous_wake_ns()? as i64, expected),
                Metric::Busy => (s.busy_end_ns as i64 - s.start_ns as i64, 0),
            })
        })
        .unzip();
    Summary::of(&values, &references)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram;
    use taskmeter_model::run::METRICS;
    use taskmeter_protocol::Sample;

    fn view(
        unit: u32,
        start: u64,
        busy: u64,
        expected: u64,
        late: i64,
        previous: Option<u64>,
        measured: bool,
    ) -> SampleView {
        let busy_end = start + busy;
        let intended = busy_end + expected;
        let wake = (intended as i64 + late) as u64;
        let sample = Sample {
            period: 0,
            start_ns: start,
            busy_end_ns: busy_end,
            intended_ns: intended,
            wake_ns: wake,
            missed: 0,
        };
        SampleView::new(unit, (unit - 1) % 2, sample, expected, previous, measured)
    }

    fn samples() -> Vec<SampleView> {
        (0..2000u64)
            .map(|i| {
                view(
                    1 + (i % 2) as u32,
                    10_000 * i,
                    i % 7,
                    1000,
                    (i as i64 * 37) % 900 - 50,
                    (i % 10 != 0).then(|| 10_000 * i - 5),
                    i >= 100,
                )
            })
            .collect()
    }

    #[test]
    fn exact_statistics_equal_summaries_of_all_the_values() {
        let views = samples();
        let mut row = RowStats::new(2, u64::MAX, false);
        views.chunks(33).for_each(|chunk| row.add(chunk));
        let done = row.finish();
        assert_eq!(done.basis, Basis::Exact);
        let measured: Vec<&SampleView> = views.iter().filter(|v| v.measured()).collect();
        let lateness: Vec<i64> =
            measured.iter().map(|v| v.sample.wake_ns as i64 - v.sample.intended_ns as i64).collect();
        assert_eq!(done.statistics.lateness, Summary::of(&lateness, &vec![0; lateness.len()]));
        let full: Vec<(i64, i64)> = measured
            .iter()
            .filter_map(|v| Some((v.sample.wake_ns as i64 - v.previous_wake_ns()? as i64, v.expected_ns as i64)))
            .collect();
        let (values, references): (Vec<i64>, Vec<i64>) = full.into_iter().unzip();
        assert_eq!(done.statistics.full, Summary::of(&values, &references));
        assert_eq!(done.counts.measured, 1900);
        assert_eq!(done.counts.after_gap, 190);
        assert_eq!(done.counts.early, lateness.iter().filter(|l| **l < 0).count() as u64);
        let class_1: Vec<i64> = measured
            .iter()
            .filter(|v| v.class() == 1)
            .map(|v| v.sample.busy_end_ns as i64 - v.sample.start_ns as i64)
            .collect();
        assert_eq!(done.classes[1].busy, Summary::of(&class_1, &vec![0; class_1.len()]));
        let stored = histogram::decode(&done.histograms.lateness).unwrap();
        assert_eq!(stored.len(), 1900);
        // How early the early ones were is kept beside the histogram, which holds them as 0.
        let early = histogram::decode(done.lateness_early.as_ref().expect("early wake-ups")).unwrap();
        assert_eq!(early.len(), done.counts.early);
        assert_eq!(early.max() as i64, -lateness.iter().min().unwrap());
        // Each unit's own mean, from its measured samples alone.
        let unit_mean = |unit: u32| {
            let own: Vec<i64> = measured
                .iter()
                .filter(|v| v.unit() == unit)
                .map(|v| v.sample.wake_ns as i64 - v.sample.intended_ns as i64)
                .collect();
            own.iter().sum::<i64>() as f64 / own.len() as f64
        };
        let spread = done.unit_spread.expect("two units measured");
        assert_eq!((spread.units, spread.samples_min, spread.samples_max), (2, 950, 950));
        assert_eq!(spread.lateness_min, unit_mean(1).min(unit_mean(2)));
        assert_eq!(spread.lateness_max, unit_mean(1).max(unit_mean(2)));
    }

    #[test]
    fn a_row_of_two_classes_is_the_row_of_their_samples_folded_as_one() {
        // Each sample is folded into its class alone; the row is made of the classes at the
        // end, and must be what one fold of every sample gives: within the budget and past it
        // (units 2 and 1 first: the row's first sample is of class 1).
        let mut views = samples();
        views.rotate_left(1);
        for budget in [u64::MAX, 500] {
            let mut one = RowStats::new(1, budget, false);
            let mut two = RowStats::new(2, budget, false);
            views.chunks(41).for_each(|chunk| {
                one.add(chunk);
                two.add(chunk);
            });
            let (one, two) = (one.finish(), two.finish());
            assert_eq!(one.basis, two.basis);
            assert_eq!(one.statistics, two.statistics, "budget {budget}");
            assert_eq!(one.histograms, two.histograms);
            assert_eq!(one.lateness_early, two.lateness_early);
            assert_eq!(one.counts, two.counts);
            assert_eq!(two.classes.len(), 2);
            assert_eq!(two.classes[0].lateness.count + two.classes[1].lateness.count, one.statistics.lateness.count);
        }
    }

    /// Values counted (0..262,144) and not (below 0, from 262,144), a reference that holds for a
    /// while and then varies, in one class or two whose references differ: every figure but
    /// the percentiles past the budget is that of the values one by one (issue 58's fold makes
    /// the counted values' moments from their counters).
    #[test]
    fn counted_values_moments_are_those_of_the_values_one_by_one() {
        // Unit 1 sleeps 200 us, then (from sample 600) 200 or 300 us by period; unit 2 sleeps
        // 1 ms throughout. Lateness from -30 us to 400 us.
        let views: Vec<SampleView> = (0..1600u64)
            .map(|i| {
                let unit = 1 + (i % 2) as u32;
                let expected = match unit {
                    1 if i >= 600 => 200_000 + 100_000 * (i % 4 / 2),
                    1 => 200_000,
                    _ => 1_000_000,
                };
                let late = (i as i64 * 7_919) % 430_000 - 30_000;
                view(unit, 2_000_000 * i, i % 300, expected, late, (i % 9 != 0).then(|| 2_000_000 * i - 40), true)
            })
            .collect();
        let measured = |class: Option<u32>| -> Vec<&SampleView> {
            views.iter().filter(|v| class.is_none_or(|c| v.class() == c)).collect()
        };
        let one_by_one = |views: &[&SampleView], metric| summary_of_list(views.iter().copied(), metric);
        for budget in [u64::MAX, 100] {
            for classes in [1, 2] {
                let mut row = RowStats::new(classes, budget, false);
                views.chunks(100).for_each(|chunk| row.add(chunk));
                let done = row.finish();
                for metric in METRICS {
                    let (mut got, mut want) =
                        (done.statistics.get(metric).clone(), one_by_one(&measured(None), metric));
                    if budget == 100 {
                        // Past the budget the percentiles come from 5-digit counters.
                        (got.p50, got.p90, got.p99, got.p99_9, got.p99_99) = Default::default();
                        (want.p50, want.p90, want.p99, want.p99_9, want.p99_99) = Default::default();
                    }
                    assert_eq!(got, want, "{metric:?}, {classes} class(es), budget {budget}");
                    if classes == 2 && budget == u64::MAX {
                        for class in [0, 1] {
                            let own = one_by_one(&measured(Some(class)), metric);
                            assert_eq!(done.classes[class as usize].get(metric), &own, "{metric:?}, class {class}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn past_the_budget_percentiles_come_from_histograms_and_the_rest_stays_exact() {
        let views = samples();
        let mut exact = RowStats::new(1, u64::MAX, false);
        let mut bounded = RowStats::new(1, 500, true);
        views.chunks(50).for_each(|chunk| {
            exact.add(chunk);
            bounded.add(chunk);
        });
        assert_eq!(bounded.live().samples, 1900);
        let (exact, bounded) = (exact.finish(), bounded.finish());
        assert_eq!(bounded.basis, Basis::Histogram);
        for metric in METRICS {
            let (a, b) = (exact.statistics.get(metric), bounded.statistics.get(metric));
            assert_eq!((a.count, a.mean, a.std, a.min, a.max), (b.count, b.mean, b.std, b.min, b.max), "{metric:?}");
            assert_eq!(a.mean_absolute_deviation, b.mean_absolute_deviation);
            // Values below 262 us are exact in a 5-digit histogram.
            assert_eq!((a.p50, a.p99, a.p99_99), (b.p50, b.p99, b.p99_99), "{metric:?}");
        }
        assert_eq!(histogram::decode(&bounded.histograms.actual).unwrap().len(), 1900);
        assert_eq!(
            bounded.lateness_early, exact.lateness_early,
            "the same magnitudes, exact below 262 us, from the values or the histogram"
        );
    }
}

#[cfg(test)]
mod prepare_tests {
    use super::*;

    fn row(classes: u32, measured_on_time: u64, shortest_sleep_ns: u64) -> RowToCome {
        RowToCome { classes, measured_on_time, shortest_sleep_ns }
    }

    /// The vectors prepared: 3 kept metrics a class, of the row's samples on time within the
    /// budget shared by its classes, for the batch that keeps the most.
    #[test]
    fn the_batch_that_keeps_the_most_is_prepared_for() {
        let ms = 1_000_000;
        // The `lost` run: two rows one after the other, 100,000 units of `modulo:20:1ms` in one
        // class, 284 periods each from 0.5 to 3.5 s: the budget of 4 million; in two classes, half.
        let lost = [vec![row(1, 28_400_000, ms)], vec![row(1, 28_400_000, ms)]];
        assert_eq!(vectors_to_prepare(lost, 4_000_000), vec![4_000_000; 3]);
        assert_eq!(vectors_to_prepare([vec![row(2, 28_400_000, ms)]], 4_000_000), vec![2_000_000; 6]);
        // Rows run together add up; the batch of both is larger than the one of a row alone.
        let together = [vec![row(1, 9_000, ms), row(1, 3_000, ms)], vec![row(2, 10_000, ms)]];
        assert_eq!(vectors_to_prepare(together, 4_000_000), [9_000, 9_000, 9_000, 3_000, 3_000, 3_000]);
        // Within the budget: 1,000 samples on time of a class, 500 values a vector.
        assert_eq!(vectors_to_prepare([vec![row(2, 1_000_000, ms)]], 1_000), vec![500; 6]);
        // Sleeps under 262 us: their values are counted, not kept; none is prepared for.
        assert_eq!(vectors_to_prepare([vec![row(1, 3_000_000, 261_999)]], 4_000_000), Vec::<usize>::new());
        assert_eq!(vectors_to_prepare([vec![row(1, 1, EXACT_BELOW)]], 4_000_000), vec![1; 3]);
        assert_eq!(vectors_to_prepare(Vec::<Vec<RowToCome>>::new(), 4_000_000), Vec::<usize>::new());
    }
}

#[cfg(test)]
mod live_tests {
    use super::*;
    use taskmeter_protocol::Sample;

    /// A measured sample of unit 1 that woke `late` ns after its deadline.
    fn late(late: i64) -> SampleView {
        let intended = 1_000_000_000u64;
        let sample = Sample {
            period: 0,
            start_ns: intended - 1000,
            busy_end_ns: intended - 500,
            intended_ns: intended,
            wake_ns: (intended as i64 + late) as u64,
            missed: 0,
        };
        SampleView::new(1, 0, sample, 500, None, true)
    }

    /// A measured sample that followed its unit's own write of its ring is counted and left out
    /// of every statistic; one in the warm-up is a warm-up sample.
    #[test]
    fn samples_after_a_units_own_write_are_counted_and_left_out() {
        let lateness = [10_000, 999_000, 20_000, 30_000, 888_000, 40_000];
        let after = [false, true, false, false, true, false];
        let mut views: Vec<SampleView> =
            lateness.iter().zip(after).map(|(l, a)| late(*l).with_after_flush(a)).collect();
        views.push(late(777_000).with_after_flush(true).with_measured(false));
        let mut row = RowStats::new(1, u64::MAX, true);
        row.add(&views);
        let done = row.finish();
        assert_eq!((done.counts.measured, done.counts.left_out, done.counts.warmup), (4, 2, 1));
        let lateness = &done.statistics.lateness;
        assert_eq!(
            (lateness.count, lateness.max, lateness.mean),
            (4, Some(40_000), Some(25_000.0)),
            "the four others only"
        );
    }

    #[test]
    fn the_live_line_ends_where_the_table_starts() {
        // Early wake-ups, the exact range, and values past 262 us where 5 digits apply.
        let values: Vec<i64> = (0..20_000i64).map(|i| (i * 7919) % 3_000_000 - 2_000).collect();
        let views: Vec<SampleView> = values.iter().map(|v| late(*v)).collect();
        let mut row = RowStats::new(1, u64::MAX, true);
        for chunk in views.chunks(97) {
            row.add(chunk);
            let live = row.live();
            assert!(live.p50 <= live.p99 && live.p99 <= live.max, "{live:?}");
        }
        let live = row.live();
        let table = row.finish().statistics.lateness;
        assert_eq!(live.samples, table.count);
        assert_eq!(live.max, table.max);
        for (shown, exact) in [(live.p50, table.p50), (live.p99, table.p99)] {
            let (shown, exact) = (shown.unwrap(), exact.unwrap());
            // The bucket's far end: never below the value, within 5 significant digits of it.
            assert!(shown >= exact && (shown - exact) as f64 <= exact.abs() as f64 * 1e-4, "{shown} vs {exact}");
        }
        assert!(table.p50.unwrap() > 1_000_000, "the test reaches the 5-digit range");
    }

    #[test]
    fn below_262_us_the_live_percentiles_are_the_tables_exactly() {
        let mut row = RowStats::new(1, u64::MAX, true);
        let views: Vec<SampleView> = (0..5000i64).map(|i| late((i * 31) % 200_000 - 100)).collect();
        row.add(&views);
        let live = row.live();
        let table = row.finish().statistics.lateness;
        assert_eq!((live.p50, live.p99, live.max), (table.p50, table.p99, table.max));
    }
}
