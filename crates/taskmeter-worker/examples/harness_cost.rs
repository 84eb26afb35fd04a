//! The granularity experiment's own cost per task: rounds of each pattern whose tasks run on
//! the caller (`Inline`, no runtime), against the same tasks' busy work called in a plain
//! loop. The difference is what the harness adds to every task (counting, checking, the
//! handles), the floor under any runtime's overhead per task.
//!
//!     cargo run --release -p taskmeter-worker --example harness_cost

use std::time::Instant;
use taskmeter_protocol::Pattern;
use taskmeter_worker::granularity::{async_round, Inline, Round};
use taskmeter_worker::workload::busy;

fn main() {
    const TASKS: u32 = 1_000_000;
    for iters in [1, 100] {
        let expected = busy(iters, false);
        let started = Instant::now();
        for _ in 0..TASKS {
            std::hint::black_box(busy(iters, false));
        }
        let work_ns = started.elapsed().as_nanos() as f64 / TASKS as f64;
        for pattern in [Pattern::Trivial, Pattern::Chain, Pattern::Stencil] {
            let r = Round { pattern, width: 2, steps: 50, iters, expected };
            let rounds = TASKS / 100;
            let started = Instant::now();
            for _ in 0..rounds {
                embassy_futures::block_on(async_round(&Inline, r));
            }
            let round_ns = started.elapsed().as_nanos() as f64 / TASKS as f64;
            println!("busy({iters:>3}) {:<8} work {work_ns:6.1} ns/task, round {round_ns:6.1} ns/task: harness {:5.1} ns/task", pattern.name(), round_ns - work_ns);
        }
    }
}
