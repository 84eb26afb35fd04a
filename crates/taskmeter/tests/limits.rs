//! The machine's own limits: every OS-thread runtime asked for 100,000 units stops where this
//! machine does (kernel.pid_max, vm.max_map_count, threads-max, memory, or the start limit) and
//! gives a partial row with the reason, never a crash. One test, one worker at a time: a worker
//! at its limit holds most of the machine's pids, so nothing else may run beside it.

mod common;
use common::*;

#[test]
fn every_os_thread_runtime_stops_at_the_machines_limit_with_a_partial_row() {
    let dir = tempfile::tempdir().unwrap();
    for runtime in &runtimes_where(|r| r.unit.as_deref() == Some("os-thread")) {
        let runtime = runtime.as_str();
        let folder = dir.path().join(runtime);
        let output = run(&[
            "run",
            "volume",
            "--runtimes",
            runtime,
            "--units",
            "100000",
            "--duration",
            "500ms",
            "--warmup",
            "100ms",
            "--grace",
            "120s",
            "-o",
            folder.to_str().unwrap(),
        ]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{runtime}: a partial row is a result:\n{}{}",
            stdout(&output),
            stderr(&output)
        );
        let record = run_json(&folder);
        let row = &record["rows"][0];
        assert_eq!(row["status"], "partial", "{runtime}: {row}");
        let started = row["counts"]["units"].as_u64().unwrap();
        assert!((1..100_000).contains(&started), "{runtime}: {started} units");
        let reason = row["reason"].as_str().unwrap();
        assert!(reason.starts_with(&format!("partial: {started} of 100000 units started (")), "{runtime}: {reason}");
        eprintln!("{runtime}: {reason}");
    }
}
