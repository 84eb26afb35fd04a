#!/usr/bin/env bash
# The sample path's headroom (issue 44): how many samples a second one worker's path carries to
# taskmeter with none lost, and taskmeter's CPU at that rate. A synthetic producer on every core
# but one: UNITS units of `thread/spin` (the Rust worker, each unit spinning to its deadline, so
# a unit makes 1e9 / PERIOD_NS samples a second and nothing else), relative mode, no busy work;
# the real worker, writer, sample file, reader, checker and fold. Per rate: the samples, lost
# (must be 0), those the units wrote themselves (the writer behind), how far taskmeter's reader
# fell behind at most (sample_backlog_peak_bytes), how long after the worker's exit it had
# read the rest (sample_drain_after_exit_ns), and taskmeter's CPU per sample and as a share of
# its workers'. A rate is sustained when the reader keeps pace: done within a flush period or
# two of the worker's exit; beyond, it falls behind and catches up after (still losing nothing:
# the samples wait in the sample file's memory).
# Usage: benchmarks/sample-path.sh [UNITS] [DURATION] [PERIODS_NS...]
#   defaults: cores - 1 units, 4s, periods 4000 2000 1000 750 600 500
set -euo pipefail
cd "$(dirname "$0")/.."
units=${1:-$(($(nproc) - 1))}
duration=${2:-4s}
shift $(($# > 2 ? 2 : $#))
periods=("${@:-4000 2000 1000 750 600 500}")
read -r -a periods <<<"${periods[*]}"
# TASKMETER=path measures that binary (a copy, so that a rebuild cannot replace it mid-run).
taskmeter=${TASKMETER:-target/release/taskmeter}
[[ -n ${TASKMETER:-} ]] || cargo build --release --quiet -p taskmeter
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "sample path: $units units of thread/spin on $(nproc) CPUs, $duration each; $(uname -r)"
for period in "${periods[@]}"; do
    "$taskmeter" run --runtimes thread/spin --mode relative --sleep "fixed:${period}ns" --units "$units" --busy 0 \
        --duration "$duration" --warmup 200ms --no-history --format json -o "$out/$period" >/dev/null 2>"$out/$period.err" || true
    python3 - "$out/$period/run.json" "$period" "$units" <<'PY'
import json, sys
record = json.load(open(sys.argv[1]))
period, units = int(sys.argv[2]), int(sys.argv[3])
row = record["rows"][0]
c, w = row.get("counts") or {}, row.get("worker") or {}
window = (w["end_ns"] - w["measure_start_ns"]) / 1e9 if w.get("end_ns") else None
measured = c.get("samples_measured", 0) + c.get("samples_left_out", 0)
rate = measured / window if window else 0
own, workers = record["taskmeter_cpu_ns"], w.get("cpu_ns") or 0
drained = (w.get("sample_drain_after_exit_ns") or 0) / 1e9
print(f"period {period:>5} ns: asked {units * 1e3 / period:6.2f} M/s, got {rate / 1e6:6.2f} M/s  {row['status']:<7} "
      f"samples {c.get('samples_total', 0):>12,}  lost {c.get('samples_lost', 0)}  by units {c.get('samples_flushed_by_units', 0):>10,}  "
      f"reader behind at most {(w.get('sample_backlog_peak_bytes') or 0) / 2**20:7.1f} MiB  "
      f"taskmeter {own / max(c.get('samples_total', 1), 1):5.1f} ns/sample = {100 * own / max(workers, 1):5.2f} % of the workers' CPU  "
      f"(done {drained:4.2f} s after the worker's exit)")
PY
done
