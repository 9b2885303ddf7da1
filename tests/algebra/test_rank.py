"""Rank-GRPO's rank rewards, per-rank advantages and rank-level ratio
(papers/seed_llm_algorithms.md §19.6, G = 3 rows of one prompt, N = 3)."""

from __future__ import annotations

import math

import pytest
import torch

from policylab import advantages
from policylab.algebra.catalogue import advantage_estimators
from policylab.algebra.rank import (
    clipped_surrogate,
    list_dcg,
    rank_advantages,
    rank_discounts,
    rank_rewards,
    rank_token_advantages,
    segment_log_ratio,
)
from policylab.rollouts import Rollouts

REL = torch.tensor([[1.0, 0, 1], [0, 1, 0], [0, 0, 0]])
GROUP = torch.zeros(3, dtype=torch.long)


def test_discounts():
    assert rank_discounts(3).tolist() == pytest.approx([1.0, 0.630930, 0.5], abs=1e-6)


def test_t19_1_rewards():
    assert torch.equal(rank_rewards(REL, "exp_inf"), REL.double())
    # log_decay row 0: rank 1 = 1 + 0.5 (rank 3's item) = 1.5; ranks 2, 3 = 0.5
    expected = [[1.5, 0.5, 0.5], [0.630930, 0.630930, 0], [0, 0, 0]]
    assert rank_rewards(REL, "log_decay").tolist() == [pytest.approx(r, abs=1e-6) for r in expected]
    with pytest.raises(ValueError, match="kind = 'dcg'.*exp_inf"):
        rank_rewards(REL, "dcg")


def test_t19_2_advantages():
    # exp_inf: mean 1/3, std 0.577350 per rank → (2/3)/(0.57735 + 1e-4) = 1.154501
    exp_inf = rank_advantages(rank_rewards(REL, "exp_inf"), GROUP)
    hi, lo = 1.154501, -0.577250
    expected = [[hi, lo, hi], [lo, hi, lo], [lo, lo, lo]]
    assert exp_inf.tolist() == [pytest.approx(r, abs=1e-6) for r in expected]
    log_decay = rank_advantages(rank_rewards(REL, "log_decay"), GROUP)
    expected = [
        [1.048385, 0.369362, 1.154301],
        [-0.105384, 0.762461, -0.577150],
        [-0.943001, -1.131823, -0.577150],
    ]
    assert log_decay.tolist() == [pytest.approx(r, abs=1e-6) for r in expected]


def test_t19_2_non_causal_contrast_with_grpo_on_dcg():
    dcg = list_dcg(REL)
    assert dcg.tolist() == pytest.approx([1.5, 0.630930, 0.0], abs=1e-6)
    grpo = advantages("component:grpo", eps=1e-4)(rewards=dcg, group_ids=GROUP)
    assert float(grpo[0]) == pytest.approx(1.048385, abs=1e-6)  # the whole row, rank 2 too
    assert float(rank_advantages(rank_rewards(REL), GROUP)[0, 1]) == pytest.approx(
        -0.577250, abs=1e-6
    )


def test_singleton_group_and_unscaled():
    R = torch.tensor([[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]])
    adv = rank_advantages(R, torch.tensor([0, 0, 1]), scale=False)
    assert adv.tolist() == [[0.5, -0.5], [-0.5, 0.5], [0.0, 0.0]]


def test_t19_3_ratio_and_clipping():
    # row 0: rank 0 has three tokens, rank 1 two tokens, then one overflow token (seg 5)
    lp = torch.tensor([[0.1, -0.3, 0.2, 0.2, 0.4, 0.7]], dtype=torch.float64)
    old = torch.zeros_like(lp)
    seg = torch.tensor([[0, 0, 0, 1, 1, 5]])
    mask = torch.ones_like(lp)
    log_rho = segment_log_ratio(lp, old, seg, mask, n=3)
    assert log_rho.tolist()[0] == pytest.approx([0, 0, 0, 0.3, 0.3, 0.7], abs=1e-12)
    assert math.exp(float(log_rho[0, 3])) == pytest.approx(1.349859, abs=1e-6)
    A = torch.tensor([[1.048385] * 3 + [0.369362] * 2 + [0.0]], dtype=torch.float64)
    loss = clipped_surrogate(log_rho, A, 0.06, 0.08)
    assert float(loss[0, 0]) == pytest.approx(-1.048385, abs=1e-6)
    assert float(loss[0, 3]) == pytest.approx(-0.398911, abs=1e-6)  # clipped at 1.08
    neg = clipped_surrogate(log_rho, torch.full_like(A, -0.5), 0.06, 0.08)
    assert float(neg[0, 3]) == pytest.approx(0.674929, abs=1e-6)  # unclipped branch


