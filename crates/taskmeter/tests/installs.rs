//! Each record() client installed by its language's package manager, as a user depends on it
//! (clients/README.md, "Install"), into a project of its own in a temporary folder: a venv and
//! pip, an npm project, a Go module with `replace`, a Cargo project with a path dependency
//! (offline), `make install` and pkg-config, a Mix project with a path dependency, a rebar3
//! project with the app in `_checkouts`. The client's conformance program, copied into that
//! project unchanged, passes the contract through `taskmeter bench` and sends nothing without it.
//! The copy has no source of the client beside it, so what it runs is the install.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::clients::{assert_contract, assert_silent_without_a_collector, build, contract_rows};
use common::stdout;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// A user's project: a temporary folder holding a copy of a client's conformance program.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    /// A project with a copy of `conformance` (from the repository's root) in it.
    fn with(conformance: &str) -> Project {
        let dir = tempfile::tempdir().unwrap();
        let from = repo().join(conformance);
        std::fs::copy(&from, dir.path().join(from.file_name().unwrap())).unwrap();
        Project { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, file: &str, text: &str) {
        std::fs::write(self.path().join(file), text).unwrap();
    }

    /// `program` with its arguments, run in the project.
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command.current_dir(self.path());
        command
    }

    /// `program` (run in the project, with `env`) passes the contract as scenario `name`, and
    /// is silent without a collector.
    fn passes_the_contract(&self, name: &str, program: &[&str], env: &[(&str, &str)]) {
        let quoted = |s: &str| format!("'{s}'");
        let words: Vec<String> = env
            .iter()
            .map(|(key, value)| format!("{key}={}", quoted(value)))
            .chain(program.iter().map(|word| quoted(word)))
            .collect();
        let programs = [(name, words.join(" "))];
        let out = tempfile::tempdir().unwrap();
        let rows = contract_rows(&programs, self.path(), out.path());
        assert_contract(name, &rows[name]);
        assert_silent_without_a_collector(self.command(program[0]).args(&program[1..]).envs(env.iter().copied()));
    }
}

fn text(path: &Path) -> String {
    path.to_str().expect("a UTF-8 path").to_string()
}

#[test]
fn pip_installs_the_python_client_into_a_venv() {
    let project = Project::with("clients/python/conformance.py");
    let venv = project.path().join("venv");
    build(project.command("python3").args(["-m", "venv"]).arg(&venv));
    let python = text(&venv.join("bin/python"));
    build(
        project
            .command(&python)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
            .arg(repo().join("clients/python")),
    );
    let import = ["-c", "import taskmeter_record; print(taskmeter_record.__file__)"];
    let imported = stdout(&project.command(&python).args(import).output().unwrap());
    assert!(imported.starts_with(&text(&venv)), "the venv's install is imported, not {imported}");
    project.passes_the_contract("python", &[&python, "conformance.py"], &[]);
}

