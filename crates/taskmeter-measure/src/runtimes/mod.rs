//! The runtimes taskmeter knows: the Rust ones of its own worker, then those of every driver
//! folder's manifest (drivers/*/driver.toml), with what a unit is, how a worker for each is
//! started, and whether it can run on this machine. `TASKMETER_DRIVER_<RUNTIME>` (upper case,
//! `-` as `_`) names another executable to use as a runtime's worker.
//!
//! A row's name is `RUNTIME[@VERSION][/RECIPE|+KNOB]`: `java-thread@17/park-nanos` is the
//! `java-thread` runtime, its worker built and run with JDK 17, its units waiting with a recipe.

pub mod drivers;

use drivers::Program;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use taskmeter_machine::privilege;
use taskmeter_machine::sched::{Policy, SchedSettings};
use taskmeter_protocol::plan::DEFAULT_WAIT;
pub use taskmeter_worker::runtime::Unit;
use taskmeter_worker::runtime::{IN_PROCESS, RUSTC_VERSION};

/// How a runtime's worker is started.
#[derive(Clone, Copy)]
pub enum Launch {
    /// The taskmeter executable itself, in worker mode.
    InProcess,
    /// A driver program from `drivers/`, built on first use (one driver may serve several runtimes).
    Driver(&'static Program),
}

impl Launch {
    pub fn in_process(self) -> bool {
        matches!(self, Launch::InProcess)
    }
}

#[derive(Clone)]
pub struct RuntimeInfo {
    /// `RUNTIME`, `RUNTIME/RECIPE` for a runtime whose units wait with one of its recipes,
    /// `RUNTIME+KNOB`, and any of these with `@VERSION` after `RUNTIME`.
    pub id: &'static str,
    /// The runtime whose worker runs it (the plan's `runtime`): `id` without its recipe.
    pub base: &'static str,
    /// The plan's `wait`: [`DEFAULT_WAIT`], the runtime's own sleep, or a recipe's name.
    pub recipe: &'static str,
    /// The recipes a base runtime has besides its own sleep: (name, what it does).
    pub recipes: Vec<(&'static str, &'static str)>,
    /// A machine setting this row gives its worker alone (`RUNTIME+KNOB`).
    pub knob: Option<Knob>,
    /// The toolchain version this row's worker is built and run with (`RUNTIME@VERSION`);
    /// none: the driver's default, the newest it finds.
    pub toolchain: Option<&'static str>,
    /// The lowest toolchain version the runtime needs, above its driver's (virtual threads: 21).
    pub toolchain_minimum: Option<&'static str>,
    /// The first runtime of its language (of its driver; `thread` for Rust): the one whose
    /// sleep `run recipes` also measures under each knob.
    pub first_of_language: bool,
    pub unit: Unit,
    pub launch: Launch,
    /// What a unit is and how it sleeps.
    pub description: &'static str,
    /// What `--priority-classes 2` maps to (protocol: "Priority classes").
    pub priority: &'static str,
    /// Where the runtime itself schedules the worker's writer among its units (protocol: "The
    /// writer"), how: raising its thread does not make it run then. None: a thread of its own.
    pub writer: Option<&'static str>,
    /// An optional part outside the standard library that its recipe needs (uvloop).
    pub needs: Option<&'static drivers::Needs>,
    /// How its timer works and its granularity (`list`, `--table why`).
    pub timer: &'static str,
    /// In the default run (`--runtimes` omitted); false for a variant, which `all` adds.
    pub default_run: bool,
}

/// Every runtime, in-process first, then the drivers' in folder order (read once per process;
/// the manifests' strings live as long as it).
pub fn all() -> &'static [RuntimeInfo] {
    static ALL: OnceLock<Vec<RuntimeInfo>> = OnceLock::new();
    ALL.get_or_init(|| {
        let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
        let mut all: Vec<RuntimeInfo> = IN_PROCESS
            .iter()
            .enumerate()
            .map(|(i, r)| RuntimeInfo {
                id: r.id,
                base: r.id,
                recipe: DEFAULT_WAIT,
                recipes: r.recipes.iter().map(|recipe| (recipe.name, recipe.about)).collect(),
                knob: None,
                toolchain: None,
                toolchain_minimum: None,
                first_of_language: i == 0,
                unit: r.unit,
                launch: Launch::InProcess,
                description: r.description,
                priority: r.priority,
                writer: None,
                needs: None,
                timer: r.timer,
                default_run: r.default_run,
            })
            .collect();
        for program in drivers::programs().iter().filter(|p| p.root == "drivers") {
            for (i, runtime) in program.manifest.runtime.iter().enumerate() {
                if all.iter().any(|r| r.id == runtime.id) {
                    taskmeter_console::errln!(
                        "taskmeter: drivers/{}/driver.toml serves {}, which is already known",
                        program.folder,
                        runtime.id
                    );
                    continue;
                }
                all.push(RuntimeInfo {
                    id: leak(&runtime.id),
                    base: leak(&runtime.id),
                    recipe: DEFAULT_WAIT,
                    recipes: runtime.recipe.iter().map(|r| (leak(&r.name), leak(&r.about))).collect(),
                    knob: None,
                    toolchain: None,
                    toolchain_minimum: runtime.toolchain_minimum.as_deref().map(leak),
                    first_of_language: i == 0,
                    unit: runtime.unit,
                    launch: Launch::Driver(program),
                    description: leak(&runtime.description),
                    priority: leak(&runtime.priority),
                    writer: program.manifest.writer.as_deref().map(leak),
                    needs: None,
                    timer: runtime.timer.as_deref().map(leak).unwrap_or_default(),
                    default_run: runtime.default_run,
                });
            }
        }
        all
    })
}

