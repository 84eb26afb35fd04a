"""The JSON Schemas, the vectors and real worker output agree (protocol v1).

The Rust test suite checks the semantics (check-driver); this checks the schema files a driver
author in another language would use, against the same vectors and against what the workers
really print.
"""
import json
import os
import pathlib
import subprocess

import jsonschema
import pytest

PROTOCOL = pathlib.Path(__file__).resolve().parent.parent
ROOT = PROTOCOL.parent
PLAN_SCHEMA = json.loads((PROTOCOL / "schema" / "plan.schema.json").read_text())
OUTPUT_SCHEMA = json.loads((PROTOCOL / "schema" / "output.schema.json").read_text())
# Refused by workers for reasons a schema cannot express.
SEMANTIC_REFUSALS = {"unknown-runtime"}


def taskmeter_binary():
    path = pathlib.Path(os.environ.get("TASKMETER_BIN", ROOT / "target" / "debug" / "taskmeter"))
    if not path.is_file():
        pytest.fail(f"{path} does not exist: build taskmeter first (cargo build) or set TASKMETER_BIN")
    return path


def validator(schema):
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", sorted((PROTOCOL / "vectors" / "plans").glob("*.json")), ids=lambda p: p.stem)
def test_vector_plans_match_the_plan_schema(path):
    plan = json.loads(path.read_text().replace("RUNTIME", "thread"))
    validator(PLAN_SCHEMA).validate(plan)


@pytest.mark.parametrize("path", sorted((PROTOCOL / "vectors" / "invalid-plans").glob("*.json")), ids=lambda p: p.stem)
def test_invalid_plans_break_the_schema_unless_refused_for_meaning(path):
    text = path.read_text()
    try:
        plan = json.loads(text)
    except json.JSONDecodeError:
        return  # not JSON at all: refused before any schema
    errors = list(validator(PLAN_SCHEMA).iter_errors(plan))
    if path.stem in SEMANTIC_REFUSALS:
        assert not errors, f"{path.stem} should be schema-valid and refused for its meaning"
    else:
        assert errors, f"{path.stem} passes the schema but workers must refuse it"


@pytest.mark.parametrize("path", sorted((PROTOCOL / "vectors" / "outputs").glob("*.ndjson")), ids=lambda p: p.stem)
def test_output_vectors_match_the_output_schema(path):
    check_output_lines(path.read_text())
    validator(PLAN_SCHEMA).validate(json.loads(path.with_suffix(".plan.json").read_text()))


def check_output_lines(text):
    v = validator(OUTPUT_SCHEMA)
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert lines, "no output"
    for line in lines:
        v.validate(line)
    return lines


def run_worker(command, runtime, plan_name):
    """The worker's stdout for a vector plan; stdin stays open meanwhile (closing it asks the
    worker to stop early)."""
    plan = (PROTOCOL / "vectors" / "plans" / f"{plan_name}.json").read_text().replace("RUNTIME", runtime)
    worker = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    worker.stdin.write(plan.encode())
    worker.stdin.flush()
    stdout = worker.stdout.read()
    worker.stdin.close()
    assert worker.wait(timeout=30) == 0
    return stdout.decode()


@pytest.mark.parametrize("runtime", ["thread", "tokio-ct", "tokio-mt", "smol", "embassy"])
@pytest.mark.parametrize("plan_name", ["absolute-busy-yield", "by-unit"])
def test_real_worker_output_matches_the_output_schema(runtime, plan_name):
    lines = check_output_lines(run_worker([taskmeter_binary(), "worker"], runtime, plan_name))
    assert [line["type"] for line in lines][0] == "hello"
    assert lines[-1]["type"] == "done" and lines[-1]["interrupted"] is False


def test_c_driver_output_matches_the_output_schema(tmp_path):
    exe = tmp_path / "c-thread"
    subprocess.run(["cc", "-O2", "-std=gnu11", "-pthread", "-o", exe, ROOT / "drivers" / "c" / "taskmeter_c.c"], check=True)
    lines = check_output_lines(run_worker([exe], "c-thread", "modulo-absolute"))
    assert len([line for line in lines if line["type"] == "unit"]) == 4
