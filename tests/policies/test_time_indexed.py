"""Time-indexed Gaussian policy (policies/time_indexed.py; §0.6, §8)."""

from __future__ import annotations

import pytest
import torch

from policylab.policies.time_indexed import TimeIndexedGaussian, gaussian_kl, gaussian_log_prob


def test_log_prob_and_kl_match_torch_distributions():
    g = torch.Generator().manual_seed(0)
    m0, m1, a = (torch.randn(4, 3, generator=g, dtype=torch.float64) for _ in range(3))
    s0, s1 = (0.3 * torch.randn(4, 3, generator=g, dtype=torch.float64) for _ in range(2))
    d0 = torch.distributions.Normal(m0, s0.exp())
    d1 = torch.distributions.Normal(m1, s1.exp())
    assert torch.allclose(gaussian_log_prob(a, m0, s0), d0.log_prob(a).sum(-1))
    assert torch.allclose(
        gaussian_kl(m0, s0, m1, s1), torch.distributions.kl_divergence(d0, d1).sum(-1)
    )
    assert torch.allclose(gaussian_kl(m0, s0, m0, s0), torch.zeros(4, dtype=torch.float64))


def test_one_head_per_epoch_with_the_code_initialisation():
    torch.manual_seed(0)
    pi = TimeIndexedGaussian(obs_dim=8, act_dim=10, horizon=3)
    assert len(pi.heads) == 3 and pi.heads[0] is not pi.heads[1]
    obs = torch.randn(5, 8, dtype=torch.float64)
    mean, log_std = pi.head(2)(obs)
    assert mean.shape == (5, 10) and torch.all(log_std == 0)  # state-independent, log-std 0
    assert torch.all(pi.heads[0].mean.bias == 0)
    assert pi.heads[0].mean.weight.abs().max() < 0.1 * 0.25 + 1e-12  # 0.1 × U(±1/√16)
    assert torch.equal(pi.greedy(obs, 1), pi.head(1)(obs)[0])
    # samples come from the passed generator: same seed, same draw
    a = pi.sample(obs, 0, torch.Generator().manual_seed(3))
    b = pi.sample(obs, 0, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)


def test_block_schedules():
    assert TimeIndexedGaussian(4, 2, 3).blocks() == [0, 1, 2]
    assert TimeIndexedGaussian(4, 2, 3, block_schedule="backward").blocks() == [2, 1, 0]
    with pytest.raises(ValueError, match="block_schedule = 'sideways'.*simultaneous, backward"):
        TimeIndexedGaussian(4, 2, 3, block_schedule="sideways")
