//! What the dashboards' exports are made of (`--export-github-benchmark-smaller` and `-bigger`,
//! `--export-bmf`, `--export-openmetrics`): a record, a comparison or the history's comparison
//! as [`Benchmark`]s (a subject, a measure, its unit, which way is better, the figure its table
//! shows and taskmeter's own 95 % range where it has one), a record's [`Distribution`]s as
//! cumulative buckets, and the environment they were measured in. Each family gives its
//! benchmarks and distributions through `page::Report` (its folder's `report.rs`, put together by
//! `export::dashboard_of`); the formats (`github_benchmark`, `bmf`, `openmetrics`) write any
//! [`Dashboard`] alike.

use taskmeter_machine::env::Environment;
use taskmeter_stats::Interval;

/// What one figure is about, in order: `("runtime", "thread")`, `("point", "units=5")`.
pub type Subject = Vec<(&'static str, String)>;

/// The unit of a figure, as each format names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// A time in ns (OpenMetrics: its base unit, seconds).
    Nanoseconds,
    /// A count per second of what it names (`messages`, `iterations`, `units`).
    PerSecond(&'static str),
    /// A ratio: 1 is the same (new / old, a throughput over the 1-sender one).
    Ratio,
    /// A share in percent (OpenMetrics: a ratio, its base unit).
    Percent,
}

impl Unit {
    /// The unit as a dashboard shows it: `ns`, `messages/s`, `ratio`, `%`.
    pub fn said(self) -> String {
        match self {
            Unit::Nanoseconds => "ns".into(),
            Unit::PerSecond(what) => format!("{what}/s"),
            Unit::Ratio => "ratio".into(),
            Unit::Percent => "%".into(),
        }
    }
}

/// One figure a dashboard tracks.
#[derive(Clone, Debug, PartialEq)]
pub struct Benchmark {
    pub subject: Subject,
    /// What it is: `lateness p50`, `throughput`, `METG`, `new / old`.
    pub measure: String,
    pub unit: Unit,
    pub higher_is_better: bool,
    /// The figure the table shows.
    pub value: f64,
    /// taskmeter's own 95 % range (low, high): for another invocation's value from the
    /// repetitions, or a comparison's from its test between invocations; None without one (one
    /// repetition), never made up.
    pub range: Option<(f64, f64)>,
    /// Whether the range is `value ± half` (else low–high, on a log scale).
    pub symmetric: bool,
    /// A comparison's verdict as its JSON says it (`regressed`, `improved`, `no_change`,
    /// `inconclusive`).
    pub verdict: Option<String>,
    /// What else a reader of the point should know, as (term, value): repetitions, p-values.
    pub notes: Vec<(&'static str, String)>,
}

impl Benchmark {
    /// A figure without a range.
    pub fn plain(subject: Subject, measure: &str, unit: Unit, higher_is_better: bool, value: f64) -> Benchmark {
        Benchmark {
            subject,
            measure: measure.into(),
            unit,
            higher_is_better,
            value,
            range: None,
            symmetric: true,
            verdict: None,
            notes: Vec::new(),
        }
    }

    /// An estimate with its range where it has one (two or more repetitions).
    pub fn estimate(subject: Subject, measure: &str, unit: Unit, higher_is_better: bool, i: &Interval) -> Benchmark {
        Benchmark {
            range: i.has_range().then(|| (i.low(), i.high())),
            symmetric: !i.log_scale,
            ..Benchmark::plain(subject, measure, unit, higher_is_better, i.value)
        }
    }

    /// The same figure, the note added.
    pub fn noted(mut self, term: &'static str, value: impl Into<String>) -> Benchmark {
        self.notes.push((term, value.into()));
        self
    }
}

/// The upper bounds of every distribution's buckets, in ns: 1, 2 and 5 of each decade from 10 ns
/// to 10 s, the same for every row and run so that a dashboard can add them up.
pub const BUCKETS_NS: [f64; 28] = [
    1e1, 2e1, 5e1, 1e2, 2e2, 5e2, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 2e7, 5e7, 1e8, 2e8,
    5e8, 1e9, 2e9, 5e9, 1e10,
];

/// A row's distribution of a metric, as cumulative buckets.
#[derive(Clone, Debug, PartialEq)]
pub struct Distribution {
    pub subject: Subject,
    /// `lateness`, `gap`.
    pub measure: &'static str,
    /// The values at or below each of [`BUCKETS_NS`], in order.
    pub buckets: Vec<(f64, u64)>,
    /// Every value (the `+Inf` bucket).
    pub count: u64,
    /// The sum of the values, where every value is counted as it was measured (none below 0).
    pub sum: Option<f64>,
}

impl Distribution {
    /// The buckets of a stored histogram's counts (`histogram::counts`: values in ns, within
    /// 1/1,024 above 2,048 ns, each counted by the lowest value of its histogram bucket); `sum`
    /// the exact sum of the values, of `count` values (left out unless the histogram holds as
    /// many).
    pub fn of(subject: Subject, measure: &'static str, counts: &[(i64, u64)], sum: Option<(f64, u64)>) -> Distribution {
        let buckets = BUCKETS_NS
            .iter()
            .map(|&bound| (bound, counts.iter().filter(|(v, _)| (*v as f64) <= bound).map(|(_, n)| n).sum()))
            .collect();
        let count = counts.iter().map(|(_, n)| n).sum();
        let sum = sum.filter(|(_, of)| *of == count).map(|(sum, _)| sum);
        Distribution { subject, measure, buckets, count, sum }
    }

    /// [`Distribution::of`] a histogram as a record stores it (base64), or None where it cannot
    /// be read.
    pub fn of_stored(
        subject: Subject,
        measure: &'static str,
        stored: &str,
        sum: Option<(f64, u64)>,
    ) -> Option<Distribution> {
        let h = taskmeter_analysis::histogram::decode(stored).ok()?;
        Some(Distribution::of(subject, measure, &taskmeter_analysis::histogram::counts(&h), sum))
    }
}

/// What a dashboard export writes: where the figures come from, the figures, the distributions
/// and the environment.
#[derive(Clone, Debug, PartialEq)]
pub struct Dashboard {
    /// What the figures are of, as their names begin: the experiment (`sleep`, `net`, `bench`),
    /// a comparison (`compare sleep`, `history compare`).
    pub source: String,
    /// The experiment, where one: OpenMetrics's label (`history compare` has it in each subject).
    pub experiment: Option<String>,
    /// Whether the figures are a comparison's (OpenMetrics names them `taskmeter_compare_...`).
    pub compared: bool,
    pub benchmarks: Vec<Benchmark>,
    pub distributions: Vec<Distribution>,
    /// Where it was measured, as (name, value): machine, kernel, CPU, cores, taskmeter's
    /// version, the run's label.
    pub environment: Vec<(&'static str, String)>,
}

/// The environment a dashboard says: what identifies the machine and the build measured.
pub fn environment(env: &Environment, taskmeter_version: &str, label: Option<&str>) -> Vec<(&'static str, String)> {
    let mut out = vec![
        ("machine", env.hostname.clone()),
        ("kernel", env.kernel.clone()),
        ("cpu", env.cpu_model.clone()),
        ("cores", env.cores_online.to_string()),
        ("taskmeter_version", taskmeter_version.to_string()),
    ];
    out.extend(label.map(|l| ("label", l.to_string())));
    out.retain(|(_, value)| !value.is_empty());
    out
}

/// A comparison's line as a dashboard's figure: new / old (on the scale of its test: the ratio
/// of the geometric means), with the 95 % range of its test between invocations where it has
/// one, which way is better as for what it compares, its verdict, and the old and new values
/// (in `unit`), the runs and p-values as notes. None where old is 0 (no ratio).
pub fn judged(
    subject: Subject,
    unit: &str,
    higher_is_better: bool,
    j: &taskmeter_analysis::compare::Judgement,
) -> Option<Benchmark> {
    let ratio = j.new / j.old;
    if !ratio.is_finite() || j.old <= 0.0 {
        return None;
    }
    let p = |p: Option<f64>| match p {
        Some(p) if p < 0.001 => format!("{p:.1e}"),
        Some(p) => format!("{p:.3}"),
        None => "-".into(),
    };
    let value = |v: f64| format!("{} {unit}", short(v));
    let b = Benchmark {
        range: j.ratio_range,
        symmetric: false,
        verdict: serde_json::to_value(j.verdict).ok().and_then(|v| v.as_str().map(str::to_string)),
        ..Benchmark::plain(subject, "new/old ratio", Unit::Ratio, higher_is_better, ratio)
    };
    Some(
        b.noted("old", value(j.old))
            .noted("new", value(j.new))
            .noted("runs", j.runs())
            .noted("p", p(j.p_value))
            .noted("p adjusted", p(j.p_adjusted)),
    )
}

/// The repetitions an estimate rests on, noted on each of `benchmarks` that has no note yet
/// (those a family just added for one subject).
pub fn note_repetitions(benchmarks: &mut [Benchmark], repetitions: impl ToString) {
    let repetitions = repetitions.to_string();
    for b in benchmarks.iter_mut().filter(|b| b.notes.is_empty()) {
        b.notes.push(("repetitions", repetitions.clone()));
    }
}

/// `text`'s words in lower case ASCII letters and digits (`µ` as `u`), `separator` between
/// them: what each format's names are made of (`lateness-p50`, `lateness_p50`).
pub fn joined_words(text: &str, separator: char) -> String {
    let mut out = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        let c = if c == 'µ' || c == 'μ' { 'u' } else { c };
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with(separator) {
            out.push(separator);
        }
    }
    out.trim_end_matches(separator).to_string()
}

/// A figure rounded to 6 significant digits (its integer part kept whole).
pub fn short(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return value.to_string();
    }
    let digits = 5 - value.abs().log10().floor() as i32;
    let scale = 10f64.powi(digits.max(0));
    ((value * scale).round() / scale).to_string()
}

/// The benchmarks that way round: lower is better (`customSmallerIsBetter`), or higher.
pub fn one_way(benchmarks: &[Benchmark], higher_is_better: bool) -> impl Iterator<Item = &Benchmark> {
    benchmarks.iter().filter(move |b| b.higher_is_better == higher_is_better)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_cut_to_6_significant_digits() {
        assert_eq!(short(1234.56789), "1234.57");
        assert_eq!(short(0.000123456789), "0.000123457");
        assert_eq!(short(123456789.0), "123456789");
    }

    #[test]
    fn a_distribution_counts_each_value_at_or_below_each_bound() {
        let h = taskmeter_analysis::histogram::of(&[0, 10, 11, 20, 1_000, 1_500, 3_000_000, 20_000_000_000]);
        let stored = taskmeter_analysis::histogram::encode(&h);
        let d = Distribution::of_stored(vec![("runtime", "thread".into())], "lateness", &stored, None).unwrap();
        let at = |bound: f64| d.buckets.iter().find(|(b, _)| *b == bound).unwrap().1;
        assert_eq!((at(10.0), at(20.0), at(50.0), at(1e3), at(2e3), at(5e6), at(1e10)), (2, 4, 4, 5, 6, 7, 7));
        assert_eq!(d.count, 8, "the value past 10 s is in +Inf only");
        assert!(d.buckets.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "cumulative");
    }

    #[test]
    fn a_range_is_kept_only_where_the_estimate_has_one() {
        let subject = || vec![("runtime", "thread".to_string())];
        let one = Benchmark::estimate(subject(), "lateness p50", Unit::Nanoseconds, false, &Interval::single(5.0));
        assert_eq!(one.range, None);
        let two = taskmeter_stats::mean_range(&[4.0, 6.0]).unwrap();
        let b = Benchmark::estimate(subject(), "lateness p50", Unit::Nanoseconds, false, &two);
        let (low, high) = b.range.unwrap();
        assert!(low < 5.0 && 5.0 < high && b.symmetric);
    }
}
