"""COPO — consistency-aware policy optimisation (spec §13): a prompt-level "global"
advantage (each prompt's mean reward standardised across the batch's prompts) gives signal
to groups whose rewards are all equal, and a sigmoid of each group's answer-consistency
entropy mixes the per-row GRPO loss with the global one.

Han et al., "COPO: Consistency-Aware Policy Optimization", arXiv:2508.04138; code
hijih/copo-code, verl/trainer/ppo/core_algos.py (compute_score_global,
compute_grpo_outcome_advantage_with_global, compute_policy_loss_with_global).

Two registered parts, because the statistics need the whole batch and the blend needs the
current ratio:
- advantage estimator `copo`: returns the local GRPO advantage A^loc [B, T] and writes the
  per-row constants `extras["copo_A_glob"]` [B] and `extras["copo_H"]` [B] into the batch
  it is given (the one side effect in algebra/: `Rollouts.select` carries them to every
  minibatch and micro-batch). It reads each row's extracted final answer from
  `extras["answers"]` (list[str | None], one per row).
- policy loss `copo_blend`: reads them from `rollouts=` (the trainer passes the micro-batch)
  and blends two dual-clip PPO losses per row.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from policylab.algebra.advantages import (
    ZERO_STD,
    Estimate,
    GRPOOptions,
    KLInRewardOptions,
    advantage_estimators,
    group_stats,
    grpo_advantages,
    kl_penalised_rewards,
)
from policylab.algebra.aggregate import aggregate, masked_mean
from policylab.algebra.losses import (
    PPOClipOptions,
    add_kl_term,
    policy_losses,
    ratio_metrics,
    token_terms,
)
from policylab.algebra.options import check_choice, check_range, option
from policylab.rollouts import Rollouts

ANSWERS = "answers"  # extras column: each row's extracted final answer (str or None)
NO_ANSWER = "<none>"  # the answer class of a row whose answer could not be extracted [ours]
MODES = (
    "soft_with_zero",
    "soft_with_forced",
    "only_soft",
    "only_forced",
    "only_zero",
    "only_global",
    "no_global",
)


# ---- options ------------------------------------------------------------------------------
@dataclass(frozen=True)
class COPOOptions(KLInRewardOptions):
    eps: float = option(1e-6, "added to the local and the global std (code epsilon)")
    consistency_coef: bool = option(
        False, "scale R^glob by c_q = 1 − λ_G·H_q (code reward_coef_flg; off in run_copo.sh)"
    )
    reads: ClassVar[tuple[str, ...]] = (ANSWERS,)  # each row's final answer

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("copo", "eps", self.eps, low=0.0)


@dataclass(frozen=True)
class COPOLossOptions(PPOClipOptions):
    """PPO-clip's options (checked there) with COPO's defaults, plus the blend."""

    loss_agg_mode: str = option("seq-mean-token-mean", "code run_copo.sh")
    eps_low: float = option(0.2, "ratio floor 1 − eps_low (run_copo.sh clip 0.2)")
    eps_high: float = option(0.2, "ratio cap 1 + eps_high (run_copo.sh clip 0.2)")
    dual_clip_c: float | None = option(3.0, "dual-clip bound c for A < 0 (verl clip_ratio_c)")
    gamma: float = option(5.0, "γ, slope of the local weight σ(γ(H − ρ)) (code k, run_copo.sh)")
    rho: float = option(1.0, "ρ, entropy midpoint of the local weight (code b, run_copo.sh)")
    mode: str = option("soft_with_zero", f"which rows keep the local loss: {', '.join(MODES)}")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("copo_blend", "gamma", self.gamma, low=0.0)
        check_range("copo_blend", "rho", self.rho)
        check_choice("copo_blend", "mode", self.mode, MODES)


# ---- the global side: answer consistency and the prompt-level advantage -------------------
@dataclass(frozen=True)
class COPOGlobals:
    """Per-row constants of each row's group (prompt)."""

    H: torch.Tensor  # [B] answer-consistency entropy of the group, in bits
    R_glob: torch.Tensor  # [B] global reward of the group
    A_glob: torch.Tensor  # [B] global advantage of the group (0 for a NaN-reward row)


