//! The figures of a run, drawn in the house style of `figure.rs`:
//! - per point: the distribution of the run's metric per runtime (a percentile plot, the tail
//!   visible), and the v1 study's bars of the mean deviation of `actual` and `full` per runtime;
//! - across each swept parameter: one line per runtime of the mean and the p99 of the metric and
//!   of the number of samples (log-log when a range spans two decades or more), and a ratio
//!   chart: each runtime's mean divided by its own mean at the first point (the TCP study's
//!   ratio graph);
//! - per point: lateness against CPU per wake-up, one span per runtime (`why.rs`).
//!
//! A chart is drawn only where there is data for it.

use super::figure::{
    bar_chart, line_chart, percentile_chart, percentile_panels, span_chart, style_of, Axis, Bars, Distribution, Scale,
    Series, Span, Style, Unit,
};
use crate::analysis::cells::{cells, Statistic};
use crate::analysis::histogram;
use crate::model::run::{ClassResult, Metric, Row, RunRecord};
use crate::model::sweep::{Param, Point};
use plotters::style::RGBColor;
use taskmeter_stats::{ratio_interval, Interval};

pub use super::figure::Chart;

fn style(record: &RunRecord, runtime: &str) -> Style {
    style_of(&record.settings.runtimes, runtime)
}

/// Above this many runtimes, a point's percentile plot also comes as small multiples.
const PILED_UP: usize = 8;

/// The distribution of the metric per runtime at one point: a percentile plot, and with many
/// runtimes the same in small multiples, one panel per language family.
fn percentile_plot(record: &RunRecord, point: &Point) -> Result<Vec<Chart>, String> {
    let metric = record.metric;
    let mut lines = Vec::new();
    for cell in cells(record, point.index) {
        // The repetitions of a runtime together: one distribution of all their samples.
        let h = histogram::merge(cell.measured.iter().filter_map(|r| Some(r.histograms.as_ref()?.get(metric))))?;
        if h.is_empty() {
            continue;
        }
        let cdf: Vec<(f64, f64)> = histogram::cdf(&h).into_iter().map(|(v, f)| (v as f64, f)).collect();
        // Early wake-ups sit at the bottom with those on time: the legend says how many.
        let early = cell.sum(|r| r.counts.as_ref().map(|c| c.early_wakeups));
        let name = match early {
            n if n > 0 && metric == Metric::Lateness => {
                format!("{} ({} early)", cell.runtime, crate::report::format::format_count(n))
            }
            _ => cell.runtime.to_string(),
        };
        lines.push(Distribution { name, style: style(record, cell.runtime), cdf, count: h.len() });
    }
    if lines.is_empty() {
        return Ok(Vec::new());
    }
    let title = format!("{} by percentile{}", metric.name(), at(record, point));
    let axis = Axis::new(metric.name(), Unit::Nanos);
    let file = format!("point-{}-{}-percentiles", point.index, metric.name());
    let mut charts = vec![Chart {
        group: format!("point-{}", point.index),
        file: format!("{file}.svg"),
        title: title.clone(),
        svg: percentile_chart(&title, &axis, &lines)?,
    }];
    let title = format!("{title}, by language family");
    if let Some(svg) = percentile_panels(&title, &axis, &lines, PILED_UP)? {
        charts.push(Chart {
            group: format!("point-{}", point.index),
            file: format!("{file}-by-family.svg"),
            title,
            svg,
        });
    }
    Ok(charts)
}

/// The v1 study's bars: mean deviation of `actual` and `full` from the expected sleep, per
/// runtime (with repetitions: their mean, and the 95 % interval as an error bar).
fn deviation_bars(record: &RunRecord, point: &Point) -> Result<Option<Chart>, String> {
    type Bar = (String, Option<Interval>, Option<Interval>);
    let bars: Vec<Bar> = cells(record, point.index)
        .iter()
        .filter(|c| c.repetitions() > 0)
        .map(|c| {
            let of = |metric| c.mean_estimate(metric, Statistic::MeanDeviation);
            (c.runtime.to_string(), of(Metric::Actual), of(Metric::Full))
        })
        .filter(|b| b.1.is_some() && b.2.is_some())
        .collect();
    if bars.is_empty() {
        return Ok(None);
    }
    let repeated = record.settings.repeat > 1;
    let value = |i: &Option<Interval>| i.map(|i| (i.value, repeated.then_some(i.half_width)));
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let groups = [
        Bars { name: "actual".into(), style: Style::other(0), values: bars.iter().map(|b| value(&b.1)).collect() },
        Bars { name: "full".into(), style: Style::other(1), values: bars.iter().map(|b| value(&b.2)).collect() },
    ];
    let title = format!("mean deviation from the expected sleep{}", at(record, point));
    let axis = Axis::new("mean |value - expected|", Unit::Nanos);
    let svg = bar_chart(&title, &axis, &names, &groups)?;
    Ok(Some(Chart {
        group: format!("point-{}", point.index),
        file: format!("point-{}-deviation-bars.svg", point.index),
        title,
        svg,
    }))
}

