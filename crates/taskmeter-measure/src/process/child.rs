//! One child process under supervision, for every kind taskmeter starts (workers, receivers,
//! bench bodies, builds): it leads its own process group (one kill reaches all it started, and a
//! terminal's Ctrl-C reaches only taskmeter); it dies with taskmeter (PR_SET_PDEATHSIG, and the
//! guard for what it started); a signal to taskmeter asks it to stop its own way, then kills it
//! after a grace, and a second signal kills it at once; it never outlives its deadline; it is
//! reaped with wait4 for its resources; and once it has exited, nothing it left behind can keep
//! taskmeter reading its pipes.

use super::pipe::{Pipe, PipeState};
use super::signals::{self, Listener, Urgency};
use super::spare::{Running, Spare};
use super::{guard, kill_group, Exit, Failure, Killed};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a toolchain may take to say its version.
pub const PROBE_LIMIT: Duration = Duration::from_secs(60);
/// How long a driver or receiver may take to build (wasmtime takes minutes on 2 cores).
pub const BUILD_LIMIT: Duration = Duration::from_secs(30 * 60);

/// How long the pipes of a child that has exited may stay open before what holds them is killed.
const PIPE_GRACE: Duration = Duration::from_secs(1);

enum Event {
    Exited(std::io::Result<Exit>),
    Signal(Urgency),
    /// One of taskmeter's own threads asks the child to stop ([`Stopper`]).
    Stop,
}

/// Asks a child to stop (as [`Limits::stop_at`] does) from another of taskmeter's threads: a
/// worker's reader, when the samples waiting for it outgrow their bound.
#[derive(Clone)]
pub struct Stopper(mpsc::Sender<Event>);

impl Stopper {
    pub fn stop(&self) {
        let _ = self.0.send(Event::Stop);
    }
}

/// How a child is asked to stop, at a signal or at [`Limits::stop_at`].
#[derive(Clone, Copy, Debug)]
pub enum Ask {
    /// End of file on its stdin (the worker and receiver protocols' "stop now").
    CloseStdin,
    /// A signal to its process group (SIGTERM for a shell command).
    Signal(i32),
}

/// When and how a child is stopped.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Its group is killed (SIGKILL) at this time, whatever it is doing.
    pub deadline: Instant,
    pub ask: Ask,
    /// How long a child asked to stop has before SIGKILL.
    pub grace: Duration,
    /// Ask it to stop at this time anyway (check-driver's early stop).
    pub stop_at: Option<Instant>,
}

/// What [`Spawned::wait`] tells its caller while it waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moment {
    /// Every 250 ms at most.
    Tick,
    /// The child is about to be asked to stop (a signal, or [`Limits::stop_at`]).
    Asking,
}

/// Why taskmeter stopped a child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Its deadline came.
    Deadline,
    /// taskmeter received this signal.
    Signal(i32),
    /// [`Limits::stop_at`] came.
    Asked,
    /// A [`Stopper`] asked.
    Requested,
}

/// How a supervised child ended.
#[derive(Debug)]
pub struct Ended {
    pub exit: std::io::Result<Exit>,
    pub stopped: Option<Stop>,
    /// Asked to stop, it was killed instead.
    pub killed: Option<Killed>,
    /// After it exited, something it started still held its stdout or stderr (and was killed).
    pub pipes_held: bool,
    pub wall: Duration,
    /// Its deadline, counted from its start.
    pub limit: Duration,
}

impl Ended {
    pub fn status(&self) -> Option<ExitStatus> {
        self.exit.as_ref().ok().map(|e| e.status)
    }

    /// It exited with status 0, on its own.
    pub fn clean(&self) -> bool {
        self.stopped != Some(Stop::Deadline) && self.killed.is_none() && self.status().is_some_and(|s| s.success())
    }

    /// The failure its stop makes, when taskmeter stopped it: a signal, or its deadline.
    pub fn stop_failure(&self, what: &str, stderr: Option<String>) -> Option<Failure> {
        match self.stopped? {
            Stop::Signal(signal) => Some(Failure::Interrupted {
                signal: signals::name(signal),
                who: format!("the {what}"),
                killed: self.killed,
            }),
            Stop::Deadline => Some(Failure::TimedOut { after: self.limit, hint: String::new(), stderr }),
            Stop::Asked | Stop::Requested => self.killed.map(|killed| Failure::Ended {
                who: format!("the {what}"),
                how: format!("was asked to stop but {killed}"),
                stderr,
            }),
        }
    }
}

/// A child that has been started, until [`Spawned::wait`] reaps it.
pub struct Spawned {
    pid: i32,
    started: Instant,
    child: Option<std::process::Child>,
    stdin: Option<ChildStdin>,
    pipes: Vec<Arc<PipeState>>,
    events: mpsc::Receiver<Event>,
    sender: mpsc::Sender<Event>,
    /// One [`Moment::Tick`] sooner than the 250 ms.
    early_tick: Option<Instant>,
    /// Threads started before the child, for the jobs that watch it ([`Spawned::on_spare`]).
    spares: Vec<Spare>,
    _signals: Listener,
}

