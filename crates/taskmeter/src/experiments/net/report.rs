//! What `run net` shows and writes: the console tables, `net.json`, `summary.csv`, the charts
//! (the study's ratio graph, throughput, round-trip p99) and `report.html`.

use crate::report::console::render_table_fitted;
use crate::report::dashboard as dash;
use crate::report::figure::{line_chart, styles, Axis, Chart, Series, Unit};
use crate::report::format::{format_ns, format_range, format_ratio};
use crate::report::page::{table, Block, Report, Section};
use std::fmt::Write as _;
use taskmeter_model::net::{NetPoint, NetRecord, NetSummary, RANGES_SINCE};
use taskmeter_stats::{mean_range, Interval};

pub fn progress_line(p: &NetPoint, repeat: u32) -> String {
    let repetition = if repeat > 1 { format!(" #{}", p.repetition) } else { String::new() };
    match (&p.error, p.throughput) {
        (None, Some(t)) => format!(
            "net: {:<12} {:>3} senders{repetition}  {:>10.0} msg/s  {} of {} acknowledged",
            p.receiver, p.senders, t, p.messages_acked, p.messages_planned
        ),
        (Some(e), _) => format!("net: {:<12} {:>3} senders{repetition}  FAILED: {e}", p.receiver, p.senders),
        (None, None) => {
            format!("net: {:<12} {:>3} senders{repetition}  no throughput (too few messages)", p.receiver, p.senders)
        }
    }
}

/// A throughput: "12,345" or, with repetitions, "12,345 ± 678".
fn throughput_cell(i: Option<Interval>) -> String {
    i.map_or("-".into(), |i| format_range(&i, |v| format!("{v:.0}")))
}

/// A ratio to 1 sender: "1 (reference)" for the 1-sender row, which is its own base (exactly 1,
/// no range), else the ratio with its range when it has one: "2.00 (1.22–3.29)".
fn ratio_cell(summary: Option<&NetSummary>) -> String {
    match summary.and_then(|s| Some((s.senders, s.ratio?))) {
        Some((1, _)) => REFERENCE.into(),
        Some((_, ratio)) => format_range(&ratio, format_ratio),
        None => "-".into(),
    }
}

/// The 1-sender row's ratio, in every table.
const REFERENCE: &str = "1 (reference)";

/// What the ± and the ranges mean, under the tables (a record before version 3 holds Student-t
/// intervals of its means, and says so).
fn intervals_note(record: &NetRecord) -> String {
    let repeat = record.settings.repeat;
    let ratios = "ratio (low–high) = the 95 % range for another invocation's ratio, on a log scale from both \
                  means' relative errors, so never below 0, except the 1-sender ratio: 1 by definition, no range; \
                  round trips: mean over repetitions";
    match repeat {
        0 | 1 => "one repetition: no range (a point's throughput varies by tens of percent from run to run here); \
                  --repeat 3 gives ranges"
            .into(),
        _ if record.header.schema_version < RANGES_SINCE => format!(
            "± = 95 % Student-t confidence interval of the mean over {repeat} repetitions (a net.json of version \
             {}: its ratios' intervals are first order), except the 1-sender ratio; round trips: mean over \
             repetitions",
            record.header.schema_version
        ),
        _ => format!(
            "throughput ± = {}; {ratios}",
            taskmeter_stats::range_note(repeat as usize, "each its own receiver process")
        ),
    }
}

