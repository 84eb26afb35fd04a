//! The command line: flags (`args`), which experiments they apply to (`scope`), presets, the
//! options each command runs with (`options`), the registry of experiment families every
//! command dispatches through (`families`), and the commands themselves. An error is one line
//! on stderr (one per problem of a record), and its exit status says whose it is ([`CliError`]).

mod args;
pub mod check_driver;
pub mod compare;
mod families;
mod history;
pub mod list;
mod man;
pub mod preset;
mod rebuild;
mod scope;
pub mod selftest;

use crate::experiments::ExperimentError;
use crate::report::ReportError;
use args::{Cli, Command, MetricChoice, NetAction};
use clap::{CommandFactory, FromArgMatches};
use std::process::ExitCode;
use taskmeter_model::header::LoadError;

/// Why a command could not do its work, by whose the error is: the user's input (exit status
/// 2), something that is not the user's (1), or an output that cannot be written (3); a wrapped
/// error by its own variant ([`CliError::exit_status`], docs/troubleshooting.md: "When things go
/// wrong"). The message is the line the user sees (a record that does not hold together gives
/// one line per problem).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The user's input is wrong: a flag, a value, a combination, a path that is not what the
    /// command reads (a results folder, a history's run), an unknown name.
    #[error("{0}")]
    Usage(String),
    /// Something that is not the user's input failed: a history store (a database server that
    /// does not answer, a file that cannot be opened), a chart, a measurement taskmeter runs in
    /// its own process, taskmeter itself.
    #[error("{0}")]
    Failed(String),
    /// An output asked for could not be written (a file, a folder).
    #[error("{0}")]
    Output(String),
    /// A record the user named cannot be read, or does not hold together: the user's input.
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Experiment(#[from] ExperimentError),
    #[error(transparent)]
    Report(#[from] ReportError),
}

impl CliError {
    /// The exit status the error ends the command with.
    pub fn exit_status(&self) -> u8 {
        use crate::session::exit;
        match self {
            CliError::Usage(_) | CliError::Load(_) => exit::USAGE,
            CliError::Failed(_) => exit::FAILED,
            CliError::Output(_) => exit::OUTPUT,
            CliError::Experiment(e) => e.exit_status(),
            CliError::Report(e) => exit::of_report(e),
        }
    }
}

/// The longest a value echoed in an error is shown: a 50 MB argument must not become a 50 MB
/// error line.
const ECHO_LIMIT: usize = 64;

/// `value`, cut to [`ECHO_LIMIT`] characters with its full size said.
pub fn shorten(value: &str) -> String {
    match value.char_indices().nth(ECHO_LIMIT) {
        Some((cut, _)) => format!("{}... ({} bytes)", &value[..cut], value.len()),
        None => value.to_string(),
    }
}

/// An error line with every quoted value in it (`'...'`) cut by [`shorten`].
fn readable(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('\'') {
        out.push_str(&rest[..=open]);
        rest = &rest[open + 1..];
        let Some(close) = rest.find('\'') else { break };
        out.push_str(&shorten(&rest[..close]));
        out.push('\'');
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    shorten_line(out)
}

/// A line cut at 1,000 characters, whatever it holds.
fn shorten_line(line: String) -> String {
    match line.char_indices().nth(1000) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line,
    }
}

/// The error on stderr, a line each (`taskmeter: ...`), values cut to a readable length; the
/// exit status is the error's.
fn refuse(error: &CliError) -> ExitCode {
    for line in error.to_string().lines() {
        taskmeter_console::errln!(
            "{}",
            taskmeter_console::streams::error_line(&format!("taskmeter: {}", readable(line)))
        );
    }
    ExitCode::from(error.exit_status())
}

pub fn main() -> ExitCode {
    let code = run_command();
    // Output that could not be written is a failure even when the command did its work.
    if taskmeter_console::streams::stdout_failed() && code == ExitCode::SUCCESS {
        return ExitCode::from(crate::session::exit::OUTPUT);
    }
    code
}

fn run_command() -> ExitCode {
    let args = match preset::expand(std::env::args().collect()) {
        Ok(args) => args,
        Err(message) => return refuse(&CliError::Usage(message)),
    };
    let color = args::ColorArg::scan(&args);
    taskmeter_console::streams::set_color(color.choice());
    let clap_color = match color {
        args::ColorArg::Auto => clap::ColorChoice::Auto,
        args::ColorArg::Always => clap::ColorChoice::Always,
        args::ColorArg::Never => clap::ColorChoice::Never,
    };
    // Help as wide as the terminal (COLUMNS first, as for every output: `machine::terminal`), at
    // most 100 columns.
    let help_width = taskmeter_console::terminal::width().min(100);
    let words = args.clone();
    let parsed =
        Cli::command().color(clap_color).term_width(help_width).try_get_matches_from(args).and_then(|matches| {
            let cli = Cli::from_arg_matches(&matches)?;
            Ok((cli, matches))
        });
    let cli = match parsed {
        Ok((cli, matches)) => {
            if let Err(message) = scope::check_flag_scope(&matches) {
                return refuse(&CliError::Usage(message));
            }
            cli
        }
        Err(e) if !e.use_stderr() => {
            // --help and --version
            return match e.print() {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    taskmeter_console::errln!("taskmeter: cannot write to standard output: {e}");
                    ExitCode::from(crate::session::exit::OUTPUT)
                }
                _ => ExitCode::SUCCESS,
            };
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // A bare command or group (`taskmeter`, `taskmeter history`): its short help, as git
            // and cargo answer, on stderr with exit status 2 (it is not what was asked for).
            let help = e.render().to_string();
            taskmeter_console::errln!("{}", help.trim_end());
            if !help.contains("Usage: taskmeter history") && !help.contains("Usage: taskmeter net") {
                taskmeter_console::errln!(
                    "\nStart with: taskmeter run --quick    (a first look, about 10 s)\n            taskmeter list           (the runtimes, and whether each can run here)"
                );
            }
            return ExitCode::from(crate::session::exit::USAGE);
        }
        Err(e) if unknown_export(&e, &words).is_some() => {
            return refuse(&CliError::Usage(unknown_export(&e, &words).unwrap_or_default()))
        }
        Err(e) => {
            let rendered = e.render().to_string();
            let mut lines = rendered.lines().map(str::trim).filter(|l| !l.is_empty());
            let mut first =
                lines.next().unwrap_or("error: invalid arguments").trim_start_matches("error: ").to_string();
            // "the following required arguments were not provided:" names them on the next line.
            if first.ends_with(':') {
                first = format!("{first} {}", lines.next().unwrap_or_default());
            }
            return refuse(&CliError::Usage(format!("{first}{}", hints(&e))));
        }
    };
    taskmeter_console::streams::set_quiet(cli.quiet);
    if cli.dry_run {
        return dry_run(cli.command).unwrap_or_else(|error| refuse(&error));
    }
    match cli.command {
        Command::Worker => return taskmeter_worker::worker::main(),
        Command::Guard => return taskmeter_measure::process::guard::main(),
        _ => {}
    }
    dispatch(cli.command).unwrap_or_else(|error| refuse(&error))
}

