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
