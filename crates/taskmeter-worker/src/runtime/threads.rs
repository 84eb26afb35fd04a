//! `thread`: one OS thread per unit, and the priority classes of OS threads.

use super::Started;
use crate::granularity::{self, Round, Rounds};
use crate::workload::LoopContext;
use std::sync::atomic::AtomicBool;
use taskmeter_protocol::{GrainPlan, Point};

/// The granularity experiment's tasks: a new OS thread each, joined.
struct Threads;

impl Rounds for Threads {
    fn cores(&self) -> u32 {
        granularity::cpus()
    }
    async fn round(&self, r: Round) -> Result<(), String> {
        granularity::thread_round(r)
    }
}

/// Measures the plan's grains with a thread per task.
pub fn grains(
    grain: &'static GrainPlan,
    warmup_ns: u64,
    duration_ns: u64,
    stop: &'static AtomicBool,
    send: fn(&Point),
) -> Result<bool, String> {
    embassy_futures::block_on(granularity::measure(grain, warmup_ns, duration_ns, &Threads, stop, send))
}

/// The worker's own threads besides its units: its main thread, the writer and the thread that
/// watches stdin (the machine's room was measured before the worker existed).
const OWN_THREADS: u64 = 3;

/// Runs up to `units` units, each `make(unit)` on its own thread, and returns their results in
/// order. Every unit parks at the start gate, so all threads exist before the run starts. The
/// machine's room for threads (the plan's), a thread the OS refuses, the memory maps, or the
/// start limit end the start: the units already started still run, and the reason is returned
/// with them.
pub fn run<Out, Body>(
    ctx: &'static LoopContext,
    units: u32,
    make: impl Fn(u32) -> Body,
) -> Result<Started<Out>, crate::WorkerError>
where
    Out: Send + 'static,
    Body: FnOnce() -> Out + Send + 'static,
{
    let mut handles = Vec::with_capacity(units as usize);
    let mut start_error = None;
    let mut maps = MapBudget::new(ctx.plan.room.max_map_count);
    ctx.gate.begin_creating();
    let room = &ctx.plan.room;
    let room_threads = room.threads.map(|r| r.saturating_sub(OWN_THREADS));
    for unit in 1..=units {
        let beyond_room = room_threads.filter(|r| unit > 1 && u64::from(unit) > *r).map(|r| {
            format!(
                "thread stops at {r} units, the machine's room: the plan leaves room for {} threads, of which \
                 {OWN_THREADS} are the worker's own; {}",
                room.threads.unwrap_or(0),
                room.threads_why
            )
        });
        if let Some(reason) = beyond_room.or_else(|| ctx.start_refused(unit)).or_else(|| maps.refuses(unit, &ctx.gate))
        {
            start_error = Some(reason);
            break;
        }
        let body = make(unit);
        let guarded = move || {
            let _arrival = ArriveIfPanicking(&ctx.gate);
            body()
        };
        match std::thread::Builder::new().name(format!("unit-{unit}")).spawn(guarded) {
            Ok(handle) => handles.push(handle),
            Err(e) if unit > 1 => {
                // Other processes took the room measured before this worker started.
                start_error = Some(format!(
                    "could not spawn the thread of unit {unit}: {e} (the machine's room as this worker started: {})",
                    room.threads_why
                ));
                break;
            }
            Err(e) => return Err(format!("could not spawn the thread of unit 1: {e}").into()),
        }
    }
    ctx.gate.all_created(handles.len() as u32, start_error.clone());
    let outputs = handles
        .into_iter()
        .map(|h| h.join().map_err(|panic| format!("a unit thread failed: {}", panic_message(&panic))))
        .collect::<Result<_, _>>()?;
    Ok(Started { outputs, start_error })
}

/// A unit that panics before it reaches the start gate still arrives, so the others are not
/// kept waiting for it (one arriving again after the gate opened changes nothing).
struct ArriveIfPanicking(&'static crate::workload::StartGate);

impl Drop for ArriveIfPanicking {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.arrive();
        }
    }
}

/// Keeps the start below `vm.max_map_count` (the plan's `max_map_count`, read by the
/// orchestrator; no check when it is unknown). Each std thread maps its stack and guard page, a
/// signal stack and its guard, and its unit maps its ring of samples when it is large; a
/// failed mmap of the signal stack aborts the process (std cannot report it), so the start
/// must stop before the limit. Rather than trust a constant, it counts the maps really in
/// use (/proc/self/maps) at checkpoints, once the units started so far have reached the start
/// gate (so everything they map exists), and measures what one unit costs. Between checkpoints
/// it spends at most half the room left, so an underestimate cannot overshoot.
struct MapBudget {
    limit: Option<u64>,
    /// Maps in use and units started at the first checkpoint.
    baseline: Option<(u64, u32)>,
    /// The unit at which to count again.
    next_check: u32,
}

