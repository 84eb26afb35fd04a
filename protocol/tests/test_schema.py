"""The JSON Schemas, the vectors and real worker output agree (protocol v6).

The Rust test suite checks the semantics (the orchestrator's validator, check-driver); this
checks the schema files a driver author in another language would use, against the same
vectors and against the frames the workers really send.
"""
import itertools
import json
import os
import pathlib
import struct
import subprocess
import tempfile

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
    """(kind, payload) of every frame: JSON objects, and S, F and U frames as their JSON vector form."""
    frames, at = [], 0
    while at < len(data):
        kind, length = struct.unpack_from("<cI", data, at)
        payload = data[at + 5 : at + 5 + length]
        assert len(payload) == length, "a frame cut short"
        at += 5 + length
        kind = kind.decode()
        if kind in ("S", "F"):
            unit, count, origin, first = struct.unpack_from("<IIQQ", payload)
            assert len(payload) == 24 + 32 * count
            words = struct.unpack_from(f"<{4 * count}Q", payload, 24)
            samples = [list(words[i : i + 4]) for i in range(0, len(words), 4)]
            frames.append((kind, {"unit": unit, "origin": origin, "first": first, "samples": samples}))
        elif kind == "U":
            assert len(payload) == 36, "a U frame is 36 bytes"
            names = ["unit", "origin_ns", "iterations", "measured_iterations", "lost"]
            frames.append((kind, dict(zip(names, struct.unpack("<IQQQQ", payload)))))
        else:
            frames.append((kind, json.loads(payload)))
    return frames


def run_worker(command, runtime, plan_name):
    """The worker's frames for a vector plan: those of stdout, then those of its sample file
    (fd 3, a file open for appending); stdin stays open meanwhile (closing it asks the worker
    to stop early)."""
    plan = (PROTOCOL / "vectors" / "plans" / f"{plan_name}.json").read_text().replace("RUNTIME", runtime)
    with tempfile.TemporaryFile() as samples:
        fd = os.open(f"/proc/self/fd/{samples.fileno()}", os.O_WRONLY | os.O_APPEND)
        try:
            # close_fds would close fd 3 after preexec_fn has made it.
            worker = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=False,
                preexec_fn=lambda: os.dup2(fd, 3),
            )
        finally:
            os.close(fd)
        worker.stdin.write(plan.encode())
        worker.stdin.flush()
        stdout = worker.stdout.read()
        worker.stdin.close()
        assert worker.wait(timeout=30) == 0
        samples.seek(0)
        sample_frames = decode_frames(samples.read())
    frames = decode_frames(stdout)
    assert all(kind not in ("S", "F") for kind, _ in frames), "stdout holds no sample frames"
    assert all(kind in ("S", "F") for kind, _ in sample_frames), "the sample file holds sample frames only"
    for kind, payload in frames + sample_frames:
        frame_validator(kind).validate(payload)
    return frames, sample_frames


@pytest.mark.parametrize("runtime", ["thread", "tokio-ct", "tokio-mt", "smol", "embassy"])
@pytest.mark.parametrize("plan_name", ["absolute-busy-yield", "by-unit"])
def test_real_worker_frames_match_the_frame_schemas(runtime, plan_name):
    frames, sample_frames = run_worker([taskmeter_binary(), "worker"], runtime, plan_name)
    kinds = [kind for kind, _ in frames]
    assert kinds[:2] == ["H", "G"] and kinds[-1] == "D"
    assert frames[-1][1]["interrupted"] is False
    units = frames[1][1]["units"]
    assert kinds.count("U") == units
    samples = sum(len(p["samples"]) for _, p in sample_frames)
    iterations = sum(p["iterations"] - p["lost"] for k, p in frames if k == "U")
    assert samples == iterations, "every iteration's sample is in a sample frame or counted lost"
    for unit in range(1, units + 1):
        spans = sorted((p["first"], len(p["samples"])) for _, p in sample_frames if p["unit"] == unit)
        assert [first for first, _ in spans] == list(itertools.accumulate([0] + [n for _, n in spans[:-1]]))


@pytest.mark.parametrize("runtime", ["thread", "tokio-mt", "embassy"])
def test_real_granularity_frames_match_the_frame_schemas(runtime):
    frames, sample_frames = run_worker([taskmeter_binary(), "worker"], runtime, "granularity-chain")
    assert sample_frames == []
    kinds = [kind for kind, _ in frames]
    plan = json.loads((PROTOCOL / "vectors" / "plans" / "granularity-chain.json").read_text())
    grains = [int(g) for g in plan["grains_ns"].split(",")]
    assert kinds == ["H", "G"] + ["P"] * len(grains) + ["D"]
    points = [payload for kind, payload in frames if kind == "P"]
    assert [p["grain_ns"] for p in points] == grains
    for p in points:
        assert p["tasks"] == p["completed"] == p["rounds"] * plan["width"] * plan["steps"]
        assert p["wrong"] == 0
