//! Driver programs (drivers/) and the TCP receivers of `run net` (receivers/): each folder
//! holds its sources and a `driver.toml` manifest saying which runtimes it serves, which
//! toolchain it needs and how to build and run it. They are built on first use with that
//! toolchain and cached. Their files are compiled into taskmeter, so an installed binary needs
//! only the toolchains; `TASKMETER_DRIVERS_DIR` reads `drivers/` from a folder instead (for
//! driver authors: a new folder there is a new runtime, no rebuild of taskmeter needed).

use crate::process::child::{output, BUILD_LIMIT, PROBE_LIMIT};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use taskmeter_worker::runtime::Unit;

/// A program folder as compiled in (see build.rs).
pub struct CompiledIn {
    pub root: &'static str,
    pub folder: &'static str,
    pub files: &'static [(&'static str, &'static str)],
}

include!(concat!(env!("OUT_DIR"), "/programs.rs"));

/// A program folder's `driver.toml` (drivers/README.md describes every key).
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub language: String,
    /// The files the program needs, the entry point first.
    pub sources: Vec<String>,
    pub toolchain: ToolchainSpec,
    /// Run in a fresh folder holding the files; none for interpreted languages.
    #[serde(default)]
    pub build: Vec<String>,
    #[serde(default)]
    pub build_env: BTreeMap<String, String>,
    /// How a worker is started (`{dir}`: the built folder).
    #[serde(default)]
    pub run: Vec<String>,
    /// Used instead of `run` when taskmeter runs as root.
    #[serde(default)]
    pub run_as_root: Vec<String>,
    /// Where the driver's runtimes schedule the worker's writer among their units, how (a
    /// goroutine): the reason their samples can be lost whatever the writer's thread priority.
    /// None: a thread of its own.
    #[serde(default)]
    pub writer: Option<String>,
    #[serde(default)]
    pub runtime: Vec<RuntimeEntry>,
}

#[derive(Deserialize, Debug, Clone, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields)]
pub struct ToolchainSpec {
    /// Looked up in PATH (with `find = "jdk"`: a program in a JDK's `bin`).
    pub program: String,
    /// An environment variable that names another program.
    pub env: Option<String>,
    /// Arguments that print the version (its first line is kept).
    pub version: Vec<String>,
    /// The lowest version accepted, `major[.minor]`.
    #[serde(default)]
    pub minimum: Option<String>,
    /// `path` (default) or `jdk`: the newest JDK at least `minimum` in $JAVA_HOME or /usr/lib/jvm
    /// (or, for a row `RUNTIME@VERSION`, the newest of that version).
    #[serde(default)]
    pub find: Option<String>,
    /// How a user installs it, said when it is missing or too old.
    #[serde(default)]
    pub install: Option<String>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct RuntimeEntry {
    pub id: String,
    /// `os-thread` or `task`: which of the machine's limits bind.
    #[serde(deserialize_with = "unit")]
    pub unit: Unit,
    /// What a unit is and how it sleeps and yields.
    pub description: String,
    /// What `--priority-classes 2` maps to.
    pub priority: String,
    /// Its wait recipes besides its own sleep (`[[runtime.recipe]]`).
    #[serde(default)]
    pub recipe: Vec<RecipeEntry>,
    /// The lowest toolchain version this runtime needs, when above the driver's `minimum`
    /// (Java's virtual threads: 21).
    #[serde(default)]
    pub toolchain_minimum: Option<String>,
    /// False for a variant of another runtime of the driver (one thread, a pool, a thread per
    /// unit): `--runtimes all` measures it, the default run does not, so it stays within a minute.
    #[serde(default = "yes")]
    pub default_run: bool,
    /// How its timer works (a wheel, a heap, a timerfd, io_uring) and its granularity, with
    /// the upstream issues that say so: `list` and `--table why` show it.
    #[serde(default)]
    pub timer: Option<String>,
    /// Arguments to the toolchain's program that print the version of the runtime's own
    /// library (trio, kotlinx-coroutines), first line kept; `list` shows it after the toolchain's.
    #[serde(default)]
    pub version: Vec<String>,
    /// Runs `version` instead of the toolchain's program, where that one is slow to start.
    #[serde(default)]
    pub version_program: Option<String>,
    /// A part outside the language's standard library that every row of the runtime needs
    /// (trio, gevent, Asio's headers).
    #[serde(default)]
    pub needs: Option<Needs>,
}

/// A wait recipe of a driver's runtime: the plan's `wait` it answers to, and what it does.
#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct RecipeEntry {
    pub name: String,
    pub about: String,
    /// An optional part outside the language's standard library that the recipe needs.
    #[serde(default)]
    pub needs: Option<Needs>,
}