/// Maps kept free for what the worker maps after the start (output buffers, the runtime).
const SPARE_MAPS: u64 = 1024;
/// What a thread is assumed to map before one has been measured: stack, guard, signal stack, guard.
const FIRST_GUESS_MAPS_PER_UNIT: f64 = 4.0;

impl MapBudget {
    fn new(limit: Option<u64>) -> MapBudget {
        MapBudget { limit, baseline: None, next_check: 2 }
    }

    /// Why unit `unit` must not be started, if the maps left cannot take it.
    fn refuses(&mut self, unit: u32, gate: &crate::workload::StartGate) -> Option<String> {
        let limit = self.limit?;
        if unit < self.next_check {
            return None;
        }
        let started = unit - 1;
        gate.wait_for_arrivals(started);
        let in_use = count_maps()?;
        let per_unit = match self.baseline {
            None => {
                self.baseline = Some((in_use, started));
                FIRST_GUESS_MAPS_PER_UNIT
            }
            Some((base_maps, base_units)) if started > base_units => {
                ((in_use.saturating_sub(base_maps)) as f64 / (started - base_units) as f64).max(1.0)
            }
            Some(_) => FIRST_GUESS_MAPS_PER_UNIT,
        };
        let room = (limit.saturating_sub(in_use + SPARE_MAPS) as f64 / per_unit) as u64;
        if room == 0 {
            return Some(format!(
                "stopped before unit {unit}: {in_use} memory maps in use, {per_unit:.1} per unit measured, and \
                 vm.max_map_count is {limit} (Rust's std aborts the process when a thread's signal stack cannot be mapped)"
            ));
        }
        self.next_check = unit.saturating_add((room / 2).clamp(1, u32::MAX as u64) as u32);
        None
    }
}

/// Memory maps of this process right now.
fn count_maps() -> Option<u64> {
    let maps = std::fs::read("/proc/self/maps").ok()?;
    Some(maps.iter().filter(|b| **b == b'\n').count() as u64)
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    match (panic.downcast_ref::<String>(), panic.downcast_ref::<&str>()) {
        (Some(s), _) => s.clone(),
        (_, Some(s)) => s.to_string(),
        _ => "panicked".into(),
    }
}

/// How the OS-thread units of one worker get their class's priority (protocol: "Priority
/// classes"): nice values under the normal policies, real-time priorities under FIFO and RR.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ThreadPriority {
    None,
    Nice { high: i32, low: i32 },
    RealTime { policy: i32, high: i32, low: i32 },
}

impl ThreadPriority {
    /// What `classes` classes map to, given the worker's own policy and nice value.
    pub fn of_this_worker(classes: u32) -> ThreadPriority {
        if classes < 2 {
            return ThreadPriority::None;
        }
        // SAFETY: plain queries of the calling process's scheduling attributes.
        unsafe {
            let policy = libc::sched_getscheduler(0);
            if policy == libc::SCHED_FIFO || policy == libc::SCHED_RR {
                let mut param: libc::sched_param = std::mem::zeroed();
                libc::sched_getparam(0, &mut param);
                let p = param.sched_priority;
                ThreadPriority::RealTime { policy, high: p, low: (p - 1).max(1) }
            } else {
                let nice = libc::getpriority(libc::PRIO_PROCESS, 0);
                ThreadPriority::Nice { high: nice, low: (nice + 10).min(19) }
            }
        }
    }

    /// The `hello.priority` string.
    pub fn describe(&self) -> String {
        match *self {
            ThreadPriority::None => "none".into(),
            ThreadPriority::Nice { high, low } => format!("nice: high {high}, low {low}"),
            ThreadPriority::RealTime { high, low, .. } => format!("rt-priority: high {high}, low {low}"),
        }
    }

    /// Gives the calling thread the priority of class `class` and checks that it took effect.
    pub fn apply(&self, class: u32) -> Result<(), String> {
        // SAFETY: sets and reads back the calling thread's own scheduling attributes.
        unsafe {
            let tid = libc::gettid() as libc::id_t;
            match *self {
                ThreadPriority::None => Ok(()),
                ThreadPriority::Nice { high, low } => {
                    let nice = if class == 0 { high } else { low };
                    if libc::setpriority(libc::PRIO_PROCESS, tid, nice) != 0 {
                        return Err(format!("setpriority({nice}): {}", std::io::Error::last_os_error()));
                    }
                    match libc::getpriority(libc::PRIO_PROCESS, tid) {
                        n if n == nice => Ok(()),
                        n => Err(format!("asked for nice {nice}, the thread has {n}")),
                    }
                }
                ThreadPriority::RealTime { policy, high, low } => {
                    let param = libc::sched_param { sched_priority: if class == 0 { high } else { low } };
                    match libc::pthread_setschedparam(libc::pthread_self(), policy, &param) {
                        0 => Ok(()),
                        e => Err(format!(
                            "pthread_setschedparam({}): {}",
                            param.sched_priority,
                            std::io::Error::from_raw_os_error(e)
                        )),
                    }
                }
            }
        }
    }
}
