//! The house style: every figure of every report is drawn here, with plotters, as SVG sized for
//! one column of a two-column paper (8.5 cm: [`WIDTH`] px, fonts of 7 to 8 pt at that width).
//!
//! - Axes: logarithmic where the values span two decades, with ticks at 1-2-5 or at decades
//!   (no 251, 398 or 3162). Each axis is written in one unit, named in its title (`lateness
//!   (µs, log)`), the one that suits its middle, so ticks read `0.5`, `2`, `10`; counts keep
//!   their multipliers (`2k`).
//! - Every SVG opens with a `<title>` and a `<desc>` (what it plots against what, in which
//!   units, and its lines), for screen readers and file previews.
//! - Colours: a runtime's hue is its language family's and its shade, dash and marker its own
//!   within the family ([`styles`]), so 17 lines stay apart, and a family reads as one.
//! - Legends: below the plot, never over the data.
//! - The latency distribution: a percentile plot (HdrHistogram's), its x axis 0, 50, 90, 99,
//!   99.9, 99.99 % so the tail gets as much room as the body.
//! - Intervals: error bars wherever a value has one.
//!
//! `print.rs` turns these SVGs into PNGs at 300 dpi.

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use std::ops::Range;
use taskmeter_stats::Interval;

/// A figure: where its report places it, its file name (under `charts/`), its title and its SVG.
pub struct Chart {
    /// The figures of a group are placed together by a page's [`super::page::Block::Figures`].
    pub group: String,
    pub file: String,
    pub title: String,
    pub svg: String,
}

/// A figure's width in px: one column of a two-column paper (8.5 cm) at 1 px = 0.3 pt.
pub const WIDTH: u32 = 480;
/// The plotting area's height, axes included (the title and legend add theirs).
const PLOT_HEIGHT: u32 = 320;
const FONT: &str = "sans-serif";
/// Font sizes as plotters takes them (it writes 1/1.24 of them in px): tick labels and legend
/// 14.5 px = 7.3 pt at 8.5 cm, axis titles the same, the title 16 px = 8 pt.
const TICK_SIZE: u32 = 18;
const DESC_SIZE: u32 = 18;
const TITLE_SIZE: u32 = 20;
/// About how wide a digit of the tick font is, in px (DejaVu Sans, Liberation Sans).
const CHAR_WIDTH: f64 = 9.0;
/// The same, on average over a legend's labels (lower case, digits): wider would waste columns.
const LEGEND_CHAR_WIDTH: f64 = 7.6;
/// The title's lines, in px.
const TITLE_LINE: u32 = 21;
const GRID: RGBColor = RGBColor(225, 225, 225);
const MINOR_GRID: RGBColor = RGBColor(242, 242, 242);
const GREY: RGBColor = RGBColor(100, 100, 100);

/// What an axis counts, which names its ticks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unit {
    /// Nanoseconds, labelled `500 ns`, `2 µs`, `10 ms`, `1 s`.
    Nanos,
    /// A count, labelled `10`, `2k`, `1M`.
    Count,
    /// A share from 0 to 100, labelled `50 %`.
    Percent,
    /// A plain number (a ratio), labelled `0.5`, `2`, `10`.
    Plain,
    /// Mebibytes, labelled `2 MiB`.
    Mib,
}

impl Unit {
    /// A tick label: three significant digits at most, trailing zeros dropped.
    pub fn label(self, v: f64) -> String {
        if v == 0.0 {
            return "0".into();
        }
        let scaled = |v: f64, units: &[(f64, &str)]| {
            let (factor, name) = units.iter().rev().find(|(f, _)| v.abs() >= *f * 0.9995).copied().unwrap_or(units[0]);
            format!("{}{name}", number(v / factor))
        };
        match self {
            Unit::Nanos => scaled(v, &[(1.0, " ns"), (1e3, " µs"), (1e6, " ms"), (1e9, " s")]),
            Unit::Count if v.abs() < 1e3 => number(v),
            Unit::Count => scaled(v, &[(1.0, ""), (1e3, "k"), (1e6, "M"), (1e9, "G")]),
            Unit::Percent => format!("{} %", number(v)),
            Unit::Plain => number(v),
            Unit::Mib => format!("{} MiB", number(v)),
        }
    }
}

