"""The GitHub Actions workflows of docs/outputs.md, each as GitHub would read it.

Every fenced `yaml` block of the page is parsed as YAML (PyYAML); each must be a workflow with
jobs and steps, every taskmeter command line in a `run:` step must be one the current CLI
accepts (run with `--dry-run`: its flags, values and export paths checked, nothing measured),
and each consumer's step must read the file a taskmeter export flag wrote: the action's
`output-file-path` with the `tool` of its direction, `bencher run --adapter json --file`, the
Pushgateway's `--data-binary @FILE`.
"""
import pathlib
import re
import shlex
import subprocess

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "outputs.md"
TOOLS = {
    "--export-github-benchmark-smaller": "customSmallerIsBetter",
    "--export-github-benchmark-bigger": "customBiggerIsBetter",
}


def workflows():
    """Each fenced yaml block of the page, with its line number."""
    found, block, start = [], None, 0
    for number, line in enumerate(PAGE.read_text().splitlines(), 1):
        if line.startswith("```"):
            if block is None and line.strip() == "```yaml":
                block, start = [], number + 1
            elif block is not None:
                found.append((start, "\n".join(block)))
                block = None
            continue
        if block is not None:
            block.append(line)
    return found


def shell_lines(script):
    """The commands of a `run:` script, a line ending in a backslash joined with the next."""
    return [line.strip() for line in script.replace("\\\n", " ").splitlines() if line.strip()]


def steps_of(workflow):
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def test_the_page_shows_a_workflow_for_each_dashboard():
    texts = [text for _, text in workflows()]
    assert len(texts) >= 3, "github-action-benchmark, Bencher, Prometheus"
    assert any("benchmark-action/github-action-benchmark" in t for t in texts)
    assert any("bencher run" in t for t in texts)
    assert any("--export-openmetrics" in t for t in texts)


@pytest.mark.parametrize("start,text", workflows(), ids=lambda v: f"line {v}" if isinstance(v, int) else "")
def test_each_workflow_parses_and_its_taskmeter_commands_are_accepted(start, text, tmp_path, taskmeter):
    workflow = yaml.safe_load(text)
    assert isinstance(workflow, dict) and workflow.get("jobs"), f"line {start}: a workflow"
    # PyYAML reads `on:` as True (YAML 1.1); GitHub reads it as the trigger.
    assert workflow.get("on", workflow.get(True)), f"line {start}: its trigger"
    written = {}
    for step in steps_of(workflow):
        assert "uses" in step or "run" in step, f"line {start}: {step}"
        for line in shell_lines(step.get("run", "")):
            words = shlex.split(line)
            if words[0] != "taskmeter":
                continue
            for flag, value in zip(words, words[1:]):
                if flag.startswith("--export-"):
                    written[value] = flag
            done = subprocess.run(
                [taskmeter, *words[1:], "--dry-run"],
                cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            )
            assert done.returncode == 0, f"line {start}: {line}\n{done.stderr}"
    assert written, f"line {start}: the workflow exports something"
    for step in steps_of(workflow):
        uses = step.get("uses", "")
        if uses.startswith("benchmark-action/github-action-benchmark"):
            path = step["with"]["output-file-path"]
            assert path in written, f"line {start}: {path} is no taskmeter export"
            assert step["with"]["tool"] == TOOLS[written[path]], f"line {start}: {path}'s direction"
        for line in shell_lines(step.get("run", "")):
            words = shlex.split(line)
            if words[:2] == ["bencher", "run"]:
                assert words[words.index("--adapter") + 1] == "json", line
                assert written.get(words[words.index("--file") + 1]) == "--export-bmf", line
            if words[0] == "curl":
                data = re.search(r"--data-binary @(\S+)", line)
                assert data and written.get(data[1]) == "--export-openmetrics", line
