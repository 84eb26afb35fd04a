//! The runtimes taskmeter knows: their ids, what a unit is, how a worker for each is started,
//! and whether it can run on this machine. `TASKMETER_DRIVER_<RUNTIME>` (upper case, `-` as
//! `_`) names another executable to use as a runtime's worker.

pub mod drivers;

use drivers::Driver;
use std::process::Command;
use taskmeter_worker::runtime::{IN_PROCESS, NO_PRIORITY, OS_THREAD_PRIORITY, RUSTC_VERSION};

/// How a runtime's worker is started.
#[derive(Clone, Copy)]
pub enum Launch {
    /// The taskmeter executable itself, in worker mode.
    InProcess,
    /// A driver program from `drivers/`, built on first use (one driver may serve several runtimes).
    Driver(&'static Driver),
}

impl Launch {
    pub fn in_process(self) -> bool {
        matches!(self, Launch::InProcess)
    }
}

pub struct RuntimeInfo {
    pub id: &'static str,
    pub launch: Launch,
    /// What a unit is and how it sleeps.
    pub description: &'static str,
    /// What `--priority-classes 2` maps to (protocol: "Priority classes").
    pub priority: &'static str,
}

/// An in-process runtime, as the worker describes it.
const fn in_process(index: usize) -> RuntimeInfo {
    let (id, description, priority) = IN_PROCESS[index];
    RuntimeInfo { id, launch: Launch::InProcess, description, priority }
}

pub const RUNTIMES: &[RuntimeInfo] = &[
    in_process(0),
    in_process(1),
    in_process(2),
    in_process(3),
    in_process(4),
    RuntimeInfo {
        id: "c-thread",
        launch: Launch::Driver(&drivers::C),
        description: "C pthread per unit; nanosleep / clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)",
        priority: OS_THREAD_PRIORITY,
    },
    RuntimeInfo {
        id: "go",
        launch: Launch::Driver(&drivers::GO),
        description: "goroutine per unit; time.Sleep / time.Sleep until the deadline; runtime.Gosched",
        priority: NO_PRIORITY,
    },
    RuntimeInfo {
        id: "go-locked",
        launch: Launch::Driver(&drivers::GO),
        description: "goroutine per unit, each locked to its own OS thread (runtime.LockOSThread)",
        priority: OS_THREAD_PRIORITY,
    },
    RuntimeInfo {
        id: "python-thread",
        launch: Launch::Driver(&drivers::PYTHON),
        description: "Python threading.Thread per unit; time.sleep",
        priority: OS_THREAD_PRIORITY,
    },
    RuntimeInfo {
        id: "python-asyncio",
        launch: Launch::Driver(&drivers::PYTHON),
        description: "asyncio task per unit; asyncio.sleep; await asyncio.sleep(0) to yield",
        priority: NO_PRIORITY,
    },
    RuntimeInfo {
        id: "python-abs",
        launch: Launch::Driver(&drivers::PYTHON),
        description: "Python thread per unit; clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) through ctypes",
        priority: OS_THREAD_PRIORITY,
    },
    RuntimeInfo {
        id: "node",
        launch: Launch::Driver(&drivers::NODE),
        description: "promise chain per unit on the event loop; setTimeout; setImmediate to yield",
        priority: NO_PRIORITY,
    },
    RuntimeInfo {
        id: "node-worker",
        launch: Launch::Driver(&drivers::NODE),
        description: "worker_threads Worker per unit; Atomics.wait on a SharedArrayBuffer to sleep",
        priority: "nice n / n+10 (none under fifo and rr: Node cannot set them)",
    },
    RuntimeInfo {
        id: "java-thread",
        launch: Launch::Driver(&drivers::JAVA),
        description: "Java platform thread per unit; Thread.sleep; Thread.yield",
        priority: "Thread.setPriority MAX / MIN (nice -5 / 4 as root)",
    },
    RuntimeInfo {
        id: "java-virtual",
        launch: Launch::Driver(&drivers::JAVA),
        description: "Java virtual thread per unit (JDK 21+); Thread.sleep; Thread.yield",
        priority: NO_PRIORITY,
    },
];

pub fn find(id: &str) -> Option<&'static RuntimeInfo> {
    RUNTIMES.iter().find(|r| r.id == id)
}

pub fn ids() -> Vec<&'static str> {
    RUNTIMES.iter().map(|r| r.id).collect()
}

pub fn override_variable(runtime: &str) -> String {
    format!("TASKMETER_DRIVER_{}", runtime.to_uppercase().replace('-', "_"))
}

/// Why the runtime cannot run here, or Ok.
pub fn availability(info: &RuntimeInfo) -> Result<(), String> {
    if std::env::var_os(override_variable(info.id)).is_some() {
        return Ok(());
    }
    match info.launch {
        Launch::InProcess => Ok(()),
        Launch::Driver(driver) => drivers::toolchain_of(driver.language).map(|_| ()),
    }
}

/// The toolchain that builds or runs the runtime's worker, for the environment record.
pub fn toolchain(info: &RuntimeInfo) -> String {
    match info.launch {
        Launch::InProcess => RUSTC_VERSION.to_string(),
        Launch::Driver(driver) => drivers::toolchain_of(driver.language).map(|t| t.version).unwrap_or_else(|e| e),
    }
}

/// The command that starts a worker for the runtime, building its driver if needed.
pub fn worker_command(info: &RuntimeInfo) -> Result<Command, String> {
    if let Some(path) = std::env::var_os(override_variable(info.id)) {
        return Ok(Command::new(path));
    }
    match info.launch {
        Launch::InProcess => {
            let exe = std::env::current_exe().map_err(|e| format!("cannot find the taskmeter executable: {e}"))?;
            let mut command = Command::new(exe);
            command.arg("worker");
            Ok(command)
        }
        Launch::Driver(driver) => drivers::driver_command(driver),
    }
}


/// Preloads the `--mlock` library into a worker (exec undoes memory locks; see drivers/mlock).
pub fn preload_mlock(command: &mut Command) -> Result<(), String> {
    let library = drivers::mlock_preload()?;
    let preload = match std::env::var_os("LD_PRELOAD") {
        Some(existing) => format!("{}:{}", library.display(), existing.to_string_lossy()),
        None => library.display().to_string(),
    };
    command.env("LD_PRELOAD", preload);
    Ok(())
}
