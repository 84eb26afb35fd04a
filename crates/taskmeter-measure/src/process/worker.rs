//! A worker process: sends its plan, reads and checks its frames as they arrive (handing each
//! checked sample on at once), under the supervisor (`child`): a deadline, a signal to
//! taskmeter passed on as end of file on its stdin, then SIGKILL after a grace. It reads back
//! the scheduling the worker really had, and turns whatever happened into a checked result, a
//! partial one (the stream was cut after the gate), or a [`Failure`].

use super::child::{Ask, Ended, Limits, Moment, Spawned, Stop, Stopper};
use super::fold::{self, Fold};
use super::samples::{SampleFile, SampleReader};
use super::{describe, last_line, Failure};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use taskmeter_machine as machine;
use taskmeter_machine::counters::{self, Counters};
use taskmeter_machine::sched::{Policy, SchedInfo, SchedSettings};
use taskmeter_machine::status::Status;
use taskmeter_protocol::frames::{
    decode, decode_samples, kind as frame_kind, Frame, FrameReader, ReadError, WRITER_THREAD,
};
use taskmeter_protocol::{Checker, Delivered, Ending, OutputError, Plan, SampleView};

#[derive(Debug)]
pub enum Outcome {
    Completed(Delivered),
    /// Stopped early by a signal to taskmeter; what was measured until then, and the reason.
    Interrupted(Delivered, String),
    /// The stream was cut after the gate opened (the worker crashed, was killed or timed
    /// out): what it delivered until then, and why it ended.
    Cut(Delivered, Failure),
    /// Asked by taskmeter to stop early, its samples waiting to be read having reached their
    /// bound ([`StopPolicy::backlog_bytes`]): what it delivered (every sample it wrote, read and
    /// counted), and the reason with its figures.
    Bounded(Delivered, String),
    Failed(Failure),
}

pub use super::fold::SampleSink;

/// What the reader of a worker's stdout found.
pub struct Stream {
    pub ending: Result<Ending, OutputError>,
    /// When the first `S` frame arrived (CLOCK_MONOTONIC), to see that samples stream.
    pub first_samples_ns: Option<u64>,
    /// Samples whose wake fell in the window the counters cover.
    pub wakeups_counted: u64,
    /// How the reading thread and the worker's writer were scheduled.
    pub reader_sched: String,
    pub writer_sched: String,
    /// The most the worker's sample file held unread when the reader looked (bytes): how far
    /// the reader fell behind.
    pub backlog_peak_bytes: u64,
    /// The bound of the unread bytes ([`StopPolicy::backlog_bytes`]), and those that passed
    /// it, when the reader asked the worker to stop.
    pub backlog_bound_bytes: u64,
    pub backlog_stopped_at: Option<u64>,
    /// How long after the worker's exit taskmeter read and folded the rest of its samples.
    pub drained_after_exit_ns: u64,
}

#[derive(Debug)]
pub struct WorkerRun {
    pub outcome: Outcome,
    pub sched: Option<SchedInfo>,
    pub peak_rss_kb: Option<u64>,
    pub cpu_ns: Option<u64>,
    pub wall_ns: u64,
    /// When taskmeter saw the worker exit (CLOCK_MONOTONIC), if it did.
    pub exited_ns: Option<u64>,
    /// What the kernel counted for the worker over its measured window, or why nothing.
    pub counters: Result<Counters, String>,
    /// The worker's stderr (its last few kilobytes).
    pub stderr: String,
    /// How taskmeter's reader and the worker's writer were scheduled.
    pub harness: Option<String>,
    /// How far taskmeter's reader fell behind the worker's samples, bytes at most, and how long
    /// after the worker's exit it read the rest.
    pub backlog_peak_bytes: Option<u64>,
    /// The most that could wait unread before the worker was asked to stop.
    pub backlog_bound_bytes: Option<u64>,
    pub drained_after_exit_ns: Option<u64>,
}

/// How long a worker may run: its plan's own bound plus a grace for start-up and output.
pub fn deadline(plan: &Plan, grace: Duration) -> Duration {
    // Starting the units may take the start limit, and ending as many (joining 30,000 threads)
    // about as long again.
    let planned = plan.start_limit_ns.saturating_mul(2).saturating_add(plan.planned_ns());
    Duration::from_nanos(planned).saturating_add(grace)
}

