"""Value (critic) losses: `fn(values, old_values, returns, response_mask, cfg, *,
normaliser=None) -> (loss, metrics)`; all [B, T] (control: T = 1)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.algebra.aggregate import AGG_MODES, aggregate, masked_mean
from policylab.algebra.options import check_choice, check_range, option
from policylab.registry import Registry

value_losses: Registry = Registry("value loss")


@dataclass(frozen=True)
class ValueClipOptions:
    clip: float | None = option(
        0.5, "ε_v: V may move at most this far from V_old (None = unclipped)"
    )
    loss_agg_mode: str = option("token-mean", "aggregation of the per-token squared errors")

    def __post_init__(self) -> None:
        check_range("value_clip", "clip", self.clip, low=0.0, low_open=True, allow_none=True)
        check_choice("value_clip", "loss_agg_mode", self.loss_agg_mode, AGG_MODES)


@value_losses.register("value_clip", config=ValueClipOptions)
def value_clip_loss(
    values, old_values, returns, response_mask, cfg: ValueClipOptions, *, normaliser=None
):
    """Clipped value loss of OpenAI baselines (used by PPO implementations, not in the paper).

    V_c = clip(V, V_old − ε_v, V_old + ε_v); L_v = ½·agg(max((V − ret)², (V_c − ret)²), m).
    ε_v = 0.5 (verl `cliprange_value`, OpenRLHF `value_clip`); None gives ½·agg((V − ret)²)."""
    valid = response_mask > 0
    zero = torch.zeros_like(values)
    V = torch.where(valid, values, zero)
    ret = torch.where(valid, returns.detach().to(values.dtype), zero)
    unclipped = (V - ret) ** 2
    if cfg.clip is None:
        per_token = unclipped
        clipped_more = torch.zeros_like(valid)
    else:
        old = torch.where(valid, old_values.detach().to(values.dtype), zero)
        V_c = old + (V - old).clamp(-cfg.clip, cfg.clip)
        clipped = (V_c - ret) ** 2
        per_token = torch.maximum(unclipped, clipped)
        clipped_more = clipped > unclipped
    loss = 0.5 * aggregate(per_token, valid, cfg.loss_agg_mode, normaliser)
    with torch.no_grad():
        resid = (ret - V)[valid]
        target = ret[valid]
        var = target.var(unbiased=False) if target.numel() > 1 else target.new_zeros(())
        explained = 1.0 - resid.var(unbiased=False) / var if var > 0 else torch.tensor(0.0)
        metrics = {
            "vf/loss": float(loss.detach()),
            "vf/clipfrac": float(masked_mean(clipped_more, valid)),
            "vf/explained_var": float(explained),
            "vf/value_mean": float(masked_mean(V.detach(), valid)),
        }
    return loss, metrics


def huber(delta: torch.Tensor, kappa: float) -> torch.Tensor:
    """L_κ(δ) = ½δ² if |δ| ≤ κ else κ(|δ| − ½κ) (papers §17.1)."""
    a = delta.abs()
    return torch.where(a <= kappa, 0.5 * delta**2, kappa * (a - 0.5 * kappa))


def quantile_huber(
    pred: torch.Tensor, target: torch.Tensor, taus: torch.Tensor, kappa: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """IQN's quantile Huber loss (Dabney et al. 2018, arXiv:1806.06923; papers §17.1).

    pred: [B, N] quantile values Z_{τ_i}(s, a); target: [B, N'] distributional targets
    r + γ(1 − done)·Z_{τ'_j}(s', a*) (no grad); taus: [B, N] or [B, N, 1] the fractions of
    `pred`. δ_ij = target_j − pred_i,
    ρ_ij = |τ_i − 1{δ_ij < 0}| · L_κ(δ_ij)/κ (κ = 0: |τ_i − 1{δ_ij < 0}|·|δ_ij|, §17.7),
    loss = mean_batch (1/N')·Σ_i Σ_j ρ_ij. Returns (loss, ρ [B, N, N'])."""
    if kappa < 0:
        raise ValueError(f"quantile_huber: kappa={kappa} must be ≥ 0")
    taus = taus.reshape(pred.shape).unsqueeze(-1)  # [B, N, 1]
    delta = target.detach().unsqueeze(1) - pred.unsqueeze(-1)  # [B, N, N']
    weight = (taus - (delta < 0).to(pred.dtype)).abs()
    elementwise = delta.abs() if kappa == 0 else huber(delta, kappa) / kappa
    rho = weight * elementwise
    loss = rho.sum(dim=(1, 2)).mean() / target.shape[-1]
    return loss, rho


def quantile_targets(
    rewards: torch.Tensor, gamma: float, dones: torch.Tensor, next_quantiles: torch.Tensor
) -> torch.Tensor:
    """r + γ·(1 − done)·Z_{τ'_j}(s', a*): rewards, dones [B]; next_quantiles [B, N'] →
    [B, N'] (papers §17.1; T17.2)."""
    keep = (1.0 - dones.to(next_quantiles.dtype)).unsqueeze(-1)
    return rewards.unsqueeze(-1) + gamma * keep * next_quantiles
