//! `report.html`: one self-contained file per run (inline CSS and SVG, nothing fetched), with
//! the command line, the environment, every table and chart, and failures shown plainly.

use crate::machine::env::Environment;
use crate::model::header::Header;
use crate::model::run::{RowStatus, RunRecord};
use crate::report::chart::Chart;
use crate::report::tables::class_table_of;
use crate::report::tables::default_layout;
use crate::report::tables::explain;
use crate::report::tables::memory_lines;
use crate::report::tables::priority_lines;
use crate::report::tables::settings_line;
use crate::report::tables::table_of;
use crate::report::tables::volume_table_of;
use crate::report::tables::Layout;
use crate::report::tables::Table;
use std::fmt::Write as _;

const STYLE: &str = "
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; background: #fff; line-height: 1.4; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
pre { background: #f5f5f5; padding: .6rem; overflow-x: auto; white-space: pre-wrap; }
table { border-collapse: collapse; margin: .6rem 0; font-variant-numeric: tabular-nums; }
th, td { padding: .25rem .7rem; border-bottom: 1px solid #e5e5e5; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #fafafa; }
.status { display: inline-block; padding: .1rem .5rem; border-radius: .3rem; font-size: .9rem; }
.complete { background: #e3f4e3; color: #165016; } .incomplete, .failure { background: #fde8e8; color: #8a1515; }
.failure { padding: .4rem .7rem; margin: .3rem 0; border-left: 4px solid #c62828; }
figure.chart { margin: 1rem 0; } figure.chart svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .9rem; color: #555; }
.env td { text-align: left; }
";

pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A self-contained page in the reports' style: `body` is HTML, the title is text.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title><style>{STYLE}</style></head><body>\n<h1>{0}</h1>\n{body}</body></html>\n",
        escape(title)
    )
}

fn figure(out: &mut String, chart: &Chart) {
    let id = chart.file.trim_end_matches(".svg");
    let _ = writeln!(
        out,
        "<figure class=\"chart\" id=\"{}\">{}<figcaption>{} (<code>charts/{}</code>)</figcaption></figure>",
        escape(id),
        chart.svg,
        escape(&chart.title),
        escape(&chart.file)
    );
}

fn html_table(out: &mut String, t: &Table) {
    out.push_str("<table class=\"results\"><thead><tr>");
    for h in &t.header {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>\n");
    for line in &t.lines {
        out.push_str("<tr>");
        for cell in line {
            let _ = write!(out, "<td>{}</td>", escape(cell));
        }
        out.push_str("</tr>\n");
    }
    for (runtime, reason) in &t.without_statistics {
        let _ = writeln!(
            out,
            "<tr class=\"failure\"><td>{}</td><td colspan=\"{}\">{}</td></tr>",
            escape(runtime),
            t.header.len() - 1,
            escape(reason)
        );
    }
    out.push_str("</tbody></table>\n");
}

pub fn render(record: &RunRecord, charts: &[Chart]) -> String {
    let title = format!("taskmeter {} run of {}", record.experiment, record.header.started_at);
    let mut out =
        page_head(&title, &record.header, &format!("{} to {}", record.header.started_at, record.header.finished_at));
    let _ = writeln!(out, "<p>{}</p>", escape(&settings_line(record)));
    if record.order.shuffled {
        let seed = record.order.seed.map(|s| s.to_string()).unwrap_or_default();
        let _ = writeln!(
            out,
            "<p>Runtimes and points ran in a shuffled order (seed {seed}; <code>--seed {seed}</code> repeats it).</p>"
        );
    }

    let failures: Vec<_> = record
        .rows_in_order()
        .into_iter()
        .filter(|r| matches!(r.status, RowStatus::Failed | RowStatus::Skipped | RowStatus::Partial))
        .collect();
    if !failures.is_empty() {
        out.push_str("<h2 id=\"failures\">Failures, partial and skipped runtimes</h2>\n");
        for row in failures {
            let point = record.points.get(row.point).map(|p| p.label()).unwrap_or_default();
            let what = match row.status {
                RowStatus::Failed => "failed",
                RowStatus::Partial => "ran partially",
                _ => "skipped",
            };
            let _ = writeln!(
                out,
                "<div class=\"failure\"><b>{}</b> {} {what}: {}</div>",
                escape(&row.runtime),
                if point == "-" { String::new() } else { format!("at {}", escape(&point)) },
                escape(row.reason.as_deref().unwrap_or(""))
            );
        }
    }

    out.push_str("<h2 id=\"results\">Results</h2>\n");
    let volume = default_layout(record) == Layout::Volume;
    if volume {
        html_table(&mut out, &volume_table_of(record));
        if record.sweeps.iter().any(|s| s.param == crate::model::sweep::Param::Units) {
            out.push_str("<h3>Memory per unit</h3><ul class=\"memory\">\n");
            for line in memory_lines(record) {
                let _ = writeln!(out, "<li>{}</li>", escape(&line));
            }
            out.push_str("</ul>\n");
        }
    }
    if let Some(classes) = class_table_of(record) {
        out.push_str("<h3>By priority class</h3>\n");
        html_table(&mut out, &classes);
        out.push_str("<ul class=\"priority\">\n");
        for line in priority_lines(record) {
            let _ = writeln!(out, "<li>{}</li>", escape(&line));
        }
        out.push_str("</ul>\n");
    }
    for point in record.points.iter().filter(|_| !volume) {
        if record.points.len() > 1 {
            let _ =
                writeln!(out, "<h3>point {}/{}: {}</h3>", point.index + 1, record.points.len(), escape(&point.label()));
        }
        html_table(&mut out, &table_of(record, point.index));
        let prefix = format!("point-{}-", point.index + 1);
        for chart in charts.iter().filter(|c| c.file.starts_with(&prefix)) {
            figure(&mut out, chart);
        }
    }
    let sweeps: Vec<&Chart> = charts.iter().filter(|c| c.file.starts_with("sweep-")).collect();
    if !sweeps.is_empty() {
        out.push_str("<h2 id=\"sweeps\">Across the swept parameters</h2>\n");
        for chart in sweeps {
            figure(&mut out, chart);
        }
    }

    if crate::report::why::has_counters(record) {
        out.push_str("<h2 id=\"why\">Why the rows differ: what each wake-up cost</h2>\n");
        html_table(&mut out, &crate::report::why::why_table_of(record));
        let _ = writeln!(out, "<p>{}.</p>", escape(&crate::report::why::explain_why()));
        if let Some(view) = crate::report::why::view_table_of(record) {
            out.push_str("<h3>The runtime's own view of the same window</h3>\n");
            html_table(&mut out, &view);
            let _ = writeln!(out, "<p>{}.</p>", escape(&crate::report::why::explain_view()));
        }
        for chart in charts.iter().filter(|c| c.file.starts_with("why-")) {
            figure(&mut out, chart);
        }
    }
    let _ = write!(out, "<h2 id=\"reading\">How to read this</h2>\n<p>{}.</p>\n", escape(&explain(record)));
    out.push_str(
        "<p>Every statistic covers the measured samples of all units of a runtime (warm-up excluded). \
         <i>sd</i> is the sample standard deviation (n - 1); percentiles are exact nearest-rank values; \
         <i>missed</i> counts whole periods skipped after a late wake-up (absolute mode). \
         Distributions are drawn from the HdrHistograms stored in <code>run.json</code> (5 significant digits).</p>\n",
    );

    environment_table(&mut out, &record.header.environment);
    let workers: Vec<_> = record.rows_in_order().into_iter().filter_map(|r| Some((r, r.worker.as_ref()?))).collect();
    if !workers.is_empty() {
        out.push_str("<table class=\"workers\"><thead><tr><th>runtime</th><th>point</th><th>version</th><th>policy</th><th>nice</th><th>timer slack</th><th>peak RSS</th><th>wall time</th><th>priority classes</th></tr></thead><tbody>\n");
        for (row, w) in workers {
            let sched = w.sched.as_ref();
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2} s</td><td>{}</td></tr>",
                escape(&row.runtime),
                escape(&record.points.get(row.point).map(|p| p.label()).unwrap_or_default()),
                escape(w.runtime_version.as_deref().unwrap_or("")),
                escape(&sched.map(|s| format!("{} prio {}", s.policy, s.priority)).unwrap_or_default()),
                sched.map(|s| s.nice.to_string()).unwrap_or_default(),
                sched.and_then(|s| s.timerslack_ns).map(|n| format!("{n} ns")).unwrap_or_default(),
                w.peak_rss_kb.map(|kb| format!("{:.1} MiB", kb as f64 / 1024.0)).unwrap_or_default(),
                w.wall_ns as f64 / 1e9,
                escape(w.priority.as_deref().unwrap_or(""))
            );
        }
        out.push_str("</tbody></table>\n");
    }
    let _ = write!(
        out,
        "<p><small>taskmeter {}, run.json schema {} v{}</small></p>\n</body></html>\n",
        escape(&record.header.taskmeter_version),
        record.header.schema,
        record.header.schema_version
    );
    out
}

/// The document's start: title, status, when, and the command line.
fn page_head(title: &str, header: &Header, when: &str) -> String {
    let command_line = &header.command_line;
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n",
        escape(title)
    );
    let (class, status) = match header.complete {
        true => ("complete", "complete".to_string()),
        false => {
            ("incomplete", format!("INCOMPLETE: {}", header.incomplete_reason.as_deref().unwrap_or("interrupted")))
        }
    };
    let _ = writeln!(
        out,
        "<h1>{}</h1><p><span class=\"status {class}\">{}</span> {}</p>",
        escape(title),
        escape(&status),
        escape(when)
    );
    let _ = writeln!(out, "<pre class=\"command\">{}</pre>", escape(&command_line.join(" ")));
    out
}

