//! `taskmeter bench` as a user meets it: every client against the contract, rates bounded by
//! the work, failures kept per row, refused batches counted, bad flags refused, and no event
//! lost without a count at exit or to a slow collector.

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use taskmeter_record::event::{decode_batch, MAGIC};

mod common;
use common::clients::{assert_contract, assert_silent_without_a_collector, bench_in, build, contract_rows, result};
use common::{assert_refused, stderr, stdout, taskmeter};

const MS: i64 = 1_000_000;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Builds the C, Go and Rust clients' programs; returns where the Go and Rust ones are.
fn build_clients() -> (PathBuf, PathBuf) {
    let repo = repo();
    build(Command::new("make").arg("-s").arg("-C").arg(repo.join("clients/c")));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("clients");
    build(
        Command::new("go")
            .args(["build", "-o"])
            .arg(out.join("go-conformance"))
            .arg("./cmd/conformance")
            .current_dir(repo.join("clients/go")),
    );
    build(
        Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "taskmeter-record", "--example", "conformance"])
            .current_dir(&repo),
    );
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().to_path_buf();
    (out.join("go-conformance"), target.join("debug/examples/conformance"))
}

/// Builds the BEAM clients: the Elixir one (`mix compile`, once per test binary: concurrent builds
/// of one Mix project would race) and the Erlang module alone (`erlc`); returns the folder of the
/// Elixir build's applications (for `ERL_LIBS`) and that of the Erlang module (for `erl -pa`).
fn build_beam_clients() -> (PathBuf, PathBuf) {
    static BUILT: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let elixir = repo().join("clients/elixir");
            build(Command::new("mix").arg("compile").env("MIX_ENV", "dev").current_dir(&elixir));
            let ebin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("clients/erlang");
            std::fs::create_dir_all(&ebin).unwrap();
            build(
                Command::new("erlc")
                    .args(["+warnings_as_errors", "-o"])
                    .arg(&ebin)
                    .arg(repo().join("clients/erlang/src/taskmeter_record.erl")),
            );
            (elixir.join("_build/dev/lib"), ebin)
        })
        .clone()
}

fn bench(args: &[&str], out: &Path) -> (std::process::Output, serde_json::Value) {
    let mut command = taskmeter();
    command.current_dir(repo()).arg("bench").args(args);
    bench_in(command, out)
}

/// Runs a test's `bench` with each window in turn until `started` holds for its record. The
/// programs these tests run start a VM (the BEAM, Python, Node) and some compile a module first:
/// 0.3 s on an idle machine here, but 3 to 13 s beside `stress-ng --cpu 4`. A start slower than the
/// window is the machine's noise, not what the test checks, so it is measured again with a longer
/// window; every check still runs on the record of the last window tried. Returns that window
/// with its output and record.
fn with_growing_window<'w>(
    windows: &[&'w str],
    run: impl Fn(&str) -> (std::process::Output, serde_json::Value),
    started: impl Fn(&serde_json::Value) -> bool,
) -> (&'w str, std::process::Output, serde_json::Value) {
    let (last, earlier) = windows.split_last().expect("one window or more");
    for window in earlier {
        let (output, record) = run(window);
        if output.status.success() && started(&record) {
            return (window, output, record);
        }
        eprintln!("a program had not started within the {window} window: measuring again with a longer one");
    }
    let (output, record) = run(last);
    (last, output, record)
}

/// Whether every row of the record counts at least `units` units in its window.
fn each_counts(record: &serde_json::Value, units: u64) -> bool {
    record["report"]["results"].as_array().is_some_and(|rows| rows.iter().all(|r| r["units"].as_u64() >= Some(units)))
}