pub fn find(id: &str) -> Option<&'static RuntimeInfo> {
    known(id).or_else(|| at_version(id))
}

fn known(id: &str) -> Option<&'static RuntimeInfo> {
    all().iter().chain(with_recipes()).chain(with_knobs()).find(|r| r.id == id)
}

/// `RUNTIME@VERSION[/RECIPE|+KNOB]`: the row without `@VERSION`, its worker built and run with
/// that version of its toolchain. Made on first use (whether the version is installed is the
/// row's availability), once per name.
fn at_version(id: &str) -> Option<&'static RuntimeInfo> {
    static MADE: Mutex<Vec<&'static RuntimeInfo>> = Mutex::new(Vec::new());
    let (name, rest) = id.split_once('@')?;
    let (version, suffix) = rest.split_at(rest.find(['/', '+']).unwrap_or(rest.len()));
    if !version.starts_with(|c: char| c.is_ascii_digit()) || !version.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let plain = known(&format!("{name}{suffix}"))?;
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(info) = made.iter().find(|r| r.id == id) {
        return Some(info);
    }
    let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
    let info: &'static RuntimeInfo = Box::leak(Box::new(RuntimeInfo {
        id: leak(id),
        toolchain: Some(leak(version)),
        first_of_language: false,
        ..plain.clone()
    }));
    made.push(info);
    Some(info)
}

/// The other toolchain versions installed beside the default that can run the runtime (JDK 17
/// beside 25 for `java-thread`), oldest first: `run recipes` measures it on each.
pub fn other_versions(info: &RuntimeInfo) -> Vec<String> {
    let Launch::Driver(program) = info.launch else { return Vec::new() };
    let spec = &program.manifest.toolchain;
    let Ok(default) = drivers::toolchain(spec) else { return Vec::new() };
    drivers::versions(spec)
        .into_iter()
        .filter(|v| drivers::at_least(v, info.toolchain_minimum) && !drivers::is_version(&default.version, v))
        .collect()
}

/// Whether a wait recipe keeps its unit on a CPU until the deadline rather than sleeping: by
/// the naming rule of protocol "Wait recipes", such a recipe has `spin` in its name (`spin`,
/// `spin-yield`, `immediate-spin`; a `hybrid` sleeps first).
pub fn spins(recipe: &str) -> bool {
    recipe.contains("spin")
}

/// A machine setting one row gives its worker alone, beside the runtime as the run has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Knob {
    /// Timer slack 1 ns (`PR_SET_TIMERSLACK`) instead of the default 50 µs.
    Slack,
    /// SCHED_FIFO, priority 1.
    Fifo,
}

impl Knob {
    pub const ALL: [Knob; 2] = [Knob::Slack, Knob::Fifo];

    pub fn name(self) -> &'static str {
        match self {
            Knob::Slack => "slack",
            Knob::Fifo => "fifo",
        }
    }

    pub fn about(self) -> &'static str {
        match self {
            Knob::Slack => "its own sleep with a timer slack of 1 ns (PR_SET_TIMERSLACK) rather than 50 µs",
            Knob::Fifo => "its own sleep with the worker under SCHED_FIFO, priority 1 (needs root or CAP_SYS_NICE)",
        }
    }

    /// Why this host refuses the knob (with what would grant it), or None.
    pub fn refused(self) -> Option<String> {
        privilege::refusal(&self.applied_to(&SchedSettings::default()))
    }

    /// What the knob does to a recipe's row.
    pub fn about_for_a_recipe(self) -> &'static str {
        match self {
            Knob::Slack => "with a timer slack of 1 ns",
            Knob::Fifo => "under SCHED_FIFO, priority 1",
        }
    }

    /// The worker's scheduling with the knob set.
    pub fn applied_to(self, sched: &SchedSettings) -> SchedSettings {
        let mut sched = sched.clone();
        match self {
            Knob::Slack => sched.timer_slack_ns = Some(1),
            Knob::Fifo => sched.policy = Some(Policy::Fifo(1)),
        }
        sched
    }
}