fn environment_table(out: &mut String, env: &Environment) {
    out.push_str("<h2 id=\"environment\">Environment</h2>\n<table class=\"env\">\n");
    let load = |l: &Option<[f64; 3]>| l.map(|l| format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2])).unwrap_or_default();
    let rows: Vec<(&str, String)> = vec![
        ("kernel", env.kernel.clone()),
        ("CPU", format!("{} ({} cores online)", env.cpu_model, env.cores_online)),
        ("clocksource", env.clocksource.clone().unwrap_or_default()),
        ("timer slack (taskmeter)", env.timer_slack_ns.map(|s| format!("{s} ns")).unwrap_or_default()),
        ("preemption", env.preemption.clone().unwrap_or_default()),
        ("HZ", env.hz.map(|h| h.to_string()).unwrap_or_default()),
        ("virtualisation", env.virtualisation.clone().unwrap_or_default()),
        ("container", env.container.clone().unwrap_or_default()),
        ("load average before", load(&env.load_average_before)),
        ("load average after", load(&env.load_average_after)),
    ];
    let toolchains =
        env.toolchains.iter().map(|(runtime, version)| (format!("toolchain of {runtime}"), version.clone()));
    for (k, v) in rows.into_iter().map(|(k, v)| (k.to_string(), v)).chain(toolchains) {
        let _ = writeln!(out, "<tr><td>{}</td><td>{}</td></tr>", escape(&k), escape(&v));
    }
    out.push_str("</table>\n");
}

