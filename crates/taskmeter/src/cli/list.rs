//! `taskmeter list`: every runtime and receiver, what its unit is, whether it can run here, and
//! why not; as a table, or as JSON for scripts and for the tests, which iterate it.

use crate::experiments::net::registry;
use serde_json::json;
use taskmeter_console::terminal::{self, wrap};
use taskmeter_measure::runtimes;

pub fn print(as_json: bool) {
    if as_json {
        let runtimes: Vec<_> = runtimes::all()
            .iter()
            .map(|info| {
                let reason = runtimes::availability(info).err();
                json!({"id": info.id, "unit": info.unit.as_str(), "available": reason.is_none(), "reason": reason,
                       "version": runtimes::version(info), "timer": info.timer, "default_run": info.default_run,
                       "description": info.description, "priority": info.priority,
                       "other_versions": runtimes::other_versions(info)})
            })
            .collect();
        let receivers: Vec<_> = registry::RECEIVERS
            .iter()
            .map(|(id, description)| {
                let reason = registry::availability(id).err();
                json!({"id": id, "available": reason.is_none(), "reason": reason, "description": description})
            })
            .collect();
        let list = json!({"runtimes": runtimes, "receivers": receivers});
        taskmeter_console::outln!("{}", serde_json::to_string_pretty(&list).expect("a list is JSON"));
        return;
    }
    let status = |result: Result<(), String>| match result {
        Ok(()) => "available".to_string(),
        Err(reason) => format!("unavailable: {reason}"),
    };
    let width = runtimes::all().iter().map(|r| r.id.len()).max().unwrap_or(0);
    for info in runtimes::all() {
        taskmeter_console::textln!(
            "{:<width$}  {}\n{:<width$}  {}",
            info.id,
            status(runtimes::availability(info)),
            "",
            info.description
        );
        taskmeter_console::textln!(
            "{:<width$}  a unit is {}; priority classes: {}",
            "",
            unit_name(info.unit),
            info.priority
        );
        if !info.default_run {
            taskmeter_console::textln!("{:<width$}  a variant: measured by --runtimes all, not by the default run", "");
        }
        if let Some(version) = runtimes::version(info) {
            taskmeter_console::textln!("{:<width$}  version: {version}", "");
        }
        if !info.timer.is_empty() {
            taskmeter_console::textln!("{:<width$}  timer: {}", "", info.timer);
        }
        let others = runtimes::other_versions(info);
        if !others.is_empty() {
            let rows: Vec<String> = others.iter().map(|v| format!("{}@{v}", info.id)).collect();
            taskmeter_console::textln!("{:<width$}  also on another toolchain installed here: {}", "", rows.join(", "));
        }
    }
    taskmeter_console::textln!("\nreceivers of `taskmeter run net`:");
    for (id, description) in registry::RECEIVERS {
        taskmeter_console::textln!(
            "{id:<width$}  {}\n{:<width$}  {description}",
            status(registry::availability(id)),
            ""
        );
    }
}

/// `taskmeter list recipes`: every `RUNTIME/RECIPE` that `--runtimes` and `run recipes` take.
pub fn print_recipes(as_json: bool) {
    let recipes = runtimes::with_recipes();
    if as_json {
        let list: Vec<_> = recipes
            .iter()
            .map(|info| {
                let reason = runtimes::availability(info).err();
                json!({"id": info.id, "runtime": info.base, "recipe": info.recipe, "about": info.description,
                       "available": reason.is_none(), "reason": reason})
            })
            .collect();
        let knobs: Vec<_> = runtimes::Knob::ALL
            .iter()
            .map(|k| {
                let reason = k.refused();
                json!({"name": k.name(), "about": k.about(), "available": reason.is_none(), "reason": reason})
            })
            .collect();
        let list = json!({ "recipes": list, "knobs": knobs });
        taskmeter_console::outln!("{}", serde_json::to_string_pretty(&list).expect("a list is JSON"));
        return;
    }
    let width = recipes.iter().map(|r| r.id.len()).max().unwrap_or(0);
    for info in recipes {
        let available =
            runtimes::availability(info).err().map_or_else(String::new, |why| format!(" (unavailable: {why})"));
        // The description's lines under its first, when it wraps.
        let line = format!("{:<width$}  {}{available}", info.id, info.description);
        taskmeter_console::textln!("{}", wrap(&line, terminal::width(), &" ".repeat(width + 2)).join("\n"));
    }
    let without: Vec<&str> = runtimes::all().iter().filter(|r| r.recipes.is_empty()).map(|r| r.id).collect();
    taskmeter_console::textln!(
        "\nevery runtime also waits with its own sleep (RUNTIME alone); no recipe: {}",
        without.join(", ")
    );
    taskmeter_console::textln!("and under a machine knob, its worker set apart (RUNTIME+KNOB, RUNTIME/RECIPE+KNOB; run recipes: the first runtime of each language, and with slack each recipe that sleeps if its units are OS threads):");
    for knob in runtimes::Knob::ALL {
        let available = knob.refused().map_or_else(String::new, |why| format!(" (unavailable here: {why})"));
        taskmeter_console::textln!("  +{:<6} {}{available}", knob.name(), knob.about());
    }
}

fn unit_name(unit: runtimes::Unit) -> &'static str {
    match unit {
        runtimes::Unit::OsThread => "an OS thread",
        runtimes::Unit::Task => "a task",
    }
}
