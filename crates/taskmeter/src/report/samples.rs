//! `--raw`: every sample of a run, appended to `samples.csv.gz` as the workers send them (gzip,
//! so a long run fits on disk; `zcat` or `taskmeter report DIR --samples-csv FILE` gives the
//! plain CSV), one line per sample with its timestamps and metrics.

use flate2::write::GzEncoder;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use taskmeter_protocol::SampleView;

use crate::model::samples::{FILE, HEADER};

/// The samples file of a run, shared by the rows that run at once.
pub struct SamplesFile {
    path: PathBuf,
    out: Mutex<Writer>,
}

struct Writer {
    gzip: Option<GzEncoder<BufWriter<File>>>,
    /// The first write that failed: the run goes on, and says so at its end.
    error: Option<std::io::Error>,
    line: String,
}

/// Which row samples belong to.
#[derive(Clone, Debug)]
pub struct RowKey {
    pub runtime: String,
    pub point: usize,
    pub repetition: u32,
}

impl SamplesFile {
    pub fn create(dir: &Path) -> std::io::Result<SamplesFile> {
        let path = dir.join(FILE);
        let mut gzip =
            GzEncoder::new(BufWriter::with_capacity(1 << 20, File::create(&path)?), flate2::Compression::fast());
        writeln!(gzip, "{HEADER}")?;
        Ok(SamplesFile { path, out: Mutex::new(Writer { gzip: Some(gzip), error: None, line: String::new() }) })
    }

    /// Appends the samples of one `S` frame.
    pub fn append(&self, row: &RowKey, views: &[SampleView]) {
        let mut writer = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let Writer { gzip: Some(gzip), error: error @ None, line } = &mut *writer else { return };
        line.clear();
        for v in views {
            let s = &v.sample;
            let diff = |a: u64, b: u64| a as i64 - b as i64;
            let full = v.previous_wake_ns.map(|p| diff(s.wake_ns, p).to_string()).unwrap_or_default();
            let _ = writeln!(
                line,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{full},{}",
                row.runtime,
                row.point,
                row.repetition,
                v.unit,
                s.period,
                if v.measured { "measure" } else { "warmup" },
                v.expected_ns,
                s.start_ns,
                s.busy_end_ns,
                s.intended_ns,
                s.wake_ns,
                s.missed,
                diff(s.wake_ns, s.intended_ns),
                diff(s.wake_ns, s.start_ns),
                diff(s.busy_end_ns, s.start_ns),
            );
        }
        if let Err(e) = gzip.write_all(line.as_bytes()) {
            *error = Some(e);
        }
    }

    /// Ends the gzip stream; the first error met while writing, if any.
    pub fn finish(&self) -> Result<(), String> {
        let mut writer = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let finished = writer.gzip.take().map(|gzip| gzip.finish().and_then(|mut out| out.flush()));
        match (writer.error.take(), finished) {
            (Some(e), _) | (None, Some(Err(e))) => Err(format!("cannot write {}: {e}", self.path.display())),
            _ => Ok(()),
        }
    }
}
