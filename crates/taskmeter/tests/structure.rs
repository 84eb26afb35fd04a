//! The shape of each crate: a crate's folders are layers, a module uses only modules of its own
//! layer or below (no arrow up), and no two modules use each other, directly or around a circle
//! (no cycle). Read from the `crate::` and `super::` paths of every source file, so a newcomer's
//! change that breaks the shape fails here, with the arrow named. Between crates, Cargo keeps
//! the order (a crate names only the crates it depends on), so this reads each crate alone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates with an inner shape, each with its layers, lowest first (each `lib.rs` documents
/// them): every folder under its `src` is one. The flat crates (console, machine, model,
/// analysis) are files without folders, checked for circles only.
const CRATES: [(&str, &[&str]); 6] = [
    ("taskmeter", &["report", "history", "session", "experiments", "cli"]),
    ("taskmeter-measure", &["process", "net", "runtimes"]),
    ("taskmeter-analysis", &[]),
    ("taskmeter-model", &[]),
    ("taskmeter-machine", &[]),
    ("taskmeter-console", &[]),
];

/// A crate's sources.
fn src_of(krate: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(krate).join("src")
}

/// A source file's path under this crate's `src`.
fn relative(file: &Path) -> String {
    file.strip_prefix(src_of("taskmeter")).unwrap().to_string_lossy().replace('\\', "/")
}

/// The folders under a crate's src, sorted.
fn folders(dir: &Path) -> Vec<String> {
    let mut folders: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    folders.sort();
    folders
}

/// Every source file of a crate, as its module path (`report/net.rs` -> ["report", "net"]).
fn modules(krate: &str) -> BTreeMap<Vec<String>, PathBuf> {
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<Vec<String>, PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                walk(&path, &[prefix, &[name]].concat(), out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let module = if name == "mod" || (prefix.is_empty() && (name == "lib" || name == "main")) {
                    prefix.to_vec()
                } else {
                    [prefix, &[name]].concat()
                };
                out.insert(module, path);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&src_of(krate), &[], &mut out);
    out
}

/// The paths a source names after `crate::` or `super::`, each as segments from the crate root;
/// a `{...}` group gives one path per item.
fn referenced_paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let code: String = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
    let mut paths = Vec::new();
    for (start, root) in code
        .match_indices("crate::")
        .map(|(i, _)| (i + 7, None))
        .chain(code.match_indices("super::").map(|(i, _)| (i + 7, Some(()))))
    {
        let before = code[..start - 7].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue; // part of a longer path (`taskmeter_record::...`, `self::super::`)
        }
        // `super` is the parent of the module (of a folder's mod.rs: the folder's parent).
        let base: Vec<String> = match root {
            None => Vec::new(),
            Some(()) => module[..module.len().saturating_sub(1)].to_vec(),
        };
        collect(&code[start..], base, &mut paths);
    }
    paths
}

/// Reads `a::b::{c, d::e}` at the start of `rest` into paths appended to `base`.
fn collect(rest: &str, base: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = base;
    let mut rest = rest;
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = group.char_indices().find(|(_, c)| {
                depth += match c {
                    '{' => 1,
                    '}' => -1,
                    _ => 0,
                };
                depth == 0
            });
            let inner = &group[..end.map_or(group.len(), |(i, _)| i)];
            let mut depth = 0;
            let mut item = String::new();
            for c in inner.chars().chain(std::iter::once(',')) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        let trimmed = item.trim();
                        if !trimmed.is_empty() && trimmed != "self" {
                            collect(trimmed, path.clone(), out);
                        } else if trimmed == "self" {
                            out.push(path.clone());
                        }
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            return;
        }
        let ident: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if ident.is_empty() {
            out.push(path);
            return;
        }
        path.push(ident.clone());
        rest = &rest[ident.len()..];
        match rest.strip_prefix("::") {
            Some(next) => rest = next,
            None => {
                out.push(path);
                return;
            }
        }
    }
}

/// The module a path lands in: its longest prefix that is a source file.
fn resolve(path: &[String], modules: &BTreeMap<Vec<String>, PathBuf>) -> Option<Vec<String>> {
    (1..=path.len()).rev().map(|n| path[..n].to_vec()).find(|prefix| modules.contains_key(prefix))
}

/// Module -> the modules of its own crate it uses (itself and its own ancestors left out).
fn arrows(krate: &str) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let modules = modules(krate);
    let mut arrows = BTreeMap::new();
    for (module, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap();
        let mut targets = BTreeSet::new();
        for path in referenced_paths(&text, module) {
            if let Some(target) = resolve(&path, &modules) {
                if &target != module && !module.starts_with(&target) {
                    targets.insert(target);
                }
            }
        }
        arrows.insert(module.clone(), targets);
    }
    arrows
}

