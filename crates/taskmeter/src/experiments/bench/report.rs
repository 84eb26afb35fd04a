//! What `taskmeter bench` writes: `bench.json`, `report.txt` (the Benchee-layout console report
//! of taskmeter-record), `report.html`, and the CSV and Markdown exports (one line per scenario
//! and input).

use crate::report::dashboard as dash;
use crate::report::figure::{bar_chart, percentile_chart, Axis, Bars, Chart, Distribution, Style, Unit};
use crate::report::format::format_ns;
use crate::report::page::{Block, Report, Section};
use crate::report::tables::Table;
use taskmeter_analysis::histogram;
use taskmeter_model::bench::BenchRecord;
use taskmeter_record::console;
use taskmeter_record::report::ScenarioResult;
use taskmeter_stats::format::duration;
use taskmeter_stats::Interval;

/// Fewer units than this in a scenario's window, and its statistics are flagged: a median of 3
/// gaps says little.
pub const FEW_UNITS: u64 = 30;

/// The scenarios and inputs with fewer than [`FEW_UNITS`] units in their window.
pub fn few_units(record: &BenchRecord) -> Vec<String> {
    let few = record.report.results.iter().filter(|r| r.error.is_none() && r.measured.units < FEW_UNITS);
    few.map(|r| {
        format!(
            "{}: only {} unit(s) completed in the measurement window: its statistics say little (fewer than \
             {FEW_UNITS}; a longer --duration gives more)",
            label(r),
            r.measured.units
        )
    })
    .collect()
}

/// What `taskmeter bench` prints: the console report, then a warning per scenario with few units.
pub fn console(record: &BenchRecord) -> String {
    let mut out = console::render(&record.report);
    for warning in few_units(record) {
        out.push_str(&format!("warning: {warning}\n"));
    }
    out
}

/// A scenario's name with its input, if any.
fn label(r: &ScenarioResult) -> String {
    match &r.input {
        Some(input) => format!("{} ({input})", r.scenario),
        None => r.scenario.clone(),
    }
}

/// A scenario and its input, as the dashboards name them.
fn subject(r: &ScenarioResult) -> dash::Subject {
    let mut subject = vec![("scenario", r.scenario.clone())];
    subject.extend(r.input.clone().map(|input| ("input", input)));
    subject
}

/// The dashboards' figures of a bench: per scenario and input, what its table shows (units per
/// second, the gap's average, median and 99th percentile) and the latency's average and 99th
/// percentile where units had an id; one invocation, so no range.
pub fn benchmarks(record: &BenchRecord) -> Vec<dash::Benchmark> {
    let mut out = Vec::new();
    for r in record.report.results.iter().filter(|r| r.error.is_none()) {
        let ns = |measure: &str, value: f64| {
            dash::Benchmark::plain(subject(r), measure, dash::Unit::Nanoseconds, false, value)
        };
        out.extend(
            r.measured.ips.map(|v| dash::Benchmark::plain(subject(r), "ips", dash::Unit::PerSecond("units"), true, v)),
        );
        if let Some(gap) = &r.measured.gap {
            out.extend([
                ns("gap average", gap.mean),
                ns("gap median", gap.median as f64),
                ns("gap p99", gap.p99 as f64),
            ]);
        }
        if let Some(latency) = &r.measured.latency {
            out.extend([ns("latency average", latency.mean), ns("latency p99", latency.p99 as f64)]);
        }
    }
    out
}

/// Every scenario's gaps as cumulative buckets, with their exact sum.
pub fn distributions(record: &BenchRecord) -> Vec<dash::Distribution> {
    let mut out = Vec::new();
    for r in record.report.results.iter().filter(|r| r.error.is_none()) {
        let (Some(stored), Some(gap)) = (&r.histograms, &r.measured.gap) else { continue };
        let sum = Some((gap.mean * gap.count as f64, gap.count));
        out.extend(dash::Distribution::of_stored(subject(r), "gap", &stored.gap, sum));
    }
    out
}

impl Report for BenchRecord {
    fn benchmarks(&self) -> Vec<dash::Benchmark> {
        benchmarks(self)
    }

    fn distributions(&self) -> Vec<dash::Distribution> {
        distributions(self)
    }

    fn csv(&self) -> String {
        summary_csv(self)
    }

    fn markdown(&self) -> String {
        markdown(self)
    }

    /// The Benchee-layout console report (a bench folder has no summary.csv: `--export-csv`).
    fn derived(&self) -> Vec<(&'static str, String)> {
        vec![("report.txt", console::render(&self.report))]
    }