/// The threads a child needs, started before it: the waiter, its stdout's and stderr's readers,
/// and a worker's reader of its kernel counters and the thread that folds its samples.
const SPARES: usize = 5;

impl Spawned {
    /// Starts `command` (its streams as the caller set them) under supervision; refuses to
    /// start once a signal has asked taskmeter to stop.
    pub fn start(mut command: Command, what: &str) -> Result<Spawned, Failure> {
        let (sender, events) = mpsc::channel();
        let told = sender.clone();
        let listener = Listener::new(move |urgency| {
            let _ = told.send(Event::Signal(urgency));
        });
        if let Some(reason) = signals::reason() {
            return Err(Failure::Spawn(format!("not started: {reason}")));
        }
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: only async-signal-safe calls between fork and exec (prctl, getppid).
        unsafe {
            command.process_group(0).pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // taskmeter may have died between the fork and the prctl.
                if libc::getppid() != parent {
                    return Err(std::io::Error::other("taskmeter has exited"));
                }
                Ok(())
            });
        }
        let spares = (0..SPARES)
            .map(|_| Spare::start())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Failure::Spawn(format!("could not start taskmeter's threads for the {what}: {e}")))?;
        let started = Instant::now();
        let mut child = command.spawn().map_err(|e| Failure::Spawn(format!("could not start the {what}: {e}")))?;
        let pid = child.id() as i32;
        guard::watch(pid);
        let stdin = child.stdin.take();
        Ok(Spawned {
            pid,
            started,
            child: Some(child),
            stdin,
            pipes: Vec::new(),
            events,
            sender,
            early_tick: None,
            spares,
            _signals: listener,
        })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    /// A way for another thread to ask the child to stop while [`Spawned::wait`] waits.
    pub fn stopper(&self) -> Stopper {
        Stopper(self.sender.clone())
    }

    /// Has [`Spawned::wait`] tick once at `at` as well (to read the child once it has exec'd).
    pub fn tick_early(&mut self, at: Instant) {
        self.early_tick = Some(at);
    }

    /// Writes to its stdin; a child that exited at once closed it, and its output will say why.
    pub fn send(&mut self, text: &str) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = stdin.write_all(text.as_bytes()).and_then(|_| stdin.flush());
        }
    }

    /// Its stdout, to be read on a thread of the caller's.
    pub fn stdout(&mut self) -> Option<Pipe> {
        let end = self.child.as_mut()?.stdout.take()?;
        let pipe = self.watch_pipe(end);
        pipe.enlarge(super::pipe::WORKER_PIPE_BYTES);
        Some(pipe)
    }

    /// Its stderr, kept (the last `keep` bytes) by a thread.
    pub fn stderr_tail(&mut self, keep: usize) -> Running<Vec<u8>> {
        let pipe = self.child.as_mut().and_then(|c| c.stderr.take()).map(|end| self.watch_pipe(end));
        self.on_spare(move || super::pipe::collect(pipe, keep))
    }

    /// Runs `job` on one of the threads started before the child (or on a new one if they are
    /// all taken; if none can be started, the job never runs and its `join` says so).
    pub fn on_spare<T: Send + 'static>(&mut self, job: impl FnOnce() -> T + Send + 'static) -> Running<T> {
        match self.spares.pop().map_or_else(Spare::start, Ok) {
            Ok(spare) => spare.run(job),
            Err(_) => Running::never(),
        }
    }

    fn watch_pipe(&mut self, end: impl Into<std::os::fd::OwnedFd>) -> Pipe {
        let (pipe, state) = Pipe::new(end);
        self.pipes.push(state);
        pipe
    }

    fn ask(&mut self, ask: Ask) {
        match ask {
            Ask::CloseStdin => drop(self.stdin.take()),
            Ask::Signal(signal) => kill_group(self.pid, signal),
        }
    }

    /// Waits until it exits, within `limits`, telling `at` each [`Moment`]; then makes sure
    /// nothing it started holds its pipes, and reaps it.
    pub fn wait(mut self, limits: Limits, mut at: impl FnMut(Moment)) -> Ended {
        let child = self.child.take().expect("waited once");
        let waiter = self.sender.clone();
        let _waiting = self.on_spare(move || {
            let _ = waiter.send(Event::Exited(super::wait_with_usage(child)));
        });
        let mut stop_at = limits.stop_at;
        let mut kill_at: Option<Instant> = None;
        let (mut stopped, mut killed, mut deadline_passed) = (None, None, false);
        let exit = loop {
            let now = Instant::now();
            // Once passed, the deadline is no time to wake for: the child was killed, and its
            // exit is waited for (a wait that timed out at once, again and again, would spin).
            let deadline = (!deadline_passed).then_some(limits.deadline);
            let next = [deadline, stop_at, kill_at, self.early_tick, Some(now + Duration::from_millis(250))]
                .into_iter()
                .flatten()
                .min()
                .expect("one");
            match self.events.recv_timeout(next.saturating_duration_since(now)) {
                Ok(Event::Exited(exit)) => break exit,
                Ok(Event::Signal(urgency)) => {
                    let signal = signals::signal().unwrap_or(libc::SIGINT);
                    stopped = Some(stopped.unwrap_or(Stop::Signal(signal)));
                    if urgency == Urgency::Now {
                        killed.get_or_insert(Killed::SecondSignal);
                        kill_group(self.pid, libc::SIGKILL);
                    } else if kill_at.is_none() {
                        at(Moment::Asking);
                        self.ask(limits.ask);
                        kill_at = Some(Instant::now() + limits.grace);
                    }
                }
                Ok(Event::Stop) => {
                    if kill_at.is_none() {
                        stopped.get_or_insert(Stop::Requested);
                        at(Moment::Asking);
                        self.ask(limits.ask);
                        kill_at = Some(Instant::now() + limits.grace);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => unreachable!("the spawner holds a sender"),
                Err(RecvTimeoutError::Timeout) => {
                    let now = Instant::now();
                    if now >= limits.deadline && !deadline_passed {
                        deadline_passed = true;
                        // Already asked to stop, it keeps that reason.
                        match stopped {
                            None => stopped = Some(Stop::Deadline),
                            Some(_) => _ = killed.get_or_insert(Killed::AtDeadline),
                        }
                        kill_group(self.pid, libc::SIGKILL);
                    } else if kill_at.is_some_and(|at| now >= at) {
                        kill_at = None;
                        killed.get_or_insert(Killed::AfterGrace(limits.grace));
                        kill_group(self.pid, libc::SIGKILL);
                    } else if stop_at.is_some_and(|at| now >= at) {
                        stop_at = None;
                        stopped.get_or_insert(Stop::Asked);
                        at(Moment::Asking);
                        self.ask(limits.ask);
                        kill_at.get_or_insert(now + limits.grace);
                    }
                    if self.early_tick.is_some_and(|at| now >= at) {
                        self.early_tick = None;
                    }
                    at(Moment::Tick);
                }
            }
        };
        let wall = self.started.elapsed();
        drop(self.stdin.take());
        let pipes_held = self.release_pipes();
        let limit = limits.deadline.saturating_duration_since(self.started);
        Ended { exit, stopped, killed, pipes_held, wall, limit }
    }

    /// After the exit: waits (a short while) for every writer of its pipes to be gone, kills
    /// its group (anything it left running), and abandons a pipe a writer that escaped the group
    /// still holds. True when something held a pipe.
    fn release_pipes(&self) -> bool {
        let all_gone = |pipes: &[Arc<PipeState>]| pipes.iter().all(|p| p.writers_gone());
        let wait_for = |limit: Duration| {
            let until = Instant::now() + limit;
            while !all_gone(&self.pipes) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            all_gone(&self.pipes)
        };
        let held = !wait_for(PIPE_GRACE);
        kill_group(self.pid, libc::SIGKILL);
        guard::release(self.pid);
        if held && !wait_for(Duration::from_millis(500)) {
            self.pipes.iter().for_each(|p| p.abandon());
        }
        held
    }
}

/// Runs `command` to its end (a build, a toolchain's version) within `limit`, its output
/// collected: `output()` under supervision.
pub fn output(mut command: Command, what: &str, limit: Duration) -> Result<std::process::Output, Failure> {
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut spawned = Spawned::start(command, what)?;
    let stdout = spawned.stdout();
    let stdout = spawned.on_spare(move || super::pipe::collect(stdout, 1 << 20));
    let stderr = spawned.stderr_tail(1 << 20);
    let deadline = spawned.started() + limit;
    let ended = spawned.wait(
        Limits { deadline, ask: Ask::Signal(libc::SIGTERM), grace: Duration::from_secs(2), stop_at: None },
        |_| {},
    );
    let (stdout, stderr) = (stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default());
    if let Some(failure) = ended.stop_failure(what, super::last_line(&String::from_utf8_lossy(&stderr))) {
        return Err(failure);
    }
    let status = ended.exit.map_err(|e| Failure::Spawn(format!("could not wait for the {what}: {e}")))?.status;
    Ok(std::process::Output { status, stdout, stderr })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_its_deadline_it_waits_for_the_exit_without_spinning() {
        let mut command = Command::new("sh");
        // Killed at its deadline, it is gone a little later: the waiter reaps it in its own time.
        command.args(["-c", "sleep 30"]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let child = Spawned::start(command, "test").expect("sh starts");
        let limits = Limits {
            deadline: child.started() + Duration::from_millis(300),
            ask: Ask::Signal(libc::SIGTERM),
            grace: Duration::from_secs(1),
            stop_at: None,
        };
        let mut ticks = 0u128;
        let ended = child.wait(limits, |moment| ticks += u128::from(moment == Moment::Tick));
        assert_eq!(ended.stopped, Some(Stop::Deadline));
        // A tick every 250 ms, and one at each limit it passed: never more, however slow the exit.
        let bound = ended.wall.as_millis() / 250 + 3;
        assert!(ticks <= bound, "{ticks} ticks in {:?} (at most {bound})", ended.wall);
    }
}
