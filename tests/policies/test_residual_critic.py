"""CriticOnResidual (papers/seed_generative.md G5.1, G5.2): the code's layout and
initialisation at 8×8, its SGD fit, and the gradient it passes back to the residual."""

from __future__ import annotations

import pytest
import torch

from policylab.algebra import dpg
from policylab.policies.residual_critic import CriticOnResidual


def test_layout_and_positive_uniform_init():
    torch.manual_seed(0)
    critic = CriticOnResidual()
    # conv 9 + 1, fc 64·64 + 64, fc2 64 + 1
    assert sum(p.numel() for p in critic.parameters()) == 10 + 4160 + 65
    for module, fan in ((critic.conv, 9), (critic.fc, 64), (critic.fc2, 64)):
        for p in (module.weight, module.bias):
            assert p.min() >= 0.0 and p.max() <= 1.0 / fan
    q = critic(torch.rand(3, 64))
    assert q.shape == (3,) and (q > 0).all()  # positive weights on a positive residual


def test_sgd_regresses_the_look_forward_cost():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    critic = CriticOnResidual()
    opt = critic.optimizer()
    assert opt.param_groups[0]["lr"] == 0.01
    x0 = torch.randn(32, 64, generator=g)
    losses = []
    for _ in range(300):
        x_hat = x0 + 0.5 * torch.rand(32, 1, generator=g) * torch.randn(32, 64, generator=g)
        rho = dpg.residual(x_hat, x0)
        losses.append(critic.fit_step(opt, rho, dpg.look_forward_cost(x_hat, x0)))
    # SGD at lr 0.01 learns the mean cost first; the loss roughly halves in 300 steps
    assert sum(losses[-20:]) / 20 < 0.6 * sum(losses[:20]) / 20


def test_critic_gradient_reaches_the_clean_estimate_and_not_when_detached():
    critic = CriticOnResidual()
    x0 = torch.zeros(2, 64)
    x_hat = torch.full((2, 64), 0.5, requires_grad=True)
    critic(dpg.residual(x_hat, x0)).sum().backward()
    assert x_hat.grad.abs().sum() > 0
    opt = critic.optimizer()
    x_hat.grad = None
    critic.fit_step(opt, dpg.residual(x_hat, x0), torch.zeros(2))
    assert x_hat.grad is None  # the critic's fit reads a detached residual


def test_bad_shape_is_named():
    with pytest.raises(ValueError, match=r"residual \[B, 64\]"):
        CriticOnResidual()(torch.zeros(2, 10))
