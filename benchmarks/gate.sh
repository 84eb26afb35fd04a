#!/usr/bin/env bash
# How often `compare` fails a gate (issue 45): on identical runs (A/A), and how often it finds a
# real change (A/B). Collect invocations of `taskmeter run` first, spread in time (A/A pairs
# back to back and far apart), then judge them in pairs with each number of invocations a side.
#
#   benchmarks/gate.sh collect DIR N [RUN FLAGS...]   N rounds of 4 A runs, one with
#                                                     --timer-slack 1, 4 A runs, one with
#                                                     --busy 1300; PAUSE seconds (default 5)
#                                                     between runs
#   benchmarks/gate.sh judge DIR [K...]               pairs of K invocations a side (default 1 3 5 8)
#
# Every run is `taskmeter run --quick --repeat REPEAT --no-history RUN FLAGS` (REPEAT default 1:
# for a fixed number of worker processes, more invocations of one repetition give the test more
# degrees of freedom and a smaller variance than fewer invocations of several, as the
# repetitions of one invocation share its noise). TASKMETER=path measures that binary.
set -euo pipefail
cd "$(dirname "$0")/.."
taskmeter=${TASKMETER:-target/release/taskmeter}
[[ -n ${TASKMETER:-} ]] || cargo build --release --quiet -p taskmeter
what=${1:?collect or judge}
dir=${2:?the folder of the runs}
shift 2
case $what in
collect)
    rounds=${1:?how many rounds}
    shift
    mkdir -p "$dir"/a "$dir"/slack "$dir"/busy
    for ((round = 0; round < rounds; round++)); do
        for kind in a a a a slack a a a a busy; do
            extra=()
            [[ $kind == slack ]] && extra=(--timer-slack 1)
            [[ $kind == busy ]] && extra=(--busy 1300)
            out="$dir/$kind/$(date +%Y%m%dT%H%M%S)"
            "$taskmeter" run --quick --repeat "${REPEAT:-1}" --no-history "${extra[@]}" "$@" -o "$out" >/dev/null 2>"$out.err" || true
            echo "$kind $out"
            sleep "${PAUSE:-5}"
        done
    done
    ;;
judge)
    python3 - "$taskmeter" "$dir" "${@:-1 3 5 8}" <<'PY'
import json, math, os, statistics, subprocess, sys, tempfile
taskmeter, root = sys.argv[1], sys.argv[2]
ks = [int(k) for k in " ".join(sys.argv[3:]).split()]

def invocations(kind):
    base = os.path.join(root, kind)
    if not os.path.isdir(base):
        return []
    found = []
    for name in sorted(os.listdir(base)):
        path = os.path.join(base, name)
        if os.path.isfile(os.path.join(path, "run.json")):
            record = json.load(open(os.path.join(path, "run.json")))
            if record.get("complete"):
                found.append((record["started_at"], path))
    return [p for _, p in sorted(found)]

