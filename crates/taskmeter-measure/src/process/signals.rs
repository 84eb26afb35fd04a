//! The signals that stop a command: SIGINT (Ctrl-C), SIGTERM (`timeout`, systemd, CI runners,
//! `kill`) and SIGHUP (a closed terminal). The first asks every running child to stop its own
//! way (a worker: end of file on its stdin; a bench body: SIGTERM) and to deliver what it
//! measured; a second skips the grace and kills them. The command then keeps what was measured,
//! says it is incomplete, and ends with status 128 + the first signal's number.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, Once};

/// What a listener is told: the first signal asks, a later one insists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Urgency {
    /// Stop your own way, within your grace.
    Ask,
    /// Stop now (SIGKILL).
    Now,
}

type Tell = Box<dyn Fn(Urgency) + Send>;

static LISTENERS: Mutex<Vec<(u64, Tell)>> = Mutex::new(Vec::new());
static NEXT_LISTENER: AtomicU64 = AtomicU64::new(0);
static FIRST: AtomicI32 = AtomicI32::new(0);
static COUNT: AtomicU32 = AtomicU32::new(0);

/// The signals a command that starts processes catches.
pub const CAUGHT: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Catches [`CAUGHT`] from now on (once per process). Children run in their own process groups,
/// so a terminal's SIGINT reaches only taskmeter, which passes it on its way.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Registered on their thread, so that without a thread (the user's thread limit reached)
        // no handler is left that nothing reads: a signal then ends taskmeter, as it says.
        let (ready, registered) = std::sync::mpsc::channel();
        let started =
            std::thread::Builder::new().name("signals".into()).spawn(
                move || match signal_hook::iterator::Signals::new(CAUGHT) {
                    Ok(mut signals) => {
                        let _ = ready.send(Ok(()));
                        for signal in signals.forever() {
                            note(signal);
                        }
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e.to_string()));
                    }
                },
            );
        let outcome = match started {
            Ok(_) => registered.recv().unwrap_or_else(|_| Err("their thread ended".into())),
            Err(e) => Err(format!("no thread for them: {e}")),
        };
        if let Err(why) = outcome {
            taskmeter_console::errln!("taskmeter: cannot catch signals ({why}); a signal will end taskmeter at once");
        }
    });
}

fn note(signal: i32) {
    let _ = FIRST.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    let urgency = if COUNT.fetch_add(1, Ordering::SeqCst) == 0 { Urgency::Ask } else { Urgency::Now };
    for (_, tell) in LISTENERS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        tell(urgency);
    }
}

/// Whether a signal has asked the command to stop.
pub fn interrupted() -> bool {
    COUNT.load(Ordering::SeqCst) > 0
}

/// Whether a second signal has asked for an immediate stop.
pub fn urgent() -> bool {
    COUNT.load(Ordering::SeqCst) > 1
}

/// The first signal received.
pub fn signal() -> Option<i32> {
    Some(FIRST.load(Ordering::SeqCst)).filter(|s| *s != 0)
}

/// "interrupted by SIGTERM", once a signal came.
pub fn reason() -> Option<String> {
    signal().map(|s| format!("interrupted by {}", name(s)))
}

/// 128 + the first signal's number, once a signal came (130 for Ctrl-C, 143 for SIGTERM).
pub fn exit_status() -> Option<u8> {
    signal().map(|s| (128 + s).min(255) as u8)
}

/// A signal's name: "SIGTERM"; "signal 40" for one without a common name.
pub fn name(signal: i32) -> String {
    let known = [
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGTRAP, "SIGTRAP"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGXCPU, "SIGXCPU"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGSYS, "SIGSYS"),
    ];
    known.iter().find(|(n, _)| *n == signal).map_or_else(|| format!("signal {signal}"), |(_, name)| name.to_string())
}

/// A subscription to the signals for as long as it lives.
pub struct Listener(u64);

impl Listener {
    /// Calls `tell` at each signal (from the signals' thread; it must not block).
    pub fn new(tell: impl Fn(Urgency) + Send + 'static) -> Listener {
        let id = NEXT_LISTENER.fetch_add(1, Ordering::SeqCst);
        LISTENERS.lock().unwrap_or_else(|e| e.into_inner()).push((id, Box::new(tell)));
        Listener(id)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        LISTENERS.lock().unwrap_or_else(|e| e.into_inner()).retain(|(id, _)| *id != self.0);
    }
}
