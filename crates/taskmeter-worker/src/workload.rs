//! The work loop of the `sleep` experiment, written once and shared by every in-process runtime.
//! `protocol/README.md` ("The work loop, exactly") is its specification.

use crate::clock::now_ns;
use crate::ring::Ring;
use event_listener::Listener;
use std::future::Future;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use taskmeter_protocol::{Experiment, Mode, Plan, Sample, UnitEnd, Window};

/// One step of the busy work, hidden from the optimiser.
#[inline(always)]
fn busy_step(total: u64) -> u64 {
    let total = black_box(total.wrapping_add(1));
    black_box(total.wrapping_mul(3) / 2)
}

/// Busy work for OS threads: `iters` steps, yielding the CPU after each if asked.
pub fn busy(iters: u64, yield_each_step: bool) -> u64 {
    let mut total = 0;
    for _ in 0..iters {
        total = busy_step(total);
        if yield_each_step {
            std::thread::yield_now();
        }
    }
    black_box(total)
}

/// Busy work for async runtimes: the same steps, and each yield is really awaited.
pub async fn busy_async<T: AsyncTimer>(iters: u64, yield_each_step: bool) -> u64 {
    if !yield_each_step {
        return busy(iters, false);
    }
    let mut total = 0;
    for _ in 0..iters {
        total = busy_step(total);
        T::yield_now().await;
    }
    black_box(total)
}

/// The value of `busy(iters)`, computed without the optimiser barriers, to check workers against.
pub fn busy_reference(iters: u64) -> u64 {
    (0..iters).fold(0u64, |t, _| t.wrapping_add(1).wrapping_mul(3) / 2)
}

/// The start gate of the protocol's "Starting units": every unit prepares its ring and parks
/// here; once all the units started so far have arrived and the worker has said how many there
/// are, `run_start` is read and the gate opens. The last to arrive opens it, so no runtime needs
/// a task of its own to wait for the others.
pub struct StartGate {
    warmup_ns: u64,
    duration_ns: u64,
    arrived: AtomicU32,
    /// Units that will arrive, once known (`u32::MAX` until the worker stops creating units).
    expected: AtomicU32,
    create_start_ns: AtomicU64,
    /// Why the start stopped short, once known.
    start_error: Mutex<Option<String>>,
    window: OnceLock<Window>,
    /// The worker gave up before the gate opened (unit 1 could not start).
    abandoned: AtomicBool,
    opened: event_listener::Event,
    arrivals: event_listener::Event,
}

impl StartGate {
    fn new(plan: &Plan) -> StartGate {
        StartGate {
            warmup_ns: plan.warmup_ns,
            duration_ns: plan.duration_ns,
            arrived: AtomicU32::new(0),
            expected: AtomicU32::new(u32::MAX),
            create_start_ns: AtomicU64::new(0),
            start_error: Mutex::new(None),
            window: OnceLock::new(),
            abandoned: AtomicBool::new(false),
            opened: event_listener::Event::new(),
            arrivals: event_listener::Event::new(),
        }
    }

    /// The worker begins creating units now.
    pub fn begin_creating(&self) {
        self.create_start_ns.store(now_ns(), Ordering::SeqCst);
    }

    /// The worker has created `units` units and will create no more (`start_error`: why not
    /// the plan's number).
    pub fn all_created(&self, units: u32, start_error: Option<String>) {
        *self.start_error.lock().unwrap_or_else(|e| e.into_inner()) = start_error;
        self.expected.store(units, Ordering::SeqCst);
        if self.arrived.load(Ordering::SeqCst) >= units {
            self.open();
        }
    }

    /// A unit has prepared its storage (or failed before it could): it waits for the gate, or
    /// opens it if it is the last.
    pub fn arrive(&self) {
        let arrived = self.arrived.fetch_add(1, Ordering::SeqCst) + 1;
        self.arrivals.notify(usize::MAX);
        if arrived >= self.expected.load(Ordering::SeqCst) {
            self.open();
        }
    }

