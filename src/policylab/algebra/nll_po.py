"""NLL-to-PO algebra (papers/seed_generative.md G6.1): the entropy-regularised policy-gradient
inner loss under a parameterised reward, and the closed-form optimal reward of the Gaussian
case. Benechehab et al., arXiv:2510.07624; code abenechehab/nll_to_po
(src/nll_to_po/training/loss.py, PG.compute_loss).

Shapes: M samples ŷ per input, B inputs. `logp`, `rewards`: [M, B]; `entropy`: [B]."""

from __future__ import annotations

import torch

from policylab.algebra.options import check_choice, check_range

Tensor = torch.Tensor
TRANSFORMS = ("none", "normalize", "rbf", "loo")


def transform_rewards(rewards: Tensor, transform: str = "normalize", gamma: float = 1.0) -> Tensor:
    """T(r): none → r; normalize → r − min over the M samples of each input (dim 0);
    rbf → exp(γ·r) [code loss.py PG._transform_rewards]; loo → r − the mean of the other
    M − 1 samples' rewards [ours: a baseline independent of its sample, so the score-function
    gradient and Hessian stay unbiased while the data-noise part of r cancels]."""
    check_choice("nll_po", "reward_transform", transform, TRANSFORMS)
    if transform == "normalize":
        return rewards - rewards.amin(dim=0, keepdim=True)
    if transform == "loo":
        m = rewards.shape[0]
        if m < 2:
            raise ValueError("nll_po.reward_transform = 'loo' needs M >= 2 samples per input")
        return (rewards - rewards.mean(0, keepdim=True)) * m / (m - 1)
    if transform == "rbf":
        return torch.exp(gamma * rewards)
    return rewards


def pg_loss(
    logp: Tensor,
    rewards: Tensor,
    entropy: Tensor,
    *,
    lam: float = 0.01,
    transform: str = "normalize",
    gamma: float = 1.0,
    clamp: float | None = None,
    ratio: bool = False,
) -> Tensor:
    """loss = mean_{m,b} [−log π_θ(ŷ_mb | x_b)·T(r_mb)] − λ·mean_b H(π_θ(·|x_b)).

    `clamp` = c clamps −log π to [−c, c] (the code's `clip_coef`; None: off).
    `ratio=True` replaces −log π by −exp(log π − ⊥log π) [ours]: the same value of the
    gradient, but its Hessian is the unbiased score-function Hessian E[(∇²log π + ∇log π
    ∇log πᵀ)·r]; the code's form drops the outer product, which flips the sign of the
    curvature in the Gaussian case, so the implicit hypergradient (workflows/bilevel.py)
    differentiates this form. The rewards are constants here (computed from detached ŷ)."""
    check_range("nll_po", "lam", lam, low=0.0)
    if clamp is not None:
        check_range("nll_po", "clamp", clamp, low=0.0, low_open=True)
    weights = transform_rewards(rewards, transform, gamma)
    neg_logp = -torch.exp(logp - logp.detach()) if ratio else -logp
    if clamp is not None:
        neg_logp = neg_logp.clamp(-clamp, clamp)
    return (neg_logp * weights).mean() - lam * entropy.mean()


def pathwise_loss(
    rewards: Tensor, entropy: Tensor, *, lam: float = 0.01, transform: str = "none"
) -> Tensor:
    """`use_rsample`: loss = −mean T(r(ŷ)) − λ·mean H, ŷ reparameterised so the reward's
    gradient flows through the samples [code PG.compute_loss]."""
    return -transform_rewards(rewards, transform).mean() - lam * entropy.mean()


# ---- the Gaussian case (G6.1 "Gaussian analysis") -------------------------------------------
def _check_lam(lam: float) -> None:
    check_range("nll_po", "lam", lam, low=0.0, low_open=True)


def optimal_reward(cov: Tensor, lam: float) -> Tensor:
    """U* = (λ/2)·S⁻¹: with it the PG optimum Σ*(U) = (λ/2)·U⁻¹ equals the NLL optimum S.
    cov: [D, D] symmetric positive definite."""
    _check_lam(lam)
    return 0.5 * lam * torch.linalg.inv(cov)


def optimal_isotropic_reward(cov: Tensor, lam: float) -> Tensor:
    """u* = λ·n / (2·tr S), the best reward of the form u·I (the code's "λn/(2Tr(Σ))I")."""
    _check_lam(lam)
    return 0.5 * lam * cov.shape[-1] / torch.diagonal(cov, dim1=-2, dim2=-1).sum(-1)


def pg_optimal_covariance(U: Tensor, lam: float) -> Tensor:
    """Σ*(U) = (λ/2)·U⁻¹, the stationary covariance of the entropy-regularised PG objective
    E[r_U] + λ·H; a reward too sharp (U > U*) gives an over-confident policy."""
    _check_lam(lam)
    return 0.5 * lam * torch.linalg.inv(U)


def expected_inner_objective(
    mu: Tensor, sigma: Tensor, ybar: Tensor, cov: Tensor, U: Tensor, lam: float
) -> Tensor:
    """E[−r_U] − λ·H for π = N(μ, Σ) and data of mean ȳ, covariance S:
    (μ − ȳ)ᵀU(μ − ȳ) + tr(U(Σ + S)) − (λ/2)·log det(2πeΣ)."""
    d = mu - ybar
    entropy = 0.5 * torch.logdet(2 * torch.pi * torch.e * sigma)
    return d @ U @ d + torch.trace(U @ (sigma + cov)) - lam * entropy
