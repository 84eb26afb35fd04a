//! `taskmeter man`: a man page for every command, generated from the same definitions as
//! `--help` (clap_mangen), with the sections a parser cannot know: EXIT STATUS, ENVIRONMENT,
//! FILES and EXAMPLES. `taskmeter man run` prints one page; `taskmeter man --dir DIR` writes
//! every page (`taskmeter.1`, `taskmeter-run.1`, `taskmeter-history-check.1`...) for packagers.

use super::args::Cli;
use super::CliError;
use clap::CommandFactory;
use std::path::{Path, PathBuf};

/// The command tree as the pages show it: built (so every subcommand has its full name), without
/// `help` and the hidden commands taskmeter runs for itself.
fn tree() -> clap::Command {
    let mut root = Cli::command().disable_help_subcommand(true);
    root.build();
    root
}

/// The visible subcommands of `command`.
fn visible(command: &clap::Command) -> impl Iterator<Item = &clap::Command> {
    command.get_subcommands().filter(|c| !c.is_hide_set())
}

/// The page of the command at `path` (empty: the top level).
pub fn page(path: &[String]) -> Result<String, CliError> {
    let root = tree();
    let mut command = &root;
    for (depth, name) in path.iter().enumerate() {
        command = visible(command).find(|c| c.get_name() == name).ok_or_else(|| {
            let known: Vec<&str> = visible(command).map(|c| c.get_name()).collect();
            let within =
                if depth == 0 { String::new() } else { format!(" of `taskmeter {}`", path[..depth].join(" ")) };
            CliError::Usage(format!("no command '{name}'{within} (known: {})", known.join(", ")))
        })?;
    }
    Ok(render(command))
}

/// Every page into `dir`; the files written, top level first.
pub fn write_all(dir: &Path) -> Result<Vec<PathBuf>, CliError> {
    std::fs::create_dir_all(dir).map_err(|e| CliError::Output(format!("cannot create {}: {e}", dir.display())))?;
    fn walk(command: &clap::Command, dir: &Path, written: &mut Vec<PathBuf>) -> Result<(), CliError> {
        let file = dir.join(format!("{}.1", file_name(command)));
        std::fs::write(&file, render(command))
            .map_err(|e| CliError::Output(format!("cannot write {}: {e}", file.display())))?;
        written.push(file);
        for sub in visible(command) {
            walk(sub, dir, written)?;
        }
        Ok(())
    }
    let mut written = Vec::new();
    walk(&tree(), dir, &mut written)?;
    Ok(written)
}

/// `taskmeter-history-check`: the page's name, as man(1) finds it.
fn file_name(command: &clap::Command) -> String {
    command.get_display_name().unwrap_or_else(|| command.get_name()).to_string()
}

fn render(command: &clap::Command) -> String {
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone()).render(&mut page).expect("rendering to memory cannot fail");
    let mut page = String::from_utf8_lossy(&page).into_owned();
    page.push_str(&extra_sections(command));
    page
}

/// A roff section: its title and paragraphs (text escaped).
fn section(title: &str, paragraphs: &[(&str, &str)]) -> String {
    let escape = |s: &str| s.replace('\\', "\\e").replace('-', "\\-");
    let mut out = format!(".SH \"{title}\"\n");
    for (tag, text) in paragraphs {
        if tag.is_empty() {
            out.push_str(&format!(".PP\n{}\n", escape(text)));
        } else {
            out.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", escape(tag), escape(text)));
        }
    }
    out
}

const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "Every row measured (a partial row, with fewer units than planned, is a result), or the command did what was asked."),
    ("1", "A row, point or scenario failed (the others are kept); check-driver: a check failed; compare, history compare and history check: a regression; or a failure that is not the input's: a history store that cannot be opened or queried, a chart that cannot be drawn, something a command needs that cannot be set up."),
    ("2", "Bad input (a flag, a value, a path that is not a results folder, a run the history does not hold, an unknown name), an output that cannot be used, or a flag asking for what the host refuses: nothing was measured."),
    ("3", "The results could not be written where asked (they are in the fallback folder named on standard error), an export failed, a file asked for could not be written (report, --figures, --samples-csv, history trend, man --dir), or standard output could not be written."),
    ("128 + N", "Stopped by signal N (130 for SIGINT, 143 for SIGTERM): the results hold what was measured and are marked incomplete."),
];

