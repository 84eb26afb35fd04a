//! Driver programs (drivers/, and the receivers of receivers/): built on first use with their
//! language's toolchain and cached. Their sources are compiled into taskmeter, so an installed
//! binary needs only the toolchains; `TASKMETER_DRIVERS_DIR` reads them from a folder instead
//! (for driver authors).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// A driver program: its sources (under `drivers/<folder>`) and how to build and run it.
pub struct Driver {
    /// `drivers` or `receivers` (the TCP receivers of `run net`).
    pub root: &'static str,
    pub folder: &'static str,
    pub language: Language,
    /// (file name, contents compiled in); the first is the entry point.
    pub sources: &'static [(&'static str, &'static str)],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Language {
    C,
    /// A C shared library to preload (built with the C toolchain).
    CPreload,
    Go,
    Python,
    Node,
    Java,
}

macro_rules! sources {
    ($folder:literal: $($file:literal),+) => { sources!("drivers" / $folder: $($file),+) };
    ($root:literal / $folder:literal: $($file:literal),+) => {
        &[$(($file, include_str!(concat!("../../../../", $root, "/", $folder, "/", $file)))),+]
    };
}

pub static C: Driver = Driver { root: "drivers", folder: "c", language: Language::C, sources: sources!("c": "taskmeter_c.c") };
/// The `--mlock` preload library.
pub static MLOCK: Driver =
    Driver { root: "drivers", folder: "mlock", language: Language::CPreload, sources: sources!("mlock": "taskmeter_mlock.c") };
pub static GO: Driver = Driver { root: "drivers", folder: "go", language: Language::Go, sources: sources!("go": "main.go", "go.mod") };
pub static PYTHON: Driver =
    Driver { root: "drivers", folder: "python", language: Language::Python, sources: sources!("python": "taskmeter_driver.py") };
pub static NODE: Driver = Driver { root: "drivers", folder: "node", language: Language::Node, sources: sources!("node": "taskmeter_driver.js") };
pub static JAVA: Driver =
    Driver { root: "drivers", folder: "java", language: Language::Java, sources: sources!("java": "TaskmeterDriver.java") };

pub static C_RECEIVER: Driver =
    Driver { root: "receivers", folder: "c-thread", language: Language::C, sources: sources!("receivers" / "c-thread": "receiver.c") };
pub static GO_RECEIVER: Driver =
    Driver { root: "receivers", folder: "go", language: Language::Go, sources: sources!("receivers" / "go": "main.go", "go.mod", "platform_native.go", "platform_wasip1.go") };

/// The command that runs a driver (or receiver) program, building it first if needed.
pub fn driver_command(driver: &Driver) -> Result<Command, String> {
    let tool = toolchain_of(driver.language)?;
    let built = build(driver, &tool)?;
    Ok(run_command(driver, &tool, &built))
}

/// The version of the toolchain a driver needs, or why it is missing.
pub fn driver_toolchain(driver: &Driver) -> Result<String, String> {
    toolchain_of(driver.language).map(|t| t.version)
}

/// The library that `--mlock` preloads into workers, built on first use.
pub fn mlock_preload() -> Result<PathBuf, String> {
    let tool = toolchain_of(Language::C).map_err(|e| format!("--mlock needs a C compiler to build its preload library: {e}"))?;
    Ok(build(&MLOCK, &tool)?.join("preload.so"))
}

/// A language's toolchain as found on this machine.
#[derive(Clone, Debug)]
pub struct Toolchain {
    /// The compiler or interpreter (for Java: the JDK's home).
    pub program: PathBuf,
    pub version: String,
}

/// Found once per process: `go version` and friends are not free.
pub fn toolchain_of(language: Language) -> Result<Toolchain, String> {
    let language = if language == Language::CPreload { Language::C } else { language };
    static FOUND: OnceLock<Mutex<HashMap<Language, Result<Toolchain, String>>>> = OnceLock::new();
    let mut found = FOUND.get_or_init(Default::default).lock().unwrap();
    found.entry(language).or_insert_with(|| find_toolchain(language)).clone()
}

fn first_line(program: &Path, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("'{}' cannot be run ({e})", program.display()))?;
    if !output.status.success() {
        return Err(format!("'{} {}' failed", program.display(), args.join(" ")));
    }
    // javac and old pythons print their version on stderr.
    let text = if output.stdout.is_empty() { output.stderr } else { output.stdout };
    Ok(String::from_utf8_lossy(&text).lines().next().unwrap_or("").trim().to_string())
}

