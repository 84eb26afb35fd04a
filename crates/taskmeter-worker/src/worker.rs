//! Worker mode (`taskmeter worker`): runs one plan in one in-process Rust runtime and speaks
//! protocol v2 on stdin/stdout, exactly as a driver in another language does.

use taskmeter_protocol::{Experiment, Plan};
use taskmeter_protocol::{Done, ErrorLine, Hello, Line, CLOCK};
use crate::runtime;
use crate::workload::{busy, LoopContext};
use std::io::{BufRead, BufWriter, Read, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

pub fn main() -> ExitCode {
    let mut stdin = std::io::stdin().lock();
    let mut line = String::new();
    if let Err(e) = stdin.read_line(&mut line) {
        return refuse(&format!("could not read the plan: {e}"));
    }
    let plan_read_ns = crate::clock::now_ns();
    let plan = match Plan::from_json(&line) {
        Ok(plan) => plan,
        Err(error) => return refuse(&error.to_string()),
    };
    let Some(runtime_version) = runtime::in_process_version(&plan.runtime) else {
        return refuse(&format!("runtime \"{}\" is not served by this worker", plan.runtime));
    };
    let hello = Hello {
        protocol: taskmeter_protocol::PROTOCOL,
        runtime: plan.runtime.clone(),
        runtime_version,
        clock: CLOCK.into(),
        pid: std::process::id(),
        priority: runtime::in_process_priority(&plan),
    };
    if emit(&[Line::Hello(hello)]).is_err() {
        return ExitCode::FAILURE;
    }
    // End of file on stdin asks the units to stop early (protocol: "Streams").
    drop(stdin);
    std::thread::spawn(|| {
        let mut sink = [0u8; 256];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        STOP.store(true, Ordering::Relaxed);
    });

    let ctx: &'static LoopContext = Box::leak(Box::new(LoopContext::new(plan, plan_read_ns, &STOP)));
    let (runs, start_error) = match runtime::run_in_process(ctx) {
        Ok(started) => (started.outputs, started.start_error),
        Err(message) => {
            let _ = emit(&[Line::Error(ErrorLine { message: message.to_string() })]);
            return ExitCode::FAILURE;
        }
    };
    let plan = &ctx.plan;
    let Some(window) = ctx.gate.window() else {
        let _ = emit(&[Line::Error(ErrorLine { message: "no unit reached the start gate".into() })]);
        return ExitCode::FAILURE;
    };
    let busy_result = runs.iter().find_map(|r| r.busy_result).unwrap_or_else(|| busy(plan.busy.iters, false));
    let samples = runs.iter().map(|r| r.samples.len() as u64).sum();
    let missed = runs.iter().flat_map(|r| &r.samples.missed).sum();
    let interrupted = STOP.load(Ordering::Relaxed) && crate::clock::now_ns() < window.end_ns;
    let done = Done {
        create_start_ns: window.create_start_ns,
        run_start_ns: window.run_start_ns,
        measure_start_ns: window.measure_start_ns,
        end_ns: window.end_ns,
        units: runs.len() as u32,
        samples,
        missed,
        storage_grown: runs.iter().map(|r| r.grown).sum(),
        interrupted,
        busy_result: busy_result.to_string(),
        start_error,
        atomic_sum: (plan.experiment == Experiment::AtomicSum).then(|| ctx.counter.load(Ordering::SeqCst)),
    };
    let mut lines: Vec<Line> = runs.into_iter().map(|r| Line::Unit(r.samples)).collect();
    lines.push(Line::Done(done));
    match emit(&lines) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

fn refuse(message: &str) -> ExitCode {
    let _ = emit(&[Line::Error(ErrorLine { message: message.to_string() })]);
    ExitCode::from(2)
}

fn emit(lines: &[Line]) -> std::io::Result<()> {
    let mut out = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    for line in lines {
        serde_json::to_writer(&mut out, line)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}
