"""benchmarks/runtimes.py on a hand-made results folder whose every cell is worked out by hand.

The records have the fields of real ones (a QUICK=1 run of benchmarks/runtimes.sh, trimmed to
what the page reads and a little more): run.json's rows with their plan, worker, counts,
statistics and counters; granularity.json's runs, summaries and skipped; `taskmeter list
--format json`'s runtimes. The consoles volume.txt and recipes.txt are what taskmeter prints for
those records (their layout and wrapping at 100 columns as in a real run's), the figures worked
out by hand from them.
"""

import importlib.util
import json
import math
import os

import pytest

_path = os.path.join(os.path.dirname(__file__), "..", "runtimes.py")
_spec = importlib.util.spec_from_file_location("taskmeter_runtimes", _path)
runtimes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(runtimes)
DRIVERS = os.path.join(os.path.dirname(__file__), "..", "..", "drivers")

ENVIRONMENT = {
    "hostname": "vm", "kernel": "Linux 6.18.44 #1 SMP PREEMPT_DYNAMIC x86_64", "cpu_model": "AMD EPYC",
    "cores_online": 2, "clocksource": "tsc", "timer_slack_ns": 50000, "preemption": "PREEMPT_DYNAMIC (preempt=none)",
    "hz": 250, "virtualisation": "kvm", "load_average_before": [0.52, 0.8, 1.0],
}


def row(runtime, repetition=1, point=0, p50=None, p99=None, count=100, missed=0, units=5, planned=None, ring=2000,
        rss_kb=13_000, rate=1000.0, cpu_ns=None, starved=0, status="ok", reason=None):
    """One row of run.json, as taskmeter writes it (without its histograms)."""
    measured = status in ("ok", "partial")
    summary = {"count": count, "mean": p50, "std": 0.0, "min": p50, "p50": p50, "p90": p99, "p99": p99,
               "p99_9": p99, "p99_99": p99, "max": p99, "mean_absolute_deviation": p50}
    return {
        "runtime": runtime, "point": point, "repetition": repetition, "sequence": 0, "status": status,
        "reason": reason, "basis": "exact",
        "plan": {"protocol": 4, "runtime": runtime, "units": units, "ring": ring, "wait": "sleep"},
        "worker": {"runtime_version": f"{runtime} 1.0", "toolchain": "", "peak_rss_kb": rss_kb,
                   "sched": {"policy": "SCHED_OTHER", "cpus": "0-1"}} if measured else None,
        "counts": {"units": units, "units_planned": planned or units, "iterations_per_s": rate, "units_starved": starved,
                   "samples_measured": count, "missed_periods": missed, "early_wakeups": 0} if measured else None,
        "statistics": {m: summary for m in ("lateness", "actual", "full", "busy")} if measured else None,
        "counters": {"start_ns": 0, "end_ns": 1_000_000_000, "threads_exited": 0, "cpu_ns": cpu_ns, "user_ns": 0,
                     "system_ns": 0} if cpu_ns is not None else None,
    }


def run(experiment, rows, runtimes_, points=None, units=5, sleep_ns=1_000_000, command=()):
    return {
        "schema": "taskmeter.run", "schema_version": 6, "taskmeter_version": "0.1.0", "complete": True,
        "command_line": ["/tmp/bin/taskmeter", "run", *command, "--runtimes", "all", "-o", f"/r/{experiment}"],
        "started_at": "2026-12-04T17:10:00Z", "finished_at": "2026-12-04T17:12:00Z", "environment": ENVIRONMENT,
        "experiment": experiment, "metric": "lateness",
        "settings": {"runtimes": runtimes_, "units": units, "repeat": 2,
                     "sleep": {"mode": "absolute", "schedule": {"kind": "fixed", "ns": sleep_ns}}},
        "sweeps": [], "points": points or [{"index": 0, "values": []}], "rows": rows,
    }


