//! The fault suite: what happens to real runs (signals at each phase of each command, workers
//! that crash, hang, flood or leave helpers behind, results folders that cannot be used or stop
//! being usable, broken stdout), each checked for its exit status, what is on disk, the reason
//! given, and that no process is left behind. "When things go wrong" (docs/troubleshooting.md) is the contract:
//! [`CONTRACT`] names the test that checks each of its sentences, and a test holds the two
//! together. No timing is asserted beyond bounds no loaded machine reaches.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{run_json, taskmeter, Background, Finished};

/// Each sentence of "When things go wrong" in docs/troubleshooting.md (its first words) and the tests that check it.
const CONTRACT: &[(&str, &[&str])] = &[
    ("Bad flags or values", &["bad_input_is_one_line_even_for_a_huge_value"]),
    ("An output folder that cannot be used", &["an_unusable_output_folder_is_refused_before_anything_runs"]),
    ("A failure that is not the input's", &["a_failure_that_is_not_the_inputs_is_one_line_and_exit_1"]),
    ("A file asked for that cannot be written", &["a_file_that_cannot_be_written_is_one_line_and_exit_3"]),
    (
        "A results folder that stops being usable",
        &[
            "a_results_folder_removed_during_the_run_goes_to_a_fallback",
            "a_results_folder_filled_during_the_run_goes_to_a_fallback_beside_it",
            "a_full_disk_during_the_run_goes_to_a_fallback",
        ],
    ),
    ("A broken stdout", &["a_full_or_closed_stdout_never_panics_and_the_folder_is_written"]),
    (
        "A worker that breaks the protocol",
        &[
            "a_worker_that_floods_is_stopped_at_once",
            "a_worker_that_breaks_the_protocol_or_hangs_fails_with_the_reason",
        ],
    ),
    (
        "A worker that dies, is killed or hangs before",
        &["a_worker_killed_in_its_warm_up_fails_its_row", "a_worker_stopped_for_good_fails_its_row_at_its_deadline"],
    ),
    ("A worker that crashes or is killed *while*", &["a_worker_killed_mid_run_leaves_a_partial_row_with_its_samples"]),
    (
        "A thread limit reached",
        &[
            "a_thread_limit_makes_a_partial_row_with_the_reason",
            "a_thread_limit_taskmeter_itself_reaches_fails_the_row_without_a_panic",
        ],
    ),
    (
        "A worker that leaves a process holding its output",
        &["a_helper_holding_the_workers_output_does_not_hold_the_run"],
    ),
    (
        "SIGINT (Ctrl-C), SIGTERM",
        &[
            "each_signal_keeps_what_was_measured_and_exits_128_plus_its_number",
            "a_signal_stops_every_command_that_starts_processes",
        ],
    ),
    (
        "A worker that does not stop when asked",
        &["a_worker_that_ignores_the_stop_is_killed_after_its_grace_or_at_a_second_signal"],
    ),
    ("`kill -9 taskmeter`", &["kill_9_leaves_no_process_behind"]),
    ("`check-driver`", &["check_driver_fails_every_abuse_within_its_bound"]),
    (
        "`report` and `compare`",
        &[
            "a_run_record_that_does_not_hold_together_is_refused_one_line_per_problem",
            "net_granularity_and_bench_records_with_a_duplicated_entry_are_refused",
        ],
    ),
    ("A runtime whose toolchain is missing", &["an_unavailable_runtime_is_skipped_with_a_warning"]),
    (
        "More units than the machine",
        &[
            "a_thread_limit_makes_a_partial_row_with_the_reason",
            "every_os_thread_runtime_stops_at_the_machines_limit_with_a_partial_row",
        ],
    ),
];

/// A shell script standing in for a worker, driver or receiver.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn row<'a>(record: &'a serde_json::Value, runtime: &str) -> &'a serde_json::Value {
    record["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["runtime"] == runtime)
        .unwrap_or_else(|| panic!("no row for {runtime}"))
}

fn no_partial_folder_in(dir: &Path) {
    let partial: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".partial-"))
        .collect();
    assert!(partial.is_empty(), "a half-written folder is left: {partial:?}");
}

