//! What `run granularity` shows and writes: the ranked METG table, the efficiency of every
//! runtime at every task size, `granularity.json`, `summary.csv`, the efficiency and overhead
//! charts and `report.html`.

use crate::report::console::render_table_fitted;
use crate::report::dashboard as dash;
use crate::report::figure::{bar_chart, line_chart, style_of, Axis, Bars, Chart, Level, Scale, Series, Style, Unit};
use crate::report::format::format_range;
use crate::report::page::{table, Block, Report, Section};
use std::fmt::Write as _;
use taskmeter_analysis::granularity::{baselines, metgs, BASELINE_SPREAD, THRESHOLD};
use taskmeter_model::granularity::{GrainRecord, GrainRun, GrainSummary, Metg, RANGES_SINCE};
use taskmeter_stats::format::ns as format_ns;
use taskmeter_stats::Interval;

/// The line printed when a worker ends.
pub fn progress_line(run: &GrainRun, repeat: u32) -> String {
    let repetition = if repeat > 1 { format!(" #{}", run.repetition) } else { String::new() };
    let took = format!("{:.1} s", run.wall_ns as f64 / 1e9);
    match (&run.error, run.metg) {
        (Some(e), _) if run.interrupted => format!(
            "granularity: {:<14}{repetition}  interrupted after {} task sizes: {e}",
            run.runtime,
            run.points.len()
        ),
        (Some(e), _) => {
            format!("granularity: {:<14}{repetition}  FAILED after {} task sizes: {e}", run.runtime, run.points.len())
        }
        (None, Some(m)) => format!(
            "granularity: {:<14}{repetition}  METG(50 %) {}  ({} task sizes, {took})",
            run.runtime,
            metg_text(m),
            run.points.len()
        ),
        (None, None) => format!("granularity: {:<14}{repetition}  no task size measured ({took})", run.runtime),
    }
}

fn metg_text(m: Metg) -> String {
    match m {
        Metg::Interpolated { ns } => format_ns(ns),
        Metg::Below { ns } => format!("< {}", format_ns(ns)),
        Metg::Above { ns } => format!("> {}", format_ns(ns)),
    }
}

/// "1.23 µs ± 45.0 ns", METG's "995 ns (164 ns–6.04 µs)" (on a log scale), "1.23 µs" with one
/// repetition.
fn with_interval(i: &Interval) -> String {
    format_range(i, format_ns)
}

fn summary_metg(s: &GrainSummary) -> String {
    match (&s.metg_ns, s.metg_bound) {
        (Some(i), _) => with_interval(i),
        (None, Some(bound)) => metg_text(bound),
        (None, None) if s.repetitions > 0 => "varies (see the repetitions)".into(),
        (None, None) => "-".into(),
    }
}

fn percent(i: &Option<Interval>) -> String {
    match i {
        Some(i) if i.has_range() => format!("{:.0} ± {:.0} %", 100.0 * i.value, 100.0 * i.half_width),
        Some(i) => format!("{:.0} %", 100.0 * i.value),
        None => "-".into(),
    }
}

/// The runtimes by the cores they ran tasks on, most first (as `summarise` sorts them):
/// efficiency is over those cores, so a runtime is ranked only among those with as many.
fn by_cores(record: &GrainRecord) -> Vec<(Option<u32>, Vec<&GrainSummary>)> {
    let mut groups: Vec<(Option<u32>, Vec<&GrainSummary>)> = Vec::new();
    for s in &record.summaries {
        match groups.iter_mut().find(|(cores, _)| *cores == s.cores) {
            Some((_, members)) => members.push(s),
            None => groups.push((s.cores, vec![s])),
        }
    }
    groups
}

/// Why the runtimes are ranked in groups, when they are.
const CORES_NOTE: &str = "Efficiency is over the cores a runtime can run tasks on (wall x cores): a one-threaded \
runtime's is of one core, a multi-threaded one's of all, so runtimes are ranked only among those on as many cores.";