/// Three significant digits, trailing zeros (and a trailing point) dropped.
fn number(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let digits = (2 - v.abs().log10().floor() as i32).clamp(0, 6) as usize;
    let text = format!("{v:.digits$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// How an axis maps its values.
#[derive(Clone, Debug, PartialEq)]
pub enum Scale {
    /// Logarithmic when the positive values span two decades and none is negative.
    Auto,
    Linear,
    /// Linear from 0 (a share, a count of bars).
    LinearFromZero,
    Log,
    /// Named positions 0, 1, 2... (a policy).
    Categories(Vec<String>),
}

/// An axis: its title, its unit and its scale.
#[derive(Clone, Debug)]
pub struct Axis {
    pub desc: String,
    pub unit: Unit,
    pub scale: Scale,
}

impl Axis {
    pub fn new(desc: impl Into<String>, unit: Unit) -> Axis {
        Axis { desc: desc.into(), unit, scale: Scale::Auto }
    }
    pub fn scale(mut self, scale: Scale) -> Axis {
        self.scale = scale;
        self
    }
}

/// An axis fitted to its values: how a value maps to the plot, and where its ticks sit.
#[derive(Clone, Debug)]
struct Mapped {
    log: bool,
    /// Where 0 sits on a log axis (in log10 units), when the values include 0.
    zero_at: Option<f64>,
    unit: Unit,
    categories: Option<Vec<String>>,
    /// Ticks placed and labelled by the chart (a percentile axis).
    fixed: Option<Vec<(f64, String)>>,
    range: Range<f64>,
    /// The unit the ticks are written in, and its size in the axis' values (`µs`: 1000 ns);
    /// none for counts and plain numbers.
    shown: Option<(f64, &'static str)>,
}

impl Mapped {
    fn fit(axis: &Axis, values: &[f64]) -> Mapped {
        Mapped::fit_as(axis, values, None)
    }

    /// [`Mapped::fit`], its choice of a log axis made beforehand when `log` is given.
    fn fit_as(axis: &Axis, values: &[f64], log: Option<bool>) -> Mapped {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let min_positive = finite.iter().copied().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
        let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let negative = finite.iter().any(|v| *v < 0.0);
        let has_zero = finite.contains(&0.0);
        let spans_two_decades = min_positive.is_finite() && max / min_positive >= 100.0;
        let log = match &axis.scale {
            _ if log.is_some() => log == Some(true) && min_positive.is_finite(),
            Scale::Auto => !negative && spans_two_decades,
            Scale::Log => min_positive.is_finite(),
            _ => false,
        };
        let mut mapped = Mapped {
            log,
            zero_at: (log && has_zero).then(|| min_positive.log10() - 1.0),
            unit: axis.unit,
            categories: match &axis.scale {
                Scale::Categories(c) => Some(c.clone()),
                _ => None,
            },
            fixed: None,
            range: 0.0..1.0,
            shown: None,
        };
        let to: Vec<f64> = finite.iter().map(|v| mapped.to(*v)).collect();
        let lo = to.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = to.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        mapped.range = match &mapped.categories {
            Some(c) => -0.4..(c.len() as f64 - 0.6),
            None if !lo.is_finite() => 0.0..1.0,
            None if log => {
                let pad = ((hi - lo) * 0.04).max(0.05);
                (lo - pad)..(hi + pad)
            }
            None => {
                let from_zero = match axis.scale {
                    Scale::LinearFromZero => true,
                    Scale::Linear => false,
                    _ => lo >= 0.0 && lo < 0.4 * hi,
                };
                let lo = if from_zero { lo.min(0.0) } else { lo };
                let pad = ((hi - lo).abs() * 0.05).max(hi.abs() * 0.05 + 1e-9);
                (if from_zero && lo >= 0.0 { lo } else { lo - pad })..(hi + pad)
            }
        };
        mapped.shown = mapped.unit_shown();
        mapped
    }

    /// The one unit of the axis' ticks: for time the largest not above the axis' middle (on a
    /// log axis its geometric middle, else its largest value), so that ticks read 0.5 to 1000.
    fn unit_shown(&self) -> Option<(f64, &'static str)> {
        let Range { start, end } = self.range;
        let middle = if self.log { 10f64.powf((start + end) / 2.0) } else { start.abs().max(end.abs()) };
        match self.unit {
            Unit::Nanos => {
                let units = [(1.0, "ns"), (1e3, "µs"), (1e6, "ms"), (1e9, "s")];
                Some(units.iter().rev().find(|(f, _)| middle >= *f * 0.9995).copied().unwrap_or(units[0]))
            }
            Unit::Percent => Some((1.0, "%")),
            Unit::Mib => Some((1.0, "MiB")),
            Unit::Count | Unit::Plain => None,
        }
    }

    fn to(&self, v: f64) -> f64 {
        match (self.log, self.zero_at) {
            (false, _) => v,
            (true, Some(zero)) if v <= 0.0 => zero,
            (true, _) => v.max(1e-300).log10(),
        }
    }

    /// The labelled ticks and the unlabelled grid lines between them: on a log axis at 1-2-5,
    /// decades or every few decades, on a linear one at steps of 1, 2 or 5 times a power of
    /// ten; the finest whose labels do not collide on an axis `length` px long (`across`: the
    /// labels sit side by side, as on an x axis).
    fn ticks(&self, length: f64, across: bool) -> (Vec<f64>, Vec<f64>) {
        let Range { start, end } = self.range.clone();
        let px = |t: f64| (t - start) / (end - start) * length;
        let room = |a: f64, b: f64| {
            let width = |t: f64| self.label(t).chars().count() as f64 * CHAR_WIDTH;
            if across {
                (width(a) + width(b)) / 2.0 + 12.0
            } else {
                TICK_SIZE as f64 + 6.0
            }
        };
        let fits = |ticks: &[f64]| ticks.windows(2).all(|w| px(w[1]) - px(w[0]) >= room(w[0], w[1]));
        // Greedily, from the end: labels that would collide with the one kept before are dropped.
        let thin = |ticks: &[f64]| -> Vec<f64> {
            let mut kept: Vec<f64> = Vec::new();
            for t in ticks.iter().rev() {
                if kept.last().is_none_or(|k| px(*k) - px(*t) >= room(*t, *k)) {
                    kept.push(*t);
                }
            }
            kept.reverse();
            kept
        };
        if let Some(fixed) = &self.fixed {
            return (thin(&fixed.iter().map(|(at, _)| *at).collect::<Vec<_>>()), Vec::new());
        }
        if let Some(c) = &self.categories {
            // Every category is named (a figure with many has room for them: bars grow downwards).
            return ((0..c.len()).map(|i| i as f64).collect(), Vec::new());
        }
        let mut ticks = if self.log {
            let (first, last) = (start.floor() as i32, end.ceil() as i32);
            let within = |t: &f64| *t >= start - 1e-9 && *t <= end + 1e-9;
            let at = |mantissas: &[f64], every: i32| -> Vec<f64> {
                (first..=last)
                    .filter(|d| d.rem_euclid(every) == 0)
                    .flat_map(|d| mantissas.iter().map(move |m| d as f64 + m.log10()))
                    .filter(within)
                    .collect()
            };
            let choices = [at(&[1.0, 2.0, 5.0], 1), at(&[1.0], 1), at(&[1.0], 2), at(&[1.0], 3), at(&[1.0], 5)];
            match choices.iter().find(|t| t.len() >= 2 && fits(t)) {
                Some(ticks) => ticks.clone(),
                // Less than a decade: 1, 1.5, 2, 3, 5, 7 times a power of ten, as many as fit.
                None => thin(&at(&[1.0, 1.5, 2.0, 3.0, 5.0, 7.0], 1)),
            }
        } else {
            (2..=10).rev().map(|most| linear_ticks(start, end, most)).find(|t| fits(t)).unwrap_or_default()
        };
        if let Some(zero) = self.zero_at {
            ticks.retain(|t| px(*t) - px(zero) >= room(zero, *t));
            ticks.insert(0, zero);
        }
        let minor = if self.log && end - start <= 4.5 {
            ((start.floor() as i32)..=(end.ceil() as i32))
                .flat_map(|d| (2..10).map(move |m| d as f64 + (m as f64).log10()))
                .filter(|t| *t > start && *t < end && !ticks.iter().any(|k| (k - t).abs() < 1e-9))
                .filter(|t| self.zero_at.is_none_or(|z| *t > z + 0.6))
                .collect()
        } else {
            Vec::new()
        };
        (ticks, minor)
    }

    fn label(&self, t: f64) -> String {
        if let Some(fixed) = &self.fixed {
            return fixed.iter().find(|(at, _)| (at - t).abs() < 1e-9).map(|(_, l)| l.clone()).unwrap_or_default();
        }
        if let Some(c) = &self.categories {
            let i = t.round();
            return if (t - i).abs() < 1e-6 && i >= 0.0 {
                c.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            };
        }
        let value = match (self.log, self.zero_at) {
            (true, Some(zero)) if (t - zero).abs() < 1e-9 => return "0".into(),
            (true, _) => 10f64.powf(t),
            (false, _) => t,
        };
        match self.shown {
            Some((size, _)) => number(value / size),
            None => self.unit.label(value),
        }
    }

    /// The axis' title with its unit and scale: `lateness (µs, log)`.
    fn desc(&self, desc: &str) -> String {
        let scale = match (self.log, self.zero_at) {
            (true, Some(_)) => Some("log; 0 drawn apart"),
            (true, None) => Some("log"),
            _ => None,
        };
        match (self.shown.map(|(_, name)| name), scale) {
            (Some(unit), Some(scale)) => format!("{desc} ({unit}, {scale})"),
            (Some(unit), None) => format!("{desc} ({unit})"),
            (None, Some(scale)) => format!("{desc} ({scale})"),
            (None, None) => desc.to_string(),
        }
    }
}

/// Ticks at steps of 1, 2 or 5 times a power of ten: the finest with at most `most` ticks.
fn linear_ticks(lo: f64, hi: f64, most: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return vec![lo];
    }
    let rough = (hi - lo) / most.max(2) as f64;
    let power = 10f64.powf(rough.log10().floor());
    let step =
        [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * power).find(|s| (hi - lo) / s <= most as f64).unwrap_or(10.0 * power);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).map(|v| if v.abs() < step * 1e-9 { 0.0 } else { v }).collect()
}

/// How a line looks: its colour, its dash and the mark at its points.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Style {
    pub colour: RGBColor,
    pub dash: Dash,
    pub marker: Marker,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dash {
    Solid,
    Dashed,
    Dotted,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Marker {
    Circle,
    Triangle,
    Square,
    Diamond,
}

/// The families a runtime's name tells (`c-`, `beam`, `go`, `java`, `node`, `python`; the rest are
/// the Rust worker's), each a hue with shades from dark to light (ColorBrewer's sequential ramps,
/// without their lightest steps, which vanish on white).
const FAMILIES: [(&str, &str, &[RGBColor]); 7] = [
    ("c-", "C", &[RGBColor(37, 37, 37), RGBColor(115, 115, 115)]),
    ("beam", "Erlang", &[RGBColor(122, 1, 119), RGBColor(221, 52, 151), RGBColor(73, 0, 106)]),
    ("go", "Go", &[RGBColor(1, 102, 94), RGBColor(53, 151, 143), RGBColor(0, 60, 48)]),
    ("java", "Java", &[RGBColor(84, 39, 143), RGBColor(128, 125, 186), RGBColor(63, 0, 125)]),
    ("node", "Node.js", &[RGBColor(0, 109, 44), RGBColor(65, 171, 93), RGBColor(0, 68, 27)]),
    ("python", "Python", &[RGBColor(8, 69, 148), RGBColor(66, 146, 198), RGBColor(8, 48, 107)]),
    (
        "",
        "Rust",
        &[
            RGBColor(153, 52, 4),
            RGBColor(217, 72, 1),
            RGBColor(253, 141, 60),
            RGBColor(203, 24, 29),
            RGBColor(251, 106, 74),
            RGBColor(127, 39, 4),
        ],
    ),
];

/// A distinct colour for series that are not runtimes (Okabe and Ito's, safe for colour-blind
/// readers, yellow darkened to read on white).
const OTHERS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(170, 140, 0),
    RGBColor(0, 0, 0),
    RGBColor(230, 159, 0),
];

const DASHES: [Dash; 3] = [Dash::Solid, Dash::Dashed, Dash::Dotted];
const MARKERS: [Marker; 4] = [Marker::Circle, Marker::Triangle, Marker::Square, Marker::Diamond];

fn family(name: &str) -> usize {
    FAMILIES.iter().position(|(prefix, _, _)| name.starts_with(prefix)).unwrap_or(FAMILIES.len() - 1)
}

/// The house style of each runtime of `names`: its family's hue, and within the family a shade,
/// a dash and a marker of its own (by its place among the family's runtimes in `names`).
pub fn styles(names: &[String]) -> Vec<Style> {
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let f = family(name);
            let k = names[..i].iter().filter(|n| family(n) == f).count();
            let shades = FAMILIES[f].2;
            Style {
                colour: shades[k % shades.len()],
                dash: DASHES[k % DASHES.len()],
                marker: MARKERS[k % MARKERS.len()],
            }
        })
        .collect()
}

