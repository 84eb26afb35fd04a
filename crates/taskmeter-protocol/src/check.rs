//! The validator every run applies to a worker's frames as they arrive (protocol/README.md,
//! "What the orchestrator checks"). It keeps a few counters per unit, never the samples: each
//! sample, once checked, goes to the caller with what the core derives metrics from.

use crate::busy::busy_reference;
use crate::frames::{Chunk, Done, Frame, Gate, Hello, Point, RuntimeView, Sample, UnitEnd, CLOCK, PRIORITY_MECHANISMS};
use std::collections::{BTreeMap, VecDeque};
use taskmeter_memory::{Lent, UNIT_TABLES};

/// Samples of frames that came before an earlier position of their unit, held until it comes
/// (a writer's frame taken before, and written after, the unit's own): beyond this, a worker
/// is taken to have skipped a position for good.
const HELD_BYTES: usize = 256 << 20;
use crate::plan::{Experiment, Mode, Plan, MAX_WIDTH, PROTOCOL};

/// Why a worker's output was not accepted.
#[derive(Clone, Debug, PartialEq)]
pub enum OutputError {
    /// The worker refused the plan with an `E` frame.
    Refused(String),
    /// The output breaks the protocol.
    Invalid(String),
}

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OutputError::Refused(m) => write!(f, "worker error: {m}"),
            OutputError::Invalid(m) => write!(f, "protocol violation: {m}"),
        }
    }
}

fn invalid<T>(message: String) -> Result<T, OutputError> {
    Err(OutputError::Invalid(message))
}

/// The run's window, fixed by the `G` frame and the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub create_start_ns: u64,
    pub run_start_ns: u64,
    pub measure_start_ns: u64,
    pub end_ns: u64,
}

/// A checked sample, with what the core needs to derive its metrics.
///
/// The check writes one for each sample and the fold reads it back, so it is kept to 72 bytes
/// written in nine stores: the unit, its class and the sample's marks share a word, and the
/// previous wake is a plain word with a mark for "none". With a field each (88 bytes, thirteen
/// stores) the check was bound by its stores, two a cycle here: with this view, a unit's last
/// wake in a word and a loop for each kind of schedule, it went 5.7 to 3.7 ns a sample
/// (`sample_cost`, issue 58).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SampleView {
    pub sample: Sample,
    /// `expected(unit, period)`.
    pub expected_ns: u64,
    /// The unit's previous wake, when `place` has [`HAS_PREVIOUS`] (else 0).
    previous_wake_ns: u64,
    /// The unit (bits 0-31), its class (bits 32-47) and the marks from bit 48 on.
    place: u64,
}

const CLASS_SHIFT: u32 = 32;
/// The sample started at or after `measure_start`.
const MEASURED: u64 = 1 << 48;
/// The sample's iteration began right after its unit wrote its full ring itself.
const AFTER_FLUSH: u64 = 1 << 49;
/// The unit's previous wake is known.
const HAS_PREVIOUS: u64 = 1 << 50;

impl SampleView {
    /// A view of a sample of `unit` in priority class `class` (below 65,536; a plan has one or
    /// two). `previous_wake_ns`: the unit's previous wake (its origin for its first sample), None
    /// after lost samples; `measured`: the sample started at or after `measure_start`.
    #[inline(always)]
    pub fn new(
        unit: u32,
        class: u32,
        sample: Sample,
        expected_ns: u64,
        previous_wake_ns: Option<u64>,
        measured: bool,
    ) -> SampleView {
        debug_assert!(class <= u32::from(u16::MAX), "class {class}");
        let place = u64::from(unit)
            | u64::from(class) << CLASS_SHIFT
            | if measured { MEASURED } else { 0 }
            | if previous_wake_ns.is_some() { HAS_PREVIOUS } else { 0 };
        SampleView { sample, expected_ns, previous_wake_ns: previous_wake_ns.unwrap_or(0), place }
    }

    #[inline(always)]
    pub fn unit(&self) -> u32 {
        self.place as u32
    }

    /// The unit's priority class, 0 the highest.
    #[inline(always)]
    pub fn class(&self) -> u32 {
        (self.place >> CLASS_SHIFT) as u16 as u32
    }

    /// The unit's previous wake (its origin for its first sample); None after lost samples.
    #[inline(always)]
    pub fn previous_wake_ns(&self) -> Option<u64> {
        (self.place & HAS_PREVIOUS != 0).then_some(self.previous_wake_ns)
    }

    /// The sample started at or after `measure_start`.
    #[inline(always)]
    pub fn measured(&self) -> bool {
        self.place & MEASURED != 0
    }

    /// The sample's iteration began right after its unit wrote its full ring itself (an `F`
    /// frame), which may have delayed it: left out of the statistics, and counted.
    #[inline(always)]
    pub fn after_flush(&self) -> bool {
        self.place & AFTER_FLUSH != 0
    }

    /// The same sample, its iteration begun (or not) right after a flush by its unit.
    pub fn with_after_flush(mut self, after_flush: bool) -> SampleView {
        self.place = (self.place & !AFTER_FLUSH) | if after_flush { AFTER_FLUSH } else { 0 };
        self
    }

    /// The same sample, measured or in the warm-up.
    pub fn with_measured(mut self, measured: bool) -> SampleView {
        self.place = (self.place & !MEASURED) | if measured { MEASURED } else { 0 };
        self
    }
}

impl std::fmt::Debug for SampleView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SampleView")
            .field("unit", &self.unit())
            .field("class", &self.class())
            .field("sample", &self.sample)
            .field("expected_ns", &self.expected_ns)
            .field("previous_wake_ns", &self.previous_wake_ns())
            .field("measured", &self.measured())
            .field("after_flush", &self.after_flush())
            .finish()
    }
}

/// A unit's place in its samples: what every frame reads and writes, in one cache line. What
/// only some units need is apart ([`Rare`]), and each `U` frame is kept as it comes: at
/// 100,000 units the states, written whole as the gate opens, are 6.4 MB rather than 19, each
/// 4 KiB of them a page fault (issue 58): a spare table written before the first worker
/// starts, where there is one ([`unit_table_bytes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C, align(64))]
struct UnitState {
    /// The position the unit's next frame must start at to be checked now.
    next_position: u64,
    /// The period the next sample has when none is lost: that of position `next_period_at`.
    next_period: u64,
    /// The position after the last sample checked.
    next_period_at: u64,
    samples: u64,
    measured: u64,
    origin_ns: Option<u64>,
    /// The unit's last wake once it has samples ([`UnitState::last_wake`]), its origin before
    /// (0 before its first frame): a plain word, one store a sample rather than two.
    last_wake_ns: u64,
}

const _: () = assert!(std::mem::size_of::<UnitState>() == 64, "one cache line");

/// What a unit needs only once a frame of it came out of order or its ring was full.
#[derive(Debug, Default)]
struct Rare {
    /// Frames that start past the unit's `next_position`, by their first position.
    held: BTreeMap<u64, Held>,
    /// Positions of samples whose iteration began right after an `F` frame was written.
    after_flush: VecDeque<u64>,
    /// Positions skipped to check frames held past them (their samples were lost).
    skipped: u64,
}

impl UnitState {
    /// The unit's last wake; None before its first sample.
    fn last_wake(&self) -> Option<u64> {
        (self.samples > 0).then_some(self.last_wake_ns)
    }
}

/// A frame's samples, held until its unit's earlier positions have come.
#[derive(Clone, Debug)]
struct Held {
    origin_ns: u64,
    by_unit: bool,
    ends_frame: bool,
    bytes: Vec<u8>,
}

/// What a worker delivered, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivered {
    pub hello: Hello,
    pub gate: Gate,
    pub window: Window,
    /// `U` frames received, by unit id (all of them when `done` is present).
    pub units: Lent<UnitEnd>,
    pub done: Option<Done>,
    pub samples: u64,
    /// The latest wake-up among the samples: with `done` absent, how far the samples reach.
    pub last_wake_ns: Option<u64>,
    /// The runtime's own view of the window (`V`), when it sent one.
    pub view: Option<RuntimeView>,
    /// The granularity experiment's grains, measured (`P`), in the plan's order.
    pub points: Vec<Point>,
    /// `F` frames (a unit wrote its full ring itself) and the samples they held.
    pub flushes: u64,
    pub flushed: u64,
    /// Samples whose iteration began right after such a write (`SampleView::after_flush`).
    pub after_flush: u64,
    /// Each unit's state as its last sample left it (index: unit - 1): moved here as it is, where
    /// copying its parts was 4 MB of fresh memory at 100,000 units.
    states: Lent<UnitState>,
}

/// Where one unit's delivered samples end.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UnitTail {
    /// The unit's origin, when a frame of it came.
    pub origin_ns: Option<u64>,
    /// The period its next sample would have.
    pub next_period: u64,
    pub last_wake_ns: Option<u64>,
}