/// `report.html` of `taskmeter bench`: per input, the statistics, comparison, latencies and the
/// accounting, as the console shows them, with the environment.
pub fn render_bench(record: &crate::model::bench::BenchRecord) -> String {
    use taskmeter_record::console::{ips, notes};
    use taskmeter_stats::format::duration;
    let report = &record.report;
    let title = format!("taskmeter bench of {}", record.header.started_at);
    let mut out = page_head(&title, &record.header, &record.header.started_at);
    let c = &report.config;
    let _ = writeln!(
        out,
        "<p>warm-up {}, time {}, drain up to {} per scenario and input</p>",
        duration(c.warmup_ns as f64),
        duration(c.time_ns as f64),
        duration(c.drain_ns as f64)
    );
    out.push_str("<table class=\"env\"><thead><tr><th>scenario</th><th>command</th></tr></thead><tbody>\n");
    for s in &record.scenarios {
        let _ = writeln!(out, "<tr><td>{}</td><td><code>{}</code></td></tr>", escape(&s.name), escape(&s.value));
    }
    out.push_str("</tbody></table>\n");
    for group in taskmeter_record::console::input_groups(report) {
        let rows: Vec<_> = report.results.iter().filter(|r| r.input.as_deref() == group).collect();
        let _ =
            writeln!(out, "<h2>{}</h2>", escape(&group.map_or("Results".to_string(), |i| format!("With input {i}"))));
        let fastest = rows.iter().filter_map(|r| r.measured.ips).fold(f64::NAN, f64::max);
        let mut table = Table {
            header: [
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
            ]
            .map(str::to_string)
            .to_vec(),
            lines: Vec::new(),
            without_statistics: Vec::new(),
        };
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
                ips(r.measured.ips),
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
        html_table(&mut out, &table);
        if rows.iter().any(|r| r.measured.latency.is_some()) {
            let mut latency = Table {
                header: ["name", "units", "average", "median", "99th %", "maximum"].map(str::to_string).to_vec(),
                lines: Vec::new(),
                without_statistics: Vec::new(),
            };
            for r in &rows {
                if let Some(l) = &r.measured.latency {
                    latency.lines.push(vec![
                        r.scenario.clone(),
                        l.count.to_string(),
                        duration(l.mean),
                        duration(l.median as f64),
                        duration(l.p99 as f64),
                        duration(l.max as f64),
                    ]);
                }
            }
            out.push_str("<h3>Latency (start to complete)</h3>\n");
            html_table(&mut out, &latency);
        }
        for r in &rows {
            let notes = notes(r);
            if !notes.is_empty() {
                let class = if r.error.is_some() { "failure" } else { "note" };
                let _ = writeln!(
                    out,
                    "<div class=\"{class}\"><b>{}</b>: {}</div>",
                    escape(&r.scenario),
                    escape(&notes.join("; "))
                );
            }
        }
    }
    out.push_str(
        "<h2 id=\"reading\">How to read this</h2>\n<p>A unit completes at each <code>record()</code> (or the first \
         <code>complete(id)</code> of a started id), timestamped at the call on CLOCK_MONOTONIC. The gap of a unit is the \
         time since the previous unit; <i>ips</i> = 1 / mean gap; <i>deviation</i> = sample standard deviation (n - 1) / \
         mean; percentiles are exact nearest-rank values. Only units completed inside the measurement window count; \
         warm-up and after are counted apart.</p>\n",
    );
    environment_table(&mut out, &record.header.environment);
    let _ = write!(
        out,
        "<p><small>{}, bench.json schema {}</small></p>\n</body></html>\n",
        escape(&report.tool),
        record.header.schema
    );
    out
}

