//! Whether a granularity record read back holds together: one summary per runtime that ran, with
//! a value per grain.

use crate::experiments::consistency::{duplicates, first_seen, listed, shown, unique, Consistent};
use taskmeter_model::granularity::GrainRecord;

impl Consistent for GrainRecord {
    fn problems(&self) -> Vec<String> {
        granularity_problems(self)
    }
}

fn granularity_problems(record: &GrainRecord) -> Vec<String> {
    let s = &record.settings;
    let grains = s.grains_ns.len();
    let runtimes = unique(&s.runtimes);
    let mut problems = Vec::new();
    for (i, run) in record.runs.iter().enumerate() {
        let name = format!("run {i} ({}, repetition {})", shown(&run.runtime), run.repetition);
        if !runtimes.contains(&&run.runtime) {
            problems.push(format!("{name}: its runtime is not in settings.runtimes"));
        }
        if !(1..=s.repeat).contains(&run.repetition) {
            problems
                .push(format!("{name}: repetition {} is outside 1 to {} (settings.repeat)", run.repetition, s.repeat));
        }
        // The worker sends the plan's grains in order, and no more (the protocol checks each).
        if run.points.len() > grains {
            problems.push(format!("{name}: has {} grains, but settings.grains_ns has {grains}", run.points.len()));
        }
        let mismatch = run.points.iter().zip(&s.grains_ns).position(|(p, ns)| p.measured.grain_ns != *ns);
        if let Some(at) = mismatch {
            problems.push(format!(
                "{name}: grain {at} is {} ns, but settings.grains_ns[{at}] is {} ns",
                run.points[at].measured.grain_ns, s.grains_ns[at]
            ));
        }
    }
    let keys = record.runs.iter().map(|r| (r.runtime.as_str(), r.repetition));
    for ((runtime, repetition), runs) in duplicates(keys) {
        problems.push(format!(
            "{} repetition {repetition} has {} runs (runs {})",
            shown(runtime),
            runs.len(),
            listed(&runs)
        ));
    }
    for (runtime, copies) in duplicates(record.summaries.iter().map(|s| s.runtime.as_str())) {
        problems.push(format!("{} has {} summaries (summaries {})", shown(runtime), copies.len(), listed(&copies)));
    }
    // One summary per runtime that ran, over its runs that measured every grain.
    for summary in &record.summaries {
        let runtime = shown(&summary.runtime);
        let runs: Vec<_> = record.runs.iter().filter(|r| r.runtime == summary.runtime).collect();
        let whole = runs.iter().filter(|r| r.error.is_none() && r.points.len() == grains).count();
        if runs.is_empty() {
            problems.push(format!("the summary of {runtime} has no runs"));
        } else if summary.repetitions as usize != whole {
            problems.push(format!(
                "the summary of {runtime}: repetitions is {}, but {whole} of its runs measured every grain",
                summary.repetitions
            ));
        }
        let per_grain = [
            ("efficiency", summary.efficiency.len()),
            ("overhead_ns", summary.overhead_ns.len()),
            // Absent from the first records that have no granularity per grain.
            ("granularity_ns", if summary.granularity_ns.is_empty() { grains } else { summary.granularity_ns.len() }),
        ];
        for (field, len) in per_grain.into_iter().filter(|(_, len)| *len != grains) {
            problems.push(format!(
                "the summary of {runtime}: {field} has length {len}, but settings.grains_ns has length {grains}"
            ));
        }
    }
    for runtime in first_seen(record.runs.iter().map(|r| r.runtime.as_str())) {
        if !record.summaries.iter().any(|s| s.runtime == runtime) {
            problems.push(format!("{} has runs but no summary", shown(runtime)));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskmeter_machine::env::Environment;
    use taskmeter_model::granularity::{GrainRun, GrainSettings, GrainSummary};
    use taskmeter_model::header::Record;

    #[test]
    fn a_granularity_record_has_one_summary_per_runtime_that_ran_with_a_value_per_grain() {
        let settings = GrainSettings {
            runtimes: vec!["smol".into(), "thread".into()],
            pattern: taskmeter_protocol::Pattern::Trivial,
            width: 1,
            steps: 1,
            grains_ns: vec![1000, 100],
            warmup_ns: 0,
            duration_ns: 1,
            calibrate_ns: 1,
            repeat: 1,
        };
        let run = |runtime: &str| GrainRun {
            runtime: runtime.into(),
            repetition: 1,
            runtime_version: None,
            points: Vec::new(),
            metg: None,
            error: Some("the worker failed".into()),
            interrupted: false,
            wall_ns: 0,
        };
        let summary = |runtime: &str, grains: usize| GrainSummary {
            runtime: runtime.into(),
            repetitions: 0,
            cores: None,
            metg_ns: None,
            metg_bound: None,
            efficiency: vec![None; grains],
            granularity_ns: vec![None; grains],
            overhead_ns: vec![None; grains],
        };
        let header = GrainRecord::new_header(Vec::new(), String::new(), Environment::default());
        let good = GrainRecord {
            header,
            settings,
            runs: vec![run("smol")],
            summaries: vec![summary("smol", 2)],
            skipped: Vec::new(),
        };
        assert_eq!(granularity_problems(&good), Vec::<String>::new());

        let mut bad = good.clone();
        bad.runs.push(run("thread"));
        bad.summaries = vec![summary("smol", 1), summary("go", 2)];
        assert_eq!(
            granularity_problems(&bad),
            [
                "the summary of smol: efficiency has length 1, but settings.grains_ns has length 2",
                "the summary of smol: overhead_ns has length 1, but settings.grains_ns has length 2",
                "the summary of smol: granularity_ns has length 1, but settings.grains_ns has length 2",
                "the summary of go has no runs",
                "thread has runs but no summary",
            ]
        );
    }
}