impl Delivered {
    /// Measured samples of each unit, in the order of their ids.
    pub fn measured_per_unit(&self) -> impl Iterator<Item = u64> + '_ {
        self.states.iter().map(|state| state.measured)
    }

    /// Where `unit`'s samples stopped: what bounds those a cut stream never sent.
    pub fn tail(&self, unit: u32) -> UnitTail {
        let state = (unit as usize).checked_sub(1).and_then(|i| self.states.get(i));
        state.map_or_else(UnitTail::default, |u| UnitTail {
            origin_ns: u.origin_ns,
            next_period: u.next_period,
            last_wake_ns: u.last_wake(),
        })
    }

    pub fn lost(&self) -> u64 {
        self.units.iter().map(|u| u.lost).sum()
    }

    /// A stream cut before its `U` frames: at most how many samples its units made after their
    /// last delivered ones, until `exited_ns` (when the worker was seen to exit) or the window's
    /// end and one longest sleep after it, whichever is first. Samples a unit had put in its
    /// ring but the writer had not yet sent die with the worker; this bounds them by the
    /// schedule: a sample is put at its wake-up, and a unit wakes at most once a period
    /// (absolute mode: no earlier than its deadline) or once its sleep has passed (relative
    /// mode). A wake-up before its deadline, which the row counts as early, could add one.
    /// None with the schedule `none`, which sets no pace to bound them by.
    pub fn unsent_bound(&self, plan: &Plan, exited_ns: u64) -> Option<u64> {
        let schedule = plan.sleep.schedule;
        if !schedule.sleeps() {
            return None;
        }
        let until = exited_ns.min(self.window.end_ns.saturating_add(schedule.max_expected(plan.units)));
        let mut bound = 0u64;
        for unit in 1..=self.gate.units {
            let tail = self.tail(unit);
            // A unit that sent no frame started at the gate at the earliest.
            let origin = tail.origin_ns.unwrap_or(self.window.run_start_ns);
            let first = tail.next_period;
            // From when, and the sleeps through which periods, a wake-up of `first` on waits.
            let (from, before) = match plan.sleep.mode {
                // The deadline of period p: origin + the sleeps through p.
                Mode::Absolute => (origin, 0),
                // After the last wake-up, at least the sleeps from `first` through p.
                Mode::Relative => (
                    tail.last_wake_ns.unwrap_or(origin),
                    first.checked_sub(1).map_or(0, |p| schedule.total_through(unit, p)),
                ),
            };
            let room = until.saturating_sub(from) as u128;
            bound += periods_within(|p| schedule.total_through(unit, p) - before, first, room);
        }
        Some(bound)
    }
}

/// How many periods from `first` on fit, their sleeps added up, in `room` ns: the largest `k`
/// with `through(first + k - 1) <= room`, where `through(p)` is the sleeps from `first` through
/// `p` (increasing in `p`).
fn periods_within(through: impl Fn(u64) -> u128, first: u64, room: u128) -> u64 {
    let fits = |k: u64| k == 0 || through(first + k - 1) <= room;
    let (mut low, mut high) = (0u64, 1u64);
    while fits(high) {
        (low, high) = (high, high.saturating_mul(2));
        if high == u64::MAX / 2 {
            return low;
        }
    }
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if fits(mid) {
            low = mid;
        } else {
            high = mid;
        }
    }
    low
}

/// The bytes of the tables of one entry per unit that checking a worker of `units` units fills
/// (the units' states and their `U` frames), to prepare in `taskmeter_memory::UNIT_TABLES`
/// before the first worker starts.
pub fn unit_table_bytes(units: u32) -> [usize; 2] {
    [units as usize * size_of::<UnitState>(), units as usize * size_of::<UnitEnd>()]
}

/// How a worker's stream ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    /// Every frame up to `D`.
    Complete(Delivered),
    /// Cut after `G` (the worker died, was killed or timed out): what it sent is kept.
    Cut(Delivered),
    /// The worker refused its plan (`E`).
    Refused(String),
    /// The stream ended before the gate opened: nothing was measured.
    Empty { hello: Option<Hello> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Start,
    Hello,
    Running,
    Ending,
    Done,
    Refused,
}

/// Checks one worker's frames, in order, against its plan.
pub struct Checker {
    plan: Plan,
    stage: Stage,
    hello: Option<Hello>,
    gate: Option<Gate>,
    window: Option<Window>,
    units: Lent<UnitState>,
    /// The units that needed more than their state, by unit.
    rare: BTreeMap<u32, Rare>,
    /// The `U` frames, as they came, and whether each unit's has (index: unit - 1).
    ends: Lent<UnitEnd>,
    ended: Vec<bool>,
    done: Option<Done>,
    refusal: Option<String>,
    samples: u64,
    last_wake_ns: Option<u64>,
    view: Option<RuntimeView>,
    points: Vec<Point>,
    held_bytes: usize,
    flushes: u64,
    flushed: u64,
    after_flush: u64,
    /// Positions in every unit's `after_flush`, not yet come.
    after_flush_coming: u64,
}

