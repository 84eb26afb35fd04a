#!/usr/bin/env bash
# How often the printed 95 % ranges cover another invocation (issue 54): N invocations of
# `taskmeter run --quick --repeat REPEAT`, then, leave one out, how often an invocation's range
# holds the other N - 1 invocations' value, per runtime and in all: the table's `95 % range` of
# the mean (against the mean of the others' means) and `vs best` (against the ratio of the
# others' means of the runtime and of this invocation's best). benchmarks/coverage.py recomputes
# each range from run.json as taskmeter-stats does; the ranges should cover 93 % or more.
#
#   benchmarks/coverage.sh DIR [RUN FLAGS...]
#
# N (default 20) invocations go to DIR/01 .. DIR/N; those already there are kept, so a stopped
# collection goes on where it stopped. REPEAT (default 3) repetitions each; RUNTIMES (default:
# run's own) a comma-separated list; PAUSE seconds (default 5) between invocations; RUN FLAGS go
# to every invocation. JUDGE_ONLY=1 judges DIR as it is. TASKMETER=path measures that binary.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?the folder of the invocations}
shift
n=${N:-20}
if [[ -z ${JUDGE_ONLY:-} ]]; then
    taskmeter=${TASKMETER:-target/release/taskmeter}
    [[ -n ${TASKMETER:-} ]] || cargo build --release --quiet -p taskmeter
    runtimes=()
    [[ -n ${RUNTIMES:-} ]] && runtimes=(--runtimes "$RUNTIMES")
    mkdir -p "$dir"
    for ((i = 1; i <= n; i++)); do
        out=$(printf '%s/%02d' "$dir" "$i")
        [[ -f $out/run.json ]] && continue
        "$taskmeter" run --quick --repeat "${REPEAT:-3}" --no-history "${runtimes[@]}" "$@" -o "$out" >/dev/null 2>"$out.err" || true
        echo "invocation $i of $n: $out"
        sleep "${PAUSE:-5}"
    done
fi
python3 benchmarks/coverage.py "$dir"