LIST = {"runtimes": [
    {"id": "thread", "unit": "os-thread", "available": True, "reason": None, "version": "std"},
    {"id": "tokio-mt", "unit": "task", "available": True, "reason": None, "version": "tokio 1.54.1"},
    {"id": "monoio", "unit": "task", "available": True, "reason": None, "version": "monoio 0.2"},
    {"id": "c-thread", "unit": "os-thread", "available": True, "reason": None, "version": "glibc 2.36"},
    {"id": "node", "unit": "task", "available": False, "reason": "no node found (apt install nodejs)", "version": None},
]}
AVAILABLE = ["thread", "tokio-mt", "monoio", "c-thread"]


# The volume run's console (report/console.rs, tables.rs' memory_lines). Memory: thread's peak
# RSS less the rings: 1 unit: 13,000 KiB - 1 x 2000 x 48 B = 13,216,000 B; 10,000 units:
# 200,000 KiB - 10,000 x 100 x 48 B = 156,800,000 B; slope 143,584,000 / 9,999 = 14,359.8 B =
# 14.0 KiB. tokio-mt reached 4,000 of 10,000 units: (40,000 KiB - 4,000 x 100 x 48 B - (10,000
# KiB - 96,000 B)) / 3,999 = 2,904.7 B = 2.8 KiB; monoio (120,000 KiB - 48,000,000 B - (5,000 KiB
# - 96,000 B)) / 9,999 = 6,986.3 B = 6.8 KiB; c-thread has one point.
VOLUME_TXT = """\
volume | units swept: 1, 10000 | modulo:20:1ms relative | busy 1000 | 300 ms measured after 100 ms
  warm-up
env: Linux 6.18.44 #1 SMP PREEMPT_DYNAMIC x86_64 | AMD EPYC | 2 cores | clocksource tsc

runtime                       units    delay  iterations    peak RSS
thread                            1   107 µs      83.3/s    12.7 MiB
thread                       10,000   710 µs     833 k/s   195.3 MiB
tokio-mt                          1  1.15 ms      80.0/s     9.8 MiB
tokio-mt (partial 4000/10000)  4,000/10,000  1.38 ms     320 k/s    39.1 MiB
monoio                            1   213 µs      83.3/s     4.9 MiB
monoio                       10,000   106 µs     833 k/s   117.2 MiB
c-thread                          1   114 µs      83.3/s    12.7 MiB
c-thread                     10,000  skipped: no room for 10,000 threads

memory per unit:
  thread: 14.0 KiB per unit (slope of peak RSS less taskmeter's rings over 2 points, 1..10,000
    units); the rings 4.6 KiB per unit
  tokio-mt: 2.8 KiB per unit (slope of peak RSS less taskmeter's rings over 2 points, 1..4,000
    units); the rings 4.6 KiB per unit
  monoio: 6.8 KiB per unit (slope of peak RSS less taskmeter's rings over 2 points, 1..10,000
    units); the rings 4.6 KiB per unit
  c-thread: needs two points with different unit counts

delay = mean |actual - expected| (the v2 study's); iterations = measured iterations per second, all
  units; memory per unit = least-squares slope over units started of peak RSS less the rings
results: /r/volume (report: /r/volume/report.html)
"""