/// The console report: every point, then the ratio matrix (senders x receivers).
pub fn console(record: &NetRecord) -> String {
    let s = &record.settings;
    let mut out = format!(
        "\nnet: {} messages of {} bytes per point ({}), strict stop-and-wait on loopback\n\n",
        s.messages,
        s.message_size,
        if s.per_sender { "per sender" } else { "split across the senders" }
    );
    out.push_str(&render_table_fitted(&summary_table(record)));
    if let Some(matrix) = ratio_matrix(record) {
        out.push_str("\nthroughput / the receiver's own 1-sender throughput:\n");
        out.push_str(&render_table_fitted(&matrix));
    }
    let _ = writeln!(out, "\n{}", intervals_note(record));
    for skip in &record.skipped {
        let _ = writeln!(out, "skipped: {}: {}", skip.receiver, skip.reason);
    }
    for p in record.points.iter().filter(|p| p.error.is_some()) {
        let _ = writeln!(
            out,
            "{} with {} senders failed: {}",
            p.receiver,
            p.senders,
            p.error.as_deref().unwrap_or_default()
        );
    }
    for p in record.points.iter().filter(|p| p.strangers > 0) {
        let first = p
            .stranger_reports
            .first()
            .map(|s| format!(" (the first from {}: {})", s.peer, s.reason))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{} with {} senders refused {} connection(s) that were not its senders{first}",
            p.receiver, p.senders, p.strangers
        );
    }
    if !record.header.complete {
        let why = record.header.incomplete_reason.as_deref().unwrap_or("interrupted");
        let _ = writeln!(out, "\nThe run stopped early ({why}): these results hold what was measured before it.");
    }
    out
}

fn receivers_of(record: &NetRecord) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for p in &record.points {
        if !seen.contains(&p.receiver) {
            seen.push(p.receiver.clone());
        }
    }
    seen
}

/// The mean of a receiver's round trip p99s at a sender count, over its repetitions that did not
/// fail, with its 95 % range for another invocation's (none with one).
fn round_trip_p99(record: &NetRecord, summary: &NetSummary) -> Option<Interval> {
    let values: Vec<f64> = record
        .points
        .iter()
        .filter(|q| q.receiver == summary.receiver && q.senders == summary.senders && q.error.is_none())
        .filter_map(|q| q.round_trip.as_ref()?.p99.map(|v| v as f64))
        .collect();
    mean_range(&values)
}

/// The ratio graph, throughput and round-trip p99 against senders, one line per receiver.
pub fn charts(record: &NetRecord) -> Result<Vec<Chart>, String> {
    let receivers = receivers_of(record);
    let styles = styles(&receivers);
    let series = |value: &dyn Fn(&NetSummary) -> Option<Interval>| -> Vec<Series> {
        receivers
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let estimates: Vec<(f64, Interval)> = record
                    .summaries
                    .iter()
                    .filter(|p| &p.receiver == r)
                    .filter_map(|p| Some((p.senders as f64, value(p)?)))
                    .collect();
                Series::of_estimates(r.clone(), styles[i], &estimates)
            })
            .filter(|s: &Series| !s.points.is_empty())
            .collect()
    };
    let mean_rtt_p99 = |p: &NetSummary| round_trip_p99(record, p);
    type Value<'a> = &'a dyn Fn(&NetSummary) -> Option<Interval>;
    let specs: [(&str, &str, &str, Unit, Value); 3] = [
        (
            "ratio.svg",
            "Throughput relative to 1 sender (the TCP study's ratio graph)",
            "ratio to 1 sender",
            Unit::Plain,
            // The 1-sender point is the reference, without an error bar (even in a net.json
            // written before it had none).
            &|p| p.ratio.map(|r| if p.senders == 1 { Interval::single(1.0) } else { r }),
        ),
        ("throughput.svg", "Throughput at the receiver", "messages per second", Unit::Count, &|p| p.throughput),
        ("round-trip-p99.svg", "Round trip p99 at the senders", "round trip p99", Unit::Nanos, &mean_rtt_p99),
    ];
    let mut charts = Vec::new();
    for (file, title, y, unit, value) in specs {
        let lines = series(value);
        if lines.iter().any(|s| s.points.len() > 1) {
            charts.push(Chart {
                group: "curves".into(),
                file: file.into(),
                title: title.into(),
                svg: line_chart(title, &Axis::new("senders", Unit::Count), &Axis::new(y, unit), &lines, None)?,
            });
        }
    }
    Ok(charts)
}

