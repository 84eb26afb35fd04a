//! Charts, as SVG drawn with plotters, from a run record alone:
//! - per point: the distribution of the run's metric per runtime (a CDF on a log axis), and the
//!   v1 study's bars of the mean deviation of `actual` and `full` per runtime;
//! - across each swept parameter: one line per runtime of the mean and the p99 of the metric and
//!   of the number of samples (log-log when a range spans two decades or more), and a ratio
//!   chart: each runtime's mean divided by its own mean at the first point (the TCP study's
//!   ratio graph);
//! - per point: lateness against CPU per wake-up, one point per runtime (`why.rs`).
//!
//! A chart is drawn only where there is data for it.

use crate::analysis::cells::{cells, Statistic};
use crate::analysis::histogram;
use crate::model::run::{ClassResult, Metric, Row, RunRecord};
use crate::model::sweep::{Param, Point};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use taskmeter_stats::{ratio_interval, Interval};

pub struct Chart {
    /// File name under `charts/`.
    pub file: String,
    pub title: String,
    pub svg: String,
}

const SIZE: (u32, u32) = (760, 440);

/// Distinct colours, readable on white, given to runtimes in `--runtimes` order.
const COLOURS: [RGBColor; 16] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(0, 0, 128),
    RGBColor(128, 0, 0),
    RGBColor(0, 100, 0),
    RGBColor(0, 0, 0),
    RGBColor(255, 0, 255),
    RGBColor(128, 128, 0),
];

fn colour(record: &RunRecord, runtime: &str) -> RGBColor {
    palette(record.settings.runtimes.iter().position(|r| r == runtime).unwrap_or(0))
}

/// An axis: linear, or log10 (values are plotted as their logarithm and labelled back). On a
/// log axis a value of 0 (e.g. busy=0 in a sweep) is drawn one decade below the smallest
/// positive value, and the axis title says so.
#[derive(Clone, Copy)]
struct Axis {
    log: bool,
    /// Where 0 sits on a log axis (in log10 units), when the values include 0.
    zero_at: Option<f64>,
}

impl Axis {
    const LINEAR: Axis = Axis { log: false, zero_at: None };

    /// Log when the positive values span at least two decades and none is negative.
    fn for_values(values: impl Iterator<Item = f64> + Clone) -> Axis {
        let min_positive = values.clone().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
        let max = values.clone().fold(f64::NEG_INFINITY, f64::max);
        let has_zero = values.clone().any(|v| v == 0.0);
        let negative = values.into_iter().any(|v| v < 0.0);
        if negative || !min_positive.is_finite() || max / min_positive < 100.0 {
            return Axis::LINEAR;
        }
        Axis { log: true, zero_at: has_zero.then(|| min_positive.log10() - 1.0) }
    }
    fn to(self, v: f64) -> f64 {
        match (self.log, self.zero_at) {
            (false, _) => v,
            (true, Some(zero)) if v <= 0.0 => zero,
            (true, _) => v.max(1e-12).log10(),
        }
    }
    fn label(self, v: f64) -> String {
        match (self.log, self.zero_at) {
            (false, _) => short(v),
            (true, Some(zero)) if v < zero + 0.5 => {
                if (v - zero).abs() < 0.05 {
                    "0".into()
                } else {
                    String::new()
                }
            }
            // Decades only: the ticks between them (10^2.5 = 316) are grid lines, not labels.
            (true, _) if (v - v.round()).abs() < 1e-6 => decade(v.round() as i32),
            (true, _) => String::new(),
        }
    }
    fn range(self, values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
        let mapped: Vec<f64> = values.map(|v| self.to(v)).collect();
        let lo = mapped.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = mapped.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = if self.log { (lo, hi) } else { (lo.min(0.0), hi) };
        let pad = ((hi - lo).abs() * 0.05).max(if self.log { 0.05 } else { hi.abs() * 0.05 + 1e-9 });
        (if self.log || lo < 0.0 { lo - pad } else { lo })..(hi + pad)
    }
    fn suffix(self) -> &'static str {
        match (self.log, self.zero_at) {
            (false, _) => "",
            (true, None) => ", log scale",
            (true, Some(_)) => ", log scale, 0 drawn a decade below",
        }
    }
}

