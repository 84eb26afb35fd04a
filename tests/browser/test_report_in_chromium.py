"""report.html as a person sees it: opened in headless Chromium (Debian's package), offline.

Checks that the rendered page has every results table and every chart, that each chart was
drawn (its SVG has drawing elements and a size), that nothing was fetched from the network,
and keeps a screenshot (target/report-screenshot.png) to look at.
"""
import os
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars",
]


def chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("chromium is not installed (apt-get install chromium; .ci/run does it)")
    return path


def taskmeter():
    path = pathlib.Path(os.environ.get("TASKMETER_BIN", ROOT / "target" / "debug" / "taskmeter"))
    if not path.is_file():
        pytest.fail(f"{path} does not exist: build taskmeter first (cargo build)")
    return path


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("run") / "sweep"
    subprocess.run(
        [taskmeter(), "run", "--runtimes", "thread,smol,c-thread", "--sweep", "busy=0,1000,1000000",
         "--duration", "300ms", "--warmup", "50ms", "-o", folder],
        check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
    )
    return folder


def browse(url, *extra, profile):
    return subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, url],
        check=True, capture_output=True, text=True, timeout=120,
    )


def test_report_renders_every_table_and_chart(results, tmp_path):
    charts = sorted(p.name for p in (results / "charts").glob("*.svg"))
    assert len(charts) == 3 * 2 + 4
    dom = browse((results / "report.html").as_uri(), "--dump-dom", profile=tmp_path / "profile").stdout
    assert dom.count('<table class="results">') == 3
    rows = re.findall(r'<table class="results">.*?</table>', dom, re.S)
    for table in rows:
        assert table.count("<tr>") >= 1 + 3, "a header and a row per runtime"
    figures = re.findall(r'<figure class="chart" id="([^"]+)">(.*?)</figure>', dom, re.S)
    assert sorted(f"{name}.svg" for name, _ in figures) == charts
    for name, body in figures:
        svg = re.search(r"<svg[^>]*width=\"(\d+)\"[^>]*height=\"(\d+)\"", body)
        assert svg and int(svg.group(1)) > 0 and int(svg.group(2)) > 0, name
        assert len(re.findall(r"<(polyline|path|rect|circle)\b", body)) > 5, f"{name} has drawing elements"
    assert not re.search(r'(src|href)="https?:', dom), "the report fetches nothing"


def test_report_screenshot(results, tmp_path):
    shot = ROOT / "target" / "report-screenshot.png"
    shot.parent.mkdir(exist_ok=True)
    shot.unlink(missing_ok=True)
    browse((results / "report.html").as_uri(), f"--screenshot={shot}", "--window-size=1200,2400", profile=tmp_path / "profile")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 50_000, "a page with tables and charts, not a blank one"


def test_bench_report_renders_its_tables(tmp_path):
    """`taskmeter bench`'s report.html: a results table per input, the failed row with its reason."""
    make = subprocess.run(["make", "-s", "-C", ROOT / "clients" / "c"], capture_output=True, text=True)
    assert make.returncode == 0, make.stderr
    folder = tmp_path / "bench"
    sleeper = ROOT / "clients" / "c" / "build" / "sleeper"
    done = subprocess.run(
        [taskmeter(), "bench", "--scenario", f"sleeper={sleeper} $TASKMETER_INPUT", "--scenario", "broken=exit 4",
         "--input", "short=5", "--input", "long=15", "--warmup", "50ms", "--time", "300ms", "-o", folder],
        stdin=subprocess.DEVNULL, capture_output=True, text=True,
    )
    assert done.returncode == 1, done.stderr  # the broken scenario fails its rows, the rest is kept
    dom = browse((folder / "report.html").as_uri(), "--dump-dom", profile=tmp_path / "profile").stdout
    tables = re.findall(r'<table class="results">.*?</table>', dom, re.S)
    assert len(tables) == 2, "one table per input"
    for table in tables:
        assert "<td>sleeper</td>" in table
        assert "`exit 4` exited with status 4" in table
    assert "With input short" in dom and "With input long" in dom
    assert not re.search(r'(src|href)="https?:', dom), "the report fetches nothing"
