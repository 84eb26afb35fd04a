//! Starting a runtime's worker: this executable in worker mode, or a driver program built on
//! first use and cached. `TASKMETER_DRIVER_<RUNTIME>` (upper case, `-` as `_`) names another
//! executable to use instead, e.g. a driver built by hand.

use crate::runtime::{Launch, RuntimeInfo};
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::process::Command;

const C_DRIVER_SOURCE: &str = include_str!("../../../drivers/c/taskmeter_c.c");
const C_FLAGS: &[&str] = &["-O2", "-std=gnu11", "-pthread"];

pub fn override_variable(runtime: &str) -> String {
    format!("TASKMETER_DRIVER_{}", runtime.to_uppercase().replace('-', "_"))
}

/// Why the runtime cannot run here, or Ok.
pub fn availability(info: &RuntimeInfo) -> Result<(), String> {
    if std::env::var_os(override_variable(info.id)).is_some() {
        return Ok(());
    }
    match info.launch {
        Launch::InProcess => Ok(()),
        Launch::CDriver => c_compiler_version().map(|_| ()),
    }
}

/// The command that starts a worker for the runtime, building its driver if needed.
pub fn worker_command(info: &RuntimeInfo) -> Result<Command, String> {
    if let Some(path) = std::env::var_os(override_variable(info.id)) {
        return Ok(Command::new(path));
    }
    match info.launch {
        Launch::InProcess => {
            let exe = std::env::current_exe().map_err(|e| format!("cannot find the taskmeter executable: {e}"))?;
            let mut command = Command::new(exe);
            command.arg("worker");
            Ok(command)
        }
        Launch::CDriver => Ok(Command::new(c_driver()?)),
    }
}

/// The toolchain that builds or runs the runtime's worker, for the environment record.
pub fn toolchain(info: &RuntimeInfo) -> String {
    match info.launch {
        Launch::InProcess => env!("TASKMETER_RUSTC_VERSION").to_string(),
        Launch::CDriver => c_compiler_version().unwrap_or_else(|e| e),
    }
}

fn c_compiler() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".into())
}

fn c_compiler_version() -> Result<String, String> {
    let cc = c_compiler();
    let output = Command::new(&cc)
        .arg("--version")
        .output()
        .map_err(|e| format!("no C compiler: '{cc}' cannot be run ({e}); install gcc or set CC"))?;
    if !output.status.success() {
        return Err(format!("'{cc} --version' failed"));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TASKMETER_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("taskmeter")
}

/// The C driver's executable, compiled once per source and compiler and cached.
fn c_driver() -> Result<PathBuf, String> {
    let version = c_compiler_version()?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (C_DRIVER_SOURCE, C_FLAGS, &version).hash(&mut hasher);
    let dir = cache_dir().join("drivers");
    let exe = dir.join(format!("c-thread-{:016x}", hasher.finish()));
    if exe.is_file() {
        return Ok(exe);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create the cache {}: {e}", dir.display()))?;
    let unique = format!("{}-{}", std::process::id(), crate::clock::now_ns());
    let source = dir.join(format!("taskmeter_c-{unique}.c"));
    let partial = dir.join(format!("c-thread-{unique}.partial"));
    std::fs::write(&source, C_DRIVER_SOURCE).map_err(|e| format!("cannot write {}: {e}", source.display()))?;
    let output = Command::new(c_compiler()).args(C_FLAGS).arg("-o").arg(&partial).arg(&source).output();
    let _ = std::fs::remove_file(&source);
    let output = output.map_err(|e| format!("cannot run the C compiler: {e}"))?;
    if !output.status.success() {
        let _ = std::fs::remove_file(&partial);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr.lines().find(|l| l.contains("error")).unwrap_or("").trim();
        return Err(format!("the C driver did not compile: {first}"));
    }
    // A rename is atomic: concurrent first uses never see a half-written executable.
    std::fs::rename(&partial, &exe).map_err(|e| format!("cannot install the C driver: {e}"))?;
    Ok(exe)
}
