"""Each dashboard export read by its consumer's own parser or schema (docs/outputs.md).

A quick run of the work loop and of granularity (2 repetitions, for ranges) and a comparison of
two runs write every dashboard export; then github-action-benchmark's custom format is checked
against its BenchmarkResult (github-benchmark.schema.json, from its src/extract.ts, and its range
parser), Bencher's BMF against Bencher's JSON Schema (bmf.schema.json), and the OpenMetrics file
with the Prometheus client's OpenMetrics parser and its parser of Prometheus's text format.
Nothing is timed: the figures are whatever the machine gave.
"""
import json
import math
import pathlib
import re
import subprocess

import jsonschema
import pytest
from prometheus_client import parser as prometheus_parser
from prometheus_client.openmetrics import parser as openmetrics_parser

HERE = pathlib.Path(__file__).resolve().parent
FORMATS = {
    "smaller": ("--export-github-benchmark-smaller", "smaller.json"),
    "bigger": ("--export-github-benchmark-bigger", "bigger.json"),
    "bmf": ("--export-bmf", "bmf.json"),
    "openmetrics": ("--export-openmetrics", "metrics.txt"),
}


def exporting(folder):
    """Every dashboard export's flag, each to its file in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    return [word for flag, file in FORMATS.values() for word in (flag, folder / file)]


@pytest.fixture(scope="module")
def exports(tmp_path_factory, taskmeter):
    """The export folders: sleep (a run of the work loop), granularity, compare (of two sleep runs)."""
    base = tmp_path_factory.mktemp("exports")
    run = [taskmeter, "run", "--runtimes", "thread", "--quick", "--repeat", "2"]
    quiet = {"check": True, "stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL}
    subprocess.run([*run, "-o", base / "sleep-1", *exporting(base / "sleep")], **quiet)
    subprocess.run([*run, "-o", base / "sleep-2"], **quiet)
    subprocess.run([*run[:2], "granularity", *run[2:], "-o", base / "grain", *exporting(base / "granularity")], **quiet)
    # compare's exit status is 1 when a line regressed: whatever the machine gave, not checked here.
    compare = [taskmeter, "compare", base / "sleep-1", base / "sleep-2", *exporting(base / "compare")]
    done = subprocess.run(compare, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    assert done.returncode in (0, 1)
    return {name: base / name for name in ("sleep", "granularity", "compare")}


def read(folder, fmt):
    return (folder / FORMATS[fmt][1]).read_text()


def schema(name):
    return json.loads((HERE / name).read_text())


# github-action-benchmark's src/extractRangeInfo.ts: a range it rescales with the value.
RANGE_INFO = re.compile(r"(?P<prefix>(\+-|±)\s*)(?P<value>\d.*)")


def test_github_action_benchmark_reads_each_direction(exports):
    check = jsonschema.Draft7Validator(schema("github-benchmark.schema.json"))
    seen = {}
    for kind, folder in exports.items():
        for direction in ("smaller", "bigger"):
            entries = json.loads(read(folder, direction))
            if kind in ("sleep", "compare") and direction == "bigger":
                # Lateness is lower-is-better: nothing for customBiggerIsBetter, said as [].
                assert entries == [], f"{kind}: {entries}"
                continue
            check.validate(entries)
            names = [e["name"] for e in entries]
            assert len(names) == len(set(names)), f"{kind} {direction}: one chart per name"
            for e in entries:
                assert math.isfinite(e["value"]), e
                assert e["name"].startswith(f"{kind} /") or e["name"].startswith("compare sleep /"), e
                assert "machine: " in e["extra"] and "taskmeter_version: " in e["extra"], e
                if e.get("range", "").startswith("±"):
                    info = RANGE_INFO.match(e["range"])
                    assert info and float(info["value"]) >= 0, e
            seen[(kind, direction)] = entries
    # Two repetitions: the table's figures have their range; granularity has both directions.
    p50 = next(e for e in seen[("sleep", "smaller")] if e["name"] == "sleep / thread / lateness p50")
    assert p50["unit"] == "ns" and "range" in p50, p50
    # METG where each repetition found one (a bound is left out); the overhead always.
    assert any("/ overhead per task at " in e["name"] for e in seen[("granularity", "smaller")])
    assert any("efficiency at" in e["name"] and e["unit"] == "%" for e in seen[("granularity", "bigger")])
    ratio = seen[("compare", "smaller")][0]
    assert ratio["unit"] == "ratio" and "verdict: " in ratio["extra"], ratio


def test_bencher_reads_bmf_against_its_schema(exports):
    check = jsonschema.Draft7Validator(schema("bmf.schema.json"))
    for kind, folder in exports.items():
        bmf = json.loads(read(folder, "bmf"))
        check.validate(bmf)
        assert bmf, kind
        for benchmark, measures in bmf.items():
            assert 0 < len(benchmark) <= 1024, benchmark
            for slug, metric in measures.items():
                # Bencher's slugs: at most 64 characters, lower case, digits and dashes.
                assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", slug) and len(slug) <= 64, slug
                if "lower_value" in metric:
                    assert metric["lower_value"] <= metric["value"] <= metric["upper_value"], (benchmark, slug, metric)
    sleep = json.loads(read(exports["sleep"], "bmf"))
    assert set(sleep["sleep / thread"]) >= {"lateness-mean", "lateness-p50", "lateness-p99"}
    smaller = json.loads(read(exports["sleep"], "smaller"))
    p50 = next(e for e in smaller if e["name"] == "sleep / thread / lateness p50")
    assert sleep["sleep / thread"]["lateness-p50"]["value"] == p50["value"], "one figure, every format"


def test_the_openmetrics_parser_reads_every_family(exports):
    for kind, folder in exports.items():
        text = read(folder, "openmetrics")
        assert text.endswith("# EOF\n"), kind
        families = list(openmetrics_parser.text_string_to_metric_families(text))
        assert families, kind
        for family in families:
            assert family.name.startswith("taskmeter_"), family.name
            assert family.type in ("gauge", "histogram"), family
            if family.unit:
                assert family.name.endswith("_" + family.unit), family.name
            for sample in family.samples:
                assert sample.labels.get("machine") and sample.labels.get("taskmeter_version"), sample
    sleep = {f.name: f for f in openmetrics_parser.text_string_to_metric_families(read(exports["sleep"], "openmetrics"))}
    assert sleep["taskmeter_lateness_p50_seconds"].unit == "seconds"
    histogram = sleep["taskmeter_lateness_seconds"]
    assert histogram.type == "histogram"
    by_row = {}
    for s in histogram.samples:
        key = s.labels["repetition"]
        by_row.setdefault(key, []).append(s)
    assert sorted(by_row) == ["1", "2"], "one histogram per row (each repetition)"
    for samples in by_row.values():
        buckets = [s for s in samples if s.name.endswith("_bucket")]
        bounds = [float(s.labels["le"]) for s in buckets]
        counts = [s.value for s in buckets]
        assert bounds == sorted(bounds) and bounds[-1] == math.inf, bounds
        assert counts == sorted(counts) and counts[-1] > 0, "cumulative"
        count = [s.value for s in samples if s.name.endswith("_count")]
        assert not count or count[0] == counts[-1], "the +Inf bucket is the count"
    compare = [f.name for f in openmetrics_parser.text_string_to_metric_families(read(exports["compare"], "openmetrics"))]
    assert "taskmeter_compare_new_old_ratio" in compare and "taskmeter_compare_new_old_verdict" in compare


def test_the_prometheus_text_parser_reads_the_same_file(exports):
    for kind, folder in exports.items():
        families = list(prometheus_parser.text_string_to_metric_families(read(folder, "openmetrics")))
        types = {f.type for f in families}
        assert types <= {"gauge", "histogram"} and "gauge" in types, (kind, types)
        assert all(f.name.startswith("taskmeter_") for f in families), kind
    sleep = {f.name: f for f in prometheus_parser.text_string_to_metric_families(read(exports["sleep"], "openmetrics"))}
    assert sleep["taskmeter_lateness_seconds"].type == "histogram"
    assert any(s.labels.get("le") == "+Inf" for s in sleep["taskmeter_lateness_seconds"].samples)
