//! The judgement of one thing measured in two sets of runs (a runtime's lateness at a point, a
//! receiver's throughput, a runtime's METG, a scenario's mean gap), shared by `compare` and
//! `history compare`, and the family-wise rule that turns a comparison's lines into verdicts.
//!
//! **The invocation is the unit of replication.** A side is a set of invocations (a results
//! folder, a recorded run), each with its repetitions (`--repeat`). Repetitions of one
//! invocation share its machine state (the same minutes, the same neighbours, the same
//! frequency), so they are nested in it: an invocation counts once, by the mean of its
//! repetitions. With 2 or more invocations a side, a t-test on their means (Student's with a
//! pooled variance when the sides have as many, Welch's otherwise); with one on a side and 2
//! or more on the other, the one against the others' spread (the prediction test: under no
//! change it is one more draw of the same invocations); with one a side, the repetitions are
//! the only replication there is, and the line says that the noise between invocations is not
//! in its test. Values all above 0 are tested on a log scale (a change is a ratio), and a line's
//! old, new and change are on the scale of its test: geometric means and their ratio. Samples
//! within one run are never taken as independent draws.
//!
//! **A comparison is one gate.** Every line tested between invocations is one hypothesis of one
//! family: Holm's step-down adjustment (`taskmeter_stats::holm`) keeps the chance that two sets
//! of runs of the same code on the same machine give any *regressed* or *improved* line at or
//! below alpha, however many runtimes, points and metrics. A verdict needs the adjusted p
//! below alpha and a change beyond the noise threshold; a change within the threshold is *no
//! change* whatever its p.

use taskmeter_stats::{holm, prediction_shift, student_shift, welch_shift, Shift};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Improved,
    Regressed,
    NoChange,
    /// No test is possible, or its p is undefined: `reason` says why.
    Inconclusive,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::NoChange => "no change",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// What the compare commands say of their method, at the top of their output.
pub const METHOD: &str = "each invocation is one run (its repetitions averaged); a t-test between the sides' \
invocations on a log scale (Student's with equal counts, else Welch's; one invocation against several: the prediction \
test; one a side: its repetitions, a p without a verdict); old and new are each side's geometric mean of what its \
test compares (arithmetic where a value is 0 or below), change = new / old - 1; Holm's adjustment over the lines \
tested between invocations; a verdict needs the adjusted p below alpha and a change beyond the threshold";

/// When a change is a verdict.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// Relative change of the mean below which nothing is a change (0.05 = 5 %).
    pub threshold: f64,
    /// The chance, for the whole comparison, of a verdict where nothing changed.
    pub alpha: f64,
}

/// What a line's test compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// The invocations' means (Welch, or one against several).
    Invocations,
    /// One invocation a side: its repetitions (the noise between invocations is not measured).
    Repetitions,
}

/// One thing in two sets of runs.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Judgement {
    /// Each side's centre on the scale of its test: on a log scale the geometric mean of the
    /// values it compares (its invocations' means, or with one invocation a side its
    /// repetitions), else their arithmetic mean.
    pub old: f64,
    pub new: f64,
    pub old_invocations: usize,
    pub new_invocations: usize,
    /// Repetitions in all on each side.
    pub old_repetitions: usize,
    pub new_repetitions: usize,
    /// What the test compared; None without a test.
    pub level: Option<Level>,
    /// Whether the test compared the values' logarithms (every value above 0).
    pub log_scale: bool,
    /// (new - old) / |old|: on a log scale the ratio of the geometric means less 1, the change
    /// the test judged.
    pub change: Option<f64>,
    /// The line's own p-value, and after Holm's adjustment over the comparison's lines.
    pub p_value: Option<f64>,
    pub p_adjusted: Option<f64>,
    /// The 95 % range of new / old from the line's test between invocations (its p-value read
    /// the other way: the range leaves out 1 when p is below 0.05, before Holm's adjustment), on
    /// a log scale; None on a line tested on one invocation's repetitions, without a test, or
    /// not on a log scale. For the dashboards' exports (`compare --export-...`), not in the
    /// comparison's JSON.
    #[serde(skip)]
    pub ratio_range: Option<(f64, f64)>,
    pub verdict: Verdict,
    /// Why a line has no verdict (no test, an undefined p, no relative change).
    pub reason: Option<String>,
}

