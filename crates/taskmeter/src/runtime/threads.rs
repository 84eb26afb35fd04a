//! `thread`: one OS thread per unit, and the priority classes of OS threads.

use super::Started;
use crate::workload::LoopContext;
use std::sync::atomic::{AtomicU64, Ordering};

/// Unit threads started and not yet finished (a unit started after the end exits at once and
/// gives its memory maps back).
static LIVE: AtomicU64 = AtomicU64::new(0);

/// Runs up to `units` units, each `make(unit)` on its own thread, and returns their results in
/// order. A thread the OS refuses (or the start limit) ends the start: the units already
/// started still run, and the reason is returned with them.
pub fn run<Out, Body>(ctx: &LoopContext, units: u32, make: impl Fn(u32) -> Body) -> Result<Started<Out>, String>
where
    Out: Send + 'static,
    Body: FnOnce() -> Out + Send + 'static,
{
    let mut handles = Vec::with_capacity(units as usize);
    let mut start_error = None;
    let room = threads_the_memory_maps_allow();
    for unit in 1..=units {
        if let Some(reason) = ctx.start_refused(unit) {
            start_error = Some(reason);
            break;
        }
        let alive = LIVE.load(Ordering::Acquire);
        if let Some((room, max_map_count)) = room.filter(|(room, _)| unit > 1 && alive >= *room) {
            start_error = Some(format!(
                "stopped before unit {unit} with {alive} threads alive: vm.max_map_count ({max_map_count}) leaves room \
                 for {room} (4 memory maps each), and Rust's std aborts the process when a thread's signal stack \
                 cannot be mapped"
            ));
            break;
        }
        let body = make(unit);
        LIVE.fetch_add(1, Ordering::AcqRel);
        let counted = move || {
            let out = body();
            LIVE.fetch_sub(1, Ordering::AcqRel);
            out
        };
        match std::thread::Builder::new().name(format!("unit-{unit}")).spawn(counted) {
            Ok(handle) => handles.push(handle),
            Err(e) if unit > 1 => {
                LIVE.fetch_sub(1, Ordering::AcqRel);
                start_error = Some(format!("could not spawn the thread of unit {unit}: {e}"));
                break;
            }
            Err(e) => return Err(format!("could not spawn the thread of unit 1: {e}")),
        }
    }
    let outputs = handles
        .into_iter()
        .map(|h| h.join().map_err(|panic| format!("a unit thread failed: {}", panic_message(&panic))))
        .collect::<Result<_, _>>()?;
    Ok(Started { outputs, start_error })
}

/// How many more threads fit under `vm.max_map_count`, and that limit: each std thread maps its
/// stack, its guard page, and a signal stack with its guard. A failed mmap of the signal stack
/// aborts the process (std cannot report it), so the start must stop before it.
fn threads_the_memory_maps_allow() -> Option<(u64, u64)> {
    const MAPS_PER_THREAD: u64 = 4;
    const SPARE_MAPS: u64 = 1024;
    let max_map_count: u64 = std::fs::read_to_string("/proc/sys/vm/max_map_count").ok()?.trim().parse().ok()?;
    let in_use = std::fs::read_to_string("/proc/self/maps").ok()?.lines().count() as u64;
    Some((max_map_count.saturating_sub(in_use + SPARE_MAPS) / MAPS_PER_THREAD, max_map_count))
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
                        e => Err(format!("pthread_setschedparam({}): {}", param.sched_priority, std::io::Error::from_raw_os_error(e))),
                    }
                }
            }
        }
    }
}