/// The exit status of a command that failed, and the one line it said on stderr (joined again
/// where the width wrapped it).
fn refused(output: &std::process::Output) -> (Option<i32>, String) {
    let said = common::unwrapped(&common::stderr(output));
    assert_eq!(said.lines().count(), 1, "one line: {said}");
    assert!(common::stdout(output).is_empty(), "nothing on stdout: {said}");
    (output.status.code(), said.trim_end().to_string())
}

#[test]
fn when_things_go_wrong_is_the_contract_of_this_suite() {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/troubleshooting.md")).unwrap();
    let section = page.split("\n## When things go wrong").nth(1).expect("docs/troubleshooting.md has the section");
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let sentences: Vec<&str> = section.lines().filter_map(|l| l.strip_prefix("- ")).collect();
    assert!(!sentences.is_empty());
    for sentence in &sentences {
        assert!(
            CONTRACT.iter().any(|(start, _)| sentence.starts_with(start)),
            "sentence of docs/troubleshooting.md without a test in CONTRACT: {sentence}"
        );
    }
    for (start, _) in CONTRACT {
        assert!(
            sentences.iter().any(|s| s.starts_with(start)),
            "CONTRACT names a sentence docs/troubleshooting.md does not have: {start}"
        );
    }
    // Every test named exists among the integration tests.
    let tests: String = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    for name in CONTRACT.iter().flat_map(|(_, tests)| tests.iter()) {
        assert!(tests.contains(&format!("#[test]\nfn {name}()")), "no test {name}");
    }
}

#[test]
fn each_signal_keeps_what_was_measured_and_exits_128_plus_its_number() {
    for (signal, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM"), (libc::SIGHUP, "SIGHUP")] {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("run");
        let run = Background::start(
            &[
                "run",
                "--runtimes",
                "thread,smol",
                "--order",
                "given",
                "--duration",
                "30s",
                "--warmup",
                "0",
                "-o",
                folder.to_str().unwrap(),
            ],
            &[],
        );
        run.wait_for_child("worker");
        // However loaded the machine, units sleeping 1 ms make samples within seconds.
        std::thread::sleep(Duration::from_millis(2000));
        run.signal(signal);
        let done = run.finish();
        assert_eq!(done.status.code(), Some(128 + signal), "{name}: {}", done.stderr);
        assert!(done.stderr.contains(&format!("interrupted by {name}")), "{name}: {}", done.stderr);
        let record = run_json(&folder);
        assert_eq!(record["complete"], false);
        assert_eq!(record["incomplete_reason"], format!("interrupted by {name}"));
        let thread = row(&record, "thread");
        assert_eq!(thread["status"], "interrupted", "{name}: {thread}");
        assert!(thread["reason"].as_str().unwrap().contains(&format!("interrupted by {name}")));
        assert!(
            thread["counts"]["samples_measured"].as_u64().unwrap() > 0,
            "{name}: the samples before the signal are kept"
        );
        assert_eq!(row(&record, "smol")["status"], "skipped");
        assert_eq!(row(&record, "smol")["reason"], format!("not run: interrupted by {name}"));
        no_partial_folder_in(dir.path());
    }
}

#[test]
fn a_worker_that_ignores_the_stop_is_killed_after_its_grace_or_at_a_second_signal() {
    let dir = tempfile::tempdir().unwrap();
    let asked = dir.path().join("asked");
    // It notes the request to stop (end of file on its stdin), then goes on as if nothing came.
    let deaf =
        script(dir.path(), "deaf", &format!("read plan; cat >/dev/null; touch {}; exec sleep 600", asked.display()));
    for (second, expected) in
        [(false, "did not stop within 2.0 s and was killed"), (true, "was killed at a second signal")]
    {
        let _ = std::fs::remove_file(&asked);
        let folder = dir.path().join(format!("run-{second}"));
        let run = Background::start(
            &["run", "--runtimes", "thread", "--duration", "1s", "-o", folder.to_str().unwrap()],
            &[("TASKMETER_DRIVER_THREAD", &deaf)],
        );
        run.wait_for_child("deaf");
        run.signal(libc::SIGINT);
        if second {
            let since = Instant::now();
            while !asked.exists() {
                assert!(since.elapsed() < Duration::from_secs(60), "the worker was never asked to stop");
                std::thread::sleep(Duration::from_millis(10));
            }
            run.signal(libc::SIGINT);
        }
        let done = run.finish();
        assert_eq!(done.status.code(), Some(130), "{}", done.stderr);
        let record = run_json(&folder);
        let thread = row(&record, "thread");
        assert_eq!(thread["status"], "interrupted");
        let reason = thread["reason"].as_str().unwrap();
        assert!(reason.starts_with("interrupted by SIGINT; the worker") && reason.contains(expected), "{reason}");
        assert!(!reason.contains("did not finish within"), "a signal is not a deadline: {reason}");
    }
}