/// 10^exponent as an axis label: plain up to 100000, then 1e6, 1e7...
fn decade(exponent: i32) -> String {
    match exponent {
        0..=5 => 10u64.pow(exponent as u32).to_string(),
        -2..=-1 => short(10f64.powi(exponent)),
        _ => format!("1e{exponent}"),
    }
}

/// A number with three significant digits, for axis labels.
fn short(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-2..1e6).contains(&a) {
        format!("{v:.2e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// One line of a chart: its name, colour and points, and (with repetitions) the half-width of
/// each point's 95 % interval, drawn as an error bar.
pub struct Series {
    pub name: String,
    pub colour: RGBColor,
    pub points: Vec<(f64, f64)>,
    /// Empty, or one per point.
    pub errors: Vec<Option<f64>>,
}

impl Series {
    fn key(&self, mark: Mark) -> Key {
        Key { label: self.name.clone(), colour: self.colour, mark }
    }

    pub fn new(name: impl Into<String>, colour: RGBColor, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), colour, points, errors: Vec::new() }
    }

    /// (x, lowest, highest) of each point, error bars included.
    fn extents(&self) -> impl Iterator<Item = (f64, f64, f64)> + '_ {
        self.points.iter().enumerate().map(|(i, (x, y))| {
            let e = self.errors.get(i).copied().flatten().unwrap_or(0.0);
            (*x, y - e, y + e)
        })
    }
}

/// The i-th distinct colour.
pub fn palette(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

type Plot<'a> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Draws one chart into an SVG string: a white canvas, a title, the two ranges, then `draw`.
/// One line of a legend: the label and the mark of its series.
pub struct Key {
    pub label: String,
    pub colour: RGBColor,
    pub mark: Mark,
}

#[derive(Clone, Copy)]
pub enum Mark {
    /// A line of this width.
    Line(u32),
    Bar,
    Dot,
}

/// Draws a chart with `draw`; the legend goes to the right of the plot, where it can never cover
/// data (the figure widens by its width; the plot keeps its size).
fn svg_chart(
    title: &str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    legend: &[Key],
    draw: impl FnOnce(&mut Plot) -> Result<(), String>,
) -> Result<String, String> {
    let legend_width = legend_width(legend);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (SIZE.0 + legend_width, SIZE.1)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot_area, legend_area) = root.split_horizontally(SIZE.0);
        let mut chart = ChartBuilder::on(&plot_area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d(x, y)
            .map_err(err)?;
        draw(&mut chart)?;
        draw_legend(&legend_area, legend)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Pixels per legend line, and from the top of the figure to the first (the plot's top).
const LEGEND_LINE: i32 = 18;
const LEGEND_TOP: i32 = 46;

/// The legend's room: its longest label at about 7 px a character in the 12 px font, and the
/// mark (0 without a legend).
fn legend_width(legend: &[Key]) -> u32 {
    legend.iter().map(|k| k.label.chars().count() as u32 * 7 + 48).max().unwrap_or(0)
}

fn draw_legend(area: &DrawingArea<SVGBackend, plotters::coord::Shift>, legend: &[Key]) -> Result<(), String> {
    let font = ("sans-serif", 12).into_font();
    for (i, key) in legend.iter().enumerate() {
        let y = LEGEND_TOP + i as i32 * LEGEND_LINE;
        let colour = key.colour;
        match key.mark {
            Mark::Line(width) => area.draw(&PathElement::new(vec![(4, y), (24, y)], colour.stroke_width(width))),
            Mark::Bar => area.draw(&Rectangle::new([(6, y - 5), (20, y + 5)], colour.filled())),
            Mark::Dot => area.draw(&Circle::new((14, y), 5, colour.filled())),
        }
        .map_err(err)?;
        area.draw(&Text::new(key.label.clone(), (32, y - 5), font.clone())).map_err(err)?;
    }
    Ok(())
}

/// One line per series, with its error bars; with `categories`, x is a position in that list
/// and labelled by it. The value axis is logarithmic when the values span two decades.
pub fn line_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    categories: Option<&[String]>,
) -> Result<String, String> {
    lines(title, x_desc, y_desc, series, Look { categories, value_axis: None, level: None })
}

/// The same with a linear value axis from 0, for shares such as an efficiency.
pub fn share_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    categories: Option<&[String]>,
) -> Result<String, String> {
    lines(title, x_desc, y_desc, series, Look { categories, value_axis: Some(Axis::LINEAR), level: None })
}

/// A level a chart marks across its width, and where each line crosses it.
pub struct Level {
    pub y: f64,
    pub label: String,
    /// (x, colour): a mark on the level, e.g. each runtime's METG.
    pub marks: Vec<(f64, RGBColor)>,
}

/// [`share_chart`] with a level drawn across it and marked where each line crosses.
pub fn share_chart_at_level(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    level: &Level,
) -> Result<String, String> {
    lines(title, x_desc, y_desc, series, Look { categories: None, value_axis: Some(Axis::LINEAR), level: Some(level) })
}

/// How a line chart is drawn beyond its titles and series.
struct Look<'a> {
    categories: Option<&'a [String]>,
    /// None: chosen from the values (logarithmic when they span two decades).
    value_axis: Option<Axis>,
    level: Option<&'a Level>,
}

