"""Risk-seeking PG's pieces (papers/seed_control_theory.md §6.1, T6.1): the
(1 − ε)-quantile baseline and the top-quantile selection."""

import numpy as np
import pytest
import torch

from policylab.algebra.advantages import (
    QuantileBaselineOptions,
    quantile_baseline_advantages,
    reward_quantile,
)
from policylab.algebra.catalogue import advantage_estimators, selections
from policylab.algebra.selection import TopQuantileOptions, stage_of, top_quantile
from policylab.rollouts import Rollouts

R = [0.1, 0.5, 0.9, 0.3, 0.7]


def batch(rewards, T=3):
    r = torch.tensor(rewards, dtype=torch.float64)
    return Rollouts(
        rewards=r,
        response_mask=torch.ones(len(rewards), T),
        group_ids=torch.zeros(len(r), dtype=torch.long),
    )


def kept_and_weights(rewards, eps):
    rollouts = batch(rewards)
    adv = quantile_baseline_advantages(rollouts, QuantileBaselineOptions(epsilon=eps))
    sel = top_quantile(rollouts, adv, TopQuantileOptions(epsilon=eps))
    rows = sel.row_keep.nonzero(as_tuple=True)[0]
    return rollouts.rewards[rows].tolist(), adv[rows, 0].tolist(), sel


def test_t6_1_eps_0_4():
    # sorted [0.1, 0.3, 0.5, 0.7, 0.9]; index ⌈0.6·4⌉ = ⌈2.4⌉ = 3 → R_ε = 0.7
    assert float(reward_quantile(torch.tensor(R, dtype=torch.float64), 0.4)) == 0.7
    kept, weights, sel = kept_and_weights(R, 0.4)
    assert kept == [0.9, 0.7]
    assert weights == pytest.approx([0.2, 0.0], abs=1e-12)
    assert sel.metrics["rs/quantile"] == 0.7 and sel.metrics["rs/kept_frac"] == 0.4


def test_t6_1_eps_0_2():
    # index ⌈0.8·4⌉ = ⌈3.2⌉ = 4 → R_ε = 0.9: only the best row, with weight 0
    kept, weights, _ = kept_and_weights(R, 0.2)
    assert kept == [0.9]
    assert weights == [0.0]


def test_ties_at_the_quantile_are_all_kept():
    kept, weights, _ = kept_and_weights([0.2, 0.7, 0.7, 0.7, 0.1], 0.2)
    assert kept == [0.7, 0.7, 0.7]
    assert weights == [0.0, 0.0, 0.0]


def test_all_equal_rewards_give_zero_advantages_and_keep_every_row():
    kept, weights, _ = kept_and_weights([0.4] * 6, 0.1)
    assert kept == [0.4] * 6 and weights == [0.0] * 6


def test_nan_rewards_are_left_out_and_dropped():
    rollouts = batch([float("nan"), 0.1, 0.9])
    adv = quantile_baseline_advantages(rollouts, QuantileBaselineOptions(epsilon=0.5))
    sel = top_quantile(rollouts, adv, TopQuantileOptions(epsilon=0.5))
    # finite [0.1, 0.9]: index ⌈0.5·1⌉ = 1 → R_ε = 0.9
    assert adv[:, 0].tolist() == pytest.approx([0.0, -0.8, 0.0])
    assert sel.row_keep.tolist() == [False, False, True]


def test_advantage_is_zero_on_masked_tokens():
    rollouts = batch([0.1, 0.9]).replace(response_mask=torch.tensor([[1.0, 0.0], [1.0, 1.0]]))
    adv = quantile_baseline_advantages(rollouts, QuantileBaselineOptions(epsilon=0.5))
    assert torch.allclose(adv, torch.tensor([[-0.8, 0.0], [0.0, 0.0]], dtype=adv.dtype))


@pytest.mark.parametrize("seed", range(20))
def test_quantile_matches_numpy_higher(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    r = rng.choice([0.0, 0.25, 0.5, 1.0], size=n) if seed % 2 else rng.random(n)
    eps = float(rng.choice([0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 1.0]))
    expected = np.quantile(r, 1 - eps, method="higher")
    assert float(reward_quantile(torch.tensor(r), eps)) == expected
    keep = top_quantile(batch(list(r)), None, TopQuantileOptions(epsilon=eps)).row_keep
    assert keep.tolist() == list(r >= expected)
    assert keep.sum() >= 1  # the best row is always kept


def test_registered_and_run_after_the_advantage():
    assert "quantile_baseline" in advantage_estimators
    assert "top_quantile" in selections
    assert stage_of(selections.get("top_quantile")) == "advantages"


@pytest.mark.parametrize("eps", [0.0, 1.5, -0.1])
def test_epsilon_outside_0_1_is_refused_by_name(eps):
    with pytest.raises(ValueError, match="epsilon"):
        QuantileBaselineOptions(epsilon=eps)
    with pytest.raises(ValueError, match="epsilon"):
        TopQuantileOptions(epsilon=eps)