/// The dashboards' figures of a net run: per receiver and sender count, the throughput and its
/// ratio to 1 sender (each with its 95 % range for another invocation's, from the repetitions)
/// and the round trip p99 (the mean of the repetitions', with its range); the 1-sender ratio,
/// 1 by definition, is left out.
pub fn benchmarks(record: &NetRecord) -> Vec<dash::Benchmark> {
    let mut out = Vec::new();
    for summary in &record.summaries {
        let subject = || vec![("receiver", summary.receiver.clone()), ("senders", summary.senders.to_string())];
        let messages = dash::Unit::PerSecond("messages");
        out.extend(summary.throughput.map(|i| dash::Benchmark::estimate(subject(), "throughput", messages, true, &i)));
        if summary.senders != 1 {
            out.extend(
                summary
                    .ratio
                    .map(|i| dash::Benchmark::estimate(subject(), "ratio to 1 sender", dash::Unit::Ratio, true, &i)),
            );
        }
        out.extend(
            round_trip_p99(record, summary)
                .map(|i| dash::Benchmark::estimate(subject(), "round trip p99", dash::Unit::Nanoseconds, false, &i)),
        );
        dash::note_repetitions(&mut out, summary.repetitions);
    }
    out
}

impl Report for NetRecord {
    fn benchmarks(&self) -> Vec<dash::Benchmark> {
        benchmarks(self)
    }

    fn csv(&self) -> String {
        let mut out = String::from("receiver,senders,repetition,messages_planned,messages_sent,messages_acked,messages_received,throughput_msg_per_s,ratio_to_1_sender,window_ns,rtt_p50_ns,rtt_p99_ns,rtt_max_ns,status\n");
        for p in &self.points {
            let rtt = |pick: fn(&taskmeter_stats::Summary) -> Option<i64>| {
                p.round_trip.as_ref().and_then(pick).map_or(String::new(), |v| v.to_string())
            };
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                p.receiver,
                p.senders,
                p.repetition,
                p.messages_planned,
                p.messages_sent,
                p.messages_acked,
                p.messages_received,
                p.throughput.map_or(String::new(), |t| format!("{t:.1}")),
                p.ratio.map_or(String::new(), |r| format!("{r:.4}")),
                p.window_ns.map_or(String::new(), |w| w.to_string()),
                rtt(|s| s.p50),
                rtt(|s| s.p99),
                rtt(|s| s.max),
                if p.error.is_some() { "failed" } else { "ok" },
            );
        }
        out
    }

    /// `--export-markdown`: the tables, ready to paste.
    fn markdown(&self) -> String {
        let table = crate::report::markdown::table;
        let s = &self.settings;
        let mut out = format!(
            "**taskmeter net** {} messages of {} bytes per point, {} repetition(s)\n\n",
            s.messages, s.message_size, s.repeat
        );
        out.push_str(&table(&summary_table(self)));
        if let Some(matrix) = ratio_matrix(self) {
            out.push_str("\n_throughput / the receiver's own 1-sender throughput_\n\n");
            out.push_str(&table(&matrix));
        }
        let _ = writeln!(out, "\n_{}_", intervals_note(self));
        out
    }

    fn settings(&self) -> Vec<(String, String)> {
        let s = &self.settings;
        let senders: Vec<String> = s.senders.iter().map(|n| n.to_string()).collect();
        vec![
            ("receivers".into(), s.receivers.join(", ")),
            ("senders".into(), senders.join(", ")),
            (
                "messages".into(),
                format!(
                    "{} of {} bytes per point ({}), strict stop-and-wait on loopback",
                    s.messages,
                    s.message_size,
                    if s.per_sender { "per sender" } else { "split across the senders" }
                ),
            ),
            ("repetitions".into(), s.repeat.to_string()),
        ]
    }

    fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> =
            self.skipped.iter().map(|skip| format!("skipped: {}: {}", skip.receiver, skip.reason)).collect();
        out.extend(self.points.iter().filter(|p| p.error.is_some()).map(|p| {
            format!("{} with {} senders failed: {}", p.receiver, p.senders, p.error.as_deref().unwrap_or_default())
        }));
        out.extend(self.points.iter().filter(|p| p.strangers > 0).map(|p| {
            format!(
                "{} with {} senders refused {} connection(s) that were not its senders",
                p.receiver, p.senders, p.strangers
            )
        }));
        out
    }

    fn figures(&self) -> Result<Vec<Chart>, String> {
        charts(self)
    }

    fn sections(&self) -> Vec<Section> {
        let mut blocks = vec![Block::Table(String::new(), table(summary_table(self)), "results")];
        if let Some(matrix) = ratio_matrix(self) {
            blocks.push(Block::Table(
                "Throughput / the receiver's own 1-sender throughput".into(),
                table(matrix),
                "results",
            ));
        }
        let note = intervals_note(self);
        let mut chars = note.chars();
        let first: String = chars.next().into_iter().flat_map(char::to_uppercase).collect();
        blocks.push(Block::Text(format!("{first}{}.", chars.as_str())));
        blocks.push(Block::Figures("curves".into()));
        vec![
            Section { id: "results".into(), heading: "Results".into(), blocks },
            Section {
                id: "reading".into(),
                heading: "How to read this".into(),
                blocks: vec![Block::Text(READING.into())],
            },
        ]
    }
}

