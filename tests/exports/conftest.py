"""What the tests of the dashboards' exports share: the taskmeter binary, whose runs are not
recorded in the user's history (docs/history.md)."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
os.environ["TASKMETER_HISTORY"] = "off"


@pytest.fixture(scope="session")
def taskmeter():
    """target/debug/taskmeter, or TASKMETER_BIN."""
    path = pathlib.Path(os.environ.get("TASKMETER_BIN", ROOT / "target" / "debug" / "taskmeter"))
    if not path.is_file():
        pytest.fail(f"{path} does not exist: build taskmeter first (cargo build)")
    return path