/// What happened to a worker process, before its output is judged.
pub struct RawRun {
    pub ended: Ended,
    /// The worker's peak resident set size, kB.
    pub peak_rss_kb: Option<u64>,
    /// The worker's CPU time (user + system), from wait4.
    pub cpu_ns: Option<u64>,
    pub stream: Stream,
    pub stderr: String,
    pub sched: SchedInfo,
    pub counters: Result<Counters, String>,
    /// How taskmeter's reader and the worker's writer were scheduled (`sched::run_above_units`).
    pub harness: String,
}

/// When to ask a worker to stop early (end of file on its stdin), and when to kill it.
#[derive(Clone, Copy)]
pub struct StopPolicy {
    /// After this long, whatever happens (for `check-driver`).
    pub after: Option<Duration>,
    /// How long a worker asked to stop may take to finish its iteration and write.
    pub grace: Duration,
    /// After this long from its start, the worker's process group is killed.
    pub limit: Duration,
    /// The most bytes of samples that may wait in the sample file for taskmeter's reader: the
    /// reader asks the worker to stop when more do ([`Outcome::Bounded`]).
    pub backlog_bytes: u64,
}

/// The default bound of a worker's unread samples: a quarter of the machine's room for memory
/// when it starts (MemAvailable, or the room under a memory cgroup's limit: `room::now`), so the
/// units keep the rest and the machine never swaps for taskmeter's sake; 1 GiB when the room is
/// unknown; never below [`MIN_BACKLOG_BYTES`].
pub fn default_backlog_bytes(room: &taskmeter_protocol::Room) -> u64 {
    room.memory_bytes.map_or(1 << 30, |bytes| bytes / 4).max(MIN_BACKLOG_BYTES)
}

/// Where a default bound stops: a writer's flush of 10,000 units is some 10 MB, and a reader
/// that keeps pace finds one or two unread when it looks.
pub const MIN_BACKLOG_BYTES: u64 = 64 << 20;

