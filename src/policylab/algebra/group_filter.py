"""AT-GRPO's group filter (spec papers/seed_agents.md §A1, seed §18): before the update,
drop whole groups that carry little learning signal. Registered in `selections` to run at
the advantage stage: after the trainer has regrouped the step's rows by the run's keys
(instance, turn, agent), once per step, with no refill (PettingLLMs filters the batch it
has; a collect-time filter would refill dropped groups with new rounds).

Zhao et al., arXiv:2510.11062; code pettingllms-ai/PettingLLMs
pettingllms/trainer/multi_agents_ppo_trainer.py:_assign_consistent_uids, which groups rows
by uid = (env, turn, agent) — here `rollouts.group_ids`, e.g. from
`group_by(rollouts, "instance,turn,agent")` — and filters by `filter_method`/`filter_ratio`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from policylab.algebra.grouping import group_by
from policylab.algebra.options import check_choice, check_range, option
from policylab.algebra.selection import Selection, runs_at, selections
from policylab.rollouts import Rollouts

METHODS = ("dapo", "std", "mean")


@dataclass(frozen=True)
class GroupFilterOptions:
    method: str = option(
        "mean",
        "dapo: drop groups whose rewards are all equal; std / mean: drop the `ratio` of "
        "groups with the lowest normalised variance / mean reward (Plan-Path config: mean)",
    )
    ratio: float = option(0.5, "fraction of groups std/mean drop, floored (Plan-Path: 0.5)")

    def __post_init__(self) -> None:
        check_choice("group_filter", "method", self.method, METHODS)
        check_range("group_filter", "ratio", self.ratio, low=0.0, high=1.0)


@selections.register("group_filter", config=GroupFilterOptions)
@runs_at("advantages")
def group_filter(
    rollouts: Rollouts,
    advantages: torch.Tensor | None,
    cfg: GroupFilterOptions,
    state: Any = None,
) -> Selection:
    """Keep or drop whole groups of `rollouts.group_ids` by their rewards R.

    Per group g (NaN rewards left out): range ρ_g = max R − min R; normalised variance
    v_g = Var_pop(R)/ρ_g² (0 when ρ_g = 0 or the group has one row); mean μ_g (0 for a
    group of one row, as the code; −∞ for a group with no finite reward [ours]).
    - dapo: drop every group with ρ_g = 0 — all rewards equal, singletons included [code].
      `ratio` is not used [ours: the code only fills its groups when filter_ratio > 0, so
      dapo with ratio 0 drops nothing there; use selection=all for that].
    - std: drop the ⌊ratio·n_groups⌋ groups with the lowest v_g [code].
    - mean: drop the ⌊ratio·n_groups⌋ groups with the lowest μ_g [code]. The spec (§A1)
      read `mean` as a std rule; the code ranks by the group's mean reward.
    Ties go in the order groups first appear (the code's stable sort over its uids).

    Shapes: rewards, group_ids [B]; row_keep [B] bool; token_weight [B, T] all ones.
    Metrics: at/groups (groups seen), at/kept_groups, at/group_size_mean (rows per group),
    at/filtered_frac (fraction of rows dropped)."""
    mask = rollouts.response_mask
    groups = group_by({"group": rollouts.group_ids}, ("group",))
    rewards = rollouts.rewards.detach().double()
    n, B = (int(groups.max()) + 1 if len(groups) else 0), len(groups)
    finite = torch.isfinite(rewards)
    r = torch.where(finite, rewards, torch.zeros_like(rewards))
    size = torch.bincount(groups, minlength=n)
    count = torch.zeros(n, dtype=rewards.dtype).index_add(0, groups, finite.double())
    mean = torch.zeros(n, dtype=rewards.dtype).index_add(0, groups, r) / count.clamp(min=1)
    high = torch.full((n,), -math.inf, dtype=rewards.dtype).scatter_reduce(
        0, groups, torch.where(finite, rewards, -math.inf), reduce="amax"
    )
    low = torch.full((n,), math.inf, dtype=rewards.dtype).scatter_reduce(
        0, groups, torch.where(finite, rewards, math.inf), reduce="amin"
    )
    spread = torch.where(count > 0, high - low, torch.zeros_like(high))

    if cfg.method == "dapo":
        drop = spread == 0
    else:
        if cfg.method == "std":
            dev2 = torch.where(finite, (r - mean[groups]) ** 2, torch.zeros_like(r))
            var = torch.zeros(n, dtype=rewards.dtype).index_add(0, groups, dev2)
            var = var / count.clamp(min=1)
            key = torch.where((spread > 0) & (size > 1), var / spread**2, torch.zeros_like(var))
        else:
            key = torch.where(size > 1, mean, torch.zeros_like(mean))
            key = torch.where(count > 0, key, torch.full_like(key, -math.inf))
        # int(n·ratio) as the code, ties by first appearance (stable sort)
        lowest = torch.sort(key, stable=True).indices[: int(n * cfg.ratio)]
        drop = torch.zeros(n, dtype=torch.bool)
        drop[lowest] = True

    keep = ~drop[groups]
    return Selection(
        row_keep=keep,
        token_weight=torch.ones_like(mask, dtype=torch.float32),
        metrics={
            "at/groups": float(n),
            "at/kept_groups": float(n - int(drop.sum())),
            "at/group_size_mean": B / n if n else 0.0,
            "at/filtered_frac": float((~keep).double().mean()) if B else 0.0,
        },
    )
