"""docs/runtimes.md: every runtime of this machine in one table (issue 55).

Reads the results folder of benchmarks/runtimes.sh (list.json, meta.json, seconds.txt and the
records sleep-1ms/, sleep-50us/, volume/, atomic-sum/ and recipes/run.json,
granularity/granularity.json) and writes the page: one row per runtime `taskmeter list` knows,
with its lateness at each period, atomic-sum throughput, memory per unit, METG and the
recommended way to wait; a runtime that was unavailable, skipped or failed says why in a note.

Every figure is the one taskmeter's console prints for the same record. Memory per unit and the
way to wait are read from that console (RESULTS/volume.txt, RESULTS/recipes.txt, as runtimes.sh
saves them), since taskmeter's rules for them (analysis/rows.rs, analysis/recipes.rs,
report/recipes.rs) are not in run.json and a copy of them here could drift; the records check
that each console is of them (the same runtimes, unit counts and ways to wait), and a
disagreement stops the script with one line per runtime and column, no page written. A console
that is missing (a results folder older than it) is said in a note. The other figures are
computed from the records the same way as the console: lateness p50 / p99 the mean over
repetitions of each repetition's percentile (analysis/cells.rs); increments per second the mean
over repetitions with its 95 % range (taskmeter-stats' mean_range); METG as granularity.json
holds it. Numbers are written as taskmeter writes them (report/format.rs).

Usage: python3 benchmarks/runtimes.py RESULTS [--output FILE] [--table pairs]
  --output FILE  where the page goes (default docs/runtimes.md; - prints it)
  --table pairs  print only the table for BENCHMARKS.md: each new runtime beside the runtime of
                 its language that taskmeter had
Standard library only.
"""

import importlib.util
import json
import math
import os
import re
import sys
import tomllib

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("taskmeter_coverage", os.path.join(_here, "coverage.py"))
_coverage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_coverage)

# Each new runtime (by the start of its id, first match) beside the runtime of its language that
# taskmeter had before issue 55, for BENCHMARKS.md.
PAIRS = [
    ("monoio", "tokio-mt"),
    ("glommio", "tokio-mt"),
    ("compio", "tokio-mt"),
    ("python-trio", "python-asyncio"),
    ("python-gevent", "python-asyncio"),
    ("bun-worker", "node-worker"),
    ("deno-worker", "node-worker"),
    ("bun", "node"),
    ("deno", "node"),
    ("kotlin", "java-virtual"),
    ("cpp-asio", "c-thread"),
]

# A run that slept through more of its periods than this did not keep time (analysis/recipes.rs).
MAX_MISSED = 0.05

EXPERIMENTS = {
    "sleep-1ms": "the sleep run at 1 ms",
    "sleep-50us": "the sleep run at 50 µs",
    "volume": "the volume run",
    "atomic-sum": "the atomic-sum run",
    "granularity": "the granularity run",
    "recipes": "the recipes run",
}


# Numbers as taskmeter writes them (taskmeter-stats' format::ns, report/format.rs).

def format_ns(ns):
    a = abs(ns)
    value, unit = (ns / 1e9, "s") if a >= 1e9 else (ns / 1e6, "ms") if a >= 1e6 else (ns / 1e3, "µs") if a >= 1e3 else (ns, "ns")
    if value != 0 and abs(value) < 1:
        decimals = 2
    elif unit == "ns" or abs(value) >= 100:
        decimals = 0
    elif abs(value) >= 10:
        decimals = 1
    else:
        decimals = 2
    return f"{value:.{decimals}f} {unit}"


def format_rate(per_s):
    if per_s >= 1e6:
        return f"{per_s / 1e6:.2f} M/s"
    if per_s >= 1e4:
        return f"{per_s / 1e3:.1f} k/s"
    return f"{per_s:.1f}/s"


def format_count(n):
    return f"{n:,}"


def format_interval(interval, write):
    """taskmeter's format_range: `v ± h`, `v (low–high)` on a log scale, `v` without a range."""
    value, half = interval["value"], interval["half_width"]
    if interval.get("degrees_of_freedom") is None:
        return write(value)
    if interval.get("log_scale"):
        return f"{write(value)} ({write(value * math.exp(-half))}–{write(value * math.exp(half))})"
    return f"{write(value)} ± {write(half)}"