impl Checker {
    pub fn new(plan: Plan) -> Checker {
        Checker {
            plan,
            stage: Stage::Start,
            hello: None,
            gate: None,
            window: None,
            units: Lent::none(&UNIT_TABLES),
            rare: BTreeMap::new(),
            ends: Lent::none(&UNIT_TABLES),
            ended: Vec::new(),
            done: None,
            refusal: None,
            samples: 0,
            last_wake_ns: None,
            view: None,
            points: Vec::new(),
            held_bytes: 0,
            flushes: 0,
            flushed: 0,
            after_flush: 0,
            after_flush_coming: 0,
        }
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn hello(&self) -> Option<&Hello> {
        self.hello.as_ref()
    }

    pub fn window(&self) -> Option<Window> {
        self.window
    }

    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The stream has no more samples (it was cut): frames held for a position that never came
    /// are checked now, after a gap, and appended to `samples`.
    pub fn end_of_samples(&mut self, samples: &mut Vec<SampleView>) -> Result<(), OutputError> {
        let held: Vec<u32> =
            self.rare.iter().filter(|(_, rare)| !rare.held.is_empty()).map(|(unit, _)| *unit).collect();
        for unit in held {
            self.release_held(unit, samples)?;
        }
        Ok(())
    }

    /// Checks the next `S` or `F` frame, as [`Checker::accept`] does `Frame::Samples(chunk)`:
    /// appends each of its samples, checked, to `samples` (or holds the frame until its unit's
    /// earlier positions come).
    pub fn accept_samples(&mut self, chunk: &Chunk, samples: &mut Vec<SampleView>) -> Result<(), OutputError> {
        match self.stage {
            Stage::Running => self.check_chunk(chunk, samples),
            Stage::Ending => invalid(format!("a sample frame of unit {} comes after a U frame", chunk.unit)),
            // Before G, after D or E: refused as any frame is there (`accept` never comes back).
            Stage::Start | Stage::Hello | Stage::Done | Stage::Refused => self.accept(&Frame::Samples(*chunk), samples),
        }
    }

    /// Checks the next frame; appends each sample of an `S` or `F` frame, checked, to `samples`
    /// (a frame that comes before an earlier position of its unit is held until that comes).
    pub fn accept(&mut self, frame: &Frame, samples: &mut Vec<SampleView>) -> Result<(), OutputError> {
        match (self.stage, frame) {
            (Stage::Done, f) => invalid(format!("a frame {} comes after D", f.name())),
            (Stage::Refused, f) => invalid(format!("a frame {} comes after E", f.name())),
            (Stage::Start | Stage::Hello, Frame::Error(e)) => {
                self.refusal = Some(e.message.clone());
                self.stage = Stage::Refused;
                Ok(())
            }
            (_, Frame::Error(e)) => invalid(format!("an E frame after the gate opened ({})", e.message)),
            (Stage::Start, Frame::Hello(h)) => {
                self.check_hello(h)?;
                self.hello = Some(h.clone());
                self.stage = Stage::Hello;
                Ok(())
            }
            (Stage::Start, f) => invalid(format!("the first frame is {}, not H", f.name())),
            (_, Frame::Hello(_)) => invalid("a second H frame".into()),
            (Stage::Hello, Frame::Gate(g)) => {
                self.window = Some(self.check_gate(g)?);
                let units = g.units as usize;
                self.units = Lent::at_least(&UNIT_TABLES, units);
                self.units.resize(units, UnitState::default());
                self.ended = vec![false; units];
                self.ends = Lent::at_least(&UNIT_TABLES, units);
                self.gate = Some(g.clone());
                self.stage = Stage::Running;
                Ok(())
            }
            (Stage::Hello, f) => invalid(format!("a frame {} comes before G", f.name())),
            (_, Frame::Gate(_)) => invalid("a second G frame".into()),
            (_, Frame::Samples(chunk)) => self.accept_samples(chunk, samples),
            (_, Frame::Unit(_) | Frame::View(_)) if self.plan.grain.is_some() => {
                invalid(format!("a frame {} in the granularity experiment", frame.name()))
            }
            (Stage::Running | Stage::Ending, Frame::Unit(u)) => {
                self.stage = Stage::Ending;
                if (1..=self.units.len()).contains(&(u.unit as usize)) {
                    // Its samples have all been written: a position still missing was lost.
                    self.release_held(u.unit, samples)?;
                }
                self.check_unit_end(u)
            }
            (Stage::Running, Frame::Point(p)) => self.check_point(p),
            (_, Frame::Point(_)) => invalid("a P frame after a U frame".into()),
            (Stage::Running | Stage::Ending, Frame::View(v)) => {
                if self.view.is_some() {
                    return invalid("a second V frame".into());
                }
                check_view(v)?;
                self.view = Some(v.clone());
                Ok(())
            }
            (Stage::Running | Stage::Ending, Frame::Done(d)) => {
                self.check_done(d)?;
                self.done = Some(d.clone());
                self.stage = Stage::Done;
                Ok(())
            }
        }
    }

    /// The stream has ended: what it delivered.
    pub fn finish(self) -> Ending {
        match (self.stage, self.gate, self.window, self.hello) {
            (Stage::Refused, ..) => Ending::Refused(self.refusal.unwrap_or_default()),
            (_, Some(gate), Some(window), Some(hello)) => {
                let mut units = self.ends;
                units.sort_unstable_by_key(|u| u.unit);
                let delivered = Delivered {
                    hello,
                    gate,
                    window,
                    units,
                    done: self.done,
                    samples: self.samples,
                    last_wake_ns: self.last_wake_ns,
                    view: self.view,
                    points: self.points,
                    flushes: self.flushes,
                    flushed: self.flushed,
                    after_flush: self.after_flush,
                    states: self.units,
                };
                if self.stage == Stage::Done {
                    Ending::Complete(delivered)
                } else {
                    Ending::Cut(delivered)
                }
            }
            (.., hello) => Ending::Empty { hello },
        }
    }

    fn check_hello(&self, hello: &Hello) -> Result<(), OutputError> {
        if hello.protocol != PROTOCOL {
            return invalid(format!("H says protocol {} (expected {PROTOCOL})", hello.protocol));
        }
        if hello.runtime != self.plan.runtime {
            return invalid(format!(
                "H names runtime '{}' but the plan asked for '{}'",
                hello.runtime, self.plan.runtime
            ));
        }
        let wait = hello.wait.as_deref().unwrap_or(crate::plan::DEFAULT_WAIT);
        if wait != self.plan.wait {
            return invalid(format!("H says its units wait with '{wait}' but the plan asked for '{}'", self.plan.wait));
        }
        if hello.clock != CLOCK {
            return invalid(format!("H names clock '{}' (expected {CLOCK})", hello.clock));
        }
        let mechanism = hello.priority_mechanism();
        if !PRIORITY_MECHANISMS.contains(&mechanism) {
            return invalid(format!(
                "H names priority '{}': it must start with one of {}",
                hello.priority,
                PRIORITY_MECHANISMS.join(", ")
            ));
        }
        if self.plan.priority_classes == 1 && mechanism != "none" {
            return invalid(format!(
                "H names priority '{}' but the plan has one class (expected none)",
                hello.priority
            ));
        }
        Ok(())
    }

    fn check_gate(&self, g: &Gate) -> Result<Window, OutputError> {
        if g.create_start_ns > g.run_start_ns {
            return invalid(format!(
                "G: create_start_ns {} is after run_start_ns {}",
                g.create_start_ns, g.run_start_ns
            ));
        }
        if g.units == 0 || g.units > self.plan.units {
            return invalid(format!("G: units is {} (the plan has {})", g.units, self.plan.units));
        }
        if (g.units < self.plan.units) != g.start_error.is_some() {
            return invalid(format!(
                "G: start_error must be present exactly when units ({}) is below the plan's ({})",
                g.units, self.plan.units
            ));
        }
        let measure_start_ns = g.run_start_ns.checked_add(self.plan.warmup_ns);
        let end_ns = measure_start_ns.and_then(|m| m.checked_add(self.plan.duration_ns));
        match (measure_start_ns, end_ns) {
            (Some(measure_start_ns), Some(end_ns)) => Ok(Window {
                create_start_ns: g.create_start_ns,
                run_start_ns: g.run_start_ns,
                measure_start_ns,
                end_ns,
            }),
            _ => invalid(format!("G: run_start_ns {} leaves no room for the plan's window", g.run_start_ns)),
        }
    }

    fn check_chunk(&mut self, chunk: &Chunk, samples: &mut Vec<SampleView>) -> Result<(), OutputError> {
        let unit = chunk.unit;
        let kind = if chunk.by_unit { 'F' } else { 'S' };
        if unit == 0 || unit as usize > self.units.len() {
            return invalid(format!("an {kind} frame names unit {unit} (G says {} units)", self.units.len()));
        }
        if !self.plan.sleep.schedule.sleeps() {
            return invalid(format!(
                "an {kind} frame of unit {unit} with the schedule none (which records no samples)"
            ));
        }
        // Positions are counted in 64 bits, as a unit's periods are in relative mode.
        if chunk.first.checked_add(chunk.len() as u64).is_none_or(|end| end >= 1 << 63) {
            return invalid(format!("unit {unit}: an {kind} frame's positions pass 2^63 (first {})", chunk.first));
        }
        let state = &mut self.units[unit as usize - 1];
        let next = state.next_position;
        if chunk.first < next {
            return invalid(format!(
                "unit {unit}: an {kind} frame starts at sample position {} but every position below {next} has come",
                chunk.first
            ));
        }
        if chunk.first > next {
            let held = Held {
                origin_ns: chunk.origin_ns,
                by_unit: chunk.by_unit,
                ends_frame: chunk.ends_frame,
                bytes: chunk.bytes().to_vec(),
            };
            self.held_bytes += held.bytes.len();
            if self.rare.entry(unit).or_default().held.insert(chunk.first, held).is_some() {
                return invalid(format!("unit {unit}: two frames start at sample position {}", chunk.first));
            }
            if self.held_bytes > HELD_BYTES {
                return invalid(format!(
                    "unit {unit}: frames wait for sample position {next}, which has not come after {} MiB of later ones",
                    HELD_BYTES >> 20
                ));
            }
            return Ok(());
        }
        self.check_in_order(chunk, samples)?;
        // Frames are held only when one came out of order: most runs never have any, and a
        // frame of a sample or two need not read its unit's second cache line to find none.
        match self.held_bytes {
            0 => Ok(()),
            _ => self.release_fitting(unit, samples),
        }
    }

    /// Checks the frames held for `unit` that now start where its samples stand.
    fn release_fitting(&mut self, unit: u32, samples: &mut Vec<SampleView>) -> Result<(), OutputError> {
        loop {
            let next = self.units[unit as usize - 1].next_position;
            let Some(rare) = self.rare.get_mut(&unit) else { return Ok(()) };
            let Some(entry) = rare.held.first_entry().filter(|e| *e.key() == next) else { return Ok(()) };
            let held = entry.remove();
            self.held_bytes -= held.bytes.len();
            let mut chunk = Chunk::new(unit, held.origin_ns, next, held.by_unit, &held.bytes);
            chunk.ends_frame = held.ends_frame;
            self.check_in_order(&chunk, samples)?;
        }
    }

    /// Checks every frame still held for `unit`, in order, past the positions that never came
    /// (their samples were lost: the unit's `U.lost` must count them).
    fn release_held(&mut self, unit: u32, samples: &mut Vec<SampleView>) -> Result<(), OutputError> {
        loop {
            let state = &mut self.units[unit as usize - 1];
            let Some(rare) = self.rare.get_mut(&unit) else { return Ok(()) };
            let Some((&first, _)) = rare.held.first_key_value() else { return Ok(()) };
            rare.skipped += first - state.next_position;
            state.next_position = first;
            self.release_fitting(unit, samples)?;
        }
    }

    /// Checks a frame that starts at its unit's next position.
    fn check_in_order(&mut self, chunk: &Chunk, samples: &mut Vec<SampleView>) -> Result<(), OutputError> {
        let unit = chunk.unit;
        let window = self.window.expect("the gate is open");
        let state = &mut self.units[unit as usize - 1];
        match state.origin_ns {
            None if chunk.origin_ns < window.run_start_ns => {
                return invalid(format!(
                    "unit {unit}: origin {} is before run_start_ns {}",
                    chunk.origin_ns, window.run_start_ns
                ));
            }
            None => (state.origin_ns, state.last_wake_ns) = (Some(chunk.origin_ns), chunk.origin_ns),
            Some(origin) if origin != chunk.origin_ns => {
                return invalid(format!("unit {unit}: a frame says origin {} after {origin}", chunk.origin_ns));
            }
            Some(_) => {}
        }
        let class = self.plan.class_of(unit);
        let same_expected_ns = self.plan.sleep.schedule.same_every_period(unit);
        let context = SampleContext { plan: &self.plan, window, unit, class, origin_ns: chunk.origin_ns };
        let base = samples.len();
        samples.reserve(chunk.len());
        // A loop for each kind of schedule: one sleep for every period stays a constant.
        let checked = match same_expected_ns {
            Some(same) => context.check_samples(state, chunk, samples, |_| same),
            None => context
                .check_samples(state, chunk, samples, |period| context.plan.sleep.schedule.expected(unit, period)),
        };
        // A unit's wakes only grow: its last is the latest of the frame (or of its samples
        // before one that fails).
        self.last_wake_ns = self.last_wake_ns.max(state.last_wake());
        if let Err((period, why)) = checked {
            return invalid(format!("unit {unit}, sample {} (period {period}): {why}", state.samples + 1));
        }
        let end = chunk.first + chunk.len() as u64;
        state.next_position = end;
        state.next_period_at = end;
        // Marked per frame, not per sample: such samples are rare (and looked for only while
        // some unit has one coming, as `held` is).
        while self.after_flush_coming > 0 {
            let Some(rare) = self.rare.get_mut(&unit) else { break };
            let Some(&position) = rare.after_flush.front().filter(|p| **p < end) else { break };
            rare.after_flush.pop_front();
            self.after_flush_coming -= 1;
            if position >= chunk.first {
                let view = &mut samples[base + (position - chunk.first) as usize];
                *view = view.with_after_flush(true);
                self.after_flush += 1;
            }
        }
        if chunk.by_unit {
            self.flushed += chunk.len() as u64;
        }
        if chunk.by_unit && chunk.ends_frame {
            // The unit put the sample that found its ring full (position `end`) after writing
            // this frame; the iteration after that one began late by the write.
            self.rare.entry(unit).or_default().after_flush.push_back(end + 1);
            self.after_flush_coming += 1;
            self.flushes += 1;
        }
        self.samples += chunk.len() as u64;
        Ok(())
    }

    fn check_unit_end(&mut self, u: &UnitEnd) -> Result<(), OutputError> {
        let window = self.window.expect("the gate is open");
        let Some(state) = (u.unit as usize).checked_sub(1).and_then(|i| self.units.get_mut(i)) else {
            return invalid(format!("a U frame names unit {} (G says {} units)", u.unit, self.units.len()));
        };
        let name = u.unit;
        if self.ended[name as usize - 1] {
            return invalid(format!("a second U frame for unit {name}"));
        }
        if state.origin_ns.is_some_and(|o| o != u.origin_ns) {
            return invalid(format!(
                "U of unit {name}: origin_ns {} differs from its S frames' {}",
                u.origin_ns,
                state.origin_ns.unwrap_or(0)
            ));
        }
        if u.origin_ns < window.run_start_ns {
            return invalid(format!(
                "U of unit {name}: origin_ns {} is before run_start_ns {}",
                u.origin_ns, window.run_start_ns
            ));
        }
        if state.samples.checked_add(u.lost) != Some(u.iterations) && self.plan.sleep.schedule.sleeps() {
            return invalid(format!(
                "U of unit {name}: iterations {} is not its {} samples plus {} lost",
                u.iterations, state.samples, u.lost
            ));
        }
        if !self.plan.sleep.schedule.sleeps() && u.lost != 0 {
            return invalid(format!("U of unit {name}: lost {} with the schedule none (no samples to lose)", u.lost));
        }
        let skipped = self.rare.get(&name).map_or(0, |rare| rare.skipped);
        if skipped > u.lost {
            return invalid(format!("U of unit {name}: lost {} but {skipped} sample positions never came", u.lost));
        }
        let measured =
            if self.plan.sleep.schedule.sleeps() { state.measured..=state.measured + u.lost } else { 0..=u.iterations };
        if !measured.contains(&u.measured_iterations) {
            return invalid(format!(
                "U of unit {name}: measured_iterations {} is outside {}..={} (its measured samples, plus lost)",
                u.measured_iterations,
                measured.start(),
                measured.end()
            ));
        }
        self.ended[name as usize - 1] = true;
        self.ends.push(*u);
        Ok(())
    }

    fn check_point(&mut self, p: &Point) -> Result<(), OutputError> {
        let Some(grain) = &self.plan.grain else {
            return invalid("a P frame outside the granularity experiment".into());
        };
        let index = self.points.len();
        let Some(&grain_ns) = grain.grains_ns.get(index) else {
            return invalid(format!("P frame {} for a plan of {} grains", index + 1, grain.grains_ns.len()));
        };
        let at = format!("P of grain {grain_ns} ns");
        if p.grain_ns != grain_ns {
            return invalid(format!("{at}: grain_ns is {} (the plan's grain {} is {grain_ns})", p.grain_ns, index + 1));
        }
        if p.iters == 0 {
            return invalid(format!("{at}: iters is 0 (a task does at least one iteration)"));
        }
        let reference = busy_reference(p.iters).to_string();
        if p.busy_result != reference {
            return invalid(format!("{at}: busy_result {} is not busy({}) = {reference}", p.busy_result, p.iters));
        }
        if p.serial_tasks == 0 || p.serial_ns == 0 {
            return invalid(format!("{at}: serial_tasks and serial_ns must be at least 1"));
        }
        match (p.serial_after_tasks, p.serial_after_ns) {
            (None, None) | (Some(1..), Some(1..)) => {}
            _ => {
                return invalid(format!("{at}: serial_after_tasks and serial_after_ns come together, each at least 1"))
            }
        }
        if p.rounds == 0 || p.wall_ns == 0 {
            return invalid(format!("{at}: rounds and wall_ns must be at least 1"));
        }
        let planned = p.rounds.checked_mul(grain.tasks_per_round());
        if planned != Some(p.tasks) {
            return invalid(format!(
                "{at}: tasks {} is not rounds {} x width {} x steps {}",
                p.tasks, p.rounds, grain.width, grain.steps
            ));
        }
        if p.completed != p.tasks {
            return invalid(format!("{at}: {} tasks completed of {} started (tasks lost)", p.completed, p.tasks));
        }
        if p.wrong != 0 {
            return invalid(format!("{at}: {} tasks returned a wrong busy result", p.wrong));
        }
        if !(1..=MAX_WIDTH).contains(&p.cores) {
            return invalid(format!("{at}: cores is {} (1 to {MAX_WIDTH})", p.cores));
        }
        self.points.push(p.clone());
        Ok(())
    }

    fn check_done(&self, d: &Done) -> Result<(), OutputError> {
        if let Some(grain) = &self.plan.grain {
            if d.atomic_sum.is_some() {
                return invalid("D has an atomic_sum in the granularity experiment".into());
            }
            if self.points.len() < grain.grains_ns.len() && !d.interrupted {
                return invalid(format!(
                    "D after {} P frames (the plan has {} grains) and not interrupted",
                    self.points.len(),
                    grain.grains_ns.len()
                ));
            }
            if d.busy_result != "0" {
                return invalid(format!("D: busy_result {} is not busy(0) = 0", d.busy_result));
            }
            return Ok(());
        }
        if self.ends.len() != self.units.len() {
            return invalid(format!("D after {} U frames (G says {} units)", self.ends.len(), self.units.len()));
        }
        let iterations: u64 = self.ends.iter().map(|u| u.iterations).sum();
        match (self.plan.experiment, d.atomic_sum) {
            (Experiment::AtomicSum, None) => return invalid("D has no atomic_sum in the atomic-sum experiment".into()),
            (Experiment::AtomicSum, Some(sum)) if sum != iterations => {
                return invalid(format!(
                    "D: atomic_sum {sum} differs from the {iterations} iterations (increments lost)"
                ));
            }
            (Experiment::Sleep | Experiment::Granularity, Some(_)) => {
                return invalid("D has an atomic_sum in the sleep experiment".into())
            }
            _ => {}
        }
        let reference = busy_reference(self.plan.busy.iters).to_string();
        if d.busy_result != reference {
            return invalid(format!(
                "D: busy_result {} is not busy({}) = {reference}",
                d.busy_result, self.plan.busy.iters
            ));
        }
        Ok(())
    }
}

/// What every sample of one `S` frame is checked against.
struct SampleContext<'a> {
    plan: &'a Plan,
    window: Window,
    unit: u32,
    /// The unit's priority class, found once a frame rather than by a division each sample.
    class: u32,
    origin_ns: u64,
}

