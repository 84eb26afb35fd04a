"""The JSON Schemas, the vectors and real worker output agree (protocol v3).

The Rust test suite checks the semantics (the orchestrator's validator, check-driver); this
checks the schema files a driver author in another language would use, against the same
vectors and against the frames the workers really send.
"""
import json
import os
import pathlib
import struct
import subprocess

import jsonschema
import pytest

PROTOCOL = pathlib.Path(__file__).resolve().parent.parent
ROOT = PROTOCOL.parent
PLAN_SCHEMA = json.loads((PROTOCOL / "schema" / "plan.schema.json").read_text())
FRAMES_SCHEMA = json.loads((PROTOCOL / "schema" / "frames.schema.json").read_text())
# Refused by the orchestrator's validator for reasons a schema cannot express: a repeated key
# (a JSON reader keeps one), 1.0 (JSON Schema counts it as an integer), a sum past 2^53.
# A task size list that does not decrease is refused by the validator too.
SEMANTIC_REFUSALS = {"repeated-key", "float-integer", "overflowing-end", "granularity-rising-grains"}
# The keys a granularity plan adds after the others, in this order.
GRANULARITY_KEYS = ["pattern", "width", "steps", "grains_ns", "calibrate_ns"]


def taskmeter_binary():
    path = pathlib.Path(os.environ.get("TASKMETER_BIN", ROOT / "target" / "debug" / "taskmeter"))
    if not path.is_file():
        pytest.fail(f"{path} does not exist: build taskmeter first (cargo build) or set TASKMETER_BIN")
    return path


def validator(schema):
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def frame_validator(kind):
    return validator({**FRAMES_SCHEMA, "$ref": f"#/$defs/{kind}"})


@pytest.mark.parametrize("path", sorted((PROTOCOL / "vectors" / "plans").glob("*.json")), ids=lambda p: p.stem)
def test_vector_plans_match_the_plan_schema(path):
    plan = json.loads(path.read_text().replace("RUNTIME", "thread"))
    validator(PLAN_SCHEMA).validate(plan)
    extra = GRANULARITY_KEYS if plan["experiment"] == "granularity" else []
    assert list(plan) == PLAN_SCHEMA["required"] + extra, "every key, in the protocol's order"


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
        assert errors, f"{path.stem} passes the schema but the validator refuses it"


@pytest.mark.parametrize("path", sorted((PROTOCOL / "vectors" / "streams").glob("*.json")), ids=lambda p: p.stem)
def test_stream_vectors_match_the_frame_schemas(path):
    vector = json.loads(path.read_text())
    validator(PLAN_SCHEMA).validate(vector["plan"])
    assert vector["frames"], "no frames"
    for kind, payload in vector["frames"]:
        frame_validator(kind).validate(payload)


def decode_frames(data):
    """(kind, payload) of every frame: JSON objects, and S frames as their JSON vector form."""
    frames, at = [], 0
    while at < len(data):
        kind, length = struct.unpack_from("<cI", data, at)
        payload = data[at + 5 : at + 5 + length]
        assert len(payload) == length, "a frame cut short"
        at += 5 + length
        kind = kind.decode()
        if kind == "S":
            unit, count, origin = struct.unpack_from("<IIQ", payload)
            assert len(payload) == 16 + 48 * count
            words = struct.unpack_from(f"<{6 * count}Q", payload, 16)
            samples = [list(words[i : i + 6]) for i in range(0, len(words), 6)]
            frames.append((kind, {"unit": unit, "origin": origin, "samples": samples}))
        else:
            frames.append((kind, json.loads(payload)))
    return frames


def run_worker(command, runtime, plan_name):
    """The worker's frames for a vector plan; stdin stays open meanwhile (closing it asks the
    worker to stop early)."""
    plan = (PROTOCOL / "vectors" / "plans" / f"{plan_name}.json").read_text().replace("RUNTIME", runtime)
    worker = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    worker.stdin.write(plan.encode())
    worker.stdin.flush()
    stdout = worker.stdout.read()
    worker.stdin.close()
    assert worker.wait(timeout=30) == 0
    frames = decode_frames(stdout)
    for kind, payload in frames:
        frame_validator(kind).validate(payload)
    return frames


@pytest.mark.parametrize("runtime", ["thread", "tokio-ct", "tokio-mt", "smol", "embassy"])
@pytest.mark.parametrize("plan_name", ["absolute-busy-yield", "by-unit"])
def test_real_worker_frames_match_the_frame_schemas(runtime, plan_name):
    frames = run_worker([taskmeter_binary(), "worker"], runtime, plan_name)
    kinds = [kind for kind, _ in frames]
    assert kinds[:2] == ["H", "G"] and kinds[-1] == "D"
    assert frames[-1][1]["interrupted"] is False
    units = frames[1][1]["units"]
    assert kinds.count("U") == units
    samples = sum(len(p["samples"]) for k, p in frames if k == "S")
    iterations = sum(p["iterations"] - p["lost"] for k, p in frames if k == "U")
    assert samples == iterations, "every iteration's sample is in an S frame or counted lost"


@pytest.mark.parametrize("runtime", ["thread", "tokio-mt", "embassy"])
def test_real_granularity_frames_match_the_frame_schemas(runtime):
    frames = run_worker([taskmeter_binary(), "worker"], runtime, "granularity-chain")
    kinds = [kind for kind, _ in frames]
    plan = json.loads((PROTOCOL / "vectors" / "plans" / "granularity-chain.json").read_text())
    grains = [int(g) for g in plan["grains_ns"].split(",")]
    assert kinds == ["H", "G"] + ["P"] * len(grains) + ["D"]
    points = [payload for kind, payload in frames if kind == "P"]
    assert [p["grain_ns"] for p in points] == grains
    for p in points:
        assert p["tasks"] == p["completed"] == p["rounds"] * plan["width"] * plan["steps"]
        assert p["wrong"] == 0
