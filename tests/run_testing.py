"""Shared test helper for run folders: two runs logged the same metrics."""

import pytest

from policylab.trainers.run import read_metrics

WALL_CLOCK = ("perf/", "time/")  # columns that never repeat between runs

# a language-model run small enough for a test: 4 prompts × 4 samples, no evaluation
FAST_LLM = dict(
    task="arithmetic",
    prompts_per_step=4,
    samples_per_prompt=4,
    max_new_tokens=8,
    eval_n=8,
    eval_every=0,
    save_every=0,
    progress=False,
    lr=1e-3,
)


def assert_same_metrics(run_a, run_b) -> list[dict]:
    """The metrics.jsonl rows of two run folders agree row for row and key for key (to
    float tolerance), wall-clock columns aside; returns run_a's rows."""
    a = [_timeless(r) for r in read_metrics(run_a, drop=WALL_CLOCK)]
    b = [_timeless(r) for r in read_metrics(run_b, drop=WALL_CLOCK)]
    assert [(r["step"], r.get("kind")) for r in a] == [(r["step"], r.get("kind")) for r in b]
    for ra, rb in zip(a, b, strict=True):
        assert ra.keys() == rb.keys()
        for key, value in ra.items():
            expected = value if isinstance(value, str) else pytest.approx(value, rel=1e-5, abs=1e-6)
            assert rb[key] == expected, (ra["step"], key)
    return a


def _timeless(row: dict) -> dict:
    """`row` without wall-clock columns under a role's prefix too (p0/perf/optimiser_s)."""
    return {k: v for k, v in row.items() if not k.split("/", 1)[-1].startswith(WALL_CLOCK)}