#[test]
fn a_signal_stops_every_command_that_starts_processes() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    // granularity: its worker stops after the round it is in; the task sizes done are kept.
    let (granularity, net, bench) = (path("granularity"), path("net"), path("bench"));
    let run = Background::start(
        &[
            "run",
            "granularity",
            "--runtimes",
            "thread",
            "--task-busy",
            "10ms..1us:10",
            "--duration",
            "2s",
            "-o",
            &granularity,
        ],
        &[],
    );
    run.wait_for_child("worker");
    std::thread::sleep(Duration::from_millis(1000));
    run.signal(libc::SIGTERM);
    let done = run.finish();
    assert_eq!(done.status.code(), Some(143), "{}", done.stderr);
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(Path::new(&granularity).join("granularity.json")).unwrap())
            .unwrap();
    assert_eq!(record["complete"], false);
    assert_eq!(record["runs"][0]["interrupted"], true);
    assert!(record["runs"][0]["error"].as_str().unwrap().contains("interrupted by SIGTERM"));

    // run net: a long point stops within a message.
    let run = Background::start(
        &["run", "net", "--receivers", "thread", "--senders", "2", "--messages", "100000000", "-o", &net],
        &[],
    );
    run.wait_for_child("net-receiver");
    std::thread::sleep(Duration::from_millis(1000));
    run.signal(libc::SIGTERM);
    let done = run.finish();
    assert_eq!(done.status.code(), Some(143), "{}", done.stderr);
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(Path::new(&net).join("net.json")).unwrap()).unwrap();
    assert_eq!(record["complete"], false);
    let point = &record["points"][0];
    assert!(point["messages_acked"].as_u64().unwrap() > 0, "the messages before the signal are counted: {point}");
    assert!(point["error"].as_str().unwrap().contains("interrupted by SIGTERM"), "{point}");

    // net serve, waiting for senders that never come.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let serve = Background::start(
        &["net", "serve", "--runtime", "thread", "--listen", &format!("127.0.0.1:{port}"), "--senders", "1"],
        &[],
    );
    serve.wait_for_stderr("waiting for");
    serve.signal(libc::SIGINT);
    assert_eq!(serve.finish().status.code(), Some(130));

    // net send, in the middle of its messages.
    let receiver = Background::start(
        &[
            "net",
            "serve",
            "--runtime",
            "thread",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--senders",
            "1",
            "--messages",
            "100000000",
        ],
        &[],
    );
    receiver.wait_for_stderr("waiting for");
    let cookie = receiver.cookie();
    let send = Background::start(
        &["net", "send", "--to", &format!("127.0.0.1:{port}"), "--senders", "1", "--messages", "100000000"],
        &[("TASKMETER_NET_COOKIE", Path::new(&cookie))],
    );
    std::thread::sleep(Duration::from_millis(1500));
    send.signal(libc::SIGTERM);
    let sent = send.finish();
    assert_eq!(sent.status.code(), Some(143), "{}", sent.stderr);
    assert!(sent.stdout.contains("interrupted by SIGTERM"), "{}", sent.stdout);
    // The receiver sees its sender leave, reports what it received and ends on its own.
    let served = receiver.finish();
    assert!(served.stdout.contains("1 senders: "), "{}{}", served.stdout, served.stderr);

    // bench: the body's processes are stopped, the scenario kept with a note.
    let run = Background::start(
        &["bench", "--scenario", "long=sleep 600", "--warmup", "0", "--time", "60s", "-o", &bench],
        &[],
    );
    run.wait_for_child("sh -c sleep 600");
    run.signal(libc::SIGTERM);
    let done = run.finish();
    assert_eq!(done.status.code(), Some(143), "{}", done.stderr);
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(Path::new(&bench).join("bench.json")).unwrap()).unwrap();
    assert_eq!(record["complete"], false);
    assert!(
        record["report"]["results"][0]["notes"][0].as_str().unwrap().contains("interrupted by SIGTERM"),
        "{record}"
    );

    // check-driver: the check in progress stops, the others are not run.
    let run = Background::start(&["check-driver", "thread"], &[]);
    run.wait_for_child("worker");
    run.signal(libc::SIGTERM);
    let done = run.finish();
    assert_eq!(done.status.code(), Some(143), "{}", done.stderr);
    assert!(done.stdout.contains("not run: interrupted by SIGTERM"), "{}", done.stdout);
}