fn layer(layers: &[&str], module: &[String]) -> Option<usize> {
    layers.iter().position(|l| module.first().is_some_and(|m| m == l))
}

#[test]
fn every_folder_is_a_layer_of_its_crate() {
    for (krate, layers) in CRATES {
        let mut sorted: Vec<String> = layers.iter().map(|l| l.to_string()).collect();
        sorted.sort();
        let why = "a folder under its src that is no layer of it (or a layer without a folder)";
        assert_eq!(folders(&src_of(krate)), sorted, "{krate}: {why}");
    }
}

#[test]
fn no_arrow_points_up_a_layer() {
    let mut upward = Vec::new();
    for (krate, layers) in CRATES {
        for (from, targets) in arrows(krate) {
            for to in targets {
                if let (Some(a), Some(b)) = (layer(layers, &from), layer(layers, &to)) {
                    let (from, to) = (from.join("::"), to.join("::"));
                    if b > a {
                        upward.push(format!("{krate}: {from} ({}) uses {to} ({})", layers[a], layers[b]));
                    }
                }
            }
        }
    }
    assert!(upward.is_empty(), "arrows up a layer:\n{}", upward.join("\n"));
}

#[test]
fn no_crate_re_exports_another_one_s_modules() {
    // Each module is found where its path says: `taskmeter::model` would hide the crate
    // `taskmeter_model`, and the order Cargo keeps between them.
    for (krate, _) in CRATES {
        let lib = std::fs::read_to_string(src_of(krate).join("lib.rs")).unwrap();
        let found: Vec<&str> = lib.lines().filter(|l| l.trim_start().starts_with("pub use taskmeter_")).collect();
        assert!(found.is_empty(), "{krate}/src/lib.rs re-exports another crate: {found:?}");
    }
}

