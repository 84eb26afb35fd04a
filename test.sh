#!/usr/bin/env bash
# The whole test suite: the style gate (tests/lint.sh), Rust unit and integration tests (every runtime's conformance check
# included), the protocol's schema tests, the Python client's tests and report.html in headless
# Chromium. It first installs what is missing (tests/setup.sh), so a fresh machine needs nothing
# else. With CI=true, a test that cannot run here fails instead of being skipped.
set -euo pipefail
cd "$(dirname "$0")"
tests/setup.sh
# A CI build is built once: incremental caches would only take disk (a third of target/debug).
if [ "${CI:-}" = true ]; then export CARGO_INCREMENTAL=0; fi
# Runs of the tests are recorded in a history of their own, never the user's (removed after).
history=$(mktemp -d)
trap 'rm -rf "$history"' EXIT
export TASKMETER_HISTORY="$history/history.sqlite"
tests/lint.sh
cargo build --locked --quiet
cargo test --locked --workspace
# The figures again with the feature print: their PNGs at 300 dpi (resvg).
cargo test --locked -p taskmeter --features print --test report a_sweep
python3 -m pytest -q protocol/tests clients/python/tests tests/browser
