#!/usr/bin/env bash
# The record() benchmark behind BENCHMARKS.md:
#   1. in process: record() events per second on one thread and on every core (3 runs each);
#   2. across processes: each client's `flood` through `taskmeter bench`: the client's own rate
#      (first to last call), the collector's ips (1 / mean gap, from the job's start, so it
#      includes the process's start-up), events received, dropped by the client (counted in its
#      later batches), and lost without a count (sent - received - dropped: must be 0). 2 runs.
# Usage: clients/bench.sh [EVENTS_FAST] [EVENTS_SLOW]   (C, Rust, Go: fast; Python, Node: slow)
set -euo pipefail
cd "$(dirname "$0")/.."
fast=${1:-20000000}
slow=${2:-2000000}

cargo build --release --quiet -p taskmeter -p taskmeter-record --examples
make -s -C clients/c
(cd clients/go && go build -o ../../target/release/go-flood ./cmd/flood)

echo "== in process: record() on 1 thread and on every core"
target/release/examples/throughput 1 3

echo
echo "== across processes: one flood per client (1 thread; c-4: 4 threads on every core, to outrun the collector)"
clients=(
    "c-4=clients/c/build/flood $((fast * 2)) 4"
    "c=clients/c/build/flood $fast"
    "rust=target/release/examples/flood $fast"
    "go=target/release/go-flood $fast"
    "node=node clients/node/flood.js $slow"
    "python=python3 clients/python/flood.py $slow"
)
out=$(mktemp -d)
printf '%-8s %4s %12s %14s %14s %12s %10s %8s\n' client run sent "sent/s" "ips received" received dropped lost
for run in 1 2; do
    for spec in "${clients[@]}"; do
        name=${spec%%=*}
        # One flood per window: the shell then waits out the window, so it is not run again.
        taskmeter_args=(--scenario "$name=${spec#*=} 2>$out/$name.err && sleep 9" --warmup 0 --duration 8s --drain 3s
                        --format json -o "$out/$name-$run")
        target/release/taskmeter bench "${taskmeter_args[@]}" >"$out/$name.json" 2>/dev/null || true
        python3 - "$out/$name.json" "$out/$name.err" "$name" "$run" <<'PY'
import json, re, sys
record = json.load(open(sys.argv[1]))
r = record["report"]["results"][0]
d = r["delivery"]
line = open(sys.argv[2]).read()
m = re.search(r"flood: (\d+) events in ([\d.]+) s", line)
sent, seconds = (int(m.group(1)), float(m.group(2))) if m else (0, float("nan"))
received = d["events_received"]
lost = sent - received - d["events_dropped_by_clients"]
ips = r["ips"] or 0
print(f"{sys.argv[3]:<8} {sys.argv[4]:>4} {sent:>12} {sent / seconds:>14,.0f} {ips:>14,.0f} {received:>12} "
      f"{d['events_dropped_by_clients']:>10} {lost:>8}" + (f"  ERROR {r['error']}" if r["error"] else ""))
PY
    done
done
rm -rf "$out"