/// A part outside the standard library a runtime or recipe needs (uvloop): how to see it is there, and how to install it.
#[derive(Deserialize, Clone, Debug, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields)]
pub struct Needs {
    /// What it is, for messages ("the uvloop package").
    pub what: String,
    /// Arguments to the toolchain's program (or to `program`) that exit 0 exactly when it is there.
    pub check: Vec<String>,
    /// Runs `check` instead of the toolchain's program, where that one is slow to start (Maven's
    /// JVM: `sh` tests for a file instead).
    #[serde(default)]
    pub program: Option<String>,
    /// How a user installs it ("pip install uvloop").
    pub install: String,
}

/// Whether the optional part is there for the toolchain (asked once per process).
pub fn present(spec: &ToolchainSpec, version: Option<&str>, needs: &Needs) -> Result<(), String> {
    type Asked = HashMap<(ToolchainSpec, Option<String>, Needs), Result<(), String>>;
    static ASKED: OnceLock<Mutex<Asked>> = OnceLock::new();
    let tool = toolchain_at(spec, version)?;
    let mut asked = ASKED.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    let key = (spec.clone(), version.map(str::to_string), needs.clone());
    asked
        .entry(key)
        .or_insert_with(|| {
            let mut command = Command::new(needs.program.as_deref().map_or(tool.program.as_os_str(), OsStr::new));
            command.args(&needs.check);
            match output(command, "check", PROBE_LIMIT) {
                Ok(out) if out.status.success() => Ok(()),
                _ => Err(format!("needs {}, which is not installed here (install: {})", needs.what, needs.install)),
            }
        })
        .clone()
}

/// The version of a runtime's own library on its toolchain (`version` in its manifest), e.g.
/// "trio 0.27.0"; None without that key. Asked once per process.
pub fn library_version(spec: &ToolchainSpec, runtime: &RuntimeEntry) -> Option<String> {
    type Asked = HashMap<(ToolchainSpec, Option<String>, Vec<String>), Option<String>>;
    static ASKED: OnceLock<Mutex<Asked>> = OnceLock::new();
    if runtime.version.is_empty() {
        return None;
    }
    let tool = toolchain(spec).ok()?;
    let program = runtime.version_program.as_deref().map_or(tool.program, PathBuf::from);
    let mut asked = ASKED.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    asked
        .entry((spec.clone(), runtime.version_program.clone(), runtime.version.clone()))
        .or_insert_with(|| first_line(&program, &runtime.version).ok().filter(|line| !line.is_empty()))
        .clone()
}

fn yes() -> bool {
    true
}

fn unit<'de, D: serde::Deserializer<'de>>(names: D) -> Result<Unit, D::Error> {
    let name = String::deserialize(names)?;
    Unit::parse(&name).ok_or_else(|| serde::de::Error::unknown_variant(&name, &Unit::NAMES))
}

/// A program folder: its manifest and files.
pub struct Program {
    /// `drivers` or `receivers`.
    pub root: String,
    pub folder: String,
    pub manifest: Manifest,
    pub files: Vec<(String, String)>,
}