const ENVIRONMENT: &[(&str, &str)] = &[
    ("TASKMETER_HISTORY", "The history store: a SQLite file or a postgres:// URL; off records nothing."),
    ("XDG_DATA_HOME, HOME", "Where the default history is kept ($XDG_DATA_HOME/taskmeter/history.sqlite, else ~/.local/share/taskmeter/history.sqlite)."),
    ("XDG_CACHE_HOME, TASKMETER_CACHE_DIR", "Where drivers are built ($XDG_CACHE_HOME/taskmeter, else ~/.cache/taskmeter)."),
    ("TASKMETER_DRIVERS_DIR", "Read drivers from this folder instead of the copies compiled into taskmeter."),
    ("TASKMETER_GO, TASKMETER_NODE, TASKMETER_PYTHON, TASKMETER_ERL, CC, JAVA_HOME", "The toolchain a driver uses instead of the one on PATH."),
    ("TASKMETER_NET_COOKIE", "net send: the session cookie net serve printed (never on the command line)."),
    ("NO_COLOR, CLICOLOR_FORCE", "No colour, or colour even when the output is not a terminal (--color overrides both)."),
    ("COLUMNS", "The width text is fitted to, instead of the terminal's (100 columns when the output is not a terminal)."),
];

const FILES: &[(&str, &str)] = &[
    ("RESULTS/run.json", "The record of a run (net.json, granularity.json, bench.json for the other experiments): settings, environment, every row's statistics."),
    ("RESULTS/report.html, RESULTS/charts/, RESULTS/summary.csv", "The report, its figures and the table, rebuilt from the record by taskmeter report."),
    ("~/.local/share/taskmeter/history.sqlite", "The history of every run (see TASKMETER_HISTORY)."),
    ("~/.cache/taskmeter/drivers/", "Drivers built on first use, one folder per driver, sources and toolchain."),
];

/// A few lines of use for each command (the top level has the first steps).
fn examples(name: &str) -> &'static [(&'static str, &'static str)] {
    match name {
        "taskmeter" => &[
            ("taskmeter run --quick", "A first look at every runtime available here, about 10 s."),
            ("taskmeter list", "The runtimes, and whether each can run here."),
            ("taskmeter run", "The default sleep experiment: every runtime, under a minute."),
        ],
        "taskmeter-run" => &[
            ("taskmeter run --runtimes thread,tokio-mt --sleep fixed:50us --units 100", "Two runtimes at a 50 µs period with 100 units each."),
            ("taskmeter run --sweep busy=0,1000,1000000", "One point per value, and charts across them."),
            ("taskmeter run experiments/nanosleep-study.toml", "A preset."),
            ("taskmeter run recipes --quick", "Ways to wait, their CPU cost, and advice."),
        ],
        "taskmeter-compare" => &[
            ("taskmeter compare results/old results/new", "Folders of results folders, one invocation each: a verdict per line, false alarms held to alpha for the whole comparison."),
            ("taskmeter compare OLD NEW --metric all --format json", "Every metric, as JSON."),
        ],
        "taskmeter-history-check" => &[
            ("taskmeter history check --experiment sleep --metric lateness --stat p99", "Exit status 1 when a series regressed at its newest runs; a series too short to see a change says cannot detect, and how many runs it needs, without failing."),
        ],
        "taskmeter-history-compare" => &[
            ("taskmeter history compare --by label main my-branch", "The runs labelled main against those labelled my-branch."),
        ],
        "taskmeter-bench" => &[
            ("taskmeter bench --scenario nap='python3 clients/python/examples/sleeper.py 20'", "Your own program, reporting its units of work with record()."),
        ],
        "taskmeter-net-send" => &[
            ("TASKMETER_NET_COOKIE=$(cat cookie) taskmeter net send HOST:PORT", "Send to a net serve elsewhere, the cookie kept off the command line."),
        ],
        _ => &[],
    }
}

fn extra_sections(command: &clap::Command) -> String {
    let name = file_name(command);
    let mut out = section("EXIT STATUS", EXIT_STATUS);
    out.push_str(&section("ENVIRONMENT", ENVIRONMENT));
    out.push_str(&section("FILES", FILES));
    let mut examples: Vec<(&str, &str)> = examples(&name).to_vec();
    if examples.is_empty() {
        examples.push(("", "See taskmeter(1) and the documentation in docs/ of the source."));
    }
    out.push_str(&section("EXAMPLES", &examples));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every visible command has a page that names each of its long flags.
    #[test]
    fn every_command_has_a_page_naming_every_flag() {
        fn walk(command: &clap::Command, path: &mut Vec<String>, seen: &mut usize) {
            let text = page(path).unwrap();
            for section in ["EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES", "SYNOPSIS"] {
                assert!(text.contains(section), "{path:?} lacks {section}");
            }
            for arg in command.get_arguments().filter(|a| !a.is_hide_set()) {
                if let Some(long) = arg.get_long() {
                    assert!(
                        text.contains(&format!("\\-\\-{}", long.replace('-', "\\-"))),
                        "{path:?} does not name --{long}"
                    );
                }
            }
            *seen += 1;
            for sub in visible(command) {
                path.push(sub.get_name().to_string());
                walk(sub, path, seen);
                path.pop();
            }
        }
        let mut seen = 0;
        walk(&tree(), &mut Vec::new(), &mut seen);
        assert!(seen > 15, "{seen} pages");
        assert!(page(&["runn".to_string()]).is_err());
    }
}
