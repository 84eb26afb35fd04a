//! `history trend`: a metric's stat over runs, one line per machine (or per runtime) and
//! workload, each run's point the mean of its repetitions with its range when it had two or
//! more (`taskmeter_stats::mean_range`, as a run's own tables and charts give it); as an SVG
//! chart (`report::chart`) and an HTML page with the values beneath, both saying what the error
//! bars and ± are (`taskmeter_stats::range_note`, the words every report uses).

use super::series::{workload_names, Key, RunValues};
use crate::report::figure::{line_chart, styles, Axis, Scale, Series, Unit};
use crate::report::format::format_ns;
use crate::report::html::{escape, page};
use std::collections::{BTreeMap, BTreeSet};
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
    /// What the error bars and ± are (`bars_note`); None when no run has a range.
    pub bars: Option<String>,
}

pub struct Line {
    pub name: String,
    /// (x position, mean, half-width of its range: `Trend::bars`).
    pub points: Vec<(usize, f64, Option<f64>)>,
}

/// A run's point: the mean of its repetitions' values and the half-width of its 95 % range for
/// another invocation's mean (`taskmeter_stats::mean_range`, as `analysis::cells` gives a run's
/// own); no range with one repetition.
fn point(values: &[f64]) -> Option<(f64, Option<f64>)> {
    let range = taskmeter_stats::mean_range(values)?;
    Some((range.value, range.has_range().then_some(range.half_width)))
}

/// What the error bars and ± are, in the words of `taskmeter_stats::range_note`, for each
/// number of repetitions the runs with a range had; None when none had one.
fn bars_note(series: &BTreeMap<Key, Vec<RunValues>>) -> Option<String> {
    let counts: BTreeSet<usize> = series.values().flatten().map(|r| r.values.len()).filter(|n| *n > 1).collect();
    let notes: Vec<String> = counts.into_iter().map(|n| taskmeter_stats::range_note(n, "of each run")).collect();
    (!notes.is_empty()).then(|| format!("error bars and ±: {} (none for a run of one repetition)", notes.join("; ")))
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
    let several_points = series.keys().map(|k| &k.point).collect::<BTreeSet<_>>().len() > 1;
    let others = series.keys().map(|k| if by == By::Machine { &k.subject } else { &k.machine });
    let several_others = others.collect::<BTreeSet<_>>().len() > 1;
    let workloads = workload_names(series.keys());
    let lines = series
        .iter()
        .map(|(key, values)| Line {
            name: name(key, by, (several_points, several_others), &workloads[key]),
            points: values
                .iter()
                .filter_map(|r| {
                    let x = runs.iter().position(|(id, _, _)| *id == r.run).unwrap_or(0);
                    point(&r.values).map(|(mean, half_width)| (x, mean, half_width))
                })
                .collect(),
        })
        .collect();
    Trend { title, y_desc, ns, runs, lines, bars: bars_note(series) }
}

impl Trend {
    /// The title, and what the bars are when there are any.
    fn captioned(&self) -> String {
        match &self.bars {
            Some(bars) => format!("{}; {bars}", self.title),
            None => self.title.clone(),
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
        if let Some(bars) = &self.bars {
            let _ = writeln!(body, "<p>{}</p>", escape(bars));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run(run: i64, values: &[f64]) -> RunValues {
        RunValues { run, started_at: format!("2026-01-0{run}"), label: None, values: values.to_vec() }
    }

    /// A run's bar by hand: repetitions 10, 12, 14 have the mean 12 and s = 2; the range for
    /// another invocation's mean is 12 ± t(0.975, 2) · 2 · √(2/3) = 12 ± 4.3027 · 1.6330 = 12 ±
    /// 7.026. One repetition: no bar. The chart and the page say what the bars are, for each
    /// number of repetitions there was.
    #[test]
    fn a_run_s_bar_is_the_range_its_report_gives_and_is_said() {
        let key = Key { experiment: "sleep".into(), subject: "thread".into(), machine: "m".into(), ..Key::default() };
        let series = BTreeMap::from([(key, vec![run(1, &[10.0, 12.0, 14.0]), run(2, &[11.0]), run(3, &[9.0, 11.0])])]);
        let trend = build(&series, By::Machine, "lateness p50 over runs".into(), "lateness".into(), true);
        let points = &trend.lines[0].points;
        assert_eq!((points[0].0, points[0].1), (0, 12.0));
        assert!((points[0].2.unwrap() - 7.026).abs() < 0.001, "{points:?}");
        assert_eq!(points[1], (1, 11.0, None));
        let bars = trend.bars.clone().unwrap();
        assert!(
            bars.starts_with("error bars and ±: 95 % range for another invocation's mean, from 2 repetitions"),
            "{bars}"
        );
        assert!(
            bars.contains("; 95 % range for another invocation's mean, from 3 repetitions (of each run)"),
            "{bars}"
        );
        let svg = trend.svg().unwrap();
        assert!(svg.contains(&format!("<title>lateness p50 over runs; {bars}</title>")), "{svg}");
        assert!(trend.html(&svg).contains(&format!("<p>{bars}</p>")));
        // Without a range, nothing is said.
        let single = BTreeMap::from([(Key::default(), vec![run(1, &[1.0]), run(2, &[2.0])])]);
        assert_eq!(build(&single, By::Machine, "t".into(), "y".into(), false).bars, None);
    }
}
