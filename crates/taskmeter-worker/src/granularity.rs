//! The granularity experiment in the Rust runtimes (protocol: "The granularity experiment"):
//! the rate of the busy loop, then per grain its serial time, warm-up rounds and measured rounds
//! of the plan's pattern, one `P` frame each. The runtimes differ only in how a task is started
//! and awaited: an OS thread (`thread_round`), or a task of an executor (`Spawn`, `async_round`).

use crate::clock::now_ns;
use crate::workload::busy;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Waker};
use taskmeter_protocol::frames::Point;
use taskmeter_protocol::{GrainPlan, Pattern};

/// What one round runs: the plan's pattern with tasks of `iters` iterations returning `expected`.
#[derive(Clone, Copy, Debug)]
pub struct Round {
    pub pattern: Pattern,
    pub width: u32,
    pub steps: u32,
    pub iters: u64,
    pub expected: u64,
}

/// Tasks started and completed, and results that differed, since the worker began.
struct Counts {
    started: AtomicU64,
    completed: AtomicU64,
    wrong: AtomicU64,
}

static COUNTS: Counts = Counts { started: AtomicU64::new(0), completed: AtomicU64::new(0), wrong: AtomicU64::new(0) };

impl Counts {
    fn snapshot(&self) -> [u64; 3] {
        [self.started.load(Relaxed), self.completed.load(Relaxed), self.wrong.load(Relaxed)]
    }

    fn check(&self, result: u64, expected: u64) {
        if result != expected {
            self.wrong.fetch_add(1, Relaxed);
        }
    }
}

/// A task's body: the busy work, counted once it has returned.
fn task(r: Round) -> u64 {
    let result = busy(r.iters, false);
    COUNTS.completed.fetch_add(1, Relaxed);
    result
}

/// How a runtime runs one round; the grain loop around it is the same for all.
pub trait Rounds {
    /// Tasks that can run busy work at once (protocol: "cores").
    fn cores(&self) -> u32;
    /// Runs one round; an error (a thread the OS refused) ends the worker.
    fn round(&self, r: Round) -> impl Future<Output = Result<(), String>>;
}

/// The CPUs this worker may run on (its affinity mask).
pub fn cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// Measures every grain of `grain` with `rounds`, handing each `P` to `send`. True when a stop
/// request ended it early (the grain in progress is not reported).
pub async fn measure(
    grain: &GrainPlan,
    warmup_ns: u64,
    duration_ns: u64,
    rounds: &impl Rounds,
    stop: &AtomicBool,
    mut send: impl FnMut(&Point),
) -> Result<bool, String> {
    let ns_per_iter = rate(grain.calibrate_ns);
    for &grain_ns in &grain.grains_ns {
        let iters = ((grain_ns as f64 / ns_per_iter).round() as u64).max(1);
        let expected = busy(iters, false);
        let (serial_tasks, serial_ns) = serial(iters, expected, grain.calibrate_ns);
        let r = Round { pattern: grain.pattern, width: grain.width, steps: grain.steps, iters, expected };
        let warmup_start = now_ns();
        loop {
            rounds.round(r).await?;
            if stop.load(Relaxed) {
                return Ok(true);
            }
            if now_ns() - warmup_start >= warmup_ns {
                break;
            }
        }
        let before = COUNTS.snapshot();
        let start = now_ns();
        let mut done = 0;
        let wall_ns = loop {
            rounds.round(r).await?;
            done += 1;
            if stop.load(Relaxed) {
                return Ok(true);
            }
            let elapsed = now_ns() - start;
            if elapsed >= duration_ns {
                break elapsed;
            }
        };
        let after = COUNTS.snapshot();
        // The task alone again, after its rounds: one of the two may have been disturbed.
        let (serial_after_tasks, serial_after_ns) = serial(iters, expected, grain.calibrate_ns);
        send(&Point {
            grain_ns,
            iters,
            busy_result: expected.to_string(),
            serial_tasks,
            serial_ns,
            serial_after_tasks: Some(serial_after_tasks),
            serial_after_ns: Some(serial_after_ns),
            rounds: done,
            tasks: after[0] - before[0],
            completed: after[1] - before[1],
            wrong: after[2] - before[2],
            wall_ns,
            cores: rounds.cores(),
        });
    }
    Ok(false)
}

