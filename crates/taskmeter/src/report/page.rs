//! One report layer: each kind of result implements [`Report`] once, yielding its settings,
//! warnings, tables, figures and page sections, and [`write_report`] and [`html`] do the rest
//! for every kind alike: `charts/*.svg`, and `report.html` with the warnings at the top, the
//! settings and environment as definition lists, tables as `<table>` and figures inline. A new
//! experiment's report is one file: its `impl Report`.

use super::dashboard::{Benchmark, Distribution};
use super::figure::Chart;
use super::html::escape;
use super::tables::Table;
use super::{write, write_charts_and_page, ReportError};
use std::fmt::Write as _;
use std::path::Path;
use taskmeter_machine::env::Environment;
use taskmeter_model::header::{Header, Record};

/// A part of a page.
pub enum Block {
    /// A table, with its caption (may be empty) and class (`results` for results).
    Table(String, Table, &'static str),
    /// The figures of this group (in [`Report::figures`]), in their order.
    Figures(String),
    /// A paragraph.
    Text(String),
}

/// A section of a page: its anchor, heading and blocks.
pub struct Section {
    pub id: String,
    pub heading: String,
    pub blocks: Vec<Block>,
}

/// What every record gives a report as it is: its header, its file and its JSON.
pub trait Stored {
    /// The record's header: when, the command line, the environment, complete or not.
    fn header(&self) -> &Header;
    /// The record's file name (`run.json`).
    fn file(&self) -> &'static str;
    /// The record as its file holds it (`--export-json`).
    fn json(&self) -> String;
    /// The record as its file reads back.
    fn json_value(&self) -> serde_json::Value;
    /// The kind's name, its file's stem: `run`, `net`, `bench`, `granularity`.
    fn kind(&self) -> &'static str {
        self.file().trim_end_matches(".json")
    }
}

impl<R: Record> Stored for R {
    fn header(&self) -> &Header {
        Record::header(self)
    }
    fn file(&self) -> &'static str {
        R::FILE
    }
    fn json(&self) -> String {
        self.to_json()
    }
    fn json_value(&self) -> serde_json::Value {
        self.to_json_value()
    }
}

/// What a kind of result shows; `report.html`, the figures and the exports come from it alone.
pub trait Report: Stored {
    /// One line per row of results (`summary.csv`, `--export-csv`).
    fn csv(&self) -> String;
    /// The tables, ready to paste (`--export-markdown`).
    fn markdown(&self) -> String;
    /// The files besides the record that are drawn from it alone (written with it, and again by
    /// `taskmeter report`): `summary.csv`.
    fn derived(&self) -> Vec<(&'static str, String)> {
        vec![("summary.csv", self.csv())]
    }
    /// The experiment its figures are of (`sleep`, `net`, `bench`...): its kind, unless its
    /// family says more.
    fn experiment(&self) -> String {
        self.kind().to_string()
    }
    /// The figures the dashboards track (`--export-github-benchmark-*`, `--export-bmf`,
    /// `--export-openmetrics`): those its tables show, each with taskmeter's own 95 % range where
    /// the record has one.
    fn benchmarks(&self) -> Vec<Benchmark>;
    /// Each row's distributions as cumulative buckets (`--export-openmetrics`); none where the
    /// record keeps none.
    fn distributions(&self) -> Vec<Distribution> {
        Vec::new()
    }
    /// The page's title.
    fn title(&self) -> String {
        format!("taskmeter {} run of {}", self.kind(), self.header().started_at)
    }
    /// The settings, as (term, value).
    fn settings(&self) -> Vec<(String, String)>;
    /// What a reader must know before quoting a figure; shown at the top of the page (that the
    /// run stopped early is added to it).
    fn warnings(&self) -> Vec<String>;
    /// Every figure, in the house style (`figure.rs`).
    fn figures(&self) -> Result<Vec<Chart>, String>;
    /// The page's sections, which place the tables and the figures (those of [`Report::figures`],
    /// by group); a section with nothing to show is left out.
    fn sections(&self) -> Vec<Section>;
    /// The console's report in `layout` (`taskmeter report --table`); None: the kind has no
    /// layouts (only a run of the work loop has).
    fn console_table(&self, _layout: super::tables::Layout) -> Option<String> {
        None
    }
}

/// A results folder: the record's file, then what is drawn from it ([`write_report`]).
pub fn write_folder<R: Report>(dir: &Path, record: &R) -> Result<(), ReportError> {
    write(&dir.join(record.file()), record.json())?;
    write_report(dir, record)
}

/// The files drawn from a record of any kind: [`Report::derived`], `charts/*.svg` and
/// `report.html`.
pub fn write_report(dir: &Path, report: &dyn Report) -> Result<(), ReportError> {
    for (file, text) in report.derived() {
        write(&dir.join(file), text)?;
    }
    let figures = described_figures(report).map_err(ReportError::Chart)?;
    write_charts_and_page(dir, &figures, &html(report, &figures))
}