def mean(values):
    return sum(values) / len(values)


class Notes:
    """Numbered notes under the table: why a cell has no figure."""

    def __init__(self):
        self.texts = []

    def add(self, text):
        if text not in self.texts:
            self.texts.append(text)
        return self.texts.index(text) + 1

    def cell(self, word, text):
        return f"{word} ({self.add(text)})"

    def ref(self, text):
        return f"({self.add(text)})"


# The records.

def load(results):
    """Everything the page is made of, from a results folder of benchmarks/runtimes.sh."""
    def json_of(*path):
        full = os.path.join(results, *path)
        if not os.path.isfile(full):
            return None
        with open(full) as f:
            return json.load(f)

    def why_missing(name):
        err = os.path.join(results, f"{name}.err")
        lines = open(err).read().strip().splitlines() if os.path.isfile(err) else []
        return lines[-1] if lines else "it was not run"

    found = {"list": json_of("list.json") or {"runtimes": []}, "meta": json_of("meta.json") or {}, "records": {}, "missing": {}}
    for name in EXPERIMENTS:
        record = json_of(name, "granularity.json" if name == "granularity" else "run.json")
        if record is None:
            found["missing"][name] = why_missing(name)
        found["records"][name] = record
    found["console"] = {}
    for name, read in (("volume", console_memory), ("recipes", console_recipes)):
        console = os.path.join(results, f"{name}.txt")
        found["console"][name] = read(open(console).read()) if os.path.isfile(console) else None
    seconds = os.path.join(results, "seconds.txt")
    found["seconds"] = {}
    if os.path.isfile(seconds):
        for line in open(seconds):
            name, value = line.split()
            found["seconds"][name] = int(value)
    return found


def languages(drivers):
    """{runtime id: language} from every drivers/*/driver.toml; the runtimes of none are Rust's."""
    found = {}
    for folder in sorted(os.listdir(drivers)) if os.path.isdir(drivers) else []:
        path = os.path.join(drivers, folder, "driver.toml")
        if os.path.isfile(path):
            with open(path, "rb") as f:
                toml = tomllib.load(f)
            for runtime in toml.get("runtime", []):
                found[runtime["id"]] = toml.get("language", folder)
    return found


def rows_of(record, runtime, point=None):
    return sorted((r for r in record["rows"] if r["runtime"] == runtime and (point is None or r["point"] == point)),
                  key=lambda r: (r["point"], r.get("repetition") or 0))


def unmeasured(rows, runtime, what, notes):
    """The cell of a runtime none of whose rows has statistics: skipped or failed, with why."""
    if not rows:
        return "-"
    row = rows[0]
    word = {"skipped": "skipped", "interrupted": "interrupted"}.get(row["status"], "failed")
    return notes.cell(word, f"`{runtime}`, {what}: {word}: {row.get('reason') or 'no reason given'}")


def missing(found, name, notes):
    return notes.cell("not run", f"{EXPERIMENTS[name]}: {found['missing'][name]}")


def partial_note(rows):
    return " (partial)" if any(r["status"] == "partial" for r in rows) else ""


# The cells.

def lateness_cell(found, name, runtime, notes):
    """p50 / p99: the mean over repetitions of each one's percentile, as the console's tables."""
    record = found["records"][name]
    if record is None:
        return missing(found, name, notes)
    rows = rows_of(record, runtime, point=0)
    measured = [r for r in rows if r.get("statistics")]
    if not measured:
        return unmeasured(rows, runtime, EXPERIMENTS[name][4:], notes)
    def mean_of(percentile):
        values = [r["statistics"]["lateness"].get(percentile) for r in measured]
        return "-" if None in values else format_ns(mean(values))

    cell = f"{mean_of('p50')} / {mean_of('p99')}{partial_note(measured)}"
    # A period slept through is no late wake-up: say when more than 5 % were (as recipes does).
    missed = sum(r["counts"]["missed_periods"] for r in measured)
    samples = sum(r["statistics"]["lateness"]["count"] for r in measured)
    if missed > MAX_MISSED * (samples + missed):
        cell += f", {100 * missed / (samples + missed):.0f} % of periods missed"
    return cell


