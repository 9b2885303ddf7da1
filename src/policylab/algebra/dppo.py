"""DPPO's policy loss over a row's K′ fine-tuned denoising steps (papers/seed_generative.md
G7.1; Ren et al., arXiv:2409.00588; code `irom-lab/dppo` model/diffusion/diffusion_ppo.py
PPODiffusion.loss). Pure: tensors in, tensors out. The per-step densities, the denoising
discount and the clip schedule are algebra/generative.py's (tests A1–A3)."""

from __future__ import annotations

import torch

from policylab.algebra.aggregate import masked_mean
from policylab.algebra.losses import clipped_surrogate


def dppo_chain_advantages(
    adv: torch.Tensor,
    mask: torch.Tensor,
    discount: torch.Tensor,
    quantiles: tuple[float, float] = (0.0, 1.0),
) -> torch.Tensor:
    """A[i, k] = clip(A_i, q_lo, q_hi)·γ_d^(K′−1−k): the (already normalised) row advantage
    clipped to its batch quantiles over the kept rows, then broadcast over the K′ steps with
    the denoising discount [code dppo: clip_advantage_lower/upper_quantile,
    gamma_denoising]. adv, mask: [B, 1]; discount: [K′]. Returns [B, K′]."""
    lo, hi = quantiles
    if (lo, hi) != (0.0, 1.0):
        kept = adv[mask.bool()]
        if kept.numel():
            q = torch.quantile(kept.float(), torch.tensor([lo, hi])).to(adv.dtype)
            adv = adv.clamp(q[0], q[1])
    return adv * discount.to(adv.dtype)


def dppo_chain_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps: torch.Tensor,
) -> tuple[torch.Tensor, dict[str, float]]:
    """mean over kept (row, step) of max(−A·r, −A·clip(r, 1 ± ε_k)), r = exp(ℓp − ℓp_old)
    (test A3: the PPO clip per denoising step with the per-step ε_k of the clip schedule).
    logprobs, old_logprobs, advantages: [B, K′]; mask: [B, 1] or [B, K′]; eps: [K′]."""
    mask = mask.expand_as(logprobs)
    ratio = torch.exp(logprobs - old_logprobs.detach())
    eps = eps.to(logprobs.dtype)
    per_step = clipped_surrogate(ratio, advantages.detach(), eps, eps)
    loss = masked_mean(per_step, mask)
    with torch.no_grad():
        clipped = ((advantages > 0) & (ratio > 1 + eps)) | ((advantages < 0) & (ratio < 1 - eps))
        at_clamp = (logprobs <= -5.0) | (logprobs >= 2.0)  # DPPO's [−5, 2] (G7.3 edge case)
        metrics = {
            "pg/clipfrac": float(masked_mean(clipped, mask)),
            "pg/ratio_mean": float(masked_mean(ratio, mask)),
            "logp/clamped_frac": float(masked_mean(at_clamp, mask)),
        }
    return loss, metrics
