//! The README and docs/ cannot go stale: every taskmeter command they show is run, every flag
//! they name exists, every relative link and table-of-contents entry leads somewhere (theirs, and
//! those of BENCHMARKS.md and its history in docs/benchmarks/), and the README stays a front page.
//!
//! A *command* is a line of a fenced `sh` block, or a line starting with `$ ` in a fenced
//! `console` block, that invokes taskmeter: `taskmeter ...` or `cargo run --release -- ...`,
//! after any `VAR=value` (set in its environment). A line ending in `\` goes on on the next; a
//! comment (` #`), a pipe or a redirection ends it. The rule:
//!
//! - a command that neither measures nor writes (`list`, `completions`, `man`, or any with `-h`,
//!   `--help` or `--version`) runs for real and must succeed;
//! - every other command runs with `--dry-run` added: taskmeter parses it, checks every flag and
//!   value, the preset it names, the settings of every point and the experiments each flag
//!   applies to, exactly as the command would, and stops before it starts or writes anything. A
//!   flag that is gone, a value no longer taken, a flag for an experiment that does not use it
//!   or a preset that was renamed fails here, with the page and the line.
//!
//! Each command runs in a temporary folder holding the repository's `experiments/` and
//! `clients/` (linked), so that paths resolve as at the repository's root. Structure only,
//! never timing: this passes on a loaded machine.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

mod common;
use common::{stderr, stdout, taskmeter};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// README.md and every page of docs/, with their text.
fn pages() -> Vec<(String, String)> {
    let mut names = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    names.extend(docs);
    names.into_iter().map(|n| (n.clone(), std::fs::read_to_string(repo().join(&n)).unwrap())).collect()
}

/// A command of a page: where it is, its environment and its arguments (without the program).
#[derive(Debug)]
struct Shown {
    at: String,
    env: Vec<(String, String)>,
    args: Vec<String>,
}

/// The taskmeter commands of a page's fenced `sh` and `console` blocks.
fn commands(page: &str, text: &str) -> Vec<Shown> {
    let mut found = Vec::new();
    let mut block: Option<&str> = None;
    let mut pending = String::new();
    for (number, line) in text.lines().enumerate() {
        if let Some(fence) = line.strip_prefix("```") {
            block = if block.is_some() { None } else { Some(fence.trim()) };
            continue;
        }
        let command = match block {
            Some("sh") => line,
            Some("console") => match line.strip_prefix("$ ") {
                Some(command) => command,
                None if !pending.is_empty() => line,
                None => continue,
            },
            _ => continue,
        };
        if let Some(start) = command.strip_suffix('\\') {
            pending.push_str(start);
            continue;
        }
        let whole = std::mem::take(&mut pending) + command;
        if let Some(shown) = parse(&whole, format!("{page}:{}", number + 1)) {
            found.push(shown);
        }
    }
    found
}

/// `whole` split as sh would (quotes, backslashes), cut at a comment, pipe, redirection or
/// `&&`; `None` when it does not invoke taskmeter.
fn parse(whole: &str, at: String) -> Option<Shown> {
    let mut words: Vec<String> = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = whole.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                w.extend(chars.by_ref().take_while(|&c| c != '\''));
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => w.extend(chars.next()),
                        c => w.push(c),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            '#' if word.is_none() => break,
            '|' | '>' | '<' | ';' | '&' if word.is_none() => break,
            c if c.is_whitespace() => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    let mut env = Vec::new();
    let mut rest = words.as_slice();
    while let Some((name, value)) = rest.first().and_then(|w| w.split_once('=')) {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') {
            break;
        }
        env.push((name.to_string(), value.replace("$PWD", &repo().display().to_string())));
        rest = &rest[1..];
    }
    let args = match rest {
        [program, args @ ..] if program == "taskmeter" => args,
        [cargo, run, release, dashes, args @ ..]
            if [cargo, run, release, dashes] == ["cargo", "run", "--release", "--"] =>
        {
            args
        }
        _ => return None,
    };
    Some(Shown { at, env, args: args.to_vec() })
}

/// Whether a command measures and writes nothing, so that it can run for real.
fn harmless(args: &[String]) -> bool {
    let subcommand = args.iter().find(|a| !a.starts_with('-') && !["never", "always", "auto"].contains(&a.as_str()));
    args.iter().any(|a| ["-h", "--help", "--version", "-V"].contains(&a.as_str()))
        || subcommand.is_some_and(|s| ["list", "completions", "man"].contains(&s.as_str()))
}

