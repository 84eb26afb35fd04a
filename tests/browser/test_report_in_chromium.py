"""report.html as a person sees it: opened in headless Chromium (Debian's package), offline.

Checks that the rendered page of every kind (run, net, bench, granularity) has its results
tables, every chart drawn (its SVG has drawing elements and a size), its settings and environment
as definition lists and its warnings at the top, that nothing was fetched from the network, and
keeps a screenshot of each (target/report-screenshot*.png) to look at.
"""
import os
import pathlib
import re
import shutil
import subprocess

import pytest
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The runs of these tests are not recorded in the user's history (docs/history.md).
os.environ["TASKMETER_HISTORY"] = "off"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars",
]


def unavailable(reason):
    """Skips a test that cannot run here for a reason a user would accept; fails it under CI=true."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"cannot run under CI=true: {reason}")
    pytest.skip(reason)


def chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        unavailable("chromium is not installed (apt-get install chromium; tests/setup.sh does it as root)")
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


def check_page(dom, kind):
    """What every kind's page has: tables, figures drawn, settings and environment, warnings first."""
    assert '<table class="results">' in dom, f"{kind}: its tables are tables"
    assert '<pre class="results">' not in dom, f"{kind}: no text dump"
    assert '<dl class="settings">' in dom and '<dl class="environment">' in dom, kind
    figures = re.findall(r'<figure class="chart" id="([^"]+)">(.*?)</figure>', dom, re.S)
    assert figures, f"{kind}: figures inline"
    for name, body in figures:
        assert len(re.findall(r"<(polyline|path|rect|circle|polygon)\b", body)) > 5, f"{kind}: {name} is drawn"
    if 'id="warnings"' in dom:
        assert dom.index('id="warnings"') < dom.index('id="settings"') < dom.index("<table"), f"{kind}: warnings on top"
    assert not re.search(r'(src|href)="https?:', dom), f"{kind}: the report fetches nothing"
    assert "-&gt; ?" not in dom, f"{kind}: nothing unknown shown as ?"
    return figures


def screenshot(folder, name, tmp_path):
    """The page as a person sees it, kept in target/ to look at; it is not blank."""
    shot = ROOT / "target" / f"report-screenshot{name}.png"
    shot.parent.mkdir(exist_ok=True)
    shot.unlink(missing_ok=True)
    browse((folder / "report.html").as_uri(), f"--screenshot={shot}", "--window-size=1200,2400",
           profile=tmp_path / f"profile{name}")
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 2400)
    return image


def test_report_renders_every_table_and_chart(results, tmp_path):
    charts = sorted(p.name for p in (results / "charts").glob("*.svg"))
    # Per point: the CDF, the deviation bars and the precision/cost frontier; 4 across the sweep.
    assert len(charts) == 3 * 3 + 4
    dom = browse((results / "report.html").as_uri(), "--dump-dom", profile=tmp_path / "profile").stdout
    assert dom.count('<table class="results">') == 3 + 1, "one per point, and why the rows differ"
    rows = re.findall(r'<table class="results">.*?</table>', dom, re.S)
    for table in rows:
        assert table.count("<tr>") >= 1 + 3, "a header and a row per runtime"
    figures = check_page(dom, "run")
    assert sorted(f"{name}.svg" for name, _ in figures) == charts
    for name, body in figures:
        svg = re.search(r"<svg[^>]*width=\"(\d+)\"[^>]*height=\"(\d+)\"", body)
        assert svg and int(svg.group(1)) > 0 and int(svg.group(2)) > 0, name


def test_report_screenshot(results, tmp_path):
    image = screenshot(results, "", tmp_path)
    # Rows of the page that hold anything but the background: the tables and charts fill most
    # of the first screen; a blank or unstyled page would not.
    background = image.getpixel((0, 0))
    width, height = image.size
    pixels = image.load()
    drawn_rows = sum(1 for y in range(0, height, 4) if any(pixels[x, y] != background for x in range(0, width, 4)))
    assert drawn_rows > 0.3 * height / 4, f"only {drawn_rows} of {height // 4} sampled rows hold anything"
    # The charts' palette: many distinct colours, not a page of text alone.
    colours = image.resize((300, 600)).getcolors(maxcolors=1 << 16) or []
    assert len(colours) > 64, f"{len(colours)} colours"


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
    figures = check_page(dom, "bench")
    assert sorted(name for name, _ in figures) == ["gap", "gap-percentiles"]
    warnings = dom[dom.index('id="warnings"'):dom.index('id="settings"')]
    assert "broken" in warnings and "exited with status 4" in warnings, "the failure is said at the top"
    assert f"'sleeper={sleeper} $TASKMETER_INPUT'" in dom, "the command line keeps its quotes"
    screenshot(folder, "-bench", tmp_path)


def test_granularity_report_renders_its_curves(tmp_path):
    """`run granularity`'s report.html: the METG table, the three charts drawn, nothing fetched."""
    folder = tmp_path / "granularity"
    subprocess.run(
        [taskmeter(), "run", "granularity", "--runtimes", "tokio-ct,smol", "--task-busy", "100us,10us,1us,100ns",
         "--duration", "20ms", "--warmup", "5ms", "--calibrate", "2ms", "--repeat", "2", "-o", folder],
        check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
    )
    charts = sorted(p.name for p in (folder / "charts").glob("*.svg"))
    # The METG figure is drawn when a runtime's METG was found between two task sizes.
    assert {"efficiency-by-size.svg", "efficiency.svg", "overhead.svg"} <= set(charts) <= {
        "efficiency-by-size.svg", "efficiency.svg", "overhead.svg", "metg.svg"}
    dom = browse((folder / "report.html").as_uri(), "--dump-dom", profile=tmp_path / "profile").stdout
    assert "METG(50 %)" in dom and "tokio-ct" in dom and "smol" in dom
    figures = check_page(dom, "granularity")
    assert sorted(f"{name}.svg" for name, _ in figures) == charts
    assert len(re.findall(r'<table class="results">', dom)) == 2, "the ranking and the efficiency matrix"
    screenshot(folder, "-granularity", tmp_path)


def test_net_report_renders_its_tables_and_curves(tmp_path):
    """`run net`'s report.html: the summary and ratio tables, the three charts."""
    folder = tmp_path / "net"
    subprocess.run(
        [taskmeter(), "run", "net", "--receivers", "thread,tokio-mt", "--senders", "1,2", "--messages", "100",
         "-o", folder],
        check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
    )
    dom = browse((folder / "report.html").as_uri(), "--dump-dom", profile=tmp_path / "profile").stdout
    figures = check_page(dom, "net")
    assert sorted(name for name, _ in figures) == ["ratio", "round-trip-p99", "throughput"]
    assert len(re.findall(r'<table class="results">', dom)) == 2, "the summary and the ratio matrix"
    screenshot(folder, "-net", tmp_path)
