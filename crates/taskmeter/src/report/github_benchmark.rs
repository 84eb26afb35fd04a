//! `--export-github-benchmark-smaller FILE` and `--export-github-benchmark-bigger FILE`:
//! github-action-benchmark's custom format (`tool: customSmallerIsBetter` and
//! `customBiggerIsBetter`), a JSON array of `{"name", "unit", "value", "range", "extra"}` (its
//! `src/extract.ts`: name, unit and value required, range and extra optional strings). The tool
//! says which way is better for the whole file, so each file holds the figures of one way: lower
//! is better (lateness, delay, round trips, METG, gaps) or higher (throughputs, ratios to 1
//! sender, efficiency, ips).

use super::dashboard::{one_way, short, Benchmark, Dashboard};
use serde::Serialize;

#[derive(Serialize)]
struct Entry {
    name: String,
    unit: String,
    value: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    range: Option<String>,
    extra: String,
}

/// The file for the figures that way round (`higher_is_better`: `customBiggerIsBetter`); an
/// empty list where the dashboard has none (the action refuses an empty file).
pub fn render(dashboard: &Dashboard, higher_is_better: bool) -> String {
    let entries: Vec<Entry> = one_way(&dashboard.benchmarks, higher_is_better)
        .filter(|b| b.value.is_finite())
        .map(|b| Entry {
            name: name(&dashboard.source, b),
            unit: b.unit.said(),
            value: b.value,
            range: b.range.map(|range| range_text(b, range)),
            extra: extra(dashboard, b),
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&entries).expect("entries serialise");
    text.push('\n');
    text
}

/// "sleep / thread / lateness p50", "net / thread / senders=4 / throughput": the source, the
/// subject (its first part, the runtime, receiver or scenario, a point and what a comparison
/// judged as they are, the others as key=value) and the measure. A chart per name: it stays the same from run to run.
pub fn name(source: &str, b: &Benchmark) -> String {
    let mut parts = vec![source.to_string()];
    for (i, (key, value)) in b.subject.iter().enumerate() {
        match *key {
            _ if value == "-" => {}
            "experiment" | "runtime" | "receiver" | "scenario" | "point" | "metric" | "figure" => {
                parts.push(value.clone())
            }
            _ if i == 0 => parts.push(value.clone()),
            _ => parts.push(format!("{key}={value}")),
        }
    }
    parts.push(b.measure.clone());
    parts.join(" / ")
}

/// "± 123.4" (the action reads the half width, and rescales it with the value), or on a log
/// scale "95 % range 0.91 to 1.12".
fn range_text(b: &Benchmark, (low, high): (f64, f64)) -> String {
    if b.symmetric {
        format!("± {}", short((high - low) / 2.0))
    } else {
        format!("95 % range {} to {}", short(low), short(high))
    }
}

/// The tooltip's lines: what the range is, the verdict, the notes, then the environment.
fn extra(dashboard: &Dashboard, b: &Benchmark) -> String {
    let mut lines = Vec::new();
    if b.range.is_some() {
        lines.push(match b.verdict {
            Some(_) => "range: 95 % range of new / old from the test between invocations".to_string(),
            None => "range: 95 % range for another invocation's value, from the repetitions".to_string(),
        });
    }
    lines.extend(b.verdict.as_ref().map(|v| format!("verdict: {v}")));
    lines.extend(b.notes.iter().map(|(term, value)| format!("{term}: {value}")));
    lines.extend(dashboard.environment.iter().map(|(term, value)| format!("{term}: {value}")));
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::dashboard::Unit;

    fn dashboard() -> Dashboard {
        let subject = |runtime: &str| vec![("runtime", runtime.to_string()), ("point", "units=5".to_string())];
        let mut p50 = Benchmark::plain(subject("thread"), "lateness p50", Unit::Nanoseconds, false, 51234.5);
        p50.range = Some((50000.0, 52469.0));
        let rate = Benchmark::plain(subject("thread"), "throughput", Unit::PerSecond("iterations"), true, 999.0);
        Dashboard {
            source: "volume".into(),
            experiment: Some("volume".into()),
            compared: false,
            benchmarks: vec![p50, rate],
            distributions: Vec::new(),
            environment: vec![("machine", "vm".into()), ("taskmeter_version", "0.1.0".into())],
        }
    }

    #[test]
    fn each_file_holds_one_way_with_its_fields() {
        let smaller: serde_json::Value = serde_json::from_str(&render(&dashboard(), false)).unwrap();
        assert_eq!(smaller.as_array().unwrap().len(), 1);
        let entry = &smaller[0];
        assert_eq!(entry["name"], "volume / thread / units=5 / lateness p50");
        assert_eq!((entry["unit"].as_str(), entry["value"].as_f64()), (Some("ns"), Some(51234.5)));
        assert_eq!(entry["range"], "± 1234.5");
        let extra = entry["extra"].as_str().unwrap();
        assert!(extra.contains("machine: vm") && extra.contains("taskmeter_version: 0.1.0"), "{extra}");
        let bigger: serde_json::Value = serde_json::from_str(&render(&dashboard(), true)).unwrap();
        assert_eq!(bigger[0]["unit"], "iterations/s");
        assert_eq!(bigger[0].get("range"), None, "no range without repetitions");
    }
}
