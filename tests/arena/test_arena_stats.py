"""Hand-computed cases for the arena's statistics (policylab.arena.stats)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policylab.arena.stats import (
    RunRecord,
    area_under_curve,
    budget_to_threshold,
    mean_ci,
    mean_curve,
    paired_difference_ci,
    summarize,
    welch_ci,
)

PROPERTY = settings(max_examples=50, deadline=None, derandomize=True)

# t_{p,2} has a closed form: (2p − 1) / √(2p(1 − p)); p = 0.975 → 0.95 / √0.04875.
# (Tables print 4.302652729911275; the closed form and scipy agree on ...749464, 1.6e-10 away.)
T975_2 = 0.95 / math.sqrt(0.04875)  # 4.302652729749464


# ---- mean_ci ------------------------------------------------------------------------------
def test_mean_ci_three_values():
    # [1, 2, 3]: mean 2, s² = (1 + 0 + 1)/2 = 1, half-width = 4.30265/√3 = 2.4841377118
    ci = mean_ci([1.0, 2.0, 3.0])
    assert ci.mean == 2.0 and ci.n == 3 and ci.method == "t"
    assert ci.low == pytest.approx(2.0 - T975_2 / math.sqrt(3), abs=1e-9)
    assert ci.high == pytest.approx(2.0 + 2.484137711843753, abs=1e-9)


def test_mean_ci_other_confidence():
    # 90%: t_{0.95,2} = 0.9 / √(2·0.95·0.05) = 0.9/√0.095 = 2.9199855804
    ci = mean_ci([1.0, 2.0, 3.0], confidence=0.90)
    assert ci.high - ci.mean == pytest.approx(0.9 / math.sqrt(0.095) / math.sqrt(3), abs=1e-9)
    assert ci.confidence == 0.90


def test_mean_ci_one_and_zero_values():
    one = mean_ci([5.0])
    assert one.mean == 5.0 and one.n == 1
    assert math.isnan(one.low) and math.isnan(one.high)
    assert one.contains(5.0) is None
    none = mean_ci([])
    assert none.n == 0 and all(math.isnan(v) for v in (none.mean, none.low, none.high))


def test_mean_ci_rejects_bad_confidence():
    with pytest.raises(ValueError, match="confidence"):
        mean_ci([1.0, 2.0], confidence=95)


# ---- paired and Welch differences ---------------------------------------------------------
def test_paired_difference_by_seed():
    # d = a − b per seed = [1, 1, 3]; mean 5/3; deviations −2/3, −2/3, 4/3 → s² = (24/9)/2 = 4/3
    # s/√3 = √(4/9) = 2/3 → half-width = 4.30265 · 2/3 = 2.8684351532
    a = {0: 1.0, 1: 2.0, 2: 4.0}
    b = {2: 1.0, 0: 0.0, 1: 1.0}  # order does not matter, the seed does
    ci = paired_difference_ci(a, b)
    assert ci.method == "paired" and ci.n == 3
    assert ci.mean == pytest.approx(5 / 3, abs=1e-12)
    assert ci.low == pytest.approx(5 / 3 - T975_2 * 2 / 3, abs=1e-9)  # −1.2017684866
    assert ci.high == pytest.approx(5 / 3 + 2.868435153274183, abs=1e-9)  # 4.5351018199
    assert ci.contains(0.0) is True


def test_paired_difference_uses_common_seeds_only():
    # seed 3 is in a only: d over seeds 0, 1 = [1, 1] → mean 1, s = 0 → interval [1, 1]
    ci = paired_difference_ci({0: 1.0, 1: 2.0, 3: 100.0}, {0: 0.0, 1: 1.0})
    assert ci.method == "paired" and ci.n == 2
    assert (ci.mean, ci.low, ci.high) == (1.0, 1.0, 1.0)


def test_welch_fallback_without_common_seeds():
    # a = [1, 2, 3]: mean 2, s_a² = 1 → s_a²/n_a = 1/3
    # b = [0, 2]:    mean 1, s_b² = 2 → s_b²/n_b = 1
    # diff = 1, se² = 4/3
    # df = (4/3)² / ((1/3)²/2 + 1²/1) = (16/9) / (19/18) = 32/19 = 1.6842105263
    # t_{0.975, 32/19} = 5.1762316285 (scipy) → half-width = 5.1762316285 · √(4/3) = 5.9769974483
    ci = paired_difference_ci({0: 1.0, 1: 2.0, 2: 3.0}, {3: 0.0, 4: 2.0})
    assert ci.method == "welch" and ci.n == 5
    assert ci.mean == pytest.approx(1.0, abs=1e-12)
    assert ci.low == pytest.approx(1.0 - 5.976997448258373, abs=1e-9)
    assert ci.high == pytest.approx(1.0 + 5.1762316285465175 * math.sqrt(4 / 3), abs=1e-9)


def test_welch_small_samples():
    assert welch_ci([1.0, 2.0], [0.0]).mean == 1.5
    assert math.isnan(welch_ci([1.0, 2.0], [0.0]).low)
    assert math.isnan(welch_ci([1.0, 2.0], []).mean)
    constant = welch_ci([2.0, 2.0], [1.0, 1.0, 1.0])  # se = 0: the point difference
    assert (constant.low, constant.high) == (1.0, 1.0)


# ---- curves -------------------------------------------------------------------------------
def test_area_under_curve():
    # ramp 0 → 1 over [0, 10]: area 5, /10 = 0.5
    assert area_under_curve([(0, 0.0), (10, 1.0)], 10) == pytest.approx(0.5)
    # budget 20: held at 1 over [10, 20] → (5 + 10)/20 = 0.75
    assert area_under_curve([(0, 0.0), (10, 1.0)], 20) == pytest.approx(0.75)
    # last evaluation past the budget: cut at 5 → ∫_0^5 x/10 dx = 1.25, /5 = 0.25
    assert area_under_curve([(0, 0.0), (10, 1.0)], 5) == pytest.approx(0.25)
    # trapezoids (0,0)-(2,2)-(4,0): area 2 + 2 = 4, /4 = 1
    assert area_under_curve([(0, 0.0), (2, 2.0), (4, 0.0)], 4) == pytest.approx(1.0)


def test_area_under_curve_errors():
    with pytest.raises(ValueError, match="empty"):
        area_under_curve([], 10)
    with pytest.raises(ValueError, match="x=0"):
        area_under_curve([(5, 1.0), (10, 1.0)], 10)
    with pytest.raises(ValueError, match="ascending"):
        area_under_curve([(0, 1.0), (10, 1.0), (5, 1.0)], 10)
    with pytest.raises(ValueError, match="budget"):
        area_under_curve([(0, 1.0)], 0)


def test_budget_to_threshold():
    curve = [(0, 1.0), (10, 0.2), (20, 0.6), (30, 0.9), (40, 0.4)]
    assert budget_to_threshold(curve, 0.5) == 20.0  # the score 1.0 at x=0 does not count
    assert budget_to_threshold(curve, 0.6) == 20.0  # ≥, not >
    assert budget_to_threshold(curve, 0.95) is None
    assert budget_to_threshold([(0, 1.0)], 0.5) is None


def test_mean_curve_hand_case():
    # curves on grid [0, 5, 10, 20]:
    #   A (0,0)-(10,2): [0, 1, 2, 2]  (held after its end)
    #   B (0,0)-(20,4): [0, 1, 2, 4]
    # mean [0, 1, 2, 3]; at 20: s = √2, half = t_{0.975,1} · √2/√2 = 12.7062047362
    grid = [0.0, 5.0, 10.0, 20.0]
    mean, low, high = mean_curve([[(0, 0.0), (10, 2.0)], [(0, 0.0), (20, 4.0)]], grid)
    np.testing.assert_allclose(mean, [0, 1, 2, 3])
    np.testing.assert_allclose(high - mean, [0, 0, 0, 12.706204736174698], atol=1e-9)
    np.testing.assert_allclose(mean - low, high - mean)


def test_mean_curve_few_runs():
    mean, low, high = mean_curve([[(0, 1.0), (10, 3.0)]], [0.0, 5.0])
    np.testing.assert_allclose(mean, [1.0, 2.0])
    assert np.isnan(low).all() and np.isnan(high).all()
    mean, low, high = mean_curve([], [0.0, 5.0])
    assert np.isnan(mean).all() and np.isnan(low).all()


# ---- summarize ----------------------------------------------------------------------------
def ramp(final: float) -> list[tuple[float, float]]:
    """(0, 0), (5, final/2), (10, final): AUC over budget 10 = final/2."""
    return [(0.0, 0.0), (5.0, final / 2), (10.0, final)]


def records() -> list[RunRecord]:
    finals = {"ppo": [1.0, 2.0, 3.0], "grpo": [3.0, 4.0, 6.0], "a2c": [1.0, 2.0, 4.0]}
    out = [
        RunRecord(algo, seed, "done", ramp(f), 10.0 + seed, "env steps")
        for algo, fs in finals.items()
        for seed, f in enumerate(fs)
    ]
    out.append(RunRecord("grpo", 3, "failed", [(0.0, 0.0)], 1.0, "env steps", "CUDA OOM"))
    out.append(RunRecord("a2c", 3, "partial", [(0.0, 0.0), (5.0, 9.0)], 5.0, "env steps"))
    return out


def test_summarize_hand_case():
    rows = summarize(records(), baseline="ppo", threshold=2.0, budget=10.0)
    assert [r.algo for r in rows] == ["ppo", "grpo", "a2c"]  # order of first appearance
    ppo, grpo, a2c = rows

    # ppo: finals [1, 2, 3] → 2 ± 2.4841377; AUC = finals/2 → 1 ± 1.2420689
    assert (ppo.n_done, ppo.n_failed, ppo.n_partial) == (3, 0, 0)
    assert ppo.final.mean == 2.0
    assert ppo.final.high == pytest.approx(2.0 + T975_2 / math.sqrt(3), abs=1e-9)
    assert ppo.auc.mean == pytest.approx(1.0)
    assert ppo.auc.high == pytest.approx(1.0 + T975_2 / math.sqrt(3) / 2, abs=1e-9)
    assert ppo.diff_final is None and ppo.diff_auc is None and not ppo.significant
    assert ppo.seconds == pytest.approx(11.0)  # (10 + 11 + 12)/3
    # threshold 2: seed 1 reaches 2 at x=10, seed 2 (half 1.5) at x=10 → 2/3, median 10
    assert (ppo.to_threshold.reached, ppo.to_threshold.n, ppo.to_threshold.median) == (2, 3, 10)

    # grpo: the failed seed 3 is counted, not used. d = [3−1, 4−2, 6−3] = [2, 2, 3]:
    # mean 7/3, deviations −1/3, −1/3, 2/3 → s² = (6/9)/2 = 1/3, s/√3 = 1/3
    # half = 4.30265/3 = 1.4342175766 → [0.899, 3.768] excludes 0: significant
    assert (grpo.n_done, grpo.n_failed) == (3, 1)
    assert grpo.failures == [(3, "CUDA OOM")]
    assert grpo.seeds == [0, 1, 2]
    assert grpo.diff_final.method == "paired"
    assert grpo.diff_final.mean == pytest.approx(7 / 3)
    assert grpo.diff_final.low == pytest.approx(7 / 3 - T975_2 / 3, abs=1e-9)
    assert grpo.significant
    # Δ AUC = d/2 → mean 7/6, half 1.4342175766/2
    assert grpo.diff_auc.mean == pytest.approx(7 / 6)
    assert grpo.diff_auc.high == pytest.approx(7 / 6 + T975_2 / 6, abs=1e-9)
    # halves [1.5, 2, 3]: seed 0 reaches 2 at x=10, seeds 1, 2 at x=5 → 3/3, median 5
    assert (grpo.to_threshold.reached, grpo.to_threshold.median) == (3, 5)

    # a2c: d = [0, 0, 1] → mean 1/3, s/√3 = 1/3 → [−1.101, 1.768] contains 0: not significant
    # (its partial seed 3 with score 9 must not enter anything)
    assert a2c.n_partial == 1 and a2c.n_done == 3
    assert a2c.final.mean == pytest.approx(7 / 3)
    assert a2c.diff_final.mean == pytest.approx(1 / 3)
    assert a2c.diff_final.high == pytest.approx(1 / 3 + T975_2 / 3, abs=1e-9)
    assert not a2c.significant
    # seeds 1 (final 2, at 10) and 2 (half 2, at 5) → 2/3, median (5 + 10)/2 = 7.5
    assert (a2c.to_threshold.reached, a2c.to_threshold.median) == (2, 7.5)


def test_summarize_without_threshold_and_errors():
    rows = summarize(records(), baseline="ppo", threshold=None, budget=10.0)
    assert all(r.to_threshold is None for r in rows)
    with pytest.raises(ValueError, match="baseline 'sac'"):
        summarize(records(), baseline="sac", threshold=None, budget=10.0)
    twice = records() + [RunRecord("ppo", 0, "done", ramp(1.0), 1.0, "env steps")]
    with pytest.raises(ValueError, match="two done runs for seed 0"):
        summarize(twice, baseline="ppo", threshold=None, budget=10.0)


def test_summarize_never_reached_and_all_failed():
    recs = [
        RunRecord("ppo", 0, "done", ramp(1.0), 1.0, "env steps"),
        RunRecord("ppo", 1, "done", ramp(1.0), 1.0, "env steps"),
        RunRecord("sac", 0, "failed", [], 0.5, "env steps", "diverged"),
    ]
    ppo, sac = summarize(recs, baseline="ppo", threshold=5.0, budget=10.0)
    assert (ppo.to_threshold.reached, ppo.to_threshold.median) == (0, None)
    assert sac.n_done == 0 and sac.n_failed == 1 and math.isnan(sac.final.mean)
    assert math.isnan(sac.seconds) and not sac.significant


# ---- properties ---------------------------------------------------------------------------
values = st.lists(
    st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False), min_size=2, max_size=20
)


@PROPERTY
@given(values)
def test_mean_ci_contains_mean_and_is_symmetric(xs):
    ci = mean_ci(xs)
    assert ci.low <= ci.mean <= ci.high
    assert ci.high - ci.mean == pytest.approx(ci.mean - ci.low, rel=1e-9, abs=1e-9)


@PROPERTY
@given(st.integers(1, 30), st.floats(0.01, 100.0))
def test_mean_ci_shrinks_with_more_seeds(k, spread):
    # values ±spread, k of each: s = spread·√(2k/(2k−1)) falls, t falls, √n grows
    narrow = mean_ci([-spread, spread] * (k + 1))
    wide = mean_ci([-spread, spread] * k)
    assert narrow.half_width < wide.half_width


@PROPERTY
@given(
    st.floats(-100, 100),
    st.lists(st.floats(0.1, 50.0), min_size=0, max_size=6),
    st.floats(0.5, 400.0),
)
def test_auc_of_constant_curve_is_the_constant(c, steps, budget):
    xs = np.cumsum([0.0, *steps])
    assert area_under_curve([(x, c) for x in xs], budget) == pytest.approx(c, abs=1e-9)


@PROPERTY
@given(st.lists(values, min_size=2, max_size=5))
def test_mean_curve_band_is_mean_ci_at_each_point(finals):
    # vectorised band over the grid == the loop of mean_ci over the runs at each point
    curves = [[(0.0, 0.0), (10.0, f[0])] for f in finals]
    grid = [0.0, 2.5, 10.0, 12.0]
    mean, low, high = mean_curve(curves, grid)
    for i, g in enumerate(grid):
        ci = mean_ci([np.interp(g, [0.0, 10.0], [0.0, f[0]]) for f in finals])
        assert (mean[i], low[i], high[i]) == pytest.approx((ci.mean, ci.low, ci.high), abs=1e-7)


@PROPERTY
@given(st.dictionaries(st.integers(0, 20), st.floats(-1e3, 1e3), min_size=2))
def test_paired_difference_with_itself_is_zero(a):
    ci = paired_difference_ci(a, a)
    assert (ci.mean, ci.low, ci.high) == (0.0, 0.0, 0.0)


def test_run_names_of_variants_are_safe_folder_names():
    from policylab.arena.runner import make_spec

    spec = make_spec("arithmetic", ["grpo"], 1, budget=128)
    assert spec.run_name("ppo@clip_schedule=linear", 0) == "ppo@clip_schedule=linear-s0"
    assert (
        spec.run_name("grpo@loss={loss_agg_mode: token-mean}", 2)
        == "grpo@loss=_loss_agg_mode__token-mean_-s2"
    )


def test_an_offline_run_s_curve_starts_at_zero_and_keeps_the_last_score_per_budget():
    from policylab.arena.runner import _curve

    key, score = "budget/samples", "eval/greedy_accuracy"
    evals = [  # offline data: the whole budget was sampled before the first evaluation
        {"step": 0, key: 2048, score: 0.4},
        {"step": 10, key: 2048, score: 0.5},
        {"step": 20, key: 2048, score: 0.6},
    ]
    assert _curve(evals, key, score) == [(0.0, 0.4), (2048.0, 0.6)]
    online = [{"step": 0, key: 0, score: 0.4}, {"step": 5, key: 640, score: 0.5}]
    assert _curve(online, key, score) == [(0.0, 0.4), (640.0, 0.5)]
