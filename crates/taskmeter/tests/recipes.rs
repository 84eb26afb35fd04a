//! The recipes experiment: every way to wait runs in the same loop, says what it costs, and the
//! advice is printed. Structure and bounds that no load can break, never speed.

mod common;
use common::{run, run_json, stderr, stdout};

#[test]
fn every_recipe_is_a_runtime_of_the_registry_with_a_protocol_name() {
    let bases: Vec<String> = common::registry("runtimes").into_iter().map(|r| r.id).collect();
    let recipes = common::recipes();
    assert!(!recipes.is_empty());
    for (base, recipe) in &recipes {
        assert!(bases.contains(base), "{base}/{recipe}: {base} is not a runtime");
        let protocol_name = recipe.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        assert!(recipe != "sleep" && protocol_name, "{recipe}");
    }
    let listed = stdout(&run(&["list", "recipes"]));
    for (base, recipe) in &recipes {
        assert!(listed.contains(&format!("{base}/{recipe} ")), "{listed}");
    }
}

#[test]
fn a_recipe_is_refused_where_the_loop_does_not_sleep() {
    common::assert_refused(&[
        (
            vec!["run", "--runtimes", "thread/spin", "--sleep", "none", "--duration", "100ms"],
            "needs the sleep experiment with a sleeping schedule",
        ),
        // Spinning units at real-time priority on every core would starve the machine.
        (
            vec!["run", "--runtimes", "thread/spin", "--policy", "fifo:1", "--units", "8", "--busy", "0"],
            "thread/spin: policy fifo:1 with busy work (or --sleep none, or a spinning wait) on 8 units",
        ),
    ]);
}