/// The title of a group's table, when runtimes ran on different numbers of cores.
fn cores_title(cores: Option<u32>) -> String {
    match cores {
        Some(1) => {
            "Ranked among runtimes on 1 core (one-threaded, or Python threads under the GIL): efficiency of one core"
                .into()
        }
        Some(n) => format!("Ranked among runtimes on {n} cores: efficiency of all {n}"),
        None => "Runtimes whose cores are not known".into(),
    }
}

/// The ranked tables, one per number of cores (untitled when all ran on as many).
fn ranked_tables(record: &GrainRecord) -> Vec<(String, Vec<Vec<String>>)> {
    let groups = by_cores(record);
    let titled = groups.len() > 1;
    groups
        .into_iter()
        .map(|(cores, group)| (if titled { cores_title(cores) } else { String::new() }, ranked_table(record, &group)))
        .collect()
}

/// A ranked table: METG, the task's own work there, the overhead per task at the smallest size
/// (the cost of starting and awaiting a task when there is almost no work), and the repetitions
/// METG rests on.
fn ranked_table(record: &GrainRecord, group: &[&GrainSummary]) -> Vec<Vec<String>> {
    let sizes = &record.settings.grains_ns;
    let smallest = sizes.len().saturating_sub(1);
    let mut lines =
        vec![["#", "runtime", "cores", "METG(50 %)", "overhead per task", "efficiency at", "repetitions with a METG"]
            .map(String::from)
            .to_vec()];
    lines[0][4] = format!("overhead per task at {}", format_ns(sizes[smallest] as f64));
    lines[0][5] = format!("efficiency at {}", format_ns(sizes[0] as f64));
    for (rank, s) in group.iter().enumerate() {
        lines.push(vec![
            (rank + 1).to_string(),
            s.runtime.clone(),
            s.cores.map_or("-".into(), |c| c.to_string()),
            summary_metg(s),
            s.overhead_ns.get(smallest).cloned().flatten().as_ref().map_or("-".into(), with_interval),
            percent(s.efficiency.first().unwrap_or(&None)),
            metgs(&record.runs, &s.runtime, sizes.len()).len().to_string(),
        ]);
    }
    lines
}

/// What the ranges under the tables are (a record before version 2 holds Student-t intervals of
/// its means, and says so).
fn ranges_note(record: &GrainRecord) -> String {
    let repeat = record.settings.repeat;
    match repeat {
        0 | 1 => "One repetition: no range; --repeat 3 gives ranges.".into(),
        _ if record.header.schema_version < RANGES_SINCE => format!(
            "± = 95 % Student-t confidence interval of the mean over the repetitions (a granularity.json of version {}).",
            record.header.schema_version
        ),
        _ => format!(
            "METG = the geometric mean of the repetitions' METGs, as METG (low–high): the 95 % range for another \
             invocation's, on a log scale, so never below 0. Other ± = {}.",
            taskmeter_stats::range_note(repeat as usize, "each its own worker process")
        ),
    }
}

/// Every runtime's efficiency at every task size: the curves, as numbers.
fn efficiency_matrix(record: &GrainRecord) -> Vec<Vec<String>> {
    let mut header = vec!["task work".to_string()];
    header.extend(record.summaries.iter().map(|s| s.runtime.clone()));
    let mut lines = vec![header];
    for (i, size) in record.settings.grains_ns.iter().enumerate() {
        let mut line = vec![format_ns(*size as f64)];
        line.extend(record.summaries.iter().map(|s| {
            match s.efficiency.get(i).copied().flatten() {
                Some(e) => format!("{:.0}", 100.0 * e.value),
                // No valid repetition there: say why rather than leave a gap.
                None if record
                    .runs
                    .iter()
                    .any(|r| r.runtime == s.runtime && r.points.get(i).is_some_and(|p| p.invalid.is_some())) =>
                {
                    "invalid".into()
                }
                None => "-".into(),
            }
        }));
        lines.push(line);
    }
    lines
}

