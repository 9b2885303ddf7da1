"""NLL-to-PO algebra (papers/seed_generative.md G6.3 N1, N2): the PG inner loss and the
Gaussian optimal reward, with the spec's hand-computed numbers, then properties."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import Normal

from policylab.algebra import nll_po


def _n1():
    # π = N(0, 1), ŷ = [0.5, −1, 2] (M = 3 samples of one input), y = 1, U = 1
    y_hat = torch.tensor([[0.5], [-1.0], [2.0]])
    dist = Normal(0.0, 1.0)
    rewards = -((y_hat - 1.0) ** 2)  # [−0.25, −4, −1]
    return dist.log_prob(y_hat), rewards, dist.entropy().reshape(1)


def test_n1_pg_loss_normalize_and_none():
    logp, rewards, entropy = _n1()
    # −log π = [1.0439385, 1.4189385, 2.9189385]; H = 1.4189385
    assert torch.allclose(-logp.squeeze(), torch.tensor([1.0439385, 1.4189385, 2.9189385]))
    # normalize: T(r) = r − min = [3.75, 0, 3]
    assert torch.equal(nll_po.transform_rewards(rewards).squeeze(), torch.tensor([3.75, 0, 3]))
    # (1.0439385·3.75 + 0 + 2.9189385·3)/3 − 0.01·1.4189385 = 4.2096723
    loss = nll_po.pg_loss(logp, rewards, entropy, lam=0.01, transform="normalize")
    assert float(loss) == pytest.approx(4.2096723, abs=1e-6)
    # (−0.25·1.0439385 − 4·1.4189385 − 2.9189385)/3 − 0.0141894 = −2.9660818
    loss = nll_po.pg_loss(logp, rewards, entropy, lam=0.01, transform="none")
    assert float(loss) == pytest.approx(-2.9660818, abs=1e-6)


def test_rbf_and_clamp():
    logp, rewards, entropy = _n1()
    rbf = nll_po.transform_rewards(rewards, "rbf", gamma=0.5)
    assert torch.allclose(rbf, torch.exp(0.5 * rewards))
    # clamp −log π at 1.2: [1.0439385, 1.2, 1.2] against T(r) = [3.75, 0, 3]
    loss = nll_po.pg_loss(logp, rewards, entropy, lam=0.0, clamp=1.2)
    assert float(loss) == pytest.approx((1.0439385 * 3.75 + 1.2 * 3) / 3, abs=1e-6)


def test_ratio_form_has_the_same_value_of_gradient():
    mu = torch.tensor(0.3, requires_grad=True)
    y_hat = torch.tensor([[0.5], [-1.0], [2.0]])
    rewards = -((y_hat - 1.0) ** 2)
    grads = []
    for ratio in (False, True):
        dist = Normal(mu, 1.0)
        loss = nll_po.pg_loss(dist.log_prob(y_hat), rewards, dist.entropy().reshape(1), ratio=ratio)
        grads.append(torch.autograd.grad(loss, mu)[0])
    assert torch.allclose(grads[0], grads[1])


def test_pathwise_loss():
    rewards = torch.tensor([[-1.0, -3.0]])
    loss = nll_po.pathwise_loss(rewards, torch.tensor([2.0, 2.0]), lam=0.5)
    assert float(loss) == pytest.approx(2.0 - 1.0)  # −mean r − λ·H = 2 − 0.5·2


def test_n2_optimal_reward_1d_and_2d():
    # 1-D S = 0.25, λ = 0.01: U* = 0.005/0.25 = 0.02; U = 1 gives Σ* = 0.005
    S1 = torch.tensor([[0.25]])
    assert float(nll_po.optimal_reward(S1, 0.01)) == pytest.approx(0.02)
    assert float(nll_po.pg_optimal_covariance(torch.eye(1), 0.01)) == pytest.approx(0.005)
    # 2-D: S⁻¹ = [[1, −0.5], [−0.5, 2]]/1.75; U* = S⁻¹/2
    S = torch.tensor([[2.0, 0.5], [0.5, 1.0]])
    U = nll_po.optimal_reward(S, 1.0)
    expected = torch.tensor([[0.2857143, -0.1428571], [-0.1428571, 0.5714286]])
    assert torch.allclose(U, expected, atol=1e-6)
    assert torch.allclose(nll_po.pg_optimal_covariance(U, 1.0), S, atol=1e-6)
    # isotropic u* = λn/(2 tr S) = 2/6
    assert float(nll_po.optimal_isotropic_reward(S, 1.0)) == pytest.approx(0.3333333)


def test_sigma_star_is_the_minimiser_of_the_expected_inner_objective():
    """∇_Σ of (μ−ȳ)ᵀU(μ−ȳ) + tr(U(Σ+S)) − (λ/2)log det(2πeΣ) vanishes at Σ*(U) = (λ/2)U⁻¹,
    and μ* = ȳ; perturbing Σ* in any SPD direction raises the objective."""
    torch.manual_seed(0)
    U = torch.tensor([[1.5, 0.3], [0.3, 0.7]], dtype=torch.float64)
    S = torch.tensor([[2.0, 0.5], [0.5, 1.0]], dtype=torch.float64)
    ybar = torch.tensor([0.4, -1.0], dtype=torch.float64)
    lam = 0.3
    sigma = nll_po.pg_optimal_covariance(U, lam).requires_grad_(True)
    mu = ybar.clone().requires_grad_(True)
    value = nll_po.expected_inner_objective(mu, sigma, ybar, S, U, lam)
    g_mu, g_sigma = torch.autograd.grad(value, (mu, sigma))
    assert torch.allclose(g_mu, torch.zeros(2, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(g_sigma, torch.zeros(2, 2, dtype=torch.float64), atol=1e-10)
    for _ in range(5):
        A = 0.05 * torch.randn(2, 2, dtype=torch.float64)
        moved = nll_po.expected_inner_objective(ybar, sigma.detach() + A @ A.T, ybar, S, U, lam)
        assert float(moved) > float(value.detach())


def test_u_star_makes_the_pg_optimum_the_nll_optimum():
    S = torch.tensor([[0.7, -0.2, 0.1], [-0.2, 0.9, 0.0], [0.1, 0.0, 0.4]])
    for lam in (0.01, 1.0):
        U = nll_po.optimal_reward(S, lam)
        assert torch.allclose(nll_po.pg_optimal_covariance(U, lam), S, atol=1e-5)
    iso = torch.eye(3) * 0.5  # isotropic S: u* = the full U*
    assert torch.allclose(
        nll_po.optimal_isotropic_reward(iso, 0.1) * torch.eye(3), nll_po.optimal_reward(iso, 0.1)
    )


def test_bad_options_are_named():
    logp, rewards, entropy = _n1()
    with pytest.raises(ValueError, match="reward_transform = 'zscore'"):
        nll_po.pg_loss(logp, rewards, entropy, transform="zscore")
    with pytest.raises(ValueError, match="nll_po.lam = -1"):
        nll_po.pg_loss(logp, rewards, entropy, lam=-1)
    with pytest.raises(ValueError, match="nll_po.clamp = 0"):
        nll_po.pg_loss(logp, rewards, entropy, clamp=0)
    with pytest.raises(ValueError, match="nll_po.lam = 0"):
        nll_po.optimal_reward(torch.eye(2), 0.0)