/// ns per busy iteration: the shortest of three calls of `busy(n)`, for the first `n` (from
/// 1024, doubling) whose call takes a quarter of `calibrate_ns`.
fn rate(calibrate_ns: u64) -> f64 {
    let timed = |n: u64| {
        let start = now_ns();
        busy(n, false);
        now_ns() - start
    };
    let mut n = 1024u64;
    while timed(n) < calibrate_ns / 4 {
        n *= 2;
    }
    let shortest = (0..3).map(|_| timed(n)).min().unwrap_or(1).max(1);
    shortest as f64 / n as f64
}

/// The useful work of one task, alone: calls of `busy(iters)` one after another, the clock
/// read only between batches so that it is not counted as work.
fn serial(iters: u64, expected: u64, calibrate_ns: u64) -> (u64, u64) {
    let batch = (10_000 / iters).max(1);
    let start = now_ns();
    let mut calls = 0;
    loop {
        for _ in 0..batch {
            COUNTS.check(busy(iters, false), expected);
        }
        calls += batch;
        let elapsed = now_ns() - start;
        if elapsed >= calibrate_ns {
            return (calls, elapsed);
        }
    }
}

/// A round of OS threads: one new thread per task, joined; a chain's next thread is started by
/// its predecessor, and each chain's last one reports on a channel.
pub fn thread_round(r: Round) -> Result<(), String> {
    let start = |body: Box<dyn FnOnce() -> u64 + Send>| {
        COUNTS.started.fetch_add(1, Relaxed);
        std::thread::Builder::new().spawn(body).map_err(|e| {
            COUNTS.started.fetch_sub(1, Relaxed);
            format!("could not start a task's thread: {e}")
        })
    };
    let join_all = |handles: Vec<std::thread::JoinHandle<u64>>| {
        for handle in handles {
            COUNTS.check(handle.join().map_err(|_| "a task's thread panicked".to_string())?, r.expected);
        }
        Ok::<(), String>(())
    };
    match r.pattern {
        Pattern::Trivial => {
            let handles =
                (0..r.width * r.steps).map(|_| start(Box::new(move || task(r)))).collect::<Result<Vec<_>, _>>();
            join_all(handles?)
        }
        Pattern::Stencil => (0..r.steps).try_for_each(|_| {
            join_all((0..r.width).map(|_| start(Box::new(move || task(r)))).collect::<Result<_, _>>()?)
        }),
        Pattern::Chain => {
            fn link(
                r: Round,
                index: u32,
                handed: Option<u64>,
                done: mpsc::Sender<Result<(), String>>,
            ) -> Box<dyn FnOnce() -> u64 + Send> {
                Box::new(move || {
                    if let Some(previous) = handed {
                        COUNTS.check(previous, r.expected);
                    }
                    let result = task(r);
                    if index == r.steps {
                        COUNTS.check(result, r.expected);
                        let _ = done.send(Ok(()));
                        return result;
                    }
                    COUNTS.started.fetch_add(1, Relaxed);
                    let next = std::thread::Builder::new().spawn(link(r, index + 1, Some(result), done.clone()));
                    if let Err(e) = next {
                        COUNTS.started.fetch_sub(1, Relaxed);
                        let _ = done.send(Err(format!("could not start a task's thread: {e}")));
                    }
                    result
                })
            }
            let (done, ended) = mpsc::channel();
            for _ in 0..r.width {
                start(link(r, 1, None, done.clone()))?;
            }
            drop(done);
            (0..r.width)
                .try_for_each(|_| ended.recv().map_err(|_| "a chain ended without its last task".to_string())?)
        }
    }
}

/// An executor's way to start a task: `start` returns its handle (a future of its result),
/// `detach` lets it run on its own.
/// The handle need not be `Send` (a thread-per-core runtime's is not).
pub trait Spawn: Clone + Send + Sync + Unpin + 'static {
    fn start(&self, task: impl Future<Output = u64> + Send + 'static) -> impl Future<Output = u64> + 'static;
    fn detach(&self, task: impl Future<Output = ()> + Send + 'static);
}

/// A round of executor tasks: all started then awaited (trivial), `width` at a time (stencil),
/// or in chains whose tasks each start the next and whose last ones count a latch down.
pub async fn async_round<S: Spawn>(spawn: &S, r: Round) {
    fn start<S: Spawn>(spawn: &S, r: Round) -> impl Future<Output = u64> + '_ {
        COUNTS.started.fetch_add(1, Relaxed);
        spawn.start(async move { task(r) })
    }
    match r.pattern {
        Pattern::Trivial => {
            let handles: Vec<_> = (0..r.width * r.steps).map(|_| start(spawn, r)).collect();
            for handle in handles {
                COUNTS.check(handle.await, r.expected);
            }
        }
        Pattern::Stencil => {
            for _ in 0..r.steps {
                let handles: Vec<_> = (0..r.width).map(|_| start(spawn, r)).collect();
                for handle in handles {
                    COUNTS.check(handle.await, r.expected);
                }
            }
        }
        Pattern::Chain => {
            let latch = Arc::new(Latch::new(r.width));
            for _ in 0..r.width {
                COUNTS.started.fetch_add(1, Relaxed);
                spawn.detach(Link { spawn: spawn.clone(), r, index: 1, handed: None, latch: latch.clone() });
            }
            latch.wait().await;
        }
    }
}

