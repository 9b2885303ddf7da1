"""Pure tensor pieces of DPG-T2I (papers/seed_generative.md G5.1, tests P1 and P2): the
one-step clean estimate for ε- and velocity-parameterised denoisers, the residual a critic
reads, the "look forward" cost, the critic's regression loss, the γ^t discount and the
actor loss. No model, no global state: tensors in, tensors out.

DPG-T2I (Wei et al., arXiv:2407.06642; code wfanyue/DPG-T2I-Personalization:
train_dreambooth_dpg.py) treats the denoiser as a deterministic policy: the action is
the clean estimate a = x̂_0(θ), a learned critic Q_φ(ρ) on the residual ρ = (x̂_0 − x_0)²
regresses a cost, and the actor minimises w_prior·(prior denoising MSE) + γ^t·Q_φ(ρ(θ)),
so the gradient reaching θ is ∇_θ x̂_0 · ∇_a Q_φ."""

from __future__ import annotations

import torch

GAMMA = 0.9986  # [code DPG-T2I: train_dreambooth_dpg.py `gamma`]
DDPM_T = 1000  # [code: SD's num_train_timesteps]; t ∈ {0, …, 999}


def clean_estimate_eps(x_t: torch.Tensor, eps_hat: torch.Tensor, alpha_bar) -> torch.Tensor:
    """x̂_0 = (x_t − √(1 − ᾱ_t)·ε̂)/√ᾱ_t, the one-step clean estimate of an ε-prediction
    denoiser [code DPG-T2I: predict_start_from_noise]. x_t, eps_hat: [B, D]; alpha_bar:
    scalar or [B, 1]. Differentiable in ε̂ (and so in θ)."""
    alpha_bar = torch.as_tensor(alpha_bar, dtype=x_t.dtype)
    if (alpha_bar <= 0).any() or (alpha_bar > 1).any():
        raise ValueError(f"clean_estimate_eps: alpha_bar must lie in (0, 1]; got {alpha_bar}")
    return (x_t - torch.sqrt(1 - alpha_bar) * eps_hat) / torch.sqrt(alpha_bar)


def clean_estimate_velocity(x_tau: torch.Tensor, tau, v_hat: torch.Tensor) -> torch.Tensor:
    """x̂ = x^τ + (1 − τ)·v̂, the clean estimate of a velocity net on the linear path
    x^τ = τ·x + (1 − τ)·ε, u = x − ε (G0.1, τ = 0 noise). Exact when v̂ = u. x_tau, v_hat:
    [B, D]; tau: scalar or [B, 1]."""
    return x_tau + (1 - torch.as_tensor(tau, dtype=x_tau.dtype)) * v_hat


def residual(x_hat: torch.Tensor, x0: torch.Tensor) -> torch.Tensor:
    """ρ = (x̂_0 − x_0)² elementwise, the critic's input [code: `residual_x_0`]. [B, D]."""
    return (x_hat - x0) ** 2


def look_forward_cost(x_hat: torch.Tensor, x0: torch.Tensor) -> torch.Tensor:
    """rec_i = mean_d (x̂_0 − x_0)², the "look forward" cost per row [B] [code:
    `rec_loss_x_0` = F.mse_loss, a batch mean; with the code's batch of 1 the two agree]."""
    return residual(x_hat, x0).mean(-1)


def critic_loss(q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """mean_i (Q_φ(ρ_i) − target_i)², the critic's regression on detached ρ [code:
    `loss_q_phi = F.mse_loss(q_phi_reward, rec_loss_x_0)`]. q, target: [B]."""
    if q.shape != target.shape:
        raise ValueError(f"critic_loss: q {tuple(q.shape)} and target {tuple(target.shape)}")
    return ((q - target) ** 2).mean()


def ddpm_timestep(tau: torch.Tensor) -> torch.Tensor:
    """The DDPM timestep of a flow time: t = 999·(1 − τ) (τ = 1 data ↦ t = 0, τ = 0 noise
    ↦ t = 999) [ours: maps the flow path onto the code's t ∈ {0, …, 999}, unrounded]."""
    return (DDPM_T - 1) * (1 - tau)


def discount(t: torch.Tensor, gamma: float = GAMMA, *, per_row_gamma: bool = False):
    """γ^t per row [B] (test P2). Default (per_row_gamma False): every row gets γ^{t_0}, the
    first row's timestep [code: `gamma ** timesteps[0]`, a quirk when rows differ];
    per_row_gamma True gives each row its own γ^{t_i} [ours, G5.2]. t: [B] or [B, 1]."""
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"discount.gamma = {gamma}; accepted: 0 < gamma <= 1")
    t = torch.as_tensor(t, dtype=torch.float64).reshape(-1)
    weights = torch.as_tensor(gamma, dtype=torch.float64) ** t
    return weights if per_row_gamma else weights[:1].expand_as(weights)


def actor_loss(
    prior_mse: torch.Tensor, q: torch.Tensor, weights: torch.Tensor, w_prior: float = 1.0
) -> torch.Tensor:
    """w_prior·prior_mse + mean_i γ^{t_i}·Q_φ(ρ_i(θ)) [code: `loss = loss_prior + (gamma **
    timesteps[0]) * q_phi_reward`; the row mean is ours for batches above the code's 1].
    The instance denoising MSE is replaced by the critic. prior_mse: scalar; q, weights: [B]."""
    return w_prior * prior_mse + (weights.to(q.dtype) * q).mean()