fn lines(title: &str, x_desc: &str, y_desc: &str, series: &[Series], look: Look) -> Result<String, String> {
    let Look { categories, value_axis, level } = look;
    let grey = RGBColor(110, 110, 110);
    let mut legend: Vec<Key> = series.iter().map(|s| s.key(Mark::Line(2))).collect();
    if let Some(level) = level {
        legend.push(Key { label: level.label.clone(), colour: grey, mark: Mark::Line(1) });
    }
    let all = || series.iter().flat_map(|s| s.points.iter().copied());
    let xa = if categories.is_some() { Axis::LINEAR } else { Axis::for_values(all().map(|p| p.0)) };
    let x_range = match categories {
        Some(c) => -0.3..(c.len() as f64 - 0.7),
        None => xa.range(all().map(|p| p.0)),
    };
    let x_label = |v: &f64| match categories {
        Some(c) => {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                c.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        }
        None => xa.label(*v),
    };
    let ya = value_axis.unwrap_or_else(|| Axis::for_values(all().map(|p| p.1)));
    // An error bar that reaches below 0 on a log axis stops at the lowest value drawn.
    let floor = all().map(|p| p.1).filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
    let clamp = |v: f64| if ya.log && v <= 0.0 { floor } else { v };
    let extents = || series.iter().flat_map(|s| s.extents().flat_map(move |(_, lo, hi)| [clamp(lo), hi]));
    let x_ticks = categories.map_or(10, |c| c.len() * 4 + 1);
    let x_span = x_range.end - x_range.start;
    let (x_from, x_to) = (x_range.start, x_range.end);
    svg_chart(title, x_range, ya.range(all().map(|p| p.1).chain(extents())), &legend, |chart| {
        chart
            .configure_mesh()
            .x_desc(format!("{x_desc}{}", xa.suffix()))
            .y_desc(format!("{y_desc}{}", ya.suffix()))
            .x_labels(x_ticks)
            .x_label_formatter(&x_label)
            .y_label_formatter(&|v| ya.label(*v))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(err)?;
        for line in series {
            let mapped: Vec<(f64, f64)> = line.points.iter().map(|(x, y)| (xa.to(*x), ya.to(*y))).collect();
            let style = line.colour.stroke_width(2);
            chart.draw_series(LineSeries::new(mapped.clone(), style)).map_err(err)?;
            chart.draw_series(mapped.iter().map(|p| Circle::new(*p, 3, line.colour.filled()))).map_err(err)?;
            let cap = x_span * 0.008;
            let bars = line.extents().zip(&line.errors).filter(|(_, e)| e.is_some()).map(|((x, lo, hi), _)| {
                let (x, lo, hi) = (xa.to(x), ya.to(clamp(lo)), ya.to(hi));
                PathElement::new(
                    vec![(x - cap, lo), (x + cap, lo), (x, lo), (x, hi), (x - cap, hi), (x + cap, hi)],
                    line.colour.stroke_width(1),
                )
            });
            chart.draw_series(bars).map_err(err)?;
        }
        if let Some(level) = level {
            let y = ya.to(level.y);
            chart
                .draw_series(std::iter::once(PathElement::new(vec![(x_from, y), (x_to, y)], grey.stroke_width(1))))
                .map_err(err)?;
            let marks = level.marks.iter().map(|(x, colour)| TriangleMarker::new((xa.to(*x), y), 7, colour.filled()));
            chart.draw_series(marks).map_err(err)?;
        }
        Ok(())
    })
}

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("cannot draw a chart: {e:?}")
}