    fn title(&self) -> String {
        format!("taskmeter bench of {}", self.header.started_at)
    }

    fn settings(&self) -> Vec<(String, String)> {
        let c = &self.report.config;
        let mut items = vec![
            ("warm-up".to_string(), duration(c.warmup_ns as f64)),
            ("measured".into(), duration(c.time_ns as f64)),
            ("drain".into(), format!("up to {} per scenario and input", duration(c.drain_ns as f64))),
        ];
        items.extend(self.scenarios.iter().map(|s| (format!("scenario {}", s.name), s.value.clone())));
        items.extend(self.inputs.iter().map(|s| (format!("input {}", s.name), s.value.clone())));
        items
    }

    /// Each scenario's notes (as the console report shows them), then [`few_units`].
    fn warnings(&self) -> Vec<String> {
        let notes = self.report.results.iter().filter_map(|r| {
            let notes = console::notes(r);
            (!notes.is_empty()).then(|| format!("{}: {}", label(r), notes.join("; ")))
        });
        notes.chain(few_units(self)).collect()
    }

    /// The gap's distribution per scenario (a percentile plot), and its median and p99 as bars.
    fn figures(&self) -> Result<Vec<Chart>, String> {
        let results: Vec<&ScenarioResult> = self.report.results.iter().filter(|r| r.measured.gap.is_some()).collect();
        if results.is_empty() {
            return Ok(Vec::new());
        }
        let names: Vec<String> = results.iter().map(|r| label(r)).collect();
        let mut charts = Vec::new();
        let lines: Vec<Distribution> = results
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let h = histogram::decode(&r.histograms.as_ref()?.gap).ok()?;
                let cdf = histogram::cdf(&h).into_iter().map(|(v, f)| (v as f64, f)).collect();
                Some(Distribution { name: names[i].clone(), style: Style::other(i), cdf, count: h.len() })
            })
            .collect();
        if !lines.is_empty() {
            let title = "Gap between completions by percentile".to_string();
            let svg = percentile_chart(&title, &Axis::new("gap", Unit::Nanos), &lines)?;
            charts.push(Chart { group: "gap".into(), file: "gap-percentiles.svg".into(), title, svg });
        }
        let stat = |pick: fn(&taskmeter_record::report::Stats) -> f64| -> Vec<Option<Interval>> {
            results.iter().map(|r| r.measured.gap.as_ref().map(|g| Interval::single(pick(g)))).collect()
        };
        let groups = [
            Bars::of_estimates("median", Style::other(0), &stat(|g| g.median as f64)),
            Bars::of_estimates("99th %", Style::other(1), &stat(|g| g.p99 as f64)),
        ];
        let title = "Gap between completions: median and 99th percentile".to_string();
        let axis = Axis::new("gap", Unit::Nanos);
        charts.push(Chart {
            group: "gap".into(),
            file: "gap.svg".into(),
            title: title.clone(),
            svg: bar_chart(&title, &axis, &names, &groups)?,
        });
        Ok(charts)
    }

    fn sections(&self) -> Vec<Section> {
        let report = &self.report;
        let mut sections = Vec::new();
        for group in console::input_groups(report) {
            let rows: Vec<&ScenarioResult> = report.results.iter().filter(|r| r.input.as_deref() == group).collect();
            let fastest = rows.iter().filter_map(|r| r.measured.ips).fold(f64::NAN, f64::max);
            let header = [
                "name",
                "ips",
                "average",
                "deviation",
                "median",
                "99th %",
                "min",
                "max",
                "vs fastest",
                "measured",
                "warm-up",
                "after",
                "invocations",
            ];
            let mut table =
                Table { header: header.map(String::from).to_vec(), lines: Vec::new(), without_statistics: Vec::new() };
            for r in &rows {
                let Some(g) = &r.measured.gap else {
                    let why = r.error.clone().unwrap_or_else(|| "no unit completed in the measurement window".into());
                    table.without_statistics.push((r.scenario.clone(), why));
                    continue;
                };
                let slower = r.measured.ips.map_or("-".into(), |x| {
                    if x >= fastest {
                        "fastest".into()
                    } else {
                        format!("{:.2}x slower", fastest / x)
                    }
                });
                table.lines.push(vec![
                    r.scenario.clone(),
                    console::ips(r.measured.ips),
                    duration(g.mean),
                    g.deviation_pct.map_or("-".into(), |d| format!("±{d:.2}%")),
                    duration(g.median as f64),
                    duration(g.p99 as f64),
                    duration(g.min as f64),
                    duration(g.max as f64),
                    slower,
                    r.measured.units.to_string(),
                    r.measured.outside.warmup_units.to_string(),
                    r.measured.outside.after_units.to_string(),
                    r.invocations.to_string(),
                ]);
            }
            let mut blocks = vec![Block::Table(String::new(), table, "results")];
            let latency: Vec<Vec<String>> = rows
                .iter()
                .filter_map(|r| {
                    let l = r.measured.latency.as_ref()?;
                    Some(vec![
                        r.scenario.clone(),
                        l.count.to_string(),
                        duration(l.mean),
                        duration(l.median as f64),
                        duration(l.p99 as f64),
                        duration(l.max as f64),
                    ])
                })
                .collect();
            if !latency.is_empty() {
                let header = ["name", "units", "average", "median", "99th %", "maximum"].map(String::from).to_vec();
                let t = Table { header, lines: latency, without_statistics: Vec::new() };
                blocks.push(Block::Table("Latency (start to complete)".into(), t, "results"));
            }
            let (id, heading) = match group {
                Some(input) => (format!("input-{input}"), format!("With input {input}")),
                None => ("results".into(), "Results".into()),
            };
            sections.push(Section { id, heading, blocks });
        }
        sections.push(Section {
            id: "figures".into(),
            heading: "Figures".into(),
            blocks: vec![Block::Figures("gap".into())],
        });
        sections.push(Section {
            id: "reading".into(),
            heading: "How to read this".into(),
            blocks: vec![Block::Text(READING.into())],
        });
        sections
    }
}

