"""benchmarks/json_struct.py: the curriculum's 90 %-step, computed by hand."""

import importlib.util
from pathlib import Path

import pytest

PATH = Path(__file__).parents[2] / "benchmarks" / "json_struct.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("json_struct_bench", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reach_step_is_the_first_running_mean_at_90_percent_of_the_final(bench):
    values = [0.2, 0.5, 0.8, 0.9, 0.9, 0.9, 0.9, 0.9]
    rows = [{"step": i + 1, "reward/x": v} for i, v in enumerate(values)]
    # final = mean of the last 5 = 0.9, target 0.81; running means (window 3):
    # 0.2, 0.35, 0.5, 0.733, 0.867 → the 5th row, step 5
    assert bench.reach_step(rows, "reward/x") == 5


def test_reach_step_needs_enough_rows(bench):
    rows = [{"step": 1, "reward/x": 1.0}] * 4
    assert bench.reach_step(rows, "reward/x") is None
