#!/usr/bin/env bash
# What a run of any length costs (issue 15): taskmeter's peak RSS, each worker's peak RSS, and
# taskmeter's CPU time as a share of its workers'.
#   long:   c-thread, smol and go for DURATION each: 20 units at fixed:2ms (10,000 samples/s
#           per runtime, the issue's target rate) and 20 units at fixed:100us (the issue's
#           heavy case, up to 200,000 samples/s where the runtime keeps up);
#   volume: 10,000 samples/s aggregate at 1, 100 and 10,000 units (fixed:100us, 10ms, 1s) in
#           thread, c-thread and go, for POINT each, busy 1000.
# Taskmeter's CPU is run.json's taskmeter_cpu_ns: getrusage(RUSAGE_SELF) from the first worker
# to the last row's statistics (reading, checking and folding every frame, and ending each row;
# the environment probe before and the charts after are not in it); the workers' is wait4's,
# per row. Taskmeter's peak RSS is /usr/bin/time's maximum resident set size of the command.
# Usage: benchmarks/streaming.sh [long|long-10k|long-200k|volume|all] [DURATION] [POINT]   (defaults: all 10m 60s)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
duration=${2:-10m}
point=${3:-60s}
# TASKMETER=path measures that binary (a copy, so that a rebuild cannot replace it mid-run).
taskmeter=${TASKMETER:-target/release/taskmeter}
[[ -n ${TASKMETER:-} ]] || cargo build --release --quiet -p taskmeter
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

measure() { # NAME [FLAGS]
    local name=$1; shift
    /usr/bin/time -f "%M" -o "$out/$name.rss" "$taskmeter" run sleep "$@" --format json -o "$out/$name" >/dev/null 2>"$out/$name.err" || true
    python3 - "$out/$name/run.json" "$(tail -1 "$out/$name.rss")" "$name" <<'EOF'
import json, sys
record, rss_kb, name = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
rows = record["rows"]
workers_cpu = sum(r["worker"]["cpu_ns"] or 0 for r in rows if r.get("worker"))
own = record["taskmeter_cpu_ns"]
print(f"{name}: taskmeter peak RSS {rss_kb / 1024:.0f} MiB, CPU {own / 1e9:.2f} s = {100 * own / workers_cpu:.2f} % of its workers' {workers_cpu / 1e9:.1f} s")
for r in rows:
    c, w = r.get("counts") or {}, r.get("worker") or {}
    print(f"  {r['runtime']:<9} units {c.get('units', 0):>6}  {r['status']:<8} samples {c.get('samples_total', 0):>11,}  lost {c.get('samples_lost', 0):>7,}  "
          f"worker peak RSS {(w.get('peak_rss_kb') or 0) / 1024:6.1f} MiB  worker CPU {(w.get('cpu_ns') or 0) / 1e9:7.1f} s  basis {r.get('basis')}")
    if r["status"] != "ok":
        print(f"    {r['status']}: {r.get('reason')}")
EOF
}

if [[ $what == long || $what == long-10k || $what == all ]]; then
    measure long-10k --runtimes c-thread,smol,go --units 20 --sleep fixed:2ms --duration "$duration" --order given
fi
if [[ $what == long || $what == long-200k || $what == all ]]; then
    measure long-200k --runtimes c-thread,smol,go --units 20 --sleep fixed:100us --duration "$duration" --order given
fi
if [[ $what == volume || $what == all ]]; then
    for spec in 1:100us 100:10ms 10000:1s; do
        units=${spec%%:*} sleep=${spec#*:}
        measure "units-$units" --runtimes thread,c-thread,go --units "$units" --sleep "fixed:$sleep" --duration "$point" --order given
    done
fi
