"""The short seeded runs of tests/golden_runs.py reproduce their recording to the last
digit: restructuring the trainers changes no number. The fixture holds one recording per
kind of machine (float kernels differ between CPUs); a run must equal one exactly."""

import pytest

from golden_runs import RUNS, platform_label, recordings, run, same


def differences(rows: list[dict], recorded: list[dict]) -> list[tuple]:
    """Where `rows` differ from one recording: (step, key, new, old), at most the first 3."""
    if [(r["step"], r.get("kind")) for r in rows] != [(r["step"], r.get("kind")) for r in recorded]:
        return [("rows", [(r["step"], r.get("kind")) for r in rows])]
    found = []
    for new, old in zip(rows, recorded, strict=True):
        for key, value in old.items():
            if key not in new or not same(new[key], value):
                found.append((old["step"], key, new.get(key), value))
    return found[:3]


def test_differences_sees_a_last_digit_change():
    old = [{"step": 1, "kind": "train", "loss": 0.25}]
    assert differences(old, old) == []
    assert differences([{"step": 1, "kind": "train", "loss": 0.25000001}], old)
    assert differences([{"step": 2, "kind": "train", "loss": 0.25}], old)


@pytest.mark.parametrize("name", list(RUNS))
def test_run_reproduces_its_recording_to_the_last_digit(name, tmp_path):
    rows = run(name, tmp_path / name)
    misses = []
    for entry in recordings():
        found = differences(rows, entry["runs"][name])
        if not found:
            return
        misses.append((entry["platform"], found))
    pytest.fail(
        f"{name} on {platform_label()} equals no recording; first differences per recording: "
        f"{misses}. A refactor must change no number; on a new kind of machine, record a "
        "trusted commit with `tests/golden_runs.py --add` (its docstring)."
    )