fn at(record: &RunRecord, point: &Point) -> String {
    if record.points.len() > 1 {
        format!(" at {}", point.label())
    } else {
        String::new()
    }
}

/// Charts along one swept parameter, the other swept parameters held at each of their values.
fn sweep_charts(record: &RunRecord, param: Param) -> Result<Vec<Chart>, String> {
    let metric = record.metric;
    let others = |p: &Point| -> Vec<(Param, u64)> { p.values.iter().filter(|(q, _)| *q != param).copied().collect() };
    let mut groups: Vec<Vec<(Param, u64)>> = Vec::new();
    for p in &record.points {
        if !groups.contains(&others(p)) {
            groups.push(others(p));
        }
    }
    let mut charts = Vec::new();
    for group in groups {
        let label: String = group.iter().map(|(p, v)| format!(" {}={}", p.name(), p.format_value(*v))).collect();
        let slug: String =
            group.iter().map(|(p, v)| format!("-{}{}", p.name(), p.format_value(*v).replace(':', ""))).collect();
        let points: Vec<&Point> = record.points.iter().filter(|p| others(p) == group).collect();
        if points.len() < 2 {
            continue;
        }
        // A categorical parameter (policy) is drawn at positions 0, 1, ... with its values as labels.
        let categories: Option<Vec<String>> = param
            .is_categorical()
            .then(|| points.iter().filter_map(|p| p.value(param)).map(|v| param.format_value(v)).collect());
        let timed = param.is_duration() || param == Param::TimerSlack;
        let x_axis = Axis::new(param.axis_label(), if timed { Unit::Nanos } else { Unit::Count });
        let x_axis = match &categories {
            Some(c) => x_axis.scale(Scale::Categories(c.clone())),
            None => x_axis,
        };
        // One line per series across the parameter, as `sweep-PARAM[-OTHERS]-NAME.svg`.
        let sweep_chart = |name: &str, title: String, y: Axis, series: &[Series]| -> Result<Chart, String> {
            let svg = line_chart(&title, &x_axis, &y, series, None)?;
            Ok(Chart { group: "sweeps".into(), file: format!("sweep-{}{slug}-{name}.svg", param.name()), title, svg })
        };
        let x_of = |v: u64| match &categories {
            Some(c) => c.iter().position(|label| *label == param.format_value(v)).unwrap_or(0) as f64,
            None => v as f64,
        };
        // A point's value: the mean over its repetitions, with their 95 % interval when there
        // are two or more.
        let line_of =
            |runtime: &String, get: &dyn Fn(&Row) -> Option<f64>| -> (Vec<(f64, f64)>, Vec<Option<Interval>>) {
                points
                    .iter()
                    .filter_map(|p| {
                        let cell = cells(record, p.index).into_iter().find(|c| c.runtime == runtime)?;
                        let estimate = cell.estimate(get)?;
                        Some(((x_of(p.value(param)?), estimate.value), Some(estimate)))
                    })
                    .unzip()
            };
        let series_of = |name: String,
                         style: Style,
                         (line, estimates): (Vec<(f64, f64)>, Vec<Option<Interval>>)|
         -> Series {
            let errors =
                estimates.iter().map(|e| e.filter(|e| e.degrees_of_freedom.is_some()).map(|e| e.half_width)).collect();
            Series { name, style, points: line, errors }
        };
        let stat = |get: &dyn Fn(&Row) -> Option<f64>| -> Vec<Series> {
            record
                .settings
                .runtimes
                .iter()
                .filter_map(|runtime| {
                    let line = line_of(runtime, get);
                    (!line.0.is_empty()).then(|| series_of(runtime.clone(), style(record, runtime), line))
                })
                .collect()
        };
        // With priority classes: a line per runtime and class, the low class in a lighter shade.
        let by_class = |get: &dyn Fn(&ClassResult) -> Option<f64>| -> Vec<Series> {
            let mut series = Vec::new();
            for runtime in &record.settings.runtimes {
                for class in 0..record.settings.priority_classes {
                    // A class with no unit (one unit in all) has nothing to draw.
                    let of_class = |r: &Row| get(r.classes.iter().find(|c| c.class == class && c.units > 0)?);
                    let line = line_of(runtime, &of_class);
                    let name = format!("{runtime} {}", crate::report::tables::class_name(class));
                    let s = style(record, runtime);
                    let c = s.colour;
                    let light = RGBColor(c.0 / 2 + 128, c.1 / 2 + 128, c.2 / 2 + 128);
                    let shade = if class == 0 { s } else { Style { colour: light, ..s } };
                    if !line.0.is_empty() {
                        series.push(series_of(name, shade, line));
                    }
                }
            }
            series
        };
        let summary = |r: &Row| r.statistics.as_ref().map(|s| s.get(metric).clone());
        type Statistic<'a> = Box<dyn Fn(&Row) -> Option<f64> + 'a>;
        let mut wanted: Vec<(&str, String, Unit, Statistic<'_>)> = vec![
            ("mean", format!("mean {}", metric.name()), Unit::Nanos, Box::new(move |r| summary(r)?.mean)),
            (
                "p99",
                format!("p99 {}", metric.name()),
                Unit::Nanos,
                Box::new(move |r| summary(r)?.p99.map(|v| v as f64)),
            ),
            (
                "samples",
                "measured iterations (all units)".into(),
                Unit::Count,
                Box::new(|r| r.counts.as_ref().map(|c| c.iterations_measured as f64)),
            ),
        ];
        if crate::report::tables::default_layout(record) == crate::report::tables::Layout::Volume {
            let rate = crate::report::tables::iteration_word(record);
            wanted.extend::<[(&str, String, Unit, Statistic<'_>); 4]>([
                (
                    "delay",
                    "delay: mean |actual - expected|".into(),
                    Unit::Nanos,
                    Box::new(move |r| r.statistics.as_ref()?.actual.mean_absolute_deviation),
                ),
                (
                    "count",
                    "measured iterations per unit".into(),
                    Unit::Count,
                    Box::new(|r| r.counts.as_ref().map(|c| c.iterations_measured as f64 / c.units.max(1) as f64)),
                ),
                (
                    "rate",
                    format!("{rate} per second (all units)"),
                    Unit::Count,
                    Box::new(|r| r.counts.as_ref().map(|c| c.iterations_per_s)),
                ),
                (
                    "rss",
                    "peak RSS of the worker".into(),
                    Unit::Mib,
                    Box::new(|r| r.worker.as_ref()?.peak_rss_kb.map(|kb| kb as f64 / 1024.0)),
                ),
            ]);
        }
        if record.settings.priority_classes > 1 {
            let rate = crate::report::tables::iteration_word(record);
            type ClassStatistic = Box<dyn Fn(&ClassResult) -> Option<f64>>;
            let classes: [(&str, String, Unit, ClassStatistic); 2] = [
                (
                    "class-delay",
                    "delay: mean |actual - expected|".into(),
                    Unit::Nanos,
                    Box::new(move |c| c.statistics.as_ref()?.actual.mean_absolute_deviation),
                ),
                ("class-rate", format!("{rate} per second"), Unit::Count, Box::new(|c| Some(c.iterations_per_s))),
            ];
            for (name, y_desc, unit, get) in &classes {
                let series = by_class(get.as_ref());
                if series.is_empty() {
                    continue;
                }
                let title = format!("{y_desc} by priority class across {}{label}", param.name());
                charts.push(sweep_chart(name, title, Axis::new(y_desc, *unit), &series)?);
            }
        }
        for (name, y_desc, unit, get) in &wanted {
            let series = stat(get.as_ref());
            if series.is_empty() {
                continue;
            }
            let title = format!("{name} across {}{label}", param.name());
            charts.push(sweep_chart(name, title, Axis::new(y_desc, *unit), &series)?);
        }
        // Ratio to each runtime's own first point, its interval propagated from both.
        let ratios: Vec<Series> = record
            .settings
            .runtimes
            .iter()
            .filter_map(|runtime| {
                let (line, estimates) = line_of(runtime, &|r: &Row| summary(r)?.mean);
                let first = estimates.first().copied().flatten().filter(|f| f.value != 0.0)?;
                let ratio = |e: Option<Interval>| e.map(|e| ratio_interval(&e, &first));
                let points = line
                    .iter()
                    .zip(&estimates)
                    .map(|((x, _), e)| (*x, ratio(*e).map_or(f64::NAN, |r| r.value)))
                    .collect();
                let intervals = estimates.iter().map(|e| ratio(*e)).collect();
                Some(series_of(runtime.clone(), style(record, runtime), (points, intervals)))
            })
            .collect();
        if !ratios.is_empty() {
            let title = format!("mean {} relative to the first {}{label}", metric.name(), param.name());
            let y_desc =
                format!("ratio to {}={}", param.name(), param.format_value(points[0].value(param).unwrap_or(0)));
            charts.push(sweep_chart("ratio", title, Axis::new(y_desc, Unit::Plain), &ratios)?);
        }
    }
    Ok(charts)
}