/// Every program folder: compiled in, or `drivers/` from `TASKMETER_DRIVERS_DIR`. Read once.
pub fn programs() -> &'static [Program] {
    static PROGRAMS: OnceLock<Vec<Program>> = OnceLock::new();
    PROGRAMS.get_or_init(|| {
        let from_disk = std::env::var_os("TASKMETER_DRIVERS_DIR").map(PathBuf::from);
        let mut programs: Vec<Program> = Vec::new();
        if let Some(dir) = &from_disk {
            programs.extend(read_folders(dir));
        }
        for compiled in COMPILED_IN.iter().filter(|c| from_disk.is_none() || c.root != "drivers") {
            let files: Vec<(String, String)> =
                compiled.files.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect();
            match parse(compiled.root, compiled.folder, files, |other, name| compiled_file(compiled.root, other, name))
            {
                Ok(program) => programs.push(program),
                Err(e) => taskmeter_console::errln!("taskmeter: {e}"),
            }
        }
        programs
    })
}

/// The file `name` of the compiled-in folder `root/folder`.
fn compiled_file(root: &str, folder: &str, name: &str) -> Option<String> {
    let other = COMPILED_IN.iter().find(|c| c.root == root && c.folder == folder)?;
    other.files.iter().find(|(n, _)| *n == name).map(|(_, t)| t.to_string())
}

/// The program folder `root/folder`.
pub fn program(root: &str, folder: &str) -> Option<&'static Program> {
    programs().iter().find(|p| p.root == root && p.folder == folder)
}

fn read_folders(dir: &Path) -> Vec<Program> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        taskmeter_console::errln!("taskmeter: TASKMETER_DRIVERS_DIR {} cannot be read", dir.display());
        return Vec::new();
    };
    let mut folders: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.join("driver.toml").is_file()).collect();
    folders.sort();
    folders
        .into_iter()
        .filter_map(|folder| {
            let files = std::fs::read_dir(&folder)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().is_none_or(|e| e != "md"))
                .filter_map(|p| {
                    Some((p.file_name()?.to_string_lossy().into_owned(), std::fs::read_to_string(&p).ok()?))
                })
                .collect();
            let name = folder.file_name()?.to_string_lossy().into_owned();
            let file_beside = |other: &str, file: &str| std::fs::read_to_string(dir.join(other).join(file)).ok();
            parse("drivers", &name, files, file_beside).map_err(|e| taskmeter_console::errln!("taskmeter: {e}")).ok()
        })
        .collect()
}

/// Reads a program folder. A source `../FOLDER/FILE` is another folder's file (`file_of`),
/// shared rather than copied (bun and deno run node's driver), and is built beside the
/// folder's own files under its own name.
fn parse(
    root: &str,
    folder: &str,
    mut files: Vec<(String, String)>,
    file_of: impl Fn(&str, &str) -> Option<String>,
) -> Result<Program, String> {
    let text = files.iter().find(|(n, _)| n == "driver.toml").map(|(_, t)| t.to_string()).unwrap_or_default();
    let mut manifest: Manifest =
        toml::from_str(&text).map_err(|e| format!("{root}/{folder}/driver.toml: {}", e.message()))?;
    for source in manifest.sources.iter_mut() {
        let Some((other, name)) = source.strip_prefix("../").and_then(|s| s.split_once('/')) else { continue };
        let text = file_of(other, name)
            .ok_or_else(|| format!("{root}/{folder}/driver.toml names a source {source} that is not there"))?;
        if files.iter().any(|(n, _)| n == name) {
            return Err(format!("{root}/{folder}/driver.toml: {source} has the name of a file of the folder"));
        }
        files.push((name.to_string(), text));
        *source = name.to_string();
    }
    if let Some(missing) = manifest.sources.iter().find(|s| !files.iter().any(|(n, _)| n == *s)) {
        return Err(format!("{root}/{folder}/driver.toml names a source {missing} that is not in the folder"));
    }
    Ok(Program { root: root.into(), folder: folder.into(), manifest, files })
}

/// A toolchain as found on this machine.
#[derive(Clone, Debug)]
pub struct Toolchain {
    /// The program (for `find = "jdk"`: the JDK's program, e.g. its javac).
    pub program: PathBuf,
    /// The JDK's home (`find = "jdk"`).
    pub home: Option<PathBuf>,
    pub version: String,
}

