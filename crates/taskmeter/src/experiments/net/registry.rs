//! The receivers `run net` knows, and how to start each (receivers/README.md).

use std::path::{Path, PathBuf};
use std::process::Command;
use taskmeter_measure::process::child::{output, BUILD_LIMIT, PROBE_LIMIT};
use taskmeter_measure::runtimes::drivers;

/// (id, what it is), in the default order.
pub const RECEIVERS: [(&str, &str); 6] = [
    ("thread", "Rust std, one OS thread per connection"),
    ("tokio-mt", "tokio multi-threaded runtime, one task per connection"),
    ("c-thread", "C pthreads, one thread per connection"),
    ("go", "Go, one goroutine per connection"),
    ("wasm-thread", "a wasm32-wasip1-threads guest (one thread per connection) on wasmtime 46 with wasi-threads"),
    ("wasm-go", "a GOOS=wasip1 Go guest on wazero (one OS thread)"),
];

pub fn ids() -> Vec<&'static str> {
    RECEIVERS.iter().map(|r| r.0).collect()
}

pub fn check_id(text: &str) -> Result<String, String> {
    match RECEIVERS.iter().find(|r| r.0 == text) {
        Some(r) => Ok(r.0.to_string()),
        None => Err(taskmeter_console::names::unknown("receiver", text, &ids())),
    }
}

/// The command that starts the receiver (building it on first use), or why it cannot run here.
/// `TASKMETER_RECEIVER_<ID>` (upper case, `-` as `_`) names another executable to use instead.
pub fn command(id: &str) -> Result<Command, String> {
    if let Some(path) = std::env::var_os(override_variable(id)) {
        return Ok(Command::new(path));
    }
    match id {
        "thread" | "tokio-mt" => {
            let exe = std::env::current_exe().map_err(|e| format!("cannot find the taskmeter executable: {e}"))?;
            let mut command = Command::new(exe);
            command.args(["net-receiver", id]);
            Ok(command)
        }
        "c-thread" | "go" => receiver_program(id)?.command(),
        "wasm-thread" => wasm_thread(),
        "wasm-go" => wasm_go(),
        other => Err(format!("unknown receiver '{other}'")),
    }
}

/// A receiver built from its folder's manifest (receivers/ID/driver.toml).
fn receiver_program(id: &str) -> Result<&'static drivers::Program, String> {
    drivers::program("receivers", id)
        .ok_or_else(|| format!("the {id} receiver (receivers/{id}/driver.toml) is missing"))
}

fn program_toolchain(id: &str) -> Result<String, String> {
    drivers::toolchain(&receiver_program(id)?.manifest.toolchain).map(|t| t.version)
}

fn override_variable(id: &str) -> String {
    format!("TASKMETER_RECEIVER_{}", id.to_uppercase().replace('-', "_"))
}

/// Whether the receiver can run here (without building it), or why not.
pub fn availability(id: &str) -> Result<(), String> {
    if std::env::var_os(override_variable(id)).is_some() {
        return Ok(());
    }
    match id {
        "thread" | "tokio-mt" => Ok(()),
        "wasm-thread" => source_dir().and_then(|_| rust_target_installed(WASM_THREAD_TARGET)),
        "wasm-go" => source_dir().and_then(|_| toolchain("go")).map(|_| ()),
        other => toolchain(other).map(|_| ()),
    }
}

/// The toolchain a receiver is built or run with, for the environment record.
pub fn toolchain(id: &str) -> Result<String, String> {
    match id {
        "thread" | "tokio-mt" => Ok(taskmeter_worker::runtime::RUSTC_VERSION.to_string()),
        "c-thread" | "go" => program_toolchain(id),
        "wasm-go" => program_toolchain("go"),
        _ => Ok(taskmeter_worker::runtime::RUSTC_VERSION.to_string()),
    }
}

/// The Rust target the wasm-thread guest is built for.
const WASM_THREAD_TARGET: &str = "wasm32-wasip1-threads";