/// An unknown `--export-FORMAT` (or a `--export FORMAT` guessed): the formats the command
/// writes, the nearest first when one is near (`names::unknown_listed`), and how they are asked
/// for; None for any other error.
fn unknown_export(e: &clap::Error, words: &[String]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    if e.kind() != clap::error::ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else { return None };
    let rest = arg.strip_prefix("--export")?;
    let typed = match rest.strip_prefix(['-', '=']) {
        Some(format) => format.split('=').next().unwrap_or(format).to_string(),
        None if rest.is_empty() => {
            let at = words.iter().position(|w| w == "--export" || w.starts_with("--export="))?;
            match words[at].strip_prefix("--export=") {
                Some(value) => value.to_string(),
                None => words.get(at + 1).filter(|w| !w.starts_with('-')).cloned().unwrap_or_default(),
            }
        }
        None => return None,
    };
    let known = export_formats(words);
    if known.is_empty() {
        return None;
    }
    let names: Vec<&str> = known.iter().map(String::as_str).collect();
    let how = "write one with --export-FORMAT FILE";
    Some(match typed.as_str() {
        "" => format!("{how} (known: {})", names.join(", ")),
        _ => {
            format!("{}; {how}", taskmeter_console::names::unknown_listed("export format", &typed, &names, "`--help`"))
        }
    })
}

/// The export formats of the command `words` name (`run`, `compare`, `history compare`): its
/// `--export-FORMAT` flags, in their order.
fn export_formats(words: &[String]) -> Vec<String> {
    let mut command = Cli::command();
    for word in words.iter().skip(1).filter(|w| !w.starts_with('-')) {
        match command.find_subcommand(word) {
            Some(sub) => command = sub.clone(),
            None => break,
        }
    }
    command.get_arguments().filter_map(|a| Some(a.get_long()?.strip_prefix("export-")?.to_string())).collect()
}

