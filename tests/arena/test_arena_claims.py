"""Claims: the verdict rules, Holm's family over one table, and the document."""

from __future__ import annotations

import math

import pytest

from policylab.arena.claim_list import ARENAS, CLAIMS
from policylab.arena.claims import (
    HELD,
    NOISE,
    NOT_HELD,
    NOT_RUN,
    UNTESTABLE,
    Claim,
    ClaimArena,
    claims_report,
    judge,
    verdict_of,
)
from policylab.arena.stats import Interval, RunRecord


def iv(low: float, high: float, n: int = 10) -> Interval:
    return Interval((low + high) / 2, low, high, n, method="paired")


@pytest.mark.parametrize(
    ("low", "high", "p", "direction", "expected"),
    [
        (0.01, 0.09, 0.01, "better", HELD),  # above 0 and Holm-significant
        (0.01, 0.09, 0.20, "better", NOISE),  # above 0 but not after Holm
        (-0.09, -0.01, 0.01, "better", NOT_HELD),  # worse
        (-0.03, 0.04, 0.50, "better", NOT_HELD),  # a gain ≥ 0.05 is excluded
        (-0.03, 0.07, 0.50, "better", NOISE),
        (-0.04, 0.03, 0.50, "not_worse", HELD),  # a loss ≥ 0.05 is excluded
        (-0.07, 0.03, 0.50, "not_worse", NOISE),
        (-0.09, -0.01, 0.01, "not_worse", NOT_HELD),
        (-0.02, -0.001, 0.01, "not_worse", HELD),  # worse, but by less than the margin
        (0.001, 0.04, 0.20, "better", NOISE),  # above 0 wins over "gain excluded"
    ],
)
def test_verdict_rules(low, high, p, direction, expected):
    verdict, reason = verdict_of(iv(low, high), p, direction=direction, min_effect=0.05)
    assert verdict == expected, reason


def test_verdict_without_interval_and_bad_input():
    assert (
        verdict_of(iv(math.nan, math.nan, 1), math.nan, direction="better", min_effect=0.05)[0]
        == NOT_RUN
    )
    with pytest.raises(ValueError, match="direction"):
        verdict_of(iv(0, 1), 0.1, direction="faster", min_effect=0.05)
    with pytest.raises(ValueError, match="min_effect"):
        verdict_of(iv(0, 1), 0.1, direction="better", min_effect=0)
    with pytest.raises(ValueError, match="metric"):
        Claim("a", "1", "c", "x", "b", metric="median")


def _records(scores: dict[str, list[float]]) -> list[RunRecord]:
    # every run: 0.5 before training, its score at the end of a budget of 100
    return [
        RunRecord(algo, seed, "done", [(0.0, 0.5), (100.0, score)], 1.0, "samples")
        for algo, values in scores.items()
        for seed, score in enumerate(values)
    ]


SETUP = ClaimArena("toy", "arithmetic", ("base", "good", "same"), 6, 100, 0.05)


def test_judge_uses_holm_over_the_table():
    # good − base = [.10, .12, .08, .11, .09, .10]: mean 0.10, tiny SD → held after Holm;
    # same − base alternates ±0.01 → a gain ≥ 0.05 is excluded
    base = [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    records = _records(
        {
            "base": base,
            "good": [0.60, 0.62, 0.58, 0.61, 0.59, 0.60],
            "same": [0.51, 0.49, 0.51, 0.49, 0.51, 0.49],
        }
    )
    claims = [
        Claim("good", "1", "better", "toy", "base"),
        Claim("same", "2", "better", "toy", "base"),
    ]
    good, same = judge(claims, records, SETUP)
    assert good.verdict == HELD and good.diff.n == 6
    assert good.diff.mean == pytest.approx(0.10)
    assert same.verdict == NOT_HELD and "excluded" in same.reason
    # Holm multiplies the smallest p by the family size (2): adjusted ≥ raw
    assert good.p_holm < 0.05


def test_judge_untestable_keeps_measurement_and_missing_runs():
    records = _records({"base": [0.5] * 3, "good": [0.6, 0.62, 0.58]})
    claims = [
        Claim("good", "1", "c", "toy", "base", why_not="no steps here"),
        Claim("same", "2", "c", "toy", "base"),
    ]
    good, same = judge(claims, records, SETUP)
    assert good.verdict == UNTESTABLE and good.diff.mean == pytest.approx(0.1)
    assert same.verdict == NOT_RUN


def test_registry_is_consistent():
    for claim in CLAIMS:
        arena = ARENAS[claim.arena]
        assert claim.method in arena.algos, claim.method
        assert claim.baseline in arena.algos
    methods = [c.method for c in CLAIMS]
    assert len(set(methods)) == len(methods)


def test_report_of_missing_arenas_names_the_commands(tmp_path):
    verdicts, text = claims_report(tmp_path, CLAIMS, ARENAS)
    assert {v.verdict for v in verdicts} == {NOT_RUN}
    assert f"--out {tmp_path / 'arithmetic'}" in text
    assert text.count("| arXiv:") == len(CLAIMS)


def test_judge_refuses_unpaired_seeds():
    records = [
        RunRecord("base", 0, "done", [(0.0, 0.5), (100.0, 0.5)], 1.0, "samples"),
        RunRecord("base", 1, "done", [(0.0, 0.5), (100.0, 0.6)], 1.0, "samples"),
        RunRecord("good", 2, "done", [(0.0, 0.5), (100.0, 0.7)], 1.0, "samples"),
        RunRecord("good", 3, "done", [(0.0, 0.5), (100.0, 0.8)], 1.0, "samples"),
    ]
    (v,) = judge([Claim("good", "1", "c", "toy", "base")], records, SETUP)
    assert v.verdict == NOT_RUN and "both" in v.reason
