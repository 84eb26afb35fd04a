//! Worker mode (`taskmeter worker`): runs one plan in one in-process Rust runtime and speaks
//! protocol v6, exactly as a driver in another language does: `H` and `G` on stdout, the `S`
//! frames of the writer (and the `F` frames of a unit whose ring is full) in the sample file
//! while the units run, then `U` and `D` on stdout.

use crate::runtime;
use crate::workload::SampleSink;
use crate::workload::{busy, LoopContext};
use std::fs::File;
use std::io::{Read, Write};
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;
use taskmeter_protocol::frames::{kind, put_json, put_unit, write_json, SAMPLE_FD, WRITER_THREAD};
use taskmeter_protocol::{Done, ErrorFrame, Experiment, Gate, GrainPlan, Hello, Pattern, Plan, Point, CLOCK};

static STOP: AtomicBool = AtomicBool::new(false);

/// A write of the writer stays below this (it may hold many units' frames).
const WRITE_BYTES: usize = 4 << 20;

/// stdout, unbuffered: frames are written whole, by one thread at a time.
fn stdout() -> ManuallyDrop<File> {
    // SAFETY: fd 1 stays open for the whole process; ManuallyDrop never closes it.
    ManuallyDrop::new(unsafe { File::from_raw_fd(1) })
}

/// The sample file (fd 3, open for appending): each call one write(2), so the frames of the
/// writer and of the units, writing at once, never interleave.
fn sample_file() -> SampleSink {
    Box::new(|bytes| loop {
        // SAFETY: writes from a live buffer to a descriptor; a closed one fails with EBADF.
        let n = unsafe { libc::write(SAMPLE_FD, bytes.as_ptr().cast(), bytes.len()) };
        if n == bytes.len() as isize {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        match n {
            -1 if error.kind() == std::io::ErrorKind::Interrupted => {}
            -1 => return Err(error),
            n => return Err(std::io::Error::other(format!("the sample file took {n} of {} bytes", bytes.len()))),
        }
    })
}

/// Whether fd 3 is open for appending and writing, as the orchestrator hands every worker its
/// sample file: a process started otherwise may hold an unrelated file there, never to be
/// written to.
fn sample_file_open() -> bool {
    // SAFETY: F_GETFL only reads the descriptor's flags.
    let flags = unsafe { libc::fcntl(SAMPLE_FD, libc::F_GETFL) };
    flags != -1 && flags & libc::O_APPEND != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY
}

pub fn main() -> ExitCode {
    // A runtime that panics (tokio when the OS refuses it a worker thread) fails the row with
    // its message on one line, the reason taskmeter shows, rather than a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        eprintln!("taskmeter worker: {}", message.replace('\n', " "));
    }));
    let mut line = String::new();
    if let Err(e) = std::io::stdin().read_line(&mut line) {
        return refuse(&format!("could not read the plan: {e}"));
    }
    let plan_read_ns = crate::clock::now_ns();
    // The orchestrator validated the plan; reading it checks it once more.
    let plan = match Plan::from_json(&line) {
        Ok(plan) => plan,
        Err(error) => return refuse(&error.to_string()),
    };
    let Some(served) = runtime::find(&plan.runtime) else {
        return refuse(&format!("runtime \"{}\" is not served by this worker", plan.runtime));
    };
    if !served.has_recipe(&plan.wait) {
        return refuse(&format!("runtime \"{}\" has no wait recipe \"{}\"", plan.runtime, plan.wait));
    }
    let hello = Hello {
        protocol: taskmeter_protocol::PROTOCOL,
        runtime: plan.runtime.clone(),
        runtime_version: (served.version)(),
        clock: CLOCK.into(),
        pid: std::process::id(),
        priority: runtime::hello_priority(served, &plan),
        wait: Some(plan.wait.clone()).filter(|w| w != taskmeter_protocol::plan::DEFAULT_WAIT),
    };
    if write_json(&mut *stdout(), kind::HELLO, &hello).is_err() {
        return ExitCode::FAILURE;
    }
    // End of file on stdin asks the units to stop early (protocol: "Streams").
    let watching = std::thread::Builder::new().spawn(|| {
        let mut sink = [0u8; 256];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        STOP.store(true, Ordering::Relaxed);
    });
    if let Err(e) = watching {
        return fail(&format!("could not start the thread that watches stdin: {e}"));
    }

    if let Some(grain) = &plan.grain {
        return measure_grains(served, Box::leak(Box::new(grain.clone())), &plan, plan_read_ns);
    }
    if !sample_file_open() {
        return refuse(
            "fd 3, the sample file, is not open for appending (taskmeter opens it for every worker it starts)",
        );
    }
    let ctx: &'static LoopContext = Box::leak(Box::new(LoopContext::new(plan, plan_read_ns, &STOP, sample_file())));
    let (units_ended, ended) = mpsc::channel::<()>();
    let writer = std::thread::Builder::new().name(WRITER_THREAD.into()).spawn(move || write_samples(ctx, ended));
    let writer = match writer {
        Ok(writer) => writer,
        Err(e) => return fail(&format!("could not start the writer thread: {e}")),
    };
    // Named now, before any unit exists: the new thread names itself only when it first runs,
    // which the units could delay past G, when the orchestrator looks for it.
    let name = std::ffi::CString::new(WRITER_THREAD).expect("no NUL");
    // SAFETY: a live thread's handle and a NUL-terminated name of at most 15 bytes.
    unsafe { libc::pthread_setname_np(std::os::unix::thread::JoinHandleExt::as_pthread_t(&writer), name.as_ptr()) };
    let started = (served.run)(ctx, true);
    ctx.gate.abandon(); // wakes the writer if the gate never opened
    drop(units_ended);
    let wrote = writer.join().unwrap_or(Ok(false));
    let runs = match (started, wrote) {
        (_, Err(_)) => return ExitCode::FAILURE, // stdout is gone: nobody is listening
        (Err(message), Ok(false)) => return fail(&message.to_string()),
        // After G only a cut stream can say a unit failed: the samples sent are kept.
        (Err(message), Ok(true)) => {
            eprintln!("taskmeter worker: {message}");
            return ExitCode::FAILURE;
        }
        (Ok(_), Ok(false)) => return fail("no unit reached the start gate"),
        (Ok(started), Ok(true)) => started.outputs,
    };
    let plan = &ctx.plan;
    let window = ctx.gate.window().expect("the writer saw the gate open");
    let mut frames = Vec::new();
    for run in &runs {
        put_unit(&mut frames, &run.end);
    }
    let done = Done {
        interrupted: STOP.load(Ordering::Relaxed) && crate::clock::now_ns() < window.end_ns,
        busy_result: runs
            .iter()
            .find_map(|r| r.busy_result)
            .unwrap_or_else(|| busy(plan.busy.iters, false))
            .to_string(),
        atomic_sum: (plan.experiment == Experiment::AtomicSum).then(|| ctx.counter.load(Ordering::SeqCst)),
    };
    if let Some(view) = ctx.view.get() {
        put_json(&mut frames, kind::VIEW, view);
    }
    put_json(&mut frames, kind::DONE, &done);
    match stdout().write_all(&frames) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

