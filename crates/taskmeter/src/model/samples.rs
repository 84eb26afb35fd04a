//! The samples file of a results folder (`--raw`): its name and columns, and how to read it.

use std::fs::File;
use std::path::{Path, PathBuf};

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