def answer_entropy(answers: Sequence[Any]) -> float:
    """H = −Σ_a p_a·log2(p_a + 1e-8), p_a the share of rows whose answer string is a (exact
    match; None counts as the one class "<none>") [code compute_score_global]."""
    counts = Counter(NO_ANSWER if a is None else str(a) for a in answers)
    total = sum(counts.values())
    return -sum((c / total) * math.log2(c / total + 1e-8) for c in counts.values())


def copo_globals(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    answers: Sequence[Any],
    *,
    eps: float = 1e-6,
    consistency_coef: bool = False,
) -> COPOGlobals:
    """The global reward, its advantage across prompts and the consistency entropy.

    R^glob_q = c_q·(1/G_q)·Σ_{i∈q} R_i, c_q = 1, or 1 − λ_G·H_q with λ_G = (1 − 1/G_q)/log2 G_q
    (`consistency_coef`; λ_G = 0 for G_q = 1 [ours]);
    A^glob_q = (R^glob_q − mean_{q'} R^glob) / (std_{q'} R^glob + eps), unbiased std over the
    prompts of the batch [code compute_grpo_outcome_advantage_with_global; paper eq. 6].
    NaN rewards are left out of their group's mean and get A^glob = 0; a group with no
    finite reward is left out of the prompt statistics; fewer than two prompts, or equal
    prompt rewards, give A^glob = 0 [ours]. rewards, group_ids [B]; answers: B entries."""
    B = len(rewards)
    if len(answers) != B:
        raise ValueError(f"copo: {len(answers)} answers for {B} rows; one per row is needed")
    stats = group_stats(rewards, group_ids)
    groups, index = torch.unique(group_ids, return_inverse=True)
    members: list[list[Any]] = [[] for _ in range(len(groups))]
    for row, g in enumerate(index.tolist()):
        members[g].append(answers[row])
    dtype = stats.mean.dtype
    H_group = torch.tensor([answer_entropy(m) for m in members], dtype=dtype)
    if consistency_coef:
        sizes = [len(m) for m in members]
        lam = torch.tensor(
            [(1 - 1 / n) / math.log2(n) if n > 1 else 0.0 for n in sizes], dtype=dtype
        )
        coef = 1.0 - lam * H_group
    else:
        coef = torch.ones_like(H_group)
    H = H_group.to(stats.mean.device)[index]
    R_glob = coef.to(stats.mean.device)[index] * stats.mean
    # one representative row per group for the statistics across prompts
    rep = torch.zeros(len(groups), dtype=torch.long, device=index.device)
    rep.scatter_(0, index, torch.arange(B, device=index.device))
    scored = stats.size[rep] > 0
    per_prompt = R_glob[rep][scored]
    A_glob = torch.zeros_like(R_glob)
    if len(per_prompt) > 1:
        std = per_prompt.std()
        if std > ZERO_STD:
            A_glob = (R_glob - per_prompt.mean()) / (std + eps)
    A_glob = torch.where(stats.valid & (stats.size > 0), A_glob, torch.zeros_like(A_glob))
    return COPOGlobals(H=H, R_glob=R_glob, A_glob=A_glob)


@advantage_estimators.register("copo", config=COPOOptions)
def copo_advantages(rollouts: Rollouts, cfg: COPOOptions) -> Estimate:
    """COPO's advantages (arXiv:2508.04138; code compute_grpo_outcome_advantage_with_global).

    Returns an Estimate: A^loc [B, T] = m·(R_i − mean_q R)/(std_q R + eps), the `grpo`
    estimator (Bessel std, eps = 1e-6; a singleton group gets 0 by the house rule, where
    the code uses mean 0 and std 1 [ours]), and as columns the per-row constants the
    `copo_blend` loss reads from `rollouts.extras`: "copo_A_glob" = A^glob_q and "copo_H" =
    H_q [B] (see `copo_globals`); the caller adds them (`rollouts.with_extras`).
    Needs `rollouts.extras["answers"]`: each row's extracted final answer (str, or None when
    none was found). Compute on the whole batch, never a micro-batch."""
    answers = rollouts.extras.get(ANSWERS)
    if answers is None:
        raise ValueError(
            'copo needs rollouts.extras["answers"]: each row\'s extracted final answer '
            "(a list of str or None, one per row), to measure each group's answer "
            f"consistency; extras has {sorted(rollouts.extras) or 'no columns'}"
        )
    rewards = kl_penalised_rewards(rollouts, cfg, by="copo")
    found = copo_globals(
        rewards,
        rollouts.group_ids,
        answers,
        eps=cfg.eps,
        consistency_coef=cfg.consistency_coef,
    )
    local = GRPOOptions(kl_coef=cfg.kl_coef, kl_estimator=cfg.kl_estimator, eps=cfg.eps)
    columns = {"copo_A_glob": found.A_glob, "copo_H": found.H}
    return Estimate(grpo_advantages(rollouts, local), columns)