/// The toolchain of a manifest, found once per process (`go version` and friends are not free).
pub fn toolchain(spec: &ToolchainSpec) -> Result<Toolchain, String> {
    toolchain_at(spec, None)
}

/// The toolchain of a manifest at `version` (`major[.minor]`), or its default one with none.
pub fn toolchain_at(spec: &ToolchainSpec, version: Option<&str>) -> Result<Toolchain, String> {
    type Found = HashMap<(ToolchainSpec, Option<String>), Result<Toolchain, String>>;
    static FOUND: OnceLock<Mutex<Found>> = OnceLock::new();
    let mut found = FOUND.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    found
        .entry((spec.clone(), version.map(str::to_string)))
        .or_insert_with(|| find_toolchain(spec, version).map_err(|e| with_install(e, spec)))
        .clone()
}

/// A toolchain's absence, with how to install it where the manifest says.
pub fn with_install(why: String, spec: &ToolchainSpec) -> String {
    match &spec.install {
        Some(install) => format!("{why} (install: {install})"),
        None => why,
    }
}

/// The versions (`major`) of a manifest's toolchain installed side by side: every JDK at least
/// `minimum` for `find = "jdk"`, oldest first; none for a toolchain found in PATH.
pub fn versions(spec: &ToolchainSpec) -> Vec<String> {
    if spec.find.as_deref() != Some("jdk") {
        return Vec::new();
    }
    let mut majors: Vec<u32> = jdks(spec).iter().filter_map(|(numbers, _)| numbers.first().copied()).collect();
    majors.sort_unstable();
    majors.dedup();
    majors.iter().map(u32::to_string).collect()
}

fn first_line(program: &Path, args: &[String]) -> Result<String, String> {
    let mut command = Command::new(program);
    command.args(args);
    let output = output(command, "toolchain", PROBE_LIMIT)
        .map_err(|e| format!("'{}' cannot be run ({e})", program.display()))?;
    if !output.status.success() {
        return Err(format!("'{} {}' failed", program.display(), args.join(" ")));
    }
    // javac and old pythons print their version on stderr.
    let text = if output.stdout.is_empty() { output.stderr } else { output.stdout };
    let line = String::from_utf8_lossy(&text).lines().next().unwrap_or("").to_string();
    Ok(without_escapes(&line).trim().to_string())
}