#[test]
fn every_client_passes_the_contract() {
    let (go, rust) = build_clients();
    let (elixir_libs, _) = build_beam_clients();
    let programs = [
        ("c", "clients/c/build/conformance".to_string()),
        ("rust", rust.display().to_string()),
        ("go", go.display().to_string()),
        ("python", "python3 clients/python/conformance.py".into()),
        ("node", "node clients/node/conformance.js".into()),
        ("erlang", "escript clients/erlang/conformance.escript".into()),
        ("elixir", format!("ERL_LIBS='{}' elixir clients/elixir/conformance.exs", elixir_libs.display())),
    ];
    let dir = tempfile::tempdir().unwrap();
    let rows = contract_rows(&programs, &repo(), dir.path());
    for (name, _) in &programs {
        assert_contract(name, &rows[*name]);
    }
    // The first window ran every program.
    let report = std::fs::read_to_string(dir.path().join("out-3s/report.txt")).unwrap();
    assert!(report.contains("1 completed with an id never started"), "{report}");
}

#[test]
fn without_a_collector_the_clients_do_nothing() {
    let (go, rust) = build_clients();
    let (elixir_libs, _) = build_beam_clients();
    let repo = repo();
    let commands: Vec<Vec<String>> = vec![
        vec![repo.join("clients/c/build/conformance").display().to_string()],
        vec![rust.display().to_string()],
        vec![go.display().to_string()],
        vec!["python3".into(), "clients/python/conformance.py".into()],
        vec!["node".into(), "clients/node/conformance.js".into()],
        vec!["escript".into(), "clients/erlang/conformance.escript".into()],
        vec!["elixir".into(), "clients/elixir/conformance.exs".into()],
    ];
    for command in commands {
        assert_silent_without_a_collector(
            Command::new(&command[0]).args(&command[1..]).current_dir(&repo).env("ERL_LIBS", &elixir_libs),
        );
    }
}

