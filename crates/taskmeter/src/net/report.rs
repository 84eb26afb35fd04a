//! What `run net` shows and writes: the console tables, `net.json`, `summary.csv`, the charts
//! (the study's ratio graph, throughput, round-trip p99) and `report.html`.

use super::{NetPoint, NetRecord};
use crate::chart::{line_chart, palette, Chart, Series};
use crate::output::{format_ns, render_table};
use std::fmt::Write as _;
use std::path::Path;

/// Each receiver's throughput divided by its own with 1 sender (when it measured one).
pub fn fill_ratios(points: &mut [NetPoint]) {
    let bases: Vec<(String, f64)> = points
        .iter()
        .filter(|p| p.senders == 1 && p.error.is_none())
        .filter_map(|p| Some((p.receiver.clone(), p.throughput?)))
        .collect();
    for point in points.iter_mut() {
        let base = bases.iter().find(|b| b.0 == point.receiver).map(|b| b.1);
        point.ratio = match (point.throughput, base, &point.error) {
            (Some(t), Some(b), None) if b > 0.0 => Some(t / b),
            _ => None,
        };
    }
}

pub fn progress_line(p: &NetPoint) -> String {
    match (&p.error, p.throughput) {
        (None, Some(t)) => format!("net: {:<12} {:>3} senders  {:>10.0} msg/s  {} of {} acknowledged", p.receiver, p.senders, t, p.messages_acked, p.messages_planned),
        (Some(e), _) => format!("net: {:<12} {:>3} senders  FAILED: {e}", p.receiver, p.senders),
        (None, None) => format!("net: {:<12} {:>3} senders  no throughput (too few messages)", p.receiver, p.senders),
    }
}

fn cell(value: Option<f64>, format: impl Fn(f64) -> String) -> String {
    value.map_or("-".into(), format)
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
    let mut lines = vec![["receiver", "senders", "throughput msg/s", "ratio to 1 sender", "round trip p50", "p99", "acknowledged", "status"]
        .map(str::to_string)
        .to_vec()];
    for p in &record.points {
        let rtt = |pick: fn(&crate::stats::Summary) -> Option<i64>| p.round_trip.as_ref().and_then(pick).map_or("-".into(), |v| format_ns(v as f64));
        lines.push(vec![
            p.receiver.clone(),
            p.senders.to_string(),
            cell(p.throughput, |t| format!("{t:.0}")),
            cell(p.ratio, |r| format!("{r:.2}x")),
            rtt(|s| s.p50),
            rtt(|s| s.p99),
            format!("{}/{}", p.messages_acked, p.messages_planned),
            if p.error.is_some() { "FAILED".into() } else { "ok".into() },
        ]);
    }
    out.push_str(&render_table(&lines));
    let receivers = receivers_of(record);
    if !receivers.is_empty() && record.settings.senders.len() > 1 {
        out.push_str("\nthroughput / the receiver's own 1-sender throughput:\n");
        let mut matrix = vec![std::iter::once("senders".to_string()).chain(receivers.iter().cloned()).collect::<Vec<_>>()];
        for &n in &record.settings.senders {
            let mut line = vec![n.to_string()];
            for r in &receivers {
                let p = record.points.iter().find(|p| &p.receiver == r && p.senders == n);
                line.push(cell(p.and_then(|p| p.ratio), |v| format!("{v:.2}")));
            }
            matrix.push(line);
        }
        out.push_str(&render_table(&matrix));
    }
    for p in record.points.iter().filter(|p| p.error.is_some()) {
        let _ = writeln!(out, "{} with {} senders failed: {}", p.receiver, p.senders, p.error.as_deref().unwrap_or_default());
    }
    if !record.complete {
        out.push_str("\nThe run was interrupted: these results hold what was measured before it.\n");
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

/// The ratio graph, throughput and round-trip p99 against senders, one line per receiver.
pub fn charts(record: &NetRecord) -> Result<Vec<Chart>, String> {
    let receivers = receivers_of(record);
    let series = |value: &dyn Fn(&NetPoint) -> Option<f64>| -> Vec<Series> {
        receivers
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let points = record.points.iter().filter(|p| &p.receiver == r && p.error.is_none()).filter_map(|p| Some((p.senders as f64, value(p)?))).collect();
                (r.clone(), palette(i), points)
            })
            .filter(|s: &Series| !s.2.is_empty())
            .collect()
    };
    let specs: [(&str, &str, &str, &dyn Fn(&NetPoint) -> Option<f64>); 3] = [
        ("ratio.svg", "Throughput relative to 1 sender (the TCP study's ratio graph)", "ratio to 1 sender", &|p| p.ratio),
        ("throughput.svg", "Throughput at the receiver", "messages per second", &|p| p.throughput),
        ("round-trip-p99.svg", "Round trip p99 at the senders", "round trip p99 (ms)", &|p| p.round_trip.as_ref()?.p99.map(|v| v as f64 / 1e6)),
    ];
    let mut charts = Vec::new();
    for (file, title, y, value) in specs {
        let lines = series(value);
        if lines.iter().any(|s| s.2.len() > 1) {
            charts.push(Chart { file: file.into(), title: title.into(), svg: line_chart(title, "senders", y, &lines, None)? });
        }
    }
    Ok(charts)
}

pub fn summary_csv(record: &NetRecord) -> String {
    let mut out = String::from("receiver,senders,messages_planned,messages_sent,messages_acked,messages_received,throughput_msg_per_s,ratio_to_1_sender,window_ns,rtt_p50_ns,rtt_p99_ns,rtt_max_ns,status\n");
    for p in &record.points {
        let rtt = |pick: fn(&crate::stats::Summary) -> Option<i64>| p.round_trip.as_ref().and_then(pick).map_or(String::new(), |v| v.to_string());
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{}",
            p.receiver,
            p.senders,
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

pub fn write_folder(dir: &Path, record: &NetRecord) -> Result<(), String> {
    let io = |e: std::io::Error| format!("cannot write the results: {e}");
    let json = serde_json::to_string_pretty(record).map_err(|e| format!("cannot encode net.json: {e}"))?;
    std::fs::write(dir.join("net.json"), json).map_err(io)?;
    std::fs::write(dir.join("summary.csv"), summary_csv(record)).map_err(io)?;
    let charts = charts(record)?;
    if !charts.is_empty() {
        std::fs::create_dir_all(dir.join("charts")).map_err(io)?;
        for chart in &charts {
            std::fs::write(dir.join("charts").join(&chart.file), &chart.svg).map_err(io)?;
        }
    }
    std::fs::write(dir.join("report.html"), crate::html::render_net(record, &charts, &console(record))).map_err(io)
}
