"""How often the printed 95 % ranges cover another invocation (issue 54).

Reads the run.json of every results folder under a directory (one invocation of
`taskmeter run --repeat N` each), recomputes each printed range exactly as taskmeter does
(taskmeter-stats' `mean_range` and `ratio_range`, over the rows of `analysis/cells.rs`), and
counts, leave one out, how often an invocation's range holds the other invocations' value:

- the table's `95 % range` (of the metric's mean): does invocation i's range hold the mean of
  the other invocations' means of that runtime at that point?
- `vs best`: does invocation i's range of runtime r over i's best runtime b hold the ratio of
  the other invocations' means of r and b (their mean |metric - reference|, the ranking figure)?

Usage: python3 benchmarks/coverage.py DIR (benchmarks/coverage.sh collects DIR and runs this).
Standard library only.
"""

import json
import math
import os
import sys


def _continued_fraction(a, b, x):
    """The continued fraction of the regularized incomplete beta function (Lentz's method)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _incomplete_beta(a, b, x):
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _continued_fraction(a, b, x) / a
    return 1.0 - front * _continued_fraction(b, a, 1.0 - x) / b


def t_975(df):
    """The two-sided 95 % quantile of Student's t with df degrees of freedom (as statrs gives)."""
    def upper_tail(t):
        return 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    low, high = 0.0, 1000.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if upper_tail(middle) > 0.025:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def mean(values):
    return sum(values) / len(values)


def sample_std(values):
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def mean_range(values):
    """(low, high): taskmeter-stats' mean_range, mean ± t(0.975, n-1) · s · sqrt(1/n + 1/n);
    None with fewer than two values (no range is printed)."""
    n = len(values)
    if n < 2:
        return None
    half = t_975(n - 1) * sample_std(values) * math.sqrt(2.0 / n)
    return mean(values) - half, mean(values) + half


def mean_ci(values):
    """(low, high): the Student-t confidence interval of this invocation's mean, mean ± t(0.975,
    n-1) · s / sqrt(n), which taskmeter printed before issue 54 (for the before column)."""
    n = len(values)
    if n < 2:
        return None
    half = t_975(n - 1) * sample_std(values) / math.sqrt(n)
    return mean(values) - half, mean(values) + half


def ratio_range(a, b):
    """(low, high) of mean(a) / mean(b): taskmeter-stats' ratio_range, on a log scale from both
    means' relative errors, widened by sqrt 2, t with the smaller degrees of freedom; None
    without a range on either side or a mean at or below 0."""
    if len(a) < 2 or len(b) < 2 or mean(a) <= 0.0 or mean(b) <= 0.0:
        return None
    relative = lambda v: sample_std(v) / math.sqrt(len(v)) / mean(v)
    half = t_975(min(len(a), len(b)) - 1) * math.sqrt(2.0) * math.hypot(relative(a), relative(b))
    ratio = mean(a) / mean(b)
    return ratio * math.exp(-half), ratio * math.exp(half)


def cells(record):
    """{(runtime, point): {"mean": [...], "ranking": [...]}}: per repetition that has statistics
    (as analysis/cells.rs takes them), the metric's mean and its mean |value - reference|, the
    figure the table ranks by; a list is None when a repetition lacks its value."""
    metric = record["metric"]
    found = {}
    for row in record["rows"]:
        statistics = row.get("statistics")
        if statistics is None:
            continue
        cell = found.setdefault((row["runtime"], row["point"]), {"mean": [], "ranking": []})
        summary = statistics[metric]
        for key, value in (("mean", summary.get("mean")), ("ranking", summary.get("mean_absolute_deviation"))):
            if cell[key] is not None:
                cell[key] = None if value is None else cell[key] + [value]
    return found


def best(invocation, point):
    """The runtime a table of this point ranks first: the lowest mean ranking figure."""
    ranked = [(mean(c["ranking"]), runtime) for (runtime, p), c in invocation.items() if p == point and c["ranking"]]
    return min(ranked)[1] if ranked else None


def holds(interval, value):
    return interval is not None and interval[0] <= value <= interval[1]


def coverage(invocations):
    """Per runtime, (range hits, range tried, vs best hits, vs best tried, CI hits, CI tried),
    leave one out over `invocations` (each the `cells` of one run.json); the CI is the interval
    printed before, for comparison on the same invocations."""
    counts = {}
    for i, own in enumerate(invocations):
        others = invocations[:i] + invocations[i + 1:]
        for (runtime, point), cell in own.items():
            tally = counts.setdefault(runtime, [0, 0, 0, 0, 0, 0])
            other_means = [mean(o[(runtime, point)]["mean"]) for o in others if (o.get((runtime, point)) or {}).get("mean")]
            interval = mean_range(cell["mean"]) if cell["mean"] else None
            if interval is not None and other_means:
                tally[0] += holds(interval, mean(other_means))
                tally[1] += 1
                tally[4] += holds(mean_ci(cell["mean"]), mean(other_means))
                tally[5] += 1
            top = best(own, point)
            if top is None or top == runtime or not cell["ranking"]:
                continue
            pairs = [(mean(o[(runtime, point)]["ranking"]), mean(o[(top, point)]["ranking"])) for o in others
                     if (o.get((runtime, point)) or {}).get("ranking") and (o.get((top, point)) or {}).get("ranking")]
            interval = ratio_range(cell["ranking"], own[(top, point)]["ranking"])
            if interval is not None and pairs:
                tally[2] += holds(interval, mean([a for a, _ in pairs]) / mean([b for _, b in pairs]))
                tally[3] += 1
    return counts


def load(root):
    """The cells of every complete run.json under root, in folder order."""
    found = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name, "run.json")
        if os.path.isfile(path):
            with open(path) as f:
                record = json.load(f)
            if record.get("complete"):
                found.append(cells(record))
    return found


def report(counts, invocations):
    def share(hits, tried):
        return f"{hits}/{tried} ({100.0 * hits / tried:.0f} %)" if tried else "-"
    lines = [f"{invocations} invocations; leave one out: does an invocation's range hold the other invocations' value?",
             f"{'runtime':<16} {'95 % range of the mean':>24} {'vs best':>16} {'before: 95 % CI':>16}"]
    for runtime in sorted(counts):
        c = counts[runtime]
        lines.append(f"{runtime:<16} {share(c[0], c[1]):>24} {share(c[2], c[3]):>16} {share(c[4], c[5]):>16}")
    total = [sum(c[k] for c in counts.values()) for k in range(6)]
    lines.append(f"{'all':<16} {share(total[0], total[1]):>24} {share(total[2], total[3]):>16} {share(total[4], total[5]):>16}")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: coverage.py DIR (a folder of results folders)")
    runs = load(sys.argv[1])
    print(report(coverage(runs), len(runs)))
