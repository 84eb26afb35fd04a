//! `history check`: in each series, the newest change point (E-Divisive means,
//! `analysis::changepoint`)
//! and what it did: a *regression* when the runs since are worse than the runs before it by
//! more than the noise threshold, an *improvement* when better, else no change worth a verdict.
//!
//! A check is one gate over all its series: each series is first tested for any change at all
//! (`changepoint::test`), and Holm's adjustment over those tests decides which series are
//! searched for change points; so stable series on the same machine fail a check with a chance
//! of at most alpha, however many series it reads. A series searched has every split tested at
//! the level its test passed Holm's step at (alpha / (m - rank)): one level for one search, as
//! E-Divisive's authors test every split at one p₀.
//!
//! A check never says *no change* where it could not have seen one. A permutation test of a
//! step at the newest `min_size` runs of n cannot give a p below about 2 / C(n, min_size)
//! (`changepoint::clean_step_p`); where that is not below Holm's first threshold, alpha / m,
//! the series *cannot detect* a change yet, and says how many runs it needs. Where it can, the
//! check says the smallest step at its newest runs it would flag (`detectable_steps`).

use super::series::{Key, RunValues};
use serde::Serialize;
use taskmeter_analysis::changepoint::{self, Settings};

/// When a change is a verdict: which way is worse, the noise threshold, and how new a
/// regression must be to fail the check.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    pub higher_is_better: bool,
    /// A smaller relative change is never a verdict.
    pub threshold: f64,
    /// A regression fails the check when its change starts among the newest `recent` runs.
    pub recent: usize,
}

/// The newest change of a series.
#[derive(Clone, Debug, Serialize)]
pub struct Change {
    /// The first run after the change.
    pub run: i64,
    pub started_at: String,
    pub label: Option<String>,
    /// Runs before the change (since the one before it) and since.
    pub runs_before: usize,
    pub runs_after: usize,
    /// The mean of each side's run means.
    pub before: f64,
    pub after: f64,
    /// (after - before) / |before|.
    pub change: Option<f64>,
    pub q: f64,
    pub p_value: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Worse beyond the threshold since a change among the newest runs (`recent`).
    Regression,
    /// A regression that began before the newest runs: reported, not failed on (it was seen
    /// when it was new).
    EarlierRegression,
    Improvement,
    /// A significant change within the noise threshold.
    SmallChange,
    /// None found, where a step at the newest runs could have been (`detectable_step`).
    NoChange,
    /// None found, where none could have been: too few runs for the test to flag even the
    /// cleanest step at the newest runs (`runs_needed`), or a spread too wide for any step up
    /// to `LARGEST_STEP`. Not judged: neither a pass nor a failure.
    CannotDetect,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Regression => "regression",
            Verdict::EarlierRegression => "earlier regression",
            Verdict::Improvement => "improvement",
            Verdict::SmallChange => "change within the threshold",
            Verdict::NoChange => "no change",
            Verdict::CannotDetect => "cannot detect",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub series: Key,
    pub runs: usize,
    /// The p-value of the series' test for any change, and after Holm's adjustment over the
    /// check's series; None for a series too short to test.
    pub p_value: Option<f64>,
    pub p_adjusted: Option<f64>,
    pub change: Option<Change>,
    pub verdict: Verdict,
    /// With no change: the smallest step at the newest `min_size` runs the check would flag,
    /// as the factor they would be multiplied by (above 1 where higher is worse, below where
    /// higher is better); None until `detectable_steps` works it out.
    pub detectable_step: Option<f64>,
    /// When it cannot detect: the fewest runs with which it could (None when no number of runs
    /// would do: too few permutations, or the spread).
    pub runs_needed: Option<usize>,
}

/// The largest step `detectable_steps` tries: a series that would not flag its newest runs
/// multiplied by 10 cannot detect a change.
pub const LARGEST_STEP: f64 = 10.0;