/// Starts `command`, sends `input` (one line) and keeps stdin open until the worker exits,
/// taskmeter gets a signal, or `stop.after` passes; kills the worker's process group at `stop.limit`.
/// Its frames are checked against `plan` as they arrive, the samples handed to `sink`.
pub fn spawn_and_wait(
    mut command: Command,
    plan: &Plan,
    input: &str,
    sched: &SchedSettings,
    stop: StopPolicy,
    sink: SampleSink,
    mut tick: impl FnMut(),
) -> Result<RawRun, Failure> {
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let samples =
        SampleFile::create().map_err(|e| Failure::Spawn(format!("could not make the worker's sample file: {e}")))?;
    let samples_fd = samples.raw_fd();
    // The reader's mapping is made now: a failure is the row's, before any worker runs.
    let samples =
        samples.reader().map_err(|e| Failure::Spawn(format!("could not map the worker's sample file: {e}")))?;
    // SAFETY: the closure only makes system calls between fork and exec.
    unsafe { command.pre_exec(move || SampleFile::install_in_child(samples_fd)) };
    if !sched.is_default() {
        let (settings, cpu_set) = (sched.clone(), sched.cpu_set());
        // SAFETY: the closure only makes system calls (no allocation, no locks) between fork and exec.
        unsafe { command.pre_exec(move || settings.apply_in_child(cpu_set.as_ref())) };
    }
    // A forked child's ru_maxrss starts from its parent's peak RSS and keeps it across exec, so
    // a worker smaller than taskmeter's peak would report taskmeter's: reset taskmeter's peak to
    // its current RSS (clear_refs 5), note that size, and follow the worker's own VmHWM as well
    // (used below that size). Not malloc_trim: giving the free heap back cost the next row its
    // page faults again (about 1 ms a row, 0.3 points of a default run's harness share), and
    // the VmHWM read while the worker runs gave the same peaks.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let parent_rss_kb = Status::open("self").and_then(|mut status| status.field("VmRSS:")).unwrap_or(u64::MAX);
    let mut child = Spawned::start(command, "worker").map_err(|failure| match failure {
        Failure::Spawn(why) if !sched.is_default() => Failure::Spawn(why.replacen(
            "could not start the worker",
            &format!("could not give the worker {}", sched.describe()),
            1,
        )),
        other => other,
    })?;
    let pid = child.pid();
    let mut worker_status = Status::open(&pid.to_string());
    // Policy, slack and affinity are set before exec and are read now; what the worker does
    // while starting (a preloaded mlockall, a runtime's own threads) is read again shortly after.
    let mut readback = SchedInfo::of(pid);
    let mut read_again = true;
    let read_at = child.started() + Duration::from_millis(50);
    child.tick_early(read_at);
    child.send(&format!("{}\n", input.trim_end()));
    let (gate_tx, gate_rx) = mpsc::channel();
    let (frames, plan_copy, units_policy) = (child.stdout(), plan.clone(), sched.policy);
    // taskmeter's descriptor stays open in the reader: the worker has its own copy as fd 3.
    let (fold, its_thread) = Fold::new(sink);
    let folded = child.on_spare(its_thread);
    let bound = Bound { bytes: stop.backlog_bytes, stopper: child.stopper() };
    let stdout =
        child.on_spare(move || read_frames(frames, samples, pid, plan_copy, (fold, bound), gate_tx, units_policy));
    let (stop_counting, stop_rx) = mpsc::channel();
    let counters = child.on_spare(move || {
        // Above the units, as the reader: at normal weight, one reading of 3,000 busy threads
        // took 2 s instead of 20 ms, and its deltas no longer covered one window.
        // SAFETY: gettid has no preconditions.
        let sched = machine::sched::run_above_units(unsafe { libc::gettid() }, units_policy);
        let read = || {
            let times: counters::ReadingTimes =
                gate_rx.recv().map_err(|_| "the worker never opened its start gate".to_string())?;
            counters::over_window(pid, &times, &stop_rx)
        };
        (read(), sched)
    });
    let stderr = child.stderr_tail(16 * 1024);

    let mut high_water_kb = 0;
    let limits = Limits {
        deadline: child.started() + stop.limit,
        ask: Ask::CloseStdin,
        grace: stop.grace,
        stop_at: stop.after.map(|after| child.started() + after),
    };
    let ended = child.wait(limits, |moment| {
        if moment == Moment::Asking {
            // Asked to stop, the worker closes its window early: read the counters now.
            let _ = stop_counting.send(());
            return;
        }
        // Read the attributes again once the worker has exec'd and started its runtime.
        if read_again && Instant::now() >= read_at {
            read_again = false;
            let now = SchedInfo::of(pid);
            if !now.policy.starts_with("policy -") {
                readback = now;
            }
        }
        if let Some(kb) = worker_status.as_mut().and_then(|status| status.field("VmHWM:")) {
            high_water_kb = high_water_kb.max(kb);
        }
        tick()
    });
    let exited = Instant::now();
    drop(stop_counting);
    let (mut counters, counters_sched) =
        counters.join().unwrap_or_else(|_| (Err("the reader of the counters failed".into()), "unknown".into()));
    let stream = stdout.join().unwrap_or_else(|_| Stream {
        ending: Err(OutputError::Invalid("the reader of the output failed".into())),
        first_samples_ns: None,
        wakeups_counted: 0,
        reader_sched: "unknown".into(),
        writer_sched: "unknown".into(),
        backlog_peak_bytes: 0,
        backlog_bound_bytes: stop.backlog_bytes,
        backlog_stopped_at: None,
        drained_after_exit_ns: 0,
    });
    // The reader has ended, and its fold with it: the fold's thread takes what is left, then ends.
    let _ = folded.join();
    let stream = Stream { drained_after_exit_ns: exited.elapsed().as_nanos() as u64, ..stream };
    if let Ok(c) = counters.as_mut() {
        c.wakeups = stream.wakeups_counted;
    }
    let stderr = String::from_utf8_lossy(&stderr.join().unwrap_or_default()).into_owned();
    let cpu_ns = ended.exit.as_ref().ok().map(|exit| exit.cpu_ns);
    // Clearly above taskmeter's size at the fork (1 MiB for what taskmeter allocated since),
    // ru_maxrss is the worker's; below, it may be taskmeter's, and the last VmHWM read (every
    // 250 ms at most) is the worker's.
    let peak_rss_kb = match &ended.exit {
        Ok(exit) if exit.peak_rss_kb > parent_rss_kb + 1024 => Some(exit.peak_rss_kb),
        Ok(_) => Some(high_water_kb).filter(|kb| *kb > 0),
        Err(_) => None,
    };
    let harness = format!("reader {}, writer {}, counters {counters_sched}", stream.reader_sched, stream.writer_sched);
    Ok(RawRun { ended, peak_rss_kb, cpu_ns, stream, stderr, sched: readback, counters, harness })
}