/// The style of `name` among `names` (the first's when it is not there).
pub fn style_of(names: &[String], name: &str) -> Style {
    let i = names.iter().position(|n| n == name).unwrap_or(0);
    styles(names).get(i).copied().unwrap_or(Style::other(0))
}

impl Style {
    /// The i-th style for series that are not runtimes: distinct colours, then dashes.
    pub fn other(i: usize) -> Style {
        Style {
            colour: OTHERS[i % OTHERS.len()],
            dash: DASHES[(i / OTHERS.len()) % DASHES.len()],
            marker: MARKERS[i % MARKERS.len()],
        }
    }
}

/// One line: its name, style and points, and each point's 95 % range (empty, or one per
/// point), drawn as an error bar: `ranges` holds its ends (a ratio's range on a log scale is not
/// symmetric), `errors` the half-width of a symmetric one (the history's trend).
pub struct Series {
    pub name: String,
    pub style: Style,
    pub points: Vec<(f64, f64)>,
    pub errors: Vec<Option<f64>>,
    pub ranges: Vec<Option<(f64, f64)>>,
}

impl Series {
    pub fn new(name: impl Into<String>, style: Style, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), style, points, errors: Vec::new(), ranges: Vec::new() }
    }

    /// A line of estimates at their x, each with an error bar where it has a range.
    pub fn of_estimates(name: impl Into<String>, style: Style, estimates: &[(f64, Interval)]) -> Series {
        let points = estimates.iter().map(|(x, e)| (*x, e.value)).collect();
        let ranges = estimates.iter().map(|(_, e)| e.has_range().then(|| (e.low(), e.high()))).collect();
        Series { ranges, ..Series::new(name, style, points) }
    }

    /// The ends of each point's error bar, if it has one.
    fn bar(&self, i: usize) -> Option<(f64, f64)> {
        let y = self.points[i].1;
        let symmetric = || self.errors.get(i).copied().flatten().map(|e| (y - e, y + e));
        self.ranges.get(i).copied().flatten().or_else(symmetric)
    }

    fn has_bars(&self) -> bool {
        (0..self.points.len()).any(|i| self.bar(i).is_some())
    }

    /// (x, lowest, highest) of each point, error bars included.
    fn extents(&self) -> impl Iterator<Item = (f64, f64, f64)> + '_ {
        self.points.iter().enumerate().map(|(i, (x, y))| {
            let (low, high) = self.bar(i).unwrap_or((*y, *y));
            (*x, low, high)
        })
    }
}

/// A level a chart marks across its width, and where each line crosses it.
pub struct Level {
    pub y: f64,
    pub label: String,
    /// (x, colour): a mark on the level, e.g. each runtime's METG.
    pub marks: Vec<(f64, RGBColor)>,
}

/// One line of the legend.
struct Key {
    label: String,
    style: Style,
    kind: KeyKind,
}

#[derive(Clone, Copy, PartialEq)]
enum KeyKind {
    Line,
    LineWithMarker,
    Bar,
    Marker,
}

/// A linear coordinate (log axes are mapped before) whose ticks are the house style's.
#[derive(Clone)]
struct Ticked {
    range: Range<f64>,
    ticks: Vec<f64>,
    minor: Vec<f64>,
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, (from, to): (i32, i32)) -> i32 {
        let Range { start, end } = self.range;
        let share = if end > start { (v - start) / (end - start) } else { 0.5 };
        from + ((to - from) as f64 * share).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.minor.clone()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

type Coord = Cartesian2d<Ticked, Ticked>;
type Plot<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Coord>;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("cannot draw a chart: {e:?}")
}

/// The title's lines: wrapped to the figure's width.
fn wrap(text: &str, width_px: u32, char_px: f64) -> Vec<String> {
    let most = ((width_px as f64 - 16.0) / char_px) as usize;
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= most => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// The legend's layout below the plot: columns as wide as the longest label, as many as fit.
fn legend_layout(keys: &[Key], width: u32) -> (usize, u32, u32) {
    if keys.is_empty() {
        return (1, 0, 0);
    }
    let longest = keys.iter().map(|k| k.label.chars().count()).max().unwrap_or(0);
    // The mark (34 px), the label, and a gap before the next column.
    let column = (longest as f64 * LEGEND_CHAR_WIDTH) as u32 + 50;
    let columns = ((width - 16) / column).clamp(1, keys.len() as u32) as usize;
    let rows = keys.len().div_ceil(columns) as u32;
    (columns, column, rows * LEGEND_LINE + 10)
}

const LEGEND_LINE: u32 = 21;

fn draw_legend(area: &DrawingArea<SVGBackend, Shift>, keys: &[Key], width: u32) -> Result<(), String> {
    let (columns, column, _) = legend_layout(keys, width);
    // Column by column, so that a family's runtimes (adjacent in the list) stand together.
    let rows = keys.len().div_ceil(columns);
    let font = (FONT, TICK_SIZE).into_font();
    for (i, key) in keys.iter().enumerate() {
        let x = 12 + (i / rows) as i32 * column as i32;
        let y = 12 + (i % rows) as i32 * LEGEND_LINE as i32;
        let s = key.style;
        match key.kind {
            KeyKind::Bar => {
                area.draw(&Rectangle::new([(x + 4, y - 6), (x + 22, y + 6)], s.colour.filled())).map_err(err)?
            }
            KeyKind::Marker => draw_marker(area, (x + 13, y), s)?,
            KeyKind::Line | KeyKind::LineWithMarker => {
                draw_dashed(area, &[(x, y), (x + 26, y)], s)?;
                if key.kind == KeyKind::LineWithMarker {
                    draw_marker(area, (x + 13, y), s)?;
                }
            }
        }
        area.draw(&Text::new(key.label.clone(), (x + 34, y - 8), font.clone())).map_err(err)?;
    }
    Ok(())
}

/// A polyline in pixels, in the style's dash.
fn draw_dashed(area: &DrawingArea<SVGBackend, Shift>, points: &[(i32, i32)], s: Style) -> Result<(), String> {
    let stroke = s.colour.stroke_width(2);
    match dash_lengths(s.dash) {
        None => area.draw(&PathElement::new(points.to_vec(), stroke)).map_err(err),
        Some((on, off)) => area.draw(&DashedPathElement::new(points.iter().copied(), on, off, stroke)).map_err(err),
    }
}

fn dash_lengths(dash: Dash) -> Option<(u32, u32)> {
    match dash {
        Dash::Solid => None,
        Dash::Dashed => Some((7, 4)),
        Dash::Dotted => Some((2, 3)),
    }
}

fn draw_marker<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, (x, y): (i32, i32), s: Style) -> Result<(), String> {
    let fill = s.colour.filled();
    match s.marker {
        Marker::Circle => area.draw(&Circle::new((x, y), 4, fill)),
        Marker::Triangle => area.draw(&Polygon::new(vec![(x, y - 5), (x - 5, y + 4), (x + 5, y + 4)], fill)),
        Marker::Square => area.draw(&Rectangle::new([(x - 4, y - 4), (x + 4, y + 4)], fill)),
        Marker::Diamond => area.draw(&Polygon::new(vec![(x, y - 5), (x + 5, y), (x, y + 5), (x - 5, y)], fill)),
    }
    .map_err(|e| format!("cannot draw a chart: {e:?}"))
}

