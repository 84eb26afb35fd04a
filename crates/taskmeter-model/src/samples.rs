//! The samples file of a results folder (`--raw`): its name and columns, how a run writes it (every
//! sample appended to `samples.csv.gz` as the workers send them: gzip, so a long run fits on disk;
//! `zcat` or `taskmeter report DIR --samples-csv FILE` gives the plain CSV, one line per sample with
//! its timestamps and metrics), and how to read it.

use flate2::write::GzEncoder;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use taskmeter_protocol::SampleView;

pub const FILE: &str = "samples.csv.gz";

/// `full_ns` is empty for a sample that follows lost ones (it has no previous wake).
pub const HEADER: &str = "runtime,point,repetition,unit,period,phase,expected_ns,start_ns,busy_end_ns,intended_ns,wake_ns,missed,lateness_ns,actual_ns,full_ns,busy_ns";

/// A samples file being read: its path and its lines, decompressed.
pub type Opened = (PathBuf, Box<dyn std::io::BufRead>);

/// Reads a results folder's samples: `samples.csv.gz`, or a plain `samples.csv`; None without.
pub fn open(folder: &Path) -> Result<Option<Opened>, String> {
    let gz = folder.join(FILE);
    if let Ok(file) = File::open(&gz) {
        return Ok(Some((gz, Box::new(std::io::BufReader::new(flate2::read::GzDecoder::new(file))))));
    }
    let plain = folder.join("samples.csv");
    match File::open(&plain) {
        Ok(file) => Ok(Some((plain, Box::new(std::io::BufReader::new(file))))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", plain.display())),
    }
}

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
            let full = v.previous_wake_ns().map(|p| diff(s.wake_ns, p).to_string()).unwrap_or_default();
            let _ = writeln!(
                line,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{full},{}",
                row.runtime,
                row.point,
                row.repetition,
                v.unit(),
                s.period,
                if v.measured() { "measure" } else { "warmup" },
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