/// The precision/cost plane of one point: each runtime's lateness (p50 a filled marker, p99 an
/// open ring, joined) against the CPU time its worker spent per wake-up.
fn frontier_chart(record: &RunRecord, point: &Point) -> Result<Option<Chart>, String> {
    let runtimes = crate::report::why::frontier(record, point.index);
    if runtimes.is_empty() {
        return Ok(None);
    }
    let spans: Vec<Span> = runtimes
        .iter()
        .map(|r| Span {
            name: r.runtime.to_string(),
            style: style(record, r.runtime),
            x: r.cpu_per_wakeup_ns,
            low: r.lateness_p50_ns,
            high: r.lateness_p99_ns,
        })
        .collect();
    let title = format!("lateness against CPU per wake-up{}", at(record, point));
    let x = Axis::new("CPU time of the worker per wake-up", Unit::Nanos).scale(Scale::Log);
    let y = Axis::new("lateness: p50 marker, p99 ring", Unit::Nanos);
    let svg = span_chart(&title, &x, &y, &spans)?;
    Ok(Some(Chart { group: "why".into(), file: format!("why-point-{}-frontier.svg", point.index), title, svg }))
}

/// The recipes experiment's frontier: for each runtime with recipes, its ways to wait at one
/// point, lateness p50 to p99 against the CPU each waiting unit cost (one chart per runtime:
/// the panels of a small multiple).
fn recipe_frontiers(record: &RunRecord, point: &Point) -> Result<Vec<Chart>, String> {
    let mut charts = Vec::new();
    for group in crate::analysis::recipes::groups_at(record, point.index).into_iter().filter(|g| g.len() > 1) {
        let names: Vec<String> = group.iter().map(|r| r.runtime.clone()).collect();
        let spans: Vec<Span> = group
            .iter()
            .filter_map(|r| {
                Some(Span {
                    name: r.runtime.clone(),
                    style: crate::report::figure::style_of(&names, &r.runtime),
                    x: r.cpu_per_unit? * 100.0,
                    low: r.p50_ns?,
                    high: r.p99_ns?,
                })
            })
            .collect();
        if spans.len() < 2 {
            continue;
        }
        let base = &group[0].base;
        let title = format!("{base}: lateness against CPU per unit{}", at(record, point));
        let x = Axis::new("CPU per waiting unit, share of a core", Unit::Percent).scale(Scale::Log);
        let y = Axis::new("lateness: p50 marker, p99 ring", Unit::Nanos);
        let svg = span_chart(&title, &x, &y, &spans)?;
        let file = format!("recipes-point-{}-{base}.svg", point.index);
        charts.push(Chart { group: "recipes".into(), file, title, svg });
    }
    Ok(charts)
}

/// Every chart of the run, in the order a report shows them.
pub fn all(record: &RunRecord) -> Result<Vec<Chart>, String> {
    let mut charts = Vec::new();
    for sweep in &record.sweeps {
        charts.extend(sweep_charts(record, sweep.param)?);
    }
    for point in &record.points {
        charts.extend(percentile_plot(record, point)?);
        charts.extend(deviation_bars(record, point)?);
    }
    for point in &record.points {
        charts.extend(frontier_chart(record, point)?);
    }
    if record.experiment == "recipes" {
        for point in &record.points {
            charts.extend(recipe_frontiers(record, point)?);
        }
    }
    Ok(charts)
}
