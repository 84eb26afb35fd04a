//! The progress of a run on stderr. On a terminal: a bar with ETA, and for each running row its
//! measured samples, p50, p99 and max lateness so far (cyclictest's live line), refreshed a few
//! times a second. Otherwise one plain line per row.

use crate::report::format::{format_count, format_ns};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use taskmeter_analysis::accumulate::{Live, RowStats};
use taskmeter_model::run::{Row, RowStatus};

/// How often the live figures are read again; the bar is drawn as often (indicatif's default is
/// 20 times a second: redrawing figures that have not changed only costs the harness CPU).
const REFRESH: Duration = Duration::from_millis(250);
const DRAWS_PER_SECOND: u8 = 4;

pub struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    state: Mutex<State>,
}

struct State {
    row_started: Instant,
    last_refresh: Instant,
    /// The rows running now, by label.
    running: Vec<(String, Arc<Mutex<RowStats>>)>,
}

/// Keeps a row on the live line while it runs.
pub struct Watched<'a> {
    progress: &'a Progress,
    label: String,
}

impl Drop for Watched<'_> {
    fn drop(&mut self) {
        self.progress.state().running.retain(|(label, _)| *label != self.label);
    }
}

impl Progress {
    pub fn new(expected: Duration) -> Progress {
        let bar = (std::io::stderr().is_terminal() && !taskmeter_console::streams::quiet()).then(|| {
            let target = indicatif::ProgressDrawTarget::stderr_with_hz(DRAWS_PER_SECOND);
            let bar = ProgressBar::with_draw_target(Some(expected.as_millis().max(1) as u64), target);
            bar.set_style(
                ProgressStyle::with_template("[{elapsed_precise}] {bar:20} {percent:>3}% ETA {eta} {wide_msg}")
                    .expect("a valid template"),
            );
            bar
        });
        let now = Instant::now();
        Progress {
            bar,
            started: now,
            state: Mutex::new(State { row_started: now, last_refresh: now, running: Vec::new() }),
        }
    }

    /// Whether running rows' figures are shown (stderr is a terminal).
    pub fn is_live(&self) -> bool {
        self.bar.is_some()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn start_row(&self, label: &str) {
        self.state().row_started = Instant::now();
        if let Some(bar) = &self.bar {
            bar.set_message(label.to_string());
        }
        self.tick();
    }

    /// Shows a running row's live figures until the returned guard is dropped.
    pub fn watch(&self, label: &str, stats: Arc<Mutex<RowStats>>) -> Watched<'_> {
        self.state().running.push((label.to_string(), stats));
        Watched { progress: self, label: label.to_string() }
    }

    pub fn tick(&self) {
        let Some(bar) = &self.bar else { return };
        bar.set_position((self.started.elapsed().as_millis() as u64).min(bar.length().unwrap_or(0)));
        let mut state = self.state();
        if state.last_refresh.elapsed() < REFRESH {
            return;
        }
        state.last_refresh = Instant::now();
        let fields: Vec<Vec<String>> = state
            .running
            .iter()
            .map(|(label, stats)| live_fields(label, &stats.lock().unwrap_or_else(|e| e.into_inner()).live()))
            .collect();
        if !fields.is_empty() {
            let room = taskmeter_console::terminal::stderr_width().saturating_sub(BAR_COLUMNS);
            bar.set_message(live_message(&fields, room));
        }
    }

