//! Records the versions of the toolchain and of the runtime crates, so workers can name them in
//! their `hello` line and the environment can list them.
use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "rustc (unknown version)".into());
    println!("cargo:rustc-env=TASKMETER_RUSTC_VERSION={version}");

    let lock = std::fs::read_to_string("../../Cargo.lock").unwrap_or_default();
    for (krate, var) in [
        ("tokio", "TASKMETER_TOKIO_VERSION"),
        ("smol", "TASKMETER_SMOL_VERSION"),
        ("embassy-executor", "TASKMETER_EMBASSY_EXECUTOR_VERSION"),
        ("embassy-time", "TASKMETER_EMBASSY_TIME_VERSION"),
        ("monoio", "TASKMETER_MONOIO_VERSION"),
        ("glommio", "TASKMETER_GLOMMIO_VERSION"),
        ("compio", "TASKMETER_COMPIO_VERSION"),
    ] {
        println!("cargo:rustc-env={var}={}", locked_version(&lock, krate));
    }
    println!("cargo:rerun-if-changed=../../Cargo.lock");
    println!("cargo:rerun-if-changed=build.rs");
}

fn locked_version(lock: &str, krate: &str) -> String {
    let header = format!("name = \"{krate}\"\n");
    lock.split("[[package]]")
        .find(|block| block.trim_start().starts_with(header.trim_end()) && block.contains(&header))
        .and_then(|block| block.lines().find_map(|l| l.strip_prefix("version = \"")))
        .map(|v| v.trim_end_matches('"').to_string())
        .unwrap_or_else(|| "unknown".into())
}