/// A marker at a point of the plot.
fn marker_at(chart: &mut Plot, at: (f64, f64), s: Style) -> Result<(), String> {
    let fill = s.colour.filled();
    let shape = |points: Vec<(i32, i32)>| EmptyElement::at(at) + Polygon::new(points, fill);
    match s.marker {
        Marker::Circle => chart.draw_series([EmptyElement::at(at) + Circle::new((0, 0), 4, fill)]).map(|_| ()),
        Marker::Triangle => chart.draw_series([shape(vec![(0, -5), (-5, 4), (5, 4)])]).map(|_| ()),
        Marker::Square => chart.draw_series([shape(vec![(-4, -4), (4, -4), (4, 4), (-4, 4)])]).map(|_| ()),
        Marker::Diamond => chart.draw_series([shape(vec![(0, -5), (5, 0), (0, 5), (-5, 0)])]).map(|_| ()),
    }
    .map_err(err)
}

/// A line through points of the plot, in the style's dash.
fn line_at(chart: &mut Plot, points: Vec<(f64, f64)>, s: Style, width: u32) -> Result<(), String> {
    let stroke = s.colour.stroke_width(width);
    match dash_lengths(s.dash) {
        None => chart.draw_series(LineSeries::new(points, stroke)).map(|_| ()),
        Some((on, off)) => chart.draw_series(DashedLineSeries::new(points, on, off, stroke)).map(|_| ()),
    }
    .map_err(err)
}

/// Draws a figure: the title above, the plot with its axes, the legend below; `draw` adds the
/// data to the plot. `what` names the kind of chart in its `<desc>` ("Line chart").
fn figure(
    title: &str,
    what: &str,
    (x, y): (&Mapped, &Mapped),
    plot_height: u32,
    descs: (&str, &str),
    keys: &[Key],
    draw: impl FnOnce(&mut Plot) -> Result<(), String>,
) -> Result<String, String> {
    let title_lines = wrap(title, WIDTH, 9.0);
    let title_height = title_lines.len() as u32 * TITLE_LINE + 8;
    let (_, _, legend_height) = legend_layout(keys, WIDTH);
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (WIDTH, title_height + plot_height + legend_height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (head, rest) = root.split_vertically(title_height);
        draw_title(&head, &title_lines, TITLE_SIZE, 8)?;
        let (plot_area, legend_area) = rest.split_vertically(plot_height);
        panel(&plot_area, (x, y), descs, draw)?;
        draw_legend(&legend_area, keys, WIDTH)?;
        root.present().map_err(err)?;
    }
    let plotted = match &y.categories {
        // Categories are numbered from the bottom; a reader meets them from the top.
        Some(rows) => {
            let top_down: Vec<&str> = rows.iter().rev().map(String::as_str).collect();
            format!("{what} of {}, a row each, top down, for {}.", x.desc(descs.0), top_down.join(", "))
        }
        None => format!("{what} of {} against {}.", y.desc(descs.1), x.desc(descs.0)),
    };
    Ok(accessible(svg, title, &format!("{plotted}{}", legend_text(keys))))
}

/// The legend as a sentence of the `<desc>`: " Lines: go, java-virtual." (none when empty).
fn legend_text(keys: &[Key]) -> String {
    if keys.is_empty() {
        return String::new();
    }
    let kind = match keys[0].kind {
        KeyKind::Bar => "Bars",
        KeyKind::Marker => "Spans",
        KeyKind::Line | KeyKind::LineWithMarker => "Lines",
    };
    let names: Vec<&str> = keys.iter().map(|k| k.label.as_str()).collect();
    format!(" {kind}: {}.", names.join(", "))
}

/// The figure's `<title>` and `<desc>`, first inside its `<svg>` (with `role="img"`): what a
/// screen reader says of it and a file browser's preview shows.
fn accessible(svg: String, title: &str, desc: &str) -> String {
    let Some(open) = svg.find("<svg").and_then(|at| svg[at..].find('>').map(|end| at + end)) else {
        return svg;
    };
    let (head, rest) = svg.split_at(open);
    let (title, desc) = (super::html::escape(title), super::html::escape(desc));
    format!("{head} role=\"img\">\n<title>{title}</title>\n<desc>{desc}</desc>{}", &rest[1..])
}

/// Says in a figure's `<desc>` what it belongs to (`taskmeter sleep run of 2026-11-29...`),
/// before what it plots.
pub fn within(chart: &mut Chart, subject: &str) {
    let said = format!("<desc>{}: ", super::html::escape(subject));
    chart.svg = chart.svg.replacen("<desc>", &said, 1);
}

/// Lines of text from the top of `area`, `left` px in.
fn draw_title(area: &DrawingArea<SVGBackend, Shift>, lines: &[String], size: u32, left: i32) -> Result<(), String> {
    for (i, line) in lines.iter().enumerate() {
        let at = (left, 6 + i as i32 * TITLE_LINE as i32);
        area.draw(&Text::new(line.clone(), at, (FONT, size).into_font())).map_err(err)?;
    }
    Ok(())
}

