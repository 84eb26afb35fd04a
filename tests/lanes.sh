#!/usr/bin/env bash
# The workspace's Rust tests, as `cargo test --workspace --no-fail-fast` runs them, but with the
# test binaries side by side in lanes (TASKMETER_TEST_LANES; by default 2 on an idle machine, 1 on
# a busy one), the longest first. Each
# binary runs as cargo runs it (in its package's folder, its tests two at a time), and its output
# is printed whole when it ends, with its time. Most of a binary's time is spent waiting on
# workers that sleep, so side by side they take less time (docs/benchmarks/structure.md, "The
# suite"). A binary that must have the machine to itself (limits, recipes) runs first, alone.
# Usage: tests/lanes.sh ['NAME COMMAND ARGS...']...: each argument a job to run from the
# repository's root in the lanes, before the test binaries (test.sh builds the wasm receivers so:
# beside the tests, whose workers mostly sleep, rather than before them).
# Exit status: 0 when every binary passed, 1 otherwise (each failure named at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
# Two lanes when the machine's cores are mostly idle (a second's /proc/stat), one when something
# else already keeps them busy: side by side on a loaded machine the tests would load it beyond
# the twice over their bounds allow, and there are no idle cores to gain from.
idle_share() {
    local a b
    read -r -a a < /proc/stat; sleep 1; read -r -a b < /proc/stat
    local total=0 i
    for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
    echo $(( (b[4] + b[5] - a[4] - a[5]) * 100 / (total > 0 ? total : 1) ))
}
if [ -n "${TASKMETER_TEST_LANES:-}" ]; then
    lanes=$TASKMETER_TEST_LANES
elif [ "$(idle_share)" -ge 50 ]; then
    lanes=2
else
    lanes=1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Every test binary: its name, its package's folder and its path, from cargo's own report.
cargo test --locked --workspace --no-run --message-format=json 2>/dev/null | python3 -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["profile"]["test"] and m.get("executable"):
        kind = m["target"]["kind"][0]
        name = m["target"]["name"] if kind == "test" else m["target"]["name"] + "-" + kind
        print(name, os.path.dirname(m["manifest_path"]), m["executable"])
' > "$work/all"
# Those that must run with nothing beside them: limits takes most of the machine's pids, and
# recipes measures how much of a core a spinning unit gets (its bound allows a machine loaded
# twice over, not the suite's own lanes on top of that).
alone=(limits recipes)
for name in "${alone[@]}"; do grep "^$name " "$work/all" || true; done > "$work/alone"
# The others side by side, the longest first (their times in docs/benchmarks/structure.md), then
# cargo's order, and hosts (every preset, so the wasm receivers) last: the wasm receivers' build, a
# job given to run first, takes one lane for about as long as all the others take the second;
# started before that build ends, hosts would hold its lane waiting on cargo's lock.
longest=(cli faults bench net)
last=(hosts)
for name in "${longest[@]}"; do grep "^$name " "$work/all" || true; done > "$work/order"
for name in "${last[@]}"; do grep "^$name " "$work/all" || true; done > "$work/last"
cat "$work/alone" "$work/order" "$work/last" > "$work/placed"
grep -v -F -x -f "$work/placed" "$work/all" >> "$work/order" || true
cat "$work/last" >> "$work/order"
# The jobs given, first: NAME DIR COMMAND ARGS...
for job in "$@"; do
    read -r name command <<< "$job"
    echo "$name $PWD $command"
done | cat - "$work/order" > "$work/lanes"

# one NAME DIR EXE [ARGS...]: runs one binary (or job), then prints its output whole (one lane
# at a time).
one() {
    local name=$1 dir=$2 exe=$3 log start=$SECONDS status=0
    shift 3
    log="$work/$name-$(basename "$exe").log"
    (cd "$dir" && "$exe" "$@") > "$log" 2>&1 || status=$?
    {
        flock 9
        printf '     Running %s (%s s)\n' "$name" "$((SECONDS - start))"
        cat "$log"
        if [ "$status" -ne 0 ]; then echo "$name" >> "$work/failed"; fi
    } 9> "$work/print.lock"
    return 0
}
export -f one
export work
xargs -P 1 -L 1 bash -c 'one "$@"' one < "$work/alone"
xargs -P "$lanes" -L 1 bash -c 'one "$@"' one < "$work/lanes"

# The doc tests (cargo test runs them after the binaries).
cargo test --locked --workspace --doc --quiet
if [ -s "$work/failed" ]; then
    echo "tests: $(wc -l < "$work/failed") binary(ies) failed: $(tr '\n' ' ' < "$work/failed")" >&2
    exit 1
fi
echo "tests: every binary passed ($(cat "$work/alone" "$work/order" | wc -l) binaries and $# job(s), $lanes lanes, $SECONDS s)"
