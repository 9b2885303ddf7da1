"""The short seeded runs of tests/golden_runs.py reproduce their recording to the last
digit: restructuring the trainers changes no number."""

import json

import pytest

from golden_runs import FIXTURE, RUNS, run, same


@pytest.mark.parametrize("name", list(RUNS))
def test_run_reproduces_its_recording_to_the_last_digit(name, tmp_path):
    recorded = json.loads(FIXTURE.read_text())[name]
    rows = run(name, tmp_path / name)
    assert [(r["step"], r.get("kind")) for r in rows] == [
        (r["step"], r.get("kind")) for r in recorded
    ]
    for new, old in zip(rows, recorded, strict=True):
        for key, value in old.items():
            assert key in new, (name, old["step"], key)
            assert same(new[key], value), (name, old["step"], key, new[key], value)