/// The writer's line of `harness_sched` when a worker writes from its main thread, whose
/// scheduling taskmeter records as the worker's (so it is not raised; protocol: "The writer").
pub const WRITER_ON_MAIN: &str = "not raised: it is the worker's main thread";

/// How often the reader looks at the sample file while stdout is quiet: as often as the writer
/// appends to it (every `flush_ns`), within these bounds; more often would only wake a thread
/// among the busy units for nothing.
const SAMPLE_POLL_MS: std::ops::RangeInclusive<u64> = 10..=1000;

/// Read at once beyond this, the reader has fallen behind the worker: the fold moves to a thread
/// of its own (a writer's flush of 10,000 units is some 10 MB), where there may be a core for it.
const BEHIND_BYTES: u64 = 64 << 20;

/// The fold moves to a thread of its own only where taskmeter may run on at least this many CPUs:
/// one for the worker, one for the reader, one for the fold. On two, the thread had no core of
/// its own: handing it the batches cost taskmeter a third more a sample (44-51 ns against 33-38)
/// and lowered the pace kept from 25 to 20 M samples a second (`sample_pace`, the guest,
/// 2026-12-05: BENCHMARKS.md).
const FOLD_THREAD_FROM_CPUS: usize = 3;

/// Whether the fold may move to a thread of its own here: the CPUs of taskmeter's affinity and
/// CPU quota.
fn fold_may_move() -> bool {
    std::thread::available_parallelism().is_ok_and(|cpus| fold_may_move_on(cpus.get()))
}

fn fold_may_move_on(cpus: usize) -> bool {
    cpus >= FOLD_THREAD_FROM_CPUS
}

/// The bound of a worker's unread samples, and the way to ask it to stop at the bound.
struct Bound {
    bytes: u64,
    stopper: Stopper,
}

/// The checker and where its checked samples go, on the reader's thread.
struct Delivery {
    checker: Checker,
    fold: Fold,
    /// Whether the fold may move to a thread of its own ([`fold_may_move`]).
    fold_may_move: bool,
    bound: Bound,
    /// Checked samples of consecutive sample frames, handed on together: when the reader
    /// would wait for more, before any other frame, and every `fold::BATCH` (one lock of the
    /// row's statistics a frame, of some ten samples at 10,000 units, was 2 % of taskmeter's
    /// CPU).
    views: Vec<SampleView>,
    first_samples_ns: Option<u64>,
    /// When the counters are read, once the gate is known, and the samples woken between.
    reading_times: Option<counters::ReadingTimes>,
    wakeups_counted: u64,
    backlog_peak_bytes: u64,
    backlog_stopped_at: Option<u64>,
}

impl Delivery {
    fn hand_on(&mut self) {
        if !self.views.is_empty() {
            self.count_wakeups();
            self.fold.take(&mut self.views);
        }
    }

    /// Checks a frame of stdout (never a sample frame: those come from the sample file).
    fn accept(&mut self, frame: &Frame) -> Result<(), OutputError> {
        self.check(|checker, views| checker.accept(frame, views))
    }

    /// Decodes an `S` or `F` frame of the sample file and checks it in pieces of at most
    /// `fold::BATCH` samples (a frame that fits is its one piece), each handed on while it is
    /// still in the core's cache. The chunk is checked where it was decoded: moved, its fields,
    /// written one by one, were read back in wider words, which waits for the writes to leave
    /// the core (a quarter of `drain`'s time at 100,000 units).
    #[inline(never)]
    fn accept_sample_frame(&mut self, kind: u8, payload: &[u8]) -> Result<(), OutputError> {
        match &decode_samples(kind, payload) {
            Ok(chunk) => chunk.try_for_each_piece(fold::BATCH, |piece| {
                self.check(|checker, views| checker.accept_samples(piece, views))
            }),
            Err(why) => Err(OutputError::Invalid(why.clone())),
        }
    }