def atomic_cell(found, runtime, notes):
    """Increments per second: the mean over repetitions, ± its 95 % range (the volume table's)."""
    record = found["records"]["atomic-sum"]
    if record is None:
        return missing(found, "atomic-sum", notes)
    rows = rows_of(record, runtime, point=0)
    measured = [r for r in rows if r.get("statistics") and r.get("counts")]
    if not measured:
        return unmeasured(rows, runtime, "atomic-sum", notes)
    rates = [r["counts"]["iterations_per_s"] for r in measured]
    cell = format_rate(mean(rates))
    interval = _coverage.mean_range(rates)
    if interval is not None:
        cell += f" ± {format_rate((interval[1] - interval[0]) / 2)}"
    starved = sum(r["counts"].get("units_starved", 0) for r in measured)
    if starved:
        cell += f" ({format_count(starved)} units starved)"
    return cell + partial_note(measured)


def measured_volume(record, runtime):
    """The rows taskmeter fits memory per unit over (analysis/rows.rs): measured, with a peak RSS."""
    return [r for r in rows_of(record, runtime) if r["status"] in ("ok", "partial")
            and (r.get("worker") or {}).get("peak_rss_kb") is not None and r.get("counts")]


def span(units):
    """`2 points, 1..10,000 units`, as the console says what a slope is fitted over; `one unit
    count` where there is no slope to fit."""
    if len(set(units)) < 2:
        return "one unit count"
    return f"{len(units)} points, {format_count(min(units))}..{format_count(max(units))} units"


def memory_cell(found, runtime, notes):
    """taskmeter's own figure (volume.txt), with the units a partial run started."""
    record = found["records"]["volume"]
    if record is None:
        return missing(found, "volume", notes)
    rows = measured_volume(record, runtime)
    if not rows:
        return unmeasured(rows_of(record, runtime), runtime, "volume", notes)
    if span([r["counts"]["units"] for r in rows]) == "one unit count":
        return "needs two unit counts"
    console = found["console"]["volume"]
    if console is None:
        return no_console(notes, "volume", "memory per unit")
    said = console["memory"].get(runtime)
    if said is None or said[0] is None:
        return notes.cell("not in the console", f"`{runtime}`, memory per unit: volume.txt has no figure for it")
    cell = said[0]
    short = [r["counts"] for r in rows if r["counts"]["units"] < r["counts"]["units_planned"]]
    if short:
        cell += f" (partial: {format_count(short[-1]['units'])} of {format_count(short[-1]['units_planned'])} units)"
    return cell


def metg_cell(found, runtime, notes):
    """METG(50 %) as granularity.json holds it, with the cores its efficiency is of."""
    record = found["records"]["granularity"]
    if record is None:
        return missing(found, "granularity", notes)
    for skipped in record.get("skipped", []):
        if skipped["runtime"] == runtime:
            return notes.cell("skipped", f"`{runtime}`, granularity: skipped: {skipped['reason']}")
    errors = [r["error"] for r in record.get("runs", []) if r["runtime"] == runtime and r.get("error")]
    summary = next((s for s in record.get("summaries", []) if s["runtime"] == runtime), None)
    if summary is None or summary["repetitions"] == 0:
        if errors:
            return notes.cell("failed", f"`{runtime}`, granularity: failed: {errors[0]}")
        return "-"
    if summary.get("metg_ns"):
        cell = format_interval(summary["metg_ns"], format_ns)
    elif summary.get("metg_bound"):
        bound = summary["metg_bound"]
        cell = {"below": "< ", "above": "> "}.get(bound["kind"], "") + format_ns(bound["ns"])
    else:
        cell = "varies (see the repetitions)"
    cores = summary.get("cores")
    if cores:
        cell += f", {cores} core{'' if cores == 1 else 's'}"
    if errors:
        cell += " " + notes.ref(f"`{runtime}`, granularity: {len(errors)} repetition(s) failed: {errors[0]}")
    return cell