/// Whether rustup (or the toolchain) has the standard library of `target`, or the one command
/// that adds it.
fn rust_target_installed(target: &str) -> Result<(), String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let mut command = Command::new(&rustc);
    command.args(["--print", "sysroot"]);
    let output = output(command, "toolchain", PROBE_LIMIT)
        .map_err(|e| format!("no Rust toolchain to build the guest ('{rustc}' cannot be run: {e})"))?;
    let sysroot = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if output.status.success() && Path::new(&sysroot).join("lib/rustlib").join(target).join("lib").is_dir() {
        Ok(())
    } else {
        Err(format!("the Rust target {target} is not installed (add it with `rustup target add {target}`)"))
    }
}

/// The source tree the WebAssembly receivers are built from: `TASKMETER_SOURCE_DIR`, or the
/// tree this taskmeter was built in.
fn source_dir() -> Result<PathBuf, String> {
    let dir = std::env::var_os("TASKMETER_SOURCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
    let dir = dir.canonicalize().unwrap_or(dir);
    if dir.join("receivers/wasm-thread/host/Cargo.toml").is_file() {
        Ok(dir)
    } else {
        Err(format!("the WebAssembly receivers are built from taskmeter's source tree, not found at {} (set TASKMETER_SOURCE_DIR)", dir.display()))
    }
}

/// Runs `cargo build` once per taskmeter process; the build itself is incremental.
fn cargo_build(dir: &Path, args: &[&str], target_dir: &Path, what: &str) -> Result<(), String> {
    taskmeter_console::errln!("building {what} (the first time takes minutes) ...");
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.args(["build", "--release", "--quiet"]).args(args).env("CARGO_TARGET_DIR", target_dir).current_dir(dir);
    let output = output(command, "build", BUILD_LIMIT).map_err(|e| format!("cannot run cargo to build {what}: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let first = stderr.lines().find(|l| l.contains("error")).or(stderr.lines().next()).unwrap_or("").trim().to_string();
    Err(format!("{what} did not build: {first}"))
}

fn wasm_thread() -> Result<Command, String> {
    let source = source_dir()?;
    rust_target_installed(WASM_THREAD_TARGET)?;
    let target = source.join("target");
    static BUILT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            cargo_build(
                &source.join("receivers/wasm-thread/guest"),
                &["--target", WASM_THREAD_TARGET],
                &target.join("wasm-guest"),
                "the wasm-thread guest",
            )?;
            cargo_build(
                &source.join("receivers/wasm-thread/host"),
                &[],
                &target.join("wasm-host"),
                "the wasmtime host (taskmeter-wasm)",
            )
        })
        .clone()?;
    let guest = target.join("wasm-guest/wasm32-wasip1-threads/release/wasm-thread-receiver.wasm");
    let mut command = Command::new(target.join("wasm-host/release/taskmeter-wasm"));
    command.arg(guest);
    Ok(command)
}

fn wasm_go() -> Result<Command, String> {
    let source = source_dir()?;
    let out = source.join("target/wasm-go");
    static BUILT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            // The guest is the go receiver itself, built for WASI.
            go_build(
                &source.join("receivers/go"),
                &out.join("receiver.wasm"),
                &[("GOOS", "wasip1"), ("GOARCH", "wasm")],
                "the wasm-go guest",
            )?;
            go_build(
                &source.join("receivers/wasm-go/host"),
                &out.join("wasm-go-host"),
                &[],
                "the wazero host of wasm-go",
            )
        })
        .clone()?;
    let mut command = Command::new(out.join("wasm-go-host"));
    command.arg(out.join("receiver.wasm"));
    Ok(command)
}

fn go_build(dir: &Path, output: &Path, env: &[(&str, &str)], what: &str) -> Result<(), String> {
    program_toolchain("go")?;
    let mut command = Command::new("go");
    command
        .args(["build", "-o"])
        .arg(output)
        .arg(".")
        .envs(env.iter().copied())
        .env("GOFLAGS", "-mod=mod")
        .current_dir(dir);
    let built = taskmeter_measure::process::child::output(command, "build", BUILD_LIMIT)
        .map_err(|e| format!("cannot run go to build {what}: {e}"))?;
    if built.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&built.stderr);
    Err(format!("{what} did not build: {}", stderr.lines().next().unwrap_or("").trim()))
}