impl SampleContext<'_> {
    /// The deadline of `period` in absolute mode: origin plus the expected sleeps through it.
    fn deadline(&self, period: u64) -> u128 {
        self.origin_ns as u128 + self.plan.sleep.schedule.total_through(self.unit, period)
    }

    /// Checks a frame's samples, `expected` giving each period's sleep; on failure, the period
    /// of the sample that failed and why. Most samples pass: they are checked without their
    /// messages first, and a sample that fails (or, in absolute mode, missed a period) is
    /// checked again for its reason (and the periods it missed).
    #[inline(always)]
    fn check_samples(
        &self,
        state: &mut UnitState,
        chunk: &Chunk,
        out: &mut Vec<SampleView>,
        expected: impl Fn(u64) -> u64,
    ) -> Result<(), (u64, String)> {
        match self.plan.sleep.mode {
            // A sample's period is its position: each iteration puts one sample and one period.
            Mode::Relative => (chunk.first..).zip(chunk.sample_bytes()).try_for_each(|(period, bytes)| {
                chunk.read_ahead(bytes);
                let sample = Sample::from_bytes(period, bytes);
                match self.accept_relative(state, &sample, expected(period), out) {
                    true => Ok(()),
                    false => self.check(state, sample, out).map_err(|why| (period, why)),
                }
            }),
            // A sample's period follows its unit's previous one and the deadlines that one's
            // wake passed; after lost samples, it is the period whose deadline the sample
            // intended.
            Mode::Absolute => {
                let mut period = state.next_period;
                if chunk.first != state.next_period_at {
                    // Each lost sample had a period of its own.
                    let lost = chunk.first - state.next_period_at;
                    let first = Sample::from_bytes(period.saturating_add(lost), chunk.bytes());
                    period = self.period_intended(&first).map_err(|why| (first.period, why))?;
                }
                for bytes in chunk.sample_bytes() {
                    chunk.read_ahead(bytes);
                    let sample = Sample::from_bytes(period, bytes);
                    if !self.accept_absolute(state, &sample, expected(period), out) {
                        self.check(state, sample, out).map_err(|why| (period, why))?;
                    }
                    period = state.next_period;
                }
                Ok(())
            }
        }
    }

    /// Takes an absolute-mode sample that passes every check of [`SampleContext::check`] and
    /// woke by its next deadline (it missed no period), and returns true; does nothing with any
    /// other.
    #[inline(always)]
    fn accept_absolute(&self, state: &mut UnitState, s: &Sample, expected_ns: u64, out: &mut Vec<SampleView>) -> bool {
        let deadline = self.deadline(s.period);
        let next_deadline = deadline + self.plan.sleep.schedule.expected_exact(self.unit, s.period + 1);
        let fits = (s.intended_ns as u128 == deadline) & (s.wake_ns as u128 <= next_deadline);
        self.accept(state, s, fits, expected_ns, out)
    }

    /// The period from `s.period` on whose deadline `s` intended (absolute mode, after lost
    /// samples).
    fn period_intended(&self, s: &Sample) -> Result<u64, String> {
        let total = (s.intended_ns as u128).saturating_sub(self.origin_ns as u128);
        self.plan
            .sleep
            .schedule
            .first_period_reaching(self.unit, s.period, total)
            .filter(|period| self.deadline(*period) == s.intended_ns as u128)
            .ok_or_else(|| format!("intended {} is the deadline of no period from {} on", s.intended_ns, s.period))
    }

    /// The deadlines after `period`'s that `wake` passed: the periods its unit skipped (the
    /// loop's `m`), 0 when it woke by the next deadline.
    #[inline]
    fn missed(&self, period: u64, deadline: u128, wake: u64) -> u64 {
        let schedule = &self.plan.sleep.schedule;
        if wake as u128 <= deadline + schedule.expected_exact(self.unit, period + 1) {
            return 0;
        }
        let reached = (wake as u128).saturating_sub(self.origin_ns as u128);
        // The first deadline at or after the wake (one below period 2^63 in any plan, whose
        // absolute sleeps are at least 1 µs).
        let first_ahead = schedule.first_period_reaching(self.unit, period + 1, reached).unwrap_or(1 << 63);
        first_ahead - period - 1
    }

    /// Checks a sample, and takes it if it passes; else says why it fails.
    #[inline]
    fn check(&self, state: &mut UnitState, mut s: Sample, out: &mut Vec<SampleView>) -> Result<(), String> {
        if !(self.origin_ns <= s.start_ns && s.start_ns <= s.busy_end_ns && s.busy_end_ns <= s.wake_ns) {
            return Err(format!(
                "origin <= start <= busy_end <= wake does not hold ({} / {} / {} / {})",
                self.origin_ns, s.start_ns, s.busy_end_ns, s.wake_ns
            ));
        }
        if s.start_ns >= self.window.end_ns {
            return Err(format!("starts at {}, at or after end {}", s.start_ns, self.window.end_ns));
        }
        if let Some(previous) = state.last_wake().filter(|w| s.start_ns < *w) {
            return Err(format!("starts at {} before the previous wake {previous}", s.start_ns));
        }
        if self.plan.busy.iters == 0 && s.busy_end_ns != s.start_ns {
            return Err("busy_end differs from start with no busy work".into());
        }
        let expected_ns = self.plan.sleep.schedule.expected(self.unit, s.period);
        match self.plan.sleep.mode {
            Mode::Relative => {
                if s.intended_ns as u128 != s.busy_end_ns as u128 + expected_ns as u128 {
                    return Err(format!(
                        "intended {} is not busy_end {} + expected {expected_ns}",
                        s.intended_ns, s.busy_end_ns
                    ));
                }
            }
            Mode::Absolute => {
                let deadline = self.deadline(s.period);
                if s.intended_ns as u128 != deadline {
                    return Err(format!(
                        "intended {} is not the deadline of period {}: {deadline}",
                        s.intended_ns, s.period,
                    ));
                }
                s.missed = self.missed(s.period, deadline, s.wake_ns);
            }
        }
        self.take(state, s, expected_ns, out);
        Ok(())
    }

    /// Takes a relative-mode sample that passes every check of [`SampleContext::check`] and
    /// returns true; does nothing with any other (`check` then says why it fails).
    #[inline(always)]
    fn accept_relative(&self, state: &mut UnitState, s: &Sample, expected_ns: u64, out: &mut Vec<SampleView>) -> bool {
        let fits = s.intended_ns as u128 == s.busy_end_ns as u128 + expected_ns as u128;
        self.accept(state, s, fits, expected_ns, out)
    }

    /// Takes a sample that passes the checks both modes share and `fits` its mode's own (by
    /// its intended time, and in absolute mode by missing no period), and returns true; does
    /// nothing with any other. Every check is made, without a branch each: most samples pass.
    #[inline(always)]
    fn accept(
        &self,
        state: &mut UnitState,
        s: &Sample,
        fits: bool,
        expected_ns: u64,
        out: &mut Vec<SampleView>,
    ) -> bool {
        let passes = (self.origin_ns <= s.start_ns)
            & (s.start_ns <= s.busy_end_ns)
            & (s.busy_end_ns <= s.wake_ns)
            & (s.start_ns < self.window.end_ns)
            // Before its first sample a unit's last wake is its origin, checked just above.
            & (s.start_ns >= state.last_wake_ns)
            & ((self.plan.busy.iters != 0) | (s.busy_end_ns == s.start_ns))
            & fits;
        if passes {
            self.take(state, *s, expected_ns, out);
        }
        passes
    }

    /// Takes a checked sample: its unit's state moves past it, and its view goes to `out`.
    #[inline(always)]
    fn take(&self, state: &mut UnitState, s: Sample, expected_ns: u64, out: &mut Vec<SampleView>) {
        let gap = s.period > state.next_period;
        state.next_period = s.period + 1 + s.missed;
        // Its origin for its first sample.
        let previous_wake_ns = if gap { None } else { Some(state.last_wake_ns) };
        state.last_wake_ns = s.wake_ns;
        state.samples += 1;
        let measured = s.start_ns >= self.window.measure_start_ns;
        state.measured += u64::from(measured);
        // Written where it goes: a view returned, then pushed, was copied through the stack (a
        // stalled load, a fifth of checking a sample).
        out.push(SampleView::new(self.unit, self.class, s, expected_ns, previous_wake_ns, measured));
    }
}