/// The first number of a version string ("v20.1.0" -> 20, "Python 3.11.7" -> 3.11).
fn version_numbers(text: &str) -> Vec<u32> {
    let start = text.find(|c: char| c.is_ascii_digit()).unwrap_or(text.len());
    text[start..].split(|c: char| !c.is_ascii_digit()).take(2).filter_map(|n| n.parse().ok()).collect()
}

fn find_toolchain(language: Language) -> Result<Toolchain, String> {
    let env_or = |var: &str, default: &str| PathBuf::from(std::env::var(var).unwrap_or_else(|_| default.into()));
    match language {
        Language::C | Language::CPreload => {
            let cc = env_or("CC", "cc");
            let version = first_line(&cc, &["--version"]).map_err(|e| format!("no C compiler: {e}; install gcc or set CC"))?;
            Ok(Toolchain { program: cc, version })
        }
        Language::Go => {
            let go = env_or("TASKMETER_GO", "go");
            let version = first_line(&go, &["version"]).map_err(|e| format!("no Go toolchain: {e}; install Go"))?;
            Ok(Toolchain { program: go, version })
        }
        Language::Python => {
            let python = env_or("TASKMETER_PYTHON", "python3");
            let version = first_line(&python, &["--version"]).map_err(|e| format!("no Python 3: {e}"))?;
            match version_numbers(&version)[..] {
                [3, minor, ..] if minor >= 8 => Ok(Toolchain { program: python, version }),
                _ => Err(format!("{version} is too old: the driver needs Python 3.8 or newer")),
            }
        }
        Language::Node => {
            let node = env_or("TASKMETER_NODE", "node");
            let version = first_line(&node, &["--version"]).map_err(|e| format!("no Node.js: {e}"))?;
            match version_numbers(&version).first() {
                Some(major) if *major >= 16 => Ok(Toolchain { program: node, version: format!("node {version}") }),
                _ => Err(format!("node {version} is too old: the driver needs Node.js 16 or newer")),
            }
        }
        Language::Java => find_jdk(),
    }
}

/// The newest JDK with virtual threads (21 or later): `$JAVA_HOME`, then every JDK under
/// /usr/lib/jvm, found by its `javac` without assuming a version in the path.
fn find_jdk() -> Result<Toolchain, String> {
    let mut homes: Vec<PathBuf> = std::env::var_os("JAVA_HOME").map(PathBuf::from).into_iter().collect();
    if let Ok(entries) = std::fs::read_dir("/usr/lib/jvm") {
        let mut found: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        found.sort();
        homes.extend(found);
    }
    let mut best: Option<(u32, Toolchain)> = None;
    let mut seen = Vec::new();
    for home in homes {
        let javac = home.join("bin").join("javac");
        let Ok(real) = javac.canonicalize() else { continue };
        if seen.contains(&real) {
            continue;
        }
        seen.push(real);
        let Ok(version) = first_line(&javac, &["-version"]) else { continue };
        let major = version_numbers(&version).first().copied().unwrap_or(0);
        if major >= 21 && best.as_ref().is_none_or(|(m, _)| major > *m) {
            best = Some((major, Toolchain { program: home, version }));
        }
    }
    best.map(|(_, t)| t).ok_or_else(|| "no JDK 21 or newer (virtual threads) in $JAVA_HOME or /usr/lib/jvm".into())
}

/// The driver's sources: from `TASKMETER_DRIVERS_DIR` when set, else the compiled-in copies.
fn sources(driver: &Driver) -> Result<Vec<(String, String)>, String> {
    match std::env::var_os("TASKMETER_DRIVERS_DIR").filter(|_| driver.root == "drivers") {
        Some(dir) => driver
            .sources
            .iter()
            .map(|(name, _)| {
                let path = PathBuf::from(&dir).join(driver.folder).join(name);
                std::fs::read_to_string(&path).map(|text| (name.to_string(), text)).map_err(|e| format!("cannot read {}: {e}", path.display()))
            })
            .collect(),
        None => Ok(driver.sources.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect()),
    }
}

pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TASKMETER_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("taskmeter")
}