#[test]
fn a_gap_is_never_shorter_than_the_work_and_inputs_group_the_rows() {
    build_clients();
    let dir = tempfile::tempdir().unwrap();
    let (output, record) = bench(
        &[
            "--scenario",
            "sleeper=clients/c/build/sleeper $TASKMETER_INPUT",
            "--input",
            "short=20",
            "--input",
            "long=60",
            "--warmup",
            "100ms",
            "--duration",
            "700ms",
            "--extended-statistics",
        ],
        &dir.path().join("out"),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("##### With input short #####") && text.contains("##### With input long #####"), "{text}");
    assert!(text.contains("sample size"));
    let results = record["report"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for (r, ms) in results.iter().zip([20, 60]) {
        assert_eq!(r["input"], if ms == 20 { "short" } else { "long" });
        assert!(r["units"].as_u64().unwrap() >= 1, "{r}");
        assert!(r["gap"]["min"].as_i64().unwrap() >= ms * MS, "a unit cannot complete faster than its sleep: {r}");
        assert!(r["delivery"]["streams_without_final"] == 0, "{r}");
    }
    assert_eq!(record["inputs"][1]["value"], "60");
}

#[test]
fn a_failing_or_missing_command_fails_its_own_row() {
    let dir = tempfile::tempdir().unwrap();
    let (output, record) = bench(
        &[
            "--scenario",
            "missing=no-such-command-taskmeter",
            "--scenario",
            "fails=echo boom >&2; exit 3",
            "--scenario",
            "ok=true",
            "--warmup",
            "0",
            "--duration",
            "200ms",
        ],
        &dir.path().join("out"),
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let missing = result(&record, "missing")["error"].as_str().unwrap().to_string();
    assert!(missing.contains("status 127") && missing.contains("not found"), "{missing}");
    assert_eq!(result(&record, "fails")["error"], "`echo boom >&2; exit 3` exited with status 3: boom");
    let ok = result(&record, "ok");
    assert_eq!(ok["error"], serde_json::Value::Null);
    assert!(ok["invocations"].as_u64().unwrap() > 1, "a body that ends early is run again");
    let text = stdout(&output);
    assert!(text.contains("fails: FAILED: `echo boom >&2; exit 3` exited with status 3: boom"), "{text}");
}

#[test]
fn refused_batches_and_cut_streams_are_counted_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let bad = r#"python3 -c "
import os, socket, struct
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
d.sendto(b'XXXX' + bytes(28), os.environ['TASKMETER_RECORD'])
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.environ['TASKMETER_RECORD_STREAM'])
s.sendall(b'TMR1' + struct.pack('<7I', 0, os.getpid(), 0, 0, 0, 4, 0) + bytes(20))
s.close()
" && sleep 0.5"#;
    let (output, record) =
        bench(&["--scenario", &format!("bad={bad}"), "--warmup", "0", "--duration", "200ms"], &dir.path().join("out"));
    assert!(output.status.success(), "{}", stderr(&output));
    let d = &result(&record, "bad")["delivery"];
    assert_eq!(d["malformed_batches"], 2, "{d}");
    // Which of the two sockets the collector reads first is a race: count both, per reason.
    assert_eq!(d["refusals"], serde_json::json!({"bad magic": 1, "stream cut mid-batch": 1}), "{d}");
    assert!(d["first_error"].is_string(), "{d}");
    assert!(
        stdout(&output).contains("2 malformed batches refused (bad magic: 1, stream cut mid-batch: 1)"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn a_thread_still_running_at_exit_loses_nothing() {
    build_clients();
    let dir = tempfile::tempdir().unwrap();
    // A thread records 1000 events and blocks while main returns; 3 more after the exit flush.
    let scenario = "c=clients/c/build/live_thread_at_exit 1000 3 && sleep 0.5";
    let (output, record) =
        bench(&["--scenario", scenario, "--warmup", "0", "--duration", "300ms"], &dir.path().join("out"));
    assert!(output.status.success(), "{}", stderr(&output));
    let d = &result(&record, "c")["delivery"];
    assert_eq!(d["events_received"], 1003, "{d}");
    // The thread's stream, ended at exit, and one new stream per event after it.
    let counts =
        ["streams", "streams_without_final", "events_dropped_by_clients", "batches_missing"].map(|k| d[k].as_u64());
    assert_eq!(counts, [Some(4), Some(0), Some(0), Some(0)], "{d}");
}

#[test]
fn a_final_batch_waits_for_a_collector_whose_queue_is_full() {
    build_clients();
    let (elixir_libs, erlang_ebin) = build_beam_clients();
    let sent = 100;
    // Each program prints a line, then exits, and only at exit sends its final batch: the C
    // program's thread has sent nothing yet; Python's flood has flushed into the full queue, so
    // its events are dropped and the final batch must carry the count. The BEAM's: their batch
    // goes 100 ms after its first event, into the full queue, unless the exit comes first; the
    // final batch then goes at init:stop (Erlang) or at the end of the script (Elixir).
    let erlang = "[taskmeter_record:record() || _ <- lists:seq(1, 100)], \
                  io:format(standard_error, \"recorded~n\", []), init:stop().";
    let elixir = r#"for _ <- 1..100, do: TaskMeter.record()
                    IO.puts(:stderr, "recorded")"#;
    let programs: [&[&str]; 4] = [
        &["clients/c/build/live_thread_at_exit", "100", "0"],
        &["python3", "clients/python/flood.py", "100"],
        &["erl", "-noshell", "-pa", erlang_ebin.to_str().unwrap(), "-eval", erlang],
        &["elixir", "-e", elixir],
    ];
    for program in programs {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("slow.sock");
        let collector = UnixDatagram::bind(&path).unwrap();
        let _filler = taskmeter_record::collector::fill_queue(&path).unwrap();
        let mut child = Command::new(program[0])
            .args(&program[1..])
            .current_dir(repo())
            .env("TASKMETER_RECORD", &path)
            .env("ERL_LIBS", &elixir_libs)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (mut stderr, mut line) = (BufReader::new(child.stderr.take().unwrap()), String::new());
        stderr.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "{program:?} said nothing");
        std::thread::sleep(Duration::from_millis(100)); // the collector reads late
        collector.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let (mut received, mut dropped, mut buffer) = (0, 0, vec![0u8; 1 << 17]);
        loop {
            let n = collector.recv(&mut buffer).expect("the final batch within 10 s");
            if !buffer[..n].starts_with(&MAGIC) {
                continue; // the filler
            }
            let (header, events) = decode_batch(&buffer[..n]).unwrap();
            received += events.len() as u64;
            dropped += u64::from(header.dropped);
            if header.is_final() {
                break;
            }
        }
        assert!(child.wait().unwrap().success(), "{program:?}");
        assert_eq!(received + dropped, sent, "{program:?}: every event received or counted as dropped");
    }
}

#[test]
fn a_body_still_running_after_the_drain_is_stopped_and_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let (output, record) = bench(
        &["--scenario", "endless=sleep 60", "--warmup", "0", "--duration", "100ms", "--drain", "100ms"],
        &dir.path().join("out"),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let r = result(&record, "endless");
    assert_eq!(r["invocations"], 1);
    assert!(r["notes"][0].as_str().unwrap().contains("was stopped"), "{r}");
}

#[test]
fn bad_flags_are_one_line_and_exit_2() {
    assert_refused(&[
        (vec!["bench", "--scenari", "a=true"], "unexpected argument '--scenari'"),
        (vec!["bench", "--scenario", "noequals"], "'noequals' is not NAME=VALUE"),
        (vec!["bench", "--scenario", "a=true", "--scenario", "a=false"], "the scenario name 'a' is given twice"),
        (vec!["bench", "--scenario", "a=true", "--duration", "0"], "must be longer than 0"),
        (vec!["bench", "--scenario", "a=true", "--warmup", "soon"], "invalid duration"),
        (vec!["bench"], "--scenario"),
    ]);
}

#[test]
fn the_documented_python_example_runs_as_written() {
    let page = std::fs::read_to_string(repo().join("docs/experiments.md")).unwrap();
    let start = page.find("# work.py").expect("the example in docs/experiments.md");
    let program = &page[start..start + page[start..].find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("work.py"), program).unwrap();
    let run = |window: &str| {
        let mut command = taskmeter();
        command.current_dir(dir.path()).env("PYTHONPATH", repo().join("clients/python"));
        command.args([
            "bench",
            "--scenario",
            "case_100_ms=python3 work.py 0.1",
            "--warmup",
            "100ms",
            "--duration",
            window,
        ]);
        bench_in(command, &dir.path().join(format!("out-{window}")))
    };
    let (_, output, record) = with_growing_window(&["700ms", "5s", "30s"], run, |record| each_counts(record, 1));
    assert!(output.status.success(), "{}", stderr(&output));
    let r = result(&record, "case_100_ms");
    assert_eq!(r["invocations"], 1, "the program loops while running() and ends on its own");
    assert!(r["units"].as_u64().unwrap() >= 1);
    assert!(r["gap"]["min"].as_i64().unwrap() >= 100 * MS, "{r}");
    assert!(stdout(&output).contains("case_100_ms"));
}

#[test]
fn the_beam_clients_end_their_stream_at_every_exit_the_beam_lets_them_see() {
    let (elixir_libs, erlang_ebin) = build_beam_clients();
    let (libs, ebin) = (elixir_libs.display(), erlang_ebin.display());
    // Never a flush: the end of an `elixir` script (System.at_exit/1), init:stop/0 (the server
    // under kernel_safe_sup is shut down), and the SIGTERM that stops a body still running after
    // the drain (the BEAM's own handler calls init:stop/0). The last one records every
    // millisecond from a process of no application, which still runs after the server's final
    // batch: each of its later events goes on its own, as the final batch of a new stream.
    let erl = format!("erl -noshell -pa '{ebin}' -eval");
    let scenarios = [
        format!("script_end=ERL_LIBS='{libs}' elixir -e 'TaskMeter.record(); TaskMeter.record_n(3)' && sleep 60"),
        format!("init_stop={erl} 'taskmeter_record:start(1), taskmeter_record:complete(1), init:stop().' && sleep 60"),
        format!("sigterm=exec {erl} 'L = fun L() -> taskmeter_record:record(), timer:sleep(1), L() end, L().'"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let run = |window: &str| {
        let mut args = vec!["--warmup", "0", "--duration", window, "--drain", "100ms"];
        for scenario in &scenarios {
            args.extend(["--scenario", scenario]);
        }
        bench(&args, &dir.path().join(format!("out-{window}")))
    };
    // Started: every scenario has done its work within the window, and the last one has recorded
    // for a while. An `elixir` boot on a loaded machine can take longer than the first window.
    let started = |record: &serde_json::Value| {
        result(record, "script_end")["units"].as_u64() >= Some(4)
            && result(record, "init_stop")["units"].as_u64() >= Some(1)
            && result(record, "sigterm")["units"].as_u64() > Some(100)
    };
    let (_, output, record) = with_growing_window(&["2s", "8s", "30s"], run, started);
    assert!(output.status.success(), "{}", stderr(&output));
    for (name, events) in [("script_end", Some(2)), ("init_stop", Some(2)), ("sigterm", None)] {
        let r = result(&record, name);
        assert_eq!(r["error"], serde_json::Value::Null, "{name}: {r}");
        let d = &r["delivery"];
        let counts = ["streams_without_final", "events_dropped_by_clients", "batches_missing", "malformed_batches"]
            .map(|k| d[k].as_u64());
        assert_eq!(counts, [Some(0); 4], "{name}: {d}");
        if let Some(events) = events {
            assert_eq!((d["events_received"].as_u64(), d["streams"].as_u64()), (Some(events), Some(1)), "{name}: {d}");
        }
    }
    assert_eq!(result(&record, "script_end")["units"], 4);
    assert_eq!(result(&record, "init_stop")["latency"]["count"], 1);
    let sigterm = result(&record, "sigterm");
    assert!(sigterm["units"].as_u64().unwrap() > 100, "{sigterm}");
    assert!(sigterm["notes"][0].as_str().unwrap().contains("was stopped"), "{sigterm}");
}

#[test]
fn the_documented_elixir_example_and_the_erlang_sleeper_run_as_written() {
    let (elixir_libs, _) = build_beam_clients();
    let page = std::fs::read_to_string(repo().join("docs/experiments.md")).unwrap();
    let start = page.find("# work.exs").expect("the Elixir example in docs/experiments.md");
    let program = &page[start..start + page[start..].find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("work.exs"), program).unwrap();
    let sleeper = repo().join("clients/erlang/examples/sleeper.escript");
    let erlang = format!("erlang=escript '{}' 100", sleeper.display());
    let run = |window: &str| {
        let mut command = taskmeter();
        command.current_dir(dir.path()).env("ERL_LIBS", &elixir_libs);
        command.args(["bench", "--scenario", "case_100_ms=elixir work.exs 100", "--scenario", &erlang]);
        command.args(["--warmup", "100ms", "--duration", window, "--extended-statistics"]);
        bench_in(command, &dir.path().join(format!("out-{window}")))
    };
    let (_, output, record) = with_growing_window(&["2s", "8s", "30s"], run, |record| each_counts(record, 1));
    assert!(output.status.success(), "{}", stderr(&output));
    for name in ["case_100_ms", "erlang"] {
        let r = result(&record, name);
        assert_eq!(r["invocations"], 1, "{name}: the program loops while running() and ends on its own");
        assert!(r["units"].as_u64().unwrap() >= 1, "{name}: {r}");
        assert!(r["gap"]["min"].as_i64().unwrap() >= 100 * MS, "{name}: {r}");
        // The Elixir script ends without a flush: the client's System.at_exit/1 handler sends
        // the final batch.
        assert_eq!(r["delivery"]["streams_without_final"], 0, "{name}: {r}");
    }
    let text = stdout(&output);
    assert!(text.contains("case_100_ms") && text.contains("sample size"), "{text}");
}