#[test]
fn kill_9_leaves_no_process_behind() {
    let dir = tempfile::tempdir().unwrap();
    // A driver that starts a helper (its own grandchild, in its process group) and hangs.
    let driver = script(dir.path(), "forks", "sleep 600 &\nread plan\nexec sleep 600");
    let folder = dir.path().join("run");
    let run = Background::start(
        &["run", "--runtimes", "thread", "--duration", "30s", "-o", folder.to_str().unwrap()],
        &[("TASKMETER_DRIVER_THREAD", &driver)],
    );
    run.wait_for_child("sleep 600");
    run.signal(libc::SIGKILL);
    let done = run.finish(); // checks that nothing with the test's mark is left
    assert_eq!(done.status.code(), None, "killed");
}

#[test]
fn a_worker_killed_in_its_warm_up_fails_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let run = Background::start(
        &[
            "run",
            "--runtimes",
            "thread,smol",
            "--order",
            "given",
            "--duration",
            "300ms",
            "--warmup",
            "30s",
            "-o",
            folder.to_str().unwrap(),
        ],
        &[],
    );
    let worker = run.wait_for_child("worker");
    std::thread::sleep(Duration::from_millis(1000));
    // SAFETY: a signal to the worker this test's taskmeter started.
    unsafe { libc::kill(worker, libc::SIGKILL) };
    let done = run.finish();
    assert_eq!(done.status.code(), Some(1), "a row that measured nothing fails the run: {}", done.stderr);
    let record = run_json(&folder);
    let thread = row(&record, "thread");
    assert_eq!(thread["status"], "failed");
    // In its warm-up ("no measured sample (it sent N warm-up samples): ..."), or, on a machine
    // so loaded that its units had not started yet, before its gate.
    let reason = thread["reason"].as_str().unwrap();
    assert!(reason.contains("the worker was killed by signal 9 (SIGKILL)"), "{reason}");
    assert!(done.stdout.lines().any(|l| l.starts_with("thread ") && l.contains("FAILED: ")), "{}", done.stdout);
}

#[test]
fn a_worker_stopped_for_good_fails_its_row_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let run = Background::start(
        &[
            "run",
            "--runtimes",
            "thread",
            "--duration",
            "1s",
            "--warmup",
            "1s",
            "--grace",
            "1s",
            "--start-limit",
            "1s",
            "-o",
            folder.to_str().unwrap(),
        ],
        &[],
    );
    let worker = run.wait_for_child("worker");
    // SAFETY: a signal to the worker this test's taskmeter started.
    unsafe { libc::kill(worker, libc::SIGSTOP) };
    let done = run.finish();
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    let reason = row(&run_json(&folder), "thread")["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("did not finish within") && reason.contains("was killed"), "{reason}");
}

#[test]
fn a_worker_that_floods_is_stopped_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let flood = script(dir.path(), "flood", "read plan; exec cat /dev/zero");
    let folder = dir.path().join("run");
    // Its deadline is minutes away: the violation, not the deadline, ends it.
    let started = Instant::now();
    let done = Background::start(
        &["run", "--runtimes", "thread", "--duration", "1s", "--grace", "600s", "-o", folder.to_str().unwrap()],
        &[("TASKMETER_DRIVER_THREAD", &flood)],
    )
    .finish();
    assert!(started.elapsed() < Duration::from_secs(100), "stopped long before its deadline of over 600 s");
    assert_eq!(done.status.code(), Some(1));
    assert!(row(&run_json(&folder), "thread")["reason"].as_str().unwrap().starts_with("protocol violation"));
}

#[test]
fn a_helper_holding_the_workers_output_does_not_hold_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let exe = env!("CARGO_BIN_EXE_taskmeter");
    let held = script(dir.path(), "held", &format!("sleep 600 &\nexec {exe} worker"));
    let folder = dir.path().join("run");
    let done = Background::start(
        &["run", "--runtimes", "thread", "--duration", "500ms", "--warmup", "0", "-o", folder.to_str().unwrap()],
        &[("TASKMETER_DRIVER_THREAD", &held)],
    )
    .finish();
    assert_eq!(done.status.code(), Some(0), "{}", done.stderr);
    assert_eq!(row(&run_json(&folder), "thread")["status"], "ok");
}