# The way to wait: taskmeter's advice as recipes.txt prints it (report/recipes.rs).

def base(way):
    """The runtime a way to wait belongs to: `thread/spin`, `thread+fifo` -> `thread`."""
    return re.split(r"[/+]", way, maxsplit=1)[0]


def measured_ways(record, runtime, point):
    """The runtime's ways to wait with statistics at a point (analysis/recipes.rs' groups_at)."""
    return [way for way in record["settings"]["runtimes"]
            if base(way) == runtime and any(r.get("statistics") for r in rows_of(record, way, point))]


def recipe_points(record):
    """[(index, label)] of the recipes run's points: `1 ms`, `250 µs`."""
    found = []
    for point in record["points"]:
        sleep = dict((name, value) for name, value in point["values"]).get("sleep")
        found.append((point["index"], format_ns(sleep) if sleep is not None else "-"))
    return found


def advice(found, runtime, point):
    """(most precise under the budget, cheapest near the best) for a runtime at a point, as
    recipes.txt says them; None where it says nothing of it."""
    record, console = found["records"]["recipes"], found["console"]["recipes"]
    indices = [p["index"] for p in record["points"]]
    if console is None or len(console["points"]) != len(indices):
        return None
    said = console["points"][indices.index(point)][1].get(runtime)
    return said[1] if said else None


def wait_cell(found, runtime, notes, point_label="1.00 ms"):
    record = found["records"]["recipes"]
    if record is None:
        return missing(found, "recipes", notes)
    points = dict((label, index) for index, label in recipe_points(record))
    point = points.get(point_label, recipe_points(record)[-1][0])
    if not measured_ways(record, runtime, point):
        return unmeasured(rows_of(record, runtime, point), runtime, "recipes", notes)
    if found["console"]["recipes"] is None:
        return no_console(notes, "recipes", "the way to wait")
    said = advice(found, runtime, point)
    if said is None:
        return notes.cell("not in the console", f"`{runtime}`, way to wait: recipes.txt has no advice for it")
    return said[0]


# What taskmeter's console printed (RESULTS/<step>.txt, beside the step's folder): memory per
# unit and the way to wait are read from it rather than computed again here, so that the page
# cannot drift from taskmeter's own rule; the records only check that the console is of them.

MEMORY_LINE = re.compile(r"  (\S+): (\S+ \S+) per unit \(slope of peak RSS less taskmeter's rings over (\d+) points, "
                         r"([\d,]+)\.\.([\d,]+) units\)")
NO_SLOPE = re.compile(r"  (\S+): needs two points with different unit counts$")
ADVICE = re.compile(r"  advice: most precise under (\d+) % of a core per unit \(.*?\): (.*); "
                    r"cheapest within .*? of the best \(.*?\): (.*)$")
NO_ADVICE = re.compile(r"  advice: (none: every way skipped more than .*)$")


def logical_lines(text):
    """The console's lines with the wrapped ones joined again. taskmeter wraps prose at the
    terminal's width (100 columns in a file) between words, drops the space at the break and
    indents what follows by two more spaces: a line indented by four or more continues the one
    before (the lines this script reads start with two: `  advice:`, `  thread: 10.5 KiB`)."""
    lines = []
    for line in text.splitlines():
        if line.startswith("    ") and lines:
            lines[-1] += " " + line.strip()
        else:
            lines.append(line.rstrip())
    return lines


def console_memory(text):
    """The `memory per unit:` block of volume.txt: {"memory": {runtime: (figure, span)}, "odd":
    the lines not understood}; figure and span (`10.5 KiB`, `2 points, 1..1,000 units`) as
    printed, (None, `one unit count`) where taskmeter fits no slope."""
    lines = logical_lines(text)
    block = lines[lines.index("memory per unit:") + 1:] if "memory per unit:" in lines else []
    memory, odd = {}, []
    for line in block:
        if not line.startswith("  "):
            break
        if m := MEMORY_LINE.match(line):
            memory[m[1]] = (m[2], f"{m[3]} points, {m[4]}..{m[5]} units")
        elif m := NO_SLOPE.match(line):
            memory[m[1]] = (None, "one unit count")
        else:
            odd.append(line.strip())
    return {"memory": memory, "odd": odd}


