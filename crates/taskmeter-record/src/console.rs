//! The console report, in Benchee's layout, plus the accounting Benchee does not have.

use crate::format::duration;
use crate::report::{Config, Report, ScenarioResult, Stats};
use std::fmt::Write;

/// The configuration block printed before a run.
pub fn preamble(config: &Config, scenarios: usize) -> String {
    let jobs = (scenarios * config.inputs.len().max(1)) as u64;
    let inputs = if config.inputs.is_empty() { "none specified".to_string() } else { config.inputs.join(", ") };
    format!(
        "Benchmark suite executing with the following configuration:\nwarmup: {}\ntime: {}\ndrain: up to {}\n\
         inputs: {inputs}\nEstimated total run time: {} (+ up to {} of drain)\n",
        duration(config.warmup_ns as f64),
        duration(config.time_ns as f64),
        duration(config.drain_ns as f64),
        duration((jobs * (config.warmup_ns + config.time_ns)) as f64),
        duration((jobs * config.drain_ns) as f64),
    )
}

/// The inputs of the results in the order they ran (None: no input).
pub fn input_groups(report: &Report) -> Vec<Option<&str>> {
    let mut groups: Vec<Option<&str>> = Vec::new();
    for r in &report.results {
        if !groups.contains(&r.input.as_deref()) {
            groups.push(r.input.as_deref());
        }
    }
    groups
}

/// The line printed when a scenario starts, as Benchee prints it.
pub fn progress(scenario: &str, input: Option<&str>) -> String {
    match input {
        Some(input) => format!("Benchmarking {scenario} with input {input} ..."),
        None => format!("Benchmarking {scenario} ..."),
    }
}

/// The whole report: per input, the statistics, the comparison, latencies, extended statistics,
/// and what was counted outside the measurement.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    for group in input_groups(report) {
        let rows: Vec<&ScenarioResult> = report.results.iter().filter(|r| r.input.as_deref() == group).collect();
        if let Some(input) = group {
            let _ = writeln!(out, "\n##### With input {input} #####");
        }
        render_group(&mut out, &rows, report.config.extended_statistics);
    }
    if !report.complete {
        out.push_str("\nThe run was interrupted: these results hold what was measured before it.\n");
    }
    out
}

fn render_group(out: &mut String, rows: &[&ScenarioResult], extended: bool) {
    let w = rows.iter().map(|r| r.scenario.chars().count()).max().unwrap_or(0).max(4) + 2;
    let ok: Vec<&&ScenarioResult> = rows.iter().filter(|r| r.measured.gap.is_some()).collect();
    let _ = writeln!(
        out,
        "\n{:<w$}{:>10}{:>15}{:>11}{:>15}{:>15}",
        "Name", "ips", "average", "deviation", "median", "99th %"
    );
    for r in &ok {
        let g = r.measured.gap.as_ref().unwrap();
        let _ = writeln!(
            out,
            "{:<w$}{:>10}{:>15}{:>11}{:>15}{:>15}",
            r.scenario,
            ips(r.measured.ips),
            duration(g.mean),
            g.deviation_pct.map_or("-".into(), |d| format!("±{d:.2}%")),
            duration(g.median as f64),
            duration(g.p99 as f64)
        );
    }
    for r in rows.iter().filter(|r| r.measured.gap.is_none()) {
        let why = r.error.clone().unwrap_or_else(|| "no unit completed in the measurement window".into());
        let _ = writeln!(out, "{:<w$}{why}", r.scenario);
    }

    let mut ranked = ok.clone();
    ranked.sort_by(|a, b| b.measured.ips.partial_cmp(&a.measured.ips).unwrap_or(std::cmp::Ordering::Equal));
    if ranked.len() > 1 {
        let best = ranked[0];
        let _ = writeln!(out, "\nComparison:\n{:<w$}{:>10}", best.scenario, ips(best.measured.ips));
        for r in &ranked[1..] {
            let (factor, slower) = match (best.measured.ips, r.measured.ips) {
                (Some(b), Some(x)) if x > 0.0 => {
                    (b / x, r.measured.gap.as_ref().unwrap().mean - best.measured.gap.as_ref().unwrap().mean)
                }
                _ => (f64::INFINITY, 0.0),
            };
            let _ = writeln!(
                out,
                "{:<w$}{:>10} - {factor:.2}x slower +{}",
                r.scenario,
                ips(r.measured.ips),
                duration(slower)
            );
        }
    }

    if ok.iter().any(|r| r.measured.latency.is_some()) {
        let _ = writeln!(
            out,
            "\nLatency (start -> complete):\n{:<w$}{:>10}{:>15}{:>15}{:>15}{:>15}",
            "Name", "units", "average", "median", "99th %", "maximum"
        );
        for r in ok.iter().filter(|r| r.measured.latency.is_some()) {
            let l = r.measured.latency.as_ref().unwrap();
            let _ = writeln!(
                out,
                "{:<w$}{:>10}{:>15}{:>15}{:>15}{:>15}",
                r.scenario,
                l.count,
                duration(l.mean),
                duration(l.median as f64),
                duration(l.p99 as f64),
                duration(l.max as f64)
            );
        }
    }

    if extended {
        let _ = writeln!(
            out,
            "\nExtended statistics:\n{:<w$}{:>15}{:>15}{:>15}{:>25}",
            "Name", "minimum", "maximum", "sample size", "mode"
        );
        for r in &ok {
            let g: &Stats = r.measured.gap.as_ref().unwrap();
            let mode = if g.mode.is_empty() {
                "None".to_string()
            } else {
                g.mode.iter().map(|m| duration(*m as f64)).collect::<Vec<_>>().join(", ")
            };
            let _ = writeln!(
                out,
                "{:<w$}{:>15}{:>15}{:>15}{mode:>25}",
                r.scenario,
                duration(g.min as f64),
                duration(g.max as f64),
                g.count
            );
        }
    }

    let _ = writeln!(
        out,
        "\nUnits:\n{:<w$}{:>10}{:>10}{:>10}{:>13}",
        "Name", "measured", "warm-up", "after", "invocations"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<w$}{:>10}{:>10}{:>10}{:>13}",
            r.scenario,
            r.measured.units,
            r.measured.outside.warmup_units,
            r.measured.outside.after_units,
            r.invocations
        );
    }
    for r in rows {
        let notes = notes(r);
        if !notes.is_empty() {
            let _ = writeln!(out, "{}: {}", r.scenario, notes.join("; "));
        }
    }
}

