#!/usr/bin/env bash
# Clippy on every Rust crate, as the tests' build: what `cargo clippy --all-targets -- -D warnings`
# checks, but with clippy-driver compiling the crates for real (RUSTC_WORKSPACE_WRAPPER, the same
# wrapper `cargo clippy` sets for its check), so each dependency is compiled once, for the build
# the tests run, instead of a second time in check mode for the lints (that second pass was 81 s
# of a fresh clone's suite here for the workspace, and 78 s for the wasmtime host).
# It builds the workspace's every target (the test binaries, the debug taskmeter), and the two
# crates taskmeter builds on first use outside the workspace, in the target folders and with the
# arguments it uses (crates/taskmeter/src/experiments/net/registry.rs), so their first use in the
# tests finds them built. Every warning, rustc's or clippy's, fails it, each printed as rustc
# prints it. test.sh exports the same wrapper for the whole suite: a cargo call without it would
# compile the workspace's crates again.
# Usage: tests/clippy.sh [workspace|wasm] (both when not said).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -z "${RUSTC_WORKSPACE_WRAPPER:-}" ]; then
    RUSTC_WORKSPACE_WRAPPER=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver) || {
        echo "clippy: clippy-driver not found (rustup component add clippy)" >&2
        exit 1
    }
    export RUSTC_WORKSPACE_WRAPPER
fi

# build WHAT DIR CARGO-ARGS...: one cargo build in DIR; its warnings and errors printed, any of
# them a failure (status 1).
build() {
    local what=$1 dir=$2 status
    shift 2
    (cd "$dir" && cargo "$@" --message-format=json) | python3 -c '
import json, sys
found = 0
for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        sys.stderr.write(line)
        continue
    if message.get("reason") == "compiler-message" and message["message"]["level"] in ("warning", "error"):
        found += 1
        sys.stderr.write(message["message"]["rendered"])
sys.exit(1 if found else 0)
'
    status=("${PIPESTATUS[@]}")
    if [ "${status[0]}" -ne 0 ] || [ "${status[1]}" -ne 0 ]; then
        echo "clippy: $what has warnings or did not build" >&2
        return 1
    fi
}

failed=0
if [ "${1:-}" != wasm ]; then
    build "the workspace" . test --locked --workspace --all-targets --no-run --quiet || failed=1
fi
if [ "${1:-}" != workspace ]; then
    CARGO_TARGET_DIR=$PWD/target/wasm-guest build "the wasm-thread guest" receivers/wasm-thread/guest \
        build --release --locked --quiet --target wasm32-wasip1-threads || failed=1
    CARGO_TARGET_DIR=$PWD/target/wasm-host build "the wasmtime host" receivers/wasm-thread/host \
        build --release --locked --quiet || failed=1
fi
exit $failed
