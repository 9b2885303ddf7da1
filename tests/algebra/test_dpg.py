"""DPG-T2I's tensor pieces (papers/seed_generative.md G5.3): P1 clean estimate, residual,
cost, a linear critic and the gradient through x̂_0 to ε̂; P2 the γ^t discount; properties."""

from __future__ import annotations

import pytest
import torch

from policylab.algebra import dpg


def test_p1_clean_estimate_residual_cost_and_linear_critic():
    # ᾱ = 0.64: √ᾱ = 0.8, √(1 − ᾱ) = 0.6
    x_t = torch.tensor([[0.5, -0.3]], dtype=torch.float64)
    eps_hat = torch.tensor([[0.2, 0.1]], dtype=torch.float64, requires_grad=True)
    x0 = torch.tensor([[0.4, -0.5]], dtype=torch.float64)
    x_hat = dpg.clean_estimate_eps(x_t, eps_hat, 0.64)
    # ((0.5 − 0.12)/0.8, (−0.3 − 0.06)/0.8) = (0.475, −0.45)
    assert torch.allclose(x_hat, torch.tensor([[0.475, -0.45]], dtype=torch.float64))
    rho = dpg.residual(x_hat, x0)  # (0.075², 0.05²)
    assert torch.allclose(rho, torch.tensor([[0.005625, 0.0025]], dtype=torch.float64))
    rec = dpg.look_forward_cost(x_hat, x0)
    assert rec.item() == pytest.approx(0.0040625)
    q = rho.sum(-1)  # a linear critic Q = Σρ
    assert q.item() == pytest.approx(0.008125)
    # (0.008125 − 0.0040625)² = 1.650390625e-05
    assert dpg.critic_loss(q.detach(), rec.detach()).item() == pytest.approx(1.65039e-05, rel=1e-4)
    (d_xhat,) = torch.autograd.grad(q, x_hat, retain_graph=True)  # 2(x̂ − x_0)
    assert torch.allclose(d_xhat, torch.tensor([[0.15, 0.1]], dtype=torch.float64))
    q.backward()  # through x̂_0 to ε̂: × (−0.6/0.8)
    assert torch.allclose(eps_hat.grad, torch.tensor([[-0.1125, -0.075]], dtype=torch.float64))


def test_p2_discount_and_the_first_row_quirk():
    t = torch.tensor([0.0, 500.0, 999.0])
    per_row = dpg.discount(t, 0.9986, per_row_gamma=True)
    assert per_row.tolist() == pytest.approx([1.0, 0.4963418, 0.2467006], abs=1e-7)
    code = dpg.discount(t, 0.9986)  # every row weighted by the first row's γ^{t_0}
    assert code.tolist() == [1.0, 1.0, 1.0]
    assert dpg.discount(t.flip(0)).tolist() == pytest.approx([0.2467006] * 3, abs=1e-7)


def test_per_row_gamma_is_the_code_when_rows_share_t():
    t = torch.full((4,), 321.0)
    assert torch.equal(dpg.discount(t), dpg.discount(t, per_row_gamma=True))


def test_clean_estimates_are_exact_at_the_true_noise_and_velocity():
    g = torch.Generator().manual_seed(0)
    x0, eps = torch.randn(5, 3, generator=g), torch.randn(5, 3, generator=g)
    a = torch.rand(5, 1, generator=g) * 0.9 + 0.05
    x_t = a.sqrt() * x0 + (1 - a).sqrt() * eps
    assert torch.allclose(dpg.clean_estimate_eps(x_t, eps, a), x0, atol=1e-5)
    tau = torch.rand(5, 1, generator=g)
    x_tau = tau * x0 + (1 - tau) * eps
    assert torch.allclose(dpg.clean_estimate_velocity(x_tau, tau, x0 - eps), x0, atol=1e-6)


def test_ddpm_timestep_maps_the_flow_ends():
    assert dpg.ddpm_timestep(torch.tensor([1.0, 0.5, 0.0])).tolist() == [0.0, 499.5, 999.0]


def test_actor_loss_weights_the_critic_and_adds_the_prior():
    q = torch.tensor([2.0, 4.0])
    w = torch.tensor([0.5, 0.5], dtype=torch.float64)
    # 1.0·0.3 + mean(1, 2) = 1.8
    assert dpg.actor_loss(torch.tensor(0.3), q, w).item() == pytest.approx(1.8)
    assert dpg.actor_loss(torch.tensor(0.3), q, w, w_prior=0.0).item() == pytest.approx(1.5)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="gamma"):
        dpg.discount(torch.zeros(2), 1.5)
    with pytest.raises(ValueError, match="alpha_bar"):
        dpg.clean_estimate_eps(torch.zeros(1, 2), torch.zeros(1, 2), 0.0)
    with pytest.raises(ValueError, match="critic_loss"):
        dpg.critic_loss(torch.zeros(2), torch.zeros(3))