/// The p-value of `runs` (one value a run: the mean of its repetitions) having any change;
/// None when too short for two segments of the minimum size.
pub fn screen(runs: &[RunValues], settings: Settings) -> Option<f64> {
    let values: Vec<f64> = runs.iter().map(RunValues::mean).collect();
    if values.len() < 2 * settings.min_size {
        return None;
    }
    changepoint::test(&values, settings).map(|c| c.p_value)
}

/// The level Holm's step-down compares each p with: alpha / (m - rank), the smallest p first.
fn holm_levels(p_values: &[f64], alpha: f64) -> Vec<f64> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|a, b| p_values[*a].total_cmp(&p_values[*b]));
    let mut levels = vec![alpha; m];
    for (rank, index) in order.into_iter().enumerate() {
        levels[index] = alpha / (m - rank) as f64;
    }
    levels
}

/// The fewest runs with which a step at the newest `settings.min_size` runs can be flagged at
/// `level` at all: the first n whose cleanest step's p (`changepoint::clean_step_p`) is below
/// it; None when no n will (the test's p never falls below 1 / (1 + permutations)).
pub fn runs_needed(settings: Settings, level: f64) -> Option<usize> {
    let k = settings.min_size;
    (2 * k..100_000).find(|n| changepoint::clean_step_p(*n, k, settings.permutations) < level)
}

/// Checks every series as one family: each screened, Holm's adjustment over the screens, then
/// the change points of the series whose adjusted p is below alpha (`settings.alpha`), each at
/// its Holm level. A series with no change point that has fewer runs than a step at its newest
/// runs needs (`runs_needed`, at Holm's first threshold) cannot detect one.
pub fn check_all<'a>(
    series: impl IntoIterator<Item = (&'a Key, &'a [RunValues])>,
    rule: Rule,
    settings: Settings,
) -> Vec<Finding> {
    let series: Vec<(&Key, &[RunValues])> = series.into_iter().collect();
    let screened: Vec<Option<f64>> = series.iter().map(|(_, runs)| screen(runs, settings)).collect();
    let tested: Vec<f64> = screened.iter().flatten().copied().collect();
    let mut adjusted = taskmeter_stats::holm(&tested).into_iter();
    let mut levels = holm_levels(&tested, settings.alpha).into_iter();
    // The threshold a step must pass when the other series have none: Holm's first. A series
    // too short to be tested yet will be one of all the check's series.
    let first_threshold =
        |tested_now: bool| settings.alpha / if tested_now { tested.len() } else { series.len() }.max(1) as f64;
    series
        .iter()
        .zip(screened)
        .map(|((key, runs), p)| {
            let (p_adjusted, level) = (p.and_then(|_| adjusted.next()), p.and_then(|_| levels.next()));
            let tests =
                Tests { p_value: p, p_adjusted, level, needed: runs_needed(settings, first_threshold(p.is_some())) };
            check(key, runs, rule, settings, tests)
        })
        .collect()
}

/// What the family's tests say of one series: its screen's p, adjusted p and Holm level, and
/// the runs it needs to see a step at its newest runs.
struct Tests {
    p_value: Option<f64>,
    p_adjusted: Option<f64>,
    level: Option<f64>,
    needed: Option<usize>,
}