/// `report.html` of `run net`: the console's tables, the charts, the failures and the environment.
pub fn render_net(record: &crate::model::net::NetRecord, charts: &[Chart], console: &str) -> String {
    let title = format!("taskmeter net run of {}", record.header.started_at);
    let mut out =
        page_head(&title, &record.header, &format!("{} to {}", record.header.started_at, record.header.finished_at));
    for p in record.points.iter().filter(|p| p.error.is_some()) {
        let _ = writeln!(
            out,
            "<div class=\"failure\"><b>{}</b> with {} senders failed: {}</div>",
            escape(&p.receiver),
            p.senders,
            escape(p.error.as_deref().unwrap_or_default())
        );
    }
    out.push_str("<h2 id=\"results\">Results</h2>\n");
    let _ = writeln!(out, "<pre class=\"results\">{}</pre>", escape(console.trim()));
    for chart in charts {
        figure(&mut out, chart);
    }
    out.push_str(
        "<h2 id=\"reading\">How to read this</h2>\n<p>Throughput is the study's: all messages received / (last receive - \
         first receive) at the receiver. The ratio divides it by the same receiver's throughput with 1 sender. The round trip \
         is timed per message at the senders, from the start of the write to the end of the ack. Every point checks that \
         every message was sent, received and acknowledged with the same bytes.</p>\n",
    );
    environment_table(&mut out, &record.header.environment);
    let _ = write!(
        out,
        "<p><small>taskmeter {}, net.json schema {}</small></p>\n</body></html>\n",
        escape(&record.header.taskmeter_version),
        record.header.schema
    );
    out
}

/// `report.html` of `run granularity`: the console's tables, the curves, the failures, how to
/// read them and the environment.
pub fn render_granularity(record: &crate::model::granularity::GrainRecord, charts: &[Chart], console: &str) -> String {
    let title = format!("taskmeter granularity run of {}", record.header.started_at);
    let mut out =
        page_head(&title, &record.header, &format!("{} to {}", record.header.started_at, record.header.finished_at));
    for run in record.runs.iter().filter(|r| r.error.is_some() && !r.interrupted) {
        let _ = writeln!(
            out,
            "<div class=\"failure\"><b>{}</b> (repetition {}) failed after {} task sizes: {}</div>",
            escape(&run.runtime),
            run.repetition,
            run.points.len(),
            escape(run.error.as_deref().unwrap_or_default())
        );
    }
    out.push_str("<h2 id=\"results\">Results</h2>\n");
    let _ = writeln!(out, "<pre class=\"results\">{}</pre>", escape(console.trim()));
    for chart in charts {
        figure(&mut out, chart);
    }
    out.push_str(
        "<h2 id=\"reading\">How to read this</h2>\n<p>Each worker runs rounds of tasks of a fixed busy work, started and awaited \
         the runtime's own way, at each task size. The useful work of a task is the same busy loop timed alone, one call after \
         another, in the same worker. Efficiency = tasks x useful work / (wall time x cores), where cores is how many tasks the \
         runtime can run at once here (1 for one-threaded runtimes and for Python threads under the GIL). Task granularity = \
         wall x cores / tasks; METG(50 %) is the granularity at which efficiency falls to 50 % (Task Bench, Slaughter et al., \
         SC'20), interpolated in log granularity between the two task sizes around it. Every task's result is checked and \
         every started task must complete.</p>\n",
    );
    environment_table(&mut out, &record.header.environment);
    let _ = write!(
        out,
        "<p><small>taskmeter {}, granularity.json schema {}</small></p>\n</body></html>\n",
        escape(&record.header.taskmeter_version),
        record.header.schema
    );
    out
}
