"""Pure tensor pieces of the generative policies (papers/seed_generative.md G0.3, G0.5,
G2.1, G3.1, G7.1): step densities of Gaussian denoising chains, DPPO's denoising discount
and clip schedule, the `sde_flow` step, and the per-sample weights of the weighted-denoising
objective (`orw`, `ac_flow`, `dgpo`). No model, no global state: tensors in, tensors out.

Convention (G0.1): flow time τ ∈ [0, 1], τ = 0 noise, τ = 1 data; x^τ = τ·x + (1 − τ)·ε,
velocity target u = x − ε, ε̂ = x^τ − τ·v̂."""

from __future__ import annotations

import math

import torch

from policylab.algebra.advantages import GRPOOptions, grpo_advantages
from policylab.rollouts import Rollouts

DPPO_LOGP_CLAMP = (-5.0, 2.0)  # [code dppo: model/diffusion/diffusion_ppo.py, clamp before ratio]


def gaussian_step_logprob(
    x_next: torch.Tensor,
    mean: torch.Tensor,
    std: torch.Tensor | float,
    *,
    std_min: float = 0.0,
    reduce: str = "mean",
    clamp: tuple[float, float] | None = None,
) -> torch.Tensor:
    """log N(x_{k+1}; μ, s²) of one Gaussian denoising step (G0.1, test A1).

    x_next, mean: [..., D]; std: scalar or broadcastable, floored at `std_min` (DPPO's
    `min_logprob_denoising_std`). reduce: "none" → per-dim [..., D]; "mean" over D (DPPO
    [code dppo], Flow-GRPO); "sum" (the exact joint density). clamp: bounds applied after
    the reduction (DPPO's [−5, 2])."""
    std = torch.as_tensor(std, dtype=mean.dtype).clamp_min(std_min)
    per_dim = -((x_next - mean) ** 2) / (2 * std**2) - torch.log(std) - 0.5 * math.log(2 * math.pi)
    if reduce == "none":
        out = per_dim
    elif reduce == "mean":
        out = per_dim.mean(-1)
    elif reduce == "sum":
        out = per_dim.sum(-1)
    else:
        raise ValueError(f"gaussian_step_logprob.reduce = {reduce!r}; choices: none, mean, sum")
    return out.clamp(*clamp) if clamp is not None else out


def dppo_denoise_discount(steps: int, gamma_denoise: float) -> torch.Tensor:
    """DPPO's denoising discount over the K′ fine-tuned steps, noisiest → cleanest (test A2):
    w_k = γ_d^(K′ − 1 − k), so the final (cleanest) step has weight 1 [code dppo:
    diffusion_ppo.py `gamma_denoising`; arXiv:2409.00588 §4]. Returns [K′]."""
    if steps < 1:
        raise ValueError(f"dppo_denoise_discount.steps = {steps}; must be >= 1")
    k = torch.arange(steps, dtype=torch.float64)
    return gamma_denoise ** (steps - 1 - k)


def dppo_clip_schedule(steps: int, base: float, final: float, rate: float) -> torch.Tensor:
    """DPPO's per-step clip range, noisiest → cleanest (test A2): with t = k/(K′ − 1),
    ε_k = base + (final − base)·(e^{rate·t} − 1)/(e^{rate} − 1) (linear when rate = 1)
    [code dppo: diffusion_ppo.py `clip_ploss_coef_base`, `clip_ploss_coef_rate`]. [K′]."""
    t = torch.arange(steps, dtype=torch.float64) / max(steps - 1, 1)
    if rate == 1:
        return base + (final - base) * t
    return base + (final - base) * (torch.exp(rate * t) - 1) / (math.exp(rate) - 1)


def sde_flow_sigma(tau: torch.Tensor, dt: float, a: float) -> torch.Tensor:
    """σ_k = a·√((1 − τ_k)/max(τ_k, Δτ)): Flow-GRPO's σ_t = a√(t/(1 − t)) with t = 1 − τ
    (G0.3); the floor at τ = Δτ is ours (the formula diverges at τ = 0)."""
    return a * torch.sqrt((1 - tau) / tau.clamp_min(dt))