#[test]
fn check_driver_fails_every_abuse_within_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let exe = env!("CARGO_BIN_EXE_taskmeter");
    let abuses = [
        ("flood", "read plan; exec cat /dev/zero".to_string(), "protocol violation"),
        ("garbage", "read plan; echo 'hello world'; sleep 600".to_string(), "protocol violation"),
        ("silent", "read plan; exec sleep 600".to_string(), "hung: did not finish within"),
        ("held", format!("sleep 600 &\nexec {exe} worker"), "kept its stdout or stderr open"),
    ];
    for (name, body, verdict) in abuses {
        let driver = script(dir.path(), name, &body);
        let started = Instant::now();
        let done = Background::start(&["check-driver", "thread"], &[("TASKMETER_DRIVER_THREAD", &driver)]).finish();
        // The bound --help states for one check, times the checks, is far above what any run takes.
        assert!(started.elapsed() < Duration::from_secs(600), "{name}: bounded");
        assert_eq!(done.status.code(), Some(1), "{name}: {}", done.stdout);
        let first = done.stdout.lines().next().unwrap_or_default();
        assert!(first.starts_with("FAIL") && first.contains(verdict), "{name}: {first}");
        if name == "silent" {
            assert!(done.stdout.contains("not run: the worker hung in an earlier check"), "{}", done.stdout);
        }
    }
    let help = common::stdout(&common::run(&["check-driver", "--help"]));
    assert!(help.contains("35 s"), "the bound is in the help: {help}");
}

#[test]
fn an_unusable_output_folder_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let link = dir.path().join("a-link");
    std::fs::create_dir(dir.path().join("target")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("target"), &link).unwrap();
    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("x"), "").unwrap();
    let mut cases: Vec<(PathBuf, &str)> = vec![
        (file.clone(), "is a file, not a folder"),
        (file.join("below"), "the folder cannot be created"),
        (PathBuf::from("/proc/taskmeter-results"), "the folder cannot be created"),
        (link.clone(), "is a symbolic link"),
        (full.clone(), "already exists and is not empty"),
    ];
    let mount = dir.path().join("mount");
    std::fs::create_dir(&mount).unwrap();
    let mounted = common::root("mounting a file system")
        && Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(&mount)
            .status()
            .unwrap()
            .success();
    if mounted {
        cases.push((mount.clone(), "is a mount point"));
    }
    for (folder, message) in &cases {
        let started = Instant::now();
        let done = Background::start(
            &["run", "--runtimes", "thread", "--duration", "20s", "-o", folder.to_str().unwrap()],
            &[],
        )
        .finish();
        assert_eq!(done.status.code(), Some(2), "{folder:?}: {}", done.stderr);
        // One line, wrapped to the width of stderr.
        assert_eq!(common::unwrapped(&done.stderr).lines().count(), 1, "{folder:?}: one line: {}", done.stderr);
        assert!(done.stderr.starts_with("taskmeter: ") && done.stderr.contains(message), "{folder:?}: {}", done.stderr);
        // Refused before the 20 s measurement: no worker ran.
        assert!(started.elapsed() < Duration::from_secs(15), "{folder:?}: refused at once");
    }
    assert_eq!(std::fs::read_dir(dir.path().join("target")).unwrap().count(), 0, "nothing written through the link");
    no_partial_folder_in(dir.path());
    if mounted {
        assert!(Command::new("umount").arg(&mount).status().unwrap().success());
    }
}

/// A run of three runtimes, one after another, during which `spoil` is done to its folder
/// after the first has started: the first row is kept, the others are not started.
fn spoiled_run(folder: &Path, spoil: impl FnOnce()) -> Finished {
    let run = Background::start(
        &[
            "run",
            "--runtimes",
            "thread,smol,tokio-ct",
            "--order",
            "given",
            "--duration",
            "2s",
            "--warmup",
            "0",
            "-o",
            folder.to_str().unwrap(),
        ],
        &[],
    );
    run.wait_for_child("worker");
    spoil();
    let done = run.finish();
    assert_eq!(done.status.code(), Some(3), "{}", done.stderr);
    done
}

