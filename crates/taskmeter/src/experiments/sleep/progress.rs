//! The progress of a run on stderr: a bar with ETA on a terminal, one plain line per row
//! otherwise.

use crate::model::run::{Row, RowStatus};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// A progress bar with ETA on a terminal; one plain line per row otherwise.
pub struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    row_started: std::cell::Cell<Instant>,
}

impl Progress {
    pub fn new(expected: Duration) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(expected.as_millis().max(1) as u64);
            bar.set_style(
                ProgressStyle::with_template("{msg:>20} [{elapsed_precise}] {wide_bar} {percent:>3}% ETA {eta}")
                    .expect("a valid template"),
            );
            bar
        });
        Progress { bar, started: Instant::now(), row_started: std::cell::Cell::new(Instant::now()) }
    }

    pub fn start_row(&self, label: &str) {
        self.row_started.set(Instant::now());
        if let Some(bar) = &self.bar {
            bar.set_message(label.to_string());
        }
        self.tick();
    }

    pub fn tick(&self) {
        if let Some(bar) = &self.bar {
            bar.set_position((self.started.elapsed().as_millis() as u64).min(bar.length().unwrap_or(0)));
        }
    }

    pub fn finish_row(&self, label: &str, row: &Row) {
        let elapsed = self.row_started.get().elapsed().as_secs_f64();
        let line = match (&row.status, &row.counts) {
            (RowStatus::Failed, _) => format!("{label}: FAILED after {elapsed:.1} s: {}", row.reason.as_deref().unwrap_or("")),
            (RowStatus::Partial, Some(c)) => {
                format!("{label}: PARTIAL, {} of {} units: {}", c.units, c.units_planned, row.reason.as_deref().unwrap_or(""))
            }
            (_, Some(c)) if c.samples_total == 0 => {
                format!("{label}: {} iterations in {elapsed:.1} s", c.iterations_measured)
            }
            (_, Some(c)) => format!("{label}: {} samples in {elapsed:.1} s", c.samples_measured),
            _ => format!("{label}: done in {elapsed:.1} s"),
        };
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("taskmeter: {line}"),
        }
    }

    pub fn clear(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