/// The writer (protocol: "The writer"): once the gate opens, sends `G` on stdout, then every
/// `flush_ns` what the rings hold to the sample file, and once more when the units have ended
/// (`ended` closes). False when the gate never opened.
fn write_samples(ctx: &LoopContext, ended: mpsc::Receiver<()>) -> std::io::Result<bool> {
    pump(ctx, ended, |bytes| stdout().write_all(bytes))
}

/// The writer's loop: `G` through `control`, then the samples through the context's sink (in
/// writes of at most a few megabytes).
pub fn pump(
    ctx: &LoopContext,
    ended: mpsc::Receiver<()>,
    control: impl FnOnce(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<bool> {
    let Some(window) = ctx.gate.wait_open() else { return Ok(false) };
    let (units, start_error) = ctx.gate.started();
    let gate = Gate { create_start_ns: window.create_start_ns, run_start_ns: window.run_start_ns, units, start_error };
    let mut out = Vec::new();
    put_json(&mut out, kind::GATE, &gate);
    control(&out)?;
    out.clear();
    let write = &ctx.samples;
    let flush = Duration::from_nanos(ctx.plan.flush_ns);
    loop {
        let last = !matches!(ended.recv_timeout(flush), Err(RecvTimeoutError::Timeout));
        for (unit, slot) in ctx.slots() {
            slot.ring.drain_into(unit, || slot.origin_ns(), &mut out);
            if out.len() >= WRITE_BYTES {
                write(&out)?;
                out.clear();
            }
        }
        if !out.is_empty() {
            write(&out)?;
            out.clear();
        }
        if last {
            return Ok(true);
        }
    }
}

/// The granularity experiment (protocol: "Its frames"): `G` when the rate measurement begins,
/// a `P` frame per grain as it is measured, then `D`.
fn measure_grains(served: &runtime::InProcess, grain: &'static GrainPlan, plan: &Plan, plan_read_ns: u64) -> ExitCode {
    let in_flight = if grain.pattern == Pattern::Trivial { grain.width * grain.steps } else { grain.width };
    if let Some(pool) = served.task_pool.filter(|pool| in_flight > *pool) {
        return refuse(&format!(
            "{} holds at most {pool} tasks in flight (a static task pool); this {} plan has {in_flight}",
            served.id,
            grain.pattern.name()
        ));
    }
    let gate =
        Gate { create_start_ns: plan_read_ns, run_start_ns: crate::clock::now_ns(), units: 1, start_error: None };
    if write_json(&mut *stdout(), kind::GATE, &gate).is_err() {
        return ExitCode::FAILURE;
    }
    match (served.grains)(grain, plan.warmup_ns, plan.duration_ns, &STOP, send_point) {
        Ok(interrupted) => {
            let done = Done { interrupted, busy_result: "0".into(), atomic_sum: None };
            match write_json(&mut *stdout(), kind::DONE, &done) {
                Ok(()) => ExitCode::SUCCESS,
                Err(_) => ExitCode::FAILURE,
            }
        }
        Err(message) => {
            // After G only a cut stream can say why: the grains sent are kept.
            eprintln!("taskmeter worker: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Sends one grain's `P` frame (from whichever thread measures; nothing else writes then).
fn send_point(point: &Point) {
    let _ = write_json(&mut *stdout(), kind::POINT, point);
}

fn refuse(message: &str) -> ExitCode {
    let _ = write_json(&mut *stdout(), kind::ERROR, &ErrorFrame { message: message.to_string() });
    ExitCode::from(2)
}

fn fail(message: &str) -> ExitCode {
    let _ = write_json(&mut *stdout(), kind::ERROR, &ErrorFrame { message: message.to_string() });
    ExitCode::FAILURE
}
