"""benchmarks/coverage.py on hand-made invocations whose coverage is computed by hand."""

import importlib.util
import json
import math
import os

import pytest

_path = os.path.join(os.path.dirname(__file__), "..", "coverage.py")
_spec = importlib.util.spec_from_file_location("taskmeter_coverage", _path)
coverage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(coverage)


def test_t_quantiles_match_the_tables():
    for df, t in [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (29, 2.0452)]:
        assert coverage.t_975(df) == pytest.approx(t, abs=1e-4)


def test_the_ranges_are_taskmeter_stats():
    # mean_range of 10 12 14: 12 ± 4.302653 x 2 x sqrt(2/3) = ± 7.026202 (its Rust test).
    low, high = coverage.mean_range([10.0, 12.0, 14.0])
    assert (low, high) == pytest.approx((4.973798, 19.026202), abs=1e-5)
    assert coverage.mean_range([5.0]) is None
    # ratio_range of a steady 10 us over 50, 100, 150 ns: 100, 17.2639 to 579.242.
    assert coverage.ratio_range([10_000.0] * 3, [50.0, 100.0, 150.0]) == pytest.approx((17.2639, 579.242), rel=1e-5)
    assert coverage.ratio_range([1.0, 2.0], [3.0]) is None


def row(runtime, repetition, mean, status="ok"):
    summary = {"mean": mean, "mean_absolute_deviation": abs(mean)}
    return {"runtime": runtime, "point": 0, "repetition": repetition, "status": status,
            "statistics": {"lateness": summary}}


def record(a, b, complete=True):
    rows = [row("a", i + 1, v) for i, v in enumerate(a)] + [row("b", i + 1, v) for i, v in enumerate(b)]
    return {"complete": complete, "metric": "lateness", "rows": rows}


# Three invocations, a the best in each:
#   a: [10 12 14] 12 (4.97-19.03) | [30 30 30] 30 (30-30) | [15 17 19] 17 (9.97-24.03)
#   b: [100 110 120] 110 (74.87-145.13) | [100 100 100] 100 (100-100) | [125 135 145] 135 (99.87-170.13)
# The mean, leave one out: a's others 23.5, 14.5, 21: 1 of 3 held; b's 117.5, 122.5, 105: 2 of 3.
# vs best, b / a: 9.17 (4.71-17.85) against (100 + 135) / (30 + 17) = 5.00, held; 3.33 (no width)
# against 122.5 / 14.5 = 8.45, not; 7.94 (4.87-12.94) against 105 / 21 = 5.00, held: 2 of 3.
INVOCATIONS = [
    ([10.0, 12.0, 14.0], [100.0, 110.0, 120.0]),
    ([30.0, 30.0, 30.0], [100.0, 100.0, 100.0]),
    ([15.0, 17.0, 19.0], [125.0, 135.0, 145.0]),
]


def test_leave_one_out_coverage_of_a_hand_made_set():
    counts = coverage.coverage([coverage.cells(record(a, b)) for a, b in INVOCATIONS])
    # The CI printed before (t x s / sqrt 3 = ± 4.97 and ± 24.84): a's (12.03-21.97) holds 21
    # alone; b's (85.2-134.8) holds 117.5 alone: 1 of 3 each.
    assert counts == {"a": [1, 3, 0, 0, 1, 3], "b": [2, 3, 2, 3, 1, 3]}
    # b's first vs best range, by hand: se of ln = sqrt((5.7735 / 110)^2 + (1.1547 / 12)^2).
    se = math.hypot(10 / math.sqrt(3) / 110, 2 / math.sqrt(3) / 12)
    half = 4.302653 * math.sqrt(2) * se
    expected = (110 / 12 * math.exp(-half), 110 / 12 * math.exp(half))
    assert coverage.ratio_range([100.0, 110.0, 120.0], [10.0, 12.0, 14.0]) == pytest.approx(expected, rel=1e-5)


def test_results_folders_are_read_and_reported(tmp_path):
    for i, (a, b) in enumerate(INVOCATIONS):
        folder = tmp_path / f"{i + 1:02}"
        folder.mkdir()
        (folder / "run.json").write_text(json.dumps(record(a, b)))
    interrupted = tmp_path / "04"
    interrupted.mkdir()
    (interrupted / "run.json").write_text(json.dumps(record([1.0, 1.0], [1.0, 1.0], complete=False)))
    runs = coverage.load(str(tmp_path))
    assert len(runs) == 3, "an interrupted run is left out"
    text = coverage.report(coverage.coverage(runs), len(runs))
    assert "b" in text and "2/3 (67 %)" in text
    assert text.splitlines()[-1].split() == ["all", "3/6", "(50", "%)", "2/3", "(67", "%)", "2/6", "(33", "%)"]


def test_a_repetition_without_statistics_is_not_a_repetition():
    # A failed repetition has no statistics: the cell is the other two (as analysis/cells.rs).
    r = record([10.0, 12.0], [100.0, 110.0])
    r["rows"].append({"runtime": "a", "point": 0, "repetition": 3, "status": "failed", "statistics": None})
    assert coverage.cells(r)[("a", 0)]["mean"] == [10.0, 12.0]