/// A plot with its axes, ticks and grid in `area`; `draw` adds the data.
fn panel(
    area: &DrawingArea<SVGBackend, Shift>,
    (x, y): (&Mapped, &Mapped),
    (x_desc, y_desc): (&str, &str),
    draw: impl FnOnce(&mut Plot) -> Result<(), String>,
) -> Result<(), String> {
    // The plot's length along each axis: the area less the label areas and margins.
    let (width, height) = area.dim_in_pixel();
    let x_label_area = TICK_SIZE + DESC_SIZE + 18;
    let (y_ticks, y_minor) = y.ticks((height - x_label_area - 6) as f64, false);
    let y_label_width = y_ticks.iter().map(|t| y.label(*t).chars().count()).max().unwrap_or(1) as f64 * CHAR_WIDTH;
    let widest_x = |ticks: &[f64]| ticks.iter().map(|t| x.label(*t).chars().count()).max().unwrap_or(1) as f64;
    let (x_ticks, x_minor) = x.ticks(width as f64 - y_label_width - DESC_SIZE as f64 - 18.0 - 6.0 - 40.0, true);
    let x_label_width = widest_x(&x_ticks) * CHAR_WIDTH;
    let x_coord = Ticked { range: x.range.clone(), ticks: x_ticks, minor: x_minor };
    let y_coord = Ticked { range: y.range.clone(), ticks: y_ticks, minor: y_minor };
    let mut chart = ChartBuilder::on(area)
        .margin_top(6)
        .margin_right((x_label_width / 2.0) as u32 + 8)
        .margin_left(6)
        .x_label_area_size(x_label_area)
        .y_label_area_size(y_label_width as u32 + DESC_SIZE + 18)
        .build_cartesian_2d(x_coord, y_coord)
        .map_err(err)?;
    let x_format = |v: &f64| x.label(*v);
    let y_format = |v: &f64| y.label(*v);
    // An axis title longer than its axis is set smaller (never below 11 px).
    let (x_title, y_title) = (x.desc(x_desc), y.desc(y_desc));
    let longest = |text: &str, room: f64| text.chars().count() as f64 * 8.3 / room;
    let over = longest(&y_title, (height - x_label_area) as f64 - 10.0).max(longest(&x_title, width as f64 - 60.0));
    let desc_size = if over > 1.0 { ((DESC_SIZE as f64 / over) as u32).max(14) } else { DESC_SIZE };
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(x_title)
        .y_desc(y_title)
        .x_label_formatter(&x_format)
        .y_label_formatter(&y_format)
        .label_style((FONT, TICK_SIZE))
        .axis_desc_style((FONT, desc_size))
        .bold_line_style(GRID)
        .light_line_style(MINOR_GRID)
        .axis_style(GREY);
    if x.categories.is_some() {
        mesh.disable_x_mesh();
    }
    if y.categories.is_some() {
        mesh.disable_y_mesh();
    }
    mesh.draw().map_err(err)?;
    draw(&mut chart)
}

/// Lines (with markers and error bars) of y against x, one per series; `level` draws a
/// horizontal line marked where each series crosses it.
pub fn line_chart(title: &str, x: &Axis, y: &Axis, series: &[Series], level: Option<&Level>) -> Result<String, String> {
    let xs: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
    let ys: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).filter(|v| v.is_finite()).collect();
    let (xm, ym_points) = (Mapped::fit(x, &xs), Mapped::fit(y, &ys));
    // An x axis is logarithmic from one decade on when its values grow by factors (a sweep of
    // 1, 4, 16, 64 units), and otherwise starts where its values do (0 senders means nothing).
    let geometric = {
        let mut v: Vec<f64> = xs.iter().copied().filter(|v| *v > 0.0).collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v.len() >= 3 && v.last().unwrap_or(&0.0) / v[0] >= 10.0 && v.windows(2).all(|w| w[1] / w[0] >= 1.9)
    };
    let xm = match (xm.log, &x.scale) {
        (false, Scale::Auto) if geometric => Mapped::fit(&x.clone().scale(Scale::Log), &xs),
        (false, Scale::Auto) => Mapped::fit(&x.clone().scale(Scale::Linear), &xs),
        _ => xm,
    };
    // A quantity that is never negative (every value >= 0) has no interval below 0: its error
    // bars stop at 0, or on a log axis at the lowest value drawn.
    let floor = ys.iter().copied().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
    let positive = ys.iter().all(|v| *v >= 0.0);
    let clamp = |v: f64| match (ym_points.log, positive) {
        (true, _) if v <= 0.0 => floor,
        (false, true) => v.max(0.0),
        _ => v,
    };
    let mut extents: Vec<f64> =
        series.iter().flat_map(|s| s.extents().flat_map(|(_, lo, hi)| [clamp(lo), hi])).collect();
    // A share's axis is fitted to its values, not to intervals that reach far beyond 100 %:
    // those bars are cut at the axis' end.
    if y.scale == Scale::LinearFromZero {
        let top = ys.iter().copied().fold(0.0, f64::max) * 1.25;
        extents.retain(|v| *v <= top);
    }
    extents.extend(&ys);
    extents.extend(level.map(|l| l.y));
    let ym = Mapped::fit_as(y, &extents, Some(ym_points.log));
    let ym = Mapped { zero_at: ym_points.zero_at, ..ym };
    let mut keys: Vec<Key> =
        series.iter().map(|s| Key { label: s.name.clone(), style: s.style, kind: KeyKind::LineWithMarker }).collect();
    if let Some(level) = level {
        let style = Style { colour: GREY, dash: Dash::Dashed, marker: Marker::Triangle };
        keys.push(Key { label: level.label.clone(), style, kind: KeyKind::Line });
    }
    let x_span = xm.range.end - xm.range.start;
    let what = if series.iter().any(Series::has_bars) {
        "Line chart (error bars: 95 % ranges for another invocation)"
    } else {
        "Line chart"
    };
    figure(title, what, (&xm, &ym), PLOT_HEIGHT, (&x.desc, &y.desc), &keys, |chart| {
        // Lines with error bars are set a little apart, so that bars at one x do not hide each other.
        let dodged = series.iter().any(Series::has_bars);
        for (k, line) in series.iter().enumerate() {
            let dodge = if dodged { (k as f64 - (series.len() - 1) as f64 / 2.0) * x_span * 0.006 } else { 0.0 };
            let mapped: Vec<(f64, f64)> =
                line.points.iter().filter(|p| p.1.is_finite()).map(|(a, b)| (xm.to(*a) + dodge, ym.to(*b))).collect();
            line_at(chart, mapped.clone(), line.style, 2)?;
            for p in &mapped {
                marker_at(chart, *p, line.style)?;
            }
            let cap = x_span * 0.01;
            let (bottom, top) = (ym.range.start, ym.range.end);
            let bars = line.extents().enumerate().filter(|(i, _)| line.bar(*i).is_some()).map(|(_, (a, lo, hi))| {
                let (a, lo, hi) = (xm.to(a) + dodge, ym.to(clamp(lo)).max(bottom), ym.to(hi).min(top));
                PathElement::new(
                    vec![(a - cap, lo), (a + cap, lo), (a, lo), (a, hi), (a - cap, hi), (a + cap, hi)],
                    line.style.colour.stroke_width(1),
                )
            });
            chart.draw_series(bars).map_err(err)?;
        }
        if let Some(level) = level {
            let at = ym.to(level.y);
            let across = vec![(xm.range.start, at), (xm.range.end, at)];
            chart.draw_series(DashedLineSeries::new(across, 7, 4, GREY.stroke_width(1))).map_err(err)?;
            let marks = level.marks.iter().map(|(a, colour)| TriangleMarker::new((xm.to(*a), at), 7, colour.filled()));
            chart.draw_series(marks).map_err(err)?;
        }
        Ok(())
    })
}

/// One distribution of a percentile plot: the value at or below which each fraction of the
/// samples lies, `(value, fraction)` in increasing order, and how many samples it holds.
pub struct Distribution {
    pub name: String,
    pub style: Style,
    pub cdf: Vec<(f64, f64)>,
    pub count: u64,
}

/// The percentiles marked on a percentile plot's x axis.
const PERCENTILES: [(f64, &str); 8] = [
    (0.0, "0"),
    (0.5, "50"),
    (0.9, "90"),
    (0.99, "99"),
    (0.999, "99.9"),
    (0.9999, "99.99"),
    (0.99999, "99.999"),
    (0.999999, "99.9999"),
];

