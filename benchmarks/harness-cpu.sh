#!/usr/bin/env bash
# What taskmeter itself costs while its workers measure (issue 28): its CPU time as a share of
# its workers', and the samples lost, per experiment and unit count.
#   default: `taskmeter run` (sleep, every available runtime), its stderr not a terminal;
#   tty:    the same in a pseudo-terminal (script(1)), as a new user types it: the bar and the
#           live line are drawn;
#   10k, 100k: the volume preset (thread, tokio-mt, embassy, go, python-asyncio, java-virtual)
#           at 10,000 and 100,000 units;
#   lost:   `run volume --runtimes thread,tokio-mt --units 100000 --duration 3s`, the issue's case for samples
#           lost when thousands of threads compete with the worker's writer (since protocol 4: the units
#           write their full rings themselves instead, counted).
# taskmeter's CPU is run.json's taskmeter_cpu_ns: getrusage(RUSAGE_SELF) from the first worker
# to the last row's statistics (reading, checking and folding every frame, ending each row;
# the environment probe before and the charts after are not in it, nor the memory for the kept
# values written before the first worker, printed apart). The workers' is wait4's.
# Usage: benchmarks/harness-cpu.sh [default|tty|10k|100k|lost|all] [RUNS]   (defaults: all 3)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
runs=${2:-3}
# TASKMETER=path measures that binary (a copy, so that a rebuild cannot replace it mid-run).
taskmeter=${TASKMETER:-target/release/taskmeter}
[[ -n ${TASKMETER:-} ]] || cargo build --release --quiet -p taskmeter
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

measure() { # NAME [FLAGS]
    local name=$1; shift
    for i in $(seq "$runs"); do
        if [[ $name == tty ]]; then
            # script runs the command in a pseudo-terminal; its own output is thrown away.
            script -q -e -c "$(printf '%q ' "$taskmeter" run "$@" --no-history --format json -o "$out/$name-$i")" /dev/null \
                >/dev/null 2>&1 || true
        else
            "$taskmeter" run "$@" --no-history --format json -o "$out/$name-$i" >/dev/null 2>"$out/$name-$i.err" || true
        fi
        python3 - "$out/$name-$i/run.json" "$name" "$i" <<'PY'
import json, sys
record, name, i = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
rows = [r for r in record["rows"] if r.get("worker")]
workers = sum(r["worker"].get("cpu_ns") or 0 for r in rows)
own = record["taskmeter_cpu_ns"]
samples = sum((r.get("counts") or {}).get("samples_total", 0) for r in rows)
lost = sum((r.get("counts") or {}).get("samples_lost", 0) for r in rows)
# Protocol 4: samples a unit wrote itself when the writer fell behind (none lost for it).
own_writes = sum((r.get("counts") or {}).get("samples_flushed_by_units", 0) for r in rows)
print(f"{name} run {i}: taskmeter {own / 1e9:.2f} s = {100 * own / workers:.2f} % of its workers' {workers / 1e9:.1f} s; "
      f"{samples:,} samples, {lost:,} lost, {own_writes:,} written by their units, {len(rows)} rows")
prepared = record.get("taskmeter_prepared")
if prepared and prepared["bytes"]:
    print(f"    before the first worker: {prepared['bytes'] / 2**20:.1f} MiB written for the kept values and the units' tables in "
          f"{prepared['cpu_ns'] / 1e6:.0f} ms of CPU")
for r in rows:
    c = r.get("counts") or {}
    if c.get("samples_lost"):
        print(f"    {r['runtime']} at {c.get('units')} units: {c['samples_lost']:,} lost; {r.get('reason') or ''}")
PY
    done
}

[[ $what == default || $what == all ]] && measure default
[[ $what == tty || $what == all ]] && measure tty
[[ $what == 10k || $what == all ]] && measure 10k experiments/volume-study.toml --units 10000
[[ $what == 100k || $what == all ]] && measure 100k experiments/volume-study.toml --units 100000
[[ $what == lost || $what == all ]] && measure lost volume --runtimes thread,tokio-mt --units 100000 --duration 3s
exit 0