def console_recipes(text):
    """The tables of recipes.txt, point by point in its order: {"points": [(label, {runtime:
    (its ways, advice)})], "odd": the advice lines not understood}; advice as the page words it,
    (most precise under the budget, cheapest near the best), None where none was understood."""
    lines = logical_lines(text) + [""]
    points, odd = [], []
    for i, title in enumerate(lines[:-1]):
        table = lines[i + 1].startswith("way to wait ") and "samples" in lines[i + 1]
        if (i > 0 and lines[i - 1]) or not (table or title == "not measured" or title.startswith("not measured at ")):
            continue
        name, _, label = title.partition(" at ")
        if not points or points[-1][0] != label:
            points.append((label, {}))
        if not table:
            continue
        ways, said = [], None
        for line in lines[i + 2:lines.index("", i)]:
            if line.startswith("  advice:"):
                if m := ADVICE.match(line):
                    said = (m[2] if m[2] != "none" else f"none under {m[1]} % of a core", m[3])
                elif m := NO_ADVICE.match(line):
                    said = (m[1], "-")
                else:
                    odd.append(line.strip())
            elif not line.startswith(("left out to fit", " ")):
                ways.append(line.split()[0])
        if name == "its own sleep only":
            points[-1][1].update((way, ([way], ("its own sleep, the one way it has", "-"))) for way in ways)
        else:
            points[-1][1][name] = (ways, said)
    return {"points": points, "odd": odd}


def no_console(notes, name, what):
    return notes.cell("no console", f"{EXPERIMENTS[name]}: its console, `{name}.txt`, is not in the results "
                      f"folder (one older than it?), and {what} is read from it")


def disagreements(found):
    """One line per runtime and column where the console and the records disagree about what
    was measured (a console of another run), or per console line not understood."""
    wrong = []
    record, console = found["records"]["volume"], found["console"]["volume"]
    if record is not None and console is not None:
        wrong += [f"volume.txt: not understood: {line}" for line in console["odd"]]
        for runtime in dict.fromkeys(record["settings"]["runtimes"]) | dict.fromkeys(console["memory"]):
            rows = measured_volume(record, runtime)
            ours = span([r["counts"]["units"] for r in rows]) if rows else "nothing measured"
            theirs = console["memory"][runtime][1] if runtime in console["memory"] else "no line"
            if ours != theirs:
                wrong.append(f"`{runtime}`, memory per unit: run.json: {ours}; volume.txt: {theirs}")
    record, console = found["records"]["recipes"], found["console"]["recipes"]
    if record is not None and console is not None:
        wrong += [f"recipes.txt: not understood: {line}" for line in console["odd"]]
        if len(console["points"]) != len(record["points"]):
            return wrong + [f"way to wait: run.json has {len(record['points'])} points, recipes.txt "
                            f"{len(console['points'])} ({', '.join(label for label, _ in console['points'])})"]
        for (index, label), (_, said) in zip(recipe_points(record), console["points"]):
            for runtime in dict.fromkeys(map(base, record["settings"]["runtimes"])) | dict.fromkeys(said):
                ours = measured_ways(record, runtime, index)
                theirs, words = said.get(runtime, ([], None))
                if sorted(ours) != sorted(theirs):
                    only = lambda a, b: ", ".join(w for w in a if w not in b) or "none"
                    wrong.append(f"`{runtime}`, way to wait at {label}: ways measured in run.json only: "
                                 f"{only(ours, theirs)}; in recipes.txt only: {only(theirs, ours)}")
                elif theirs and words is None:
                    wrong.append(f"`{runtime}`, way to wait at {label}: recipes.txt has no advice for its ways")
    return wrong


# The page.

