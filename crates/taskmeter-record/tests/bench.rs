//! The in-process benchmark, as a user runs it: accounting that adds up, gaps that cannot be
//! shorter than the work, ids through the drain, inputs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use taskmeter_record::{Bench, Recorder};

const MS: i64 = 1_000_000;

#[test]
fn every_recorded_unit_is_measured_warmup_or_after() {
    let recorded = Arc::new(AtomicU64::new(0));
    let total = recorded.clone();
    let report = Bench::new()
        .warmup(Duration::from_millis(50))
        .time(Duration::from_millis(150))
        .quiet()
        .scenario("threads", move |rec, _| {
            std::thread::scope(|s| {
                for _ in 0..4 {
                    s.spawn(|| {
                        for i in 0..100u64 {
                            if i % 10 == 0 {
                                rec.record_n(3);
                                total.fetch_add(3, Ordering::Relaxed);
                            } else {
                                rec.record();
                                total.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    });
                }
            });
        })
        .run();
    let r = &report.results[0];
    assert!(r.invocations >= 1);
    assert_eq!(recorded.load(Ordering::Relaxed), r.invocations * 4 * 120);
    assert_eq!(
        r.measured.units + r.measured.outside.warmup_units + r.measured.outside.after_units,
        r.invocations * 4 * 120
    );
    let gap = r.measured.gap.as_ref().unwrap();
    assert_eq!(gap.count, r.measured.units);
    assert_eq!(gap.min, 0, "record_n(3) gives gaps of 0");
}

#[test]
fn a_gap_is_never_shorter_than_the_work_between_units() {
    let report = Bench::with_inputs([("short", 5u64), ("long", 15)])
        .warmup(Duration::from_millis(30))
        .time(Duration::from_millis(200))
        .extended_statistics(true)
        .quiet()
        .scenario("sleeper", |rec: &Recorder, ms: &u64| {
            let rec = rec.clone();
            let ms = *ms;
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(ms));
                rec.record();
            })
            .join()
            .unwrap();
        })
        .run();
    assert_eq!(report.config.inputs, ["short", "long"]);
    for (r, ms) in report.results.iter().zip([5, 15]) {
        let gap = r.measured.gap.as_ref().expect("units in the window");
        assert!(gap.min >= ms * MS, "{:?}: {gap:?}", r.input);
        assert!(r.measured.ips.unwrap() <= 1e9 / (ms * MS) as f64);
        assert_eq!(r.measured.units, gap.count);
    }
    let text = taskmeter_record::console::render(&report);
    assert!(text.contains("##### With input short #####") && text.contains("##### With input long #####"));
    assert!(text.contains("Extended statistics:") && text.contains("sample size"));
}

#[test]
fn units_with_ids_have_latencies_and_the_drain_waits_for_them() {
    let report = Bench::new()
        .warmup(Duration::ZERO)
        .time(Duration::from_millis(300))
        .drain(Duration::from_secs(5))
        .quiet()
        .scenario("ids", |rec, _| {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let id = NEXT.fetch_add(1, Ordering::Relaxed);
            rec.start(id);
            let rec = rec.clone();
            // Completes 20 ms after its start, and never before a newer unit started or the
            // window ended: so the last unit started is in flight at the end, however slow the
            // machine, and completes during the drain.
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                while NEXT.load(Ordering::Relaxed) == id + 1 && rec.running() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                rec.complete(id);
            });
            std::thread::sleep(Duration::from_millis(5));
        })
        .run();
    let r = &report.results[0];
    let latency = r.measured.latency.as_ref().unwrap();
    assert!(latency.min >= 20 * MS);
    assert_eq!(r.measured.ids.started, r.invocations);
    assert_eq!(r.measured.ids.never_completed, 0, "the drain waited for every unit");
    assert!(r.measured.ids.in_flight_at_end >= 1);
    assert_eq!(r.measured.ids.completed_in_drain, r.measured.ids.in_flight_at_end);
    assert_eq!(r.measured.ids.completed, r.invocations);
    assert_eq!(r.measured.units + r.measured.outside.after_units, r.invocations);
}

#[test]
fn a_scenario_that_records_nothing_says_so() {
    let report =
        Bench::new().warmup(Duration::ZERO).time(Duration::from_millis(20)).quiet().scenario("idle", |_, _| {}).run();
    let r = &report.results[0];
    assert_eq!((r.measured.units, r.measured.ips, r.measured.gap.is_none()), (0, None, true));
    assert!(taskmeter_record::console::render(&report).contains("no unit completed in the measurement window"));
}

#[test]
fn the_report_is_json() {
    let report = Bench::new()
        .warmup(Duration::ZERO)
        .time(Duration::from_millis(20))
        .quiet()
        .scenario("one", |rec, _| rec.record())
        .run();
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["schema"], 1);
    assert_eq!(json["results"][0]["scenario"], "one");
    assert!(json["results"][0]["gap"]["median"].is_i64());
    let back: taskmeter_record::Report = serde_json::from_value(json).unwrap();
    assert_eq!(back, report);
}

#[test]
fn the_docs_show_the_seed_example_as_it_is() {
    let page = include_str!("../../../docs/experiments.md");
    assert!(
        page.contains(include_str!("../examples/seed.rs")),
        "docs/experiments.md must show examples/seed.rs verbatim"
    );
}