/// A row of its own that a base runtime's worker runs: with a recipe, or under a knob.
fn variant(
    base: &'static RuntimeInfo,
    suffix: String,
    recipe: &'static str,
    knob: Option<Knob>,
    description: &'static str,
) -> RuntimeInfo {
    RuntimeInfo {
        id: Box::leak(format!("{}{suffix}", base.id).into_boxed_str()),
        base: base.base,
        recipe,
        recipes: Vec::new(),
        knob,
        toolchain: None,
        toolchain_minimum: base.toolchain_minimum,
        first_of_language: false,
        unit: base.unit,
        launch: base.launch,
        description,
        priority: base.priority,
        writer: base.writer,
        needs: base.needs.or_else(|| recipe_needs(base, recipe)),
        timer: base.timer,
        default_run: false,
    }
}

/// What a driver's recipe needs beyond the standard library, from its manifest.
fn recipe_needs(base: &RuntimeInfo, recipe: &str) -> Option<&'static drivers::Needs> {
    let Launch::Driver(program) = base.launch else { return None };
    let runtime = program.manifest.runtime.iter().find(|r| r.id == base.base)?;
    runtime.recipe.iter().find(|r| r.name == recipe)?.needs.as_ref()
}

/// Every runtime and every recipe row under each knob, `RUNTIME+KNOB` (its own sleep) and
/// `RUNTIME/RECIPE+KNOB`, its worker set apart.
pub fn with_knobs() -> &'static [RuntimeInfo] {
    static VARIANTS: OnceLock<Vec<RuntimeInfo>> = OnceLock::new();
    VARIANTS.get_or_init(|| {
        all()
            .iter()
            .chain(with_recipes())
            .flat_map(|row| {
                Knob::ALL.map(|knob| {
                    let about = match row.recipe {
                        DEFAULT_WAIT => knob.about(),
                        _ => Box::leak(format!("{}; {}", row.description, knob.about_for_a_recipe()).into_boxed_str()),
                    };
                    variant(row, format!("+{}", knob.name()), row.recipe, Some(knob), about)
                })
            })
            .collect()
    })
}

/// Every runtime with each of its recipes, `RUNTIME/RECIPE`, in the registry's order: rows of
/// their own, run by the base runtime's worker with the plan's `wait` set.
pub fn with_recipes() -> &'static [RuntimeInfo] {
    static VARIANTS: OnceLock<Vec<RuntimeInfo>> = OnceLock::new();
    VARIANTS.get_or_init(|| {
        all()
            .iter()
            .flat_map(|base| {
                base.recipes.iter().map(move |(name, about)| variant(base, format!("/{name}"), name, None, about))
            })
            .collect()
    })
}

pub fn ids() -> Vec<&'static str> {
    all().iter().map(|r| r.id).collect()
}

/// The runtimes of the default run: every runtime but the variants (`default_run = false`).
pub fn default_ids() -> Vec<&'static str> {
    all().iter().filter(|r| r.default_run).map(|r| r.id).collect()
}

/// Every name `--runtimes` takes: the runtimes, their recipes and knobs.
pub fn names() -> Vec<&'static str> {
    all().iter().chain(with_recipes()).chain(with_knobs()).map(|r| r.id).collect()
}

pub fn override_variable(runtime: &str) -> String {
    format!("TASKMETER_DRIVER_{}", runtime.to_uppercase().replace('-', "_"))
}

/// The version of the runtime as `list` shows it: the crate's for a Rust runtime; for a
/// driver's, its toolchain's and its own library's ("Python 3.11.7, trio 0.27.0"). None when its
/// toolchain is not found.
pub fn version(info: &RuntimeInfo) -> Option<String> {
    match info.launch {
        Launch::InProcess => taskmeter_worker::runtime::find(info.base).map(|r| (r.version)()),
        Launch::Driver(program) => {
            let tool = drivers::toolchain_at(&program.manifest.toolchain, info.toolchain).ok()?;
            let runtime = program.manifest.runtime.iter().find(|r| r.id == info.base)?;
            match drivers::library_version(&program.manifest.toolchain, runtime) {
                Some(library) => Some(format!("{}, {library}", tool.version)),
                None => Some(tool.version),
            }
        }
    }
}

