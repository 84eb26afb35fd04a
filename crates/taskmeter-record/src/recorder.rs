//! `Recorder`: the handle user code clones into its tasks and threads.

use crate::client::Client;
use crate::clock::now_ns;
use crate::event::{Event, MAX_VALUE};
use crate::local::Job;
use std::sync::{Arc, OnceLock};

/// Records units of work as they complete. Cheap to clone; `Send + Sync`.
///
/// Every call takes its timestamp first, on CLOCK_MONOTONIC, at the call site. A recorder is one
/// of: the sink of a [`crate::Bench`] job in this process, a client of `taskmeter bench` in
/// another process ([`Recorder::from_env`]), or disabled (every call is a no-op).
#[derive(Clone)]
pub struct Recorder {
    sink: Sink,
}

#[derive(Clone)]
enum Sink {
    Off,
    Local(Arc<Job>),
    Socket(Arc<Client>, Option<u64>),
}

/// The environment variable holding the collector's datagram socket.
pub const ENDPOINT_VAR: &str = "TASKMETER_RECORD";
/// The environment variable holding the end of the measurement window (CLOCK_MONOTONIC ns).
pub const UNTIL_VAR: &str = "TASKMETER_RECORD_UNTIL";

impl Recorder {
    /// A recorder whose every call is a no-op.
    pub fn disabled() -> Recorder {
        Recorder { sink: Sink::Off }
    }

    pub(crate) fn local(job: Arc<Job>) -> Recorder {
        Recorder { sink: Sink::Local(job) }
    }

    /// A client of the collector named by `TASKMETER_RECORD`, or a disabled recorder when the
    /// variable is unset (production) or the collector cannot be reached (one warning on stderr).
    pub fn from_env() -> Recorder {
        let Ok(path) = std::env::var(ENDPOINT_VAR) else { return Recorder::disabled() };
        let until = std::env::var(UNTIL_VAR).ok().and_then(|v| v.parse().ok());
        Recorder::connect(&path, until).unwrap_or_else(|e| {
            eprintln!("taskmeter-record: cannot reach the collector at {path}: {e}; recording is off");
            Recorder::disabled()
        })
    }

    /// A client of the collector listening on the datagram socket `path`; `until` is the end of
    /// the measurement window (CLOCK_MONOTONIC ns) for [`Recorder::running`].
    pub fn connect(path: &str, until: Option<u64>) -> std::io::Result<Recorder> {
        Ok(Recorder { sink: Sink::Socket(Arc::new(Client::connect(path)?), until) })
    }

    /// The process-wide recorder from the environment, created at first use.
    pub fn global() -> &'static Recorder {
        static GLOBAL: OnceLock<Recorder> = OnceLock::new();
        GLOBAL.get_or_init(Recorder::from_env)
    }

    /// Whether calls are recorded anywhere.
    pub fn is_enabled(&self) -> bool {
        !matches!(self.sink, Sink::Off)
    }

    /// One unit of work completed, now.
    #[inline]
    pub fn record(&self) {
        self.push(|t| Event::record(t, 1));
    }

    /// `n` units of work completed, now (0 records nothing).
    #[inline]
    pub fn record_n(&self, n: u64) {
        if n > 0 {
            self.push(|t| Event::record(t, n.min(MAX_VALUE)));
        }
    }

    /// The unit `id` (below 2^62) started, now.
    #[inline]
    pub fn start(&self, id: u64) {
        self.push(|t| Event::start(t, id));
    }

    /// The unit `id` completed, now: one completed unit, and its latency since `start(id)`.
    #[inline]
    pub fn complete(&self, id: u64) {
        self.push(|t| Event::complete(t, id));
    }

    /// Sends the calling thread's buffered events to the collector now (a no-op in process,
    /// where nothing is buffered). Threads also send theirs when they end, and at process exit
    /// every thread's goes.
    pub fn flush(&self) {
        if let Sink::Socket(client, _) = &self.sink {
            client.flush();
        }
    }

    /// True until the measurement window ends; always true for a disabled recorder. A
    /// long-running scenario body loops `while recorder.running()`.
    pub fn running(&self) -> bool {
        match &self.sink {
            Sink::Off => true,
            Sink::Local(job) => now_ns() < job.window.end_ns,
            Sink::Socket(_, until) => until.is_none_or(|until| now_ns() < until),
        }
    }

    #[inline]
    fn push(&self, event: impl FnOnce(u64) -> Event) {
        match &self.sink {
            Sink::Off => {}
            Sink::Local(job) => job.push(event(now_ns())),
            Sink::Socket(client, _) => client.push(event(now_ns())),
        }
    }
}

/// `Recorder::global().record()`: one unit completed, reported to `taskmeter bench` if it runs
/// this process, otherwise nothing.
pub fn record() {
    Recorder::global().record();
}

/// `Recorder::global().record_n(n)`.
pub fn record_n(n: u64) {
    Recorder::global().record_n(n);
}

/// `Recorder::global().start(id)`.
pub fn start(id: u64) {
    Recorder::global().start(id);
}

/// `Recorder::global().complete(id)`.
pub fn complete(id: u64) {
    Recorder::global().complete(id);
}

/// `Recorder::global().flush()`.
pub fn flush() {
    Recorder::global().flush();
}

/// `Recorder::global().running()`.
pub fn running() -> bool {
    Recorder::global().running()
}
