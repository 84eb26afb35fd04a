#!/usr/bin/env bash
# docs/runtimes.md, the comparison of every runtime on this machine (issue 55): six taskmeter
# runs with `--runtimes all` (whatever `taskmeter list` shows as available, so a new runtime
# appears by itself), then benchmarks/runtimes.py turns their records and consoles into the page:
#
#   sleep-1ms, sleep-50us  lateness p50 / p99 (run --sleep fixed:1ms | fixed:50us, absolute)
#   volume                 memory per unit, 1 to 10,000 units (run volume --units 1,10000)
#   atomic-sum             increments per second, 16 units on one shared counter, no sleep
#   granularity            METG(50 %) (run granularity, its defaults)
#   recipes                the recommended way to wait (run recipes --quick: 250 µs and 1 ms)
#
# Usage: benchmarks/runtimes.sh [--no-history]
#   --no-history   the runs are not recorded in taskmeter's history
#   QUICK=1        a smoke run: --quick everywhere, 2 repetitions, 1,000 units for memory (minutes)
#   RESULTS=DIR    keep the results folders in DIR (default: a temporary folder, removed); a run
#                  whose folder is already there is not run again, so a stopped run goes on
#   OUTPUT=FILE    where the page goes (default docs/runtimes.md; - prints it)
#   TASKMETER=path measures that binary; otherwise target/release/taskmeter, built first
# With about 30 runtimes on a 2-core machine the whole run takes about 20 minutes (QUICK=1: 5
# minutes for 17 runtimes; docs/runtimes.md says how the 20 were estimated).
set -euo pipefail
cd "$(dirname "$0")/.."
history=()
for arg in "$@"; do
    case $arg in
        --no-history) history=(--no-history) ;;
        *) echo "usage: benchmarks/runtimes.sh [--no-history]" >&2; exit 2 ;;
    esac
done
[[ -n ${TASKMETER:-} ]] || cargo build --release --quiet -p taskmeter
bin=$(mktemp -d)
if [[ -n ${RESULTS:-} ]]; then
    out=$RESULTS
    mkdir -p "$out"
    trap 'rm -rf "$bin"' EXIT
else
    out=$(mktemp -d)
    trap 'rm -rf "$bin" "$out"' EXIT
fi
# A copy, so that a rebuild cannot replace the binary mid-run.
cp "${TASKMETER:-target/release/taskmeter}" "$bin/taskmeter"
commit=$(git rev-parse --short HEAD)$([[ -z $(git status --porcelain --untracked-files=no) ]] || echo "-dirty")

if [[ -n ${QUICK:-} ]]; then
    sleep_flags=(--quick --repeat 2 --units 2)
    volume_units=1,1000
    atomic_flags=(--quick --repeat 2)
    granularity_flags=(--quick --repeat 2)
else
    sleep_flags=(--repeat 3)
    volume_units=1,10000
    atomic_flags=(--duration 1s --warmup 250ms --repeat 3)
    granularity_flags=()
fi

step() { # NAME RUN-ARGUMENTS...: one taskmeter run into $out/NAME, its console into NAME.txt
    local name=$1 start=$SECONDS
    shift
    if [[ -e $out/$name ]]; then
        echo "runtimes.sh: $name: kept from before" >&2
        return
    fi
    "$bin/taskmeter" run "$@" --runtimes all "${history[@]}" --color never -o "$out/$name" \
        >"$out/$name.txt" 2>"$out/$name.err" || echo "runtimes.sh: $name failed: $(tail -n 1 "$out/$name.err")" >&2
    echo "$name $((SECONDS - start))" >>"$out/seconds.txt"
    echo "runtimes.sh: $name: $((SECONDS - start)) s" >&2
}

"$bin/taskmeter" list --format json >"$out/list.json"
printf '{"commit": "%s", "taskmeter": "%s", "quick": %s}\n' "$commit" "${TASKMETER:-target/release/taskmeter}" \
    "$([[ -n ${QUICK:-} ]] && echo true || echo false)" >"$out/meta.json"
step sleep-1ms --sleep fixed:1ms "${sleep_flags[@]}"
step sleep-50us --sleep fixed:50us "${sleep_flags[@]}"
step volume volume --units "$volume_units" --quick
step atomic-sum atomic-sum --sleep none --busy 0 --units 16 "${atomic_flags[@]}"
step granularity granularity "${granularity_flags[@]}"
step recipes recipes --quick
python3 benchmarks/runtimes.py "$out" --output "${OUTPUT:-docs/runtimes.md}"