/// The distribution of the metric per runtime at one point: a CDF, value axis logarithmic.
fn cdf_chart(record: &RunRecord, point: &Point) -> Result<Option<Chart>, String> {
    let metric = record.metric;
    let mut series = Vec::new();
    for cell in cells(record, point.index) {
        // The repetitions of a runtime together: one distribution of all their samples.
        let h = histogram::merge(cell.measured.iter().filter_map(|r| Some(r.histograms.as_ref()?.get(metric))))?;
        if h.is_empty() {
            continue;
        }
        let points: Vec<(f64, f64)> = histogram::cdf(&h).into_iter().map(|(v, f)| (v as f64 / 1e3, f)).collect();
        // Early wake-ups sit at the left edge with those on time: the legend says how many.
        let early = cell.sum(|r| r.counts.as_ref().map(|c| c.early_wakeups));
        let name = match early {
            0 => cell.runtime.to_string(),
            n if metric == Metric::Lateness => {
                format!("{} ({} early)", cell.runtime, crate::report::format::format_count(n))
            }
            _ => cell.runtime.to_string(),
        };
        series.push(Series::new(&name, colour(record, cell.runtime), thin(points, 400)));
    }
    // Values in µs on a log axis; values <= 0 (a wake-up at or before its deadline) sit at the
    // axis' left end, half the smallest positive value.
    let smallest =
        series.iter().flat_map(|s| s.points.iter().map(|q| q.0)).filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
    let floor = if smallest.is_finite() { smallest / 2.0 } else { 0.001 };
    for line in &mut series {
        for p in line.points.iter_mut() {
            p.0 = p.0.max(floor);
        }
    }
    if series.is_empty() {
        return Ok(None);
    }
    let title = format!("{} distribution{}", metric.name(), at(record, point));
    let xa = Axis { log: true, zero_at: None };
    let x_range = xa.range(series.iter().flat_map(|s| s.points.iter().map(|q| q.0)));
    let legend: Vec<Key> = series.iter().map(|s| s.key(Mark::Line(2))).collect();
    let svg = svg_chart(&title, x_range, 0f64..1.02f64, &legend, |chart| {
        chart
            .configure_mesh()
            .x_desc(format!("{} (µs, log scale; values <= 0 at the left edge)", metric.name()))
            .y_desc("fraction of samples at or below")
            .x_label_formatter(&|v| xa.label(*v))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(err)?;
        for Series { colour, points, .. } in &series {
            // A step function: the fraction holds until the next value.
            let mut steps = Vec::with_capacity(points.len() * 2);
            let mut previous = 0.0;
            for (x, f) in points {
                steps.push((xa.to(*x), previous));
                steps.push((xa.to(*x), *f));
                previous = *f;
            }
            let style = colour.stroke_width(2);
            chart.draw_series(LineSeries::new(steps, style)).map_err(err)?;
        }
        Ok(())
    })?;
    Ok(Some(Chart { file: format!("point-{}-{}-cdf.svg", point.index + 1, metric.name()), title, svg }))
}

/// Keeps at most `n` points of a long curve (always the first and the last).
fn thin(points: Vec<(f64, f64)>, n: usize) -> Vec<(f64, f64)> {
    if points.len() <= n {
        return points;
    }
    let step = points.len() as f64 / n as f64;
    let mut kept: Vec<(f64, f64)> = (0..n).map(|i| points[(i as f64 * step) as usize]).collect();
    kept.push(*points.last().expect("not empty"));
    kept
}

