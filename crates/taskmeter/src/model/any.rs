//! Any record, read by the schema its header names (`taskmeter report` and `compare` take a
//! folder of any kind).

use super::header::{from_value, schema_of, LoadError, Record};
use super::{bench::BenchRecord, granularity::GrainRecord, net::NetRecord, run::RunRecord};
use std::path::{Path, PathBuf};

/// Any record, as its kind.
pub enum AnyRecord {
    Run(RunRecord),
    Net(NetRecord),
    Bench(BenchRecord),
    Granularity(GrainRecord),
}

/// Reads whichever record `path` holds, by the schema its header names.
pub fn load_any(path: &Path) -> Result<(PathBuf, AnyRecord), LoadError> {
    let (file, schema, value) = schema_of(path)?;
    let record = match schema.as_str() {
        RunRecord::SCHEMA => AnyRecord::Run(from_value(file.clone(), &schema, value)?),
        NetRecord::SCHEMA => AnyRecord::Net(from_value(file.clone(), &schema, value)?),
        BenchRecord::SCHEMA => AnyRecord::Bench(from_value(file.clone(), &schema, value)?),
        GrainRecord::SCHEMA => AnyRecord::Granularity(from_value(file.clone(), &schema, value)?),
        _ => return Err(LoadError::NotARecord(file)),
    };
    Ok((file, record))
}