# ---- the blended loss -------------------------------------------------------------------------
def copo_row_weights(
    H: torch.Tensor, rewards: torch.Tensor, local_nonzero: torch.Tensor, cfg: COPOLossOptions
) -> torch.Tensor:
    """w_i, the weight of the local loss of row i; the global loss gets 1 − w_i.

    w_q = σ(γ(H_q − ρ)) (paper: w_local = σ(γ(H − ρ)); code `global_loss_weight`, which
    multiplies the local loss), then by mode [code compute_policy_loss_with_global]:
    soft_with_zero w_q·1[R_i ≠ 0] (default, README "our COPO method"); soft_with_forced
    w_q·1[A^loc_i ≠ 0] (groups of equal rewards are forced onto the global loss);
    only_soft w_q; only_forced 1[A^loc_i ≠ 0]; only_zero 1[R_i ≠ 0]; only_global 0;
    no_global 1 (plain GRPO). H, rewards [B]; local_nonzero [B] bool."""
    soft = torch.sigmoid(cfg.gamma * (H - cfg.rho))
    nonzero_reward = (rewards != 0).to(soft.dtype)
    forced = local_nonzero.to(soft.dtype)
    return {
        "soft_with_zero": lambda: soft * nonzero_reward,
        "soft_with_forced": lambda: soft * forced,
        "only_soft": lambda: soft,
        "only_forced": lambda: forced,
        "only_zero": lambda: nonzero_reward,
        "only_global": lambda: torch.zeros_like(soft),
        "no_global": lambda: torch.ones_like(soft),
    }[cfg.mode]()


def _dual_clip(A: torch.Tensor, r: torch.Tensor, cfg: COPOLossOptions):
    """(L, clipped) of PPO's dual-clip loss per token: max(−A·r, −A·clip(r)), then
    min(·, −c·A) where A < 0 (verl compute_policy_loss, as COPO uses it for both losses)."""
    unclipped = -A * r
    clipped = -A * r.clamp(1.0 - cfg.eps_low, 1.0 + cfg.eps_high)
    L = torch.maximum(unclipped, clipped)
    if cfg.dual_clip_c is not None:
        L = torch.where(A < 0, torch.minimum(L, -cfg.dual_clip_c * A), L)
    return L, clipped > unclipped


def _row_column(rollouts: Rollouts | None, key: str, like: torch.Tensor) -> torch.Tensor:
    if rollouts is None or key not in rollouts.extras:
        raise ValueError(
            f'copo_blend needs rollouts.extras["{key}"], written by the "copo" advantage '
            "estimator on the whole batch; pass the (micro-)batch's Rollouts as rollouts="
        )
    column = torch.as_tensor(rollouts.extras[key]).to(like.device, like.dtype)
    if column.shape != like.shape[:1]:
        raise ValueError(
            f'rollouts.extras["{key}"] has shape {list(column.shape)}; expected [B] with '
            f"B={like.shape[0]} (the rows of logprobs)"
        )
    return column