/// The v1 study's bars: mean deviation of `actual` and `full` from the expected sleep, per
/// runtime (with repetitions: their mean, and the 95 % interval as an error bar).
fn deviation_bars(record: &RunRecord, point: &Point) -> Result<Option<Chart>, String> {
    type Bar = (String, Option<Interval>, Option<Interval>);
    let bars: Vec<Bar> = cells(record, point.index)
        .iter()
        .filter(|c| c.repetitions() > 0)
        .map(|c| {
            let of = |metric| c.mean_estimate(metric, Statistic::MeanDeviation).map(|i| scaled(i, 1e-3));
            (c.runtime.to_string(), of(Metric::Actual), of(Metric::Full))
        })
        .filter(|b| b.1.is_some() && b.2.is_some())
        .collect();
    if bars.is_empty() {
        return Ok(None);
    }
    let repeated = record.settings.repeat > 1;
    let error = |i: &Interval| if repeated { i.half_width } else { 0.0 };
    let title = format!("mean deviation from the expected sleep{}", at(record, point));
    let top =
        bars.iter().flat_map(|b| [b.1, b.2]).flatten().map(|i| i.value + error(&i)).fold(0.0, f64::max) * 1.15 + 1e-9;
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let metrics = [("actual", COLOURS[0], -0.2), ("full", COLOURS[4], 0.2)];
    let legend: Vec<Key> = metrics
        .iter()
        .map(|(label, colour, _)| Key { label: label.to_string(), colour: *colour, mark: Mark::Bar })
        .collect();
    let svg = svg_chart(&title, -0.5f64..(bars.len() as f64 - 0.5), 0f64..top, &legend, |chart| {
        let x_fmt = |v: &f64| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(bars.len() * 2 + 1)
            .x_label_formatter(&x_fmt)
            .x_desc("runtime")
            .y_desc("mean |value - expected| (µs)")
            .y_label_formatter(&|v| short(*v))
            .draw()
            .map_err(err)?;
        for (metric, colour, offset) in metrics {
            let pick = |b: &Bar| if metric == "actual" { b.1 } else { b.2 }.expect("filtered");
            chart
                .draw_series(bars.iter().enumerate().map(|(i, b)| {
                    let x = i as f64 + offset;
                    Rectangle::new([(x - 0.18, 0.0), (x + 0.18, pick(b).value)], colour.filled())
                }))
                .map_err(err)?;
            if repeated {
                chart
                    .draw_series(bars.iter().enumerate().map(|(i, b)| {
                        let (x, v) = (i as f64 + offset, pick(b));
                        let (lo, hi) = ((v.value - v.half_width).max(0.0), v.value + v.half_width);
                        PathElement::new(
                            vec![(x - 0.06, lo), (x + 0.06, lo), (x, lo), (x, hi), (x - 0.06, hi), (x + 0.06, hi)],
                            BLACK.stroke_width(1),
                        )
                    }))
                    .map_err(err)?;
            }
        }
        Ok(())
    })?;
    Ok(Some(Chart { file: format!("point-{}-deviation-bars.svg", point.index + 1), title, svg }))
}