/// The fallback folder stderr names, and its record.
fn fallback(done: &Finished) -> (PathBuf, serde_json::Value) {
    // The line as one, however stderr's width wrapped it.
    let stderr = common::unwrapped(&done.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("the results are in "))
        .unwrap_or_else(|| panic!("no fallback named: {}", done.stderr));
    let at = PathBuf::from(line.rsplit("the results are in ").next().unwrap().trim_end_matches(" instead"));
    let record = run_json(&at);
    assert_eq!(record["complete"], false);
    assert!(
        record["incomplete_reason"].as_str().unwrap().starts_with("the results folder became unusable"),
        "{record}"
    );
    assert_eq!(row(&record, "thread")["status"], "ok", "the row measured before is kept");
    for runtime in ["smol", "tokio-ct"] {
        assert!(row(&record, runtime)["reason"]
            .as_str()
            .unwrap()
            .starts_with("not run: the results folder became unusable"));
    }
    (at, record)
}

#[test]
fn a_results_folder_removed_during_the_run_goes_to_a_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("results");
    let done = spoiled_run(&parent.join("run"), || std::fs::remove_dir_all(&parent).unwrap());
    let (at, _) = fallback(&done);
    assert!(at.starts_with(std::env::temp_dir()), "{at:?}");
    std::fs::remove_dir_all(at).unwrap();
}

#[test]
fn a_results_folder_filled_during_the_run_goes_to_a_fallback_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let done = spoiled_run(&folder, || std::fs::write(folder.join("someone-elses"), "").unwrap());
    let (at, _) = fallback(&done);
    assert_eq!(at.parent(), Some(dir.path()), "beside the folder: {at:?}");
    assert!(folder.join("someone-elses").exists(), "what someone else wrote is left alone");
    no_partial_folder_in(dir.path());
}

#[test]
fn a_full_disk_during_the_run_goes_to_a_fallback() {
    if !common::root("mounting a small file system") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("small");
    std::fs::create_dir(&mount).unwrap();
    assert!(Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
        .arg(&mount)
        .status()
        .unwrap()
        .success());
    let done = spoiled_run(&mount.join("run"), || {
        let _ = Command::new("dd")
            .args(["if=/dev/zero", "bs=64k"])
            .arg(format!("of={}", mount.join("filler").display()))
            .stderr(Stdio::null())
            .status();
    });
    let (at, _) = fallback(&done);
    std::fs::remove_dir_all(at).unwrap();
    assert!(Command::new("umount").arg(&mount).status().unwrap().success());
}

#[test]
fn a_full_or_closed_stdout_never_panics_and_the_folder_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let full = || std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let output = taskmeter()
        .args(["run", "--runtimes", "thread", "--duration", "200ms", "--warmup", "0", "-o", folder.to_str().unwrap()])
        .stdout(full())
        .output()
        .unwrap();
    let stderr = common::stderr(&output);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("taskmeter: cannot write to standard output: No space left on device")
            && !stderr.contains("panicked"),
        "{stderr}"
    );
    assert_eq!(run_json(&folder)["complete"], true, "the folder is written either way");
    for args in [vec!["list"], vec!["report", folder.to_str().unwrap()], vec!["--help"]] {
        let output = taskmeter().args(&args).stdout(full()).output().unwrap();
        let stderr = common::stderr(&output);
        assert_eq!(output.status.code(), Some(3), "{args:?}: {stderr}");
        assert_eq!(common::unwrapped(&stderr).lines().count(), 1, "{args:?}: {stderr}");
    }
    // A closed pipe (`| head -c 0`): quiet, and the status is the command's own.
    for args in [
        vec!["list"],
        vec![
            "run",
            "--runtimes",
            "thread",
            "--duration",
            "200ms",
            "--warmup",
            "0",
            "-o",
            dir.path().join("piped").to_str().unwrap(),
        ],
    ] {
        let mut child = taskmeter().args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{args:?}: {}", common::stderr(&output));
        assert!(!common::stderr(&output).contains("panicked") && !common::stderr(&output).contains("standard output"));
    }
    assert_eq!(run_json(&dir.path().join("piped"))["complete"], true);
    // A full stderr: nothing can be said, the run is measured and written all the same.
    let quiet = dir.path().join("quiet");
    let output = taskmeter()
        .args(["run", "--runtimes", "thread", "--duration", "200ms", "--warmup", "0", "-o", quiet.to_str().unwrap()])
        .stderr(full())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(run_json(&quiet)["complete"], true);
}

