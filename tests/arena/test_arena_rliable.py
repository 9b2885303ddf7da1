"""Hand-computed cases for rliable's protocol (policylab.arena.rliable)."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policylab.arena.rliable import (
    aggregate_difference_ci,
    holm_bonferroni,
    iqm,
    mean,
    median,
    optimality_gap,
    paired_t_pvalue,
    performance_profile,
    performance_profile_band,
    probability_of_improvement,
    probability_of_improvement_ci,
    stratified_bootstrap_ci,
)

PROPERTY = settings(max_examples=40, deadline=None, derandomize=True)


# ---- aggregates ---------------------------------------------------------------------------
def test_iqm_drops_the_outer_quarters():
    # 8 values pooled over runs × tasks, sorted 1 2 3 4 5 6 7 100; ⌊0.25·8⌋ = 2 cut at each
    # end → mean(3, 4, 5, 6) = 4.5. The outlier 100 does not move it.
    scores = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 100.0]])
    assert iqm(scores) == pytest.approx(4.5, abs=1e-12)


def test_iqm_cuts_the_floor_of_a_quarter():
    # 6 values: ⌊0.25·6⌋ = 1 cut at each end (scipy's trim_mean, as rliable) → 1 and 60 go,
    # mean(2, 3, 4, 5) = 3.5
    scores = np.array([[1.0], [2.0], [3.0], [4.0], [5.0], [60.0]])
    assert iqm(scores) == pytest.approx(3.5, abs=1e-12)


def test_mean_median_and_optimality_gap_by_hand():
    # task means: (1+3)/2 = 2, (10+20)/2 = 15, (0+4)/2 = 2
    scores = np.array([[1.0, 10.0, 0.0], [3.0, 20.0, 4.0]])
    assert mean(scores) == pytest.approx(19 / 3, abs=1e-12)  # (2 + 15 + 2)/3
    assert median(scores) == pytest.approx(2.0, abs=1e-12)  # median(2, 15, 2)
    # min(x, 1): 0.5, 1, 1, 0 → mean 0.625 → gap 1 − 0.625 = 0.375
    gaps = np.array([[0.5, 2.0], [1.0, 0.0]])
    assert optimality_gap(gaps) == pytest.approx(0.375, abs=1e-12)
    # gamma = 2: min(x, 2) = 0.5, 2, 1, 0 → mean 0.875 → gap 1.125
    assert optimality_gap(gaps, gamma=2.0) == pytest.approx(1.125, abs=1e-12)


@PROPERTY
@given(st.integers(1, 6), st.integers(1, 4), st.integers(0, 2**16))
def test_batched_aggregates_agree_with_one_at_a_time(runs, tasks, seed):
    # the bootstrap calls each aggregate once on [reps, runs, tasks]: it must give, per rep,
    # what the aggregate gives on that rep's [runs, tasks] alone
    batch = np.random.default_rng(seed).normal(size=(5, runs, tasks))
    for fn in (iqm, mean, median, optimality_gap):
        together = fn(batch)
        assert together.shape == (5,)
        np.testing.assert_allclose(together, [fn(b) for b in batch], rtol=1e-12, atol=1e-12)


# ---- stratified bootstrap -----------------------------------------------------------------
def test_bootstrap_of_a_mean_matches_the_normal_interval():
    # 400 N(0, 1) draws: the 95 % interval of the mean is mean ± 1.96·s/√400 to first order;
    # the percentile bootstrap must agree to within 10 % of the half-width
    x = np.random.default_rng(1).normal(size=(400, 1))
    ci = stratified_bootstrap_ci({"a": x}, mean, reps=2000, seed=0)["a"]
    normal_half = 1.959964 * float(x.std(ddof=1)) / 20.0
    assert ci.mean == pytest.approx(float(x.mean()), abs=1e-12)
    assert ci.half_width == pytest.approx(normal_half, rel=0.10)
    assert (ci.low + ci.high) / 2 == pytest.approx(ci.mean, abs=0.1 * normal_half)
    assert ci.n == 400 and ci.method == "bootstrap" and ci.confidence == 0.95


def test_bootstrap_is_stratified_by_task():
    # task 0 always scores 0, task 1 always 1: resampling runs within each task keeps one
    # draw of each task per run, so every resample's mean is exactly 0.5. Pooled resampling
    # (ignoring tasks) would draw e.g. six 0s and two 1s.
    scores = np.array([[0.0, 1.0]] * 4)
    ci = stratified_bootstrap_ci({"a": scores}, mean, reps=200)["a"]
    assert (ci.mean, ci.low, ci.high) == (0.5, 0.5, 0.5)


def test_bootstrap_is_deterministic_and_each_algo_independent_of_the_others():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    one = stratified_bootstrap_ci({"a": a, "b": b}, iqm, reps=300, seed=7)
    again = stratified_bootstrap_ci({"a": a, "b": b}, iqm, reps=300, seed=7)
    alone = stratified_bootstrap_ci({"a": a}, iqm, reps=300, seed=7)
    other = stratified_bootstrap_ci({"a": a}, iqm, reps=300, seed=8)
    assert one == again
    assert one["a"] == alone["a"]  # adding an algorithm does not move another's interval
    assert (other["a"].low, other["a"].high) != (alone["a"].low, alone["a"].high)
    assert list(one) == ["a", "b"]


def test_bootstrap_interval_lies_inside_the_data_range_and_uses_the_confidence():
    a = np.array([[0.0], [1.0], [2.0], [3.0], [10.0]])
    wide = stratified_bootstrap_ci({"a": a}, mean, reps=500, confidence=0.95)["a"]
    narrow = stratified_bootstrap_ci({"a": a}, mean, reps=500, confidence=0.5)["a"]
    assert 0.0 <= wide.low < narrow.low < narrow.high < wide.high <= 10.0
    assert narrow.confidence == 0.5


def test_bootstrap_of_one_run_has_no_interval():
    # one seed says nothing about the spread between seeds (as mean_ci)
    ci = stratified_bootstrap_ci({"a": np.array([[3.0, 5.0]])}, mean)["a"]
    assert ci.mean == 4.0 and ci.n == 1
    assert math.isnan(ci.low) and math.isnan(ci.high)


def test_bootstrap_accepts_a_partial_aggregate():
    scores = np.array([[0.5, 2.0], [1.0, 0.0]])
    gap = functools.partial(optimality_gap, gamma=2.0)
    assert stratified_bootstrap_ci({"a": scores}, gap, reps=100)["a"].mean == pytest.approx(1.125)


def test_difference_ci_paired_removes_the_shared_luck():
    # y = x + 1 run by run: the paired resample takes the same runs of both, so every
    # resampled difference of means is exactly −1; independent resamples are not
    x = np.random.default_rng(3).normal(size=(6, 1))
    paired = aggregate_difference_ci(x, x + 1.0, mean, paired=True, reps=300)
    independent = aggregate_difference_ci(x, x + 1.0, mean, paired=False, reps=300)
    assert paired.mean == pytest.approx(-1.0) and paired.method == "paired-bootstrap"
    assert paired.low == pytest.approx(-1.0) and paired.high == pytest.approx(-1.0)
    assert independent.method == "bootstrap" and independent.n == 12
    assert independent.low < -1.0 - 0.1 and independent.high > -1.0 + 0.1


# ---- probability of improvement -----------------------------------------------------------
def test_probability_of_improvement_by_counting():
    # x = [1, 2, 3] vs y = [2, 2, 0], all 9 pairs (x_i, y_j):
    #   x=1: loses to 2, 2, beats 0          → 1
    #   x=2: ties 2, 2 (½ each), beats 0     → 2
    #   x=3: beats all three                 → 3
    # (1 + 2 + 3) / 9 = 2/3
    x, y = np.array([[1.0], [2.0], [3.0]]), np.array([[2.0], [2.0], [0.0]])
    assert probability_of_improvement(x, y) == pytest.approx(2 / 3, abs=1e-12)
    assert probability_of_improvement(y, x) == pytest.approx(1 / 3, abs=1e-12)


def test_probability_of_improvement_averages_over_tasks():
    # task 0: x always above → 1; task 1: both equal everywhere → ½; mean 0.75.
    # Different numbers of runs are fine (3 against 2).
    x = np.array([[5.0, 1.0], [6.0, 1.0], [7.0, 1.0]])
    y = np.array([[0.0, 1.0], [1.0, 1.0]])
    assert probability_of_improvement(x, y) == pytest.approx(0.75, abs=1e-12)


def test_probability_of_improvement_matches_mann_whitney():
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(4)
    x, y = rng.integers(0, 4, size=(7, 3)).astype(float), rng.integers(0, 4, size=(5, 3))
    u = [mannwhitneyu(x[:, m], y[:, m], alternative="greater").statistic for m in range(3)]
    assert probability_of_improvement(x, y) == pytest.approx(np.mean(u) / 35, abs=1e-12)


def test_probability_of_improvement_ci():
    # x above y on every run: every resample gives 1
    x, y = np.array([[3.0], [4.0], [5.0]]), np.array([[0.0], [1.0], [2.0]])
    ci = probability_of_improvement_ci(x, y, reps=200)
    assert (ci.mean, ci.low, ci.high) == (1.0, 1.0, 1.0)
    assert ci.method == "bootstrap" and ci.n == 6


def test_probability_of_improvement_ci_paired_resamples_seeds_jointly():
    # x equal to y seed by seed: a joint resample keeps them equal → exactly ½ each time;
    # independent resamples of x and y drift away from ½
    x = np.array([[0.0], [1.0], [2.0], [3.0]])
    paired = probability_of_improvement_ci(x, x.copy(), paired=True, reps=300)
    independent = probability_of_improvement_ci(x, x.copy(), reps=300)
    assert (paired.low, paired.high) == (0.5, 0.5) and paired.method == "paired-bootstrap"
    assert paired.n == 4
    assert independent.low < 0.4 and independent.high > 0.6


# ---- performance profile ------------------------------------------------------------------
def test_performance_profile_by_hand():
    # values 0, 1, 2, 3: share strictly above τ = −1: 4/4, 0: 3/4, 1.5: 2/4, 3: 0/4
    scores = np.array([[0.0, 1.0], [2.0, 3.0]])
    np.testing.assert_allclose(performance_profile(scores, [-1, 0, 1.5, 3]), [1, 0.75, 0.5, 0])


def test_performance_profile_band():
    scores = np.array([[0.0], [1.0], [2.0], [3.0], [4.0]])
    taus = [-1.0, 1.5, 10.0]
    profile, low, high = performance_profile_band(scores, taus, reps=300)
    np.testing.assert_allclose(profile, [1.0, 0.6, 0.0])
    # nothing is ever ≤ −1 or > 10, in any resample: the band is the point there
    assert (low[0], high[0], low[2], high[2]) == (1.0, 1.0, 0.0, 0.0)
    assert low[1] < 0.6 < high[1]


# ---- Holm–Bonferroni ----------------------------------------------------------------------
def test_holm_by_hand():
    # sorted: 0.01 (1st), 0.03 (3rd), 0.04 (2nd); m = 3
    #   0.01·3 = 0.03;  0.03·2 = 0.06;  0.04·1 = 0.04 → running max 0.06
    # back in the input order: [0.03, 0.06, 0.06]; only the first is ≤ 0.05
    adjusted, reject = holm_bonferroni([0.01, 0.04, 0.03])
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06], atol=1e-15)
    assert reject == [True, False, False]


def test_holm_caps_at_one_and_leaves_nan_out_of_the_family():
    # the nan is not a test: m = 2 → 0.02·2 = 0.04, then max(0.04, 0.7·1) = 0.7
    adjusted, reject = holm_bonferroni([0.7, float("nan"), 0.02])
    assert adjusted[0] == pytest.approx(0.7) and adjusted[2] == pytest.approx(0.04)
    assert math.isnan(adjusted[1]) and reject == [False, False, True]
    assert holm_bonferroni([0.6, 0.9])[0] == [1.0, 1.0]  # 0.6·2 = 1.2 → 1
    assert holm_bonferroni([]) == ([], [])


@PROPERTY
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8))
def test_holm_properties(p):
    adjusted, reject = holm_bonferroni(p, alpha=0.05)
    order = np.argsort(p, kind="stable")
    assert all(a >= q for a, q in zip(adjusted, p, strict=True))  # never smaller than the raw p
    assert all(a <= 1.0 for a in adjusted)
    assert np.all(np.diff(np.asarray(adjusted)[order]) >= 0)  # monotone in the raw p
    assert reject == [a <= 0.05 for a in adjusted]
    assert (min(p) * len(p) <= 0.05) == any(reject)  # Holm rejects anything iff Bonferroni does


# ---- paired t p-value ---------------------------------------------------------------------
def test_paired_t_pvalue_by_hand():
    # d = 1, 2, 3: mean 2, s = 1, t = 2/(1/√3) = √12, df = 2. Student t with 2 df has
    # F(t) = ½ + t / (2√(2 + t²)), so p = 2(1 − F) = 1 − √12/√14 = 1 − √(6/7) = 0.0741799...
    assert paired_t_pvalue([1.0, 2.0, 3.0]) == pytest.approx(1 - math.sqrt(6 / 7), abs=1e-12)
    assert paired_t_pvalue([-1.0, -2.0, -3.0]) == pytest.approx(1 - math.sqrt(6 / 7), abs=1e-12)


def test_paired_t_pvalue_edge_cases():
    assert math.isnan(paired_t_pvalue([1.5]))
    assert math.isnan(paired_t_pvalue([]))
    # zero spread: the t interval is the point, so p agrees with "interval excludes 0"
    assert paired_t_pvalue([0.2, 0.2, 0.2]) == 0.0
    assert paired_t_pvalue([0.0, 0.0]) == 1.0


# ---- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: stratified_bootstrap_ci({}, mean), "scores_by_algo"),
        (lambda: stratified_bootstrap_ci({"a": np.zeros((0, 2))}, mean), "scores"),
        (lambda: stratified_bootstrap_ci({"a": np.zeros(3)}, mean), "2-D"),
        (lambda: stratified_bootstrap_ci({"a": np.array([[np.nan]])}, mean), "finite"),
        (
            lambda: stratified_bootstrap_ci({"a": np.zeros((2, 2)), "b": np.zeros((2, 3))}, mean),
            "tasks",
        ),
        (lambda: stratified_bootstrap_ci({"a": np.zeros((2, 1))}, mean, reps=99), "reps"),
        (lambda: stratified_bootstrap_ci({"a": np.zeros((2, 1))}, mean, confidence=1.0), "conf"),
        (lambda: stratified_bootstrap_ci({"a": np.zeros((2, 1))}, mean, confidence=0), "conf"),
        (lambda: stratified_bootstrap_ci({"a": np.zeros((2, 1))}, np.mean), "aggregate"),
        (lambda: probability_of_improvement(np.zeros((2, 2)), np.zeros((2, 1))), "tasks"),
        (lambda: probability_of_improvement(np.zeros((2, 1)), np.zeros((0, 1))), "y"),
        (
            lambda: probability_of_improvement_ci(np.zeros((2, 1)), np.zeros((3, 1)), paired=True),
            "paired",
        ),
        (lambda: aggregate_difference_ci(np.zeros((2, 1)), np.zeros((3, 1)), mean), "paired"),
        (lambda: performance_profile(np.zeros((2, 1)), []), "taus"),
        (lambda: holm_bonferroni([0.5, 1.2]), "p_values"),
        (lambda: holm_bonferroni([0.5], alpha=1.5), "alpha"),
        (lambda: paired_t_pvalue([1.0, np.nan]), "differences"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
