"""rewards/generated.py: ring_mode by hand, the shape and finiteness checks, the
differentiable flag (papers/seed_generative.md G0.6)."""

from __future__ import annotations

import math

import pytest
import torch

from policylab.rewards import generated as gen


def test_ring_mode_by_hand():
    pts = torch.tensor(
        [
            [2.0, 0.0],  # on mode 0 (good): 1
            [2.3, 0.0],  # 0.3 from mode 0: exp(−0.09/0.18) = exp(−0.5)
            [-2.0, 0.0],  # on mode 4 (bad): 0
            [0.0, 2.0],  # on mode 2 (good): 1
            [0.0, -2.0],  # mode 6 (bad): 0
        ]
    )
    r = gen.score("ring_mode", pts)
    assert torch.allclose(r, torch.tensor([1.0, math.exp(-0.5), 0.0, 1.0, 0.0]), atol=1e-6)


def test_ring_metrics_of_the_target_and_a_collapse():
    data = gen.ring_sample(4000, torch.Generator().manual_seed(0))
    m = gen.ring_metrics(data)
    assert m["div/mode_entropy"] == pytest.approx(math.log(8), abs=0.01)
    assert m["fid/on_manifold"] > 0.98  # 0.3 = 3σ: P(|N₂| < 3) = 1 − e^{−4.5} = 0.989
    assert m["ring/good_fraction"] == pytest.approx(3 / 8, abs=0.03)
    one = torch.tensor([[2.0, 0.0]]).repeat(50, 1)
    m1 = gen.ring_metrics(one)
    assert m1["div/mode_entropy"] == 0.0 and m1["reward/mean"] == 1.0


def test_bad_rewards_are_errors_that_name_the_reward():
    gen.add_reward(
        "_nan_test", lambda x, c: torch.full((x.shape[0],), float("nan")), differentiable=False
    )
    gen.add_reward(
        "_shape_test", lambda x, c: torch.zeros(x.shape[0], 1), differentiable=False, replace=True
    )
    x = torch.zeros(3, 2)
    with pytest.raises(ValueError, match="reward '_nan_test' returned 3 non-finite"):
        gen.score("_nan_test", x)
    with pytest.raises(ValueError, match=r"'_shape_test' returned shape \(3, 1\); expected \(3,\)"):
        gen.score("_shape_test", x)
    with pytest.raises(ValueError, match="'_nan_test' is not differentiable.*ring_mode"):
        gen.get_reward("_nan_test", need_gradient=True)
    with pytest.raises(ValueError, match=r"ring_mode scores 2-D points \[B, 2\]; got \(3, 3\)"):
        gen.score("ring_mode", torch.zeros(3, 3))
    with pytest.raises(ValueError, match="unknown generated-sample reward 'ring'"):
        gen.score("ring", x)


def test_ring_mode_gradient_points_to_the_mode():
    x = torch.tensor([[2.1, 0.0]], requires_grad=True)
    gen.get_reward("ring_mode", need_gradient=True).fn(x, None).sum().backward()
    assert x.grad[0, 0] < 0 and x.grad[0, 1] == 0