/// [`Report::figures`], each saying in its `<desc>` which run it is of (the page's title).
pub fn described_figures(report: &dyn Report) -> Result<Vec<Chart>, String> {
    let mut figures = report.figures()?;
    let subject = report.title();
    for chart in &mut figures {
        super::figure::within(chart, &subject);
    }
    Ok(figures)
}

/// A table whose first line is its header.
pub fn table(lines: Vec<Vec<String>>) -> Table {
    let mut lines = lines.into_iter();
    Table { header: lines.next().unwrap_or_default(), lines: lines.collect(), without_statistics: Vec::new() }
}

/// The page of a report made of sections.
pub fn html<R: Report + ?Sized>(report: &R, figures: &[Chart]) -> String {
    let header = report.header();
    let when = format!("{} to {}", header.started_at, header.finished_at);
    let mut out = super::html::page_head(&report.title(), header, &when);
    let mut warnings = report.warnings();
    if !header.complete {
        let why = header.incomplete_reason.as_deref().unwrap_or("interrupted");
        warnings.push(format!("the run stopped early ({why}): these results hold what was measured before it"));
    }
    if !warnings.is_empty() {
        out.push_str("<section id=\"warnings\" class=\"warnings\"><h2>Warnings</h2><ul>\n");
        for w in warnings {
            let _ = writeln!(out, "<li class=\"warning\">{}</li>", escape(&w));
        }
        out.push_str("</ul></section>\n");
    }
    definitions(&mut out, "settings", "Settings", &report.settings());
    let shows = |block: &Block| match block {
        Block::Figures(group) => figures.iter().any(|c| &c.group == group),
        _ => true,
    };
    for section in report.sections().into_iter().filter(|s| s.blocks.iter().any(shows)) {
        let _ = writeln!(out, "<h2 id=\"{}\">{}</h2>", escape(&section.id), escape(&section.heading));
        for block in section.blocks {
            match block {
                Block::Table(caption, t, class) => {
                    if !caption.is_empty() {
                        let _ = writeln!(out, "<h3>{}</h3>", escape(&caption));
                    }
                    super::html::html_table(&mut out, &t, class);
                }
                Block::Figures(group) => {
                    for chart in figures.iter().filter(|c| c.group == group) {
                        figure(&mut out, chart);
                    }
                }
                Block::Text(text) => {
                    let _ = writeln!(out, "<p>{}</p>", escape(&text));
                }
            }
        }
    }
    environment(&mut out, &header.environment);
    let _ = write!(
        out,
        "<p><small>taskmeter {}, {} schema {}</small></p>\n</body></html>\n",
        escape(&header.taskmeter_version),
        report.file(),
        escape(&header.schema)
    );
    out
}

/// A figure inline, its title as the caption and its file named.
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

/// A definition list under a heading.
pub fn definitions(out: &mut String, id: &str, heading: &str, items: &[(String, String)]) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(out, "<h2 id=\"{id}\">{heading}</h2>\n<dl class=\"{id}\">");
    for (term, value) in items {
        let _ = writeln!(out, "<dt>{}</dt><dd>{}</dd>", escape(term), escape(value));
    }
    out.push_str("</dl>\n");
}

/// The machine, as a definition list: what is not known is left out, never shown as `?`.
pub fn environment(out: &mut String, env: &Environment) {
    let load = |l: &Option<[f64; 3]>| l.map(|l| format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2]));
    let mut items: Vec<(String, Option<String>)> = vec![
        ("kernel".into(), Some(env.kernel.clone())),
        ("CPU".into(), Some(format!("{} ({} cores online)", env.cpu_model, env.cores_online))),
        ("clocksource".into(), env.clocksource.clone()),
        ("timer slack (taskmeter)".into(), env.timer_slack_ns.map(|s| format!("{s} ns"))),
        ("preemption".into(), env.preemption.clone()),
        ("HZ".into(), env.hz.map(|h| h.to_string())),
        ("virtualisation".into(), env.virtualisation.clone()),
        ("container".into(), env.container.clone()),
        ("load average before".into(), load(&env.load_average_before)),
        ("load average after".into(), load(&env.load_average_after)),
    ];
    items.extend(
        env.toolchains.iter().map(|(runtime, version)| (format!("toolchain of {runtime}"), Some(version.clone()))),
    );
    let known: Vec<(String, String)> =
        items.into_iter().filter_map(|(k, v)| Some((k, v.filter(|v| !v.is_empty())?))).collect();
    definitions(out, "environment", "Environment", &known);
}

#[cfg(test)]
mod tests {
    use super::super::html::shell_words;

    #[test]
    fn a_command_line_keeps_its_quotes() {
        let words: Vec<String> =
            ["taskmeter", "bench", "--", "sh", "-c", "sleep 0.1 && echo 'ok'"].map(String::from).to_vec();
        assert_eq!(shell_words(&words), "taskmeter bench -- sh -c 'sleep 0.1 && echo '\\''ok'\\'''");
    }
}