impl Judgement {
    /// "2×3 vs 2×3": invocations × repetitions of each (repetitions in all where they vary).
    pub fn runs(&self) -> String {
        let side = |invocations: usize, repetitions: usize| match invocations {
            0 => "0".to_string(),
            i if repetitions % i == 0 => format!("{i}×{}", repetitions / i),
            i => format!("{i} ({repetitions} rep.)"),
        };
        format!(
            "{} vs {}",
            side(self.old_invocations, self.old_repetitions),
            side(self.new_invocations, self.new_repetitions)
        )
    }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Two sets of values: Student's t with equal counts (twice Welch's worst degrees of freedom; its
/// level rises to 10.9 % at 3 a side when one side's variance dominates: `student_shift`),
/// Welch's otherwise; `b` less `a`.
fn two_sample(a: &[f64], b: &[f64]) -> Option<Shift> {
    if a.len() == b.len() {
        student_shift(a, b)
    } else {
        welch_shift(a, b)
    }
}

/// The centre of `values` on a test's scale: their geometric mean on a log scale, else their mean.
fn centre(values: &[f64], log_scale: bool) -> f64 {
    match values {
        [one] => *one,
        _ if log_scale => mean(&values.iter().map(|v| v.ln()).collect::<Vec<f64>>()).exp(),
        _ => mean(values),
    }
}

/// Tests `old` against `new`, each a list of invocations with their repetitions' values; the
/// verdict waits for the family (`decide`).
pub fn judge(old: &[Vec<f64>], new: &[Vec<f64>]) -> Judgement {
    let whole = |side: &[Vec<f64>]| -> Vec<Vec<f64>> { side.iter().filter(|i| !i.is_empty()).cloned().collect() };
    let (old, new) = (whole(old), whole(new));
    let means = |side: &[Vec<f64>]| side.iter().map(|i| mean(i)).collect::<Vec<f64>>();
    let (old_means, new_means) = (means(&old), means(&new));
    // Tested on a log scale when every value is above 0: a change is a ratio, and a runtime
    // whose lateness halves mostly halves its spread too.
    let log_scale = old.iter().chain(&new).flatten().all(|v| *v > 0.0);
    // What each side's test compares: its invocations' means, or one invocation a side its repetitions.
    let compared = |side: &[Vec<f64>], means: &[f64]| match (old.len(), new.len()) {
        (1, 1) => side[0].clone(),
        _ => means.to_vec(),
    };
    let (a, b) = (centre(&compared(&old, &old_means), log_scale), centre(&compared(&new, &new_means), log_scale));
    let change = (a.is_finite() && b.is_finite() && a != 0.0).then(|| (b - a) / a.abs());
    let scaled = |values: &[f64]| -> Vec<f64> { values.iter().map(|v| if log_scale { v.ln() } else { *v }).collect() };
    // Each test's shift is new less old, on its scale.
    let negated = |s: Shift| Shift { difference: -s.difference, ..s };
    let (level, shift, reason) = match (old.as_slice(), new.as_slice()) {
        ([], _) | (_, []) => (None, None, Some("not measured on one side".to_string())),
        ([x], [y]) if x.len() < 2 || y.len() < 2 => (
            None,
            None,
            Some("one invocation a side with one repetition: nothing measures how much two runs differ when nothing changed".into()),
        ),
        ([x], [y]) => (Some(Level::Repetitions), two_sample(&scaled(x), &scaled(y)), None),
        ([x], _) => {
            (Some(Level::Invocations), prediction_shift(&scaled(&new_means), scaled(&[mean(x)])[0]).map(negated), None)
        }
        (_, [y]) => (Some(Level::Invocations), prediction_shift(&scaled(&old_means), scaled(&[mean(y)])[0]), None),
        _ => (Some(Level::Invocations), two_sample(&scaled(&old_means), &scaled(&new_means)), None),
    };
    let p_value = shift.map(|s| s.p());
    let ratio_range = shift.filter(|_| log_scale && level == Some(Level::Invocations)).map(|s| {
        let (low, high) = s.range();
        (low.exp(), high.exp())
    });
    let reason = reason.or_else(|| {
        (level.is_some() && p_value.is_none())
            .then(|| "p undefined: no variation within either side's runs to judge the change against".to_string())
    });
    Judgement {
        old: a,
        new: b,
        old_invocations: old.len(),
        new_invocations: new.len(),
        old_repetitions: old.iter().map(Vec::len).sum(),
        new_repetitions: new.iter().map(Vec::len).sum(),
        level,
        log_scale,
        change,
        p_value,
        p_adjusted: None,
        ratio_range,
        verdict: Verdict::Inconclusive,
        reason,
    }
}

/// The verdicts of a comparison's lines, one family: Holm's adjustment over every p-value,
/// then each line's verdict. Each line comes with whether higher is better (a throughput, not a
/// lateness).
pub fn decide<'a>(lines: impl IntoIterator<Item = (&'a mut Judgement, bool)>, rule: Rule) {
    let mut lines: Vec<(&mut Judgement, bool)> = lines.into_iter().collect();
    // The family: the lines tested between invocations. A line of one invocation a side was
    // tested on its repetitions, which miss the noise between invocations: no verdict rests on it.
    let tested: Vec<usize> = (0..lines.len())
        .filter(|i| lines[*i].0.p_value.is_some() && lines[*i].0.level == Some(Level::Invocations))
        .collect();
    let adjusted = holm(&tested.iter().map(|i| lines[*i].0.p_value.unwrap_or(1.0)).collect::<Vec<_>>());
    for (i, p) in tested.into_iter().zip(adjusted) {
        lines[i].0.p_adjusted = Some(p);
    }
    for (j, higher_is_better) in lines {
        j.verdict = match (j.change, j.p_adjusted) {
            (Some(c), _) if c.abs() <= rule.threshold && j.level.is_some() => Verdict::NoChange,
            (Some(_), _) if j.level == Some(Level::Repetitions) => {
                j.reason.get_or_insert_with(|| ONE_INVOCATION.into());
                Verdict::Inconclusive
            }
            (Some(c), Some(p)) if p < rule.alpha => {
                if (c > 0.0) == higher_is_better {
                    Verdict::Improved
                } else {
                    Verdict::Regressed
                }
            }
            (Some(_), Some(_)) => Verdict::NoChange,
            (None, _) if j.level.is_some() => {
                j.reason.get_or_insert_with(|| "no relative change: the old mean is 0".into());
                Verdict::Inconclusive
            }
            _ => Verdict::Inconclusive,
        };
    }
}