    /// Runs one check that appends the samples it passes to `views`; a frame (or piece) that
    /// broke the protocol counts none of its samples.
    fn check(
        &mut self,
        check: impl FnOnce(&mut Checker, &mut Vec<SampleView>) -> Result<(), OutputError>,
    ) -> Result<(), OutputError> {
        if self.views.len() >= fold::BATCH {
            self.hand_on();
        }
        let before = self.views.len();
        if let Err(e) = check(&mut self.checker, &mut self.views) {
            self.views.truncate(before);
            return Err(e);
        }
        self.note_first_arrival(before);
        Ok(())
    }

    /// When the first samples arrived: now, if the views grew past `before` for the first time.
    fn note_first_arrival(&mut self, before: usize) {
        if self.first_samples_ns.is_none() && self.views.len() > before {
            self.first_samples_ns = Some(taskmeter_clock::now_ns());
        }
    }

    /// Counts the checked samples about to be handed on that woke within the counters' window:
    /// a batch at a time, where a count for each frame of a sample or two cost 2 % of a
    /// 100,000-unit run.
    fn count_wakeups(&mut self) {
        if let Some(times) = &self.reading_times {
            let between = times[0].load(Ordering::Acquire)..=times[1].load(Ordering::Acquire);
            self.wakeups_counted += self.views.iter().filter(|v| between.contains(&v.sample.wake_ns)).count() as u64;
        }
    }

    /// Checks every whole frame the sample file holds now. A frame cut by the worker's end is
    /// left unread, as one on stdout would be.
    fn drain(&mut self, file: &mut SampleReader) -> Result<(), OutputError> {
        self.look(file).map_err(|e| OutputError::Invalid(format!("cannot read the sample file: {e}")))?;
        let (start, mut moved) = (file.offset(), file.behind() > BEHIND_BYTES);
        loop {
            if !moved && file.offset() - start > BEHIND_BYTES {
                moved = true;
            }
            if moved && self.fold_may_move && !self.fold.on_its_thread() {
                self.hand_on();
                self.fold.move_to_its_thread();
            }
            let (kind, payload) = match file.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => match self.look(file) {
                    Ok(true) => continue,
                    Ok(false) => return Ok(()),
                    Err(e) => return Err(OutputError::Invalid(format!("cannot read the sample file: {e}"))),
                },
                Err(e) => return Err(OutputError::Invalid(format!("in the sample file, {e}"))),
            };
            if let frame_kind::SAMPLES | frame_kind::FLUSHED = kind {
                self.accept_sample_frame(kind, payload)?;
                continue;
            }
            return Err(OutputError::Invalid(match decode(kind, payload) {
                Ok(other) => format!("a frame {} in the sample file (it holds S and F frames only)", other.name()),
                Err(why) => why,
            }));
        }
    }

    /// Looks at how much the worker has appended (`SampleReader::fill`), and how far behind
    /// that leaves the reader: beyond the bound, the worker is asked to stop (once), and what
    /// it wrote is still read, to the last sample.
    fn look(&mut self, file: &mut SampleReader) -> std::io::Result<bool> {
        let grew = file.fill()?;
        let behind = file.behind();
        self.backlog_peak_bytes = self.backlog_peak_bytes.max(behind);
        if behind > self.bound.bytes && self.backlog_stopped_at.is_none() {
            self.backlog_stopped_at = Some(behind);
            self.bound.stopper.stop();
        }
        Ok(grew)
    }

    /// The stream has ended: frames held for a position that never came are checked now.
    fn finish(mut self) -> (Result<Ending, OutputError>, Option<u64>, u64, u64) {
        let before = self.views.len();
        let held = self.checker.end_of_samples(&mut self.views);
        match &held {
            Ok(()) => self.note_first_arrival(before),
            Err(_) => self.views.truncate(before),
        }
        self.hand_on();
        let ending = match self.fold.gone {
            true => Err(OutputError::Invalid("taskmeter's thread folding the samples ended early".into())),
            false => held.map(|()| self.checker.finish()),
        };
        (ending, self.first_samples_ns, self.wakeups_counted, self.backlog_peak_bytes)
    }
}

