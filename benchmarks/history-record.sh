#!/usr/bin/env bash
# What recording a run in the history costs (issue 26: at most a few milliseconds): the time
# taskmeter's main thread spends between renaming the finished results folder into place and
# its first write to stdout (the report), which is where `history::record` runs, with the
# history off (the baseline), in an existing SQLite file, and in PostgreSQL over a Unix socket
# (a throw-away cluster, when initdb is there). Timestamps from strace (seccomp-filtered: only
# rename and write stop the process).
# Usage: benchmarks/history-record.sh [RUNS] [run flags...]   (defaults: 5, run --quick)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
shift || true
flags=("$@")
[[ ${#flags[@]} -gt 0 ]] || flags=(--quick)
taskmeter=${TASKMETER:-target/release/taskmeter}
[[ -n ${TASKMETER:-} ]] || cargo build --release --quiet -p taskmeter
command -v strace >/dev/null || { echo "needs strace" >&2; exit 1; }
out=$(mktemp -d)
chmod 755 "$out"
pg=""
cleanup() {
    [[ -z $pg ]] || runuser -u nobody -- pg_ctl -D "$out/pg" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$out"
}
trap cleanup EXIT
if command -v initdb >/dev/null && [[ $(id -u) == 0 ]]; then
    mkdir "$out/pg" && chown nobody "$out/pg" "$out"
    runuser -u nobody -- initdb -D "$out/pg" -U postgres --auth=trust --no-locale >/dev/null
    runuser -u nobody -- pg_ctl -D "$out/pg" -l "$out/pg.log" -w -o "-k $out -c listen_addresses=''" start >/dev/null
    pg="postgresql://postgres@/postgres?host=$out"
fi

# The milliseconds from the folder's rename to the first write to stdout, of one run.
measure() { # NAME HISTORY-FLAGS...
    local name=$1; shift
    for i in $(seq "$runs"); do
        strace -f --seccomp-bpf -ttt -e trace=rename,write -o "$out/$name-$i.trace" \
            "$taskmeter" run "${flags[@]}" -q -o "$out/$name-$i" "$@" >/dev/null 2>"$out/$name-$i.err" || true
        python3 - "$out/$name-$i.trace" "$out/$name-$i" <<'PY'
import sys, re
trace, folder = sys.argv[1], sys.argv[2]
lines = open(trace).read().splitlines()
# The main thread is the one that renames the folder into place (the trace's first line may be
# any thread's).
main, renamed = None, None
for line in lines:
    pid, stamp, call = line.split(None, 2)
    if main is None and call.startswith("rename(") and f'"{folder}"' in call:
        main, renamed = pid, float(stamp)
    elif pid == main and call.startswith("write(1,"):
        print(f"{(float(stamp) - renamed) * 1000:.2f}")
        break
PY
    done > "$out/$name.ms"
    if grep -q "not recorded" "$out"/"$name"-*.err 2>/dev/null; then
        echo "$name: a run was not recorded:" >&2; cat "$out"/"$name"-*.err >&2
    fi
    python3 - "$name" "$out/$name.ms" <<'PY'
import sys, statistics
name, values = sys.argv[1], [float(v) for v in open(sys.argv[2]).read().split()]
print(f"| {name} | {statistics.median(values):.2f} ms | {min(values):.2f}..{max(values):.2f} ms | {len(values)} |")
PY
}

echo "| history | rename to report, median | range | runs |"
echo "|---|---|---|---|"
measure off --no-history
"$taskmeter" history list --history "$out/h.sqlite" >/dev/null   # the schema exists already
measure sqlite --history "$out/h.sqlite"
[[ -z $pg ]] || { "$taskmeter" history list --history "$pg" >/dev/null; measure postgres --history "$pg"; }
rows=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['rows']))" "$out/off-1/run.json")
echo "(each run: $rows rows; $("$taskmeter" history list --history "$out/h.sqlite" --format json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))') runs in the SQLite history at the end)"