/// Checks one series (one value per run: the mean of its repetitions) given its tests.
fn check(series: &Key, runs: &[RunValues], rule: Rule, settings: Settings, tests: Tests) -> Finding {
    let values: Vec<f64> = runs.iter().map(RunValues::mean).collect();
    let blind = tests.needed.is_none_or(|n| values.len() < n);
    let finding = |change, verdict| Finding {
        series: series.clone(),
        runs: runs.len(),
        p_value: tests.p_value,
        p_adjusted: tests.p_adjusted,
        change,
        verdict,
        detectable_step: None,
        runs_needed: (verdict == Verdict::CannotDetect).then_some(tests.needed).flatten(),
    };
    let nothing = if blind { Verdict::CannotDetect } else { Verdict::NoChange };
    let searched = tests.p_adjusted.is_some_and(|p| p < settings.alpha);
    let newest = tests
        .level
        .filter(|_| searched)
        .and_then(|level| newest_change(&values, rule, Settings { alpha: level, ..settings }));
    let Some(newest) = newest else { return finding(None, nothing) };
    let (index, at) = (newest.point.index, &runs[newest.point.index]);
    let change = Change {
        run: at.run,
        started_at: at.started_at.clone(),
        label: at.label.clone(),
        runs_before: index - newest.from,
        runs_after: values.len() - index,
        before: newest.before,
        after: newest.after,
        change: newest.change,
        q: newest.point.q,
        p_value: newest.point.p_value,
    };
    finding(Some(change), newest.verdict)
}

/// The newest change point of a series and what it did.
struct Newest {
    point: changepoint::ChangePoint,
    /// Where the runs before it start: the change point before it, or 0.
    from: usize,
    before: f64,
    after: f64,
    change: Option<f64>,
    verdict: Verdict,
}

/// The change points of `values` (every split tested at `settings.alpha`), the newest one's
/// runs since against the runs between it and the one before, and the verdict; a regression
/// counts when its change starts among the newest `rule.recent` runs.
fn newest_change(values: &[f64], rule: Rule, settings: Settings) -> Option<Newest> {
    let points = changepoint::change_points(values, settings);
    let last = points.last()?.clone();
    let from = points.len().checked_sub(2).map_or(0, |i| points[i].index);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (before, after) = (mean(&values[from..last.index]), mean(&values[last.index..]));
    let change = (before != 0.0).then(|| (after - before) / before.abs());
    let verdict = match change {
        Some(c) if c.abs() > rule.threshold && (c > 0.0) == rule.higher_is_better => Verdict::Improvement,
        Some(c) if c.abs() > rule.threshold && values.len() - last.index <= rule.recent => Verdict::Regression,
        Some(c) if c.abs() > rule.threshold => Verdict::EarlierRegression,
        _ => Verdict::SmallChange,
    };
    Some(Newest { point: last, from, before, after, change, verdict })
}

/// For every series with no change, the smallest step at its newest runs the check would have
/// flagged (`detectable_step`); a series that would not flag even `LARGEST_STEP` cannot
/// detect a change. `series` are the check's, in the order of `findings`.
pub fn detectable_steps(findings: &mut [Finding], series: &[&[RunValues]], rule: Rule, settings: Settings) {
    let tested = findings.iter().filter(|f| f.p_value.is_some()).count();
    let level = settings.alpha / tested.max(1) as f64;
    for (finding, runs) in findings.iter_mut().zip(series) {
        if finding.verdict != Verdict::NoChange {
            continue;
        }
        let values: Vec<f64> = runs.iter().map(RunValues::mean).collect();
        match smallest_step(&values, rule, settings, level) {
            Some(step) => finding.detectable_step = Some(step),
            None => finding.verdict = Verdict::CannotDetect,
        }
    }
}