#[test]
fn no_modules_use_each_other_in_a_circle() {
    // Depth-first search for a back edge; each cycle found is reported by its path.
    fn visit(
        node: &Vec<String>,
        arrows: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<Vec<String>, u8>,
        stack: &mut Vec<Vec<String>>,
        cycles: &mut Vec<String>,
    ) {
        state.insert(node.clone(), 1);
        stack.push(node.clone());
        for next in arrows.get(node).into_iter().flatten() {
            match state.get(next).copied().unwrap_or(0) {
                0 => visit(next, arrows, state, stack, cycles),
                1 => {
                    let from = stack.iter().position(|n| n == next).unwrap();
                    let circle: Vec<String> =
                        stack[from..].iter().chain(std::iter::once(next)).map(|m| m.join("::")).collect();
                    cycles.push(circle.join(" -> "));
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(node.clone(), 2);
    }
    let mut cycles = Vec::new();
    for (krate, _) in CRATES {
        let (arrows, mut state) = (arrows(krate), BTreeMap::new());
        for node in arrows.keys() {
            if state.get(node).copied().unwrap_or(0) == 0 {
                visit(node, &arrows, &mut state, &mut Vec::new(), &mut cycles);
            }
        }
    }
    assert!(cycles.is_empty(), "modules that use each other in a circle:\n{}", cycles.join("\n"));
}

#[test]
fn the_reader_sees_paths_in_groups_and_relative_ones() {
    let mut out = Vec::new();
    collect("analysis::{cells::{cells, Cell}, histogram};", Vec::new(), &mut out);
    let joined: Vec<String> = out.iter().map(|p| p.join("::")).collect();
    assert_eq!(joined, ["analysis::cells::cells", "analysis::cells::Cell", "analysis::histogram"]);
    let paths = referenced_paths(
        "use super::format::format_ns;\nlet x = crate::session::Folder::new();\nlet y = taskmeter_model::run::Row::default();",
        &["report".into(), "console".into()],
    );
    // Another crate's path (`taskmeter_model::...`) is Cargo's to order, not read here.
    assert_eq!(paths, [vec!["session", "Folder", "new"], vec!["report", "format", "format_ns"]]);
}

/// Where code may name one experiment family among the others (paths under
/// crates/taskmeter/src): a family's own folder, `experiments/FAMILY/` whose `mod.rs` declares it
/// (`pub const FAMILY`), which holds its experiment, report, history entry, consistency check
/// and comparison ([`family_code`]); besides, the catalog of `run`'s experiments and the
/// registry every command dispatches through. CONTRIBUTING.md, "Adding an experiment".
const SHARED_FAMILY_CODE: [&str; 2] = ["experiments/catalog.rs", "cli/families.rs"];

/// Whether `relative` (a path under src) is a family's own code: see [`SHARED_FAMILY_CODE`].
fn family_code(relative: &str) -> bool {
    let declares = |folder: &str| {
        std::fs::read_to_string(src_of("taskmeter").join(format!("experiments/{folder}/mod.rs")))
            .is_ok_and(|text| text.contains("\npub const FAMILY: &str = "))
    };
    match relative.split('/').collect::<Vec<_>>().as_slice() {
        ["experiments", folder, _, ..] => declares(folder),
        _ => SHARED_FAMILY_CODE.contains(&relative),
    }
}

/// The names a family or its kind of record goes by, in code that picks one among the others.
const FAMILY_NAMES: [&str; 5] = ["run", "loop", "net", "granularity", "bench"];

/// Why `line` (code, not a comment) picks a family among the others, if it does: a match arm
/// or test on a family's or record kind's name or schema, an enum of the families or records,
/// or a downcast to one record.
fn picks_a_family(line: &str) -> Option<String> {
    // `||` is a closure or an or, never a pattern's alternative.
    let code = line.trim_start().replace("||", "  ");
    if code.starts_with("//") {
        return None;
    }
    for cast in ["downcast_ref::<", "downcast::<", "of_kind::<"] {
        if let Some((_, after)) = code.split_once(cast) {
            let target: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if target.ends_with("Record") {
                return Some(format!("{cast}{target}>"));
            }
        }
    }
    let mut forms: Vec<String> = ["AnyRecord", "Family::", "SCHEMA =>", "SCHEMA |"].map(String::from).to_vec();
    for name in FAMILY_NAMES {
        let quoted = format!("\"{name}\"");
        forms.extend([
            format!("{quoted} =>"),
            format!("{quoted} |"),
            format!("| {quoted}"),
            format!("== {quoted}"),
            format!("!= {quoted}"),
        ]);
    }
    forms.into_iter().find(|form| code.contains(form.as_str()))
}

#[test]
fn only_a_family_and_the_registry_pick_a_family() {
    let mut found = Vec::new();
    for file in modules("taskmeter").values() {
        let relative = relative(file);
        if family_code(&relative) {
            continue;
        }
        for (n, line) in std::fs::read_to_string(file).unwrap().lines().enumerate() {
            if let Some(form) = picks_a_family(line) {
                found.push(format!("{relative}:{}: `{form}` in: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "code outside a family's own files and the registry (cli/families.rs) picks a family; dispatch through the \
         registry's traits instead (CONTRIBUTING.md, \"Adding an experiment\"):\n{}",
        found.join("\n")
    );
}

#[test]
fn a_family_s_own_code_is_where_it_declares_itself() {
    for own in [
        "experiments/sleep/compare.rs",
        "experiments/net/mod.rs",
        "experiments/granularity/mod.rs",
        "experiments/bench/report.rs",
    ] {
        assert!(family_code(own), "{own}");
    }
    for core in ["experiments/compared.rs", "experiments/family.rs", "cli/compare.rs", "report/page.rs", "lib.rs"] {
        assert!(!family_code(core), "{core}");
    }
}

#[test]
fn the_family_check_sees_arms_and_tests_and_passes_over_comments() {
    assert!(picks_a_family("        AnyRecord::Run(r) => r,").is_some());
    assert!(picks_a_family("    Command::Run(args) if args.experiment.family == Family::Net => {").is_some());
    assert!(picks_a_family("        RunRecord::SCHEMA => load(value),").is_some());
    assert!(picks_a_family("        \"granularity\" => grain_lines(&old, &new),").is_some());
    assert!(picks_a_family(
        "    let kind = if matches!(experiment, \"net\" | \"bench\") { experiment } else { \"run\" };"
    )
    .is_some());
    assert!(picks_a_family("    if record.kind() == \"run\" {").is_some());
    assert!(picks_a_family("    let r = record.downcast_ref::<NetRecord>()?;").is_some());
    assert!(picks_a_family("        for (invocation, r) in of_kind::<GrainRecord>(side) {").is_some());
    assert!(picks_a_family("// AnyRecord::Run(r) was the old way").is_none());
    assert!(picks_a_family("    let name = folder.name().unwrap_or_else(|| \"run\".into());").is_none());
    assert!(picks_a_family("pub fn from_value<R: Record>(file: PathBuf) -> Result<R, LoadError> {").is_none());
    assert!(picks_a_family("    let (file, schema, value) = schema_of(path, &files())?;").is_none());
    assert!(picks_a_family("    let family = families::of(args.experiment)?;").is_none());
}