def compare(old, new, *flags):
    """compare of two sets of invocations (folders of symlinks), as JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        sides = []
        for name, paths in (("old", old), ("new", new)):
            side = os.path.join(tmp, name)
            os.makedirs(side)
            for i, p in enumerate(paths):
                os.symlink(os.path.abspath(p), os.path.join(side, f"{i:03}"))
            sides.append(side if len(paths) > 1 else os.path.join(side, "000"))
        out = subprocess.run([taskmeter, "compare", *sides, "--format", "json", *flags], capture_output=True, text=True)
        if out.returncode == 2:
            raise SystemExit(f"compare refused: {out.stderr.strip()}")
        return out.returncode, json.loads(out.stdout)

a = invocations("a")
print(f"{len(a)} A invocations, {len(invocations('slack'))} with --timer-slack 1, {len(invocations('busy'))} with --busy 1300 (in {root})")
for k in ks:
    # A/A: disjoint sets of k invocations, neighbours in time (back to back) and the first half
    # against the second (apart).
    groups = [a[i:i + k] for i in range(0, len(a) - k + 1, k)]
    near = [(groups[i], groups[i + 1]) for i in range(0, len(groups) - 1, 2)]
    half = len(groups) // 2
    far = [(groups[i], groups[i + half]) for i in range(half)] if half else []
    # Interleaved, as a CI job runs the old and the new build in turn: 2k invocations in a row,
    # every other one a side, so a slow drift of the machine falls on both alike.
    windows = [a[i:i + 2 * k] for i in range(0, len(a) - 2 * k + 1, 2 * k)]
    interleaved = [(w[0::2], w[1::2]) for w in windows]
    def started(path):
        from datetime import datetime
        return datetime.fromisoformat(json.load(open(os.path.join(path, "run.json")))["started_at"].replace("Z", "+00:00"))
    gaps = sorted((started(new[0]) - started(old[0])).total_seconds() / 60 for old, new in far)
    apart = f"apart (median {gaps[len(gaps) // 2]:.0f} min)" if gaps else "apart"
    for label, pairs in (("interleaved", interleaved), ("back to back", near), (apart, far)):
        failed = changed = lines = verdicts = 0
        worst = []
        for old, new in pairs:
            code, c = compare(old, new)
            failed += code == 1
            lines += len(c["lines"])
            v = [l for l in c["lines"] if l["verdict"] in ("regressed", "improved")]
            verdicts += len(v)
            changed += bool(v)
            worst += [f'{l["subject"]["runtime"]} {l["verdict"]} {100 * (l["change"] or 0):+.0f} % p {l["p_value"]:.2g} adj. {l["p_adjusted"]:.2g}' for l in v]
        if pairs:
            print(f"A/A, {k} invocation(s) a side, {label}: {failed} of {len(pairs)} pairs failed the gate, {changed} had a verdict, {verdicts} verdicts on {lines} lines"
                  + (f" ({'; '.join(worst)})" if worst else ""))
        if pairs and k == 1:
            # One invocation a side gives no verdict; what a gate on the repetitions would have
            # done (Holm over their p-values, the threshold), the reason it gives none.
            would = 0
            for old, new in pairs:
                _, c = compare(old, new)
                tested = [l for l in c["lines"] if l["p_value"] is not None]
                ps = sorted(l["p_value"] for l in tested)
                adjusted, running = {}, 0.0
                for rank, p in enumerate(ps):
                    running = max(running, min(1.0, (len(ps) - rank) * p))
                    adjusted.setdefault(p, running)
                would += any(adjusted[l["p_value"]] < 0.05 and abs(l["change"] or 0) > 0.05 and
                             (l["change"] > 0) for l in tested)
            print(f"  (tested on their repetitions instead, {would} of {len(pairs)} identical pairs {label} would have failed)")
    # A/B: each changed set of k against the k A invocations nearest in time before it. Which
    # lines the change moves is read from all the runs: a line moved when its mean over every
    # changed invocation is more than 20 % from its mean over every A invocation, unmoved when
    # within 5 % (between: counted apart).
    for kind, metric in (("slack", "lateness"), ("busy", "busy")):
        changed_runs = invocations(kind)
        sets = [changed_runs[i:i + k] for i in range(0, len(changed_runs) - k + 1, k)]
        if not sets:
            continue
        everything = lambda runs: [json.load(open(os.path.join(p, "run.json"))) for p in runs]
        # Per runtime, the logs of every invocation's value: moved when the change between all
        # A and all changed invocations is beyond 20 % and clear (|t| > 4 between the pools),
        # unmoved when within 5 %.
        def logs(records):
            values = {}
            for r in records:
                for row in r["rows"]:
                    s = row.get("statistics")
                    if s and row["status"] == "ok" and (s[metric]["p50"] or 0) > 0:
                        values.setdefault(row["runtime"], []).append(math.log(s[metric]["p50"]))
            return values
        before, after = logs(everything(a)), logs(everything(changed_runs))
        def clear(rt):
            x, y = before[rt], after[rt]
            if len(x) < 2 or len(y) < 2:
                return False
            se = math.sqrt(statistics.variance(x) / len(x) + statistics.variance(y) / len(y))
            return se > 0 and abs(statistics.mean(y) - statistics.mean(x)) / se > 4
        ratio = {rt: math.exp(statistics.mean(after[rt]) - statistics.mean(before[rt])) for rt in before if rt in after}
        moved = {rt for rt, r in ratio.items() if abs(r - 1) > 0.20 and clear(rt)}
        unmoved = {rt for rt, r in ratio.items() if abs(r - 1) < 0.05}
        found = total = still = quiet = 0
        for new in sets:
            old = [p for p in a if os.path.basename(p) < os.path.basename(new[0])][-k:]
            if len(old) < k:
                continue
            _, c = compare(old, new, "--force", "--metric", metric)
            for l in c["lines"]:
                rt = l["subject"]["runtime"]
                if rt in moved:
                    total += 1
                    found += l["verdict"] in ("regressed", "improved")
                elif rt in unmoved:
                    quiet += 1
                    still += l["verdict"] == "no_change"
        if total:
            print(f"A/B --{'timer-slack 1' if kind == 'slack' else 'busy 1300'} ({metric}), {k} invocation(s) a side, {len(sets)} set(s): "
                  f"{found} of {total} moved lines found ({100 * found / total:.0f} %; moved: {', '.join(sorted(moved))}); "
                  f"unmoved lines said no change: {still} of {quiet}")
PY
    ;;
*) echo "usage: benchmarks/gate.sh collect DIR N [RUN FLAGS] | judge DIR [K...]" >&2; exit 2 ;;
esac
