//! Presets: `taskmeter run experiments/nanosleep-study.toml [flags]`. A preset is a TOML file
//! whose keys are the long flags of `taskmeter run` (`runtimes = ["c-thread"]`,
//! `sleep = "fixed:250us"`, `sweep = ["policy=other,fifo:99"]`, `yield = true`); it is turned
//! into those flags, placed before the ones typed on the command line, which therefore win.

use std::path::Path;

/// Flags that take a value which might itself end in `.toml` (and every `--export-FORMAT`).
const PATH_FLAGS: [&str; 2] = ["-o", "--output"];

fn takes_a_path(flag: &str) -> bool {
    PATH_FLAGS.contains(&flag) || flag.starts_with("--export-")
}

/// Replaces a preset file among `taskmeter run`'s arguments by the flags it holds.
pub fn expand(args: Vec<String>) -> Result<Vec<String>, String> {
    if args.get(1).map(String::as_str) != Some("run") {
        return Ok(args);
    }
    let position = (2..args.len()).find(|&i| args[i].ends_with(".toml") && !takes_a_path(&args[i - 1]));
    let Some(i) = position else { return Ok(args) };
    let mut flags = flags_of(Path::new(&args[i]))?;
    // A parameter the command line sweeps replaces the preset's sweep of it.
    let typed: Vec<String> = args.windows(2).filter(|w| w[0] == "--sweep").filter_map(|w| sweep_name(&w[1])).collect();
    let mut kept = Vec::new();
    let mut rest = flags.drain(..);
    while let Some(flag) = rest.next() {
        if flag == "--sweep" {
            let value = rest.next().unwrap_or_default();
            if !sweep_name(&value).is_some_and(|n| typed.contains(&n)) {
                kept.extend(["--sweep".to_string(), value]);
            }
        } else {
            kept.push(flag);
        }
    }
    let flags = kept;
    let mut expanded: Vec<String> = args[..2].to_vec();
    expanded.extend(flags);
    expanded.extend(args[2..i].iter().cloned());
    expanded.extend(args[i + 1..].iter().cloned());
    Ok(expanded)
}

fn sweep_name(spec: &str) -> Option<String> {
    spec.split_once('=').map(|(name, _)| name.trim().to_string())
}

/// A preset's keys: `experiment` and run's flags by their long names, as clap builds them from
/// every family's groups (`families::run_flags`), so a family's new flag is a key at once.
fn keys() -> Vec<clap::Arg> {
    let run = super::families::run_flags(clap::Command::new("run"));
    run.get_arguments().filter(|arg| arg.get_long().is_some()).cloned().collect()
}

/// " (did you mean DIR/NAME.toml?)" for a preset that is not there but has a near namesake.
fn nearest_preset(path: &Path) -> String {
    let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Ok(entries) = std::fs::read_dir(folder) else { return String::new() };
    let names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name.ends_with(".toml"))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let typed = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    match taskmeter_console::names::nearest(typed, &names) {
        Some(near) if near != typed => format!(" (did you mean {}?)", folder.join(near).display()),
        _ => String::new(),
    }
}