#[test]
fn a_failure_that_is_not_the_inputs_is_one_line_and_exit_1() {
    // No server listens on port 1: the URL is well formed, the store cannot be opened.
    let url = "postgresql://nobody@127.0.0.1:1/db";
    assert_eq!(
        refused(&common::run(&["history", "list", "--history", url])),
        (
            Some(1),
            format!(
                "taskmeter: cannot connect to {url}: error connecting to server: Connection refused (os error 111)"
            )
        )
    );
    // A file that is not a SQLite database, where the history should be.
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.sqlite");
    std::fs::write(&history, "not a database\n".repeat(100)).unwrap();
    assert_eq!(
        refused(&common::run(&["history", "trend", "--history", history.to_str().unwrap()])),
        (Some(1), format!("taskmeter: cannot use {}: file is not a database", history.display()))
    );
}

#[test]
fn a_file_that_cannot_be_written_is_one_line_and_exit_3() {
    // Under a regular file, where even root cannot create anything.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let below = file.join("man");
    assert_eq!(
        refused(&common::run(&["man", "--dir", below.to_str().unwrap()])),
        (Some(3), format!("taskmeter: cannot create {}: Not a directory (os error 20)", below.display()))
    );
    // `report` of a results folder whose charts cannot be replaced: a file stands where their
    // folder goes.
    let folder = dir.path().join("run");
    let quick = ["run", "--runtimes", "thread", "--duration", "200ms", "--warmup", "0", "-q", "-o"];
    let measured = common::run(&[&quick[..], &[folder.to_str().unwrap()]].concat());
    assert_eq!(measured.status.code(), Some(0), "{}", common::stderr(&measured));
    let charts = folder.join("charts");
    if charts.is_dir() {
        std::fs::remove_dir_all(&charts).unwrap();
    }
    std::fs::write(&charts, "").unwrap();
    assert_eq!(
        refused(&common::run(&["report", folder.to_str().unwrap()])),
        (Some(3), format!("taskmeter: cannot write {}: Not a directory (os error 20)", charts.display()))
    );
}

#[test]
fn bad_input_is_one_line_even_for_a_huge_value() {
    // An argument is at most 128 KiB; a preset can hold a 50 MB value.
    let dir = tempfile::tempdir().unwrap();
    let preset = dir.path().join("huge.toml");
    std::fs::write(&preset, format!("runtimes = [\"{}\"]\n", "x".repeat(50 << 20))).unwrap();
    let output = common::run(&["run", preset.to_str().unwrap()]);
    // One line, wrapped to the width of stderr: joined again.
    let stderr = common::unwrapped(&common::stderr(&output));
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stderr.lines().count(), 1);
    assert!(stderr.len() < 2000, "{} bytes", stderr.len());
    assert!(stderr.contains("(52428800 bytes)"), "{}", &stderr[..stderr.len().min(500)]);
    // The user's input, refused with exit status 2 and nothing measured: a value a flag does not
    // take, and a run the history does not hold.
    assert_eq!(
        refused(&common::run(&["run", "--order", "sideways"])),
        (Some(2), "taskmeter: invalid value 'sideways' for '--order <ORDER>' (known: shuffled, given)".to_string())
    );
    let history = dir.path().join("history.sqlite");
    assert_eq!(
        refused(&common::run(&["history", "show", "42", "--history", history.to_str().unwrap()])),
        (Some(2), format!("taskmeter: no run 42 in the history {} (see `taskmeter history list`)", history.display()))
    );
    // A task of 1000 s: the estimate says so before anything long starts.
    let folder = dir.path().join("long-tasks");
    let run = Background::start(
        &[
            "run",
            "granularity",
            "--runtimes",
            "thread",
            "--task-busy",
            "1000s",
            "--repeat",
            "1",
            "-o",
            folder.to_str().unwrap(),
        ],
        &[],
    );
    run.wait_for_stderr("(about ");
    run.signal(libc::SIGTERM);
    let done = run.finish();
    let line = done.stderr.lines().find(|l| l.contains("(about ")).unwrap().to_string();
    assert!(line.contains('h') && !line.contains("about 0"), "{line}");
}