/// The mildest step, in hundredths, that `check` would see at the newest `settings.min_size`
/// runs of `values`: the smallest F (1.06, 1.07, ... up to `LARGEST_STEP` where higher is worse;
/// 0.94, 0.93, ... down to its inverse where higher is better, for a 5 % threshold: every F
/// beyond the threshold) such that, with those runs multiplied by F, their mean is worse than
/// the older runs' by more than the threshold and the series' test gives a p below `level`
/// (Holm's first threshold: the other series unchanged). A what-if on the series' own values,
/// so its own spread decides. None when not even the largest step would be seen.
pub fn smallest_step(values: &[f64], rule: Rule, settings: Settings, level: f64) -> Option<f64> {
    let n = values.len();
    let (older, newest) = values.split_at(n.saturating_sub(settings.min_size));
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (older_mean, newest_mean) = (mean(older), mean(newest));
    let seen = |factor: f64| {
        let change = (newest_mean * factor - older_mean) / older_mean.abs();
        let beyond = if rule.higher_is_better { change < -rule.threshold } else { change > rule.threshold };
        let stepped: Vec<f64> = older.iter().copied().chain(newest.iter().map(|v| v * factor)).collect();
        // The mean first: the test costs a thousand shuffles where the step is seen.
        beyond && changepoint::below(&stepped, settings, level)
    };
    // The hundredths beyond the threshold, mildest first (1e-9: 100 · 1.05 is 105.00000000000001).
    let hundredths: Vec<i64> = if rule.higher_is_better {
        let first = (100.0 * (1.0 - rule.threshold) - 1e-9).ceil() as i64 - 1;
        (((100.0 / LARGEST_STEP) as i64).max(1)..=first).rev().collect()
    } else {
        let first = (100.0 * (1.0 + rule.threshold) + 1e-9).floor() as i64 + 1;
        (first..=(100.0 * LARGEST_STEP) as i64).collect()
    };
    let mildest = first_where(hundredths.len(), |i| seen(hundredths[i] as f64 / 100.0));
    hundredths.get(mildest).map(|j| *j as f64 / 100.0)
}

