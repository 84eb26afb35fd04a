//! Whether a bench record read back holds together: its results against its scenarios and inputs.

use crate::experiments::consistency::{duplicates, listed, shown, Consistent};
use taskmeter_model::bench::BenchRecord;

impl Consistent for BenchRecord {
    fn problems(&self) -> Vec<String> {
        bench_problems(self)
    }
}

fn bench_problems(record: &BenchRecord) -> Vec<String> {
    let mut problems = Vec::new();
    let label = |scenario: &str, input: Option<&str>| match input {
        Some(input) => format!("scenario {} with input {}", shown(scenario), shown(input)),
        None => format!("scenario {}", shown(scenario)),
    };
    for (i, result) in record.report.results.iter().enumerate() {
        let name = format!("result {i} ({})", label(&result.scenario, result.input.as_deref()));
        if !record.scenarios.iter().any(|s| s.name == result.scenario) {
            problems.push(format!("{name}: its scenario is not in scenarios"));
        }
        match &result.input {
            Some(input) if !record.inputs.iter().any(|i| i.name == *input) => {
                problems.push(format!("{name}: its input is not in inputs"));
            }
            None if !record.inputs.is_empty() => {
                problems.push(format!("{name}: has no input, but the bench has inputs"))
            }
            _ => {}
        }
        // Every unit completed in the window gives one gap (`taskmeter_record::analysis`).
        let gaps = result.measured.gap.as_ref().map_or(0, |g| g.count);
        if gaps != result.measured.units {
            problems.push(format!("{name}: measured {} units, but gap.count is {gaps}", result.measured.units));
        }
    }
    let keys = record.report.results.iter().map(|r| (r.scenario.as_str(), r.input.as_deref()));
    for ((scenario, input), results) in duplicates(keys) {
        problems.push(format!(
            "{} has {} results (results {})",
            label(scenario, input),
            results.len(),
            listed(&results)
        ));
    }
    problems
}