/// Why the row cannot run here (its toolchain or an optional part missing, or a privilege the
/// host refuses, each with what would grant it), or Ok.
pub fn availability(info: &RuntimeInfo) -> Result<(), String> {
    if let Some(why) = info.knob.and_then(Knob::refused) {
        return Err(why);
    }
    if std::env::var_os(override_variable(info.base)).is_some() {
        return Ok(());
    }
    if let Launch::Driver(program) = info.launch {
        let runtime = program.manifest.runtime.iter().find(|r| r.id == info.base);
        for needs in runtime.and_then(|r| r.needs.as_ref()).into_iter().chain(info.needs) {
            drivers::present(&program.manifest.toolchain, info.toolchain, needs)?;
        }
    }
    match (info.launch, info.toolchain) {
        // io_uring refused (a seccomp filter, a sysctl) or too little locked memory.
        (Launch::InProcess, None) => taskmeter_worker::runtime::find(info.base).map_or(Ok(()), |r| (r.available)()),
        (Launch::InProcess, Some(version)) => Err(format!(
            "{} is compiled into taskmeter ({RUSTC_VERSION}): there is no version {version} of it",
            info.base
        )),
        (Launch::Driver(program), version) => {
            let tool = drivers::toolchain_at(&program.manifest.toolchain, version)?;
            match info.toolchain_minimum {
                Some(minimum) if !drivers::at_least(&tool.version, Some(minimum)) => Err(drivers::with_install(
                    format!(
                        "{} needs {} {minimum} or newer, not {}",
                        info.base, program.manifest.toolchain.program, tool.version
                    ),
                    &program.manifest.toolchain,
                )),
                _ => Ok(()),
            }
        }
    }
}

/// The toolchain that builds or runs the runtime's worker, for the environment record.
pub fn toolchain(info: &RuntimeInfo) -> String {
    match info.launch {
        Launch::InProcess => RUSTC_VERSION.to_string(),
        Launch::Driver(program) => {
            drivers::toolchain_at(&program.manifest.toolchain, info.toolchain).map(|t| t.version).unwrap_or_else(|e| e)
        }
    }
}

/// The command that starts a worker for the runtime, building its driver if needed.
pub fn worker_command(info: &RuntimeInfo) -> Result<Command, String> {
    if let Some(path) = std::env::var_os(override_variable(info.base)) {
        return Ok(Command::new(path));
    }
    match info.launch {
        Launch::InProcess => {
            // /proc/self/exe is this very binary even after it was replaced on disk (a rebuild or
            // an upgrade during a long run): every row runs the same taskmeter.
            let exe = std::env::current_exe().map_err(|e| format!("cannot find the taskmeter executable: {e}"))?;
            let mut command = Command::new("/proc/self/exe");
            command.arg0(exe).arg("worker");
            Ok(command)
        }
        Launch::Driver(program) => program.command_at(info.toolchain),
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

/// Builds every driver the run needs, concurrently and before anything is measured, so no
/// compiler competes with a measurement. A build that fails is reported by its rows.
pub fn prepare_drivers(availability: &[(&'static RuntimeInfo, Result<(), String>)]) {
    let mut seen = Vec::new();
    let to_build: Vec<&'static RuntimeInfo> = availability
        .iter()
        .filter(|(info, available)| available.is_ok() && !info.launch.in_process())
        .filter(|(info, _)| {
            let folder = match info.launch {
                Launch::Driver(d) => d.folder.as_str(),
                Launch::InProcess => "",
            };
            let first = !seen.contains(&(folder, info.toolchain));
            seen.push((folder, info.toolchain));
            first
        })
        .map(|(info, _)| *info)
        .collect();
    if to_build.is_empty() {
        return;
    }
    std::thread::scope(|scope| {
        for info in to_build {
            scope.spawn(move || worker_command(info));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_run_leaves_out_the_variants_and_only_them() {
        let default = default_ids();
        assert!(!default.is_empty());
        for runtime in all() {
            assert_eq!(default.contains(&runtime.id), runtime.default_run, "{}", runtime.id);
            // A variant runs where its driver's other runtimes run: one of them is in the default run.
            if !runtime.default_run {
                let beside = all().iter().filter(|r| r.default_run).any(|r| match (r.launch, runtime.launch) {
                    (Launch::Driver(a), Launch::Driver(b)) => std::ptr::eq(a, b),
                    (a, b) => a.in_process() && b.in_process(),
                });
                assert!(beside, "{} is a variant of a runtime in the default run", runtime.id);
            }
        }
    }
}