fn flags_of(path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read preset {}: {e}{}", path.display(), nearest_preset(path)))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| format!("preset {} is not valid TOML: {}", path.display(), e.message()))?;
    let mut flags = Vec::new();
    let mut experiment = None;
    let keys = keys();
    let names: Vec<&str> = keys.iter().filter_map(clap::Arg::get_long).chain(["experiment"]).collect();
    for (raw_key, value) in &table {
        let key = raw_key.replace('_', "-");
        let wrong = |what: &str| format!("key '{raw_key}' in preset {} must be {what}", path.display());
        let scalar = |v: &toml::Value| -> Result<String, String> {
            match v {
                toml::Value::String(s) => Ok(s.clone()),
                toml::Value::Integer(i) => Ok(i.to_string()),
                _ => Err(wrong("a string or an integer")),
            }
        };
        if key == "experiment" {
            experiment = Some(scalar(value)?);
            continue;
        }
        let Some(flag) = keys.iter().find(|arg| arg.get_long() == Some(key.as_str())) else {
            // The nearest few, as for every other unknown name: the keys are run's flags.
            let listed_in = "`taskmeter run --help`: a preset's keys are run's flags";
            let said = taskmeter_console::names::unknown_listed("key", raw_key, &names, listed_in);
            return Err(format!("preset {}: {said}", path.display()));
        };
        let switch = !flag.get_action().takes_values();
        let repeated = matches!(flag.get_action(), clap::ArgAction::Append);
        match value {
            toml::Value::Boolean(on) if switch => {
                if *on {
                    flags.push(format!("--{key}"));
                }
            }
            _ if switch => return Err(wrong("true or false")),
            // A flag given once per value (--sweep), or one list (--runtimes a,b).
            toml::Value::Array(items) if repeated => {
                for item in items {
                    flags.push(format!("--{key}"));
                    flags.push(scalar(item)?);
                }
            }
            toml::Value::Array(items) => {
                let items: Result<Vec<String>, String> = items.iter().map(scalar).collect();
                flags.push(format!("--{key}={}", items?.join(",")));
            }
            v => flags.push(format!("--{key}={}", scalar(v)?)),
        }
    }
    if let Some(e) = experiment {
        flags.insert(0, e);
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset(text: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(&path, text).unwrap();
        let p = path.to_str().unwrap().to_string();
        (dir, p)
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn keys_become_flags_before_the_command_line() {
        let (_dir, p) = preset("experiment = \"sleep\"\nruntimes = [\"c-thread\", \"thread\"]\nunits = 1\nyield = true\nraw = false\nsweep = [\"policy=other,fifo:99\"]\ntimer_slack = \"50us\"\n");
        let out = expand(args(&["taskmeter", "run", &p, "--units", "3"])).unwrap();
        assert_eq!(out[..3], args(&["taskmeter", "run", "sleep"]));
        assert!(out.contains(&"--runtimes=c-thread,thread".to_string()));
        assert!(out.contains(&"--units=1".to_string()));
        assert!(out.contains(&"--yield".to_string()));
        assert!(!out.contains(&"--raw".to_string()));
        assert!(out.contains(&"--timer-slack=50us".to_string()));
        assert_eq!(out[out.len() - 2..], args(&["--units", "3"]), "the command line comes last and wins");
        let sweep = out.iter().position(|a| a == "--sweep").unwrap();
        assert_eq!(out[sweep + 1], "policy=other,fifo:99");
        let replaced = expand(args(&["taskmeter", "run", &p, "--sweep", "policy=idle"])).unwrap();
        assert_eq!(replaced.iter().filter(|a| *a == "--sweep").count(), 1);
        assert_eq!(replaced.last().unwrap(), "policy=idle");
    }

    #[test]
    fn other_commands_and_output_paths_are_left_alone() {
        let list = args(&["taskmeter", "run", "-o", "x.toml"]);
        assert_eq!(expand(list.clone()).unwrap(), list);
        let list = args(&["taskmeter", "list"]);
        assert_eq!(expand(list.clone()).unwrap(), list);
    }

    #[test]
    fn bad_presets_say_why() {
        let (_d, p) = preset("colour = \"blue\"\n");
        assert!(expand(args(&["taskmeter", "run", &p])).unwrap_err().contains("unknown key 'colour'"));
        // A typo gets the nearest key and a few alike, not every key.
        let (_d, p) = preset("unitz = 10\n");
        let said = expand(args(&["taskmeter", "run", &p])).unwrap_err();
        assert!(said.contains(": unknown key 'unitz' (did you mean 'units'? also alike: "), "{said}");
        assert!(said.ends_with(&format!(
            "all {} in `taskmeter run --help`: a preset's keys are run's flags)",
            keys().len() + 1
        )));
        assert!(said.len() < 250 && !said.contains("priority-classes"), "{said}");
        let (_d, p) = preset("units = [\n");
        assert!(expand(args(&["taskmeter", "run", &p])).unwrap_err().contains("not valid TOML"));
        let (_d, p) = preset("yield = 3\n");
        assert!(expand(args(&["taskmeter", "run", &p])).unwrap_err().contains("must be true or false"));
        assert!(expand(args(&["taskmeter", "run", "/nonexistent/p.toml"])).unwrap_err().contains("cannot read preset"));
        let typo = concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments/volume-studdy.toml");
        assert!(expand(args(&["taskmeter", "run", typo])).unwrap_err().ends_with("volume-study.toml?)"));
    }
}