/// HdrHistogram's percentile plot: the value at each percentile, the x axis stretched as
/// -log10(1 - p) so that 90, 99, 99.9 and 99.99 % are equally far apart and the tail shows;
/// each line ends at its maximum (x = log10 of its count). Values <= 0 sit at the bottom.
pub fn percentile_chart(title: &str, y: &Axis, lines: &[Distribution]) -> Result<String, String> {
    let p = Percentiles::of(y, lines);
    let keys: Vec<Key> =
        lines.iter().map(|d| Key { label: d.name.clone(), style: d.style, kind: KeyKind::Line }).collect();
    let what = "Percentile plot (each line ends at its maximum)";
    figure(title, what, (&p.x, &p.y), PLOT_HEIGHT, ("percentile (%)", &p.desc), &keys, |chart| {
        p.draw(chart, lines, None)
    })
}

/// The curves of a percentile plot, mapped, and its axes.
struct Percentiles {
    /// (x, value) of each line, x = -log10(1 - p).
    curves: Vec<Vec<(f64, f64)>>,
    x: Mapped,
    y: Mapped,
    /// Where values <= 0 are drawn.
    floor: f64,
    desc: String,
}

impl Percentiles {
    fn of(y: &Axis, lines: &[Distribution]) -> Percentiles {
        let x_of = |p: f64, count: u64| if p >= 1.0 { (count.max(1) as f64).log10() } else { -(1.0 - p).log10() };
        let curves: Vec<Vec<(f64, f64)>> = lines
            .iter()
            .map(|d| {
                let end = x_of(1.0, d.count);
                let mut points = Vec::new();
                let mut next = 0;
                // The value at percentiles spaced evenly along the axis, then the maximum.
                let steps = 300;
                for i in 0..=steps {
                    let x = end * i as f64 / steps as f64;
                    let p = 1.0 - 10f64.powf(-x);
                    while next + 1 < d.cdf.len() && d.cdf[next].1 < p - 1e-12 {
                        next += 1;
                    }
                    if let Some((v, _)) = d.cdf.get(next) {
                        points.push((x, *v));
                    }
                }
                if let Some((max, _)) = d.cdf.last() {
                    points.push((end, *max));
                }
                points
            })
            .collect();
        let values: Vec<f64> = curves.iter().flatten().map(|p| p.1).collect();
        let smallest = values.iter().copied().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
        let floor = if smallest.is_finite() { smallest / 2.0 } else { 1.0 };
        let floored: Vec<f64> = values.iter().map(|v| v.max(floor)).collect();
        let ym = Mapped::fit(&Axis { scale: Scale::Log, ..y.clone() }, &floored);
        let end = lines.iter().map(|d| x_of(1.0, d.count)).fold(1.0, f64::max);
        let shown: Vec<(f64, String)> =
            PERCENTILES.iter().map(|(p, l)| (x_of(*p, 1), l.to_string())).filter(|(x, _)| *x <= end + 1e-9).collect();
        let xm = Mapped {
            log: false,
            zero_at: None,
            unit: Unit::Plain,
            categories: None,
            fixed: Some(shown),
            range: 0.0..end + 0.08,
            shown: None,
        };
        let low = values.iter().any(|v| *v <= 0.0);
        let desc = if low { format!("{}, <= 0 at the bottom", y.desc) } else { y.desc.clone() };
        Percentiles { curves, x: xm, y: ym, floor, desc }
    }

    /// Draws the lines (only those of `shown`, the others in light grey behind them).
    fn draw(&self, chart: &mut Plot, lines: &[Distribution], shown: Option<&[usize]>) -> Result<(), String> {
        let mapped = |i: usize| -> Vec<(f64, f64)> {
            self.curves[i].iter().map(|(x, v)| (*x, self.y.to(v.max(self.floor)))).collect()
        };
        let is_shown = |i: usize| shown.is_none_or(|s| s.contains(&i));
        for i in (0..lines.len()).filter(|i| !is_shown(*i)) {
            chart.draw_series(LineSeries::new(mapped(i), CONTEXT.stroke_width(1))).map_err(err)?;
        }
        for (i, d) in lines.iter().enumerate().filter(|(i, _)| is_shown(*i)) {
            let points = mapped(i);
            line_at(chart, points.clone(), d.style, 2)?;
            if let Some(last) = points.last() {
                marker_at(chart, *last, d.style)?;
            }
        }
        Ok(())
    }
}

/// The lines of the other panels, behind a panel's own.
const CONTEXT: RGBColor = RGBColor(215, 215, 215);

/// A figure two columns wide (a paper's `figure*`): 2 x [`WIDTH`].
pub const WIDE: u32 = 2 * WIDTH;

/// Small multiples of a percentile plot, for when its lines would pile up: one panel per
/// language family (its runtimes in their styles, every other line in light grey behind them),
/// three to a row, on the same axes, two columns of a paper wide. None with fewer than
/// `most` lines or one family.
pub fn percentile_panels(title: &str, y: &Axis, lines: &[Distribution], most: usize) -> Result<Option<String>, String> {
    let mut families: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, d) in lines.iter().enumerate() {
        let f = family(&d.name);
        match families.iter_mut().find(|(g, _)| *g == f) {
            Some((_, members)) => members.push(i),
            None => families.push((f, vec![i])),
        }
    }
    if lines.len() <= most || families.len() < 2 {
        return Ok(None);
    }
    let p = Percentiles::of(y, lines);
    let columns = 3.min(families.len());
    let rows = families.len().div_ceil(columns);
    let width = WIDE / columns as u32;
    let keys_of = |members: &[usize]| -> Vec<Key> {
        members
            .iter()
            .map(|i| Key { label: lines[*i].name.clone(), style: lines[*i].style, kind: KeyKind::Line })
            .collect()
    };
    let legend = families.iter().map(|(_, m)| legend_layout(&keys_of(m), width).2).max().unwrap_or(0);
    let title_lines = wrap(title, WIDE, 9.0);
    let title_height = title_lines.len() as u32 * TITLE_LINE + 8;
    let cell = TITLE_LINE + PANEL_HEIGHT + legend;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDE, title_height + rows as u32 * cell)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (head, rest) = root.split_vertically(title_height);
        draw_title(&head, &title_lines, TITLE_SIZE, 8)?;
        for (k, (f, members)) in families.iter().enumerate() {
            let (row, column) = ((k / columns) as i32, (k % columns) as i32);
            let area = rest.clone().shrink((column * width as i32, row * cell as i32), (width, cell));
            let (name, plot_and_legend) = area.split_vertically(TITLE_LINE);
            // Beyond the y axis' title, which reaches the top of the panel.
            draw_title(&name, &[FAMILIES[*f].1.to_string()], TITLE_SIZE, 110)?;
            let (plot, legend_area) = plot_and_legend.split_vertically(PANEL_HEIGHT);
            panel(&plot, (&p.x, &p.y), ("percentile (%)", &p.desc), |chart| p.draw(chart, lines, Some(members)))?;
            draw_legend(&legend_area, &keys_of(members), width)?;
        }
        root.present().map_err(err)?;
    }
    let panels: Vec<String> = families
        .iter()
        .map(|(f, members)| {
            let names: Vec<&str> = members.iter().map(|i| lines[*i].name.as_str()).collect();
            format!("{} ({})", FAMILIES[*f].1, names.join(", "))
        })
        .collect();
    let desc = format!(
        "Percentile plots, a panel per language family, of {} against {}. Panels: {}.",
        p.y.desc(&p.desc),
        p.x.desc("percentile (%)"),
        panels.join("; ")
    );
    Ok(Some(accessible(svg, title, &desc)))
}

/// A panel's plot, axes included.
const PANEL_HEIGHT: u32 = 260;

/// A bar's value, and the ends of its 95 % range if it has one.
pub type Bar = (f64, Option<(f64, f64)>);