/// Reads, checks and hands on the worker's frames, on a thread of its own, until the stream
/// ends: the control frames from stdout and, once the gate is read, the sample frames from the
/// sample file, which is read to its end before each `U`, `V` and `D` frame (the worker wrote
/// its samples before them) and when stdout is quiet. A frame cut by the worker's end closes the
/// stream as a clean end would: what came before it is kept.
/// As soon as the gate is read, when to read the counters of process `pid` goes to `counters`,
/// and the samples that wake between the two readings' starts (as planned, then as they
/// really began) are counted.
fn read_frames(
    stdout: Option<super::pipe::Pipe>,
    mut samples: SampleReader,
    pid: i32,
    plan: Plan,
    (fold, bound): (Fold, Bound),
    counters: mpsc::Sender<counters::ReadingTimes>,
    units_policy: Option<Policy>,
) -> Stream {
    // SAFETY: gettid has no preconditions.
    let reader_sched = machine::sched::run_above_units(unsafe { libc::gettid() }, units_policy);
    let mut writer_sched = "not found: the gate never opened".to_string();
    let (warmup_ns, duration_ns) = (plan.warmup_ns, plan.duration_ns);
    let poll_ms = (plan.flush_ns / 1_000_000).clamp(*SAMPLE_POLL_MS.start(), *SAMPLE_POLL_MS.end()) as i32;
    // The granularity experiment has no window to count over: its grains are timed apart.
    let has_window = plan.grain.is_none();
    let mut delivery = Delivery {
        checker: Checker::new(plan),
        fold,
        fold_may_move: fold_may_move(),
        bound,
        views: Vec::new(),
        first_samples_ns: None,
        reading_times: None,
        wakeups_counted: 0,
        backlog_peak_bytes: 0,
        backlog_stopped_at: None,
    };
    let bound_bytes = delivery.bound.bytes;
    let stream = |(ending, first_samples_ns, wakeups_counted, backlog_peak_bytes), writer_sched, stopped_at| Stream {
        ending,
        first_samples_ns,
        wakeups_counted,
        reader_sched: reader_sched.clone(),
        writer_sched,
        backlog_peak_bytes,
        backlog_bound_bytes: bound_bytes,
        backlog_stopped_at: stopped_at,
        drained_after_exit_ns: 0,
    };
    let Some(stdout) = stdout else { return stream(delivery.finish(), writer_sched, None) };
    let waiter = stdout.state();
    let mut reader = FrameReader::new(std::io::BufReader::with_capacity(64 << 10, stdout));
    // The sample file is read from the gate on, whenever stdout has nothing to read, and a
    // last time before the first `U` (or `D`): the worker writes them after its samples. Not
    // before each of 10,000 `U` frames: two system calls each cost a 10,000-unit run a fifth of
    // taskmeter's CPU.
    let (mut gate_read, mut samples_ended) = (false, false);
    let violation = loop {
        if !reader.next_is_buffered() {
            if gate_read && !samples_ended {
                if let Err(e) = delivery.drain(&mut samples) {
                    break Some(e);
                }
            }
            delivery.hand_on();
            if !waiter.readable_within(poll_ms) {
                continue;
            }
        }
        let (kind, payload) = match reader.next_raw() {
            Ok(Some(frame)) => frame,
            Ok(None) | Err(ReadError::Cut { .. }) => break None,
            Err(e) => break Some(OutputError::Invalid(e.to_string())),
        };
        let frame = match decode(kind, payload) {
            Ok(Frame::Samples(chunk)) => {
                break Some(OutputError::Invalid(format!(
                    "a sample frame of unit {} on stdout (sample frames go to the sample file, fd 3)",
                    chunk.unit
                )))
            }
            Ok(frame) => frame,
            Err(why) => break Some(OutputError::Invalid(why)),
        };
        delivery.hand_on();
        if gate_read && !samples_ended && matches!(frame, Frame::Unit(_) | Frame::View(_) | Frame::Done(_)) {
            // Written after the samples (a `V` may come while they still do): read them first.
            if let Err(e) = delivery.drain(&mut samples) {
                break Some(e);
            }
            samples_ended = !matches!(frame, Frame::View(_));
        }
        if let Err(e) = delivery.accept(&frame) {
            break Some(e);
        }
        if let Frame::Gate(g) = &frame {
            gate_read = true;
            // At once, from this thread already above the units: the units released by the
            // gate would keep any thread of normal priority (and so the writer) waiting.
            writer_sched = match machine::sched::thread_named(pid, WRITER_THREAD) {
                // The main thread's scheduling is the one recorded as the worker's.
                Some(tid) if tid == pid => WRITER_ON_MAIN.to_string(),
                Some(tid) => machine::sched::run_above_units(tid, units_policy),
                None => format!("not found (no thread named {WRITER_THREAD})"),
            };
            if has_window {
                let measure_start_ns = g.run_start_ns + warmup_ns;
                let threads = counters::threads_of(pid);
                let times = counters::planned(counters::reading_times(
                    g.run_start_ns,
                    measure_start_ns,
                    measure_start_ns + duration_ns,
                    threads,
                ));
                let _ = counters.send(times.clone());
                delivery.reading_times = Some(times);
            }
        }
    };
    let stopped_at = delivery.backlog_stopped_at;
    let result = match violation {
        // The end: what the file holds was written before it.
        None if gate_read && !samples_ended => match delivery.drain(&mut samples) {
            Ok(()) => delivery.finish(),
            Err(e) => {
                delivery.hand_on();
                (Err(e), delivery.first_samples_ns, delivery.wakeups_counted, delivery.backlog_peak_bytes)
            }
        },
        None => delivery.finish(),
        Some(e) => {
            // What was checked before the violation counts; nothing it sends after can:
            // stop it now rather than at its deadline (a worker that floods would never end).
            delivery.hand_on();
            super::kill_group(pid, libc::SIGKILL);
            (Err(e), delivery.first_samples_ns, delivery.wakeups_counted, delivery.backlog_peak_bytes)
        }
    };
    stream(result, writer_sched, stopped_at)
}

