//! `compare`'s judgement of one thing measured in two sets of runs (a runtime's lateness at a
//! point, a receiver's throughput, a runtime's METG, a scenario's mean gap): *improved* or
//! *regressed* only when the change is significant between runs (Welch's t-test on the runs'
//! values: the repetitions of one invocation, or several results folders) and larger than the
//! noise threshold; *inconclusive* with one run a side, where nothing measures how much two
//! runs differ when nothing changed. Samples within one run are never taken as independent
//! draws: they share the run's machine state, and a test on them makes any drift "significant".

use taskmeter_stats::welch_p;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Improved,
    Regressed,
    NoChange,
    /// Fewer than two runs on a side: no verdict is possible.
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

/// What `compare` says of its method, at the top of its output.
pub const METHOD: &str = "Welch's t-test between runs (each repetition of `--repeat`, or each results folder of a \
set, is one run); a verdict needs 2 or more runs a side, and a change both significant and beyond the threshold";

/// When a change is a verdict.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// Relative change of the mean below which nothing is a change (0.05 = 5 %).
    pub threshold: f64,
    /// Significance level.
    pub alpha: f64,
}

/// One thing in two sets of runs.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Judgement {
    /// The mean of each side's runs.
    pub old: f64,
    pub new: f64,
    pub old_runs: usize,
    pub new_runs: usize,
    /// (new - old) / |old|.
    pub change: Option<f64>,
    pub p_value: Option<f64>,
    pub verdict: Verdict,
}

/// Judges `old` against `new` (one value per run); `higher_is_better` for a throughput, not for
/// a lateness.
pub fn judge(old: &[f64], new: &[f64], higher_is_better: bool, rule: Rule) -> Judgement {
    let mean = |v: &[f64]| if v.is_empty() { f64::NAN } else { v.iter().sum::<f64>() / v.len() as f64 };
    let (a, b) = (mean(old), mean(new));
    let change = (a.is_finite() && b.is_finite() && a != 0.0).then(|| (b - a) / a.abs());
    let p_value = (old.len() >= 2 && new.len() >= 2).then(|| welch_p(old, new).unwrap_or(1.0));
    let verdict = match (p_value, change) {
        (None, _) => Verdict::Inconclusive,
        (Some(p), Some(c)) if p < rule.alpha && c.abs() > rule.threshold => {
            if (c > 0.0) == higher_is_better {
                Verdict::Improved
            } else {
                Verdict::Regressed
            }
        }
        _ => Verdict::NoChange,
    };
    Judgement { old: a, new: b, old_runs: old.len(), new_runs: new.len(), change, p_value, verdict }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: Rule = Rule { threshold: 0.05, alpha: 0.05 };

    #[test]
    fn a_verdict_needs_two_runs_a_side() {
        let j = judge(&[100.0], &[200.0], false, RULE);
        assert_eq!((j.verdict, j.p_value, j.change), (Verdict::Inconclusive, None, Some(1.0)));
        assert_eq!(judge(&[100.0, 101.0], &[200.0], false, RULE).verdict, Verdict::Inconclusive);
    }

    #[test]
    fn a_known_shift_is_found_and_its_direction_named() {
        // Welch on (100, 102, 98) against (120, 122, 118): t = 20 / sqrt(8/3), df = 4, p < 0.001.
        let (old, new) = ([100.0, 102.0, 98.0], [120.0, 122.0, 118.0]);
        let j = judge(&old, &new, false, RULE);
        assert_eq!(j.verdict, Verdict::Regressed, "a lateness 20 % higher");
        assert!(j.p_value.unwrap() < 0.001, "{j:?}");
        assert!((j.change.unwrap() - 0.2).abs() < 1e-12);
        assert_eq!(judge(&old, &new, true, RULE).verdict, Verdict::Improved, "a throughput 20 % higher");
        assert_eq!(judge(&new, &old, false, RULE).verdict, Verdict::Improved);
    }

    #[test]
    fn no_shift_noise_and_small_changes_are_no_change() {
        assert_eq!(judge(&[100.0, 102.0, 98.0], &[101.0, 99.0, 100.0], false, RULE).verdict, Verdict::NoChange);
        // Significant but within the 5 % threshold.
        assert_eq!(judge(&[100.0, 100.1, 99.9], &[103.0, 103.1, 102.9], false, RULE).verdict, Verdict::NoChange);
        // Beyond the threshold but lost in the runs' spread.
        assert_eq!(judge(&[100.0, 200.0, 50.0], &[130.0, 260.0, 60.0], false, RULE).verdict, Verdict::NoChange);
        // Identical runs: no variance at all is no evidence of a change.
        assert_eq!(judge(&[5.0, 5.0], &[5.0, 5.0], false, RULE).verdict, Verdict::NoChange);
    }
}