/// One group of bars: a bar per category.
pub struct Bars {
    pub name: String,
    pub style: Style,
    pub values: Vec<Option<Bar>>,
}

impl Bars {
    /// A bar per estimate, each with a whisker where it has a range.
    pub fn of_estimates(name: impl Into<String>, style: Style, estimates: &[Option<Interval>]) -> Bars {
        let values =
            estimates.iter().map(|e| e.map(|e| (e.value, e.has_range().then(|| (e.low(), e.high()))))).collect();
        Bars { name: name.into(), style, values }
    }
}

/// Horizontal bars, one row per category (top to bottom), a bar per group in each row, error
/// bars where a value has an interval; rows grow the figure downwards, so names never collide.
pub fn bar_chart(title: &str, value: &Axis, categories: &[String], groups: &[Bars]) -> Result<String, String> {
    let rows = categories.len();
    let row_of = |i: usize| (rows - 1 - i) as f64;
    let extents: Vec<f64> = groups
        .iter()
        .flat_map(|g| g.values.iter().flatten())
        .flat_map(|(v, range)| {
            let (low, high) = range.unwrap_or((*v, *v));
            [*v, low, high]
        })
        // On a log axis, bars start at the axis' left end, and an error bar reaching 0 stops there.
        .filter(|v| *v > 0.0)
        .collect();
    let xm = Mapped::fit(value, &extents);
    // A linear axis starts at 0.
    let xm = if xm.log { xm } else { Mapped::fit(value, &[extents.as_slice(), &[0.0]].concat()) };
    let mut names: Vec<String> = categories.to_vec();
    names.reverse();
    let ym = Mapped::fit(&Axis::new("", Unit::Plain).scale(Scale::Categories(names)), &[]);
    let keys: Vec<Key> = if groups.len() > 1 {
        groups.iter().map(|g| Key { label: g.name.clone(), style: g.style, kind: KeyKind::Bar }).collect()
    } else {
        Vec::new()
    };
    let height = PLOT_HEIGHT.max(rows as u32 * 24 + 70);
    let band = 0.8 / groups.len().max(1) as f64;
    let base = if xm.log { xm.range.start } else { 0.0 };
    let what = "Horizontal bar chart (whiskers: 95 % ranges for another invocation)";
    figure(title, what, (&xm, &ym), height, (&value.desc, ""), &keys, |chart| {
        for (k, group) in groups.iter().enumerate() {
            for (i, v) in group.values.iter().enumerate() {
                let Some((v, e)) = v else { continue };
                let top = row_of(i) + 0.4 - k as f64 * band;
                let (lo, hi) = (top - band * 0.9, top);
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(base, lo), (xm.to(*v), hi)],
                        group.style.colour.filled(),
                    )))
                    .map_err(err)?;
                if let Some((low, high)) = e {
                    let mid = (lo + hi) / 2.0;
                    let low = if xm.log && *low <= 0.0 { 10f64.powf(xm.range.start) } else { low.max(0.0) };
                    let (a, b) = (xm.to(low), xm.to(*high));
                    let whisker = vec![
                        (a, mid - band * 0.3),
                        (a, mid + band * 0.3),
                        (a, mid),
                        (b, mid),
                        (b, mid - band * 0.3),
                        (b, mid + band * 0.3),
                    ];
                    chart
                        .draw_series(std::iter::once(PathElement::new(whisker, BLACK.stroke_width(1))))
                        .map_err(err)?;
                }
            }
        }
        Ok(())
    })
}

/// One item of a span chart: a filled marker at `low`, an open one at `high`, joined.
pub struct Span {
    pub name: String,
    pub style: Style,
    pub x: f64,
    pub low: f64,
    pub high: f64,
}