/// Why a change beyond the threshold between two single invocations is no verdict.
pub const ONE_INVOCATION: &str = "one invocation a side: its repetitions share that invocation's machine state, and \
identical invocations differ by more than their repetitions do (p is of the repetitions); a verdict needs 2 or more \
results folders a side";

/// The method line both compare commands print, with the size of Holm's family: the lines
/// tested between invocations (after [`decide`]), not those tested on repetitions alone.
pub fn method_line<'a>(lines: impl IntoIterator<Item = &'a Judgement>, rule: Rule) -> String {
    let family = lines.into_iter().filter(|j| j.p_adjusted.is_some()).count();
    format!(
        "method: {METHOD}; alpha {} for the comparison (Holm's family: {family} line(s) tested between invocations), noise threshold {:.1} %",
        rule.alpha,
        rule.threshold * 100.0
    )
}

/// Judges one line alone (a family of one).
pub fn judge_alone(old: &[Vec<f64>], new: &[Vec<f64>], higher_is_better: bool, rule: Rule) -> Judgement {
    let mut j = judge(old, new);
    decide([(&mut j, higher_is_better)], rule);
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: Rule = Rule { threshold: 0.05, alpha: 0.05 };

    /// Invocations of one repetition each.
    fn each(values: &[f64]) -> Vec<Vec<f64>> {
        values.iter().map(|v| vec![*v]).collect()
    }

    #[test]
    fn a_verdict_needs_a_measure_of_noise() {
        let j = judge_alone(&[vec![100.0]], &[vec![200.0]], false, RULE);
        assert_eq!((j.verdict, j.p_value, j.change, j.level), (Verdict::Inconclusive, None, Some(1.0), None));
        assert!(j.reason.unwrap().contains("one invocation a side"));
        assert_eq!(judge_alone(&[], &each(&[1.0, 2.0]), false, RULE).verdict, Verdict::Inconclusive);
    }

    #[test]
    fn a_known_shift_between_invocations_is_found_and_its_direction_named() {
        // Invocation means (100, 102, 98) against (120, 122, 118), on a log scale: Student's t
        // = -12.131, df 4, p = 0.000265 (by numerical integration of the t density).
        let old = vec![vec![99.0, 101.0], vec![102.0, 102.0], vec![97.0, 99.0]];
        let new = vec![vec![120.0, 120.0], vec![121.0, 123.0], vec![118.0, 118.0]];
        let j = judge_alone(&old, &new, false, RULE);
        assert_eq!((j.verdict, j.level), (Verdict::Regressed, Some(Level::Invocations)), "a lateness 20 % higher");
        assert!((j.p_value.unwrap() - 0.000265).abs() < 1e-6, "{j:?}");
        assert!(j.log_scale);
        assert_eq!(j.p_adjusted, j.p_value, "a family of one");
        // On the test's scale: geometric means 99.9867 and 119.9889, +20.0049 %.
        assert!((j.change.unwrap() - 0.200_048_9).abs() < 1e-7, "{j:?}");
        assert_eq!(j.runs(), "3×2 vs 3×2");
        // Its 95 % range of new / old, on the log scale of its test: centred on 1 + change, and
        // clear of 1 as its p is below 0.05.
        let (low, high) = j.ratio_range.unwrap();
        assert!(1.0 < low && low < 1.2 && 1.2 < high, "{low} {high}");
        assert!(((low * high).sqrt() - (1.0 + j.change.unwrap())).abs() < 1e-9, "{low} {high}");
        assert_eq!(judge_alone(&old, &new, true, RULE).verdict, Verdict::Improved, "a throughput 20 % higher");
        assert_eq!(judge_alone(&new, &old, false, RULE).verdict, Verdict::Improved);
    }

    /// Repetitions share their invocation's offset: nested, the invocations' spread is the noise
    /// and +8 % is not significant (Student's t on the logs of 3 means a side: t = -2.446, df 4,
    /// p = 0.0707); pooled as 9 independent runs a side, the same data would give p < 0.001.
    #[test]
    fn repetitions_sharing_an_invocation_offset_are_not_a_change() {
        let invocation = |mean: f64| vec![mean - 0.1, mean, mean + 0.1];
        let old: Vec<Vec<f64>> = [100.0, 104.0, 96.0].map(invocation).to_vec();
        let new: Vec<Vec<f64>> = [108.0, 112.0, 104.0].map(invocation).to_vec();
        let j = judge_alone(&old, &new, false, RULE);
        assert_eq!((j.verdict, j.level), (Verdict::NoChange, Some(Level::Invocations)), "{j:?}");
        assert!((j.p_value.unwrap() - 0.0707).abs() < 1e-4, "{j:?}");
        let pooled = taskmeter_stats::welch_p(&old.concat(), &new.concat()).unwrap();
        assert!(pooled < 0.001, "pooled p {pooled}");
    }

    /// One invocation against several: the prediction test on the invocations' means. On the
    /// logs of means (1, 2, 3) against one of 6: t = (ln 6 - mean) / (s sqrt(1 + 1/3)) = 1.8621,
    /// df 2, p = 0.20364; with a 0 among the values, on the values themselves: means (0, 1, 2)
    /// against 5, t = 4 / sqrt(4/3) = 3.4641, p = 0.07418.
    #[test]
    fn one_invocation_is_judged_against_the_spread_of_several() {
        let j = judge_alone(&each(&[1.0, 2.0, 3.0]), &[vec![5.5, 6.5]], false, RULE);
        assert_eq!((j.level, j.log_scale), (Some(Level::Invocations), true));
        assert!((j.p_value.unwrap() - 0.20364).abs() < 1e-5, "{j:?}");
        assert_eq!(j.verdict, Verdict::NoChange);
        let j = judge_alone(&[vec![6.0]], &each(&[1.0, 2.0, 3.0]), false, RULE);
        assert!((j.p_value.unwrap() - 0.20364).abs() < 1e-5, "either side may be the one");
        // Its range of new / old holds 1 (p above 0.05) and is centred on new / old.
        let (low, high) = j.ratio_range.unwrap();
        assert!(low < 1.0 && 1.0 < high && ((low * high).sqrt() - (1.0 + j.change.unwrap())).abs() < 1e-9);
        let j = judge_alone(&each(&[0.0, 1.0, 2.0]), &[vec![5.0]], false, RULE);
        assert!(!j.log_scale);
        assert!((j.p_value.unwrap() - 0.074180).abs() < 1e-5, "{j:?}");
    }

    /// One invocation a side: its repetitions are tested, and say how much the two invocations
    /// differ beyond them, but a verdict about the code needs the noise between invocations.
    #[test]
    fn one_invocation_a_side_falls_back_on_its_repetitions() {
        // Student's t on the logs: t = -2.9241, df 4, p = 0.043068; a p, and no verdict on it.
        let j = judge_alone(&[vec![1.0, 2.0, 3.0]], &[vec![4.0, 5.0, 6.0]], false, RULE);
        assert_eq!(j.level, Some(Level::Repetitions));
        assert!((j.p_value.unwrap() - 0.043068).abs() < 1e-5, "{j:?}");
        assert_eq!((j.verdict, j.p_adjusted, j.reason.as_deref()), (Verdict::Inconclusive, None, Some(ONE_INVOCATION)));
        assert_eq!(j.ratio_range, None, "no range of new / old from one invocation's repetitions");
        // Far beyond any noise, still no verdict: the noise between invocations is unknown.
        let j = judge_alone(&[vec![1.0, 1.01, 0.99]], &[vec![9.0, 9.1, 8.9]], false, RULE);
        assert!(j.p_value.unwrap() < 1e-6 && j.verdict == Verdict::Inconclusive, "{j:?}");
        // Within the threshold it is no change, as with any line.
        let j = judge_alone(&[vec![1.0, 1.01, 0.99]], &[vec![1.02, 1.03, 1.01]], false, RULE);
        assert_eq!(j.verdict, Verdict::NoChange);
        assert_eq!(j.runs(), "1×3 vs 1×3");
    }

    /// The change is on the scale of the test: invocation means 1 and 9 (geometric mean 3,
    /// arithmetic 5) against 4 and 4 are +33.3 %, the ratio of the geometric means the log-scale
    /// test judged, where the arithmetic means would say -20 %.
    #[test]
    fn the_change_is_the_ratio_of_the_geometric_means_the_test_judged() {
        let j = judge_alone(&each(&[1.0, 9.0]), &each(&[4.0, 4.0]), false, RULE);
        assert!(j.log_scale);
        assert!((j.old - 3.0).abs() < 1e-12 && (j.new - 4.0).abs() < 1e-12, "{j:?}");
        assert!((j.change.unwrap() - 1.0 / 3.0).abs() < 1e-12, "{j:?}");
        // One invocation a side: the geometric means of the repetitions its test compares.
        let j = judge_alone(&[vec![1.0, 9.0]], &[vec![4.0, 4.0]], false, RULE);
        assert!((j.change.unwrap() - 1.0 / 3.0).abs() < 1e-12, "{j:?}");
        // A value at 0: the test is on the values, and so are the means and the change.
        let j = judge_alone(&each(&[0.0, 10.0]), &each(&[4.0, 6.0]), false, RULE);
        assert!(!j.log_scale && (j.old, j.new, j.change) == (5.0, 5.0, Some(0.0)), "{j:?}");
    }

    /// Holm's family is the lines tested between invocations: a line of one invocation a side has
    /// a p of its repetitions and is not in it, nor in the count the method line gives.
    #[test]
    fn the_method_line_counts_the_holm_family() {
        let mut lines = vec![
            judge(&each(&[100.0, 102.0, 98.0]), &each(&[106.0, 108.0, 104.0])),
            judge(&[vec![1.0, 2.0, 3.0]], &[vec![4.0, 5.0, 6.0]]),
            judge(&[vec![1.0]], &[vec![2.0]]),
        ];
        decide(lines.iter_mut().map(|j| (j, false)), RULE);
        assert_eq!(lines.iter().filter(|j| j.p_value.is_some()).count(), 2, "two lines have a p");
        assert!(method_line(&lines, RULE).contains("(Holm's family: 1 line(s) tested between invocations)"));
    }

    #[test]
    fn no_variance_on_either_side_leaves_p_undefined() {
        let j = judge_alone(&[vec![5.0, 5.0]], &[vec![10.0, 10.0]], false, RULE);
        assert_eq!((j.verdict, j.p_value, j.p_adjusted), (Verdict::Inconclusive, None, None), "+100 % is not 'p 1'");
        assert!(j.reason.as_deref().unwrap().contains("p undefined"), "{j:?}");
        // No change at all is no change, p or not.
        assert_eq!(judge_alone(&[vec![5.0, 5.0]], &[vec![5.0, 5.0]], false, RULE).verdict, Verdict::NoChange);
        assert_eq!(judge_alone(&each(&[5.0, 5.0]), &each(&[5.0, 5.0]), false, RULE).verdict, Verdict::NoChange);
    }

    #[test]
    fn noise_and_small_changes_are_no_change() {
        assert_eq!(
            judge_alone(&each(&[100.0, 102.0, 98.0]), &each(&[101.0, 99.0, 100.0]), false, RULE).verdict,
            Verdict::NoChange
        );
        // Significant but within the 5 % threshold.
        let j = judge_alone(&each(&[100.0, 100.1, 99.9]), &each(&[103.0, 103.1, 102.9]), false, RULE);
        assert!(j.p_value.unwrap() < 1e-4 && j.verdict == Verdict::NoChange, "{j:?}");
        // Beyond the threshold but lost in the runs' spread.
        assert_eq!(
            judge_alone(&each(&[100.0, 200.0, 50.0]), &each(&[130.0, 260.0, 60.0]), false, RULE).verdict,
            Verdict::NoChange
        );
    }

    /// Holm over the family: 15 lines at p about 0.02 each would each be a verdict alone; as
    /// one comparison none is (15 x 0.02 > 0.05), while a line at p 0.0003 still is.
    #[test]
    fn a_comparison_is_one_family() {
        // Student's t on the logs of (100, 102, 98) against (106, 108, 104): t = -3.6710, df 4,
        // p = 0.021372.
        let (old, new) = (each(&[100.0, 102.0, 98.0]), each(&[106.0, 108.0, 104.0]));
        assert_eq!(judge_alone(&old, &new, false, RULE).verdict, Verdict::Regressed, "alone");
        let mut lines: Vec<Judgement> = (0..15).map(|_| judge(&old, &new)).collect();
        lines.push(judge(&each(&[100.0, 102.0, 98.0]), &each(&[120.0, 122.0, 118.0])));
        decide(lines.iter_mut().map(|j| (j, false)), RULE);
        assert!(lines[..15].iter().all(|j| j.verdict == Verdict::NoChange), "{:?}", lines[0]);
        // 16 lines: the smallest p (0.000265) x 16 = 0.0042, then the 15 ties at 15 x 0.021372.
        assert!((lines[15].p_adjusted.unwrap() - 16.0 * lines[15].p_value.unwrap()).abs() < 1e-12);
        assert!((lines[0].p_adjusted.unwrap() - 15.0 * 0.021372).abs() < 1e-4);
        assert_eq!(lines[15].verdict, Verdict::Regressed);
    }
}