# The recipes run's console (report/recipes.rs). At 1 ms, one unit, 1 s windows: thread's own
# sleep p99 80 µs at 1 % of a core; thread/timerfd 30 µs at 2 %; thread/spin 2 µs at 100 % (over
# budget); thread+fifo 10 µs at 3 % but it skipped 10 of 100 + 10 periods (never advised): the
# most precise under budget timerfd, the cheapest near the best (spin) spin. tokio-mt: both
# ways skipped more than 5 %. c-thread: its own sleep alone. At 250 µs thread has its own sleep
# alone.
RECIPES_TXT = """\
recipes | 1 unit | fixed:1ms (sleep swept: 250us, 1ms) absolute | no busy work | 1 s measured after
  250 ms warm-up
env: Linux 6.18.44 #1 SMP PREEMPT_DYNAMIC x86_64 | AMD EPYC | 2 cores | clocksource tsc

its own sleep only at sleep=250us
way to wait  samples  lateness p50      p99    p99.9      max  early  missed  CPU/unit  cores
thread           100       70.0 µs  90.0 µs  90.0 µs  90.0 µs      0       0     1.0 %   0.01

thread at sleep=1ms
way to wait     samples  lateness p50      p99    p99.9      max  early  missed  CPU/unit  cores
thread              100       70.0 µs  80.0 µs  80.0 µs  80.0 µs      0       0     1.0 %   0.01
thread/timerfd      100       20.0 µs  30.0 µs  30.0 µs  30.0 µs      0       0     2.0 %   0.02
thread/spin         100         50 ns  2.00 µs  2.00 µs  2.00 µs      0       0   100.0 %   1.00
thread+fifo         100       5.00 µs  10.0 µs  10.0 µs  10.0 µs      0      10     3.0 %   0.03
  advice: most precise under 10 % of a core per unit (and 90 % of the worker's 2 CPUs): timerfd
    (p99 30.0 µs, 2.0 % of a core); cheapest within 20.0 µs of the best (spin): spin (p99 2.00 µs,
    100.0 % of a core)

tokio-mt at sleep=1ms
way to wait       samples  lateness p50      p99    p99.9      max  early  missed  CPU/unit
tokio-mt              100       1.00 ms  1.90 ms  1.90 ms  1.90 ms      0      50     1.0 %
tokio-mt/timerfd      100       20.0 µs  40.0 µs  40.0 µs  40.0 µs      0      50     2.0 %
left out to fit 100 columns: cores (all take 104)
  advice: none: every way skipped more than 5 % of its periods

its own sleep only at sleep=1ms
way to wait  samples  lateness p50      p99    p99.9      max  early  missed  CPU/unit  cores
c-thread         100       70.0 µs  90.0 µs  90.0 µs  90.0 µs      0       0     1.0 %   0.01

way to wait = RUNTIME (its own sleep) or RUNTIME/RECIPE (taskmeter list recipes); every way waits
  until the same absolute deadline in the same loop; lateness = wake-up - deadline
cpu: taskmeter 2.16 s, its workers 34.2 s: taskmeter used 6.31 % of its workers' CPU
results: /r/recipes (report: /r/recipes/report.html)
"""


def write(folder, name, record):
    os.makedirs(folder / name, exist_ok=True)
    (folder / name / ("granularity.json" if name == "granularity" else "run.json")).write_text(json.dumps(record))


