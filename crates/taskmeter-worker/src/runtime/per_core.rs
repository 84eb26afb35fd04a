//! What monoio, glommio and compio share: they run on io_uring, so whether this process may use
//! it decides whether they can run at all; and they are thread-per-core runtimes, each thread its
//! own runtime whose tasks are local (`!Send`) and never move, so a worker spreads its units over
//! one such thread per core it may use.

use super::Started;
use crate::granularity::{self, async_round, Round, Rounds, Spawn};
use crate::workload::LoopContext;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, OnceLock};
use taskmeter_protocol::{GrainPlan, Point};

/// One thread's runtime of a thread-per-core runtime.
pub trait LocalRuntime: Sized {
    /// Its name in messages.
    const NAME: &'static str;
    /// Makes this thread's runtime, for up to `tasks` tasks in flight.
    fn build(tasks: u32) -> Result<Self, String>;
    /// Runs `future` on this thread's runtime to its end.
    fn block_on<F: Future>(&mut self, future: F) -> F::Output;
    /// Starts a local task on the current thread's runtime; its handle gives the result, or why
    /// there is none.
    fn spawn<F: Future + 'static>(future: F) -> impl Future<Output = Result<F::Output, String>> + 'static;
    /// Starts a local task that nobody awaits.
    fn detach<F: Future<Output = ()> + 'static>(future: F);
}

/// Runs up to `units` units on `threads` threads (unit `u` on thread `(u - 1) % threads`), each
/// thread its own runtime `R` running its units as local tasks made there by `make`, and returns
/// their results in unit order. Every thread makes its runtime before any unit is created, so
/// a runtime that cannot start (io_uring refused, no locked memory) fails the worker at once.
pub fn run<R: LocalRuntime, Out: Send, Fut: Future<Output = Out> + 'static>(
    ctx: &'static LoopContext,
    threads: u32,
    units: u32,
    make: impl Fn(u32) -> Fut + Sync,
) -> Result<Started<Out>, crate::WorkerError> {
    let (units, start_error) = super::startable(ctx, units);
    let threads = threads.clamp(1, units.max(1));
    let (built_tx, built) = mpsc::channel::<Result<(), String>>();
    let per_thread = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        let mut gos = Vec::new();
        let mut failure = None;
        for t in 0..threads {
            let (go_tx, go) = mpsc::channel::<bool>();
            let (make, built_tx) = (&make, built_tx.clone());
            let spawned = std::thread::Builder::new().name(format!("{}-{t}", R::NAME)).spawn_scoped(scope, move || {
                let runtime = R::build(units.div_ceil(threads));
                let _ = built_tx.send(runtime.as_ref().map(|_| ()).map_err(Clone::clone));
                match (runtime, go.recv()) {
                    (Ok(mut runtime), Ok(true)) => runtime.block_on(async {
                        let mine = (t + 1..=units).step_by(threads as usize);
                        let tasks: Vec<_> = mine.map(|unit| (unit, R::spawn(make(unit)))).collect();
                        let mut outputs = Vec::with_capacity(tasks.len());
                        for (unit, task) in tasks {
                            outputs.push((unit, task.await?));
                        }
                        Ok::<_, String>(outputs)
                    }),
                    _ => Ok(Vec::new()),
                }
            });
            match spawned {
                Ok(handle) => (handles.push(handle), gos.push(go_tx)),
                Err(e) => {
                    failure = Some(format!("could not spawn a thread of its own: {e}"));
                    break;
                }
            };
        }
        for _ in 0..handles.len() {
            if let Ok(Err(e)) = built.recv() {
                failure.get_or_insert(e);
            }
        }
        if failure.is_none() {
            ctx.gate.begin_creating();
        }
        for go in gos {
            let _ = go.send(failure.is_none());
        }
        if failure.is_none() {
            // Spawning a task cannot fail: every unit is created.
            ctx.gate.all_created(units, start_error.clone());
        }
        let joined = handles.into_iter().map(|h| h.join().map_err(|_| format!("a {} thread panicked", R::NAME)));
        let outputs = joined.collect::<Result<Result<Vec<_>, String>, String>>();
        (failure, outputs)
    });
    match per_thread {
        (Some(reason), _) => Err(format!("could not start {}: {reason}", R::NAME).into()),
        (None, outputs) => {
            let mut outputs: Vec<(u32, Out)> = outputs??.into_iter().flatten().collect();
            outputs.sort_by_key(|(unit, _)| *unit);
            Ok(Started { outputs: outputs.into_iter().map(|(_, out)| out).collect(), start_error })
        }
    }
}