/// The first of `0..len` where `holds` does (it holds from there on; `len` where nowhere):
/// galloping from 0 (1, 3, 7, 15... on) then halving the gap, so that it is tried at few
/// places where it holds, which are the dear ones.
fn first_where(len: usize, holds: impl Fn(usize) -> bool) -> usize {
    let (mut below, mut probe, mut stride) = (0, 0, 1);
    while probe < len && !holds(probe) {
        below = probe + 1;
        probe += stride;
        stride *= 2;
    }
    // Nowhere in below..probe (exclusive) is known yet; at probe it holds (or probe is past the end).
    let (mut low, mut high) = (below, probe.min(len));
    while low < high {
        let middle = low + (high - low) / 2;
        if holds(middle) {
            high = middle;
        } else {
            low = middle + 1;
        }
    }
    low
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(values: &[f64]) -> Vec<RunValues> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| RunValues {
                run: i as i64 + 1,
                started_at: format!("t{i:02}"),
                label: None,
                values: vec![*v],
            })
            .collect()
    }

    fn key() -> Key {
        Key {
            experiment: "sleep".into(),
            subject: "thread".into(),
            point: "-".into(),
            machine: "m".into(),
            ..Key::default()
        }
    }

    /// Lateness: lower is better; 5 %; a regression counts among the newest `recent` runs.
    fn lateness(recent: usize) -> Rule {
        Rule { higher_is_better: false, threshold: 0.05, recent }
    }

    /// Normal draws (Box-Muller) of mean `mu` and deviation `sd`.
    fn normal(rng: &mut fastrand::Rng, n: usize, mu: f64, sd: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let (u, v) = (1.0 - rng.f64(), rng.f64());
                mu + sd * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
            })
            .collect()
    }

    /// One series checked alone (a family of one).
    fn alone(values: &[f64], rule: Rule) -> Finding {
        let runs = series(values);
        check_all([(&key(), runs.as_slice())], rule, Settings::default()).remove(0)
    }

    /// `stable` series of 20 stable runs besides `first`, checked as one family (the first's
    /// finding first), each with its detectable step.
    fn family(first: &[f64], stable: usize, rng: &mut fastrand::Rng) -> Vec<Finding> {
        let mut all = vec![series(first)];
        all.extend((0..stable).map(|_| series(&normal(rng, 20, 100.0, 5.0))));
        let keys: Vec<Key> = (0..all.len()).map(|i| Key { subject: format!("r{i}"), ..key() }).collect();
        let mut findings =
            check_all(keys.iter().zip(&all).map(|(k, s)| (k, s.as_slice())), lateness(10), Settings::default());
        let runs: Vec<&[RunValues]> = all.iter().map(Vec::as_slice).collect();
        detectable_steps(&mut findings, &runs, lateness(10), Settings::default());
        findings
    }

    #[test]
    fn a_lateness_that_grows_at_the_newest_runs_is_a_regression() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut values = normal(&mut rng, 12, 60_000.0, 1_500.0);
        values.extend(normal(&mut rng, 4, 110_000.0, 1_500.0));
        let f = alone(&values, lateness(10));
        assert_eq!(f.verdict, Verdict::Regression, "{f:?}");
        assert_eq!(f.p_value, f.p_adjusted, "a family of one");
        let change = f.change.unwrap();
        assert_eq!((change.run, change.runs_after), (13, 4));
        assert!(change.change.unwrap() > 0.7 && change.p_value <= 0.05, "{change:?}");
        // Seen as new within the newest 4 runs, not within the newest 3.
        assert_eq!(alone(&values, lateness(3)).verdict, Verdict::EarlierRegression);
        // The same shift in a throughput is an improvement.
        assert_eq!(alone(&values, Rule { higher_is_better: true, ..lateness(10) }).verdict, Verdict::Improvement);
    }

    /// The runs a step at the newest 3 needs, by hand from (1 + 999 · 2 / C(n, 3)) / 1000 <
    /// level: alone (0.05), C(n, 3) > 40.8: 8 runs; in a family of 2 (0.025), C(n, 3) > 83.3:
    /// 9 (C(9, 3) = 84); of 15 (0.00333), C(n, 3) > 856.3: 19 (C(18, 3) = 816, C(19, 3) = 969).
    /// With 19 permutations no p falls below 1/20, so no number of runs will do in a family of 2.
    #[test]
    fn the_runs_needed_are_those_of_the_cleanest_step() {
        let settings = Settings::default();
        assert_eq!(runs_needed(settings, 0.05), Some(8));
        assert_eq!(runs_needed(settings, 0.025), Some(9));
        assert_eq!(runs_needed(settings, 0.05 / 15.0), Some(19));
        assert_eq!(runs_needed(Settings { permutations: 19, ..settings }, 0.025), None);
    }

    /// A doubling at the newest 3 of 6 runs: the test cannot give a p below about 0.1, so the
    /// check says it cannot detect one, and needs 8 runs alone, 19 among 15 series; never "no
    /// change".
    #[test]
    fn a_six_run_history_cannot_detect_a_doubling_and_says_how_many_runs_it_needs() {
        let doubled = [100.0, 101.0, 99.0, 200.0, 202.0, 198.0];
        let f = alone(&doubled, lateness(10));
        assert_eq!((f.verdict, f.runs_needed, f.change.is_none()), (Verdict::CannotDetect, Some(8), true), "{f:?}");
        assert!(f.p_value.unwrap() > 0.1, "{f:?}");
        let mut rng = fastrand::Rng::with_seed(3);
        let among = family(&doubled, 14, &mut rng);
        assert_eq!((among[0].verdict, among[0].runs_needed), (Verdict::CannotDetect, Some(19)), "{:?}", among[0]);
        assert!(among[1..].iter().all(|f| f.verdict != Verdict::CannotDetect && f.runs_needed.is_none()));
        // With 8 runs alone its p is 0.037 on average, below 0.05 about 9 times in 10 with 999
        // shuffles. Here 20 of 336 reached it (p 0.060): the same shuffles reach any larger step
        // as often, so not even x10 would be flagged, and the check says it cannot detect one
        // rather than "no change". With 9 runs (0.025) it is found.
        let eight = [100.0, 101.0, 99.0, 100.5, 99.5, 200.0, 202.0, 198.0];
        let (runs, rule) = (series(&eight), lateness(10));
        let mut findings = check_all([(&key(), runs.as_slice())], rule, Settings::default());
        assert_eq!(findings[0].verdict, Verdict::NoChange);
        detectable_steps(&mut findings, &[runs.as_slice()], rule, Settings::default());
        assert_eq!((findings[0].verdict, findings[0].runs_needed), (Verdict::CannotDetect, None));
        let nine = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 200.0, 202.0, 198.0];
        assert_eq!(alone(&nine, lateness(10)).verdict, Verdict::Regression);
        // Too short to be tested at all: the same answer.
        let short = alone(&[1.0, 2.0, 3.0], lateness(10));
        assert_eq!((short.verdict, short.p_value, short.runs_needed), (Verdict::CannotDetect, None, Some(8)));
    }

    /// The detectable step by hand. Seven runs at 100 and three at 80 (a lateness, alone): their
    /// newest 3 times F are a regression when 80·F is above 105 (beyond 5 % of the 100s), so
    /// F = 1.32 (105/80 = 1.3125); below, 80·F up to 100 is an improvement and up to 105 a change
    /// within the threshold. As a throughput, three at 120: a regression when 120·F is below 95,
    /// F = 0.79 (95/120 = 0.7917). With no spread at all, the first hundredth beyond the
    /// threshold: 1.06.
    #[test]
    fn the_detectable_step_is_the_mildest_that_would_be_a_regression() {
        let settings = Settings::default();
        let mut values = vec![100.0; 7];
        values.extend([80.0; 3]);
        assert_eq!(smallest_step(&values, lateness(10), settings, 0.05), Some(1.32));
        values[7..].fill(120.0);
        let throughput = Rule { higher_is_better: true, ..lateness(10) };
        assert_eq!(smallest_step(&values, throughput, settings, 0.05), Some(0.79));
        assert_eq!(smallest_step(&[100.0; 10], lateness(10), settings, 0.05), Some(1.06));
        // With noise, the step found is a regression when applied, and one hundredth less is not.
        let mut rng = fastrand::Rng::with_seed(9);
        let noisy = normal(&mut rng, 20, 100.0, 5.0);
        let step = smallest_step(&noisy, lateness(10), settings, 0.05 / 15.0).unwrap();
        let judged = |factor: f64| {
            let mut v = noisy.clone();
            v[17..].iter_mut().for_each(|x| *x *= factor);
            newest_change(&v, lateness(10), Settings { alpha: 0.05 / 15.0, ..settings }).map(|n| n.verdict)
        };
        assert_eq!(judged(step), Some(Verdict::Regression), "x{step}");
        assert_ne!(judged(step - 0.01), Some(Verdict::Regression), "x{step}");
        assert!(step > 1.1 && step < 1.6, "a 5 % spread: {step}");
    }

    /// In a family, every series without a change says what it could have seen.
    #[test]
    fn no_change_comes_with_the_step_it_could_have_seen() {
        let mut rng = fastrand::Rng::with_seed(4);
        let first = normal(&mut rng, 20, 100.0, 5.0);
        let findings = family(&first, 14, &mut rng);
        for f in &findings {
            match f.verdict {
                Verdict::NoChange => assert!(f.detectable_step.is_some_and(|s| s > 1.05 && s < 2.0), "{f:?}"),
                _ => assert!(f.detectable_step.is_none(), "{f:?}"),
            }
        }
        assert!(findings.iter().filter(|f| f.verdict == Verdict::NoChange).count() >= 14);
    }

    /// A check is one family: a series whose own test is significant (+10 % over its newest 6
    /// of 20 runs, p 0.030: a regression alone) is not searched when Holm's adjustment over 15
    /// series puts it above alpha.
    #[test]
    fn a_check_is_one_family() {
        let mut rng = fastrand::Rng::with_seed(11);
        let mut shifted = normal(&mut rng, 14, 100.0, 5.0);
        shifted.extend(normal(&mut rng, 6, 110.0, 5.0));
        let alone = alone(&shifted, lateness(10));
        let p = alone.p_value.unwrap();
        assert!(p < 0.05 && alone.verdict == Verdict::Regression, "{alone:?}");
        let stable: Vec<Vec<RunValues>> = (0..14).map(|_| series(&normal(&mut rng, 20, 100.0, 5.0))).collect();
        let keys: Vec<Key> = (0..15).map(|i| Key { subject: format!("r{i}"), ..key() }).collect();
        let mut all = vec![series(&shifted)];
        all.extend(stable);
        let findings =
            check_all(keys.iter().zip(&all).map(|(k, s)| (k, s.as_slice())), lateness(10), Settings::default());
        let first = &findings[0];
        assert_eq!(first.p_value, Some(p), "the same test, the same shuffles");
        assert!(first.p_adjusted.unwrap() >= 0.05 && first.change.is_none(), "not searched: {first:?}");
        let ps: Vec<f64> = findings.iter().map(|f| f.p_value.unwrap()).collect();
        let adjusted: Vec<f64> = findings.iter().map(|f| f.p_adjusted.unwrap()).collect();
        assert_eq!(adjusted, taskmeter_stats::holm(&ps));
        for f in &findings {
            let searched = f.p_adjusted.unwrap() < 0.05;
            assert_eq!(f.change.is_some(), searched, "{f:?}");
        }
    }

    /// Holm's levels by hand: p = (0.04, 0.001, 0.02) are compared, smallest first, with
    /// 0.05/3, 0.05/2 and 0.05/1. Every split of a series searched is tested at its level: a
    /// series at 100, then 130 from run 11, then 134 from run 21 has its second split at p 0.016:
    /// a change point alone (0.05), none in a check of 15 series, where the series' test came
    /// first (p 0.001) and its level is 0.05/15.
    #[test]
    fn each_series_is_searched_at_its_holm_level() {
        let levels = holm_levels(&[0.04, 0.001, 0.02], 0.05);
        assert_eq!(levels, vec![0.05, 0.05 / 3.0, 0.025]);
        let mut rng = fastrand::Rng::with_seed(0);
        let mut values: Vec<f64> = (0..10).map(|_| 100.0 + rng.f64() * 4.0).collect();
        values.extend((0..10).map(|_| 130.0 + rng.f64() * 4.0));
        values.extend((0..5).map(|_| 134.0 + rng.f64() * 4.0));
        let alone = alone(&values, lateness(10)).change.unwrap();
        assert_eq!((alone.run, alone.p_value), (21, 0.016));
        let among = family(&values, 14, &mut rng).remove(0);
        assert_eq!((among.p_value, among.p_adjusted), (Some(0.001), Some(0.015)), "{among:?}");
        assert_eq!(among.change.map(|c| (c.run, c.p_value)), Some((11, 0.001)));
    }

    /// The false-alarm rate docs/history.md gives, exactly, with the fixed seeds: 200 stable
    /// histories of 15 series of 20 i.i.d. normal runs (sd 5 % of the mean), each checked as
    /// one family. `cargo run --release --example check_rates` runs 1,000 of each.
    #[test]
    fn stable_histories_rarely_fail_a_check() {
        let mut rng = fastrand::Rng::with_seed(2026);
        let keys: Vec<Key> = (0..15).map(|i| Key { subject: format!("r{i}"), ..key() }).collect();
        let (mut failed, mut changes) = (0, 0);
        for _ in 0..200 {
            let all: Vec<Vec<RunValues>> = (0..15).map(|_| series(&normal(&mut rng, 20, 100.0, 5.0))).collect();
            let findings =
                check_all(keys.iter().zip(&all).map(|(k, s)| (k, s.as_slice())), lateness(10), Settings::default());
            failed += usize::from(findings.iter().any(|f| f.verdict == Verdict::Regression));
            changes += findings.iter().filter(|f| f.change.is_some()).count();
        }
        assert_eq!((failed, changes), (4, 12), "failed checks, change points in 3,000 stable series");
    }
}