fn settings_line(record: &GrainRecord) -> String {
    let s = &record.settings;
    format!(
        "granularity: pattern {}, {} x {} = {} tasks a round; {} task sizes from {} to {}, {} measured each after {} of warm-up",
        s.pattern.name(),
        s.width,
        s.steps,
        s.width as u64 * s.steps as u64,
        s.grains_ns.len(),
        format_ns(s.grains_ns[0] as f64),
        format_ns(*s.grains_ns.last().unwrap_or(&0) as f64),
        format_ns(s.duration_ns as f64),
        format_ns(s.warmup_ns as f64),
    )
}

/// The console report.
pub fn console(record: &GrainRecord) -> String {
    let mut out = format!("\n{}\n", settings_line(record));
    for (title, ranked) in ranked_tables(record) {
        out.push_str(&if title.is_empty() { "\n".into() } else { format!("\n{title}:\n") });
        out.push_str(&render_table_fitted(&ranked));
    }
    out.push_str("\nefficiency (%) at each task size (useful work / (wall x cores)):\n");
    out.push_str(&render_table_fitted(&efficiency_matrix(record)));
    out.push_str(&format!(
        "\nMETG(50 %): the task granularity (wall x cores / tasks) at which efficiency falls to {:.0} %; lower is better.\n",
        100.0 * THRESHOLD
    ));
    if by_cores(record).len() > 1 {
        let _ = writeln!(out, "{CORES_NOTE}");
    }
    let _ = writeln!(out, "{}", ranges_note(record));
    out.push_str(&warnings(record));
    for line in failures(record) {
        let _ = writeln!(out, "{line}");
    }
    if !record.header.complete {
        let why = record.header.incomplete_reason.as_deref().unwrap_or("interrupted");
        let _ = writeln!(out, "\nThe run stopped early ({why}): these results hold what was measured before it.");
    }
    out
}

/// What a reader must know before quoting a figure: points not used, and runtimes whose
/// repetitions disagree on METG by more than [`DISAGREEMENT`] times.
fn warnings(record: &GrainRecord) -> String {
    let mut out = String::new();
    for run in &record.runs {
        for p in run.points.iter().filter(|p| p.invalid.is_some()) {
            let why = p.invalid.as_deref().unwrap_or_default();
            let _ = writeln!(
                out,
                "warning: {} repetition {} at {}: {why}; the point is not used",
                run.runtime,
                run.repetition,
                format_ns(p.measured.grain_ns as f64)
            );
        }
    }
    let apart: Vec<String> = record
        .summaries
        .iter()
        .filter_map(|s| {
            let points = record.runs.iter().filter(|r| r.runtime == s.runtime).flat_map(|r| &r.points);
            let (apart, total) = points.fold((0, 0), |(apart, total), p| match baselines(&p.measured) {
                (before, Some(after)) => {
                    (apart + usize::from((before - after).abs() > BASELINE_SPREAD * before.min(after)), total + 1)
                }
                _ => (apart, total),
            });
            (apart > 0).then(|| format!("{} {apart} of {total}", s.runtime))
        })
        .collect();
    if !apart.is_empty() {
        let _ = writeln!(
            out,
            "note: a task's two serial baselines (before and after its rounds) differed by more than {:.0} % at: {} task sizes; the faster is its work",
            100.0 * BASELINE_SPREAD,
            apart.join(", ")
        );
    }
    for s in &record.summaries {
        let metgs: Vec<f64> = record
            .runs
            .iter()
            .filter(|r| r.runtime == s.runtime)
            .filter_map(|r| if let Some(Metg::Interpolated { ns }) = r.metg { Some(ns) } else { None })
            .collect();
        let (low, high) =
            (metgs.iter().copied().fold(f64::INFINITY, f64::min), metgs.iter().copied().fold(0.0, f64::max));
        if metgs.len() >= 2 && high > DISAGREEMENT * low {
            let _ = writeln!(
                out,
                "warning: {}: its {} repetitions disagree, METG from {} to {}: its range is wide for a reason (more --repeat narrows it)",
                s.runtime,
                metgs.len(),
                format_ns(low),
                format_ns(high)
            );
        }
    }
    out
}