@pytest.fixture
def results(tmp_path):
    (tmp_path / "list.json").write_text(json.dumps(LIST))
    (tmp_path / "meta.json").write_text(json.dumps({"commit": "abc1234", "taskmeter": "target/release/taskmeter",
                                                     "quick": False}))
    (tmp_path / "seconds.txt").write_text("sleep-1ms 400\nsleep-50us 400\n")
    # 1 ms: thread p50 80 and 90 µs, p99 1.0 and 1.1 ms; c-thread missed 10 of 100 + 10 periods
    # in each repetition (9 %); tokio-mt 2 and 4 ms p99; monoio one repetition.
    write(tmp_path, "sleep-1ms", run("sleep", [
        row("thread", 1, p50=80_000, p99=1_000_000), row("thread", 2, p50=90_000, p99=1_100_000),
        row("c-thread", 1, p50=70_000, p99=120_000, missed=10), row("c-thread", 2, p50=72_000, p99=130_000, missed=10),
        row("tokio-mt", 1, p50=1_000_000, p99=2_000_000), row("tokio-mt", 2, p50=1_100_000, p99=4_000_000),
        row("monoio", 1, p50=30_000, p99=60_000),
    ], AVAILABLE, command=("--sleep", "fixed:1ms", "--repeat", "3")))
    # 50 µs: c-thread failed; monoio partial.
    write(tmp_path, "sleep-50us", run("sleep", [
        row("thread", 1, p50=60_000, p99=150_000), row("thread", 2, p50=62_000, p99=170_000),
        row("c-thread", 1, status="failed", reason="the worker exited with status 2: Segmentation fault"),
        row("tokio-mt", 1, p50=1_000_000, p99=1_900_000, count=50, missed=950),
        row("monoio", 1, p50=20_000, p99=40_000, status="partial", reason="1 of 5 units started"),
    ], AVAILABLE, sleep_ns=50_000, command=("--sleep", "fixed:50us")))
    # Memory: VOLUME_TXT says it.
    (tmp_path / "volume.txt").write_text(VOLUME_TXT)
    volume_points = [{"index": 0, "values": [["units", 1]]}, {"index": 1, "values": [["units", 10000]]}]
    write(tmp_path, "volume", run("volume", [
        row("thread", point=0, units=1, rss_kb=13_000), row("thread", point=1, units=10000, ring=100, rss_kb=200_000),
        row("tokio-mt", point=0, units=1, rss_kb=10_000),
        row("tokio-mt", point=1, units=4000, planned=10000, ring=100, rss_kb=40_000, status="partial"),
        row("c-thread", point=0, units=1), row("c-thread", point=1, status="skipped", reason="no room for 10,000 threads"),
        row("monoio", point=0, units=1, rss_kb=5_000), row("monoio", point=1, units=10000, ring=100, rss_kb=120_000),
    ], AVAILABLE, points=volume_points, units=[1, 10000], command=("volume", "--units", "1,10000", "--quick")))
    # Atomic sum: thread 1.0 and 1.2 M/s: 1.10 M/s ± t(0.975, 1) x 141,421 x sqrt(2/2) = 1.80 M/s.
    write(tmp_path, "atomic-sum", run("atomic-sum", [
        row("thread", 1, p50=0, p99=0, rate=1_000_000.0), row("thread", 2, p50=0, p99=0, rate=1_200_000.0),
        row("c-thread", 1, p50=0, p99=0, rate=50_000.0, starved=3),
        row("tokio-mt", 1, p50=0, p99=0, rate=2_000_000.0), row("monoio", 1, p50=0, p99=0, rate=3_000_000.0),
    ], AVAILABLE, units=16, command=("atomic-sum", "--sleep", "none", "--busy", "0", "--units", "16")))
    # METG: thread 2 µs with a range of a factor 2 (half width ln 2 on a log scale); c-thread
    # above every size; tokio-mt one repetition, no range, 1 core; monoio skipped.
    interval = lambda v, h, dof=2.0: {"value": v, "half_width": h, "standard_error": 0.0, "degrees_of_freedom": dof,
                                      "log_scale": True}
    write(tmp_path, "granularity", {
        "schema": "taskmeter.granularity", "schema_version": 2, "taskmeter_version": "0.1.0", "complete": True,
        "command_line": ["/tmp/bin/taskmeter", "run", "granularity", "--runtimes", "all"],
        "started_at": "2026-12-04T17:20:00Z", "finished_at": "2026-12-04T17:23:00Z", "environment": ENVIRONMENT,
        "settings": {"runtimes": ["thread", "tokio-mt", "c-thread"], "repeat": 3},
        "runs": [{"runtime": "c-thread", "repetition": 3, "error": "the worker was killed (SIGKILL)", "points": []}],
        "summaries": [
            {"runtime": "thread", "repetitions": 3, "cores": 2, "metg_ns": interval(2000.0, math.log(2)), "metg_bound": None},
            {"runtime": "tokio-mt", "repetitions": 1, "cores": 1, "metg_ns": interval(418.0, 0.0, None), "metg_bound": None},
            {"runtime": "c-thread", "repetitions": 2, "cores": 2, "metg_ns": None,
             "metg_bound": {"kind": "above", "ns": 4_110_000.0}},
        ],
        "skipped": [{"runtime": "monoio", "reason": "its tasks would be tokio-mt's"}],
    })
    # Recipes: RECIPES_TXT says them.
    (tmp_path / "recipes.txt").write_text(RECIPES_TXT)
    recipe_points = [{"index": 0, "values": [["sleep", 250_000]]}, {"index": 1, "values": [["sleep", 1_000_000]]}]
    ways = ["thread", "thread/timerfd", "thread/spin", "thread+fifo", "c-thread", "tokio-mt", "tokio-mt/timerfd"]
    write(tmp_path, "recipes", run("recipes", [
        row("thread", point=0, p50=70_000, p99=90_000, units=1, cpu_ns=10_000_000),
        row("thread", point=1, p50=70_000, p99=80_000, units=1, cpu_ns=10_000_000),
        row("thread/timerfd", point=1, p50=20_000, p99=30_000, units=1, cpu_ns=20_000_000),
        row("thread/spin", point=1, p50=50, p99=2_000, units=1, cpu_ns=1_000_000_000),
        row("thread+fifo", point=1, p50=5_000, p99=10_000, units=1, missed=10, cpu_ns=30_000_000),
        row("c-thread", point=1, p50=70_000, p99=90_000, units=1, cpu_ns=10_000_000),
        row("tokio-mt", point=1, p50=1_000_000, p99=1_900_000, units=1, missed=50, cpu_ns=10_000_000),
        row("tokio-mt/timerfd", point=1, p50=20_000, p99=40_000, units=1, missed=50, cpu_ns=20_000_000),
    ], ways, points=recipe_points, units=1, command=("recipes", "--quick")))
    return tmp_path


