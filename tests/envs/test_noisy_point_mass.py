"""NoisyPointMass and its exact optimal archive (papers/seed_control_theory.md §9.3, T9.3)."""

import math

import pytest
import torch

from policylab.envs.noisy_point_mass import (
    NoisyPointMass,
    gaussian_logp,
    optimal_cell_fitness,
    rollout,
)
from policylab.search.reprl import mlp_numel

D = torch.float64


def constant_actor(env: NoisyPointMass, action) -> torch.Tensor:
    """Zero weights, output bias atanh(a): the mean action is a at every step."""
    params = torch.zeros(mlp_numel(env.sizes), dtype=D)
    params[-2:] = torch.atanh(torch.tensor(action, dtype=D))
    return params


def test_t9_3_optimal_cells():
    best = optimal_cell_fitness(10).reshape(10, 10)
    assert float(best[5, 5]) == 1.0  # the cell [0, 0.2]² contains m = 0
    assert float(best[9, 9]) == pytest.approx(1 - 1.28 / 2)  # [0.8, 1]²: 0.36
    # per axis the nearest |m| is 0.8, 0.6, 0.4, 0.2, 0, 0, 0.2, …: Σd² = 2.4 per axis,
    # so Σ_cells (1 − (d_i² + d_j²)/2) = 100 − 10·2.4 = 76
    assert float(best.sum()) == pytest.approx(76.0)


def test_optimum_needs_reachable_measures():
    with pytest.raises(ValueError, match="low, high"):
        optimal_cell_fitness(10, -2.0, 2.0)


def test_constant_action_reaches_its_cell_optimum_without_noise():
    env = NoisyPointMass(sigma=0.0)
    out = rollout(env, constant_actor(env, [0.6, 0.0])[None], 2, torch.Generator())
    # f = 1 − 0.36/2 = 0.82, m = displacement/T = a
    assert out["f"][0].tolist() == pytest.approx([0.82, 0.82])
    assert out["m"][0, 0].tolist() == pytest.approx([0.6, 0.0])


def test_noise_moves_the_measure_not_the_objective():
    env = NoisyPointMass(sigma=0.1)
    out = rollout(env, constant_actor(env, [0.6, 0.0])[None], 400, torch.Generator().manual_seed(0))
    assert out["f"].unique().numel() == 1  # f depends on the actions only
    spread = out["m"][0].std(0)  # σ/√T = 0.1/√50 ≈ 0.0141 per axis
    assert spread.tolist() == pytest.approx([0.1 / math.sqrt(50)] * 2, rel=0.15)


def test_jensen_a_varying_policy_stays_below_the_optimum():
    env = NoisyPointMass(sigma=0.0)
    g = torch.Generator().manual_seed(1)
    params = torch.randn(8, mlp_numel(env.sizes), generator=g, dtype=D)
    out = rollout(env, params, 1, g)
    f, m = out["f"][:, 0], out["m"][:, 0]
    assert bool((f <= 1 - (m**2).sum(-1) / 2 + 1e-12).all())


def test_sampled_actions_are_clipped_in_the_rewards_and_logp_is_gaussian():
    env = NoisyPointMass(sigma=0.0)
    out = rollout(env, constant_actor(env, [0.0, 0.0])[None], 4, torch.Generator(), std=5.0)
    assert bool((out["rewards"][..., 1:].abs() <= 1).all())
    assert bool((out["rewards"][..., 0] >= 0).all())
    a, mu = torch.tensor([[0.3, -1.2]], dtype=D), torch.tensor([[0.1, 0.4]], dtype=D)
    want = torch.distributions.Normal(mu, 0.7).log_prob(a).sum(-1)
    assert torch.allclose(gaussian_logp(a, mu, 0.7), want)


def test_bad_settings_name_the_field():
    with pytest.raises(ValueError, match="sigma"):
        NoisyPointMass(sigma=-0.1)
    with pytest.raises(ValueError, match="horizon"):
        NoisyPointMass(horizon=0)