const READING: &str = "Throughput is the study's: all messages received / (last receive - first receive) at the \
    receiver. The ratio divides it by the same receiver's throughput with 1 sender: the 1-sender row is \
    the reference, 1 by definition and without a range; with repetitions, the other rows' range is where another \
    invocation's ratio would fall 95 % of the time, on a log scale from the relative errors of both means. The \
    round trip is timed per \
    message at the senders, from the start of the write to the end of the ack. Every point checks that every \
    message was sent, received and acknowledged with the same bytes.";

/// One line per receiver and sender count (the repetitions together), with a header.
fn summary_table(record: &NetRecord) -> Vec<Vec<String>> {
    let mut lines = vec![[
        "receiver",
        "senders",
        "throughput msg/s",
        "ratio to 1 sender",
        "round trip p50",
        "p99",
        "acknowledged",
        "status",
    ]
    .map(str::to_string)
    .to_vec()];
    for summary in &record.summaries {
        let of = || record.points.iter().filter(|p| p.receiver == summary.receiver && p.senders == summary.senders);
        let rtt = |pick: fn(&taskmeter_stats::Summary) -> Option<i64>| {
            let values: Vec<f64> =
                of().filter_map(|p| p.round_trip.as_ref().and_then(pick)).map(|v| v as f64).collect();
            if values.is_empty() {
                "-".into()
            } else {
                format_ns(values.iter().sum::<f64>() / values.len() as f64)
            }
        };
        let failed = of().filter(|p| p.error.is_some()).count();
        let total = of().count();
        lines.push(vec![
            summary.receiver.clone(),
            summary.senders.to_string(),
            throughput_cell(summary.throughput),
            ratio_cell(Some(summary)),
            rtt(|s| s.p50),
            rtt(|s| s.p99),
            format!(
                "{}/{}",
                of().map(|p| p.messages_acked).sum::<u64>(),
                of().map(|p| p.messages_planned).sum::<u64>()
            ),
            match failed {
                0 => "ok".into(),
                n if n == total => "FAILED".into(),
                n => format!("{n} of {total} FAILED"),
            },
        ]);
    }
    lines
}