def table_rows(text):
    """(header, {runtime: cells}) of the first Markdown table in text."""
    lines = []
    for line in text.splitlines():
        if line.startswith("| "):
            lines.append(line)
        elif lines and not line.startswith("|"):
            break
    cells = [[c.strip() for c in line.strip("|").split(" | ")] for line in lines]
    return cells[0], {c[0]: c[1:] for c in cells[1:]}


def notes_of(text):
    return [line for line in text.splitlines() if line[:1].isdigit() and ". " in line]


def test_numbers_are_written_as_taskmeter_writes_them():
    # report/format.rs and taskmeter-stats' format.rs, their tests' values.
    for ns, text in [(0.0, "0 ns"), (999.0, "999 ns"), (1_234.0, "1.23 µs"), (61_234.0, "61.2 µs"),
                     (1_078_000.0, "1.08 ms"), (250_000_000.0, "250 ms"), (15e9, "15.0 s"), (-2_500.0, "-2.50 µs"),
                     (0.314, "0.31 ns")]:
        assert runtimes.format_ns(ns) == text
    assert [runtimes.format_rate(r) for r in (12.34, 12_345.0, 1_234_567.0)] == ["12.3/s", "12.3 k/s", "1.23 M/s"]


def test_every_cell_of_the_table(results):
    text = runtimes.page(runtimes.load(str(results)), str(results), DRIVERS)
    head, rows = table_rows(text)
    assert head == ["runtime", "language", "unit", "version", "lateness p50 / p99 at 1 ms", "at 50 µs",
                    "atomic-sum, 16 units", "memory per unit (1–10,000 units)", "METG(50 %)", "way to wait at 1 ms"]
    notes = notes_of(text.split("\n- **lateness**")[0])  # the main table's, not the pairs'
    assert rows["`thread`"] == [
        "Rust", "os-thread", "thread 1.0",
        "85.0 µs / 1.05 ms", "61.0 µs / 160 µs", "1.10 M/s ± 1.80 M/s", "14.0 KiB",
        "2.00 µs (1.00 µs–4.00 µs), 2 cores", "timerfd (p99 30.0 µs, 2.0 % of a core)",
    ]
    assert rows["`tokio-mt`"] == [
        "Rust", "task", "tokio-mt 1.0",
        "1.05 ms / 3.00 ms", "1.00 ms / 1.90 ms, 95 % of periods missed", "2.00 M/s", "2.8 KiB (partial: 4,000 of 10,000 units)",
        "418 ns, 1 core", "none: every way skipped more than 5 % of its periods",
    ]
    assert rows["`monoio`"] == [
        "Rust", "task", "monoio 1.0",
        "30.0 µs / 60.0 µs", "20.0 µs / 40.0 µs (partial)", "3.00 M/s", "6.8 KiB",
        "skipped (1)", "-",
    ]
    assert rows["`c-thread`"] == [
        "C", "os-thread", "c-thread 1.0",
        "71.0 µs / 125 µs, 9 % of periods missed", "failed (2)", "50.0 k/s (3 units starved)", "needs two unit counts",
        "> 4.11 ms, 2 cores (3)", "its own sleep, the one way it has",
    ]
    assert rows["`node`"] == ["Node.js", "task", "-", "not available here (4)", "-", "-", "-", "-", "-"]
    assert notes == [
        "1. `monoio`, granularity: skipped: its tasks would be tokio-mt's",
        "2. `c-thread`, sleep run at 50 µs: failed: the worker exited with status 2: Segmentation fault",
        "3. `c-thread`, granularity: 1 repetition(s) failed: the worker was killed (SIGKILL)",
        "4. `node`: no node found (apt install nodejs)",
    ]
    # The header: machine, date, commit and the commands as typed.
    assert "Measured 2026-12-04 from 17:10 to 17:23 UTC on AMD EPYC, 2 cores" in text
    assert "commit abc1234; the runs took 13 min." in text
    assert "taskmeter run --sleep fixed:1ms --repeat 3 --runtimes all -o /r/sleep\n" in text
    # The ways to wait at every point: thread only (c-thread has its own sleep alone).
    ways = text.split("## Ways to wait")[1]
    head, rows = table_rows(ways)
    assert head[1:] == ["250 µs: most precise under 10 % of a core", "250 µs: cheapest within 20 µs of the best",
                        "1.00 ms: most precise under 10 % of a core", "1.00 ms: cheapest within 20 µs of the best"]
    assert rows["`thread`"] == ["its own sleep, the one way it has", "-", "timerfd (p99 30.0 µs, 2.0 % of a core)",
                                "spin (p99 2.00 µs, 100.0 % of a core)"]
    assert "`c-thread`" not in rows