/// Spans at their x (e.g. lateness p50 to p99 against CPU per wake-up), one legend entry each.
pub fn span_chart(title: &str, x: &Axis, y: &Axis, spans: &[Span]) -> Result<String, String> {
    let xs: Vec<f64> = spans.iter().map(|s| s.x).collect();
    let ys: Vec<f64> = spans.iter().flat_map(|s| [s.low, s.high]).collect();
    // A value <= 0 (a wake-up before its deadline) sits at the axis' floor.
    let floor = ys.iter().copied().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
    let floor = if floor.is_finite() { floor / 2.0 } else { 1.0 };
    let ys: Vec<f64> = ys.iter().map(|v| v.max(floor)).collect();
    let (xm, ym) = (Mapped::fit(x, &xs), Mapped::fit(y, &ys));
    let keys: Vec<Key> =
        spans.iter().map(|s| Key { label: s.name.clone(), style: s.style, kind: KeyKind::Marker }).collect();
    let what = "Span chart (a filled marker at the low end, a ring at the high end)";
    figure(title, what, (&xm, &ym), PLOT_HEIGHT, (&x.desc, &y.desc), &keys, |chart| {
        for s in spans {
            let (a, lo, hi) = (xm.to(s.x), ym.to(s.low.max(floor)), ym.to(s.high.max(floor)));
            chart
                .draw_series([PathElement::new(vec![(a, lo), (a, hi)], s.style.colour.stroke_width(2))])
                .map_err(err)?;
            chart.draw_series([Circle::new((a, hi), 5, s.style.colour.stroke_width(2))]).map_err(err)?;
            marker_at(chart, (a, lo), s.style)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtimes of a default run, in the registry's order.
    fn default_runtimes() -> Vec<String> {
        "thread tokio-ct tokio-mt smol embassy c-thread beam beam-1 go go-locked java-thread java-virtual node \
         node-worker python-thread python-asyncio python-abs"
            .split_whitespace()
            .map(String::from)
            .collect()
    }

    /// Every text of an SVG, with its y.
    fn texts(svg: &str) -> Vec<(f64, String)> {
        svg.split("<text")
            .skip(1)
            .map(|t| {
                let y = t.split("y=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
                let body = t.split_once('>').unwrap().1.split("</text>").next().unwrap();
                (y, body.trim().replace("&lt;", "<").replace("&amp;", "&"))
            })
            .collect()
    }

    #[test]
    fn ticks_are_labelled_in_their_unit() {
        assert_eq!(Unit::Nanos.label(500.0), "500 ns");
        assert_eq!(Unit::Nanos.label(2_000.0), "2 µs");
        assert_eq!(Unit::Nanos.label(1.5e7), "15 ms");
        assert_eq!(Unit::Nanos.label(0.0), "0");
        assert_eq!(Unit::Count.label(20_000.0), "20k");
        assert_eq!(Unit::Percent.label(50.0), "50 %");
        assert_eq!(Unit::Plain.label(0.25), "0.25");
    }

    #[test]
    fn log_ticks_sit_at_1_2_5_or_decades_never_between() {
        let axis = Axis::new("x", Unit::Nanos);
        for values in [vec![300.0, 40_000.0], vec![10.0, 1e9], vec![2_000.0, 9_000.0]] {
            let m = Mapped::fit(&axis.clone().scale(Scale::Log), &values);
            let (ticks, _) = m.ticks(330.0, true);
            assert!(ticks.len() >= 2, "{values:?}: {ticks:?}");
            for t in ticks {
                let v = 10f64.powf(t);
                let mantissa = v / 10f64.powf(v.log10().floor());
                assert!(
                    [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6)
                        || (2_000.0..=9_000.0).contains(&v.round()),
                    "{values:?}: tick {v} (no 251, 398 or 3162)"
                );
            }
        }
        let m = Mapped::fit(&axis, &[0.0, 1_000.0, 1e6]);
        let (ticks, _) = m.ticks(330.0, true);
        assert_eq!(m.label(ticks[0]), "0", "0 is drawn apart on a log axis");
        assert!(m.log && m.desc("busy").contains("log"));
    }

    #[test]
    fn the_default_runtimes_get_a_look_each_and_a_family_shares_its_hue() {
        let names = default_runtimes();
        let styles = styles(&names);
        for (i, a) in styles.iter().enumerate() {
            for b in &styles[i + 1..] {
                assert_ne!(a, b, "two runtimes look alike");
            }
        }
        assert_eq!(names.len(), 17);
        assert_ne!(styles[8].colour, styles[9].colour, "go and go-locked: two shades");
        assert_eq!(styles[8].dash, Dash::Solid);
        assert_eq!(styles[9].dash, Dash::Dashed);
    }

    #[test]
    fn the_legend_is_below_the_plot() {
        let names: Vec<String> = (0..15).map(|i| format!("runtime-{i}")).collect();
        let series: Vec<Series> = styles(&names)
            .into_iter()
            .zip(&names)
            .map(|(style, name)| Series::new(name, style, vec![(1.0, 10.0), (10.0, 1e4)]))
            .collect();
        let svg = line_chart("t", &Axis::new("x", Unit::Count), &Axis::new("y", Unit::Nanos), &series, None).unwrap();
        let title = TITLE_LINE + 8;
        let texts = texts(&svg);
        for name in &names {
            let (y, _) = texts.iter().find(|(_, t)| t == name).expect(name);
            assert!(*y > (title + PLOT_HEIGHT) as f64, "{name} at y={y} is below the plot");
        }
    }

    #[test]
    fn the_default_runtimes_distributions_also_come_as_one_panel_per_family() {
        let names = default_runtimes();
        let lines: Vec<Distribution> = styles(&names)
            .into_iter()
            .zip(&names)
            .enumerate()
            .map(|(i, (style, name))| {
                let cdf = (1..=100).map(|k| ((k * (i + 1)) as f64 * 1e3, k as f64 / 100.0)).collect();
                Distribution { name: name.clone(), style, cdf, count: 100 }
            })
            .collect();
        let axis = Axis::new("lateness", Unit::Nanos);
        let svg = percentile_panels("t", &axis, &lines, 8).unwrap().expect("17 lines pile up");
        assert!(svg.contains(&format!("width=\"{WIDE}\"")), "two columns of a paper wide");
        let texts: Vec<String> = texts(&svg).into_iter().map(|(_, t)| t).collect();
        for family in ["Rust", "C", "Erlang", "Go", "Java", "Node.js", "Python"] {
            assert!(texts.iter().any(|t| t == family), "{family}");
        }
        for name in &names {
            assert_eq!(texts.iter().filter(|t| *t == name).count(), 1, "{name} in its own panel's legend only");
        }
        assert!(percentile_panels("t", &axis, &lines[..5], 8).unwrap().is_none(), "5 lines do not pile up");
    }

    /// The text of an SVG's first `<tag>`.
    fn element<'a>(svg: &'a str, tag: &str) -> &'a str {
        svg.split(&format!("<{tag}>")).nth(1).and_then(|t| t.split(&format!("</{tag}>")).next()).unwrap_or_default()
    }

    #[test]
    fn every_figure_opens_with_its_title_and_a_description() {
        let names: Vec<String> = ["go", "node"].map(String::from).to_vec();
        let look = styles(&names);
        let series: Vec<Series> =
            names.iter().zip(&look).map(|(n, s)| Series::new(n, *s, vec![(1.0, 2e3), (100.0, 5e5)])).collect();
        let cdf: Vec<(f64, f64)> = (1..=100).map(|i| (i as f64 * 1e3, i as f64 / 100.0)).collect();
        let lines: Vec<Distribution> = names
            .iter()
            .zip(&look)
            .map(|(n, s)| Distribution { name: n.clone(), style: *s, cdf: cdf.clone(), count: 100 })
            .collect();
        let bars: Vec<Bars> = names
            .iter()
            .zip(&look)
            .map(|(n, s)| Bars { name: n.clone(), style: *s, values: vec![Some((3e3, Some((2.9e3, 3.1e3))))] })
            .collect();
        let spans: Vec<Span> = names
            .iter()
            .zip(&look)
            .map(|(n, s)| Span { name: n.clone(), style: *s, x: 1e3, low: 1e3, high: 1e5 })
            .collect();
        let (units, late) = (Axis::new("units", Unit::Count), Axis::new("lateness", Unit::Nanos));
        let figures = [
            line_chart("a & b", &units, &late, &series, None).unwrap(),
            percentile_chart("a & b", &late, &lines).unwrap(),
            bar_chart("a & b", &late, &["point 0".into()], &bars).unwrap(),
            span_chart("a & b", &Axis::new("CPU", Unit::Nanos), &late, &spans).unwrap(),
        ];
        for svg in &figures {
            let head = svg.split("<rect").next().unwrap();
            assert!(head.contains("role=\"img\""), "{head}");
            assert_eq!(element(head, "title"), "a &amp; b", "escaped");
            let desc = element(head, "desc");
            assert!(desc.contains("lateness (µs") && desc.contains("go, node"), "{desc}");
        }
        assert!(element(&figures[0], "desc").starts_with("Line chart of lateness (µs, log) against units (log)."));
        let mut chart = Chart { group: "g".into(), file: "f.svg".into(), title: "t".into(), svg: figures[0].clone() };
        within(&mut chart, "taskmeter sleep run of 2026-11-29");
        assert!(element(&chart.svg, "desc").starts_with("taskmeter sleep run of 2026-11-29: Line chart of"));
    }

    #[test]
    fn an_axis_names_its_one_unit_in_its_title_and_its_ticks_are_numbers() {
        let late = Axis::new("lateness", Unit::Nanos);
        // Linear to 2.5 ms: in ms.
        let linear = Mapped::fit(&late.clone().scale(Scale::Linear), &[0.0, 2.5e6]);
        assert_eq!(linear.desc("lateness"), "lateness (ms)");
        let (ticks, _) = linear.ticks(330.0, true);
        let labels: Vec<String> = ticks.iter().map(|t| linear.label(*t)).collect();
        assert!(labels.contains(&"0.5".to_string()) && labels.contains(&"2".to_string()), "{labels:?}");
        // Log from 100 ns to 10 ms: in µs, the middle's unit (0.1 to 10000).
        let log = Mapped::fit(&late, &[100.0, 1e7]);
        assert_eq!(log.desc("lateness"), "lateness (µs, log)");
        assert_eq!(log.label(2.0), "0.1");
        assert_eq!(log.label(7.0), "10000");
        // A share in %, a count with its multipliers and no unit.
        let share = Mapped::fit(&Axis::new("efficiency", Unit::Percent), &[10.0, 90.0]);
        assert_eq!((share.desc("efficiency").as_str(), share.label(50.0).as_str()), ("efficiency (%)", "50"));
        let count = Mapped::fit(&Axis::new("units", Unit::Count), &[1.0, 1e6]);
        assert_eq!((count.desc("units").as_str(), count.label(4.0).as_str()), ("units (log)", "10k"));
    }

    #[test]
    fn a_percentile_plot_reaches_as_far_as_its_samples() {
        let cdf: Vec<(f64, f64)> = (1..=1000).map(|i| (i as f64 * 1e3, i as f64 / 1000.0)).collect();
        let d = Distribution { name: "a".into(), style: Style::other(0), cdf, count: 1000 };
        let svg = percentile_chart("t", &Axis::new("lateness", Unit::Nanos), &[d]).unwrap();
        let texts: Vec<String> = texts(&svg).into_iter().map(|(_, t)| t).collect();
        for tick in ["0", "50", "90", "99", "99.9"] {
            assert!(texts.iter().any(|t| t == tick), "{tick}");
        }
        assert!(!texts.iter().any(|t| t == "99.99"), "1000 samples say nothing of the 99.99th percentile");
    }
}
