"""docs/runtimes.md: every runtime of this machine in one table (issue 55).

Reads the results folder of benchmarks/runtimes.sh (list.json, meta.json, seconds.txt and the
records sleep-1ms/, sleep-50us/, volume/, atomic-sum/ and recipes/run.json,
granularity/granularity.json) and writes the page: one row per runtime `taskmeter list` knows,
with its lateness at each period, atomic-sum throughput, memory per unit, METG and the
recommended way to wait; a runtime that was unavailable, skipped or failed says why in a note.

Every figure is the one taskmeter's console prints for the same record, computed the same way:
lateness p50 / p99 the mean over repetitions of each repetition's percentile
(analysis/cells.rs); increments per second the mean over repetitions with its 95 % range
(taskmeter-stats' mean_range); memory per unit the least-squares slope of peak RSS less
taskmeter's rings over the units started (analysis/rows.rs); METG as granularity.json holds it;
the way to wait by the recipes experiment's advice (analysis/recipes.rs, report/recipes.rs).
Numbers are written as taskmeter writes them (report/format.rs).

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

# The recipes experiment's advice (report/recipes.rs, analysis/recipes.rs).
CPU_BUDGET = 0.10
MARGIN_NS = 20_000.0
SATURATED = 0.9
MAX_MISSED = 0.05
SAMPLE_BYTES = 48  # one sample in a unit's ring (taskmeter-protocol)

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


def format_bytes(b):
    if abs(b) >= 1024 * 1024:
        return f"{b / 1024 / 1024:.1f} MiB"
    if abs(b) >= 1024:
        return f"{b / 1024:.1f} KiB"
    return f"{b:.0f} B"


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


def memory(record, runtime):
    """(bytes per unit, the rows it is fitted over): the least-squares slope of peak RSS less
    taskmeter's rings against the units started (None without two unit counts)."""
    rows = [r for r in rows_of(record, runtime) if r["status"] in ("ok", "partial")
            and (r.get("worker") or {}).get("peak_rss_kb") is not None and r.get("counts")]
    points = []
    for r in rows:
        units = r["counts"]["units"]
        rings = units * r["plan"]["ring"] * SAMPLE_BYTES if r.get("plan") else 0
        points.append((units, r["worker"]["peak_rss_kb"] * 1024 - rings))
    if len(points) < 2:
        return None, rows
    mx, my = mean([p[0] for p in points]), mean([p[1] for p in points])
    sxx = sum((p[0] - mx) ** 2 for p in points)
    if sxx <= 0:
        return None, rows
    return sum((p[0] - mx) * (p[1] - my) for p in points) / sxx, rows


def memory_cell(found, runtime, notes):
    record = found["records"]["volume"]
    if record is None:
        return missing(found, "volume", notes)
    per_unit, rows = memory(record, runtime)
    if not rows:
        return unmeasured(rows_of(record, runtime), runtime, "volume", notes)
    if per_unit is None:
        return "needs two unit counts"
    cell = format_bytes(per_unit)
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


# The recipes experiment's advice.

def split(way):
    """`thread/spin` -> (`thread`, `spin`); `thread+fifo` -> (`thread`, `sleep+fifo`)."""
    at = min((i for i in (way.find("/"), way.find("+")) if i >= 0), default=-1)
    if at < 0:
        return way, "sleep"
    if way[at] == "+":
        return way[:at], "sleep" + way[at:]
    return way[:at], way[at + 1:]


def cpu_cores(row):
    counters = row.get("counters")
    if not counters or counters["end_ns"] <= counters["start_ns"]:
        return None
    cpu = counters["cpu_ns"] if counters.get("threads_exited", 0) == 0 else counters["user_ns"] + counters["system_ns"]
    return cpu / (counters["end_ns"] - counters["start_ns"])