def test_new_runtimes_are_beside_the_one_of_their_language(results):
    text = runtimes.pairs(runtimes.load(str(results)), DRIVERS)
    head, rows = table_rows(text)
    assert head == ["runtime", "language", "lateness p50 / p99 at 1 ms", "at 50 µs", "memory per unit (1–10,000 units)",
                    "METG(50 %)"]
    assert list(rows) == ["`tokio-mt`", "`monoio` (new)"]
    assert rows["`monoio` (new)"] == ["Rust", "30.0 µs / 60.0 µs", "20.0 µs / 40.0 µs (partial)", "6.8 KiB", "skipped (1)"]
    assert notes_of(text) == ["1. `monoio`, granularity: skipped: its tasks would be tokio-mt's"]
    assert "(AMD EPYC, 2 cores), 2026-12-04, commit abc1234" in text


def test_a_run_that_left_no_record_says_why(results):
    import shutil
    shutil.rmtree(results / "recipes")
    (results / "recipes.err").write_text("taskmeter: progress\nerror: no runtime has a recipe here\n")
    text = runtimes.page(runtimes.load(str(results)), str(results), DRIVERS)
    _, rows = table_rows(text)
    assert rows["`thread`"][-1] == "not run (1)"
    assert notes_of(text)[0] == "1. the recipes run: error: no runtime has a recipe here"
    assert "## Ways to wait" not in text


def test_the_command_line(results, tmp_path, capsys):
    out = tmp_path / "page.md"
    runtimes.main([str(results), "--output", str(out)])
    assert out.read_text().startswith(runtimes.INTRO)
    runtimes.main([str(results), "--table", "pairs"])
    assert capsys.readouterr().out.startswith("Each new runtime beside")
    with pytest.raises(SystemExit, match="no such results folder"):
        runtimes.main([str(tmp_path / "nothing")])
    with pytest.raises(SystemExit, match="usage"):
        runtimes.main([str(results), "--table", "wide"])


