#!/usr/bin/env bash
# `--busy TIME` is the same time in every runtime (issue 54): each row's measured busy phase
# (the median of its loops' busy_end - start) against the time asked, at 2 µs, 20 µs and 200 µs,
# with and without --yield, on an idle machine and beside `stress-ng --cpu N` (N = the cores).
# Each row's iterations are fitted to its loop by probes just before it runs
# (crates/taskmeter/src/experiments/sleep/calibrate.rs); this says how close the fit lands.
# Prints, per case, each runtime's phase and its error, the rows within 10 %, and the worst.
# Usage: benchmarks/busy.sh [idle|loaded|all] [RUNTIMES]   (defaults: all, every available runtime)
#   UNITS (2) and DURATION (1s) set the rows' units and window.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
runtimes=${2:-}
# TASKMETER=path measures that binary (a copy, so that a rebuild cannot replace it mid-run).
taskmeter=${TASKMETER:-target/release/taskmeter}
[[ -n ${TASKMETER:-} ]] || cargo build --release --quiet -p taskmeter
out=$(mktemp -d)
hog=
trap '[[ -n $hog ]] && kill "$hog" 2>/dev/null; rm -rf "$out"' EXIT

measure() { # LOAD
    local load=$1 time yield flags
    for time in 2us 20us 200us; do
        for yield in "" --yield; do
            flags=(--busy "$time" --units "${UNITS:-2}" --duration "${DURATION:-1s}" $yield)
            [[ -n $runtimes ]] && flags+=(--runtimes "$runtimes")
            local name="$load-$time${yield:+-yield}"
            "$taskmeter" run "${flags[@]}" --no-history --format json -o "$out/$name" >/dev/null 2>"$out/$name.err" || true
            python3 - "$out/$name/run.json" "$name" <<'PY'
import json, sys
record, name = json.load(open(sys.argv[1])), sys.argv[2]
target = record["settings"]["busy_ns"]
cells, within = [], 0
rows = [r for r in record["rows"] if (r.get("statistics") or {}).get("busy", {}).get("p50") is not None]
for r in rows:
    phase = r["statistics"]["busy"]["p50"]
    error = phase / target - 1
    within += abs(error) <= 0.10
    fit = r.get("busy_fit") or {}
    cells.append((abs(error), f"{r['runtime']} {phase / 1e3:.2f} µs ({100 * error:+.0f} %, {fit.get('iterations')} it.)"))
worst = max(cells)[1] if cells else "-"
print(f"{name}: {within}/{len(rows)} rows within 10 % of {target / 1e3:g} µs; worst {worst}")
print("    " + ", ".join(c for _, c in cells))
for r in record["rows"]:
    if r not in rows:
        print(f"    {r['runtime']}: {r['status']}, {r.get('reason')}")
PY
        done
    done
}

[[ $what == idle || $what == all ]] && measure idle
if [[ $what == loaded || $what == all ]]; then
    command -v stress-ng >/dev/null || { echo "busy.sh: the loaded case needs stress-ng (apt-get install stress-ng)" >&2; exit 1; }
    stress-ng --cpu "$(nproc)" --timeout 3600s >/dev/null 2>&1 &
    hog=$!
    measure loaded
fi