/// Builds the driver into the cache, once per version of its sources and toolchain; returns
/// the folder that holds what runs. Built under a temporary name and renamed, so concurrent
/// first uses never see a half-built driver.
fn build(driver: &Driver, tool: &Toolchain) -> Result<PathBuf, String> {
    let sources = sources(driver)?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (&sources, &tool.version, tool.program.to_string_lossy()).hash(&mut hasher);
    let root = cache_dir().join("drivers");
    let name = if driver.root == "drivers" { driver.folder.to_string() } else { format!("{}-{}", driver.root, driver.folder) };
    let done = root.join(format!("{name}-{:016x}", hasher.finish()));
    if done.is_dir() {
        return Ok(done);
    }
    let partial = root.join(format!(".{name}-{}-{}.partial", std::process::id(), taskmeter_record::clock::now_ns()));
    std::fs::create_dir_all(&partial).map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
    let result = (|| {
        for (name, text) in &sources {
            std::fs::write(partial.join(name), text).map_err(|e| format!("cannot write {name}: {e}"))?;
        }
        if let Some(mut command) = build_command(driver, tool, &partial) {
            let output = command.current_dir(&partial).output().map_err(|e| format!("cannot run the {:?} toolchain: {e}", driver.language))?;
            if !output.status.success() {
                let stderr = String::from_utf8_lossy(&output.stderr);
                let first = stderr.lines().find(|l| l.contains("error")).or(stderr.lines().next()).unwrap_or("").trim();
                return Err(format!("the {} driver did not build: {first}", driver.folder));
            }
        }
        match std::fs::rename(&partial, &done) {
            Ok(()) => Ok(()),
            Err(_) if done.is_dir() => Ok(()), // built meanwhile by another taskmeter
            Err(e) => Err(format!("cannot install the {} driver: {e}", driver.folder)),
        }
    })();
    let _ = std::fs::remove_dir_all(&partial);
    result.map(|_| done)
}

fn build_command(driver: &Driver, tool: &Toolchain, dir: &Path) -> Option<Command> {
    let entry = driver.sources[0].0;
    match driver.language {
        Language::C => {
            let mut c = Command::new(&tool.program);
            c.args(["-O2", "-std=gnu11", "-pthread", "-o", "driver", entry]);
            Some(c)
        }
        Language::CPreload => {
            let mut c = Command::new(&tool.program);
            c.args(["-O2", "-shared", "-fPIC", "-o", "preload.so", entry]);
            Some(c)
        }
        Language::Go => {
            let mut c = Command::new(&tool.program);
            c.args(["build", "-o", "driver", "."]).env("GOFLAGS", "-mod=mod").env("GO111MODULE", "on");
            if std::env::var_os("GOCACHE").is_none() && std::env::var_os("HOME").is_none() {
                c.env("GOCACHE", dir.join(".gocache"));
            }
            Some(c)
        }
        Language::Java => {
            let mut c = Command::new(tool.program.join("bin").join("javac"));
            c.args(["-d", "classes", entry]);
            Some(c)
        }
        Language::Python | Language::Node => None,
    }
}

fn run_command(driver: &Driver, tool: &Toolchain, dir: &Path) -> Command {
    let entry = dir.join(driver.sources[0].0);
    match driver.language {
        Language::C | Language::Go => Command::new(dir.join("driver")),
        Language::CPreload => Command::new("true"),
        Language::Python | Language::Node => {
            let mut c = Command::new(&tool.program);
            c.arg(entry);
            c
        }
        Language::Java => {
            let mut c = Command::new(tool.program.join("bin").join("java"));
            let main = driver.sources[0].0.trim_end_matches(".java");
            // Without it HotSpot ignores Thread.setPriority on Linux; with it (as root) the
            // priorities become nice values, which priority classes rely on.
            if unsafe { libc::geteuid() } == 0 {
                c.arg("-XX:ThreadPriorityPolicy=1");
            }
            // HotSpot's warnings (e.g. a thread the OS refused) go to stdout by default, which
            // is the protocol's: send them to stderr, from the JVM's start.
            c.arg("-Xlog:disable").arg("-Xlog:all=warning:stderr");
            c.arg("-cp").arg(dir.join("classes")).arg(main);
            c
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_tool_banners() {
        assert_eq!(version_numbers("Python 3.11.7"), vec![3, 11]);
        assert_eq!(version_numbers("v20.20.2"), vec![20, 20]);
        assert_eq!(version_numbers("javac 25.0.3"), vec![25, 0]);
        assert_eq!(version_numbers("javac 17.0.15"), vec![17, 0]);
        assert_eq!(version_numbers("no digits"), Vec::<u32>::new());
    }
}