    pub fn finish_row(&self, label: &str, row: &Row) {
        let elapsed = self.state().row_started.elapsed().as_secs_f64();
        // A row that failed, stopped short or was cut is said even with -q.
        let routine = !matches!(row.status, RowStatus::Failed | RowStatus::Partial | RowStatus::Interrupted);
        if routine && taskmeter_console::streams::quiet() {
            return;
        }
        let line = match (&row.status, &row.counts) {
            (RowStatus::Failed, _) => {
                format!("{label}: FAILED after {elapsed:.1} s: {}", row.reason.as_deref().unwrap_or(""))
            }
            (RowStatus::Partial, Some(_)) => format!("{label}: PARTIAL: {}", row.reason.as_deref().unwrap_or("")),
            (RowStatus::Interrupted, None) => {
                format!("{label}: interrupted after {elapsed:.1} s: {}", row.reason.as_deref().unwrap_or(""))
            }
            (_, Some(c)) if c.samples_total == 0 => {
                format!("{label}: {} iterations in {elapsed:.1} s", c.iterations_measured)
            }
            (_, Some(c)) if c.samples_lost > 0 => {
                format!(
                    "{label}: {} samples in {elapsed:.1} s, {} LOST (a unit's own write of its full ring failed)",
                    c.samples_measured, c.samples_lost
                )
            }
            (_, Some(c)) if c.samples_flushed_by_units > 0 => {
                format!(
                    "{label}: {} samples in {elapsed:.1} s ({} written by their units, the writer having fallen \
                     behind; {} left out)",
                    c.samples_measured, c.samples_flushed_by_units, c.samples_left_out
                )
            }
            (_, Some(c)) => format!("{label}: {} samples in {elapsed:.1} s", c.samples_measured),
            _ => format!("{label}: done in {elapsed:.1} s"),
        };
        match &self.bar {
            Some(bar) => {
                bar.println(taskmeter_console::terminal::fit(&line, taskmeter_console::terminal::stderr_width()))
            }
            None => taskmeter_console::errln!("taskmeter: {line}"),
        }
    }

    pub fn clear(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The columns the bar takes before its message: "[00:00:12] " (11), the bar (20), " 100%"
/// (5), " ETA " (5), the ETA ("59s", "89m": 3) and a space, and one column spare, so that the
/// line never reaches the terminal's last column.
const BAR_COLUMNS: usize = 11 + 20 + 5 + 5 + 3 + 1 + 1;

/// A running row's live figures as fields: "go: 12,034 samples", ", lateness p50 51 µs",
/// " p99 80 µs", " max 1.2 ms" (together, cyclictest's live line).
fn live_fields(label: &str, live: &Live) -> Vec<String> {
    let value = |v: Option<i64>| v.map(|v| format_ns(v as f64)).unwrap_or_else(|| "-".into());
    if live.samples == 0 {
        return vec![format!("{label}: warming up")];
    }
    vec![
        format!("{label}: {} samples", format_count(live.samples)),
        format!(", lateness p50 {}", value(live.p50)),
        format!(" p99 {}", value(live.p99)),
        format!(" max {}", value(live.max)),
    ]
}

/// The running rows' fields in `room` columns, rows apart by " | ": whole fields are left out
/// from the end until the rest fits, never one cut in the middle of its value (the first field
/// stays, cut with "…" only when not even it fits).
fn live_message(rows: &[Vec<String>], room: usize) -> String {
    use taskmeter_console::terminal::{columns, truncate};
    let mut fields: Vec<String> = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        for (j, field) in row.iter().enumerate() {
            fields.push(if i > 0 && j == 0 { format!(" | {field}") } else { field.clone() });
        }
    }
    let mut used: usize = fields.iter().map(|f| columns(f)).sum();
    while fields.len() > 1 && used > room {
        used -= fields.pop().map_or(0, |f| columns(&f));
    }
    truncate(&fields.concat(), room.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str) -> Vec<String> {
        let live = Live { samples: 12_034, p50: Some(51_200), p99: Some(250_000), max: Some(1_200_000) };
        live_fields(label, &live)
    }

    #[test]
    fn the_live_line_drops_whole_fields_rather_than_cutting_one() {
        let full = "go: 12,034 samples, lateness p50 51.2 µs p99 250 µs max 1.20 ms";
        assert_eq!(live_message(&[row("go")], 100), full);
        // 100 columns less the bar: the max goes, p99 keeps its unit.
        assert_eq!(
            live_message(&[row("go")], 100 - BAR_COLUMNS),
            "go: 12,034 samples, lateness p50 51.2 µs p99 250 µs"
        );
        assert_eq!(live_message(&[row("go")], 45), "go: 12,034 samples, lateness p50 51.2 µs");
        assert_eq!(live_message(&[row("go")], 30), "go: 12,034 samples");
        assert_eq!(live_message(&[row("go")], 10), "go: 12,03…", "only the first field is ever cut");
        let two = live_message(&[row("go"), row("tokio-mt")], 90);
        assert_eq!(two, "go: 12,034 samples, lateness p50 51.2 µs p99 250 µs max 1.20 ms | tokio-mt: 12,034 samples");
    }
}