/// One task of a chain: it checks the result it was handed, does its work, and starts the next
/// task with its own result, or (the last) checks it and counts the round's latch down. A
/// named future rather than an `async` block, so that it can start its own kind unboxed.
struct Link<S> {
    spawn: S,
    r: Round,
    index: u32,
    handed: Option<u64>,
    latch: Arc<Latch>,
}

impl<S: Spawn> Future for Link<S> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        let link = self.get_mut();
        if let Some(previous) = link.handed {
            COUNTS.check(previous, link.r.expected);
        }
        let result = task(link.r);
        if link.index == link.r.steps {
            COUNTS.check(result, link.r.expected);
            link.latch.count_down();
        } else {
            COUNTS.started.fetch_add(1, Relaxed);
            let next = Link {
                spawn: link.spawn.clone(),
                r: link.r,
                index: link.index + 1,
                handed: Some(result),
                latch: link.latch.clone(),
            };
            link.spawn.detach(next);
        }
        Poll::Ready(())
    }
}

/// Counts down to zero from any thread; awaiting it ends at zero. Works in every executor.
pub struct Latch(Mutex<(u32, Option<Waker>)>);

impl Latch {
    pub fn new(count: u32) -> Latch {
        Latch(Mutex::new((count, None)))
    }

    pub fn count_down(&self) {
        let mut state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        state.0 = state.0.saturating_sub(1);
        if state.0 == 0 {
            if let Some(waker) = state.1.take() {
                waker.wake();
            }
        }
    }

    pub fn wait(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(|cx: &mut Context<'_>| {
            let mut state = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if state.0 == 0 {
                return Poll::Ready(());
            }
            state.1 = Some(cx.waker().clone());
            Poll::Pending
        })
    }
}

/// A task's result for an executor without join handles (embassy): filled once, awaited once.
#[derive(Default)]
pub struct Slot(Mutex<(Option<u64>, Option<Waker>)>);

impl Slot {
    pub fn fill(&self, value: u64) {
        let mut state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        state.0 = Some(value);
        if let Some(waker) = state.1.take() {
            waker.wake();
        }
    }

    pub fn take(self: Arc<Self>) -> impl Future<Output = u64> + Send + 'static {
        std::future::poll_fn(move |cx: &mut Context<'_>| {
            let mut state = self.0.lock().unwrap_or_else(|e| e.into_inner());
            match state.0.take() {
                Some(value) => Poll::Ready(value),
                None => {
                    state.1 = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
    }
}

/// Runs every task at once, on the caller, with no runtime: the patterns' bookkeeping alone.
/// What a round costs with it, less the tasks' work, is the harness's own cost per task
/// (`cargo run --release -p taskmeter-worker --example harness_cost`).
#[derive(Clone)]
pub struct Inline;

impl Spawn for Inline {
    fn start(&self, task: impl Future<Output = u64> + Send + 'static) -> impl Future<Output = u64> + 'static {
        std::future::ready(embassy_futures::block_on(task))
    }
    fn detach(&self, task: impl Future<Output = ()> + Send + 'static) {
        embassy_futures::block_on(task)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_starts_completes_and_checks_width_times_steps_tasks() {
        for pattern in [Pattern::Trivial, Pattern::Chain, Pattern::Stencil] {
            let r = Round { pattern, width: 3, steps: 4, iters: 10, expected: busy(10, false) };
            let before = COUNTS.snapshot();
            embassy_futures::block_on(async_round(&Inline, r));
            thread_round(r).unwrap();
            let after = COUNTS.snapshot();
            assert_eq!([after[0] - before[0], after[1] - before[1]], [24, 24], "{pattern:?}");
        }
        // A wrong expectation is counted for every task, once.
        let before = COUNTS.snapshot();
        let r = Round { pattern: Pattern::Chain, width: 2, steps: 3, iters: 10, expected: 0 };
        embassy_futures::block_on(async_round(&Inline, r));
        assert_eq!(COUNTS.snapshot()[2] - before[2], 6);
    }
}
