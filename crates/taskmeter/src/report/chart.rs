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
use plotters::style::RGBColor;
use taskmeter_analysis::cells::{cells, Cell, Statistic};
use taskmeter_analysis::histogram;
use taskmeter_model::run::{ClassResult, Metric, Row, RunRecord};
use taskmeter_model::sweep::{Param, Point};
use taskmeter_stats::{ratio_range, Interval};

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
/// runtime (with repetitions: their mean, and its 95 % range for another invocation as an error bar).
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
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let (actual, full): (Vec<Option<Interval>>, Vec<Option<Interval>>) = bars.iter().map(|b| (b.1, b.2)).unzip();
    let groups =
        [Bars::of_estimates("actual", Style::other(0), &actual), Bars::of_estimates("full", Style::other(1), &full)];
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

/// Charts along one swept parameter, the other swept parameters held at each of their values:
/// per priority class, per statistic of [`plotted`], and the ratio to the first point.
fn sweep_charts(record: &RunRecord, param: Param) -> Result<Vec<Chart>, String> {
    let mut charts = Vec::new();
    for slice in slices(record, param) {
        if record.settings.priority_classes > 1 {
            for value in plotted_by_class(record) {
                let series = slice.class_series(record, value.get.as_ref());
                if !series.is_empty() {
                    let title = format!("{} by priority class across {}{}", value.desc, param.name(), slice.label);
                    charts.push(slice.chart(value.name, title, Axis::new(value.desc, value.unit), &series)?);
                }
            }
        }
        for value in plotted(record) {
            let series = slice.series(record, value.get.as_ref());
            if !series.is_empty() {
                let title = format!("{} across {}{}", value.name, param.name(), slice.label);
                charts.push(slice.chart(value.name, title, Axis::new(value.desc, value.unit), &series)?);
            }
        }
        let ratios = slice.ratio_series(record);
        if !ratios.is_empty() {
            let title = format!("mean {} relative to the first {}{}", record.metric.name(), param.name(), slice.label);
            let first = slice.points[0].0;
            let y_desc = format!("ratio to {}={}", param.name(), param.format_value(first));
            charts.push(slice.chart("ratio", title, Axis::new(y_desc, Unit::Plain), &ratios)?);
        }
    }
    Ok(charts)
}

/// A value drawn across a sweep: its file name, its axis' title and unit, and how a row (or a
/// priority class of one) gives it.
struct Plotted<T> {
    name: &'static str,
    desc: String,
    unit: Unit,
    get: Getter<T>,
}

/// How a row (or a priority class of one) gives a value.
type Getter<T> = Box<dyn Fn(&T) -> Option<f64>>;

/// The values drawn across a sweep: the metric's mean and p99 and the iterations measured, and
/// for the volume table also the delay, the iterations per unit, the rate and the peak RSS.
fn plotted(record: &RunRecord) -> Vec<Plotted<Row>> {
    let metric = record.metric;
    let plot = |name, desc: String, unit, get: Getter<Row>| Plotted { name, desc, unit, get };
    let mut values = vec![
        plot(
            "mean",
            format!("mean {}", metric.name()),
            Unit::Nanos,
            Box::new(move |r| r.statistics.as_ref()?.get(metric).mean),
        ),
        plot(
            "p99",
            format!("p99 {}", metric.name()),
            Unit::Nanos,
            Box::new(move |r| r.statistics.as_ref()?.get(metric).p99.map(|v| v as f64)),
        ),
        plot(
            "samples",
            "measured iterations (all units)".into(),
            Unit::Count,
            Box::new(|r| r.counts.as_ref().map(|c| c.iterations_measured as f64)),
        ),
    ];
    if super::tables::default_layout(record) == super::tables::Layout::Volume {
        let rate = super::tables::iteration_word(record);
        values.extend([
            plot(
                "delay",
                "delay: mean |actual - expected|".into(),
                Unit::Nanos,
                Box::new(|r| r.statistics.as_ref()?.actual.mean_absolute_deviation),
            ),
            plot(
                "count",
                "measured iterations per unit".into(),
                Unit::Count,
                Box::new(|r| r.counts.as_ref().map(|c| c.iterations_measured as f64 / c.units.max(1) as f64)),
            ),
            plot(
                "rate",
                format!("{rate} per second (all units)"),
                Unit::Count,
                Box::new(|r| r.counts.as_ref().map(|c| c.iterations_per_s)),
            ),
            plot(
                "rss",
                "peak RSS of the worker".into(),
                Unit::Mib,
                Box::new(|r| r.worker.as_ref()?.peak_rss_kb.map(|kb| kb as f64 / 1024.0)),
            ),
        ]);
    }
    values
}

/// The values drawn per priority class: the delay and the rate.
fn plotted_by_class(record: &RunRecord) -> [Plotted<ClassResult>; 2] {
    let rate = super::tables::iteration_word(record);
    [
        Plotted {
            name: "class-delay",
            desc: "delay: mean |actual - expected|".into(),
            unit: Unit::Nanos,
            get: Box::new(|c| c.statistics.as_ref()?.actual.mean_absolute_deviation),
        },
        Plotted {
            name: "class-rate",
            desc: format!("{rate} per second"),
            unit: Unit::Count,
            get: Box::new(|c| Some(c.iterations_per_s)),
        },
    ]
}

/// The points of a sweep along `param` where the other swept parameters hold one value each,
/// with every runtime's cell at each (found once).
struct Slice<'a> {
    param: Param,
    /// The other parameters' values, for a title (" units=4") and a file name ("-units4").
    label: String,
    slug: String,
    /// Each point's value of `param`, its x on the chart, and its cells.
    points: Vec<(u64, f64, Vec<Cell<'a>>)>,
    x_axis: Axis,
}