/// Local tasks of the current thread's runtime `R`.
struct LocalTasks<R>(PhantomData<fn() -> R>);

impl<R> Clone for LocalTasks<R> {
    fn clone(&self) -> Self {
        LocalTasks(PhantomData)
    }
}

impl<R: LocalRuntime + 'static> Spawn for LocalTasks<R> {
    fn start(&self, task: impl Future<Output = u64> + Send + 'static) -> impl Future<Output = u64> + 'static {
        let handle = R::spawn(task);
        // A task that failed has no result: it counts as a wrong one.
        async move { handle.await.unwrap_or(u64::MAX) }
    }
    fn detach(&self, task: impl Future<Output = ()> + Send + 'static) {
        R::detach(task);
    }
}

impl<R: LocalRuntime + 'static> Rounds for LocalTasks<R> {
    fn cores(&self) -> u32 {
        1
    }
    async fn round(&self, r: Round) -> Result<(), String> {
        async_round(self, r).await;
        Ok(())
    }
}

/// Measures the plan's grains with a local task of `R` per task, on one thread: its tasks never
/// leave the thread that started them, and a round's tasks are started by one coordinator.
pub fn grains<R: LocalRuntime + 'static>(
    grain: &'static GrainPlan,
    warmup_ns: u64,
    duration_ns: u64,
    stop: &'static AtomicBool,
    send: fn(&Point),
) -> Result<bool, String> {
    let mut runtime = R::build(0).map_err(|e| format!("could not start {}: {e}", R::NAME))?;
    runtime.block_on(async {
        R::spawn(async move {
            granularity::measure(grain, warmup_ns, duration_ns, &LocalTasks::<R>(PhantomData), stop, send).await
        })
        .await?
    })
}

/// Whether this process may use io_uring: `io_uring_setup` of a one-entry ring, closed at once,
/// asked once per process. When refused, what refused it and the line that grants it.
pub fn io_uring_available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE.get_or_init(probe_io_uring).clone()
}

fn probe_io_uring() -> Result<(), String> {
    // struct io_uring_params is 120 bytes; all zero asks for the defaults.
    let mut params = [0u64; 15];
    // SAFETY: io_uring_setup(entries, params) with a writable params block; a ring it returns
    // is a file descriptor we own and close.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr()) };
    if fd >= 0 {
        // SAFETY: closes the descriptor just made.
        unsafe { libc::close(fd as libc::c_int) };
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    let sysctl = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled").unwrap_or_default();
    let seccomp = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["Seccomp:", "2"]);
    Err(match (error.raw_os_error().unwrap_or(0), sysctl.trim()) {
        (libc::EPERM, "2") => "io_uring is disabled on this machine (kernel.io_uring_disabled = 2); \
                               `sysctl kernel.io_uring_disabled=0` enables it"
            .into(),
        (libc::EPERM, "1") if !seccomp => "io_uring is reserved to root and kernel.io_uring_group \
                                          (kernel.io_uring_disabled = 1); `sysctl kernel.io_uring_disabled=0` opens it"
            .into(),
        (libc::EPERM, _) => format!(
            "io_uring_setup is refused with EPERM by a seccomp filter ({}: Docker's default profile refuses \
             io_uring): run with `docker run --security-opt seccomp=unconfined`, or a profile that allows \
             io_uring_setup, io_uring_enter and io_uring_register",
            if seccomp { "this process runs under one" } else { "or a security module" }
        ),
        (libc::ENOSYS, _) => "this kernel has no io_uring (io_uring_setup: ENOSYS; Linux 5.1 or newer with \
                              CONFIG_IO_URING, and no sandbox such as gVisor that answers ENOSYS)"
            .into(),
        (libc::ENOMEM, _) => "io_uring_setup: not enough locked memory for a ring (kernels before 5.12 count \
                              rings in RLIMIT_MEMLOCK): raise it with `ulimit -l`"
            .into(),
        _ => format!("io_uring_setup failed: {error}"),
    })
}

/// glommio's reactor refuses to start under 512 KiB of lockable memory (RLIMIT_MEMLOCK): it
/// registers its I/O buffers with the kernel.
pub fn glommio_available() -> Result<(), String> {
    io_uring_available()?;
    const NEEDED: u64 = 512 * 1024;
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: reads this process's limit into a struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } != 0 || limit.rlim_cur >= NEEDED {
        return Ok(());
    }
    Err(format!(
        "glommio needs 512 KiB of locked memory and RLIMIT_MEMLOCK is {} KiB: raise it with `ulimit -l 512` \
         (or `docker run --ulimit memlock=524288`)",
        limit.rlim_cur / 1024
    ))
}