/// Everything that was not mixed into the statistics, or went wrong, in words.
pub fn notes(r: &ScenarioResult) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(error) = &r.error {
        notes.push(format!("FAILED: {error}"));
    }
    notes.extend(r.notes.iter().cloned());
    let ids = &r.measured.ids;
    let counted = [
        (ids.in_flight_at_end, "in flight at the end of the measurement"),
        (ids.completed_in_drain, "completed during the drain"),
        (ids.never_completed, "never completed"),
        (ids.duplicate_completions, "completed twice"),
        (ids.unknown_ids, "completed with an id never started"),
        (ids.duplicate_starts, "started twice"),
        (r.measured.outside.after_close_events, "events recorded after the results were taken"),
    ];
    notes.extend(counted.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}")));
    if let Some(d) = &r.delivery {
        let per_reason: Vec<String> = d.refusals.iter().map(|(reason, n)| format!("{reason}: {n}")).collect();
        let refused = if per_reason.is_empty() {
            "malformed batches refused".to_string()
        } else {
            format!("malformed batches refused ({})", per_reason.join(", "))
        };
        let lost = [
            (d.events_dropped_by_clients, "events dropped by clients that outran the collector".to_string()),
            (d.batches_missing, "batches missing".to_string()),
            (d.malformed_batches, refused),
            (d.streams_without_final, "client streams ended without a final flush".to_string()),
        ];
        notes.extend(lost.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}")));
        if let Some(e) = &d.first_error {
            notes.push(format!("first refused batch: {e}"));
        }
    }
    notes
}

/// Units per second, scaled like Benchee's: 9.92, 982.25 K, 1.08 M.
pub fn ips(ips: Option<f64>) -> String {
    match ips {
        None => "-".into(),
        Some(x) if x >= 1e9 => format!("{:.2} G", x / 1e9),
        Some(x) if x >= 1e6 => format!("{:.2} M", x / 1e6),
        Some(x) if x >= 1e4 => format!("{:.2} K", x / 1e3),
        Some(x) if x >= 100.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.2}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_scaled_like_benchee() {
        assert_eq!(ips(Some(9.9234)), "9.92");
        assert_eq!(ips(Some(982_250.0)), "982.25 K");
        assert_eq!(ips(Some(1_080_000.0)), "1.08 M");
        assert_eq!(ips(None), "-");
        assert_eq!(duration(100_800_000.0), "100.8 ms");
        assert_eq!(duration(1_000_000_000.0), "1.00 s");
        assert_eq!(duration(920.0), "920.0 ns");
        assert_eq!(duration(75_900_000.0), "75.90 ms");
        assert_eq!(duration(0.0), "0 ns");
    }
}