    fn open(&self) {
        self.window.get_or_init(|| {
            let run_start_ns = now_ns();
            let measure_start_ns = run_start_ns + self.warmup_ns;
            Window {
                create_start_ns: self.create_start_ns.load(Ordering::SeqCst).min(run_start_ns),
                run_start_ns,
                measure_start_ns,
                end_ns: measure_start_ns + self.duration_ns,
            }
        });
        self.opened.notify(usize::MAX);
    }

    /// The run's window, once the gate is open.
    pub fn window(&self) -> Option<Window> {
        self.window.get().copied()
    }

    /// Units started and why the start stopped short (known once the gate is open).
    pub fn started(&self) -> (u32, Option<String>) {
        (self.expected.load(Ordering::SeqCst), self.start_error.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// The worker will not open the gate: wakes whoever waits for it.
    pub fn abandon(&self) {
        self.abandoned.store(true, Ordering::SeqCst);
        self.opened.notify(usize::MAX);
    }

    /// Blocks until the gate opens (its window) or is abandoned (None), without arriving.
    pub fn wait_open(&self) -> Option<Window> {
        loop {
            if let Some(window) = self.window() {
                return Some(window);
            }
            if self.abandoned.load(Ordering::SeqCst) {
                return None;
            }
            let listener = self.opened.listen();
            if self.window().is_none() && !self.abandoned.load(Ordering::SeqCst) {
                listener.wait();
            }
        }
    }

    /// The window if the gate is open, or a listener that fires when it opens.
    fn window_or_listener(&self) -> Result<Window, event_listener::EventListener> {
        if let Some(window) = self.window() {
            return Ok(window);
        }
        let listener = self.opened.listen();
        // Opened between the check and the listen: the listener would wait for ever.
        self.window().ok_or(listener)
    }

    /// Parks the calling OS thread until the gate opens.
    pub fn pass_blocking(&self) -> Window {
        self.arrive();
        loop {
            match self.window_or_listener() {
                Ok(window) => return window,
                Err(listener) => listener.wait(),
            }
        }
    }

    /// Parks the calling task until the gate opens.
    pub async fn pass(&self) -> Window {
        self.arrive();
        loop {
            match self.window_or_listener() {
                Ok(window) => return window,
                Err(listener) => listener.await,
            }
        }
    }

    /// Blocks until at least `units` units have arrived (their threads and storage exist).
    pub fn wait_for_arrivals(&self, units: u32) {
        while self.arrived.load(Ordering::SeqCst) < units {
            let listener = self.arrivals.listen();
            if self.arrived.load(Ordering::SeqCst) >= units {
                break;
            }
            listener.wait();
        }
    }
}

/// Where sample frames go: the sample file (protocol: "Streams"), in one write each call, so
/// that frames written by the writer and by the units never interleave.
pub type SampleSink = Box<dyn Fn(&[u8]) -> std::io::Result<()> + Send + Sync>;

/// What every unit of one worker shares.
pub struct LoopContext {
    pub plan: Plan,
    pub gate: StartGate,
    pub stop: &'static AtomicBool,
    /// When the worker read the plan: `start_limit_ns` counts from here.
    pub plan_read_ns: u64,
    /// The counter of `atomic-sum`, shared by every unit.
    pub counter: AtomicU64,
    /// Each unit's ring and origin, once the unit has made them (index: unit - 1).
    slots: Box<[OnceLock<UnitSlot>]>,
    /// The runtime's own view of the measured window, when it has one (protocol frame `V`).
    pub view: OnceLock<taskmeter_protocol::frames::RuntimeView>,
    /// Where the writer, and a unit whose ring is full, write sample frames.
    pub samples: SampleSink,
}

/// What the writer reads of a unit: its ring and, once it passed the gate, its origin.
pub struct UnitSlot {
    pub ring: Ring,
    origin_ns: AtomicU64,
}

impl UnitSlot {
    /// The unit's origin; read after taking a sample from its ring, it is always set.
    pub fn origin_ns(&self) -> u64 {
        self.origin_ns.load(Ordering::Acquire)
    }
}

impl LoopContext {
    pub fn new(plan: Plan, plan_read_ns: u64, stop: &'static AtomicBool, samples: SampleSink) -> LoopContext {
        let slots = (0..plan.units).map(|_| OnceLock::new()).collect();
        LoopContext {
            gate: StartGate::new(&plan),
            plan,
            stop,
            plan_read_ns,
            counter: AtomicU64::new(0),
            slots,
            view: OnceLock::new(),
            samples,
        }
    }

    /// Why unit `unit` must not be started, if the start limit has passed (unit 1 always starts).
    pub fn start_refused(&self, unit: u32) -> Option<String> {
        let elapsed = now_ns().saturating_sub(self.plan_read_ns);
        (unit > 1 && elapsed >= self.plan.start_limit_ns).then(|| {
            format!(
                "start limit of {} reached after {} units",
                taskmeter_protocol::format_duration_spec(self.plan.start_limit_ns),
                unit - 1
            )
        })
    }

    /// The units that have made their ring, with their ids.
    pub fn slots(&self) -> impl Iterator<Item = (u32, &UnitSlot)> {
        self.slots.iter().enumerate().filter_map(|(i, slot)| Some((i as u32 + 1, slot.get()?)))
    }
}

/// What one unit measured, besides the samples its ring sent.
pub struct UnitRun {
    pub end: UnitEnd,
    pub busy_result: Option<u64>,
    /// The wake-up of its last sample (its origin if none), for `selftest`.
    pub last_wake_ns: u64,
}

/// How a unit sleeps in one iteration.
pub enum Sleep {
    For(u64),
    Until(u64),
}

/// The bookkeeping of one unit's loop: periods, deadlines, missed periods and the samples.
pub struct UnitLoop<'a> {
    ctx: &'a LoopContext,
    unit: u32,
    slot: &'a UnitSlot,
    k: u64,
    next_ns: u64,
    /// The run's times, cached from the gate so the hot path reads no shared state.
    measure_start_ns: u64,
    end_ns: u64,
    /// The result of the last busy phase, None until one ran.
    pub busy_result: Option<u64>,
    last_wake_ns: u64,
    end: UnitEnd,
    /// The frame a unit whose ring is full writes itself (made at its first such write).
    own_frame: Vec<u8>,
}

impl<'a> UnitLoop<'a> {
    /// Makes the unit's ring (before the start gate: nothing here is measured).
    pub fn new(ctx: &'a LoopContext, unit: u32) -> UnitLoop<'a> {
        let ring = if ctx.plan.sleep.schedule.sleeps() { ctx.plan.ring } else { 1 };
        let slot = ctx.slots[unit as usize - 1]
            .get_or_init(|| UnitSlot { ring: Ring::new(ring), origin_ns: AtomicU64::new(0) });
        UnitLoop {
            ctx,
            unit,
            slot,
            k: 0,
            next_ns: 0,
            measure_start_ns: 0,
            end_ns: 0,
            busy_result: None,
            last_wake_ns: 0,
            end: UnitEnd { unit, origin_ns: 0, iterations: 0, measured_iterations: 0, lost: 0 },
            own_frame: Vec::new(),
        }
    }

    /// The gate has opened: the unit's loop starts now (its `origin`).
    fn start(&mut self, window: Window) {
        let origin_ns = now_ns();
        (self.end.origin_ns, self.last_wake_ns) = (origin_ns, origin_ns);
        self.slot.origin_ns.store(origin_ns, Ordering::Release);
        self.next_ns = origin_ns + self.ctx.plan.sleep.schedule.expected(self.unit, 0);
        (self.measure_start_ns, self.end_ns) = (window.measure_start_ns, window.end_ns);
    }

    /// Parks the unit's OS thread at the start gate, then starts the loop.
    pub fn pass_gate_blocking(&mut self) {
        let window = self.ctx.gate.pass_blocking();
        self.start(window);
    }

    /// Parks the unit's task at the start gate, then starts the loop.
    pub async fn pass_gate(&mut self) {
        let window = self.ctx.gate.pass().await;
        self.start(window);
    }

    pub fn busy_iters(&self) -> u64 {
        self.ctx.plan.busy.iters
    }

    pub fn yields(&self) -> bool {
        self.ctx.plan.busy.yield_each_step
    }

    /// Starts an iteration: its start time, or None when the unit must stop.
    #[inline]
    pub fn begin(&self) -> Option<u64> {
        let t0 = now_ns();
        (t0 < self.end_ns && !self.ctx.stop.load(Ordering::Relaxed)).then_some(t0)
    }

    /// After the busy phase ended at `busy_end`: the intended wake-up time and the sleep to do.
    #[inline]
    pub fn sleep_after(&self, busy_end: u64) -> (u64, Sleep) {
        let expected = self.ctx.plan.sleep.schedule.expected(self.unit, self.k);
        match self.ctx.plan.sleep.mode {
            Mode::Relative => (busy_end + expected, Sleep::For(expected)),
            Mode::Absolute => (self.next_ns, Sleep::Until(self.next_ns)),
        }
    }

    /// Whether the unit sleeps (false: the schedule `none`, one yield per iteration instead).
    pub fn sleeps(&self) -> bool {
        self.ctx.plan.sleep.schedule.sleeps()
    }

    /// Counts an iteration that started at `start`, and makes the `atomic-sum` increment.
    #[inline]
    pub fn count(&mut self, start: u64) {
        if self.ctx.plan.experiment == Experiment::AtomicSum {
            self.ctx.counter.fetch_add(1, Ordering::SeqCst);
        }
        self.end.iterations += 1;
        self.end.measured_iterations += u64::from(start >= self.measure_start_ns);
    }

    /// Ends a sleeping iteration: reads the wake-up time, advances the schedule, counts the
    /// iteration and puts the sample in the ring (writing the ring itself first when it is full).
    #[inline]
    pub fn finish(&mut self, start: u64, busy_end: u64, intended: u64) {
        let wake = now_ns();
        let schedule = self.ctx.plan.sleep.schedule;
        let period = self.k;
        self.k += 1;
        // Absolute mode skips the periods whose deadlines the wake passed (the orchestrator
        // derives how many from the wake: they are not sent).
        if self.ctx.plan.sleep.mode == Mode::Absolute {
            self.next_ns += schedule.expected(self.unit, self.k);
            while wake > self.next_ns {
                self.k += 1;
                self.next_ns += schedule.expected(self.unit, self.k);
            }
        }
        self.count(start);
        self.last_wake_ns = wake;
        let sample = Sample::from_wire_words(period, [start, busy_end, intended, wake]);
        if !self.slot.ring.push(sample) {
            self.write_own_ring();
            let put = self.slot.ring.push(sample);
            debug_assert!(put, "a ring taken or drained has room");
        }
    }

    /// The ring is full (its writer fell behind): the unit writes what it holds as an `F` frame
    /// itself, so no sample is lost however long the writer waits for a CPU. A failed write
    /// loses those samples, counted.
    #[cold]
    fn write_own_ring(&mut self) {
        self.own_frame.clear();
        let taken = self.slot.ring.take_own(self.unit, self.end.origin_ns, &mut self.own_frame);
        if taken > 0 && (self.ctx.samples)(&self.own_frame).is_err() {
            self.end.lost += taken;
        }
    }

    pub fn into_run(self) -> UnitRun {
        UnitRun { end: self.end, busy_result: self.busy_result, last_wake_ns: self.last_wake_ns }
    }
}

/// The sleep and yield of OS threads.
pub trait BlockingTimer {
    fn sleep_for(ns: u64);
    fn sleep_until(deadline_ns: u64);
}

/// `std::thread::sleep` (nanosleep) and `clock_nanosleep(TIMER_ABSTIME)`.
pub struct OsThread;

impl BlockingTimer for OsThread {
    fn sleep_for(ns: u64) {
        std::thread::sleep(std::time::Duration::from_nanos(ns));
    }
    fn sleep_until(deadline_ns: u64) {
        crate::clock::sleep_until_ns(deadline_ns);
    }
}

/// One unit on an OS thread: blocking sleeps, `sched_yield` between busy steps.
pub fn run_unit_blocking<T: BlockingTimer>(ctx: &LoopContext, unit: u32) -> UnitRun {
    let mut lp = UnitLoop::new(ctx, unit);
    lp.pass_gate_blocking();
    let (iters, yields) = (lp.busy_iters(), lp.yields());
    while let Some(start) = lp.begin() {
        let busy_end = if iters > 0 {
            lp.busy_result = Some(busy(iters, yields));
            now_ns()
        } else {
            start
        };
        if !lp.sleeps() {
            std::thread::yield_now();
            lp.count(start);
            continue;
        }
        let (intended, sleep) = lp.sleep_after(busy_end);
        match sleep {
            Sleep::For(ns) => T::sleep_for(ns),
            Sleep::Until(ns) => T::sleep_until(ns),
        }
        lp.finish(start, busy_end, intended);
    }
    lp.into_run()
}

/// A timer that never sleeps: the work loop with the sleep call removed, to measure what the
/// loop itself costs (`selftest`).
pub struct NoSleep;

impl BlockingTimer for NoSleep {
    fn sleep_for(_: u64) {}
    fn sleep_until(_: u64) {}
}

impl AsyncTimer for NoSleep {
    fn sleep_for(_: u64) -> impl Future<Output = ()> {
        std::future::ready(())
    }
    fn sleep_until(_: u64) -> impl Future<Output = ()> {
        std::future::ready(())
    }
    fn yield_now() -> impl Future<Output = ()> {
        std::future::ready(())
    }
}

/// The timer and yield of an async runtime. Its futures need not be `Send` (the thread-per-core
/// runtimes' are not); a runtime that moves tasks between threads names its concrete timer,
/// whose futures the compiler then sees to be `Send`.
pub trait AsyncTimer {
    fn sleep_for(ns: u64) -> impl Future<Output = ()>;
    fn sleep_until(deadline_ns: u64) -> impl Future<Output = ()>;
    fn yield_now() -> impl Future<Output = ()>;
    /// Gives the current task the priority of class `class` (0 the highest), where the
    /// runtime has task priorities.
    fn enter_class(_class: u32) -> impl Future<Output = ()> {
        std::future::ready(())
    }
}

/// One unit as a task of an async runtime.
pub async fn run_unit_async<T: AsyncTimer>(ctx: &LoopContext, unit: u32) -> UnitRun {
    if ctx.plan.priority_classes > 1 {
        T::enter_class(ctx.plan.class_of(unit)).await;
    }
    let mut lp = UnitLoop::new(ctx, unit);
    lp.pass_gate().await;
    let (iters, yields) = (lp.busy_iters(), lp.yields());
    while let Some(start) = lp.begin() {
        let busy_end = if iters > 0 {
            lp.busy_result = Some(busy_async::<T>(iters, yields).await);
            now_ns()
        } else {
            start
        };
        if !lp.sleeps() {
            T::yield_now().await;
            lp.count(start);
            continue;
        }
        let (intended, sleep) = lp.sleep_after(busy_end);
        match sleep {
            Sleep::For(ns) => T::sleep_for(ns).await,
            Sleep::Until(ns) => T::sleep_until(ns).await,
        }
        lp.finish(start, busy_end, intended);
    }
    lp.into_run()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_matches_the_protocol_reference_values() {
        for (iters, value) in [(0, 0), (1, 1), (2, 3), (3, 6), (10, 138), (1000, 4392425272205558923)] {
            assert_eq!(busy_reference(iters), value);
            assert_eq!(busy(iters, false), value);
            assert_eq!(busy(iters.min(20), true), busy_reference(iters.min(20)));
        }
    }
}
