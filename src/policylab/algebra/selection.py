"""Selection: which rows and tokens of a scored batch are trained on.

`fn(rollouts, advantages, cfg, state) -> Selection(row_keep [B] bool, token_weight [B, T],
metrics)`. The trainer drops rows with row_keep False and multiplies the loss mask by
token_weight. It selects each generation round as it arrives, before the advantage, so
the advantage is computed on the kept rows only (DAPO Algorithm 1, line 9); selections
of that kind receive `advantages=None`. `all` keeps everything; `dynamic_sampling` is
DAPO's group filter (workflows/rounds.py refills the step with new rounds). VAS, VADE, D³S
and CAPO plug in here too (issue #7).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from policylab.algebra.options import option
from policylab.registry import Registry
from policylab.rollouts import Rollouts

selections: Registry = Registry("selection")


@dataclass
class Selection:
    row_keep: torch.Tensor  # [B] bool
    token_weight: torch.Tensor  # [B, T] float
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class AllOptions:
    pass


@selections.register("all", config=AllOptions)
def select_all(
    rollouts: Rollouts, advantages: torch.Tensor | None, cfg: AllOptions, state: Any = None
) -> Selection:
    """Keep every row and every token (the default)."""
    mask = rollouts.response_mask
    return Selection(
        torch.ones(mask.shape[0], dtype=torch.bool), torch.ones_like(mask, dtype=torch.float32)
    )


@dataclass(frozen=True)
class DynamicSamplingOptions:
    metric: str | None = option(
        None,
        "reward part to filter on (verl filter_groups.metric); None: the part 'acc' if the "
        "batch has one, else the total reward before any shaping",
    )


@selections.register("dynamic_sampling", config=DynamicSamplingOptions)
def dynamic_sampling(
    rollouts: Rollouts,
    advantages: torch.Tensor | None,
    cfg: DynamicSamplingOptions,
    state: Any = None,
) -> Selection:
    """DAPO's dynamic sampling: keep a group iff its answers do not all agree.

    Keep group g iff std_g(acc) > 0, i.e. 0 < #correct < G_g for 0/1 accuracy [paper
    arXiv:2503.14476 §3.2 eq. 11; code verl dapo_ray_trainer keeps `std > 0 or len == 1`].
    A group of one row is kept (its advantage is 0 anyway, §1.3) [code].

    acc [B]: `rollouts.reward_parts[cfg.metric]`; with metric None, the part "acc" if
    present, else `rollouts.rewards`. Reading of the spec (ours): DAPO filters on
    accuracy, not on the shaped score, so that groups equally right but of different
    lengths are still dropped; our rewards come from verifiers (1/0, or partial credit),
    so the accuracy is the unshaped total reward, which the trainer hands over before any
    reward shaping. For any reward, "std > 0" is read as "not all equal", tested exactly
    as max_g > min_g. NaN (unscorable) rows are left out; a group with no finite value is
    dropped.

    Metrics (counts of groups): `ds/kept_groups`; dropped groups split by their common
    value, `ds/drop_all_correct` (> 0) and `ds/drop_all_wrong` (≤ 0, or no finite value)
    (ours: this reads "correct" for 1/0 and ±1 rewards, and counts a group whose partial
    credits are all equal and positive as correct); `ds/kept_frac` = kept / groups.

    Shapes: rewards, group_ids [B]; row_keep [B] bool; token_weight [B, T] (all ones).
    """
    values = _accuracy(rollouts, cfg).detach().double()
    mask = rollouts.response_mask
    _, group = torch.unique(rollouts.group_ids, return_inverse=True)
    n = int(group.max()) + 1 if len(group) else 0
    finite = torch.isfinite(values)
    highest = torch.full((n,), -torch.inf, dtype=values.dtype).scatter_reduce(
        0, group, torch.where(finite, values, -torch.inf), reduce="amax"
    )
    lowest = torch.full((n,), torch.inf, dtype=values.dtype).scatter_reduce(
        0, group, torch.where(finite, values, torch.inf), reduce="amin"
    )
    rows = torch.zeros(n, dtype=torch.long).index_add(0, group, torch.ones_like(group))
    keep = (highest > lowest) | (rows == 1)
    all_correct = ~keep & (highest > 0)
    kept = int(keep.sum())
    return Selection(
        row_keep=keep[group],
        token_weight=torch.ones_like(mask, dtype=torch.float32),
        metrics={
            "ds/kept_groups": float(kept),
            "ds/drop_all_correct": float(all_correct.sum()),
            "ds/drop_all_wrong": float(n - kept - int(all_correct.sum())),
            "ds/kept_frac": kept / n if n else 0.0,
        },
    )


def _accuracy(rollouts: Rollouts, cfg: DynamicSamplingOptions) -> torch.Tensor:
    parts = rollouts.reward_parts
    if cfg.metric is None:
        return parts.get("acc", rollouts.rewards)
    if cfg.metric not in parts:
        raise ValueError(
            f"dynamic_sampling.metric = {cfg.metric!r} is not a reward part of this batch; "
            f"parts: {', '.join(sorted(parts)) or '(none)'} (None = the total reward)"
        )
    return parts[cfg.metric]
