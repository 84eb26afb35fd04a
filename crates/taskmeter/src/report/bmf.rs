//! `--export-bmf FILE`: Bencher Metric Format, the JSON `bencher run --adapter json` reads:
//! `{"BENCHMARK": {"MEASURE": {"value", "lower_value", "upper_value"}}}` (its JSON Schema,
//! tests/exports/bmf.schema.json, has `value` required and the bounds optional). A benchmark is
//! the source and the subject (`sleep / thread`), a measure the figure's slug (`lateness-p50`,
//! `throughput`: Bencher creates a measure the first time it sees its slug), its bounds
//! taskmeter's own 95 % range where there is one. The environment is Bencher's testbed
//! (`bencher run --testbed`), not in the file.

use super::dashboard::{joined_words, Benchmark, Dashboard};
use serde_json::{Map, Value};

/// The file: every benchmark with its measures, in the dashboard's order.
pub fn render(dashboard: &Dashboard) -> String {
    let mut benchmarks = Map::new();
    for b in dashboard.benchmarks.iter().filter(|b| b.value.is_finite()) {
        let mut metric = Map::new();
        metric.insert("value".into(), b.value.into());
        if let Some((low, high)) = b.range {
            metric.insert("lower_value".into(), low.into());
            metric.insert("upper_value".into(), high.into());
        }
        let measures = benchmarks.entry(benchmark_name(&dashboard.source, b)).or_insert_with(|| Map::new().into());
        if let Value::Object(measures) = measures {
            measures.insert(slug(&b.measure), metric.into());
        }
    }
    let mut text = serde_json::to_string_pretty(&Value::Object(benchmarks)).expect("BMF serialises");
    text.push('\n');
    text
}

/// "sleep / thread", "net / thread / senders=4": the source and the subject, as the
/// github-action-benchmark export names them, without the measure.
fn benchmark_name(source: &str, b: &Benchmark) -> String {
    let full = super::github_benchmark::name(source, b);
    full.strip_suffix(&format!(" / {}", b.measure)).unwrap_or(&full).to_string()
}

/// A measure's slug, as Bencher's are: lower case ASCII letters and digits between dashes, at
/// most 64 characters ("lateness p50" is `lateness-p50`, "overhead per task at 1.00 µs"
/// `overhead-per-task-at-1-00-us`).
pub fn slug(measure: &str) -> String {
    let slug: String = joined_words(measure, '-').chars().take(64).collect();
    slug.trim_end_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::dashboard::Unit;

    #[test]
    fn a_benchmark_holds_its_measures_with_their_bounds() {
        let subject = || vec![("receiver", "thread".to_string()), ("senders", "4".to_string())];
        let mut throughput = Benchmark::plain(subject(), "throughput", Unit::PerSecond("messages"), true, 100.0);
        throughput.range = Some((90.0, 110.0));
        let p99 = Benchmark::plain(subject(), "round trip p99", Unit::Nanoseconds, false, 5000.0);
        let dashboard = Dashboard {
            source: "net".into(),
            experiment: Some("net".into()),
            compared: false,
            benchmarks: vec![throughput, p99],
            distributions: Vec::new(),
            environment: Vec::new(),
        };
        let bmf: Value = serde_json::from_str(&render(&dashboard)).unwrap();
        let measures = &bmf["net / thread / senders=4"];
        assert_eq!(
            measures["throughput"],
            serde_json::json!({"value": 100.0, "lower_value": 90.0, "upper_value": 110.0})
        );
        assert_eq!(measures["round-trip-p99"], serde_json::json!({"value": 5000.0}));
    }

    #[test]
    fn a_slug_is_lower_case_letters_and_digits_between_dashes() {
        assert_eq!(slug("overhead per task at 1.00 µs"), "overhead-per-task-at-1-00-us");
        assert_eq!(slug("new/old ratio"), "new-old-ratio");
        assert_eq!(slug("METG"), "metg");
        assert_eq!(slug(&"x ".repeat(40)).len(), 63, "64 at most, no dash at the end");
    }
}