/// An interval in other units.
fn scaled(i: Interval, factor: f64) -> Interval {
    Interval {
        value: i.value * factor,
        half_width: i.half_width * factor,
        standard_error: i.standard_error * factor,
        ..i
    }
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
                         colour: RGBColor,
                         (line, estimates): (Vec<(f64, f64)>, Vec<Option<Interval>>)|
         -> Series {
            let errors =
                estimates.iter().map(|e| e.filter(|e| e.degrees_of_freedom.is_some()).map(|e| e.half_width)).collect();
            Series { name, colour, points: line, errors }
        };
        let stat = |get: &dyn Fn(&Row) -> Option<f64>| -> Vec<Series> {
            record
                .settings
                .runtimes
                .iter()
                .filter_map(|runtime| {
                    let line = line_of(runtime, get);
                    (!line.0.is_empty()).then(|| series_of(runtime.clone(), colour(record, runtime), line))
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
                    let c = colour(record, runtime);
                    let shade = if class == 0 { c } else { RGBColor(c.0 / 2 + 128, c.1 / 2 + 128, c.2 / 2 + 128) };
                    if !line.0.is_empty() {
                        series.push(series_of(name, shade, line));
                    }
                }
            }
            series
        };
        let summary = |r: &Row| r.statistics.as_ref().map(|s| s.get(metric).clone());
        let micro = |v: Option<f64>| v.map(|v| v / 1e3);
        type Statistic<'a> = Box<dyn Fn(&Row) -> Option<f64> + 'a>;
        let mut wanted: Vec<(&str, String, Statistic<'_>)> = vec![
            ("mean", format!("mean {} (µs)", metric.name()), Box::new(move |r| micro(summary(r)?.mean))),
            ("p99", format!("p99 {} (µs)", metric.name()), Box::new(move |r| micro(summary(r)?.p99.map(|v| v as f64)))),
            (
                "samples",
                "measured iterations (all units)".into(),
                Box::new(|r| r.counts.as_ref().map(|c| c.iterations_measured as f64)),
            ),
        ];
        if crate::report::tables::default_layout(record) == crate::report::tables::Layout::Volume {
            let rate = crate::report::tables::iteration_word(record);
            wanted.extend::<[(&str, String, Statistic<'_>); 4]>([
                (
                    "delay",
                    "delay: mean |actual - expected| (µs)".into(),
                    Box::new(move |r| micro(r.statistics.as_ref()?.actual.mean_absolute_deviation)),
                ),
                (
                    "count",
                    "measured iterations per unit".into(),
                    Box::new(|r| r.counts.as_ref().map(|c| c.iterations_measured as f64 / c.units.max(1) as f64)),
                ),
                (
                    "rate",
                    format!("{rate} per second (all units)"),
                    Box::new(|r| r.counts.as_ref().map(|c| c.iterations_per_s)),
                ),
                (
                    "rss",
                    "peak RSS of the worker (MiB)".into(),
                    Box::new(|r| r.worker.as_ref()?.peak_rss_kb.map(|kb| kb as f64 / 1024.0)),
                ),
            ]);
        }
        if record.settings.priority_classes > 1 {
            let rate = crate::report::tables::iteration_word(record);
            type ClassStatistic = Box<dyn Fn(&ClassResult) -> Option<f64>>;
            let classes: [(&str, String, ClassStatistic); 2] = [
                (
                    "class-delay",
                    "delay by class: mean |actual - expected| (µs)".into(),
                    Box::new(move |c| micro(c.statistics.as_ref()?.actual.mean_absolute_deviation)),
                ),
                ("class-rate", format!("{rate} per second by class"), Box::new(|c| Some(c.iterations_per_s))),
            ];
            for (name, y_desc, get) in &classes {
                let series = by_class(get.as_ref());
                if series.is_empty() {
                    continue;
                }
                let title = format!("{} across {}{label}", y_desc, param.name());
                let svg = line_chart(&title, param.axis_label(), y_desc, &series, categories.as_deref())?;
                charts.push(Chart { file: format!("sweep-{}{slug}-{name}.svg", param.name()), title, svg });
            }
        }
        for (name, y_desc, get) in &wanted {
            let series = stat(get.as_ref());
            if series.is_empty() {
                continue;
            }
            let title = format!("{name} across {}{label}", param.name());
            let svg = line_chart(&title, param.axis_label(), y_desc, &series, categories.as_deref())?;
            charts.push(Chart { file: format!("sweep-{}{slug}-{name}.svg", param.name()), title, svg });
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
                Some(series_of(runtime.clone(), colour(record, runtime), (points, intervals)))
            })
            .collect();
        if !ratios.is_empty() {
            let title = format!("mean {} relative to the first {}{label}", metric.name(), param.name());
            let y_desc =
                format!("ratio to {}={}", param.name(), param.format_value(points[0].value(param).unwrap_or(0)));
            let svg = line_chart(&title, param.axis_label(), &y_desc, &ratios, categories.as_deref())?;
            charts.push(Chart { file: format!("sweep-{}{slug}-ratio.svg", param.name()), title, svg });
        }
    }
    Ok(charts)
}

