"""The AC-Flow critic (policies/flow_critic.py, papers/seed_generative.md G3.1, test F2)."""

from __future__ import annotations

import pytest
import torch

from policylab.policies.diffusion import time_embedding
from policylab.policies.flow_critic import ValueHead, chain_points, critic_loss


def test_f2_critic_loss_by_hand():
    # V − R̃ = [0.5 − 1, 0.2 − 0, −1.5 + 1] = [−0.5, 0.2, −0.5]; squares 0.25, 0.04, 0.25;
    # mean 0.54 / 3 = 0.18
    values = torch.tensor([0.5, 0.2, -1.5], dtype=torch.float64)
    targets = torch.tensor([1.0, 0.0, -1.0], dtype=torch.float64)
    assert critic_loss(values, targets).item() == pytest.approx(0.18, abs=1e-12)


def test_value_head_starts_at_zero_and_reads_the_time_embedding():
    torch.manual_seed(0)
    head = ValueHead(2, cond_dim=3)
    assert [m.out_features for m in head.net if isinstance(m, torch.nn.Linear)] == [128, 128, 1]
    x, tau, c = torch.randn(5, 2), torch.rand(5, 1), torch.randn(5, 3)
    assert torch.equal(head(x, tau, c), torch.zeros(5))  # head initialised at zero
    # the input is [c, x, time_embedding(τ)], as DiffusionPolicy's velocity net reads it
    first = head.net[0]
    expected = first(torch.cat([c, x, time_embedding(tau)], -1))
    hidden = {}
    first.register_forward_hook(lambda m, i, o: hidden.setdefault("out", o))
    head(x, tau, c)
    assert torch.equal(hidden["out"], expected)


def test_value_head_refuses_a_bad_size():
    with pytest.raises(ValueError, match="ValueHead: dim = 0"):
        ValueHead(0)


def test_chain_points_put_tau_one_at_the_sample():
    # two chains of K = 2 steps: states at τ = 0, 0.5, 1 (the sample itself)
    chain = torch.arange(12, dtype=torch.float32).reshape(2, 3, 2)
    cond = torch.tensor([[1.0], [2.0]])
    x, tau, c = chain_points(chain, cond)
    assert tau.squeeze(-1).tolist() == [0.0, 0.5, 1.0, 0.0, 0.5, 1.0]
    assert torch.equal(x[2], chain[0, -1]) and torch.equal(x[5], chain[1, -1])
    assert c.squeeze(-1).tolist() == [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
    assert chain_points(chain, None)[2] is None
