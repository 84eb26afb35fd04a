// Async units that complete 100 ms and 1000 ms after they start: ips about 9.9 and 1.0.
use std::time::Duration;
use taskmeter_record::{Bench, Recorder};

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let unit_of = |ms: u64| {
        let tokio = runtime.handle().clone();
        move |rec: &Recorder, _: &()| {
            let rec = rec.clone();
            let task = tokio.spawn(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                rec.record(); // one unit of work completed, now
            });
            tokio.block_on(task).unwrap();
        }
    };
    Bench::new()
        .warmup(Duration::from_secs(1))
        .time(Duration::from_secs(5))
        .extended_statistics(true)
        .scenario("case_100_ms", unit_of(100))
        .scenario("case_1000_ms", unit_of(1000))
        .run();
}