def test_segment_ratio_ignores_masked_tokens():
    lp = torch.tensor([[0.2, 5.0]])
    ratio = segment_log_ratio(
        lp, torch.zeros_like(lp), torch.tensor([[0, 0]]), torch.tensor([[1.0, 0.0]]), 2
    )
    assert ratio.tolist() == [pytest.approx([0.2, 0.0])]


def test_registered_estimator_maps_ranks_to_tokens():
    assert "rank_grpo" in advantage_estimators
    seg = torch.tensor([[0, 0, 1, 2, 3], [0, 1, 1, 2, -1], [0, 1, 2, 2, 2]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]).double()
    rollouts = Rollouts(
        rewards=torch.zeros(3),
        response_mask=mask,
        group_ids=GROUP,
        segment_ids=seg,
        extras={"rank_rewards": rank_rewards(REL)},
    )
    A = advantages("component:rank_grpo")(rollouts)
    hi, lo = 1.154501, -0.577250
    # row 0: ranks 0,0,1,2 then an overflow token (seg 3 ≥ N) with A = 0
    assert A[0].tolist() == pytest.approx([hi, hi, lo, hi, 0.0], abs=1e-6)
    assert A[1].tolist() == pytest.approx([lo, hi, hi, lo, 0.0], abs=1e-6)
    assert torch.equal(
        A, rank_token_advantages(rank_advantages(rank_rewards(REL), GROUP), seg, mask)
    )


def test_registered_estimator_names_missing_columns():
    rollouts = Rollouts(rewards=torch.zeros(2), response_mask=torch.ones(2, 3))
    with pytest.raises(ValueError, match="rank_rewards"):
        advantages("component:rank_grpo")(rollouts)


def test_t19_3_through_the_registered_loss():
    from policylab import policy_loss

    # row 0: rank 1 tokens (log-ratios 0.1, −0.3, 0.2: ρ = 1), rank 2 tokens (0.2, 0.4: ρ = e^0.3)
    lp = torch.tensor([[0.1, -0.3, 0.2, 0.2, 0.4]], dtype=torch.float64, requires_grad=True)
    old = torch.zeros(1, 5, dtype=torch.float64)
    A = torch.tensor([[1.048385] * 3 + [0.369362] * 2], dtype=torch.float64)
    rollouts = Rollouts(
        rewards=torch.zeros(1), response_mask=torch.ones(1, 5), segment_ids=[[0, 0, 0, 1, 1]]
    )
    loss_fn = policy_loss(
        "component:rank_ppo_clip", eps_low=0.06, eps_high=0.08, rank_list_length=3
    )
    loss, metrics = loss_fn(lp, old, A, torch.ones(1, 5), rollouts=rollouts)
    # token-mean of [−1.048385 × 3, −0.398911 × 2]
    assert float(loss.detach()) == pytest.approx((3 * -1.048385 + 2 * -0.398911) / 5, abs=1e-6)
    assert metrics["pg/clipfrac_high"] == pytest.approx(0.4)
    # rank 2 is clipped: no gradient. Rank 1: its 3 tokens each carry ρ = exp(mean ℓ), so
    # ∂(Σ_t −Aρ/5)/∂ℓ_j = 3 · (−A/5) · ρ · (1/3) = −A/5 for each of its tokens
    loss.backward()
    assert lp.grad[0].tolist() == pytest.approx([-1.048385 / 5] * 3 + [0.0, 0.0], abs=1e-6)
    with pytest.raises(ValueError, match="segment_ids"):
        loss_fn(lp, old, A, torch.ones(1, 5))