#[test]
fn each_runtime_waits_every_way_it_has_and_spinning_costs_a_core() {
    let with_recipes: Vec<String> = {
        let recipes = common::recipes();
        common::runtimes_where(|r| recipes.iter().any(|(base, _)| *base == r.id))
    };
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("recipes");
    let runtimes = with_recipes.join(",");
    let output = run(&[
        "run",
        "recipes",
        "--quick",
        "--runtimes",
        &runtimes,
        "--sleep",
        "fixed:1ms",
        "--grace",
        "30s",
        "-o",
        folder.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
    let text = stdout(&output);
    let record = run_json(&folder);
    assert_eq!(record["experiment"], "recipes");
    let rows = record["rows"].as_array().unwrap();
    // Each runtime is a group of rows, and so is each on another toolchain version installed
    // here (java-thread@17 beside JDK 25's java-thread): its own sleep and each recipe, once.
    let listed = common::registry("runtimes");
    let groups: Vec<(String, &String)> = with_recipes
        .iter()
        .flat_map(|base| {
            let others = listed.iter().find(|l| &l.id == base).map_or(Vec::new(), |l| l.other_versions.clone());
            std::iter::once(base.clone())
                .chain(others.into_iter().map(move |v| format!("{base}@{v}")))
                .zip([base].into_iter().cycle())
        })
        .collect();
    for (group, base) in &groups {
        // Its own sleep and each recipe (the rows under a knob are checked below).
        let its: Vec<&serde_json::Value> = rows
            .iter()
            .map(|r| (r, r["runtime"].as_str().unwrap()))
            .filter(|(_, name)| !name.contains('+') && name.split('/').next() == Some(group))
            .map(|(r, _)| r)
            .collect();
        let recipes: Vec<String> =
            common::recipes().into_iter().filter(|(b, _)| b == *base).map(|(_, recipe)| recipe).collect();
        assert_eq!(its.len(), recipes.len() + 1, "{group}: its own sleep and each recipe, once");
        for row in &its {
            let runtime = row["runtime"].as_str().unwrap();
            let reason = row["reason"].as_str().unwrap_or_default();
            if row["status"] == "skipped" && reason.contains("(install: ") {
                // An optional package missing here (uvloop): skipped with the line that installs it.
                common::skip(&format!("{runtime}: {reason}"));
                continue;
            }
            assert_eq!(row["status"], "ok", "{runtime}: {reason}");
            let wait = runtime.split_once('/').map_or("sleep", |(_, recipe)| recipe);
            assert_eq!(row["plan"]["runtime"], base.as_str(), "{runtime} runs in its runtime's worker");
            assert_eq!(row["plan"]["wait"], wait, "{runtime} waits as it says");
            assert_eq!(row["plan"]["sleep"]["mode"], "absolute");
            if let Some((_, version)) = group.split_once('@') {
                // The worker says which version it runs on (Java: "Java 17.0.15 (...)").
                let said = row["worker"]["runtime_version"].as_str().unwrap_or("");
                assert!(said.contains(&format!(" {version}.")), "{runtime} ran on {said}");
            }
        }
        spinning_costs_a_core(group, &its, &recipes);
        assert!(text.contains(&format!("\n{group} at sleep")) || text.contains(&format!("\n{group}\n")), "{text}");
    }
    // JDK 17 (installed by tests/setup.sh) runs java-thread beside the newest JDK.
    if with_recipes.iter().any(|r| r == "java-thread") && !groups.iter().any(|(g, _)| g == "java-thread@17") {
        common::skip("no JDK 17 beside the newest: java-thread@17 not measured");
    }
    // The first runtime of each language also sleeps under each knob, its worker set apart,
    // and where its units are OS threads each recipe that sleeps does with a slack of 1 ns.
    let listed_units = |id: &str| listed.iter().find(|l| l.id == id).and_then(|l| l.unit.clone());
    let recipe_knobs: Vec<&str> = rows
        .iter()
        .filter_map(|r| r["runtime"].as_str())
        .filter(|name| name.contains('/') && name.contains('+'))
        .collect();
    for name in &recipe_knobs {
        let (base, rest) = name.split_once('/').unwrap();
        assert!(rest.ends_with("+slack") && !rest.contains("spin"), "{name}");
        assert_eq!(listed_units(base).as_deref(), Some("os-thread"), "{name}");
    }
    if with_recipes.iter().any(|r| r == "c-thread") {
        assert!(recipe_knobs.contains(&"c-thread/timerfd+slack"), "{recipe_knobs:?}");
    }
    let knobbed: Vec<&serde_json::Value> =
        rows.iter().filter(|r| r["runtime"].as_str().unwrap().contains('+')).collect();
    assert!(!knobbed.is_empty(), "no knob rows");
    for row in knobbed {
        let runtime = row["runtime"].as_str().unwrap();
        let sched = &row["worker"]["sched"];
        match runtime.rsplit_once('+').unwrap().1 {
            "slack" => {
                assert_eq!(row["status"], "ok", "{runtime}: {}", row["reason"]);
                assert_eq!(sched["timerslack_ns"], 1, "{runtime}");
            }
            "fifo" if row["status"] == "ok" => assert!(sched["policy"].as_str().unwrap().contains("FIFO"), "{runtime}"),
            "fifo" => assert!(!common::in_ci(), "{runtime} under SCHED_FIFO failed: {}", row["reason"]),
            knob => panic!("{runtime}: unknown knob {knob}"),
        }
    }
    // Each runtime with recipes gets its advice line (its content is tested on synthetic tables).
    assert_eq!(text.matches("\n  advice: ").count(), groups.len(), "{text}");
    assert!(text.contains("CPU/unit"), "{text}");
}

/// One unit spinning keeps a core busy or waiting for it: on a machine loaded twice over it may
/// run a tenth of the time, but it is runnable all of it, so its time on a CPU plus its time
/// runnable and waiting (schedstat's two fields) is most of the window. Its runtime's own sleep
/// runs less than half of that. Per unit, over the window. The naming rule (protocol: "Wait
/// recipes"): every recipe named for a spin spins. The BEAM's schedulers busy-wait before they
/// sleep (+sbwt, up to a third of a core here), so its sleep is the one without that wait, its
/// sbwt-none row.
fn spinning_costs_a_core(group: &str, its: &[&serde_json::Value], recipes: &[String]) {
    let row = |runtime: &str| *its.iter().find(|r| r["runtime"] == runtime).unwrap();
    let per_unit = |row: &serde_json::Value, with_wait: bool| -> f64 {
        let counters = &row["counters"];
        let window = counters["end_ns"].as_u64().unwrap() - counters["start_ns"].as_u64().unwrap();
        let wait = if with_wait { counters["runqueue_wait_ns"].as_u64().unwrap_or(0) } else { 0 };
        (counters["cpu_ns"].as_u64().unwrap() + wait) as f64
            / window as f64
            / row["counts"]["units"].as_u64().unwrap() as f64
    };
    let sleeping =
        if recipes.iter().any(|r| r == "sbwt-none") { format!("{group}/sbwt-none") } else { group.to_string() };
    for recipe in recipes.iter().filter(|r| r.contains("spin")) {
        let spinner = row(&format!("{group}/{recipe}"));
        // Without schedstat (no run-queue wait), its time on a CPU alone: a quarter of a core.
        let (spin, bound) = match spinner["counters"]["runqueue_wait_ns"].is_u64() {
            true => (per_unit(spinner, true), 0.5),
            false => (per_unit(spinner, false), 0.25),
        };
        assert!(spin > bound, "{group}/{recipe}: a spinning unit ran or waited to run {spin:.2} of the window");
        let sleep = per_unit(row(&sleeping), false);
        assert!(sleep < spin / 2.0, "{sleeping}: its sleep used {sleep:.2} of a core, {recipe} {spin:.2}");
    }
}

#[test]
fn a_runtime_on_another_toolchain_version_passes_check_driver() {
    // java-thread@17 beside JDK 25 (tests/setup.sh installs JDK 17): the same checks, every
    // recipe included, with that version's worker.
    let listed = common::registry("runtimes");
    let others: Vec<String> = listed
        .iter()
        .filter(|l| l.reason.is_none())
        .flat_map(|l| l.other_versions.iter().map(move |v| format!("{}@{v}", l.id)))
        .collect();
    if others.is_empty() {
        return common::skip("no runtime has another toolchain version installed here");
    }
    for id in &others {
        let output = run(&["check-driver", id]);
        let text = stdout(&output);
        assert!(output.status.success(), "{id}: {text}{}", stderr(&output));
        assert!(text.contains(&format!("{id}: ")) && text.contains("checks passed"), "{text}");
    }
    // A recipe is checked with its runtime, at its version.
    common::assert_refused(&[(vec!["check-driver", "java-thread@17/spin"], "try check-driver java-thread@17")]);
}