/// The slices of a sweep along `param` with two points or more, in the order of their first point.
fn slices(record: &RunRecord, param: Param) -> Vec<Slice<'_>> {
    let others = |p: &Point| -> Vec<(Param, u64)> { p.values.iter().filter(|(q, _)| *q != param).copied().collect() };
    let mut groups: Vec<Vec<(Param, u64)>> = Vec::new();
    for p in &record.points {
        if !groups.contains(&others(p)) {
            groups.push(others(p));
        }
    }
    let timed = param.is_duration() || param == Param::TimerSlack;
    groups
        .into_iter()
        .filter_map(|group| {
            let points: Vec<(&Point, u64)> = record
                .points
                .iter()
                .filter(|p| others(p) == group)
                .filter_map(|p| Some((p, p.value(param)?)))
                .collect();
            if points.len() < 2 {
                return None;
            }
            let x_axis = Axis::new(param.axis_label(), if timed { Unit::Nanos } else { Unit::Count });
            // A categorical parameter (policy) is drawn at 0, 1, ... with its values as labels.
            let (x_axis, x_of): (Axis, Box<dyn Fn(usize, u64) -> f64>) = if param.is_categorical() {
                let names = points.iter().map(|(_, v)| param.format_value(*v)).collect();
                (x_axis.scale(Scale::Categories(names)), Box::new(|i, _| i as f64))
            } else {
                (x_axis, Box::new(|_, v| v as f64))
            };
            Some(Slice {
                param,
                label: group.iter().map(|(p, v)| format!(" {}={}", p.name(), p.format_value(*v))).collect(),
                slug: group
                    .iter()
                    .map(|(p, v)| format!("-{}{}", p.name(), p.format_value(*v).replace(':', "")))
                    .collect(),
                points: points
                    .iter()
                    .enumerate()
                    .map(|(i, (p, v))| (*v, x_of(i, *v), cells(record, p.index)))
                    .collect(),
                x_axis,
            })
        })
        .collect()
}

impl Slice<'_> {
    /// A line chart of `series` across the slice, as `sweep-PARAM[-OTHERS]-NAME.svg`.
    fn chart(&self, name: &str, title: String, y: Axis, series: &[Series]) -> Result<Chart, String> {
        let svg = line_chart(&title, &self.x_axis, &y, series, None)?;
        let file = format!("sweep-{}{}-{name}.svg", self.param.name(), self.slug);
        Ok(Chart { group: "sweeps".into(), file, title, svg })
    }

    /// A runtime's line: at each point where it has a value, the mean over its repetitions, with
    /// its 95 % range for another invocation when there are two or more.
    fn line(&self, runtime: &str, get: &dyn Fn(&Row) -> Option<f64>) -> Vec<(f64, Interval)> {
        self.points
            .iter()
            .filter_map(|(_, x, cells)| Some((*x, cells.iter().find(|c| c.runtime == runtime)?.estimate(get)?)))
            .collect()
    }

    /// A line per runtime of a row's value.
    fn series(&self, record: &RunRecord, get: &dyn Fn(&Row) -> Option<f64>) -> Vec<Series> {
        let runtimes = &record.settings.runtimes;
        runtimes.iter().filter_map(|r| drawn(r.clone(), style(record, r), &self.line(r, get))).collect()
    }

    /// A line per runtime and priority class, the low class in a lighter shade (a class with no
    /// unit, one unit in all, has nothing to draw).
    fn class_series(&self, record: &RunRecord, get: &dyn Fn(&ClassResult) -> Option<f64>) -> Vec<Series> {
        let mut series = Vec::new();
        for runtime in &record.settings.runtimes {
            for class in 0..record.settings.priority_classes {
                let of_class = |r: &Row| get(r.classes.iter().find(|c| c.class == class && c.units > 0)?);
                let name = format!("{runtime} {}", super::tables::class_name(class));
                let own = style(record, runtime);
                let RGBColor(r, g, b) = own.colour;
                let look = if class == 0 {
                    own
                } else {
                    Style { colour: RGBColor(r / 2 + 128, g / 2 + 128, b / 2 + 128), ..own }
                };
                series.extend(drawn(name, look, &self.line(runtime, &of_class)));
            }
        }
        series
    }

    /// Each runtime's mean relative to its own at the slice's first point, with the range for
    /// another invocation's ratio on a log scale; the first point is 1, the reference, with none.
    fn ratio_series(&self, record: &RunRecord) -> Vec<Series> {
        let metric = record.metric;
        let mean = move |r: &Row| r.statistics.as_ref()?.get(metric).mean;
        let ratios = |runtime: &String| -> Option<Series> {
            let line = self.line(runtime, &mean);
            let first = line.first().filter(|(_, e)| e.value != 0.0)?.1;
            let ratio = |i: usize, e: &Interval| if i == 0 { Interval::single(1.0) } else { ratio_range(e, &first) };
            let ratios: Vec<(f64, Interval)> = line.iter().enumerate().map(|(i, (x, e))| (*x, ratio(i, e))).collect();
            drawn(runtime.clone(), style(record, runtime), &ratios)
        };
        record.settings.runtimes.iter().filter_map(ratios).collect()
    }
}

/// A line of estimates as a series, with error bars where an estimate has a range; none when
/// it has no point.
fn drawn(name: String, style: Style, line: &[(f64, Interval)]) -> Option<Series> {
    (!line.is_empty()).then(|| Series::of_estimates(name, style, line))
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
    for group in taskmeter_analysis::recipes::groups_at(record, point.index).into_iter().filter(|g| g.len() > 1) {
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