#[test]
fn every_command_of_the_readme_and_the_docs_runs() {
    let dir = tempfile::tempdir().unwrap();
    for linked in ["experiments", "clients"] {
        std::os::unix::fs::symlink(repo().join(linked), dir.path().join(linked)).unwrap();
    }
    let shown: Vec<Shown> = pages().iter().flat_map(|(page, text)| commands(page, text)).collect();
    // The extractor finds them: the README's first command, and many more.
    assert!(shown.iter().any(|s| s.at.starts_with("README.md") && s.args == ["run"]), "{shown:#?}");
    assert!(shown.len() >= 30, "only {} commands found", shown.len());
    let mut failed = Vec::new();
    for command in &shown {
        let mut args = command.args.clone();
        let real = harmless(&args);
        if !real && !args.iter().any(|a| a == "--dry-run") {
            args.push("--dry-run".into());
        }
        let output =
            taskmeter().current_dir(dir.path()).args(&args).envs(command.env.iter().cloned()).output().unwrap();
        let out = stdout(&output);
        let wrong = if !output.status.success() {
            Some(format!("exit status {:?}: {}", output.status.code(), stderr(&output).trim()))
        } else if real && out.trim().is_empty() {
            Some("printed nothing".to_string())
        } else if !real && !out.is_empty() {
            Some(format!("--dry-run printed: {out}"))
        } else {
            None
        };
        if let Some(why) = wrong {
            failed.push(format!("{}: taskmeter {}: {why}", command.at, args.join(" ")));
        }
    }
    assert!(failed.is_empty(), "commands of the docs that do not run:\n{}", failed.join("\n"));
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !["experiments", "clients"].contains(&n.as_str()))
        .collect();
    assert!(left.is_empty(), "a command of the docs wrote {left:?}");
}

/// Every long flag that some taskmeter command takes, from the long help of each.
fn known_flags() -> BTreeSet<String> {
    let commands: &[&[&str]] = &[
        &[],
        &["list"],
        &["run"],
        &["bench"],
        &["net", "serve"],
        &["net", "send"],
        &["check-driver"],
        &["compare"],
        &["report"],
        &["selftest"],
        &["completions"],
        &["man"],
        &["history", "list"],
        &["history", "show"],
        &["history", "import"],
        &["history", "trend"],
        &["history", "compare"],
        &["history", "check"],
    ];
    let mut flags = BTreeSet::new();
    for command in commands {
        let output = taskmeter().args(*command).arg("--help").output().unwrap();
        assert!(output.status.success(), "{command:?} --help");
        flags.extend(long_flags(&stdout(&output)));
    }
    flags
}

/// The `--flag` words of a text.
fn long_flags(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("--") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + 2..];
        let name: String =
            rest.chars().take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-').collect();
        if before.is_none_or(|c| !c.is_alphanumeric() && c != '-') && name.starts_with(|c: char| c.is_ascii_lowercase())
        {
            found.push(format!("--{}", name.trim_end_matches('-')));
        }
    }
    found
}

#[test]
fn every_flag_the_docs_name_exists() {
    let known = known_flags();
    // Other programs' flags the pages mention, and the hidden ones: the old names (kept as
    // aliases, tested in cli.rs) and --dry-run.
    let others = [
        "--release",
        "--features",
        "--short",
        "--path",
        "--example",
        "--check",
        "--all-targets",
        "--laptop",
        "--time",
        "--runtime",
        "--dry-run",
        // docs/containers.md: Docker's and setpriv's, granting what taskmeter probes.
        "--cap-add",
        "--cpu-rt-runtime",
        "--device",
        "--rm",
        "--inh-caps",
        "--bounding-set",
        // docs/drivers.md: Docker's, granting io_uring and locked memory.
        "--security-opt",
        "--ulimit",
        // docs/outputs.md: the dashboards' own commands, bencher's and curl's, and node_exporter's.
        "--project",
        "--token",
        "--branch",
        "--testbed",
        "--adapter",
        "--file",
        "--err",
        "--fail",
        "--data-binary",
        "--collector",
    ];
    let mut unknown = Vec::new();
    for (page, text) in pages() {
        // In code spans and code blocks: what a reader would type.
        for (number, line) in text.lines().enumerate() {
            for flag in long_flags(line) {
                if !known.contains(&flag) && !others.contains(&flag.as_str()) {
                    unknown.push(format!("{page}:{}: {flag}", number + 1));
                }
            }
        }
    }
    assert!(unknown.is_empty(), "flags no taskmeter command takes:\n{}", unknown.join("\n"));
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut found = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            found.push(anchor(line.trim_start_matches('#')));
        }
    }
    found
}