def way_at(record, way, point):
    """One way to wait at a point over its repetitions (analysis/recipes.rs' RecipeRow)."""
    measured = [r for r in rows_of(record, way, point) if r.get("statistics")]
    if not measured:
        return None

    def mean_of(value):
        values = [value(r) for r in measured]
        return None if any(v is None for v in values) else mean(values)

    def per_unit(r):
        cores, units = cpu_cores(r), (r.get("counts") or {}).get("units", 0)
        return cores / units if cores is not None and units > 0 else None

    p99s = [r["statistics"]["lateness"].get("p99") for r in measured]
    return {
        "recipe": split(way)[1],
        "p99": None if None in p99s else mean(p99s),
        "samples": sum(r["statistics"]["lateness"]["count"] for r in measured),
        "missed": sum((r.get("counts") or {}).get("missed_periods", 0) for r in measured),
        "cpu_per_unit": mean_of(per_unit),
        "cpu_cores": mean_of(cpu_cores),
    }


def advise(ways, cpus):
    """(most precise within budget, cheapest near the best, best), indices into ways, or None."""
    def lowest(candidates):
        best = None
        for i, v in candidates:
            if best is None or v < best[1]:
                best = (i, v)
        return best

    def p99s():
        return [(i, w["p99"]) for i, w in enumerate(ways)
                if w["p99"] is not None and w["missed"] <= MAX_MISSED * (w["samples"] + w["missed"])]

    def affordable(w):
        return w["cpu_per_unit"] is not None and w["cpu_per_unit"] <= CPU_BUDGET \
            and w["cpu_cores"] is not None and w["cpu_cores"] < SATURATED * cpus

    best = lowest(p99s())
    precise = lowest([(i, p) for i, p in p99s() if affordable(ways[i])])
    cheapest = None
    if best is not None:
        cheapest = lowest([(i, ways[i]["cpu_per_unit"]) for i, p in p99s()
                           if p <= best[1] + MARGIN_NS and ways[i]["cpu_per_unit"] is not None])
    return tuple(None if x is None else x[0] for x in (precise, cheapest, best))


def describe(way):
    p99 = "n/a" if way["p99"] is None else format_ns(way["p99"])
    cpu = "n/a" if way["cpu_per_unit"] is None else f"{way['cpu_per_unit'] * 100:.1f} %"
    return f"{way['recipe']} (p99 {p99}, {cpu} of a core)"


def recipe_points(record):
    """[(index, label)] of the recipes run's points: `1 ms`, `250 µs`."""
    found = []
    for point in record["points"]:
        sleep = dict((name, value) for name, value in point["values"]).get("sleep")
        found.append((point["index"], format_ns(sleep) if sleep is not None else "-"))
    return found


def advice(record, runtime, point):
    """(most precise under the budget, cheapest near the best) for a runtime's ways at a point,
    as words; None when the runtime has no row there."""
    ways = [w for w in (way_at(record, way, point) for way in record["settings"]["runtimes"]
                        if split(way)[0] == runtime) if w is not None]
    if not ways:
        return None
    if len(ways) == 1:
        return "its own sleep, the one way it has", "-"
    precise, cheapest, best = advise(ways, max(record["environment"]["cores_online"], 1))
    if best is None:
        return f"none: every way skipped more than {MAX_MISSED * 100:.0f} % of its periods", "-"
    return (describe(ways[precise]) if precise is not None else f"none under {CPU_BUDGET * 100:.0f} % of a core",
            describe(ways[cheapest]) if cheapest is not None else "none has a CPU figure")


def wait_cell(found, runtime, notes, point_label="1.00 ms"):
    record = found["records"]["recipes"]
    if record is None:
        return missing(found, "recipes", notes)
    points = dict((label, index) for index, label in recipe_points(record))
    point = points.get(point_label, recipe_points(record)[-1][0])
    said = advice(record, runtime, point)
    if said is None:
        return unmeasured(rows_of(record, runtime, point), runtime, "recipes", notes)
    return said[0]


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
record, computed the same way (`benchmarks/tests/test_runtimes.py` checks every cell of a
hand-made set of records). `QUICK=1` makes a smoke run (`--quick` everywhere: 5 minutes for 17
runtimes); `RESULTS=DIR` keeps the results folders, and `python3 benchmarks/runtimes.py DIR`
writes the page again from them. For about 30 runtimes on 2 cores the whole run takes about 20
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
    if record is None:
        return ""
    points = recipe_points(record)
    head = ["runtime"]
    for _, label in points:
        head += [f"{label}: most precise under 10 % of a core", f"{label}: cheapest within 20 µs of the best"]
    rows = []
    for entry in found["list"]["runtimes"]:
        said = [advice(record, entry["id"], index) for index, _ in points]
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
