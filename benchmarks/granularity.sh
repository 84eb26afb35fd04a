#!/usr/bin/env bash
# The granularity experiment (issue 17): METG(50 %) of every runtime in each pattern with three
# repetitions (the preset), the wall time of the default `run granularity`, and the harness's own cost per
# task (the patterns' bookkeeping with the tasks run inline, no runtime).
# `trust` (issue 29): the default settings with ten workers per runtime: how many points were
# invalid (an impossible efficiency), that none is shown as a value, and that every METG has an
# interval or a bound.
# Usage: benchmarks/granularity.sh [patterns|default|harness|trust|all]   (default: all)
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
if [[ $what == trust || $what == all ]]; then
    "$taskmeter" run granularity --repeat 10 -o "$out/trust" >"$out/trust.txt" 2>&1 || true
    grep -E '^(warning|note):' "$out/trust.txt" || true
    python3 - "$out/trust/granularity.json" <<'EOF'
import json, math, sys
record = json.load(open(sys.argv[1]))
points = [p for run in record["runs"] for p in run["points"]]
invalid = [p for p in points if p.get("invalid")]
shown = [e["value"] for s in record["summaries"] for e in s["efficiency"] if e]
over = [v for v in shown if v > 1.2]
print(f"{len(points)} points from {len(record['runs'])} workers: {len(invalid)} invalid; "
      f"efficiencies shown: {len(shown)}, the highest {100 * max(shown):.0f} %, above 120 %: {len(over)}")
for s in record["summaries"]:
    metg = s.get("metg_ns")
    if metg and metg.get("degrees_of_freedom") and metg.get("log_scale"):
        low, high = (metg["value"] * math.exp(sign * metg["half_width"]) for sign in (-1, 1))
        what = f"{metg['value']:.0f} ns ({low:.0f}-{high:.0f}, on a log scale) ({s['repetitions']} workers)"
    elif metg and metg.get("degrees_of_freedom"):
        what = f"{metg['value']:.0f} ns ± {metg['half_width']:.0f} ({s['repetitions']} workers)"
    elif s.get("metg_bound"):
        what = f"a bound: {s['metg_bound']}"
    else:
        what = "NO INTERVAL"
    print(f"    {s['runtime']:<15} METG {what}")
EOF
fi
if [[ $what == harness || $what == all ]]; then
    for i in 1 2 3; do
        cargo run --quiet --release -p taskmeter-worker --example harness_cost
    done
fi