/// The pages whose links are checked: the README and docs/, BENCHMARKS.md and its history in
/// docs/benchmarks/ (moved there verbatim, with their links made relative to the new folder).
fn linked_pages() -> Vec<(String, String)> {
    let mut names = vec!["BENCHMARKS.md".to_string()];
    let mut history: Vec<String> = std::fs::read_dir(repo().join("docs/benchmarks"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/benchmarks/{n}"))
        .collect();
    history.sort();
    names.extend(history);
    let mut all = pages();
    all.extend(names.into_iter().map(|n| (n.clone(), std::fs::read_to_string(repo().join(&n)).unwrap())));
    all
}

#[test]
fn every_relative_link_and_table_of_contents_entry_leads_somewhere() {
    let mut broken = Vec::new();
    for (page, text) in linked_pages() {
        let folder = repo().join(&page).parent().unwrap().to_path_buf();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let target = &rest[..rest.find(')').unwrap()];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
            let file = if path.is_empty() { repo().join(&page) } else { folder.join(path) };
            if !file.exists() {
                broken.push(format!("{page}: {target}: no such file"));
            } else if !fragment.is_empty() {
                let linked = std::fs::read_to_string(&file).unwrap_or_default();
                if !anchors(&linked).iter().any(|a| a == fragment) {
                    broken.push(format!("{page}: {target}: no such heading"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_is_a_front_page_with_a_table_of_contents_into_docs() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 250, "README.md has {lines} lines: the details belong in docs/");
    // The two commands a new user types, near the top.
    let top: String = readme.lines().take(20).collect::<Vec<_>>().join("\n");
    assert!(top.contains("cargo run --release -- run") && top.contains("./test.sh"), "{top}");
    // Every page of docs/ is in the README's table of contents.
    for (page, _) in pages().iter().filter(|(p, _)| p.starts_with("docs/")) {
        assert!(readme.contains(&format!("]({page})")), "the README does not lead to {page}");
    }
}

/// docs/cli.md gives each `run` flag's default as `run --help` does, where both give it as one
/// value (a number, a duration, a word): a default changed in the code alone fails here.
#[test]
fn the_cli_page_gives_the_defaults_run_help_gives() {
    let output = taskmeter().args(["run", "--help"]).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    // Each flag's block in the long help: its line, then its text, then `[default: V]` if any.
    let mut defaults = std::collections::BTreeMap::new();
    let mut flag = None;
    for line in stdout(&output).lines().map(str::trim) {
        if line.starts_with('-') {
            flag = long_flags(line).into_iter().next();
        } else if let (Some(at), Some(flag)) = (line.find("[default: "), flag.as_ref()) {
            let value = line[at + "[default: ".len()..].trim_end_matches(']');
            defaults.insert(flag.clone(), value.to_string());
        }
    }
    let page = std::fs::read_to_string(repo().join("docs/cli.md")).unwrap();
    let mut compared = Vec::new();
    for row in page.lines().filter(|line| line.starts_with("| `--")) {
        let cells: Vec<&str> = row.split(" | ").collect();
        let (flags, default) = (long_flags(cells[0]), cells[1].trim_matches('`'));
        let one_value = !default.is_empty() && !default.contains([' ', '`', '(']);
        let help = flags.first().and_then(|flag| defaults.get(flag)).filter(|help| !help.contains(' '));
        if let ([flag], true, Some(help)) = (&flags[..], one_value, help) {
            assert_eq!(default, help, "docs/cli.md's default of {flag} against run --help's");
            compared.push(flag.clone());
        }
    }
    assert!(compared.len() >= 8, "compared only {compared:?}");
    assert!(compared.iter().any(|f| f == "--exact-samples"), "{compared:?}");
}

/// docs/cli.md, which the README calls every command and flag, names every flag of every
/// command: a flag added without its line there fails here.
#[test]
fn the_cli_page_names_every_flag() {
    let page = std::fs::read_to_string(repo().join("docs/cli.md")).unwrap();
    let named: BTreeSet<String> = long_flags(&page).into_iter().collect();
    let missing: Vec<String> = known_flags().into_iter().filter(|f| !named.contains(f)).collect();
    assert!(missing.is_empty(), "docs/cli.md does not name: {}", missing.join(" "));
}