/// `line` without terminal escape sequences (Debian's Maven starts `mvn -v` with a colour reset).
fn without_escapes(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters, ended by a letter.
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The first two numbers of a version string ("v20.1.0" -> [20, 1], "Python 3.11.7" -> [3, 11]).
fn version_numbers(text: &str) -> Vec<u32> {
    let start = text.find(|c: char| c.is_ascii_digit()).unwrap_or(text.len());
    text[start..].split(|c: char| !c.is_ascii_digit()).take(2).filter_map(|n| n.parse().ok()).collect()
}

pub fn at_least(version: &str, minimum: Option<&str>) -> bool {
    minimum.is_none_or(|m| version_numbers(version) >= version_numbers(m))
}

/// Whether a version string is the one asked for: "javac 17.0.13" is 17 and 17.0, not 17.1.
pub fn is_version(version: &str, wanted: &str) -> bool {
    let wanted = version_numbers(wanted);
    !wanted.is_empty() && version_numbers(version).starts_with(&wanted)
}

fn find_toolchain(spec: &ToolchainSpec, wanted: Option<&str>) -> Result<Toolchain, String> {
    if spec.find.as_deref() == Some("jdk") {
        return find_jdk(spec, wanted);
    }
    let program =
        PathBuf::from(spec.env.as_ref().and_then(std::env::var_os).unwrap_or_else(|| spec.program.clone().into()));
    let line = first_line(&program, &spec.version).map_err(|e| format!("no {} toolchain: {e}", spec.program))?;
    if !at_least(&line, spec.minimum.as_deref()) {
        return Err(format!(
            "{line} is too old: the driver needs {} {} or newer",
            spec.program,
            spec.minimum.as_deref().unwrap_or("")
        ));
    }
    let name = program.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let version = if line.to_lowercase().contains(&name.to_lowercase()) { line } else { format!("{name} {line}") };
    if let Some(wanted) = wanted.filter(|w| !is_version(&version, w)) {
        let how = spec.env.as_ref().map_or(String::new(), |env| format!(" or name it in ${env}"));
        return Err(format!(
            "the {} in PATH says '{version}', not {wanted}: put that one first in PATH{how}",
            spec.program
        ));
    }
    Ok(Toolchain { program, home: None, version })
}

/// The newest JDK at least `minimum` (of version `wanted`, if given).
fn find_jdk(spec: &ToolchainSpec, wanted: Option<&str>) -> Result<Toolchain, String> {
    let found = jdks(spec);
    // Reversed, so of equal versions the first found ($JAVA_HOME) is the one max_by keeps.
    let newest = found
        .iter()
        .rev()
        .filter(|(_, tool)| wanted.is_none_or(|w| is_version(&tool.version, w)))
        .max_by(|(a, _), (b, _)| a.cmp(b));
    match (newest, wanted) {
        (Some((_, tool)), _) => Ok(tool.clone()),
        (None, None) => {
            Err(format!("no JDK {} or newer in $JAVA_HOME or /usr/lib/jvm", spec.minimum.as_deref().unwrap_or("")))
        }
        (None, Some(wanted)) => Err(format!(
            "no JDK {wanted} in $JAVA_HOME or /usr/lib/jvm (found: {})",
            if found.is_empty() { "none".to_string() } else { versions(spec).join(", ") }
        )),
    }
}

/// Every JDK at least `minimum`: `$JAVA_HOME`, then every JDK under /usr/lib/jvm, found by its
/// program without assuming a version in the path; each once, however many links lead to it.
/// Looked for once per process (each asks a JDK its version, a JVM's start).
fn jdks(spec: &ToolchainSpec) -> Vec<(Vec<u32>, Toolchain)> {
    type Found = HashMap<ToolchainSpec, Vec<(Vec<u32>, Toolchain)>>;
    static FOUND: OnceLock<Mutex<Found>> = OnceLock::new();
    let mut found = FOUND.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    found.entry(spec.clone()).or_insert_with(|| find_jdks(spec)).clone()
}

fn find_jdks(spec: &ToolchainSpec) -> Vec<(Vec<u32>, Toolchain)> {
    let mut homes: Vec<PathBuf> = std::env::var_os("JAVA_HOME").map(PathBuf::from).into_iter().collect();
    if let Ok(entries) = std::fs::read_dir("/usr/lib/jvm") {
        let mut found: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        found.sort();
        homes.extend(found);
    }
    let mut jdks = Vec::new();
    let mut seen = Vec::new();
    for home in homes {
        let program = home.join("bin").join(&spec.program);
        let Ok(real) = program.canonicalize() else { continue };
        if seen.contains(&real) {
            continue;
        }
        seen.push(real);
        let Ok(version) = first_line(&program, &spec.version) else { continue };
        if at_least(&version, spec.minimum.as_deref()) {
            jdks.push((version_numbers(&version), Toolchain { program, home: Some(home), version }));
        }
    }
    jdks
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

/// `{program}`, `{home}` and `{dir}` in a manifest's command.
fn expand(words: &[String], tool: &Toolchain, dir: &Path) -> Vec<String> {
    let home = tool.home.as_deref().unwrap_or(Path::new("")).display().to_string();
    words
        .iter()
        .map(|w| {
            w.replace("{program}", &tool.program.display().to_string())
                .replace("{home}", &home)
                .replace("{dir}", &dir.display().to_string())
        })
        .collect()
}

impl Program {
    /// The command that starts the program, building it first if needed.
    pub fn command(&self) -> Result<Command, String> {
        self.command_at(None)
    }

    /// The same, built and run with the toolchain's `version` (none: its default).
    pub fn command_at(&self, version: Option<&str>) -> Result<Command, String> {
        let tool = toolchain_at(&self.manifest.toolchain, version)?;
        let built = self.build(&tool)?;
        // SAFETY: geteuid only reads the process's credentials.
        let as_root = unsafe { libc::geteuid() } == 0 && !self.manifest.run_as_root.is_empty();
        let words = expand(if as_root { &self.manifest.run_as_root } else { &self.manifest.run }, &tool, &built);
        let (program, args) = words
            .split_first()
            .ok_or_else(|| format!("{}/{}/driver.toml has no run command", self.root, self.folder))?;
        let mut command = Command::new(program);
        command.args(args);
        Ok(command)
    }

    /// The folder the program was built in, building it if needed.
    pub fn built(&self) -> Result<PathBuf, String> {
        let tool = toolchain(&self.manifest.toolchain)?;
        self.build(&tool)
    }

    /// Builds the program into the cache, once per version of its files and toolchain. Built
    /// under a temporary name and renamed, so concurrent first uses never see a half-built one.
    fn build(&self, tool: &Toolchain) -> Result<PathBuf, String> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (&self.files, &tool.version, tool.program.to_string_lossy()).hash(&mut hasher);
        let root = cache_dir().join("drivers");
        let name = if self.root == "drivers" { self.folder.clone() } else { format!("{}-{}", self.root, self.folder) };
        let done = root.join(format!("{name}-{:016x}", hasher.finish()));
        if done.is_dir() {
            return Ok(done);
        }
        let partial = root.join(format!(".{name}-{}-{}.partial", std::process::id(), taskmeter_clock::now_ns()));
        std::fs::create_dir_all(&partial).map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
        let result = (|| {
            for (file, text) in &self.files {
                std::fs::write(partial.join(file), text).map_err(|e| format!("cannot write {file}: {e}"))?;
            }
            if let Some((program, args)) = expand(&self.manifest.build, tool, &partial).split_first() {
                let mut command = Command::new(program);
                command.args(args).envs(&self.manifest.build_env).current_dir(&partial);
                if std::env::var_os("GOCACHE").is_none() && std::env::var_os("HOME").is_none() {
                    command.env("GOCACHE", partial.join(".gocache")); // go build needs a cache folder
                }
                let output = output(command, "build", BUILD_LIMIT).map_err(|e| format!("cannot run {program}: {e}"))?;
                if !output.status.success() {
                    let stderr = String::from_utf8_lossy(&output.stderr);
                    let first =
                        stderr.lines().find(|l| l.contains("error")).or(stderr.lines().next()).unwrap_or("").trim();
                    return Err(format!("the {} program did not build: {first}", self.folder));
                }
            }
            match std::fs::rename(&partial, &done) {
                Ok(()) => Ok(()),
                Err(_) if done.is_dir() => Ok(()), // built meanwhile by another taskmeter
                Err(e) => Err(format!("cannot install the {} program: {e}", self.folder)),
            }
        })();
        let _ = std::fs::remove_dir_all(&partial);
        result.map(|_| done)
    }
}

/// The library that `--mlock` preloads into workers (drivers/mlock), built on first use.
pub fn mlock_preload() -> Result<PathBuf, String> {
    let program = program("drivers", "mlock").ok_or("the --mlock preload library (drivers/mlock) is missing")?;
    let built = program.built().map_err(|e| format!("--mlock needs a C compiler to build its preload library: {e}"))?;
    Ok(built.join("preload.so"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_tool_banners() {
        assert_eq!(version_numbers("Python 3.11.7"), vec![3, 11]);
        assert_eq!(version_numbers("v20.20.2"), vec![20, 20]);
        assert_eq!(version_numbers("javac 25.0.3"), vec![25, 0]);
        assert_eq!(version_numbers("go version go1.26.0 linux/amd64"), vec![1, 26]);
        assert_eq!(version_numbers("no digits"), Vec::<u32>::new());
        assert!(at_least("Python 3.11.7", Some("3.8")));
        assert!(!at_least("Python 3.7.1", Some("3.8")));
        assert!(at_least("javac 25.0.3", Some("21")));
        assert!(!at_least("javac 17.0.15", Some("21")));
    }

    #[test]
    fn a_row_at_a_version_takes_that_version_and_no_other() {
        assert!(is_version("javac 17.0.15", "17"));
        assert!(is_version("javac 17.0.15", "17.0"));
        assert!(!is_version("javac 17.0.15", "17.1"));
        assert!(!is_version("javac 17.0.15", "1"));
        assert!(!is_version("javac 25.0.3", "17"));
        assert!(is_version("go version go1.26.8 linux/amd64", "1.26"));
        assert!(!is_version("go version go1.26.8 linux/amd64", "1.2"));
        assert!(!is_version("javac 17.0.15", ""));
    }

    /// Kotlin's `version` and `needs` name the versions pom.xml pins (Maven reads them only from
    /// a project, so the manifest says them again): the two stay the same.
    #[test]
    fn kotlin_says_the_versions_its_pom_pins() {
        let kotlin = COMPILED_IN.iter().find(|c| c.folder == "kotlin").expect("drivers/kotlin");
        let file = |name: &str| kotlin.files.iter().find(|(n, _)| *n == name).map(|(_, t)| *t).unwrap();
        let pinned = |tag: &str| {
            let pom = file("pom.xml");
            let from = pom.find(&format!("<{tag}>")).unwrap() + tag.len() + 2;
            pom[from..from + pom[from..].find('<').unwrap()].to_string()
        };
        let (compiler, coroutines) = (pinned("kotlin.version"), pinned("coroutines.version"));
        let manifest: Manifest = toml::from_str(file("driver.toml")).unwrap();
        for runtime in &manifest.runtime {
            let said = runtime.version.join(" ");
            assert!(said.contains(&format!("Kotlin {compiler}, kotlinx-coroutines {coroutines}")), "{said}");
            let check = runtime.needs.as_ref().unwrap().check.join(" ");
            assert!(check.contains(&format!("kotlin-maven-plugin-{compiler}.jar")), "{check}");
            assert!(check.contains(&format!("kotlinx-coroutines-core-jvm-{coroutines}.jar")), "{check}");
        }
    }

    #[test]
    fn a_banner_loses_its_terminal_escapes() {
        assert_eq!(without_escapes("\u{1b}[0mApache Maven 3.8.7"), "Apache Maven 3.8.7");
        assert_eq!(without_escapes("\u{1b}[1;32mok\u{1b}[m done"), "ok done");
        assert_eq!(without_escapes("go version go1.26.8"), "go version go1.26.8");
    }

    #[test]
    fn a_source_of_another_folder_is_shared_under_its_own_name() {
        let manifest = |sources: &str| {
            format!(
                "language = \"JS\"\nsources = [{sources}]\nrun = [\"x\"]\n\
                 [toolchain]\nprogram = \"bun\"\nversion = [\"--version\"]\n"
            )
        };
        let node =
            |folder: &str, name: &str| (folder == "node" && name == "driver.js").then(|| "// node's".to_string());
        let files = |sources: &str| vec![("driver.toml".to_string(), manifest(sources))];
        let program = parse("drivers", "bun", files("\"../node/driver.js\""), node).unwrap();
        assert_eq!(program.manifest.sources, ["driver.js"]);
        assert!(program.files.contains(&("driver.js".to_string(), "// node's".to_string())));
        let missing = parse("drivers", "bun", files("\"../node/gone.js\""), node).err().unwrap();
        assert_eq!(missing, "drivers/bun/driver.toml names a source ../node/gone.js that is not there");
        let mut clash = files("\"../node/driver.js\"");
        clash.push(("driver.js".into(), "// bun's".into()));
        let clash = parse("drivers", "bun", clash, node).err().unwrap();
        assert!(clash.contains("has the name of a file of the folder"), "{clash}");
    }

    #[test]
    fn every_compiled_in_manifest_reads_and_names_its_sources() {
        assert!(!COMPILED_IN.is_empty());
        for compiled in COMPILED_IN {
            let files = compiled.files.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect();
            let program =
                parse(compiled.root, compiled.folder, files, |other, name| compiled_file(compiled.root, other, name))
                    .unwrap_or_else(|e| panic!("{e}"));
            assert!(!program.manifest.sources.is_empty(), "{}/{}", compiled.root, compiled.folder);
        }
    }
}
