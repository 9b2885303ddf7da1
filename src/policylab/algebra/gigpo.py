"""GiGPO — group-in-group policy optimisation (spec papers/seed_agents.md §A3): an
episode-level group advantage plus a step-level one whose groups are the turns that acted
from the same environment state (the anchor).

Feng et al., "Group-in-Group Policy Optimization for LLM Agent Training", arXiv:2505.10978
(eqs. 3, 6–8); code verl-agent gigpo/core_gigpo.py:compute_gigpo_outcome_advantage, as
used by LaMer (mlbio-epfl/LaMer verl/trainer/ppo/core_gigpo.py). Registered as the
advantage estimator `gigpo`. One row per turn (`pack_turns`); the workflow provides the
per-row columns it reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from policylab.algebra.advantages import (
    ZERO_STD,
    Estimate,
    advantage_estimators,
    broadcast_to_tokens,
    group_stats,
)
from policylab.algebra.credit import REFLECT
from policylab.algebra.grouping import group_by
from policylab.algebra.options import check_choice, check_range, option
from policylab.algebra.precision import at_least_float32
from policylab.rollouts import Rollouts

STEP_RETURN, INSTANCE, ANCHOR, PHASE = "step_return", "instance", "anchor", "phase"


@dataclass(frozen=True)
class GiGPOOptions:
    mode: str = option(
        "mean_norm", "mean_norm: centre only (LaMer scripts); mean_std_norm: also ÷ (std + eps)"
    )
    step_w: float = option(1.0, "weight of the step term (verl-agent step_advantage_w)")
    eps: float = option(1e-6, "added to the std in mean_std_norm (verl-agent epsilon)")
    # columns beyond a plain rollout: the step return, the instance and the anchor state
    reads: ClassVar[tuple[str, ...]] = (STEP_RETURN, INSTANCE, ANCHOR)

    def __post_init__(self) -> None:
        check_choice("gigpo", "mode", self.mode, ("mean_norm", "mean_std_norm"))
        check_range("gigpo", "step_w", self.step_w)
        check_range("gigpo", "eps", self.eps, low=0.0)


@dataclass(frozen=True)
class GiGPOTerms:
    """The two per-row terms [B] and the step groups they came from."""

    episode: torch.Tensor  # [B] episode term
    step: torch.Tensor  # [B] step term (before step_w)
    step_groups: torch.Tensor  # [B] dense id of (instance, anchor)
    instances: torch.Tensor  # [B] dense id of instance


def relative_to_group(values: torch.Tensor, groups: torch.Tensor, *, std: bool, eps: float):
    """x − mean_g(x), divided by (σ_g + eps) with `std` (σ Bessel-corrected, as
    verl-agent's torch.std). House rules: singleton groups, groups whose values are all
    equal (σ ≤ 1e-8) and NaN values give 0, and NaN values stay out of the statistics."""
    stats = group_stats(values, groups)
    x = at_least_float32(values.detach())
    centred = torch.where(stats.valid, x - stats.mean, torch.zeros_like(stats.mean))
    out = centred / (stats.std + eps) if std else centred
    signal = stats.valid & (stats.size > 1) & (stats.std > ZERO_STD)
    return torch.where(signal, out, torch.zeros_like(out))


def gigpo_terms(
    score: torch.Tensor,
    step_return: torch.Tensor,
    instance: torch.Tensor | Sequence[Any],
    anchor: torch.Tensor | Sequence[Any],
    cfg: GiGPOOptions,
) -> GiGPOTerms:
    """Episode and step terms of GiGPO for one row per turn.

    episode: A^E_i = R_i − mean_{j: e_j = e_i} R_j  (mean_std_norm: ÷ (σ_e + eps)), R the
        row's attempt score; every row counts once in its instance's statistics
        (`compute_mean_std_cross_all_data=True`) [code core_gigpo.episode_norm_reward;
        paper eq. 3 takes one value per trajectory].
    step: A^S_i = G_i − mean_{j: (e_j, anchor_j) = (e_i, anchor_i)} G_j  (mean_std_norm:
        ÷ (σ + eps)), G the row's step return [code step_norm_reward; paper eqs. 6–7].
    Singleton groups give 0 (house rule). The code differs for a singleton *instance*: it
    takes mean 0 and std 1 there, so its episode term is R_i itself [code]; ours is 0.
    Spec §A3 T2: scores (1, 1, 0, 0, 0), G = (0.95, 1, 0, 0, 0), rows 0 and 2 share the
    anchor → episode (0.6, 0.6, −0.4, −0.4, −0.4), step (0.475, 0, −0.475, 0, 0).
    Shapes: every input [B] (anchor: any hashable values); outputs [B]."""
    std = cfg.mode == "mean_std_norm"
    instances = group_by({INSTANCE: instance}, (INSTANCE,))
    step_groups = group_by({INSTANCE: instance, ANCHOR: anchor}, (INSTANCE, ANCHOR))
    G = torch.as_tensor(step_return)
    G = G if G.is_floating_point() else G.to(torch.get_default_dtype())
    return GiGPOTerms(
        episode=relative_to_group(score, instances, std=std, eps=cfg.eps),
        step=relative_to_group(G, step_groups, std=std, eps=cfg.eps),
        step_groups=step_groups,
        instances=instances,
    )


@advantage_estimators.register("gigpo", config=GiGPOOptions)
def gigpo_advantages(rollouts: Rollouts, cfg: GiGPOOptions) -> Estimate:
    """GiGPO: episode-relative score plus anchor-state-relative step return (arXiv:2505.10978
    eq. 8; spec §A3). A[i,t] = m[i,t]·(A^E_i + step_w·A^S_i), see `gigpo_terms`.

    Reads: `rollouts.rewards` [B] (the attempt score: its undiscounted reward sum, 0 on
    reflect rows [code LaMer credit_assignment]), `extras["step_return"]` [B] (e.g. the
    `cross_episode` credit), `extras["instance"]` [B], `extras["anchor"]` [B] (hashable:
    the state before the turn; reflect rows share one anchor) and, when present,
    `extras["phase"]` for a metric. A row with a NaN reward gets A = 0.
    Metrics: gigpo/step_groups, gigpo/step_group_size_mean (rows per step group),
    gigpo/step_singleton_frac (rows alone in their step group), gigpo/episode_abs_mean,
    gigpo/step_abs_mean (mean |term| over rows), gigpo/reflect_rows (count)."""
    missing = [k for k in (STEP_RETURN, INSTANCE, ANCHOR) if k not in rollouts.extras]
    if missing:
        raise ValueError(
            f"gigpo needs extras {', '.join(repr(k) for k in missing)} (one value per row); "
            f"the batch has extras: {', '.join(sorted(rollouts.extras)) or '(none)'}"
        )
    extras = rollouts.extras
    terms = gigpo_terms(
        rollouts.rewards, extras[STEP_RETURN], extras[INSTANCE], extras[ANCHOR], cfg
    )
    row_adv = terms.episode + cfg.step_w * terms.step.to(terms.episode.dtype)
    scored = torch.isfinite(rollouts.rewards)
    row_adv = torch.where(scored, row_adv, torch.zeros_like(row_adv))
    return Estimate(
        broadcast_to_tokens(row_adv, rollouts.response_mask),
        metrics=_metrics(terms, extras.get(PHASE)),
    )


def _metrics(terms: GiGPOTerms, phase: Sequence[str] | torch.Tensor | None) -> dict[str, float]:
    B = len(terms.step_groups)
    if B == 0:
        return {"gigpo/step_groups": 0.0}
    sizes = torch.bincount(terms.step_groups)
    metrics = {
        "gigpo/step_groups": float(len(sizes)),
        "gigpo/step_group_size_mean": B / len(sizes),
        "gigpo/step_singleton_frac": float((sizes[terms.step_groups] == 1).double().mean()),
        "gigpo/episode_abs_mean": float(terms.episode.abs().double().mean()),
        "gigpo/step_abs_mean": float(terms.step.abs().double().mean()),
    }
    if phase is not None:
        if isinstance(phase, torch.Tensor):
            metrics["gigpo/reflect_rows"] = float(phase.bool().sum())
        else:
            metrics["gigpo/reflect_rows"] = float(sum(p == REFLECT for p in phase))
    return metrics