/// The runtimes skipped, and the runs that failed.
fn failures(record: &GrainRecord) -> Vec<String> {
    let skipped = record.skipped.iter().map(|skip| format!("skipped: {}: {}", skip.runtime, skip.reason));
    let failed = record.runs.iter().filter(|r| r.error.is_some() && !r.interrupted).map(|run| {
        format!(
            "{} (repetition {}) failed after {} task sizes: {}",
            run.runtime,
            run.repetition,
            run.points.len(),
            run.error.as_deref().unwrap_or_default()
        )
    });
    skipped.chain(failed).collect()
}

/// Repetitions whose METGs differ by more than this factor are said to disagree.
const DISAGREEMENT: f64 = 2.0;

/// The figures: efficiency against granularity (Task Bench's, METG where each line crosses
/// 50 %), efficiency and overhead per task against the task's work, and METG per runtime.
pub fn charts(record: &GrainRecord) -> Result<Vec<Chart>, String> {
    // Styles by the settings' order, so a runtime looks the same in every figure and run.
    let styles: Vec<Style> = record.summaries.iter().map(|s| style_of(&record.settings.runtimes, &s.runtime)).collect();
    let sizes = &record.settings.grains_ns;
    // Overheads are drawn where they are positive: at the largest sizes one is a small
    // difference of two large times, and noise can make it negative (efficiency above 100 %).
    let series = |value: fn(&GrainSummary) -> &Vec<Option<Interval>>, scale: f64| -> Vec<Series> {
        record
            .summaries
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let estimates: Vec<(f64, Interval)> = value(s)
                    .iter()
                    .zip(sizes)
                    .filter_map(|(v, size)| v.filter(|v| v.value > 0.0).map(|v| (*size as f64, v.scaled(scale))))
                    .collect();
                Series::of_estimates(s.runtime.clone(), styles[i], &estimates)
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    let efficiency = series(|s| &s.efficiency, 100.0);
    if efficiency.is_empty() {
        return Ok(Vec::new());
    }
    // Task Bench's figure: efficiency against the granularity each size really had.
    let against_granularity: Vec<Series> = record
        .summaries
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut measured: Vec<(f64, Interval)> = s
                .granularity_ns
                .iter()
                .zip(&s.efficiency)
                .filter_map(|(g, e)| Some((g.as_ref()?.value, e.as_ref()?.scaled(100.0))))
                .collect();
            measured.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series::of_estimates(s.runtime.clone(), styles[i], &measured)
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let pattern = record.settings.pattern.name();
    let by_granularity = format!("Efficiency against task granularity ({pattern})");
    let by_size = format!("Efficiency against the busy work of a task ({pattern})");
    let overhead_title = "Overhead per task (where positive)";
    let share = Axis::new("efficiency", Unit::Percent).scale(Scale::LinearFromZero);
    let work = Axis::new("busy work per task", Unit::Nanos).scale(Scale::Log);
    let granularity = Axis::new("task granularity: wall x cores / tasks", Unit::Nanos).scale(Scale::Log);
    let overhead = Axis::new("wall x cores / tasks - work", Unit::Nanos);
    let mut charts = vec![
        Chart {
            group: "curves".into(),
            file: "efficiency.svg".into(),
            title: by_granularity.clone(),
            svg: line_chart(
                &by_granularity,
                &granularity,
                &share,
                &against_granularity,
                Some(&metg_level(record, &styles)),
            )?,
        },
        Chart {
            group: "curves".into(),
            file: "efficiency-by-size.svg".into(),
            title: by_size.clone(),
            svg: line_chart(&by_size, &work, &share, &efficiency, None)?,
        },
        Chart {
            group: "curves".into(),
            file: "overhead.svg".into(),
            title: overhead_title.into(),
            svg: line_chart(overhead_title, &work, &overhead, &series(|s| &s.overhead_ns, 1.0), None)?,
        },
    ];
    charts.extend(metg_chart(record)?);
    Ok(charts)
}

/// The ranked tables as a figure: each runtime's METG, with its range (and its cores, when
/// runtimes ran on different numbers of them).
fn metg_chart(record: &GrainRecord) -> Result<Option<Chart>, String> {
    let grouped = by_cores(record).len() > 1;
    let name = |s: &GrainSummary| match (grouped, s.cores) {
        (true, Some(cores)) => format!("{} ({cores} core{})", s.runtime, if cores == 1 { "" } else { "s" }),
        _ => s.runtime.clone(),
    };
    let ranked: Vec<(String, Option<Interval>)> =
        record.summaries.iter().filter(|s| s.metg_ns.is_some()).map(|s| (name(s), s.metg_ns)).collect();
    if ranked.is_empty() {
        return Ok(None);
    }
    let pattern = record.settings.pattern.name();
    let title = format!("METG(50 %) per runtime ({pattern}; lower is better)");
    let (names, metgs): (Vec<String>, Vec<Option<Interval>>) = ranked.into_iter().unzip();
    let bars = [Bars::of_estimates("METG(50 %)", Style::other(0), &metgs)];
    let axis = Axis::new("METG(50 %): task granularity at 50 % efficiency", Unit::Nanos).scale(Scale::Log);
    let svg = bar_chart(&title, &axis, &names, &bars)?;
    Ok(Some(Chart { group: "metg".into(), file: "metg.svg".into(), title, svg }))
}

/// The 50 % line, with each runtime's METG marked on it in its colour.
fn metg_level(record: &GrainRecord, styles: &[Style]) -> Level {
    let marks = record
        .summaries
        .iter()
        .zip(styles)
        .filter_map(|(s, style)| Some((s.metg_ns.as_ref()?.value, style.colour)))
        .collect();
    Level { y: 100.0 * THRESHOLD, label: format!("{:.0} %: METG where each line crosses", 100.0 * THRESHOLD), marks }
}

/// The dashboards' figures of a granularity run: per runtime, what its ranked table shows: METG
/// (the geometric mean of the repetitions', its range on a log scale), the overhead per task at
/// the smallest task size and the efficiency at the largest (each with its range); a METG
/// known only as a bound is left out.
pub fn benchmarks(record: &GrainRecord) -> Vec<dash::Benchmark> {
    let sizes = &record.settings.grains_ns;
    let smallest = sizes.len().saturating_sub(1);
    let mut out = Vec::new();
    for s in &record.summaries {
        let subject = || vec![("runtime", s.runtime.clone())];
        out.extend(s.metg_ns.map(|i| dash::Benchmark::estimate(subject(), "METG", dash::Unit::Nanoseconds, false, &i)));
        let overhead = s.overhead_ns.get(smallest).copied().flatten();
        let overhead_at = format!("overhead per task at {}", format_ns(sizes[smallest] as f64));
        out.extend(
            overhead.map(|i| dash::Benchmark::estimate(subject(), &overhead_at, dash::Unit::Nanoseconds, false, &i)),
        );
        let efficiency = s.efficiency.first().copied().flatten().map(|i| i.scaled(100.0));
        let efficiency_at = format!("efficiency at {}", format_ns(sizes[0] as f64));
        out.extend(
            efficiency.map(|i| dash::Benchmark::estimate(subject(), &efficiency_at, dash::Unit::Percent, true, &i)),
        );
        dash::note_repetitions(&mut out, s.repetitions);
    }
    out
}

impl Report for GrainRecord {
    fn benchmarks(&self) -> Vec<dash::Benchmark> {
        benchmarks(self)
    }

    /// One line per runtime, repetition and task size.
    fn csv(&self) -> String {
        let mut out = String::from("runtime,repetition,pattern,width,steps,grain_ns,iters,task_ns,tasks,rounds,wall_ns,cores,granularity_ns,efficiency,overhead_ns,metg_ns,metg_kind,status\n");
        for run in &self.runs {
            let (metg_ns, kind) = match run.metg {
                Some(Metg::Interpolated { ns }) => (format!("{ns:.1}"), "interpolated"),
                Some(Metg::Below { ns }) => (format!("{ns:.1}"), "below"),
                Some(Metg::Above { ns }) => (format!("{ns:.1}"), "above"),
                None => (String::new(), ""),
            };
            let status = if run.error.is_some() { "failed" } else { "ok" };
            let s = &self.settings;
            // The run's columns, the same on each of its lines.
            let head = format!("{},{},{},{},{}", run.runtime, run.repetition, s.pattern.name(), s.width, s.steps);
            for p in &run.points {
                let m = &p.measured;
                let status = if p.invalid.is_some() { "invalid" } else { status };
                let _ = writeln!(
                    out,
                    "{head},{},{},{:.3},{},{},{},{},{:.3},{:.5},{:.3},{metg_ns},{kind},{status}",
                    m.grain_ns,
                    m.iters,
                    p.task_ns,
                    m.tasks,
                    m.rounds,
                    m.wall_ns,
                    m.cores,
                    p.granularity_ns,
                    p.efficiency,
                    p.overhead_ns,
                );
            }
            if run.points.is_empty() {
                let _ = writeln!(out, "{head},,,,,,,,,,,,,{status}");
            }
        }
        out
    }

    /// `--export-markdown`: the tables, ready to paste.
    fn markdown(&self) -> String {
        let mut out =
            format!("**taskmeter granularity** {}\n\n", settings_line(self).trim_start_matches("granularity: "));
        for (title, ranked) in ranked_tables(self) {
            if !title.is_empty() {
                let _ = writeln!(out, "_{title}_\n");
            }
            out.push_str(&crate::report::markdown::table(&ranked));
        }
        out.push_str("\n_efficiency (%) at each task size_\n\n");
        out.push_str(&crate::report::markdown::table(&efficiency_matrix(self)));
        out
    }

    fn settings(&self) -> Vec<(String, String)> {
        let s = &self.settings;
        vec![
            ("runtimes".into(), s.runtimes.join(", ")),
            (
                "pattern".into(),
                format!(
                    "{}, {} x {} = {} tasks a round",
                    s.pattern.name(),
                    s.width,
                    s.steps,
                    s.width as u64 * s.steps as u64
                ),
            ),
            (
                "task sizes".into(),
                format!(
                    "{} from {} to {}",
                    s.grains_ns.len(),
                    format_ns(s.grains_ns[0] as f64),
                    format_ns(*s.grains_ns.last().unwrap_or(&0) as f64)
                ),
            ),
            (
                "measured".into(),
                format!("{} each, after {} of warm-up", format_ns(s.duration_ns as f64), format_ns(s.warmup_ns as f64)),
            ),
            ("repetitions".into(), s.repeat.to_string()),
        ]
    }

    fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> =
            warnings(self).lines().map(|l| l.trim_start_matches("warning: ").to_string()).collect();
        out.extend(failures(self));
        out
    }

    fn figures(&self) -> Result<Vec<Chart>, String> {
        charts(self)
    }

    fn sections(&self) -> Vec<Section> {
        let mut results: Vec<Block> = ranked_tables(self)
            .into_iter()
            .map(|(title, ranked)| Block::Table(title, table(ranked), "results"))
            .collect();
        results.push(Block::Figures("metg".into()));
        results.push(Block::Text(format!(
            "METG(50 %): the task granularity (wall x cores / tasks) at which efficiency falls to {:.0} %; lower is better. {}{}",
            100.0 * THRESHOLD,
            if by_cores(self).len() > 1 { format!("{CORES_NOTE} ") } else { String::new() },
            ranges_note(self)
        )));
        let mut efficiency =
            vec![Block::Table("Efficiency (%) at each task size".into(), table(efficiency_matrix(self)), "results")];
        efficiency.push(Block::Figures("curves".into()));
        vec![
            Section { id: "results".into(), heading: "Results".into(), blocks: results },
            Section { id: "efficiency".into(), heading: "Efficiency and overhead".into(), blocks: efficiency },
            Section {
                id: "reading".into(),
                heading: "How to read this".into(),
                blocks: vec![Block::Text(READING.into())],
            },
        ]
    }
}

