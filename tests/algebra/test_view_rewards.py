"""AFGR's confidence-gain rewards and PPO loss (algebra/view_rewards.py;
papers/seed_control_theory.md §16.1, T16.1)."""

from __future__ import annotations

import math

import pytest
import torch

from policylab.algebra.view_rewards import (
    confidence_gain,
    discounted_returns,
    normalise_batch,
    view_ppo_loss,
)


def test_t16_1_rewards_returns_and_normalisation():
    conf = torch.tensor([[0.2], [0.5], [0.45]], dtype=torch.float64)  # [T = 3, B = 1]
    r = confidence_gain(conf)
    assert r[:, 0].tolist() == pytest.approx([0.3, -0.05])
    g = discounted_returns(r, 0.7)
    assert g[:, 0].tolist() == pytest.approx([0.265, -0.05])  # 0.3 + 0.7·(−0.05)
    # mean 0.1075, unbiased std √(2·0.1575²) = 0.222739 → ±0.1575/(0.222739 + 1e-5)
    assert normalise_batch(g)[:, 0].tolist() == pytest.approx([0.707075, -0.707075], abs=1e-6)


def test_returns_are_per_column():
    r = torch.tensor([[1.0, 0.0], [1.0, 2.0]])
    # column 0: [1 + 0.5·1, 1]; column 1: [0 + 0.5·2, 2]
    assert discounted_returns(r, 0.5).tolist() == [[1.5, 1.0], [1.0, 2.0]]


def test_loss_at_ratio_one():
    # A = R − V = [0.5, −1]; −A + ½(V − R)² = [−0.5 + 0.125, 1 + 0.5] → mean 0.5625
    z = torch.zeros(2, 1)
    loss = view_ppo_loss(z, z, torch.tensor([[1.0], [-1.0]]), torch.tensor([[0.5], [0.0]]), z)
    assert float(loss) == pytest.approx(0.5625)
    # entropy H = 2 → −1e-4·2 more
    loss_h = view_ppo_loss(
        z, z, torch.tensor([[1.0], [-1.0]]), torch.tensor([[0.5], [0.0]]), z + 2.0
    )
    assert float(loss_h) == pytest.approx(0.5625 - 2e-4)


def test_clipped_ratio_has_no_policy_gradient():
    # ρ = e^0.5 = 1.6487 > 1.2 with A = 1: the surrogate is the clipped 1.2, flat in logp
    logp = torch.tensor([[0.5]], requires_grad=True)
    loss = view_ppo_loss(
        logp, torch.zeros(1, 1), torch.ones(1, 1), torch.zeros(1, 1), torch.zeros(1, 1)
    )
    loss.backward()
    assert float(loss.detach()) == pytest.approx(-1.2 + 0.5)  # −1.2 + ½(0 − 1)²
    assert logp.grad.item() == 0.0
    # inside the clip: ∂(−ρA)/∂logp = −ρA = −e^0.1
    inside = torch.tensor([[0.1]], requires_grad=True)
    view_ppo_loss(
        inside, torch.zeros(1, 1), torch.ones(1, 1), torch.zeros(1, 1), torch.zeros(1, 1)
    ).backward()
    assert inside.grad.item() == pytest.approx(-math.exp(0.1))
