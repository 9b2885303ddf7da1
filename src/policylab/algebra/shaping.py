"""Reward shaping: `fn(cfg, *, lengths, ...) -> Tensor [B]` added to R_i before the
advantage (papers/seed_llm_algorithms.md §0, §6)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.algebra.options import check_range, option
from policylab.registry import Registry
from policylab.rollouts import Rollouts

reward_shapers: Registry = Registry("reward shaping")


@dataclass(frozen=True)
class OverlongOptions:
    L_max: int = option(20480, "maximum generation length (DAPO §4.1)")
    L_cache: int = option(4096, "soft-penalty interval before L_max (DAPO §4.1); 0 disables")
    factor: float = option(1.0, "penalty at L_max (verl overlong_penalty_factor)")

    def __post_init__(self) -> None:
        check_range("overlong", "L_max", self.L_max, low=0, low_open=True)
        check_range("overlong", "L_cache", self.L_cache, low=0, high=self.L_max)
        check_range("overlong", "factor", self.factor, low=0.0)


@reward_shapers.register("overlong", config=OverlongOptions)
def overlong_penalty(cfg: OverlongOptions, *, lengths: torch.Tensor) -> torch.Tensor:
    """DAPO's soft overlong punishment (arXiv:2503.14476 eq. 13), for every response.

    With L the response length and L_s = L_max − L_cache: 0 if L ≤ L_s;
    (L_s − L)/L_cache·f if L_s < L ≤ L_max; −f beyond L_max (clamped as in the paper)."""
    lengths = torch.as_tensor(lengths, dtype=torch.get_default_dtype())
    if cfg.L_cache == 0:
        return torch.zeros_like(lengths)
    soft_start = cfg.L_max - cfg.L_cache
    penalty = (soft_start - lengths) / cfg.L_cache * cfg.factor
    return penalty.clamp(min=-cfg.factor, max=0.0)


def shape_rewards(batch: Rollouts, shapers, max_new_tokens: int) -> Rollouts:
    """R_i += Σ shaping_i (e.g. DAPO's overlong penalty) on the kept rows, after the
    selection filtered on the unshaped accuracy; the sum is kept as the reward part
    `shaping`. A truncated row counts max_new_tokens, masked or not."""
    if not shapers or len(batch) == 0:
        return batch
    lengths = batch.response_mask.sum(-1)
    if batch.truncated is not None:
        lengths = torch.where(batch.truncated, torch.tensor(float(max_new_tokens)), lengths)
    extra = sum(shaper(lengths=lengths) for shaper in shapers).to(batch.rewards.dtype)
    parts = {**batch.reward_parts, "shaping": extra}
    return batch.replace(rewards=batch.rewards + extra, reward_parts=parts)
