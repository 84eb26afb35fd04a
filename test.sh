#!/usr/bin/env bash
# The whole test suite: the style gate (tests/lint.sh), Rust unit and integration tests (every runtime's conformance check
# included), the protocol's schema tests, the Python client's tests, report.html in headless
# Chromium, the dashboards' exports read by their consumers' parsers (tests/exports) and the
# coverage benchmark's computation (benchmarks/tests). It first installs what
# is missing (tests/setup.sh), so a fresh machine needs nothing else. With CI=true, a test that
# cannot run here fails instead of being skipped.
set -euo pipefail
cd "$(dirname "$0")"
# Each part's time, said at the end (docs/benchmarks/structure.md keeps the tables: where the
# suite's time goes).
parts=()
part() {
    local name=$1 start=$SECONDS
    shift
    "$@"
    parts+=("$name $((SECONDS - start)) s")
}
said() { if [ ${#parts[@]} -gt 0 ]; then (IFS=,; echo "suite: ${parts[*]}; $SECONDS s in all" | sed 's/,/, /g'); fi; }
part setup tests/setup.sh
# A CI build is built once: incremental caches would only take disk (a third of target/debug).
if [ "${CI:-}" = true ]; then export CARGO_INCREMENTAL=0; fi
# Runs of the tests are recorded in a history of their own, never the user's (removed after).
history=$(mktemp -d)
trap 'rm -rf "$history"; said' EXIT
export TASKMETER_HISTORY="$history/history.sqlite"
# Clippy compiles the workspace's crates for the whole suite (tests/clippy.sh): the lints and
# the build in one pass. Every cargo call below finds that build only with the same wrapper.
RUSTC_WORKSPACE_WRAPPER=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)
export RUSTC_WORKSPACE_WRAPPER
part lint tests/lint.sh --without-clippy
part "build (clippy)" tests/clippy.sh workspace
# Every test binary, two side by side (tests/lanes.sh), and the doc tests. The wasm receivers'
# build (wasmtime: 3-4 min of CPU, most of the suite's build) runs in a lane beside them; the
# tests that use it wait on cargo's lock of its target folder.
part "cargo test" tests/lanes.sh "clippy-wasm tests/clippy.sh wasm"
# The figures with the feature print (PNGs at 300 dpi): the drawing is taskmeter-print's, tested
# with the workspace; here the report's unit test again, with the feature (one unit to build, and
# no other taskmeter binary built beside the one the tests ran).
part "print" cargo test --locked -p taskmeter --features print --lib --quiet report::print
part pytest python3 -m pytest -q protocol/tests clients/python/tests tests/browser tests/exports benchmarks/tests