/// What clap would say on the lines after its first, on the same line: the nearest value or
/// flag to a typo, and the values a flag takes.
fn hints(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    let text = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) if !v.is_empty() => Some(v.join(", ")),
        _ => None,
    };
    let near = text(ContextKind::SuggestedValue).or_else(|| text(ContextKind::SuggestedArg)).or_else(|| {
        // Subcommands near a typo, each quoted: 'completions' or 'compare'.
        match e.get(ContextKind::SuggestedSubcommand) {
            Some(ContextValue::Strings(v)) if !v.is_empty() => Some(v.join("' or '")),
            Some(ContextValue::String(s)) => Some(s.clone()),
            _ => None,
        }
    });
    // A missing argument or an unknown command: the usage line says what the command takes.
    let usage = match (e.kind(), e.get(ContextKind::Usage)) {
        (clap::error::ErrorKind::MissingRequiredArgument, Some(ContextValue::StyledStr(u))) => {
            format!("; usage: {}", u.to_string().trim().trim_start_matches("Usage: "))
        }
        (clap::error::ErrorKind::InvalidSubcommand, _) => "; see --help for the commands".to_string(),
        _ => String::new(),
    };
    let said = match (near, text(ContextKind::ValidValue)) {
        (Some(near), Some(valid)) => format!(" (did you mean '{near}'? known: {valid})"),
        (Some(near), None) => format!(" (did you mean '{near}'?)"),
        (None, Some(valid)) => format!(" (known: {valid})"),
        (None, None) => String::new(),
    };
    format!("{said}{usage}")
}