@policy_losses.register("copo_blend", config=COPOLossOptions)
def copo_blend_loss(
    logprobs,
    old_logprobs,
    advantages,
    response_mask,
    cfg: COPOLossOptions,
    *,
    ref_logprobs=None,
    rollouts=None,
    normaliser=None,
):
    """COPO's loss: per row, the local GRPO loss and the global loss mixed by the
    consistency weight (arXiv:2508.04138; code compute_policy_loss_with_global).

    L^loc, L^glob = dual-clip PPO losses with A^loc (`advantages`) and A^glob_q
    (`rollouts.extras["copo_A_glob"]`), the same ratio r = exp(logp − old_logp);
    L[i,t] = w_i·L^loc[i,t] + (1 − w_i)·L^glob[i,t], w_i from `copo_row_weights` with
    H_q = `rollouts.extras["copo_H"]` and R_i = `rollouts.rewards`; reduced by
    `loss_agg_mode`. Defaults: γ = 5, ρ = 1, clip 0.2/0.2, c = 3, seq-mean-token-mean,
    mode soft_with_zero (code run_copo.sh, README; the paper's sweep reportedly prefers
    γ = 20, ρ = 1.5). Shapes: logprobs, old_logprobs, response_mask [B, T]; advantages [B]
    or [B, T]; rollouts: the same B rows. Metrics are those of this micro-batch."""
    terms = token_terms(logprobs, old_logprobs, advantages, response_mask)
    A_glob = _row_column(rollouts, "copo_A_glob", terms.logp.detach()[:, 0])
    H = _row_column(rollouts, "copo_H", A_glob)
    rewards = rollouts.rewards.to(A_glob.device)
    A_glob_tok = torch.where(terms.valid, A_glob.unsqueeze(-1).expand_as(terms.adv), 0.0)
    L_loc, clip_loc = _dual_clip(terms.adv, terms.ratio, cfg)
    L_glob, clip_glob = _dual_clip(A_glob_tok, terms.ratio, cfg)
    local_nonzero = (terms.adv != 0).any(dim=-1)
    w = copo_row_weights(H, rewards, local_nonzero, cfg).unsqueeze(-1)
    L = w * L_loc + (1 - w) * L_glob
    pg_loss = aggregate(L, terms.valid, cfg.loss_agg_mode, normaliser, L_max=cfg.L_max)
    metrics = _copo_metrics(terms, w[:, 0], H, A_glob, rewards, local_nonzero, rollouts)
    with torch.no_grad():
        metrics["copo/pg_loss_local_mean"] = float(masked_mean(L_loc, terms.valid))
        metrics["copo/pg_loss_global_mean"] = float(masked_mean(L_glob, terms.valid))
        metrics["copo/clipfrac_local"] = float(masked_mean(clip_loc, terms.valid))
        metrics["copo/clipfrac_global"] = float(masked_mean(clip_glob, terms.valid))
    metrics.update(ratio_metrics(terms))
    return add_kl_term(pg_loss, metrics, terms, ref_logprobs, cfg, normaliser)


def _copo_metrics(terms, w, H, A_glob, rewards, local_nonzero, rollouts) -> dict[str, float]:
    """The spec's `copo/` metrics over the rows with valid tokens (of this micro-batch)."""
    with torch.no_grad():
        rows = terms.valid.any(dim=-1)
        if not rows.any():
            return {"copo/w_mean": 0.0}
        _, index = torch.unique(rollouts.group_ids.to(rows.device)[rows], return_inverse=True)
        n_groups = int(index.max()) + 1
        signal = terms.logp.new_zeros(n_groups).index_add(
            0, index, local_nonzero[rows].to(terms.logp.dtype)
        )
        first = torch.zeros(n_groups, dtype=torch.long, device=rows.device)
        first.scatter_(0, index, torch.arange(len(index), device=rows.device))
        per_group = A_glob[rows][first]
        return {
            "copo/w_mean": float(w[rows].mean()),
            "copo/w_min": float(w[rows].min()),
            "copo/w_max": float(w[rows].max()),
            "copo/frac_groups_identical": int((signal == 0).sum()) / n_groups,
            "copo/frac_rows_zero_reward": int((rewards[rows] == 0).sum()) / int(rows.sum()),
            "copo/H_mean": float(H[rows].mean()),
            "copo/A_glob_std": float(per_group.std()) if n_groups > 1 else 0.0,
        }