/// Runs a worker on a plan and judges what it did.
pub fn run_worker(
    command: Command,
    plan: &Plan,
    sched: &SchedSettings,
    (grace, backlog_bytes): (Duration, Option<u64>),
    sink: SampleSink,
    tick: impl FnMut(),
) -> WorkerRun {
    let stop = StopPolicy {
        after: None,
        grace: Duration::from_nanos(plan.max_expected_ns()) + Duration::from_secs(2),
        limit: deadline(plan, grace),
        backlog_bytes: backlog_bytes.unwrap_or_else(|| default_backlog_bytes(&plan.room)),
    };
    match spawn_and_wait(command, plan, &plan.to_json(), sched, stop, sink, tick) {
        Err(reason) => WorkerRun {
            outcome: Outcome::Failed(reason),
            sched: None,
            peak_rss_kb: None,
            cpu_ns: None,
            wall_ns: 0,
            exited_ns: None,
            counters: Err("the worker did not start".into()),
            stderr: String::new(),
            harness: None,
            backlog_peak_bytes: None,
            backlog_bound_bytes: Some(stop.backlog_bytes),
            drained_after_exit_ns: None,
        },
        Ok(mut raw) => {
            let outcome = classify(&mut raw);
            let wall_ns = raw.ended.wall.as_nanos() as u64;
            WorkerRun {
                outcome,
                sched: Some(raw.sched),
                peak_rss_kb: raw.peak_rss_kb,
                cpu_ns: raw.cpu_ns,
                wall_ns,
                exited_ns: raw.ended.exit.as_ref().ok().map(|e| e.exited_ns),
                counters: raw.counters,
                stderr: raw.stderr,
                backlog_peak_bytes: Some(raw.stream.backlog_peak_bytes),
                backlog_bound_bytes: Some(raw.stream.backlog_bound_bytes),
                drained_after_exit_ns: Some(raw.stream.drained_after_exit_ns),
                harness: Some(raw.harness),
            }
        }
    }
}

