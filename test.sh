#!/usr/bin/env bash
# The whole test suite: Rust unit and integration tests (every runtime's conformance check
# included), the protocol's schema tests, and report.html in headless Chromium.
set -euo pipefail
cd "$(dirname "$0")"
cargo build --locked --quiet
cargo test --locked --workspace
python3 -m pytest -q protocol/tests tests/browser