def sde_flow_step(
    x: torch.Tensor, tau: torch.Tensor, velocity: torch.Tensor, dt: float, a: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std of one `sde_flow` step (G0.3, test A4):

    s_k = −(x − τ·v̂)/(1 − τ) (the score of the linear path), σ_k as `sde_flow_sigma`,
    μ = x + Δτ·(v̂ + ½σ_k²·s_k), std = σ_k·√Δτ. With a = 0 this is the Euler step.
    x, velocity: [B, D]; tau: [B, 1] (τ < 1). Returns (μ [B, D], std [B, 1])."""
    score = -(x - tau * velocity) / (1 - tau)
    sigma = sde_flow_sigma(tau, dt, a)
    mean = x + dt * (velocity + 0.5 * sigma**2 * score)
    return mean, sigma * math.sqrt(dt)


# ---- advantages and weights of the weighted-denoising objective -----------------------------
def dgpo_advantages(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    eps: float = 1e-4,
    clip: float = 5.0,
    scale: str = "group",
) -> torch.Tensor:
    """DGPO's per-group advantage (G2.1, test G3): A_i = clip((R_i − mean_g R)/(std + eps),
    ±clip) with the *population* std of the group (scale="group") or of the batch ("batch")
    [code DGPO: flow_grpo/stat_tracking.py PerPromptStatTracker; base.py adv_clip_max = 5].
    A group whose rewards are all equal (std ≤ 1e-8, the house rule) gets A = 0 (the code's
    zero-std mask, applied — ours, G2.2). One home: this is the registered `grpo` with
    bessel=False, eps and clip; rows are samples (T = 1). rewards, group_ids: [B] → [B]."""
    if scale not in ("group", "batch"):
        raise ValueError(f"dgpo_advantages.scale = {scale!r}; choices: group, batch")
    rows = Rollouts(rewards=rewards, response_mask=torch.ones(len(rewards), 1), group_ids=group_ids)
    options = GRPOOptions(scale=scale, eps=eps, bessel=False, clip=clip)
    return grpo_advantages(rows, options)[:, 0]


def dgpo_group_weights(
    advantages: torch.Tensor,
    ell: torch.Tensor,
    ell_ref: torch.Tensor,
    group_ids: torch.Tensor,
    beta_dpo: float,
) -> torch.Tensor:
    """DGPO's group weight per row (G2.1, test G1): s_g = (β_dpo/G)·Σ_{i∈g} A_i·(ℓ_i − ℓ_i^ref),
    w_g = σ(s_g), no gradient [code DGPO: scripts/train_sd3_dgpo.py
    compute_group_dgpo_loss_allreduce]. All inputs [B]; returns w [B] (w_{g(i)})."""
    a, d = advantages.detach(), (ell - ell_ref).detach()
    _, idx = torch.unique(group_ids, return_inverse=True)
    n = int(idx.max()) + 1
    total = torch.zeros(n, dtype=d.dtype).index_add_(0, idx, a.to(d.dtype) * d)
    size = torch.zeros(n, dtype=d.dtype).index_add_(0, idx, torch.ones_like(d))
    return torch.sigmoid(beta_dpo * total / size)[idx]


def dgpo_trust_region(
    advantages: torch.Tensor, ell: torch.Tensor, ell_old: torch.Tensor, clip: float
) -> torch.Tensor:
    """DGPO's `clip_dsm` (G2.1, test G2): ratio_i = exp(ℓ_i^old − ℓ_i); a row is kept (True)
    unless A > 0 and ratio > 1 + c, or A < 0 and ratio < 1 − c — there ℓ_i is detached
    [code DGPO train loop]. [B] → bool [B]."""
    ratio = torch.exp(ell_old.detach() - ell.detach())
    out = ((advantages > 0) & (ratio > 1 + clip)) | ((advantages < 0) & (ratio < 1 - clip))
    return ~out


def dgpo_loss(
    advantages: torch.Tensor, ell: torch.Tensor, weights: torch.Tensor, keep: torch.Tensor | None
) -> torch.Tensor:
    """mean_i w_{g(i)}·A_i·ℓ_i with ℓ_i detached where the trust region drops it (G2.1)."""
    if keep is not None:
        ell = torch.where(keep, ell, ell.detach())
    return (weights.detach() * advantages.detach() * ell).mean()


def orw_weights(rewards: torch.Tensor, beta: float) -> torch.Tensor:
    """ORW-CFM-W2's weight w_i = exp(β·R_i) (G3.1, test F1) [code markerthu/orw-cfm:
    finetune_fm.py ORWCFMTrainer.compute_loss; β its "temperature", default 0.5]. [B]."""
    return torch.exp(beta * rewards)


def ac_flow_weights(
    shaped: torch.Tensor, values: torch.Tensor, *, clip: float, beta: float, f: str = "exp"
) -> torch.Tensor:
    """AC-Flow's weight (inferred, G3.1, test F2): A = clip(R̃ − V, ±c_A), w = f(β·A) with
    f ∈ {exp, softplus, relu1}; exp computed in float32 after the clip. With V ≡ 0, no clip
    and R̃ = R it equals `orw_weights`. [B]."""
    adv = (shaped - values).clamp(-clip, clip).float()
    if f == "exp":
        return torch.exp(beta * adv)
    if f == "softplus":
        return torch.nn.functional.softplus(beta * adv)
    if f == "relu1":
        return torch.relu(beta * adv) + 1
    raise ValueError(f"ac_flow_weights.f = {f!r}; choices: exp, softplus, relu1")


def weighted_denoising_loss(
    weights: torch.Tensor, ell: torch.Tensor, drift: torch.Tensor, alpha: float
) -> torch.Tensor:
    """mean_i [w_i·ℓ_i + α·drift_i], drift_i = mean_d (v̂_θ − v̂_ref)² at the same (x^τ, τ, c)
    (G0.5 objective 2; ORW-CFM-W2's W2 term, test F1). All [B]."""
    return (weights.detach() * ell + alpha * drift).mean()


def ema_decay(step: int, cap: float = 0.3, rate: float = 0.001) -> float:
    """DGPO's EMA decay min(cap, rate·step) (G2.1) [code DGPO train loop]."""
    return min(cap, rate * step)