const READING: &str = "Each worker runs rounds of tasks of a fixed busy work, started and awaited the runtime's own \
    way, at each task size. The useful work of a task is the same busy loop timed alone, one call after another, in \
    the same worker. Efficiency = tasks x useful work / (wall time x cores), where cores is how many tasks the runtime \
    can run at once here (1 for one-threaded runtimes and for Python threads under the GIL), so a runtime is ranked \
    only among those with as many cores. Task granularity = wall \
    x cores / tasks; METG(50 %) is the granularity at which efficiency falls to 50 % (Task Bench, Slaughter et al., \
    SC'20), interpolated in log granularity between the two task sizes around it. Every task's result is checked and \
    every started task must complete.";

#[cfg(test)]
mod tests {
    use super::*;
    use taskmeter_analysis::granularity::{derive, summarise};
    use taskmeter_machine::env::Environment;
    use taskmeter_model::granularity::GrainSettings;
    use taskmeter_model::header::Record;

    /// A repetition of `runtime` on `cores`: one grain of 1 µs at 100 % efficiency, and its METG.
    fn repetition(runtime: &str, cores: u32, metg: Option<Metg>) -> GrainRun {
        let point = taskmeter_protocol::Point {
            grain_ns: 1000,
            iters: 1,
            busy_result: "1".into(),
            serial_tasks: 1,
            serial_ns: 1000,
            serial_after_tasks: None,
            serial_after_ns: None,
            rounds: 1,
            tasks: 10,
            completed: 10,
            wrong: 0,
            wall_ns: 10_000 / cores as u64,
            cores,
        };
        let points = vec![derive(point)];
        GrainRun {
            runtime: runtime.into(),
            repetition: 1,
            runtime_version: None,
            points,
            metg,
            error: None,
            interrupted: false,
            wall_ns: 1,
        }
    }

