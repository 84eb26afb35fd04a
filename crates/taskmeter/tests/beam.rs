//! The BEAM driver's own choices, beyond what `check-driver` checks for every runtime: the VM
//! each row starts (its flags come from the plan, which drivers/erlang/taskmeter_beam.sh reads
//! before it starts the VM), where its writer runs, and how the memory room bounds its units.

mod common;
use common::*;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Each row's VM: beam on every scheduler, beam-1 on one, a knob recipe's row with its flag; the
/// writer is the driver's (an Erlang process), found by the name of the thread its writes run on.
#[test]
fn each_beam_row_starts_the_vm_its_plan_needs() {
    if available(&["beam", "beam-1"]).len() < 2 {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("beam");
    let rows = "beam,beam-1,beam/sbwt-none,beam/sbwt-very-long,beam-1/swt-very-low";
    let args = ["run", "--runtimes", rows, "--units", "2", "--duration", "100ms", "--warmup", "0", "--no-history"];
    let output = run(&[&args[..], &["-o", folder.to_str().unwrap()]].concat());
    assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
    let record = run_json(&folder);
    let cpus = std::thread::available_parallelism().unwrap().get();
    for row in record["rows"].as_array().unwrap() {
        let runtime = row["runtime"].as_str().unwrap();
        assert_eq!(row["status"], "ok", "{runtime}: {row}");
        let version = row["worker"]["runtime_version"].as_str().unwrap();
        assert!(version.starts_with("Erlang/OTP "), "{runtime}: {version}");
        let (schedulers, flags) = match runtime {
            "beam" => (cpus, ""),
            "beam-1" => (1, "+S 1:1"),
            "beam/sbwt-none" => (cpus, "+sbwt none"),
            "beam/sbwt-very-long" => (cpus, "+sbwt very_long"),
            _ => (1, "+S 1:1 +swt very_low"),
        };
        assert!(version.contains(&format!("schedulers {schedulers} of ")), "{runtime}: {version}");
        assert!(version.contains(&format!(", {flags}")), "{runtime}: {version}");
        assert_eq!(version.contains("+S 1:1"), runtime.starts_with("beam-1"), "{runtime}: {version}");
        let writer = taskmeter_measure::runtimes::find(runtime).unwrap().writer;
        assert!(writer.is_some_and(|w| w.contains("tm-writer")), "{runtime}");
        assert_eq!(row["worker"]["writer"].as_str(), writer, "{runtime}");
        let harness = row["worker"]["harness_sched"].as_str().unwrap();
        assert!(harness.contains(", writer ") && !harness.contains("not found"), "{runtime}: {harness}");
    }
}

/// The driver compiled from the source folder into `dir` (the launcher runs it from there).
fn compiled(dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../drivers/erlang");
    let out = Command::new("erlc").arg("-o").arg(dir).arg(source.join("taskmeter_driver.erl")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    source.join("taskmeter_beam.sh")
}

/// The frames a worker wrote to stdout, as (kind, payload), and its exit status.
fn worker(dir: &Path, plan: &serde_json::Value) -> (Vec<(u8, serde_json::Value)>, Option<i32>) {
    let launcher = compiled(dir);
    let samples = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("samples")).unwrap();
    let mut command = Command::new("sh");
    command.arg(launcher).arg("erl").arg(dir).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let fd = std::os::fd::AsRawFd::as_raw_fd(&samples);
    // SAFETY: dup2 and fcntl are async-signal-safe. fd 3 becomes the sample file, open for
    // appending, without FD_CLOEXEC (dup2 clears it; the file may be fd 3 already).
    unsafe {
        command.pre_exec(move || {
            let done = if fd == 3 { libc::fcntl(3, libc::F_SETFD, 0) } else { libc::dup2(fd, 3) };
            if done < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, format!("{plan}\n").as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap(); // stdin stays open until the worker has ended
    drop(stdin);
    let mut frames = Vec::new();
    let mut rest = &output.stdout[..];
    while rest.len() >= 5 {
        let len = u32::from_le_bytes(rest[1..5].try_into().unwrap()) as usize;
        let payload = serde_json::from_slice(&rest[5..5 + len]).unwrap_or(serde_json::Value::Null);
        frames.push((rest[0], payload));
        rest = &rest[5 + len..];
    }
    assert!(rest.is_empty(), "whole frames: {}", String::from_utf8_lossy(&output.stderr));
    (frames, output.status.code())
}

fn vector(runtime: &str) -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../protocol/vectors/plans/relative-fixed.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap().replace("RUNTIME", runtime)).unwrap()
}

fn frame(frames: &[(u8, serde_json::Value)], kind: u8) -> &serde_json::Value {
    &frames.iter().find(|(k, _)| *k == kind).unwrap_or_else(|| panic!("a {} frame in {frames:?}", kind as char)).1
}

/// The BEAM aborts when memory runs out, so the driver starts no more units than half the plan's
/// memory room holds (6 KiB a unit and twice its ring): a partial start that says why, or, with
/// no room for one unit, an E frame. The process table (+P) grows with the plan's units.
#[test]
fn the_memory_room_bounds_the_units_and_the_process_table() {
    if available(&["beam"]).is_empty() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let per_unit = 6144 + 2 * 32 * 1024; // the vector's ring holds 1024 samples
    let mut plan = vector("beam");
    plan["units"] = 40.into();
    plan["room_memory_bytes"] = (2 * per_unit * 10 + 1000).into();
    let (frames, status) = worker(dir.path(), &plan);
    assert_eq!(status, Some(0));
    let gate = frame(&frames, b'G');
    assert_eq!(gate["units"], 10, "{gate}");
    let why = gate["start_error"].as_str().unwrap();
    assert!(why.starts_with("beam stops at 10 units: the VM aborts when it runs out of memory"), "{why}");
    assert!(why.contains("MemAvailable (4096 MiB)"), "{why}");
    assert_eq!(frames.iter().filter(|(k, _)| *k == b'U').count(), 10);

    plan["room_memory_bytes"] = 1000.into();
    let (frames, status) = worker(dir.path(), &plan);
    assert_eq!(status, Some(1));
    let message = frame(&frames, b'E')["message"].as_str().unwrap().to_string();
    assert!(message.starts_with("cannot start unit 1: beam stops at 0 units"), "{message}");

    // 300,000 units in 8 GiB: a table of 301,024 (the default holds 262,144); one unit starts.
    (plan["units"], plan["room_memory_bytes"], plan["start_limit_ns"]) =
        (300_000.into(), (8u64 << 30).into(), 1.into());
    let (frames, status) = worker(dir.path(), &plan);
    assert_eq!(status, Some(0));
    let version = frame(&frames, b'H')["runtime_version"].as_str().unwrap().to_string();
    assert!(version.ends_with(", +P 301024"), "{version}");
    assert_eq!(frame(&frames, b'G')["units"], 1);
}

/// A knob's recipe needs its flag, which only the launcher gives: the driver started without it
/// (by hand, without taskmeter_beam.sh's plan) refuses the plan rather than measure another VM.
#[test]
fn a_knob_recipe_without_its_flag_is_refused() {
    if available(&["beam"]).is_empty() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    compiled(dir.path());
    let mut plan = vector("beam");
    (plan["mode"], plan["wait"]) = ("absolute".into(), "sbwt-none".into());
    let output = Command::new("erl")
        .args(["-noinput", "-pa"])
        .arg(dir.path())
        .args(["-s", "taskmeter_driver", "main"])
        .env("TASKMETER_PLAN", plan.to_string())
        .env("TASKMETER_BEAM_FLAGS", "+P 262144")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(output.stdout[0], b'E');
    let said = String::from_utf8_lossy(&output.stdout[5..]).into_owned();
    assert!(said.contains("the recipe sbwt-none needs the VM started with +sbwt none"), "{said}");
}
