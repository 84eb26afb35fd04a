#!/usr/bin/env bash
# Does taskmeter measure what the trusted instrument measures? One C thread sleeping until an
# absolute deadline every 1 ms, busy 0, in taskmeter's c-thread worker and in cyclictest
# (rt-tests), back to back, twice per round:
#   - with the CPU latency request held at 0: `--cpu-dma-latency 0` against cyclictest's default;
#   - without it: taskmeter's default against `cyclictest --laptop`.
# Prints p50 and p99 of the lateness (µs) of each. Needs root and Debian's rt-tests.
# Usage: benchmarks/cyclictest-fidelity.sh [SECONDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
rounds=${2:-3}
command -v cyclictest >/dev/null || { echo "needs cyclictest: apt-get install rt-tests" >&2; exit 1; }
cargo build --release --quiet -p taskmeter
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

taskmeter() { # NAME [FLAGS]
    local name=$1; shift
    target/release/taskmeter run sleep --runtimes c-thread --units 1 --sleep fixed:1ms --mode absolute --busy 0 \
        --duration "${seconds}s" --warmup 500ms "$@" --format json -o "$out/$name" >/dev/null 2>&1
    python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["rows"][0]["statistics"]["lateness"]
print("%.1f %.1f" % (s["p50"] / 1e3, s["p99"] / 1e3))' "$out/$name/run.json"
}

cyclic() { # NAME [FLAGS]
    local name=$1; shift
    cyclictest -t1 -i1000 -m -q -D "$seconds" -h 100000 "$@" >"$out/$name.txt" 2>/dev/null
    python3 -c '
import sys
counts = []
for line in open(sys.argv[1]):
    if line.startswith("#") or not line.strip():
        continue
    us, n = line.split()[:2]
    counts.append((int(us), int(n)))
total = sum(n for _, n in counts)
def pick(p):
    rank, seen = -(-p * total // 100), 0
    for us, n in counts:
        seen += n
        if seen >= rank:
            return us
print(f"{pick(50)} {pick(99)}")' "$out/$name.txt"
}

printf '%-6s %-22s %10s %10s\n' round instrument "p50 (µs)" "p99 (µs)"
for round in $(seq "$rounds"); do
    printf '%-6s %-22s %10s %10s\n' "$round" "taskmeter dma 0" $(taskmeter "held-$round" --cpu-dma-latency 0)
    printf '%-6s %-22s %10s %10s\n' "$round" "cyclictest (default)" $(cyclic "held-$round")
    printf '%-6s %-22s %10s %10s\n' "$round" "taskmeter (default)" $(taskmeter "free-$round")
    printf '%-6s %-22s %10s %10s\n' "$round" "cyclictest --laptop" $(cyclic "free-$round" --laptop)
done