/// Checks a whole recorded output (all of a worker's stdout) and collects its samples: for
/// tests and small tools.
pub fn check_output(plan: &Plan, mut stdout: &[u8]) -> (Result<Ending, OutputError>, Vec<SampleView>) {
    let mut reader = crate::frames::FrameReader::new(&mut stdout);
    let mut checker = Checker::new(plan.clone());
    let mut views = Vec::new();
    loop {
        let (kind, payload) = match reader.next_raw() {
            Ok(Some(frame)) => frame,
            Ok(None) | Err(crate::frames::ReadError::Cut { .. }) => {
                return match checker.end_of_samples(&mut views) {
                    Ok(()) => (Ok(checker.finish()), views),
                    Err(e) => (Err(e), views),
                }
            }
            Err(e) => return (Err(OutputError::Invalid(e.to_string())), views),
        };
        let frame = match crate::frames::decode(kind, payload) {
            Ok(frame) => frame,
            Err(why) => return (Err(OutputError::Invalid(why)), views),
        };
        if let Err(e) = checker.accept(&frame, &mut views) {
            return (Err(e), views);
        }
    }
}

/// A runtime's view: a delay distribution in order, a busy ratio that is one.
fn check_view(v: &RuntimeView) -> Result<(), OutputError> {
    if let Some(d) = v.delay.filter(|d| d.count > 0) {
        if !(d.p50_ns <= d.p99_ns && d.p99_ns <= d.max_ns && d.mean_ns <= d.max_ns) {
            return invalid(format!(
                "the V frame's delay is out of order: p50 {} p99 {} max {} mean {}",
                d.p50_ns, d.p99_ns, d.max_ns, d.mean_ns
            ));
        }
    }
    match v.busy_ratio {
        Some(r) if !(0.0..=1.5).contains(&r) => invalid(format!("the V frame's busy_ratio {r} is not a share")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Schedule;
    use crate::vectors::{encode_stream, STREAMS};

    fn stream(name: &str) -> (Plan, serde_json::Value) {
        let text = STREAMS.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("no stream vector {name}")).1;
        let vector: serde_json::Value = serde_json::from_str(text).unwrap();
        let plan = Plan::from_json(&vector["plan"].to_string()).unwrap();
        (plan, vector)
    }

    fn run(plan: &Plan, vector: &serde_json::Value) -> (Result<Ending, OutputError>, Vec<SampleView>) {
        check_output(plan, &encode_stream(&vector["frames"]))
    }

    fn rejection(name: &str, mutate: impl FnOnce(&mut serde_json::Value)) -> String {
        let (plan, mut vector) = stream(name);
        mutate(&mut vector["frames"]);
        match run(&plan, &vector).0 {
            Err(OutputError::Invalid(why)) => why,
            other => panic!("{name}: a mutation was accepted: {other:?}"),
        }
    }

    #[test]
    fn every_stream_vector_gets_its_verdict() {
        for (name, text) in STREAMS {
            let vector: serde_json::Value = serde_json::from_str(text).unwrap();
            let plan = Plan::from_json(&vector["plan"].to_string()).unwrap();
            let (ending, _) = run(&plan, &vector);
            let verdict = match ending {
                Ok(Ending::Complete(_)) => "ok",
                Ok(Ending::Cut(_)) => "partial",
                Ok(Ending::Refused(_)) => "refused",
                other => panic!("{name}: {other:?}"),
            };
            assert_eq!(verdict, vector["verdict"], "{name}");
        }
    }

    /// A view gives back each part it was made of, at the ends of their ranges too, in 72
    /// bytes; marking it after a flush changes that mark alone.
    #[test]
    fn a_view_keeps_each_part_it_was_made_of() {
        assert_eq!(std::mem::size_of::<SampleView>(), 72);
        let sample = Sample { period: 7, start_ns: 1, busy_end_ns: 2, intended_ns: 3, wake_ns: 4, missed: 5 };
        for (unit, class, previous, measured) in [
            (1, 0, None, false),
            (u32::MAX, u32::from(u16::MAX), Some(u64::MAX), true),
            (2, 1, Some(0), true),
            (3, 1, Some(1 << 50), false),
        ] {
            let view = SampleView::new(unit, class, sample, 11, previous, measured);
            let parts = (view.unit(), view.class(), view.sample, view.expected_ns, view.previous_wake_ns());
            assert_eq!(parts, (unit, class, sample, 11, previous));
            assert_eq!((view.measured(), view.after_flush()), (measured, false));
            let flushed = view.with_after_flush(true);
            assert_eq!((flushed.unit(), flushed.class(), flushed.previous_wake_ns()), (unit, class, previous));
            assert_eq!((flushed.measured(), flushed.after_flush()), (measured, true));
            assert_eq!(flushed.with_after_flush(false), view);
            assert_eq!(view.with_measured(!measured).measured(), !measured);
        }
    }

    /// The fast paths take a sample exactly when the full check passes it and it missed no
    /// period, and take it alike: the same view, the unit's state moved alike. Around each bound
    /// of a unit's first sample (its origin standing for its last wake) and of its second, in
    /// both modes, with and without busy work.
    #[test]
    fn the_fast_paths_take_exactly_what_the_full_check_passes() {
        for (mode, busy) in [("relative", 0), ("relative", 100), ("absolute", 0), ("absolute", 100)] {
            let (mut plan, _) = stream(mode);
            plan.busy.iters = busy;
            let (unit, origin_ns) = (1, 1_000);
            let window = Window { create_start_ns: 0, run_start_ns: 900, measure_start_ns: 1_500, end_ns: 9_000 };
            let context = SampleContext { plan: &plan, window, unit, class: plan.class_of(unit), origin_ns };
            let schedule = &plan.sleep.schedule;
            // As the check leaves a unit at its first frame; then after a first sample that woke
            // at 1,200.
            let fresh = UnitState { origin_ns: Some(origin_ns), last_wake_ns: origin_ns, ..UnitState::default() };
            let mut after_first = fresh;
            let first = Sample {
                period: 0,
                start_ns: 1_000,
                busy_end_ns: 1_000,
                intended_ns: 1_100,
                wake_ns: 1_200,
                missed: 0,
            };
            context.take(&mut after_first, first, schedule.expected(unit, 0), &mut Vec::new());
            let (mut taken, mut refused) = (0, 0);
            for (period, before) in [(0, fresh), (1, after_first)] {
                let expected = schedule.expected(unit, period);
                let (deadline, next) = (context.deadline(period) as u64, context.deadline(period + 1) as u64);
                let starts = [999, 1_000, 1_001, 1_199, 1_200, 1_300, 8_999, 9_000];
                for (start, busy_end) in starts.into_iter().flat_map(|s| [(s, s - 1), (s, s), (s, s + 1)]) {
                    for intended in [busy_end + expected, busy_end + expected + 1, deadline, deadline - 1] {
                        for wake in [busy_end, intended, next, next + 1, next + expected] {
                            let s = Sample {
                                period,
                                start_ns: start,
                                busy_end_ns: busy_end,
                                intended_ns: intended,
                                wake_ns: wake,
                                missed: 0,
                            };
                            let (mut fast, mut full) = (before, before);
                            let (mut fast_views, mut full_views) = (Vec::new(), Vec::new());
                            let took = match plan.sleep.mode {
                                Mode::Relative => context.accept_relative(&mut fast, &s, expected, &mut fast_views),
                                Mode::Absolute => context.accept_absolute(&mut fast, &s, expected, &mut fast_views),
                            };
                            let passed = context.check(&mut full, s, &mut full_views);
                            let missed = full_views.first().map_or(0, |v| v.sample.missed);
                            assert_eq!(took, passed.is_ok() && missed == 0, "{mode}, busy {busy}: {s:?} {passed:?}");
                            let state = |u: &UnitState| (u.next_period, u.last_wake(), u.samples, u.measured);
                            match took {
                                true => {
                                    assert_eq!((&fast_views, state(&fast)), (&full_views, state(&full)), "{s:?}");
                                    taken += 1;
                                }
                                false => {
                                    assert!(fast_views.is_empty(), "{s:?}");
                                    assert_eq!(state(&fast), state(&before), "{s:?}");
                                    refused += 1;
                                }
                            }
                        }
                    }
                }
            }
            assert!(taken > 0 && refused > taken, "{mode}, busy {busy}: {taken} taken, {refused} refused");
        }
    }

    /// Held frames and positions marked after a flush are looked for only while some unit has
    /// one (`held_bytes`, `after_flush_coming`): another unit's frames between them are checked
    /// as if that unit were alone, and the unit that has them as if no other were there.
    #[test]
    fn a_unit_with_frames_held_or_marks_coming_changes_no_other_units_samples() {
        use serde_json::json;
        let (mut plan, vector) = stream("flushed");
        let alone = run(&plan, &vector).1;
        let frames = vector["frames"].as_array().unwrap();
        let samples: Vec<serde_json::Value> =
            [3, 2, 4].iter().flat_map(|f| frames[*f][1]["samples"].as_array().unwrap().clone()).collect();
        let second = |first: usize| json!(["S", {"unit": 2, "origin": 110, "first": first, "samples": [samples[first].clone()]}]);
        let mut u2 = frames[5].clone();
        u2[1]["unit"] = json!(2);
        let mut gate = frames[1].clone();
        gate[1]["units"] = json!(2);
        // Unit 1's F frame is held (positions 0 and 1 not come), then released, leaving
        // position 5 marked and coming; unit 2's frames come before, between and after.
        let together = vec![
            frames[0].clone(),
            gate,
            second(0),
            frames[2].clone(),
            second(1),
            frames[3].clone(),
            second(2),
            second(3),
            frames[4].clone(),
            second(4),
            second(5),
            frames[5].clone(),
            u2,
            frames[6].clone(),
        ];
        plan.units = 2;
        let mut checker = Checker::new(plan.clone());
        let (mut views, bytes) = (Vec::new(), encode_stream(&serde_json::Value::Array(together)));
        let mut reader = crate::frames::FrameReader::new(bytes.as_slice());
        while let Some((kind, payload)) = reader.next_raw().unwrap() {
            checker.accept(&crate::frames::decode(kind, payload).unwrap(), &mut views).unwrap();
            if checker.held_bytes > 0 {
                assert_eq!(views.iter().filter(|v| v.unit() == 1).count(), 0, "unit 1's F frame waits");
            }
        }
        assert_eq!((checker.held_bytes, checker.after_flush_coming), (0, 0), "nothing left held or coming");
        let Ending::Complete(delivered) = checker.finish() else { panic!("a complete stream") };
        assert_eq!((delivered.flushes, delivered.flushed, delivered.after_flush, delivered.lost()), (1, 2, 1, 0));
        let of = |unit: u32| views.iter().filter(|v| v.unit() == unit).copied().collect::<Vec<_>>();
        assert_eq!(of(1), alone, "unit 1 as if alone");
        // Unit 2 alone: its six samples in frames of one, all written by the writer.
        let mut frames2 = vec![frames[0].clone(), frames[1].clone()];
        frames2.extend((0..6).map(|first| {
            let mut frame = second(first);
            frame[1]["unit"] = json!(1);
            frame
        }));
        frames2.extend([frames[5].clone(), frames[6].clone()]);
        plan.units = 1;
        let (ending, unit2_alone) = check_output(&plan, &encode_stream(&serde_json::Value::Array(frames2)));
        assert!(matches!(ending, Ok(Ending::Complete(_))), "{ending:?}");
        let unit2: Vec<_> = of(2)
            .into_iter()
            .map(|v| {
                SampleView::new(1, 0, v.sample, v.expected_ns, v.previous_wake_ns(), v.measured())
                    .with_after_flush(v.after_flush())
            })
            .collect();
        assert_eq!(unit2, unit2_alone, "unit 2 as if alone, none marked");
        assert!(of(2).iter().all(|v| !v.after_flush()));
    }

    #[test]
    fn samples_carry_what_the_metrics_need() {
        let (plan, vector) = stream("absolute");
        let (ending, views) = run(&plan, &vector);
        let Ok(Ending::Complete(delivered)) = ending else { panic!("{ending:?}") };
        assert_eq!(delivered.window.measure_start_ns, 1090);
        assert_eq!((delivered.samples, delivered.units.len(), delivered.last_wake_ns), (5, 2, Some(5120)));
        let unit1: Vec<&SampleView> = views.iter().filter(|v| v.unit() == 1).collect();
        assert_eq!(unit1.iter().map(|v| v.expected_ns).collect::<Vec<_>>(), [1000, 1000, 1000]);
        assert_eq!(unit1.iter().map(|v| v.previous_wake_ns()).collect::<Vec<_>>(), [Some(100), Some(1150), Some(4250)]);
        assert_eq!(unit1.iter().map(|v| v.measured()).collect::<Vec<_>>(), [false, true, true]);
        assert!(views.iter().filter(|v| v.unit() == 2).all(|v| v.expected_ns == 2000));

        let (plan, vector) = stream("lost");
        let (ending, views) = run(&plan, &vector);
        let Ok(Ending::Complete(delivered)) = ending else { panic!("{ending:?}") };
        assert_eq!(delivered.lost(), 2);
        assert_eq!(
            delivered.view.as_ref().and_then(|v| v.delay).map(|d| (d.count, d.p99_ns)),
            Some((3, 90)),
            "the runtime's view is delivered"
        );
        assert_eq!(views.iter().map(|v| v.previous_wake_ns()).collect::<Vec<_>>(), [Some(110), Some(1150), None]);

        // A unit's own frame came before the writer's earlier one: checked in position order.
        let (plan, vector) = stream("flushed");
        let (ending, views) = run(&plan, &vector);
        let Ok(Ending::Complete(delivered)) = ending else { panic!("{ending:?}") };
        assert_eq!(views.iter().map(|v| v.sample.period).collect::<Vec<_>>(), [0, 1, 2, 3, 4, 5]);
        assert_eq!(
            views.iter().map(|v| v.after_flush()).collect::<Vec<_>>(),
            [false, false, false, false, false, true]
        );
        assert_eq!((delivered.flushes, delivered.flushed, delivered.after_flush, delivered.lost()), (1, 2, 1, 0));
        assert_eq!(views[5].previous_wake_ns(), Some(5350), "the write's time shows between the wake and the start");
        // Checked in pieces of one sample (as a reader hands on a large frame), the same.
        let mut checker = Checker::new(plan.clone());
        let (mut pieces, bytes) = (Vec::new(), encode_stream(&vector["frames"]));
        let mut reader = crate::frames::FrameReader::new(bytes.as_slice());
        while let Some((kind, payload)) = reader.next_raw().unwrap() {
            match crate::frames::decode(kind, payload).unwrap() {
                Frame::Samples(chunk) => {
                    for piece in chunk.pieces(1) {
                        checker.accept(&Frame::Samples(piece), &mut pieces).unwrap();
                    }
                }
                other => checker.accept(&other, &mut pieces).unwrap(),
            }
        }
        let Ending::Complete(in_pieces) = checker.finish() else { panic!("a complete stream") };
        assert_eq!(pieces, views);
        assert_eq!((in_pieces.flushes, in_pieces.flushed, in_pieces.after_flush), (1, 2, 1));
        // The same samples all written by the writer: nothing is marked.
        let mut frames = vector["frames"].clone();
        frames[2][0] = serde_json::json!("S");
        let (ending, views) = check_output(&plan, &encode_stream(&frames));
        let Ok(Ending::Complete(delivered)) = ending else { panic!("{ending:?}") };
        assert_eq!((delivered.flushes, delivered.after_flush), (0, 0));
        assert!(views.iter().all(|v| !v.after_flush()));
        // Cut before the writer's frame came: the unit's own frame is still checked, after a gap.
        let frames = serde_json::Value::Array(vector["frames"].as_array().unwrap()[..3].to_vec());
        let (ending, views) = check_output(&plan, &encode_stream(&frames));
        assert!(matches!(ending, Ok(Ending::Cut(_))), "{ending:?}");
        assert_eq!(
            views.iter().map(|v| (v.sample.period, v.previous_wake_ns())).collect::<Vec<_>>(),
            [(2, None), (3, Some(3250))]
        );

        let (plan, vector) = stream("granularity");
        let Ok(Ending::Complete(delivered)) = run(&plan, &vector).0 else { panic!("a complete stream") };
        assert_eq!(delivered.points.iter().map(|p| p.grain_ns).collect::<Vec<_>>(), [1000, 100]);
        // Interrupted after the first grain: the rest may be missing.
        let mut frames = vector["frames"].clone();
        frames.as_array_mut().unwrap().remove(3);
        frames[3][1]["interrupted"] = serde_json::json!(true);
        let Ok(Ending::Complete(delivered)) = check_output(&plan, &encode_stream(&frames)).0 else {
            panic!("interrupted is complete")
        };
        assert_eq!(delivered.points.len(), 1);

        let (plan, vector) = stream("killed");
        let Ok(Ending::Cut(delivered)) = run(&plan, &vector).0 else { panic!("a cut stream") };
        assert_eq!((delivered.samples, delivered.units.len(), delivered.done), (2, 0, None));
    }

    #[test]
    #[allow(clippy::too_many_lines, reason = "a table of cases, one mutation a line")]
    fn each_single_mutation_is_rejected_with_its_reason() {
        use serde_json::json;
        type Mutation = Box<dyn FnOnce(&mut serde_json::Value)>;
        let cases: Vec<(&str, Mutation, &str)> = vec![
            ("relative", Box::new(|f| f[0][1]["protocol"] = json!(2)), "H says protocol 2"),
            ("relative", Box::new(|f| f[0][1]["runtime"] = json!("go")), "H names runtime 'go'"),
            ("relative", Box::new(|f| f[0][1]["clock"] = json!("CLOCK_REALTIME")), "clock"),
            ("relative", Box::new(|f| f[0][1]["priority"] = json!("nice")), "one class"),
            ("relative", Box::new(|f| f[0][1]["extra"] = json!(1)), "unknown field"),
            (
                "relative",
                Box::new(|f| {
                    f.as_array_mut().unwrap().remove(0);
                }),
                "the first frame is G",
            ),
            (
                "relative",
                Box::new(|f| {
                    f.as_array_mut().unwrap().remove(1);
                }),
                "before G",
            ),
            // A sample frame out of place (checked by `accept_samples`, the sample file's way in).
            (
                "relative",
                Box::new(|f| {
                    let s = f[2].clone();
                    f.as_array_mut().unwrap().insert(0, s);
                }),
                "the first frame is S",
            ),
            (
                "relative",
                Box::new(|f| {
                    let s = f[2].clone();
                    f.as_array_mut().unwrap().insert(1, s);
                }),
                "S (samples) comes before G",
            ),
            ("relative", Box::new(|f| f[1][1]["create_start_ns"] = json!(101)), "create_start_ns 101 is after"),
            ("relative", Box::new(|f| f[1][1]["units"] = json!(2)), "units is 2"),
            ("relative", Box::new(|f| f[1][1]["start_error"] = json!("why")), "start_error must be present exactly"),
            ("relative", Box::new(|f| f[2][1]["origin"] = json!(90)), "before run_start_ns"),
            ("relative", Box::new(|f| f[3][1]["origin"] = json!(111)), "origin 111 after 110"),
            ("relative", Box::new(|f| f[2][1]["unit"] = json!(2)), "names unit 2"),
            ("relative", Box::new(|f| f[2][1]["samples"][0][3] = json!(119)), "origin <= start <= busy_end <= wake"),
            ("relative", Box::new(|f| f[2][1]["samples"][1][0] = json!(1140)), "before the previous wake 1150"),
            ("relative", Box::new(|f| f[2][1]["samples"][0][1] = json!(121)), "no busy work"),
            // A relative-mode sample is checked first without messages: each of these fails one
            // check alone, so that a check left out of that pass lets its sample through.
            (
                "relative",
                Box::new(|f| f[2][1]["samples"][0] = json!([105, 105, 1105, 1150])),
                "origin <= start <= busy_end <= wake",
            ),
            (
                "relative",
                Box::new(|f| f[2][1]["samples"][1] = json!([1140, 1140, 2140, 2200])),
                "before the previous wake 1150",
            ),
            ("relative", Box::new(|f| f[2][1]["samples"][0] = json!([120, 121, 1121, 1150])), "no busy work"),
            ("relative", Box::new(|f| f[3][1]["samples"][0] = json!([10110, 10110, 11110, 11200])), "at or after end"),
            ("relative", Box::new(|f| f[2][1]["samples"][0][2] = json!(1121)), "intended 1121"),
            ("relative", Box::new(|f| f[4][1]["iterations"] = json!(4)), "not its 3 samples plus 0 lost"),
            ("relative", Box::new(|f| f[4][1]["measured_iterations"] = json!(2)), "outside 3..=3"),
            ("relative", Box::new(|f| f[4][1]["origin_ns"] = json!(111)), "differs from its S frames"),
            ("relative", Box::new(|f| f[4][1]["unit"] = json!(3)), "names unit 3"),
            (
                "relative",
                Box::new(|f| {
                    let u = f[4].clone();
                    f.as_array_mut().unwrap().insert(4, u);
                }),
                "a second U frame",
            ),
            (
                "relative",
                Box::new(|f| {
                    f.as_array_mut().unwrap().remove(4);
                }),
                "D after 0 U frames",
            ),
            ("relative", Box::new(|f| f[5][1]["busy_result"] = json!("1")), "busy_result 1 is not busy(0)"),
            ("relative", Box::new(|f| f[5][1]["atomic_sum"] = json!(3)), "atomic_sum in the sleep experiment"),
            (
                "relative",
                Box::new(|f| {
                    let s = f[3].clone();
                    f.as_array_mut().unwrap().insert(5, s);
                }),
                "comes after a U frame",
            ),
            (
                "relative",
                Box::new(|f| {
                    let d = f[5].clone();
                    f.as_array_mut().unwrap().push(d);
                }),
                "comes after D",
            ),
            (
                "relative",
                Box::new(|f| f.as_array_mut().unwrap().insert(2, json!(["E", {"message": "late"}]))),
                "E frame after the gate",
            ),
            ("absolute", Box::new(|f| f[3][1]["samples"][0][2] = json!(1101)), "not the deadline of period 0: 1100"),
            // Unit 1's wake at 4250 passed the deadlines 3100 and 4100: its next period is 4. A
            // unit that skipped one period less, or one more, intends another deadline.
            (
                "absolute",
                Box::new(|f| f[5][1]["samples"][0][2] = json!(4100)),
                "intended 4100 is not the deadline of period 4: 5100",
            ),
            (
                "absolute",
                Box::new(|f| f[5][1]["samples"][0][2] = json!(6100)),
                "intended 6100 is not the deadline of period 4: 5100",
            ),
            // Woken at 3150, it passed one deadline (3100): its next period is 3, not 4.
            (
                "absolute",
                Box::new(|f| f[3][1]["samples"][1][3] = json!(3150)),
                "intended 5100 is not the deadline of period 3: 4100",
            ),
            // Woken exactly at 4100, it passed one deadline (3100) and woke by the next (4100).
            (
                "absolute",
                Box::new(|f| f[3][1]["samples"][1][3] = json!(4100)),
                "intended 5100 is not the deadline of period 3: 4100",
            ),
            ("lost", Box::new(|f| f[4][1]["lost"] = json!(0)), "not its 3 samples plus 0 lost"),
            (
                "lost",
                Box::new(|f| {
                    f[4][1]["lost"] = json!(0);
                    f[4][1]["iterations"] = json!(3);
                    f[4][1]["measured_iterations"] = json!(3);
                }),
                "lost 0 but 2 sample positions never came",
            ),
            (
                "lost",
                Box::new(|f| {
                    let v = f[5].clone();
                    f.as_array_mut().unwrap().insert(5, v);
                }),
                "a second V frame",
            ),
            ("lost", Box::new(|f| f[5][1]["delay"]["p50_ns"] = json!(91)), "delay is out of order"),
            ("lost", Box::new(|f| f[5][1]["busy_ratio"] = json!(2.0)), "is not a share"),
            ("lost", Box::new(|f| f[5][1]["seen"] = json!(1)), "unknown field"),
            (
                "lost",
                Box::new(|f| {
                    let v = f.as_array_mut().unwrap().remove(5);
                    f.as_array_mut().unwrap().insert(1, v);
                }),
                "V (the runtime's view) comes before G",
            ),
            (
                "lost",
                Box::new(|f| {
                    let v = f.as_array_mut().unwrap().remove(5);
                    f.as_array_mut().unwrap().push(v);
                }),
                "comes after D",
            ),
            (
                "relative",
                Box::new(|f| f[3][1]["first"] = json!(1)),
                "starts at sample position 1 but every position below 2",
            ),
            ("relative", Box::new(|f| f[3][1]["first"] = json!(5)), "lost 0 but 3 sample positions never came"),
            ("relative", Box::new(|f| f[3][1]["first"] = json!(u64::MAX)), "positions pass 2^63"),
            ("flushed", Box::new(|f| f[3][1]["first"] = json!(2)), "two frames start at sample position 2"),
            ("flushed", Box::new(|f| f[4][1]["first"] = json!(2)), "every position below 4 has come"),
            ("flushed", Box::new(|f| f[2][1]["origin"] = json!(111)), "origin 111 after 110"),
            ("atomic-partial", Box::new(|f| f[4][1]["atomic_sum"] = json!(8)), "atomic_sum 8 differs from the 9"),
            (
                "atomic-partial",
                Box::new(|f| {
                    f[4][1].as_object_mut().unwrap().remove("atomic_sum");
                }),
                "no atomic_sum",
            ),
            (
                "atomic-partial",
                Box::new(|f| {
                    f[1][1].as_object_mut().unwrap().remove("start_error");
                }),
                "start_error must be present",
            ),
            ("atomic-partial", Box::new(|f| f[2][1]["measured_iterations"] = json!(5)), "outside 0..=4"),
            ("granularity", Box::new(|f| f[2][1]["grain_ns"] = json!(999)), "grain_ns is 999"),
            ("granularity", Box::new(|f| f[2][1]["iters"] = json!(0)), "iters is 0"),
            ("granularity", Box::new(|f| f[2][1]["busy_result"] = json!("1")), "is not busy(1000)"),
            ("granularity", Box::new(|f| f[2][1]["tasks"] = json!(11)), "tasks 11 is not rounds 2 x width 2 x steps 3"),
            ("granularity", Box::new(|f| f[2][1]["completed"] = json!(11)), "11 tasks completed of 12 started"),
            ("granularity", Box::new(|f| f[2][1]["wrong"] = json!(1)), "1 tasks returned a wrong busy result"),
            ("granularity", Box::new(|f| f[2][1]["serial_tasks"] = json!(0)), "serial_tasks and serial_ns"),
            (
                "granularity",
                Box::new(|f| {
                    f[2][1].as_object_mut().unwrap().remove("serial_after_ns");
                }),
                "serial_after_tasks and serial_after_ns come together",
            ),
            (
                "granularity",
                Box::new(|f| {
                    f[2][1]["serial_after_tasks"] = json!(0);
                    f[2][1]["serial_after_ns"] = json!(9);
                }),
                "each at least 1",
            ),
            ("granularity", Box::new(|f| f[2][1]["cores"] = json!(0)), "cores is 0"),
            ("granularity", Box::new(|f| f[2][1]["extra"] = json!(0)), "unknown field"),
            (
                "granularity",
                Box::new(|f| {
                    f.as_array_mut().unwrap().remove(3);
                }),
                "D after 1 P frames",
            ),
            (
                "granularity",
                Box::new(|f| {
                    let p = f[3].clone();
                    f.as_array_mut().unwrap().insert(4, p);
                }),
                "P frame 3 for a plan of 2 grains",
            ),
            (
                "granularity",
                Box::new(|f| {
                    f.as_array_mut().unwrap().insert(4, json!(["U", {"unit": 1, "origin_ns": 90, "iterations": 0, "measured_iterations": 0, "lost": 0}]))
                }),
                "in the granularity experiment",
            ),
            ("granularity", Box::new(|f| f[4][1]["atomic_sum"] = json!(0)), "atomic_sum in the granularity"),
            (
                "relative",
                Box::new(|f| {
                    f.as_array_mut().unwrap().insert(2, json!(["P", {"grain_ns": 1, "iters": 1, "busy_result": "1", "serial_tasks": 1, "serial_ns": 1, "rounds": 1, "tasks": 1, "completed": 1, "wrong": 0, "wall_ns": 1, "cores": 1}]))
                }),
                "outside the granularity experiment",
            ),
            (
                "atomic-partial",
                Box::new(|f| {
                    f.as_array_mut().unwrap().insert(
                        2,
                        json!(["S", {"unit": 1, "origin": 110, "first": 0, "samples": [[120, 120, 120, 120]]}]),
                    )
                }),
                "schedule none",
            ),
        ];
        for (name, mutate, reason) in cases {
            let why = rejection(name, mutate);
            assert!(why.contains(reason), "{name}: '{why}' does not say '{reason}'");
        }
    }

    #[test]
    fn relative_samples_are_checked_against_their_schedules_sleep() {
        use serde_json::json;
        // Unit 2 of 2, where a sleep by unit differs from a fixed one; modulo 3 differs by period.
        let schedules = [
            (Schedule::Fixed { ns: 1000 }, [1000, 1000, 1000]),
            (Schedule::ByUnit { ns: 1000 }, [2000, 2000, 2000]),
            (Schedule::Modulo { m: 3, ns: 1000 }, [1000, 2000, 3000]),
        ];
        for (schedule, sleeps) in schedules {
            let (mut plan, vector) = stream("relative");
            (plan.units, plan.sleep.schedule) = (2, schedule);
            // Three samples of unit 2 whose intended times are their busy ends plus `slept`.
            let check = |slept: [u64; 3]| {
                let mut start = 120;
                let samples: Vec<serde_json::Value> = (0..3)
                    .map(|period| {
                        let intended = start + slept[period];
                        let sample = json!([start, start, intended, intended + 30]);
                        start = intended + 40;
                        sample
                    })
                    .collect();
                let frames = json!([
                    vector["frames"][0],
                    ["G", {"create_start_ns": 100, "run_start_ns": 100, "units": 2}],
                    ["S", {"unit": 2, "origin": 110, "first": 0, "samples": samples}]
                ]);
                check_output(&plan, &encode_stream(&frames))
            };
            let (ending, views) = check(sleeps);
            assert!(ending.is_ok(), "{schedule:?}: {ending:?}");
            assert_eq!(views.iter().map(|v| v.expected_ns).collect::<Vec<_>>(), sleeps, "{schedule:?}");
            // Another schedule's sleeps: refused at the first period whose sleep differs.
            for (_, other) in schedules.iter().filter(|(_, other)| *other != sleeps) {
                let period = (0..3).find(|p| other[*p] != sleeps[*p]).expect("they differ");
                let (ending, views) = check(*other);
                let why = format!("{ending:?}");
                assert!(why.contains(&format!("sample {} (period {period}): intended", period + 1)), "{why}");
                assert_eq!(views.len(), period, "the samples before the one refused");
            }
        }
    }

    /// Absolute mode: a sample's period is derived from its unit's previous one and the
    /// deadlines that one's wake passed, and after lost samples from the deadline it intended.
    #[test]
    fn absolute_periods_follow_the_deadlines_passed_and_are_found_after_lost_samples() {
        use serde_json::json;
        let (plan, vector) = stream("absolute");
        let (ending, views) = run(&plan, &vector);
        assert!(matches!(ending, Ok(Ending::Complete(_))), "{ending:?}");
        let unit_1: Vec<(u64, u64)> =
            views.iter().filter(|v| v.unit() == 1).map(|v| (v.sample.period, v.sample.missed)).collect();
        assert_eq!(unit_1, [(0, 0), (1, 2), (4, 0)], "its wake at 4250 passed the deadlines 3100 and 4100");
        // Unit 1's sample at position 2 lost: the one at position 3 intends period 5's deadline.
        let mut lost = vector.clone();
        lost["frames"][5][1]["first"] = json!(3);
        lost["frames"][5][1]["samples"][0] = json!([5260, 5400, 6100, 6120]);
        lost["frames"][7][1]["iterations"] = json!(4);
        lost["frames"][7][1]["lost"] = json!(1);
        let (ending, views) = run(&plan, &lost);
        assert!(matches!(ending, Ok(Ending::Complete(_))), "{ending:?}");
        let last = views.iter().rfind(|v| v.unit() == 1).expect("unit 1's samples");
        assert_eq!((last.sample.period, last.previous_wake_ns()), (5, None), "after a gap: no interval");
        // A deadline the lost sample's own period already had, or none at all, is refused.
        for (intended, why) in [(5100, "intended 5100 is the deadline of no period from 5 on"), (6150, "intended 6150")]
        {
            lost["frames"][5][1]["samples"][0][2] = json!(intended);
            let (ending, _) = run(&plan, &lost);
            assert!(format!("{ending:?}").contains(why), "{intended}: {ending:?}");
        }
    }

    #[test]
    fn cut_and_malformed_streams_are_told_apart() {
        let (plan, vector) = stream("relative");
        let bytes = encode_stream(&vector["frames"]);
        // Cut inside the last frame: everything before it is kept.
        let (ending, views) = check_output(&plan, &bytes[..bytes.len() - 2]);
        assert!(matches!(ending, Ok(Ending::Cut(_))), "{ending:?}");
        assert_eq!(views.len(), 3);
        // Cut before the gate: nothing measured.
        let hello_only = encode_stream(&serde_json::Value::Array(vec![vector["frames"][0].clone()]));
        assert!(matches!(check_output(&plan, &hello_only).0, Ok(Ending::Empty { hello: Some(_) })));
        assert!(matches!(check_output(&plan, b"").0, Ok(Ending::Empty { hello: None })));
        let mut garbage = bytes.clone();
        garbage[0] = b'Z';
        assert!(
            matches!(check_output(&plan, &garbage).0, Err(OutputError::Invalid(why)) if why.contains("unknown frame kind 'Z'"))
        );
    }

    /// The stream of `name` cut after its first `frames` frames, as delivered.
    fn cut_after(name: &str, frames: usize) -> (Plan, Delivered) {
        let (plan, vector) = stream(name);
        let kept = serde_json::Value::Array(vector["frames"].as_array().unwrap()[..frames].to_vec());
        match check_output(&plan, &encode_stream(&kept)).0 {
            Ok(Ending::Cut(delivered)) => (plan, delivered),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_cut_stream_bounds_the_samples_it_never_sent_by_the_schedule() {
        // Absolute, by-unit:1us, window 1,090..11,090 ns. Cut after unit 2's period 1: unit 1
        // (origin 100, deadlines 100 + (p + 1) x 1,000) sent periods 0 and 1 (+2 missed), so
        // its next is 4; unit 2 (origin 95, deadlines 95 + (p + 1) x 2,000) its next is 2.
        let (plan, delivered) = cut_after("absolute", 5);
        // Exited at 8,000: unit 1's deadlines of periods 4, 5, 6 (5,100, 6,100, 7,100) and unit
        // 2's of period 2 (6,095) had passed: at most 4 samples never came.
        assert_eq!(delivered.unsent_bound(&plan, 8_000), Some(4));
        // Exited long after: bounded by the window's end and one longest sleep (13,090): unit 1
        // periods 4..=11 (deadline 12,100), unit 2 periods 2..=5 (12,095): 8 + 4.
        assert_eq!(delivered.unsent_bound(&plan, 1_000_000), Some(12));
        // Cut after everything but U and D: unit 1 sent period 4 too.
        let (plan, delivered) = cut_after("absolute", 6);
        assert_eq!(delivered.unsent_bound(&plan, 8_000), Some(3));
        // Relative, fixed:1us: last wake 2,200, the next sample is period 2. Exited at 5,300: each
        // sample sleeps 1,000 ns at least after the previous wake: 3 fit in 3,100 ns.
        let (plan, delivered) = cut_after("relative", 3);
        assert_eq!(delivered.unsent_bound(&plan, 5_300), Some(3));
        assert_eq!(delivered.unsent_bound(&plan, 2_200), Some(0), "exited at its last wake-up");
        // Exited late: the window ends at 10,100, plus one sleep: 8 fit in 11,100 - 2,200.
        assert_eq!(delivered.unsent_bound(&plan, 50_000), Some(8));
    }

    #[test]
    fn periods_within_finds_the_last_period_that_fits() {
        // Sleeps of 10 ns a period from period 3 on: 3 periods fit in 30 ns, 2 in 29.
        let through = |p: u64| (p - 2) as u128 * 10;
        assert_eq!(periods_within(through, 3, 30), 3);
        assert_eq!(periods_within(through, 3, 29), 2);
        assert_eq!(periods_within(through, 3, 0), 0);
        assert_eq!(periods_within(through, 3, 10_000_000), 1_000_000);
    }
}
