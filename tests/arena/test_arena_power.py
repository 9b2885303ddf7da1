"""Power of the arena's paired design (policylab.arena.power), against independent routes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from policylab.arena.power import (
    minimal_detectable_effect,
    paired_t_power,
    pilot_sd,
    power_line,
    seeds_for_power,
)

Z975, Z80 = 1.959963984540054, 0.8416212335729143  # standard normal quantiles


def _normal_power(effect: float, sd: float, n: int, z: float = Z975) -> float:
    # large-n approximation: the t statistic ≈ N(δ, 1) with δ = effect·√n / sd
    delta = effect * math.sqrt(n) / sd
    return float(sps.norm.cdf(delta - z) + sps.norm.cdf(-delta - z))


# ---- paired_t_power -----------------------------------------------------------------------
def test_power_effect_one_sd_ten_pairs_matches_the_tables():
    # d_z = 1, n = 10, two-sided α = 0.05: 0.8031 (G*Power, "t tests – matched pairs")
    assert paired_t_power(1.0, 1.0, 10) == pytest.approx(0.8031, abs=5e-4)
    assert paired_t_power(-2.0, 2.0, 10) == paired_t_power(2.0, 2.0, 10)  # two-sided: |effect|


def test_power_against_monte_carlo():
    # simulate the test itself: 20 000 arenas of 10 paired differences N(0.7, 1), count how
    # often |t| > t_{0.975, 9}; binomial SE ≈ √(0.6·0.4/20000) = 0.0035
    rng = np.random.default_rng(0)
    d = rng.normal(0.7, 1.0, size=(20_000, 10))
    t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(10))
    simulated = float(np.mean(np.abs(t) > sps.t.ppf(0.975, 9)))
    assert paired_t_power(0.7, 1.0, 10) == pytest.approx(simulated, abs=0.015)


def test_power_approaches_the_normal_approximation_for_many_pairs():
    # n = 400: t_{399} ≈ normal; the normal route gives Φ(0.15·20 − 1.96) + Φ(−3 − 1.96)
    assert paired_t_power(0.15, 1.0, 400) == pytest.approx(_normal_power(0.15, 1.0, 400), abs=3e-3)


def test_power_at_no_effect_is_alpha():
    # δ = 0: the noncentral t is the t, and P(|T| > t_{1−α/2}) = α by definition
    assert paired_t_power(0.0, 1.0, 5, alpha=0.05) == pytest.approx(0.05, abs=1e-12)
    assert paired_t_power(0.0, 3.0, 12, alpha=0.1) == pytest.approx(0.1, abs=1e-12)


def test_power_grows_with_pairs_and_with_effect_and_shrinks_with_sd():
    by_n = [paired_t_power(0.5, 1.0, n) for n in range(2, 30)]
    assert np.all(np.diff(by_n) > 0)
    assert paired_t_power(0.8, 1.0, 6) > paired_t_power(0.5, 1.0, 6)
    assert paired_t_power(0.5, 2.0, 6) < paired_t_power(0.5, 1.0, 6)


def test_power_far_beyond_the_threshold_is_one():
    # δ = 3·√400 = 60: scipy's nct.cdf is nan that far in the lower tail, which is < Φ(−60)
    assert paired_t_power(3.0, 1.0, 400) == 1.0
    # 2 seeds, δ = 8·√2 = 11.3 (nan region too) but t_{0.975, 1} = 12.71: far from 1.
    # Monte Carlo of the test, 20 000 pairs of N(8, 1); binomial SE ≈ 0.0035
    d = np.random.default_rng(1).normal(8.0, 1.0, size=(20_000, 2))
    t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(2))
    simulated = float(np.mean(np.abs(t) > sps.t.ppf(0.975, 1)))
    assert paired_t_power(8.0, 1.0, 2) == pytest.approx(simulated, abs=0.015)


def test_power_with_no_spread():
    # every pair differs by exactly the effect: the test (p = 0, as paired_t_pvalue) always
    # rejects when the effect is nonzero and never when it is zero
    assert paired_t_power(0.3, 0.0, 3) == 1.0
    assert paired_t_power(0.0, 0.0, 3) == 0.0


# ---- seeds_for_power ----------------------------------------------------------------------
def test_seeds_for_power_matches_the_tables():
    # G*Power, matched pairs, two-sided α = 0.05, power 0.8: d_z = 1 → 10, d_z = 0.5 → 34
    assert seeds_for_power(1.0, 1.0) == 10
    assert seeds_for_power(0.5, 1.0) == 34
    assert seeds_for_power(0.1, 0.0) == 2  # no spread: the smallest testable arena


def test_seeds_for_power_is_the_smallest_n():
    for effect, sd in [(1.0, 1.0), (0.3, 0.5), (2.0, 1.0), (0.25, 1.0)]:
        n = seeds_for_power(effect, sd, power=0.9)
        assert paired_t_power(effect, sd, n) >= 0.9
        assert n == 2 or paired_t_power(effect, sd, n - 1) < 0.9


def test_seeds_for_power_is_monotone():
    by_sd = [seeds_for_power(1.0, sd) for sd in (0.2, 0.5, 1.0, 1.5, 2.0, 3.0)]
    by_effect = [seeds_for_power(effect, 1.0) for effect in (0.4, 0.6, 1.0, 1.5, 3.0)]
    assert by_sd == sorted(by_sd) and by_sd[0] < by_sd[-1]
    assert by_effect == sorted(by_effect, reverse=True) and by_effect[0] > by_effect[-1]


def test_seeds_for_power_beyond_the_limit_says_so():
    with pytest.raises(ValueError, match="max_seeds"):
        seeds_for_power(0.01, 1.0)
    # Guenther's approximation n ≈ ((z_{0.975} + z_{0.8}) / d)² + z_{0.975}²/2
    # = (2.80158/0.25)² + 1.92 = 125.58 + 1.92 = 127.5 → 128
    assert seeds_for_power(0.25, 1.0, max_seeds=200) == 128


# ---- minimal_detectable_effect ------------------------------------------------------------
@pytest.mark.parametrize(("sd", "n", "power"), [(1.0, 3, 0.8), (0.4, 10, 0.8), (2.0, 5, 0.9)])
def test_minimal_detectable_effect_inverts_the_power(sd, n, power):
    mde = minimal_detectable_effect(sd, n, power=power)
    assert paired_t_power(mde, sd, n) == pytest.approx(power, abs=1e-6)
    assert paired_t_power(0.99 * mde, sd, n) < power


def test_minimal_detectable_effect_normal_approximation_and_seed_count_agree():
    # n = 400: (z_{0.975} + z_{0.8})·sd/√n = 2.80158·0.5/20 = 0.07004
    assert minimal_detectable_effect(0.5, 400) == pytest.approx((Z975 + Z80) * 0.5 / 20, rel=0.01)
    # seeds_for_power at the MDE of 7 seeds gives 7 seeds back
    assert seeds_for_power(1.0001 * minimal_detectable_effect(1.0, 7), 1.0) == 7
    assert minimal_detectable_effect(0.0, 3) == 0.0
    assert minimal_detectable_effect(2.0, 6) == pytest.approx(2 * minimal_detectable_effect(1.0, 6))


# ---- pilot_sd -----------------------------------------------------------------------------
def test_pilot_sd_plans_for_the_noisiest_comparison():
    # "a": 1, 2, 3 → s = 1;  "b": 0, 4 → s² = (4 + 4)/1 = 8, s = 2√2;  "c": one pair, no s
    pilot = {"a": [1.0, 2.0, 3.0], "b": [0.0, 4.0], "c": [5.0]}
    assert pilot_sd(pilot) == pytest.approx(2 * math.sqrt(2), abs=1e-12)
    assert pilot_sd([[1.0, 2.0, 3.0]]) == pytest.approx(1.0, abs=1e-12)


def test_pilot_sd_upper_confidence_bound():
    # 3 pairs, s = 1: σ ≤ s·√((n−1)/χ²_{0.05, 2}); χ² with 2 df is exponential with mean 2,
    # so χ²_{0.05, 2} = −2 ln 0.95 and the bound is √(2 / (−2 ln 0.95)) = √(1/0.0512933) = 4.4154
    bound = pilot_sd({"a": [1.0, 2.0, 3.0]}, upper_confidence=0.95)
    assert bound == pytest.approx(math.sqrt(-1 / math.log(0.95)), abs=1e-9)
    assert bound == pytest.approx(4.41538, abs=1e-4)


# ---- power_line ---------------------------------------------------------------------------
def test_power_line_text():
    line = power_line(10, 1.0)
    mde = minimal_detectable_effect(1.0, 10)
    assert line == (
        f"with 10 seeds this arena can detect paired differences ≥ {mde:.3g} at 80 % power "
        "(two-sided α = 0.05, SD of paired differences 1 from these runs)"
    )
    assert f"≥ {mde:.3g} reward at 80 % power" in power_line(10, 1.0, unit="reward")
    assert "at 90 % power (two-sided α = 0.1" in power_line(5, 0.3, power=0.9, alpha=0.1)


# ---- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: paired_t_power(1.0, 1.0, 1), "n"),
        (lambda: paired_t_power(1.0, -1.0, 5), "sd"),
        (lambda: paired_t_power(float("nan"), 1.0, 5), "effect"),
        (lambda: paired_t_power(1.0, 1.0, 5, alpha=0.0), "alpha"),
        (lambda: seeds_for_power(0.0, 1.0), "effect"),
        (lambda: seeds_for_power(1.0, 1.0, power=1.0), "power"),
        (lambda: minimal_detectable_effect(1.0, 5, power=0.04), "power"),
        (lambda: minimal_detectable_effect(float("inf"), 5), "sd"),
        (lambda: pilot_sd({}), "differences_by_comparison"),
        (lambda: pilot_sd({"a": [1.0]}), "differences_by_comparison"),
        (lambda: pilot_sd({"a": [1.0, float("nan")]}), "finite"),
        (lambda: pilot_sd({"a": [1.0, 2.0]}, upper_confidence=1.0), "upper_confidence"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
