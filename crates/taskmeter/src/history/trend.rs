//! `history trend`: a metric's stat over runs, one line per machine (or per runtime) and
//! workload, each run's point the mean of its repetitions with its interval (`BARS`) when it had
//! two or more; as an SVG chart (`report::chart`) and an HTML page with the values beneath, both
//! saying what the error bars and ± are.

use super::series::{workload_names, Key, RunValues};
use crate::report::figure::{line_chart, styles, Axis, Scale, Series, Unit};
use crate::report::format::format_ns;
use crate::report::html::{escape, page};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What a line of the chart stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    Machine,
    Runtime,
}

/// A trend: its title, the runs on its x axis (oldest first), and its lines.
pub struct Trend {
    pub title: String,
    pub y_desc: String,
    /// Whether the values are nanoseconds (shown as `1.2 ms` in the page's table).
    pub ns: bool,
    /// (run id, started at, label) of each x position.
    pub runs: Vec<(i64, String, Option<String>)>,
    pub lines: Vec<Line>,
}

pub struct Line {
    pub name: String,
    /// (x position, mean, half-width of its interval: `BARS`).
    pub points: Vec<(usize, f64, Option<f64>)>,
}

/// What the chart's error bars and the page's ± are: the interval `interval` computes.
pub const BARS: &str = "error bars and ±: the 95 % Student-t interval of each run's mean over its repetitions, \
mean ± t(0.975, n-1) · s/√n (none for a run of one repetition)";

/// The half-width of a run's interval over its repetitions' values (`BARS`).
fn interval(values: &[f64]) -> Option<f64> {
    taskmeter_stats::t_interval(values).map(|i| i.half_width)
}

/// A line's name for a series, by machine or runtime; the other parts when they vary, and what
/// sets its workload apart (`series::workload_names`) when the runs measured more than one.
fn name(key: &Key, by: By, (several_points, several_others): (bool, bool), workload: &str) -> String {
    let main = match by {
        By::Machine => &key.machine,
        By::Runtime => &key.subject,
    };
    let other = match by {
        By::Machine => &key.subject,
        By::Runtime => &key.machine,
    };
    let mut out = main.clone();
    if several_others {
        out.push_str(&format!(" ({other})"));
    }
    if several_points && key.point != "-" {
        out.push_str(&format!(" {}", key.point));
    }
    if !workload.is_empty() {
        out.push_str(&format!(" [{workload}]"));
    }
    out
}

/// Builds the trend of the series.
pub fn build(series: &BTreeMap<Key, Vec<RunValues>>, by: By, title: String, y_desc: String, ns: bool) -> Trend {
    let mut runs: Vec<(i64, String, Option<String>)> =
        series.values().flatten().map(|r| (r.run, r.started_at.clone(), r.label.clone())).collect();
    runs.sort_by(|a, b| (&a.1, a.0).cmp(&(&b.1, b.0)));
    runs.dedup_by_key(|r| r.0);
    let several_points = series.keys().map(|k| &k.point).collect::<std::collections::BTreeSet<_>>().len() > 1;
    let others = series.keys().map(|k| if by == By::Machine { &k.subject } else { &k.machine });
    let several_others = others.collect::<std::collections::BTreeSet<_>>().len() > 1;
    let workloads = workload_names(series.keys());
    let lines = series
        .iter()
        .map(|(key, values)| Line {
            name: name(key, by, (several_points, several_others), &workloads[key]),
            points: values
                .iter()
                .map(|r| {
                    let x = runs.iter().position(|(id, _, _)| *id == r.run).unwrap_or(0);
                    (x, r.mean(), interval(&r.values))
                })
                .collect(),
        })
        .collect();
    Trend { title, y_desc, ns, runs, lines }
}

impl Trend {
    /// Whether any point has an interval (an error bar, a ±).
    fn has_bars(&self) -> bool {
        self.lines.iter().flat_map(|l| &l.points).any(|p| p.2.is_some())
    }

    /// The title, and what the bars are when there are any.
    fn captioned(&self) -> String {
        if self.has_bars() {
            format!("{}; {BARS}", self.title)
        } else {
            self.title.clone()
        }
    }

    /// The x axis' names: each run's label, else its id and date; past 20 runs, every k-th
    /// run's, so that they stay readable.
    fn categories(&self) -> Vec<String> {
        let every = self.runs.len().div_ceil(20).max(1);
        self.runs
            .iter()
            .enumerate()
            .map(|(i, (id, at, label))| match i % every {
                0 => label.clone().unwrap_or_else(|| format!("#{id} {}", at.get(..10).unwrap_or(at))),
                _ => String::new(),
            })
            .collect()
    }

    /// The chart, in the house style (`report::figure`): runs named along x, one line each.
    pub fn svg(&self) -> Result<String, String> {
        let names: Vec<String> = self.lines.iter().map(|l| l.name.clone()).collect();
        let series: Vec<Series> = self
            .lines
            .iter()
            .zip(styles(&names))
            .map(|(line, style)| {
                let mut s = Series::new(
                    line.name.clone(),
                    style,
                    line.points.iter().map(|(x, y, _)| (*x as f64, *y)).collect(),
                );
                s.errors = line.points.iter().map(|(_, _, e)| *e).collect();
                s
            })
            .collect();
        let x = Axis::new("run", Unit::Plain).scale(Scale::Categories(self.categories()));
        let y = Axis::new(self.y_desc.clone(), if self.ns { Unit::Nanos } else { Unit::Plain });
        line_chart(&self.captioned(), &x, &y, &series, None)
    }

    /// The lines as JSON: each point's run id, mean and interval's half-width.
    pub fn json_lines(&self) -> serde_json::Value {
        let point = |(x, y, e): &(usize, f64, Option<f64>)| serde_json::json!({"run": self.runs[*x].0, "mean": y, "half_width": e});
        self.lines
            .iter()
            .map(|l| serde_json::json!({"name": l.name, "points": l.points.iter().map(point).collect::<Vec<_>>()}))
            .collect()
    }

    pub fn html(&self, svg: &str) -> String {
        let mut body =
            format!("<figure class=\"chart\">{svg}<figcaption>{}</figcaption></figure>\n", escape(&self.captioned()));
        body.push_str("<table><tr><th>run</th><th>started</th><th>label</th>");
        for line in &self.lines {
            let _ = write!(body, "<th>{}</th>", escape(&line.name));
        }
        body.push_str("</tr>\n");
        for (x, (id, at, label)) in self.runs.iter().enumerate() {
            let _ = write!(
                body,
                "<tr><td>{id}</td><td>{}</td><td>{}</td>",
                escape(at),
                escape(label.as_deref().unwrap_or(""))
            );
            let value = |v: f64| if self.ns { format_ns(v) } else { short(v) };
            for line in &self.lines {
                let cell = match line.points.iter().find(|p| p.0 == x) {
                    Some((_, y, Some(e))) => format!("{} ± {}", value(*y), value(*e)),
                    Some((_, y, None)) => value(*y),
                    None => String::new(),
                };
                let _ = write!(body, "<td>{}</td>", escape(&cell));
            }
            body.push_str("</tr>\n");
        }
        body.push_str("</table>\n");
        if self.has_bars() {
            let _ = writeln!(body, "<p>{}</p>", escape(BARS));
        }
        page(&self.title, &body)
    }
}

/// A value in 4 significant figures.
pub fn short(v: f64) -> String {
    if v.abs() >= 1e4 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.4}")
    }
}
