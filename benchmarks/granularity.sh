#!/usr/bin/env bash
# The granularity experiment (issue 17): METG(50 %) of every runtime in each pattern with three
# repetitions (the preset), the wall time of the default `run granularity`, and the harness's own cost per
# task (the patterns' bookkeeping with the tasks run inline, no runtime).
# Usage: benchmarks/granularity.sh [patterns|default|harness|all]   (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
# TASKMETER=path measures that binary (a copy, so that a rebuild cannot replace it mid-run).
taskmeter=${TASKMETER:-target/release/taskmeter}
[[ -n ${TASKMETER:-} ]] || cargo build --release --quiet -p taskmeter
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

if [[ $what == default || $what == all ]]; then
    for i in 1 2 3; do
        /usr/bin/time -f "default run granularity: %e s wall" "$taskmeter" run granularity -o "$out/default-$i" >/dev/null 2>"$out/default-$i.err"
        tail -1 "$out/default-$i.err"
    done
fi
if [[ $what == patterns || $what == all ]]; then
    for pattern in trivial chain stencil; do
        echo "== $pattern (the preset: three workers per runtime, 150 ms per size)"
        "$taskmeter" run experiments/granularity-metg.toml --pattern "$pattern" -o "$out/$pattern" 2>/dev/null | sed -n '/^#/,/^$/p'
    done
fi
if [[ $what == harness || $what == all ]]; then
    for i in 1 2 3; do
        cargo run --quiet --release -p taskmeter-worker --example harness_cost
    done
fi