/// Senders x receivers: each receiver's ratio to its own 1-sender throughput (the study's
/// ratio graph as a table); None with one sender count.
fn ratio_matrix(record: &NetRecord) -> Option<Vec<Vec<String>>> {
    let receivers = receivers_of(record);
    if receivers.is_empty() || record.settings.senders.len() < 2 {
        return None;
    }
    let mut matrix = vec![std::iter::once("senders".to_string()).chain(receivers.iter().cloned()).collect::<Vec<_>>()];
    for &n in &record.settings.senders {
        let mut line = vec![n.to_string()];
        for r in &receivers {
            let summary = record.summaries.iter().find(|p| &p.receiver == r && p.senders == n);
            line.push(ratio_cell(summary));
        }
        matrix.push(line);
    }
    Some(matrix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskmeter_machine::env::Environment;
    use taskmeter_model::header::Record;
    use taskmeter_model::net::NetSettings;

    /// thread at 1 and 2 senders, three repetitions each (90, 100, 110 and 180, 200, 220 msg/s).
    fn record() -> NetRecord {
        let mut points: Vec<NetPoint> = [(1, 90.0), (2, 180.0), (1, 100.0), (2, 200.0), (1, 110.0), (2, 220.0)]
            .iter()
            .enumerate()
            .map(|(i, &(senders, t))| NetPoint {
                receiver: "thread".into(),
                senders,
                repetition: i as u32 / 2 + 1,
                messages_planned: 10,
                messages_acked: 10,
                throughput: Some(t),
                ..Default::default()
            })
            .collect();
        let summaries = taskmeter_analysis::net::summarise(&mut points);
        NetRecord {
            header: NetRecord::new_header(Vec::new(), String::new(), Environment::default()),
            settings: NetSettings {
                receivers: vec!["thread".into()],
                senders: vec![1, 2],
                messages: 10,
                per_sender: false,
                message_size: 8,
                repeat: 3,
            },
            points,
            summaries,
            skipped: Vec::new(),
        }
    }

    #[test]
    fn the_1_sender_ratio_is_the_reference_without_an_interval() {
        let record = record();
        // Summary table: the 1-sender row says 1 (reference); the 2-sender row 2.00 and its range
        // on a log scale, 1.22 to 3.29 (hand-computed in analysis::net's test).
        let table = summary_table(&record);
        assert_eq!(table[0][3], "ratio to 1 sender");
        assert_eq!(table[1][3], "1 (reference)");
        assert_eq!(table[2][3], "2.00 (1.22–3.29)");
        assert_eq!(table[1][2], "100 ± 35", "the throughput's range: t(2) 4.30 x 10 x sqrt(2/3)");
        let matrix = ratio_matrix(&record).unwrap();
        assert_eq!(matrix[1], ["1", "1 (reference)"]);
        assert_eq!(matrix[2], ["2", "2.00 (1.22–3.29)"]);
        for text in [console(&record), record.markdown()] {
            assert!(!text.contains("1.00 ("), "{text}");
            assert!(text.contains("1 (reference)") && text.contains("on a log scale"), "{text}");
            assert!(text.contains("95 % range for another invocation's mean, from 3 repetitions"), "{text}");
        }
        // net.json: the 1-sender ratio has no width and null degrees of freedom.
        let json: serde_json::Value = serde_json::to_value(&record).unwrap();
        let ratio = &json["summaries"][0]["ratio"];
        assert_eq!(ratio["value"], 1.0);
        assert_eq!(ratio["half_width"], 0.0);
        assert_eq!(ratio["standard_error"], 0.0);
        assert_eq!(ratio["degrees_of_freedom"], serde_json::Value::Null);
        assert_eq!(json["summaries"][1]["ratio"]["degrees_of_freedom"], 2.0);
        assert_eq!(json["summaries"][1]["ratio"]["log_scale"], true);
        assert_eq!(ratio.get("log_scale"), None, "a linear range does not say so");
    }

    #[test]
    fn an_older_record_s_1_sender_ratio_is_still_shown_as_the_reference() {
        // net.json written before: the 1-sender ratio carried a width (its base's error, twice).
        let mut record = record();
        record.summaries[0].ratio = Some(Interval {
            half_width: 0.35,
            standard_error: 0.08,
            degrees_of_freedom: Some(2.0),
            ..Interval::single(1.0)
        });
        assert_eq!(summary_table(&record)[1][3], "1 (reference)");
        assert_eq!(ratio_matrix(&record).unwrap()[1][1], "1 (reference)");
    }

    #[test]
    fn an_older_record_says_its_intervals_are_of_the_mean() {
        // A net.json of version 2 holds Student-t intervals of its means: said as such.
        let mut record = record();
        record.header.schema_version = 2;
        let note = intervals_note(&record);
        assert!(note.contains("Student-t confidence interval of the mean over 3 repetitions"), "{note}");
        assert!(!note.contains("another invocation"), "{note}");
    }
}