    /// "machine" and "other" run tasks on 2 cores, "one-threaded" on 1: two tables, each ranked
    /// from 1, and "machine" counts the one repetition of its two that has a METG.
    #[test]
    fn runtimes_on_different_numbers_of_cores_are_ranked_apart() {
        let interpolated = |ns: f64| Some(Metg::Interpolated { ns });
        let runs = vec![
            repetition("one-threaded", 1, interpolated(300.0)),
            repetition("machine", 2, interpolated(5000.0)),
            repetition("machine", 2, None),
            repetition("other", 2, interpolated(2000.0)),
        ];
        let runtimes: Vec<String> = ["one-threaded", "machine", "other"].map(String::from).to_vec();
        let settings = GrainSettings {
            runtimes: runtimes.clone(),
            pattern: taskmeter_protocol::Pattern::Trivial,
            width: 2,
            steps: 5,
            grains_ns: vec![1000],
            warmup_ns: 0,
            duration_ns: 1,
            calibrate_ns: 1,
            repeat: 2,
        };
        let summaries = summarise(&runs, &runtimes, 1);
        let header = GrainRecord::new_header(Vec::new(), String::new(), Environment::default());
        let record = GrainRecord { header, settings, runs, summaries, skipped: Vec::new() };
        let tables = ranked_tables(&record);
        let titles: Vec<&str> = tables.iter().map(|(title, _)| title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "Ranked among runtimes on 2 cores: efficiency of all 2",
                "Ranked among runtimes on 1 core (one-threaded, or Python threads under the GIL): efficiency of one core"
            ]
        );
        // Rank, runtime, repetitions with a METG.
        let rows = |t: &[Vec<String>]| -> Vec<String> {
            t[1..].iter().map(|l| format!("{} {} {}", l[0], l[1], l[6])).collect()
        };
        assert_eq!(tables[0].1[0][6], "repetitions with a METG");
        assert_eq!(rows(&tables[0].1), ["1 other 1", "2 machine 1"]);
        assert_eq!(rows(&tables[1].1), ["1 one-threaded 1"]);
        assert!(console(&record).contains(CORES_NOTE));
    }
}