def test_the_console_is_read_as_taskmeter_printed_it(results):
    found = runtimes.load(str(results))
    # The wrapped lines are joined again, the space at each break back.
    assert found["console"]["volume"] == {"memory": {
        "thread": ("14.0 KiB", "2 points, 1..10,000 units"), "tokio-mt": ("2.8 KiB", "2 points, 1..4,000 units"),
        "monoio": ("6.8 KiB", "2 points, 1..10,000 units"), "c-thread": (None, "one unit count")}, "odd": []}
    spin = "spin (p99 2.00 µs, 100.0 % of a core)"
    assert found["console"]["recipes"] == {"points": [
        ("sleep=250us", {"thread": (["thread"], ("its own sleep, the one way it has", "-"))}),
        ("sleep=1ms", {
            "thread": (["thread", "thread/timerfd", "thread/spin", "thread+fifo"],
                       ("timerfd (p99 30.0 µs, 2.0 % of a core)", spin)),
            "tokio-mt": (["tokio-mt", "tokio-mt/timerfd"], ("none: every way skipped more than 5 % of its periods", "-")),
            "c-thread": (["c-thread"], ("its own sleep, the one way it has", "-")),
        }),
    ], "odd": []}
    # The consoles are of these records.
    assert runtimes.disagreements(found) == []


def test_a_console_of_other_records_stops_the_page(results, tmp_path):
    # A volume.txt of a run to 1,000 units, a recipes.txt without thread/spin's row.
    (results / "volume.txt").write_text(VOLUME_TXT.replace("1..10,000\n    units); the rings 4.6 KiB per unit\n  c-thread",
                                                           "1..1,000\n    units); the rings 4.6 KiB per unit\n  c-thread"))
    (results / "recipes.txt").write_text("".join(line for line in RECIPES_TXT.splitlines(keepends=True)
                                                 if not line.startswith("thread/spin ")))
    out = tmp_path / "page.md"
    with pytest.raises(SystemExit) as stopped:
        runtimes.main([str(results), "--output", str(out)])
    assert str(stopped.value).splitlines() == [
        "runtimes.py: taskmeter's console and the records disagree; no page written:",
        "`monoio`, memory per unit: run.json: 2 points, 1..10,000 units; volume.txt: 2 points, 1..1,000 units",
        "`thread`, way to wait at 1.00 ms: ways measured in run.json only: thread/spin; in recipes.txt only: none",
    ]
    assert not out.exists()


def test_a_console_line_not_understood_stops_the_page(results):
    (results / "recipes.txt").write_text(RECIPES_TXT.replace("  advice: most precise under", "  advice: best under"))
    (results / "volume.txt").write_text(VOLUME_TXT.replace("  c-thread: needs two points", "  c-thread: wants two points"))
    assert runtimes.disagreements(runtimes.load(str(results))) == [
        "volume.txt: not understood: c-thread: wants two points with different unit counts",
        "`c-thread`, memory per unit: run.json: one unit count; volume.txt: no line",
        "recipes.txt: not understood: advice: best under 10 % of a core per unit (and 90 % of the worker's 2 CPUs): "
        "timerfd (p99 30.0 µs, 2.0 % of a core); cheapest within 20.0 µs of the best (spin): " + "spin (p99 2.00 µs, "
        "100.0 % of a core)",
        "`thread`, way to wait at 1.00 ms: recipes.txt has no advice for its ways",
    ]


def test_a_missing_console_is_said_in_a_note(results, tmp_path):
    (results / "volume.txt").unlink()
    (results / "recipes.txt").unlink()
    out = tmp_path / "page.md"
    runtimes.main([str(results), "--output", str(out)])
    text = out.read_text()
    _, rows = table_rows(text)
    assert rows["`thread`"][6] == "no console (1)" and rows["`thread`"][8] == "no console (2)"
    assert rows["`c-thread`"][6] == "needs two unit counts"  # the records say so
    assert notes_of(text)[:2] == [
        "1. the volume run: its console, `volume.txt`, is not in the results folder (one older than it?), "
        "and memory per unit is read from it",
        "2. the recipes run: its console, `recipes.txt`, is not in the results folder (one older than it?), "
        "and the way to wait is read from it",
    ]
    assert "## Ways to wait" not in text