INTRO = """# Every runtime on one machine

The comparison to choose a runtime from: for every runtime `taskmeter list` knows, how late it
wakes at a 1 ms and at a 50 µs period, how many increments per second its units make on one
shared atomic counter, what a unit costs in memory, the smallest task it runs efficiently
(METG), and the way to wait that the recipes experiment recommends for it. A runtime that is not
available on the machine, or whose run was skipped or failed, has its row too, with a note that
says why.

One command makes the page, on an otherwise idle machine:

```sh
benchmarks/runtimes.sh --no-history
```

It makes six taskmeter runs with `--runtimes all`, so that every runtime available there is in
them, a new one included, and `benchmarks/runtimes.py` then writes this page from their records
(`run.json`, `granularity.json`): the commands, the machine, the date and the taskmeter commit,
then one row per runtime. Every figure is the one taskmeter's console printed for the same
record: memory per unit and the way to wait are read from the consoles the runs printed
(`volume.txt`, `recipes.txt`), the others computed from the records the same way
(`benchmarks/tests/test_runtimes.py` checks every cell of a hand-made set of records).
`QUICK=1` makes a smoke run (`--quick` everywhere: 5 minutes for 17 runtimes); `RESULTS=DIR`
keeps the results folders, and `python3 benchmarks/runtimes.py DIR` writes the page again from
them. For about 30 runtimes on 2 cores the whole run takes about 20
minutes: the two sleep runs 7, volume 3, atomic-sum 3, granularity 4 and recipes 4 (estimated
from the smoke run of the 17 runtimes of 2026-12-04, scaled by the runtimes and the windows).
How each experiment measures and how to read its own table: [experiments.md](experiments.md),
and for the ways to wait [recipes.md](recipes.md).
"""

LEGEND = """- **lateness** = wake-up - intended wake-up, absolute mode (deadlines one period apart, as
  cyclictest): p50 / p99, each the mean over the repetitions of that repetition's percentile, as
  the console's tables. *% of periods missed*: whole periods slept through, said when more than
  5 %: a runtime whose timer ticks in milliseconds cannot keep a 50 µs period.
- **atomic-sum**: increments per second of the units together, each iteration one sequentially
  consistent increment of one shared counter, with no sleep (`--sleep none --busy 0`): the cost
  of contention; ± the 95 % range for another invocation's mean, from the repetitions.
- **memory per unit**: the least-squares slope, over the units started, of the worker's peak RSS
  less taskmeter's rings of samples: what the runtime itself takes per unit.
- **METG(50 %)**: the task granularity at which efficiency falls to 50 % (Task Bench), the
  geometric mean of the repetitions' with its 95 % range on a log scale; the cores are those its
  efficiency is of (a one-threaded runtime's is of one core, so compare it with those on as many).
- **way to wait**: the recipes experiment's advice at 1 ms with one unit: of the runtime's own
  sleep and every recipe (`taskmeter list recipes`), the lowest lateness p99 among the ways that
  cost at most 10 % of a core per unit, with its p99 and CPU per unit.
- **-**: not in that experiment (granularity leaves out a runtime whose tasks would be another's:
  python-abs's are python-thread's).
"""


def command_text(record, results):
    """The command of a record as typed: `taskmeter` for the binary, RESULTS for the folder."""
    words = ["taskmeter"] + [w.replace(os.path.abspath(results), "RESULTS").replace(results.rstrip("/"), "RESULTS")
                             for w in record["command_line"][1:]]
    return " ".join(words)


def header(found, results):
    records = [found["records"][name] for name in EXPERIMENTS if found["records"][name] is not None]
    if not records:
        return "No run left a record: " + "; ".join(f"{EXPERIMENTS[n]}: {w}" for n, w in found["missing"].items()) + ".\n"
    first = records[0]
    env = first["environment"]
    meta = found["meta"]
    started = min(r["started_at"] for r in records)
    finished = max(r["finished_at"] for r in records)
    machine = ", ".join(x for x in [
        f"{env.get('cpu_model')}, {env.get('cores_online')} cores",
        env.get("kernel"),
        env.get("preemption") and f"{env['preemption']}, HZ {env.get('hz')}",
        env.get("virtualisation") and f"{env['virtualisation']} guest",
        env.get("clocksource") and f"clocksource {env['clocksource']}",
        env.get("timer_slack_ns") is not None and f"timer slack {format_ns(env['timer_slack_ns'])}",
    ] if x)
    load = env.get("load_average_before")
    lines = [
        f"Measured {started[:10]} from {started[11:16]} to {finished[11:16]} UTC on {machine}"
        + (f"; load average {load[0]:.2f} at the start" if load else "") + ".",
        f"taskmeter {first.get('taskmeter_version', '?')}, commit {meta.get('commit', 'unknown')}"
        + (f" (the binary {meta['taskmeter']})" if meta.get("taskmeter", "target/release/taskmeter") != "target/release/taskmeter" else "")
        + (f"; the runs took {sum(found['seconds'].values()) / 60:.0f} min" if found["seconds"] else "")
        + (". **A smoke run (`QUICK=1`): short windows, not figures to decide from.**" if meta.get("quick") else "."),
        "",
        "```sh",
    ]
    lines += [command_text(found["records"][name], results) for name in EXPERIMENTS if found["records"][name] is not None]
    lines += ["```", "", ""]
    return "\n".join(lines)