#[test]
fn npm_installs_the_node_client_into_a_project() {
    let project = Project::with("clients/node/conformance.js");
    project.write("package.json", r#"{"name": "user", "version": "1.0.0", "private": true}"#);
    // --install-links: the package's files (package.json's `files`) copied in, as from a registry,
    // rather than a link to the folder.
    build(
        project
            .command("npm")
            .args(["install", "--install-links", "--offline", "--no-audit", "--no-fund", "--loglevel=error"])
            .arg(repo().join("clients/node")),
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(project.path().join("package.json")).unwrap()).unwrap();
    let added = manifest["dependencies"]["taskmeter-record"].as_str();
    assert!(added.is_some_and(|spec| spec.starts_with("file:")), "npm added the dependency: {manifest}");
    project.passes_the_contract("node", &["node", "conformance.js"], &[]);
}

#[test]
fn a_go_module_requires_the_go_client_with_replace() {
    let project = Project::with("clients/go/cmd/conformance/main.go");
    let client = repo().join("clients/go");
    // The lines of clients/go/README.md; GOPROXY=off: nothing comes from the network.
    let go = |args: &[&str]| {
        let mut command = project.command("go");
        command.args(args).env("GOPROXY", "off").env("GOFLAGS", "-mod=mod");
        command
    };
    build(&mut go(&["mod", "init", "example.com/user"]));
    build(&mut go(&[
        "mod",
        "edit",
        "-require=taskmeter/clients/go@v0.0.0",
        &format!("-replace=taskmeter/clients/go={}", text(&client)),
    ]));
    build(&mut go(&["build", "-o", "conformance", "."]));
    project.passes_the_contract("go", &["./conformance"], &[]);
}

#[test]
fn a_cargo_project_depends_on_the_rust_crate_by_path() {
    let project = Project::with("crates/taskmeter-record/examples/conformance.rs");
    let krate = text(&repo().join("crates/taskmeter-record"));
    // Its own workspace, outside this one: taskmeter-record's `workspace = true` keys still come
    // from this repository's workspace.
    project.write(
        "Cargo.toml",
        &format!(
            "[package]\nname = \"user\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[[bin]]\nname = \"conformance\"\n\
             path = \"conformance.rs\"\n\n[dependencies]\ntaskmeter-record = {{ path = \"{krate}\" }}\n\n[workspace]\n"
        ),
    );
    // Offline, from the registry's cache that this workspace's build filled; a target folder kept
    // between runs (the dependencies build once); a user's build, not the suite's clippy.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("installs-cargo");
    build(
        project
            .command(env!("CARGO"))
            .args(["build", "--offline", "--quiet"])
            .env("CARGO_TARGET_DIR", &target)
            .env_remove("RUSTC_WORKSPACE_WRAPPER"),
    );
    project.passes_the_contract("rust", &[&text(&target.join("debug/conformance"))], &[]);
}

#[test]
fn make_install_puts_the_c_header_where_pkg_config_finds_it() {
    let project = Project::with("clients/c/conformance.c");
    let prefix = project.path().join("prefix");
    build(
        Command::new("make")
            .arg("-s")
            .arg("-C")
            .arg(repo().join("clients/c"))
            .arg("install")
            .arg(format!("PREFIX={}", text(&prefix))),
    );
    // The line of clients/c/README.md.
    build(
        project
            .command("sh")
            .args(["-c", "cc $(pkg-config --cflags taskmeter_record) -o conformance conformance.c $(pkg-config --libs taskmeter_record)"])
            .env("PKG_CONFIG_PATH", prefix.join("share/pkgconfig")),
    );
    project.passes_the_contract("c", &["./conformance"], &[]);
}

#[test]
fn a_mix_project_depends_on_the_elixir_client_by_path() {
    let project = Project::with("clients/elixir/conformance.exs");
    let client = text(&repo().join("clients/elixir"));
    project.write(
        "mix.exs",
        &format!(
            "defmodule User.MixProject do\n  use Mix.Project\n\n  def project do\n    \
             [app: :user, version: \"0.1.0\", deps: [{{:taskmeter, path: \"{client}\"}}]]\n  end\nend\n"
        ),
    );
    build(project.command("mix").arg("compile").env("MIX_ENV", "dev"));
    project.passes_the_contract("elixir", &["mix", "run", "conformance.exs"], &[("MIX_ENV", "dev")]);
}

#[test]
fn a_rebar3_project_depends_on_the_erlang_app_in_checkouts() {
    let project = Project::with("clients/erlang/conformance.escript");
    project.write("rebar.config", "{deps, [taskmeter_record]}.\n");
    std::fs::create_dir(project.path().join("_checkouts")).unwrap();
    std::os::unix::fs::symlink(repo().join("clients/erlang"), project.path().join("_checkouts/taskmeter_record"))
        .unwrap();
    build(project.command("rebar3").arg("compile"));
    // The app's ebin, as rebar3 gives it; the escript finds the module on the code path.
    let ebin = stdout(&project.command("rebar3").args(["path", "--app", "taskmeter_record"]).output().unwrap());
    let ebin = Path::new(ebin.lines().last().expect("rebar3 path prints the ebin").trim());
    assert!(ebin.join("taskmeter_record.beam").is_file(), "{}", ebin.display());
    let libs = text(ebin.parent().and_then(Path::parent).unwrap());
    project.passes_the_contract("erlang", &["escript", "conformance.escript"], &[("ERL_LIBS", &libs)]);
}