/// The precision/cost plane of one point: each runtime's lateness (p50 a filled dot, p99 an
/// open one, joined) against the CPU time its worker spent per wake-up.
fn frontier_chart(record: &RunRecord, point: &Point) -> Result<Option<Chart>, String> {
    let runtimes = crate::report::why::frontier(record, point.index);
    if runtimes.is_empty() {
        return Ok(None);
    }
    let us = |ns: f64| ns / 1e3;
    let xs = || runtimes.iter().map(|r| us(r.cpu_per_wakeup_ns));
    // Lateness can be 0 or negative (node wakes early): such a point sits at the axis' floor.
    let ys = || runtimes.iter().flat_map(|r| [us(r.lateness_p50_ns), us(r.lateness_p99_ns)]);
    let floor = ys().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
    let floor = if floor.is_finite() { floor / 2.0 } else { 0.001 };
    let (xa, ya) = (Axis::for_values(xs()), Axis::for_values(ys().map(|v| v.max(floor))));
    let title = format!("lateness against CPU per wake-up{}", at(record, point));
    let legend: Vec<Key> = runtimes
        .iter()
        .map(|r| Key { label: r.runtime.to_string(), colour: colour(record, r.runtime), mark: Mark::Dot })
        .collect();
    let svg = svg_chart(&title, xa.range(xs()), ya.range(ys().map(|v| v.max(floor))), &legend, |chart| {
        chart
            .configure_mesh()
            .x_desc(format!("CPU time of the worker per wake-up (µs{})", xa.suffix()))
            .y_desc(format!("lateness p50 (dot), p99 (ring) (µs{})", ya.suffix()))
            .x_label_formatter(&|v| xa.label(*v))
            .y_label_formatter(&|v| ya.label(*v))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(err)?;
        for r in &runtimes {
            let c = colour(record, r.runtime);
            let x = xa.to(us(r.cpu_per_wakeup_ns));
            let (p50, p99) = (ya.to(us(r.lateness_p50_ns).max(floor)), ya.to(us(r.lateness_p99_ns).max(floor)));
            chart.draw_series([PathElement::new(vec![(x, p50), (x, p99)], c.stroke_width(2))]).map_err(err)?;
            chart.draw_series([Circle::new((x, p99), 5, c.stroke_width(2))]).map_err(err)?;
            chart.draw_series([Circle::new((x, p50), 5, c.filled())]).map_err(err)?;
            chart
                .draw_series([Text::new(r.runtime.to_string(), (x, p50), ("sans-serif", 12).into_font().color(&c))])
                .map_err(err)?;
        }
        Ok(())
    })?;
    Ok(Some(Chart { file: format!("why-point-{}-frontier.svg", point.index + 1), title, svg }))
}

/// Every chart of the run, in the order a report shows them.
pub fn all(record: &RunRecord) -> Result<Vec<Chart>, String> {
    let mut charts = Vec::new();
    for sweep in &record.sweeps {
        charts.extend(sweep_charts(record, sweep.param)?);
    }
    for point in &record.points {
        charts.extend(cdf_chart(record, point)?);
        charts.extend(deviation_bars(record, point)?);
    }
    for point in &record.points {
        charts.extend(frontier_chart(record, point)?);
    }
    Ok(charts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axes_only_for_positive_values_spanning_two_decades() {
        assert!(Axis::for_values([1.0, 1000.0].into_iter()).log);
        assert!(!Axis::for_values([1.0, 50.0].into_iter()).log);
        assert!(!Axis::for_values([-1.0, 1.0, 1000.0].into_iter()).log);
        assert!(!Axis::for_values([0.0, 1000.0].into_iter()).log, "one positive value spans nothing");
        let a = Axis::for_values([0.0, 1000.0, 1_000_000.0].into_iter());
        assert!(a.log);
        assert_eq!(a.to(0.0), 2.0, "0 sits a decade below 1000");
        assert_eq!(a.label(2.0), "0");
        assert_eq!(a.label(3.0), "1000");
        assert_eq!(a.label(6.0), "1e6");
        assert_eq!(a.label(3.5), "", "only decades are labelled (not 3162)");
        assert_eq!(a.label(4.0), "10000");
        assert_eq!(Axis { log: true, zero_at: None }.label(-1.0), "0.10");
    }

    #[test]
    fn the_legend_is_beside_the_plot_and_as_wide_as_its_longest_label() {
        let key = |label: &str| Key { label: label.into(), colour: COLOURS[0], mark: Mark::Line(2) };
        assert_eq!(legend_width(&[]), 0);
        let series = vec![Series::new("a", COLOURS[0], vec![(1.0, 1.0), (2.0, 2.0)])];
        let svg = line_chart("t", "x", "y", &series, None).unwrap();
        assert!(svg.contains(&format!("width=\"{}\"", SIZE.0 + legend_width(&[key("a")]))));
        assert!(legend_width(&[key("python-asyncio"), key("go")]) > legend_width(&[key("python")]));
    }

    #[test]
    fn thinning_keeps_both_ends() {
        let points: Vec<(f64, f64)> = (0..1000).map(|i| (i as f64, i as f64 / 999.0)).collect();
        let kept = thin(points, 100);
        assert!(kept.len() <= 101);
        assert_eq!(kept.first(), Some(&(0.0, 0.0)));
        assert_eq!(kept.last(), Some(&(999.0, 1.0)));
    }
}