/// `--dry-run`: what a command would run with, checked as far as it can be without starting
/// anything; the commands that measure nothing are checked by their parsing alone.
fn dry_run(command: Command) -> Result<ExitCode, CliError> {
    match command {
        Command::Run(args) => families::of(args.every.experiment)?.check(&args.every, &args.matches)?,
        Command::Bench(args) => {
            crate::experiments::bench::flags::options(*args).map_err(CliError::Usage)?;
        }
        Command::Net { action: NetAction::Send { cookie_file, cookie, key_file, .. } } => {
            net_send_credentials(cookie_file.as_deref(), cookie.as_deref(), key_file.as_deref())?
        }
        _ => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether `net send` was told where its secret is, before anything is read: `--cookie VALUE`
/// is refused, as `ps` shows every process's command line to every user (the error names the
/// ways that keep the cookie off it, never the value).
fn net_send_credentials(
    cookie_file: Option<&std::path::Path>,
    cookie: Option<&str>,
    key_file: Option<&std::path::Path>,
) -> Result<(), CliError> {
    use crate::experiments::net::handshake::COOKIE_ENV;
    let ways =
        format!("in a file (--cookie-file FILE), in the environment ({COOKIE_ENV}) or on standard input (--cookie -)");
    match cookie {
        Some(value) if value != "-" => Err(CliError::Usage(format!(
            "net send takes no session cookie on its command line, where ps shows it to every user: give it {ways}"
        ))),
        None if cookie_file.is_none()
            && key_file.is_none()
            && std::env::var_os(COOKIE_ENV).is_none_or(|v| v.is_empty()) =>
        {
            Err(CliError::Usage(format!(
                "net send needs the session cookie `net serve` printed, {ways}; or the key of --key-file"
            )))
        }
        _ => Ok(()),
    }
}

/// The secret `net send` proves itself with: the key of `--key-file`, or the session cookie from
/// `--cookie-file`, `--cookie -` (standard input) or the environment, in that order.
fn net_send_secret(
    cookie_file: Option<&std::path::Path>,
    cookie: Option<&str>,
    key_file: Option<&std::path::Path>,
) -> Result<crate::experiments::net::handshake::Secret, CliError> {
    use crate::experiments::net::handshake::Secret;
    net_send_credentials(cookie_file, cookie, key_file)?;
    let secret = match (key_file, cookie_file, cookie) {
        (Some(path), ..) => Secret::key_file(path),
        (None, Some(path), _) => Secret::cookie_file(path),
        (None, None, Some(_)) => Secret::cookie_stdin(),
        (None, None, None) => Secret::cookie_env().unwrap_or_else(|| Err("no session cookie".into())),
    };
    secret.map_err(CliError::Usage)
}

fn dispatch(command: Command) -> Result<ExitCode, CliError> {
    Ok(match command {
        Command::List { what: Some(args::ListWhat::Recipes), format } => {
            list::print_recipes(format == args::TextFormat::Json);
            ExitCode::SUCCESS
        }
        Command::List { format, .. } => {
            list::print(format == args::TextFormat::Json);
            ExitCode::SUCCESS
        }
        Command::Run(args) => families::of(args.every.experiment)?.run(&args.every, &args.matches)?,
        Command::Net { action: NetAction::Serve { runtime, listen, key_file, load } } => {
            crate::experiments::net::serve_only(
                &runtime,
                &listen,
                &load.settings(vec![runtime.clone()], 1),
                key_file.as_deref(),
            )?
        }
        Command::Net { action: NetAction::Send { to, cookie_file, cookie, key_file, load } } => {
            let secret = net_send_secret(cookie_file.as_deref(), cookie.as_deref(), key_file.as_deref())?;
            crate::experiments::net::send_only(to, &load.settings(Vec::new(), 1), &secret)?
        }
        Command::NetReceiver { runtime } => ExitCode::from(crate::experiments::net::native::main(&runtime)),
        Command::Bench(args) => {
            crate::experiments::bench::run(crate::experiments::bench::flags::options(*args).map_err(CliError::Usage)?)?
        }
        Command::CheckDriver { runtime } => check_driver::check_driver(&runtime).map_err(CliError::Usage)?,
        Command::Report { results, samples_csv, table, figures } => {
            rebuild::rebuild(&results, samples_csv.as_deref(), table, figures.as_deref())?
        }
        Command::Compare { old, new, metric, threshold, alpha, force, include_incomplete, format, dashboards } => {
            let exports = dashboards.exports();
            compare::check_exports(&exports)?;
            let metric = match metric {
                Some(MetricChoice::All) => None,
                Some(MetricChoice::One(m)) => Some(m),
                None => compare::default_metric(&old)?,
            };
            let rule = taskmeter_analysis::compare::Rule { threshold, alpha };
            compare::run(compare::CompareOptions {
                old,
                new,
                metric,
                rule,
                force,
                include_incomplete,
                json: format == args::TextFormat::Json,
                exports,
            })?
        }
        Command::History { history, action } => history::run(history.as_deref(), action)?,
        Command::Selftest { duration, repeat, format } => {
            selftest::run(duration, repeat, format == args::TextFormat::Json)?
        }
        Command::Completions { shell } => {
            // Without the hidden subcommands (worker, guard, net-receiver), which the generators
            // would offer.
            let full = Cli::command();
            let mut visible = clap::Command::new("taskmeter").version(env!("CARGO_PKG_VERSION"));
            visible = full.get_arguments().fold(visible, |c, a| c.arg(a.clone()));
            visible = full.get_subcommands().filter(|s| !s.is_hide_set()).fold(visible, |c, s| c.subcommand(s.clone()));
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut visible, "taskmeter", &mut script);
            taskmeter_console::out!("{}", String::from_utf8_lossy(&script));
            ExitCode::SUCCESS
        }
        Command::Man { command, dir: None } => {
            taskmeter_console::out!("{}", man::page(&command)?);
            ExitCode::SUCCESS
        }
        Command::Man { dir: Some(dir), .. } => {
            let written = man::write_all(&dir)?;
            taskmeter_console::outln!("{} man pages in {}", written.len(), dir.display());
            ExitCode::SUCCESS
        }
        Command::Worker | Command::Guard => unreachable!("handled before dispatch"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{exit, SessionError};
    use std::path::PathBuf;

    #[test]
    fn every_error_ends_with_the_status_of_whose_it_is() {
        let path = || PathBuf::from("r");
        let io = || std::io::Error::other("disk full");
        let write = || ReportError::Write { path: path(), source: io() };
        let chart = || ReportError::Chart("no room for the legend".into());
        let session = |e: SessionError| CliError::Experiment(ExperimentError::Session(e));
        let cases = [
            (CliError::Usage("--units 0".into()), exit::USAGE),
            (CliError::Failed("cannot connect".into()), exit::FAILED),
            (CliError::Output("cannot write man".into()), exit::OUTPUT),
            (CliError::Load(LoadError::NotARecord(path())), exit::USAGE),
            (CliError::Load(LoadError::Unreadable(path(), io())), exit::USAGE),
            (CliError::Report(write()), exit::OUTPUT),
            (CliError::Report(chart()), exit::FAILED),
            (CliError::Experiment(ExperimentError::Settings("--policy".into())), exit::USAGE),
            (CliError::Experiment(ExperimentError::Setup("no socket".into())), exit::FAILED),
            (session(SessionError::FolderNotEmpty(path())), exit::USAGE),
            (session(SessionError::NoExportFolder(path(), path())), exit::USAGE),
            (session(SessionError::Unusable(path(), "is a file".into())), exit::USAGE),
            (session(SessionError::Refused("--cpu-dma-latency needs root".into())), exit::USAGE),
            (session(SessionError::Io(path(), io())), exit::OUTPUT),
            (session(SessionError::Lost("disk full".into())), exit::OUTPUT),
            (session(SessionError::Report(write())), exit::OUTPUT),
            (session(SessionError::Report(chart())), exit::FAILED),
            (session(SessionError::Taken), exit::FAILED),
        ];
        for (error, status) in cases {
            assert_eq!(error.exit_status(), status, "{error:?}");
        }
        // The message is the wrapped error's own, whatever wraps it.
        assert_eq!(session(SessionError::Report(write())).to_string(), write().to_string());
        assert_eq!(CliError::Report(write()).to_string(), "cannot write r: disk full");
    }
}