/// Judges a worker's run: its stream first (a violation or a refusal is the answer whatever
/// else happened), then how it ended: on its own, at its deadline, or stopped by a signal.
///
/// The stream's ending moves into the outcome (`raw.stream.ending` is left saying so): at
/// 100,000 units a copy of what was delivered took 8 MB of fresh memory, a page fault each 4 KiB.
pub fn classify(raw: &mut RawRun) -> Outcome {
    let stderr = last_line(&raw.stderr);
    let taken = Err(OutputError::Invalid("the worker's run was classified".into()));
    let ending = match std::mem::replace(&mut raw.stream.ending, taken) {
        Err(OutputError::Invalid(why)) => return Outcome::Failed(Failure::Invalid(why)),
        Err(OutputError::Refused(message)) => return Outcome::Failed(Failure::Refused { message, how: None }),
        Ok(ending) => ending,
    };
    let ended = &raw.ended;
    let why_it_ended = match ended.stopped {
        Some(Stop::Deadline) => Failure::TimedOut {
            after: ended.limit,
            hint: "; raise --grace if its busy work is long".into(),
            stderr: stderr.clone(),
        },
        Some(Stop::Signal(_) | Stop::Asked | Stop::Requested) if ended.killed.is_some() => {
            ended.stop_failure("worker", stderr.clone()).expect("stopped")
        }
        _ => match ended.status() {
            Some(status) => Failure::Ended { who: "the worker".into(), how: describe(status), stderr: stderr.clone() },
            None => Failure::Spawn(format!(
                "could not wait for the worker: {}",
                ended.exit.as_ref().err().map(|e| e.to_string()).unwrap_or_default()
            )),
        },
    };
    let by_signal = matches!(ended.stopped, Some(Stop::Signal(_)));
    let interrupted = || match ended.stop_failure("worker", None) {
        Some(failure @ Failure::Interrupted { .. }) => failure,
        _ => Failure::Interrupted { signal: "a request to stop".into(), who: "the worker".into(), killed: None },
    };
    match ending {
        Ending::Refused(message) => {
            Outcome::Failed(Failure::Refused { message, how: ended.status().filter(|s| !s.success()).map(describe) })
        }
        Ending::Complete(delivered)
            if ended.clean()
                && ended.stopped == Some(Stop::Requested)
                && delivered.done.as_ref().is_some_and(|d| d.interrupted) =>
        {
            Outcome::Bounded(delivered, bounded_reason(&raw.stream))
        }
        Ending::Complete(delivered) if ended.clean() && delivered.done.as_ref().is_some_and(|d| d.interrupted) => {
            let reason = if ended.stopped == Some(Stop::Asked) {
                "stopped early, as asked".to_string()
            } else {
                interrupted().to_string()
            };
            Outcome::Interrupted(delivered, reason)
        }
        Ending::Complete(delivered) if ended.clean() => Outcome::Completed(delivered),
        Ending::Complete(_) => Outcome::Failed(Failure::Invalid(format!("the worker sent D but then {why_it_ended}"))),
        Ending::Cut(delivered) if by_signal => Outcome::Interrupted(delivered, why_it_ended.to_string()),
        Ending::Cut(delivered) => Outcome::Cut(delivered, why_it_ended),
        Ending::Empty { .. } if by_signal => Outcome::Failed(interrupted()),
        Ending::Empty { hello: None } if ended.clean() => {
            Outcome::Failed(Failure::Invalid("the worker sent nothing".into()))
        }
        Ending::Empty { .. } if ended.clean() => {
            Outcome::Failed(Failure::Invalid("the output ends before the G frame".into()))
        }
        Ending::Empty { .. } => Outcome::Failed(why_it_ended),
    }
}

/// Why a worker stopped at its backlog's bound, with the figures.
fn bounded_reason(stream: &Stream) -> String {
    let size = |bytes: u64| taskmeter_console::sizes::format_bytes(bytes as f64);
    format!(
        "stopped early: {} of its samples waited for taskmeter's reader, past the bound of {} \
         (--max-backlog); every sample it wrote was read and counted",
        size(stream.backlog_stopped_at.unwrap_or(stream.backlog_peak_bytes)),
        size(stream.backlog_bound_bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fold gets a thread of its own only where the worker, the reader and the fold can
    /// each have a CPU.
    #[test]
    fn the_fold_moves_only_with_a_cpu_for_it() {
        assert_eq!([1, 2, 3, 4, 16].map(fold_may_move_on), [false, false, true, true, true]);
    }
}