const READING: &str = "A unit completes at each record() (or the first complete(id) of a started id), timestamped \
    at the call on CLOCK_MONOTONIC. The gap of a unit is the time since the previous unit; ips = 1 / mean gap; \
    deviation = sample standard deviation (n - 1) / mean; percentiles are exact nearest-rank values. Only units \
    completed inside the measurement window count; warm-up and after are counted apart.";

const COLUMNS: [&str; 12] = [
    "scenario",
    "input",
    "ips",
    "average_ns",
    "deviation_pct",
    "median_ns",
    "p99_ns",
    "units",
    "invocations",
    "events_dropped",
    "malformed_batches",
    "error",
];

/// One line of figures per scenario and input (empty where there is none).
fn cells(r: &ScenarioResult, format_duration: impl Fn(f64) -> String) -> Vec<String> {
    let gap = r.measured.gap.as_ref();
    let opt = |v: Option<String>| v.unwrap_or_default();
    let delivery = r.delivery.as_ref();
    vec![
        r.scenario.clone(),
        r.input.clone().unwrap_or_default(),
        opt(r.measured.ips.map(|v| format!("{v:.3}"))),
        opt(gap.map(|g| format_duration(g.mean))),
        opt(gap.and_then(|g| g.deviation_pct).map(|d| format!("{d:.2}"))),
        opt(gap.map(|g| format_duration(g.median as f64))),
        opt(gap.map(|g| format_duration(g.p99 as f64))),
        r.measured.units.to_string(),
        r.invocations.to_string(),
        opt(delivery.map(|d| d.events_dropped_by_clients.to_string())),
        opt(delivery.map(|d| d.malformed_batches.to_string())),
        r.error.clone().unwrap_or_default(),
    ]
}

/// `--export-csv`: durations in ns.
pub fn summary_csv(record: &BenchRecord) -> String {
    let quote = |field: &str| {
        if field.contains([',', '"', '\n']) {
            format!("\"{}\"", field.replace('"', "\"\""))
        } else {
            field.to_string()
        }
    };
    let mut out = format!("{}\n", COLUMNS.join(","));
    for r in &record.report.results {
        let line: Vec<String> = cells(r, |ns| format!("{ns:.1}")).iter().map(|c| quote(c)).collect();
        out.push_str(&format!("{}\n", line.join(",")));
    }
    out
}

/// `--export-markdown`: the results as one table.
pub fn markdown(record: &BenchRecord) -> String {
    let header = [
        "scenario",
        "input",
        "ips",
        "average",
        "deviation %",
        "median",
        "99th %",
        "units",
        "invocations",
        "dropped",
        "malformed",
        "error",
    ];
    let mut out = format!(
        "**taskmeter bench** {}\n\n| {} |\n|:---|{}\n",
        record.header.started_at,
        header.join(" | "),
        "---:|".repeat(header.len() - 1)
    );
    for r in &record.report.results {
        let line: Vec<String> = cells(r, format_ns).iter().map(|c| c.replace('|', "\\|")).collect();
        out.push_str(&format!("| {} |\n", line.join(" | ")));
    }
    out
}