def runtime_info(found, drivers):
    """[(id, language, unit, version, unavailable reason)] of every runtime of list.json."""
    language = languages(drivers)
    infos = []
    for entry in found["list"]["runtimes"]:
        runtime = entry["id"]
        version = None
        for name in ("sleep-1ms", "sleep-50us", "volume"):
            record = found["records"][name]
            for row in rows_of(record, runtime) if record else []:
                version = version or (row.get("worker") or {}).get("runtime_version")
        version = version or entry.get("version") or "-"
        reason = None if entry.get("available") else (entry.get("reason") or "not available here")
        infos.append((runtime, language.get(runtime, "Rust"), entry.get("unit", "-"), version, reason))
    return infos


def columns(found):
    def sleep_of(name):
        """The run's period, `1 ms`, `50 µs` (its name's without a record)."""
        record = found["records"][name]
        if record is None:
            return name.split("-")[1]
        ns = record["settings"]["sleep"]["schedule"]["ns"]
        return f"{ns // 1_000_000} ms" if ns % 1_000_000 == 0 else f"{ns // 1000} µs" if ns % 1000 == 0 else format_ns(ns)

    atomic = found["records"]["atomic-sum"]
    volume = found["records"]["volume"]

    def units(record):
        """`16`, or the swept unit counts, `1–10,000`."""
        if record is None:
            return "?"
        swept = [dict(p["values"]).get("units") for p in record["points"]]
        if None in swept:
            return format_count(record["settings"]["units"])
        return "–".join(format_count(u) for u in swept)

    return [
        f"lateness p50 / p99 at {sleep_of('sleep-1ms')}",
        f"at {sleep_of('sleep-50us')}",
        f"atomic-sum, {units(atomic)} units",
        f"memory per unit ({units(volume)} units)",
        "METG(50 %)",
        "way to wait at 1 ms",
    ]


def cells(found, runtime, notes):
    return [
        lateness_cell(found, "sleep-1ms", runtime, notes),
        lateness_cell(found, "sleep-50us", runtime, notes),
        atomic_cell(found, runtime, notes),
        memory_cell(found, runtime, notes),
        metg_cell(found, runtime, notes),
        wait_cell(found, runtime, notes),
    ]


def markdown_table(head, rows):
    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"
    return "\n".join([line(head), "|" + "---|" * len(head)] + [line(r) for r in rows]) + "\n"


def main_table(found, drivers, notes):
    head = ["runtime", "language", "unit", "version"] + columns(found)
    rows = []
    for runtime, language, unit, version, reason in runtime_info(found, drivers):
        if reason is not None:
            figures = [notes.cell("not available here", f"`{runtime}`: {reason}")] + ["-"] * 5
        else:
            figures = cells(found, runtime, notes)
        rows.append([f"`{runtime}`", language, unit, version] + figures)
    return markdown_table(head, rows)


def ways_table(found):
    """Per runtime with recipes: the advice at every point of the recipes run."""
    record = found["records"]["recipes"]
    if record is None or found["console"]["recipes"] is None:
        return ""
    points = recipe_points(record)
    head = ["runtime"]
    for _, label in points:
        head += [f"{label}: most precise under 10 % of a core", f"{label}: cheapest within 20 µs of the best"]
    rows = []
    for entry in found["list"]["runtimes"]:
        said = [advice(found, entry["id"], index) for index, _ in points]
        if all(s is None or s[0].startswith("its own") for s in said):
            continue
        row = [f"`{entry['id']}`"]
        for s in said:
            row += list(s) if s is not None else ["-", "-"]
        rows.append(row)
    if not rows:
        return ""
    return ("\n## Ways to wait, at every point of the recipes run\n\nOne unit (`run recipes --quick`); each "
            "way with its lateness p99 and CPU per unit ([recipes.md](recipes.md) says how the advice is made). "
            "The runtimes with no way but their own sleep are left out.\n\n" + markdown_table(head, rows))


def pairs(found, drivers):
    """The table for BENCHMARKS.md: each new runtime beside the runtime of its language taskmeter had."""
    infos = {i[0]: i for i in runtime_info(found, drivers)}
    groups = {}
    for runtime in infos:
        beside = next((old for prefix, old in PAIRS if runtime.startswith(prefix)), None)
        if beside is not None:
            groups.setdefault(beside, []).append(runtime)
    notes = Notes()
    head = ["runtime", "language"] + columns(found)[:2] + [columns(found)[3], columns(found)[4]]
    rows = []
    for beside, new in groups.items():
        for runtime in [beside] + new:
            if runtime not in infos:
                continue
            reason = infos[runtime][4]
            if reason is not None:
                figures = [notes.cell("not available here", f"`{runtime}`: {reason}")] + ["-"] * 3
            else:
                all_cells = cells(found, runtime, notes)
                figures = all_cells[:2] + all_cells[3:5]
            name = f"`{runtime}`" if runtime == beside else f"`{runtime}` (new)"
            rows.append([name, infos[runtime][1]] + figures)
    records = [r for r in found["records"].values() if r is not None]
    when = min(r["started_at"] for r in records)[:10] if records else "?"
    machine = f"{records[0]['environment'].get('cpu_model')}, {records[0]['environment'].get('cores_online')} cores" if records else "?"
    text = (f"Each new runtime beside the runtime of its language that taskmeter had, on one machine ({machine}), "
            f"{when}, commit {found['meta'].get('commit', 'unknown')}; `benchmarks/runtimes.sh` "
            "(docs/runtimes.md has the commands and every other runtime).\n\n")
    if not rows:
        return text + "No runtime of the pairing list (benchmarks/runtimes.py, `PAIRS`) is known here yet.\n"
    return text + markdown_table(head, rows) + note_lines(notes)


def note_lines(notes):
    if not notes.texts:
        return ""
    return "\n" + "\n".join(f"{i + 1}. {text}" for i, text in enumerate(notes.texts)) + "\n"


def page(found, results, drivers):
    notes = Notes()
    table = main_table(found, drivers, notes)
    return (INTRO + "\n## The table\n\n" + header(found, results) + table + note_lines(notes) + "\n" + LEGEND
            + ways_table(found)
            + "\n## New runtimes beside the ones taskmeter had (for BENCHMARKS.md)\n\n" + pairs(found, drivers))


def main(argv):
    args, output, table = [], os.path.join(_here, "..", "docs", "runtimes.md"), None
    rest = iter(argv)
    for arg in rest:
        if arg == "--output":
            output = next(rest, None)
        elif arg == "--table":
            table = next(rest, None)
        else:
            args.append(arg)
    if len(args) != 1 or output is None or table not in (None, "pairs"):
        raise SystemExit("usage: runtimes.py RESULTS [--output FILE] [--table pairs]")
    if not os.path.isdir(args[0]):
        raise SystemExit(f"runtimes.py: {args[0]}: no such results folder")
    found = load(args[0])
    wrong = disagreements(found)
    if wrong:
        raise SystemExit("runtimes.py: taskmeter's console and the records disagree; no page written:\n"
                         + "\n".join(wrong))
    drivers = os.path.join(_here, "..", "drivers")
    text = pairs(found, drivers) if table == "pairs" else page(found, args[0], drivers)
    if output == "-" or table == "pairs":
        sys.stdout.write(text)
    else:
        with open(output, "w") as f:
            f.write(text)
        print(f"runtimes.py: wrote {output}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
