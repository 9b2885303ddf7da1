"""Rank-GRPO's rank-level credit (papers/seed_llm_algorithms.md §19): each rank of a
generated list of N items is an action with its own reward, its own group-normalised
advantage and a ratio that is the geometric mean of its tokens' ratios.

Zhu et al., "Rank-GRPO: Training LLM-based Conversational Recommender Systems with
Reinforcement Learning", arXiv 2510.20150; code yaochenzhu/Rank-GRPO
(`libs/reward_funcs.py`, `libs/trl/rank_grpo_trainer.py`).

Pure functions (tensors in, tensors out) and the registered advantage estimator
`rank_grpo`, which reads `rollouts.extras["rank_rewards"]` [B, N] and `segment_ids` [B, T]
(the rank of each token; values ≥ N or < 0 are overflow and get A = 0)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import torch

from policylab.algebra.advantages import advantage_estimators
from policylab.algebra.losses import (
    LOG_RATIO_CLAMP,
    PPOClipOptions,
    _clip_fractions,
    _reduce,
    add_kl_term,
    policy_losses,
    ratio_metrics,
    token_terms,
)
from policylab.algebra.losses import clipped_surrogate as ppo_term
from policylab.algebra.options import check_choice, check_range, option
from policylab.rollouts import Rollouts

RANK_REWARDS = "rank_rewards"  # rollouts.extras column: R [B, N]
RANK_REWARD_KINDS = ("exp_inf", "log_decay")


def rank_discounts(n: int, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """d_k = 1/log2(k + 1) for k = 1..n (d_1 = 1) [code Rank-GRPO libs/metrics_align.py:_discounts].
    Returns [n]."""
    k = torch.arange(1, n + 1, dtype=dtype)
    return 1.0 / torch.log2(k + 1.0)


def rank_rewards(relevance: torch.Tensor, kind: str = "exp_inf") -> torch.Tensor:
    """Rank rewards R [B, N] from relevance rel [B, N] (§19.2):

    - exp_inf:   R[i,k] = rel[i,k]                      [code reward_func_exp_inf]
    - log_decay: R[i,k] = Σ_{j≥k} rel[i,j]·d_j           [code reward_func_log_decay]
      (causal DCG: ranks before k are not credited to rank k)."""
    check_choice("rank_rewards", "kind", kind, RANK_REWARD_KINDS)
    rel = torch.as_tensor(relevance, dtype=torch.float64)
    if kind == "exp_inf":
        return rel.clone()
    weighted = rel * rank_discounts(rel.shape[-1], dtype=rel.dtype)
    return weighted.flip(-1).cumsum(-1).flip(-1)


def list_dcg(relevance: torch.Tensor) -> torch.Tensor:
    """Sequence DCG Σ_k rel[i,k]·d_k [B] — the broadcast reward of the GRPO baseline."""
    rel = torch.as_tensor(relevance, dtype=torch.float64)
    return (rel * rank_discounts(rel.shape[-1], dtype=rel.dtype)).sum(-1)


def rank_advantages(
    rewards: torch.Tensor, group_ids: torch.Tensor, *, eps: float = 1e-4, scale: bool = True
) -> torch.Tensor:
    """Â[i,k] = (R[i,k] − mean_{i'∈g(i)} R[i',k]) / (std_{i'∈g(i)} R[i',k] + eps), unbiased std,
    per rank k over the rows of a group [code _generate_and_score_completions]; `scale=False`
    skips the division (scale_rewards=False). A group of one row gets 0 (house rule, §0).
    rewards [B, N], group_ids [B] → [B, N]."""
    R = torch.as_tensor(rewards, dtype=torch.float64)
    groups = torch.as_tensor(group_ids).long()
    out = torch.zeros_like(R)
    for g in torch.unique(groups):
        rows = groups == g
        if int(rows.sum()) < 2:
            continue
        block = R[rows]
        centred = block - block.mean(0, keepdim=True)
        out[rows] = (
            centred / (block.std(0, unbiased=True, keepdim=True) + eps) if scale else centred
        )
    return out


def rank_token_advantages(
    rank_adv: torch.Tensor, segment_ids: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """A[i,t] = Â[i, seg[i,t]] on valid tokens of ranks 0..N−1; 0 on overflow (seg ≥ N or
    seg < 0) and masked tokens [code]. rank_adv [B, N], segment_ids, mask [B, T] → [B, T]."""
    n = rank_adv.shape[-1]
    seg = segment_ids.long()
    inside = (seg >= 0) & (seg < n) & mask.bool()
    picked = torch.gather(rank_adv, 1, seg.clamp(0, n - 1))
    return torch.where(inside, picked, torch.zeros_like(picked))


def segment_log_ratio(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    segment_ids: torch.Tensor,
    mask: torch.Tensor,
    n: int,
) -> torch.Tensor:
    """log ρ per token: the mean of ℓ = logp − old_logp over the tokens of its rank, so
    ρ[i,k] = (Π_t π_θ/π_old)^{1/|S_ik|} is the geometric mean of the rank's token ratios;
    overflow tokens (seg ≥ n or < 0) share one extra bin [code _compute_loss,
    importance_sampling_level="item"]. logp, old_logp, segment_ids, mask [B, T] → [B, T]
    (0 on masked tokens)."""
    valid = mask.bool()
    seg = segment_ids.long()
    bins = torch.where((seg >= 0) & (seg < n), seg, torch.full_like(seg, n))
    ell = torch.where(valid, logp - old_logp, torch.zeros_like(logp))
    ones = valid.to(ell.dtype)
    sums = torch.zeros(ell.shape[0], n + 1, dtype=ell.dtype).scatter_add(1, bins, ell)
    counts = torch.zeros_like(sums).scatter_add(1, bins, ones)
    mean = sums / counts.clamp_min(1.0)
    return torch.where(valid, torch.gather(mean, 1, bins), torch.zeros_like(ell))


def clipped_surrogate(
    log_ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float, eps_high: float
) -> torch.Tensor:
    """Per-token L = −min(ρ·A, clip(ρ, 1−ε_low, 1+ε_high)·A) with ρ = exp(clamp(log ρ, ±20))
    (§1.1's ppo_clip term, here with the rank-level ratio). [B, T] → [B, T]."""
    rho = torch.exp(log_ratio.clamp(-20.0, 20.0))
    return ppo_term(rho, advantages, eps_low, eps_high)


@dataclass(frozen=True)
class RankGRPOOptions:
    eps: float = option(1e-4, "added to the per-rank std [code Rank-GRPO]")
    scale: bool = option(True, "divide by the per-rank group std (code's scale_rewards)")
    reads: ClassVar[tuple[str, ...]] = ("segment_ids", RANK_REWARDS)

    def __post_init__(self) -> None:
        check_range("rank_grpo", "eps", self.eps, low=0.0)


@advantage_estimators.register("rank_grpo", config=RankGRPOOptions)
def rank_grpo_advantages(rollouts: Rollouts, cfg: RankGRPOOptions) -> torch.Tensor:
    """Rank-GRPO (arXiv 2510.20150, §19.2): A[i,t] = Â[i, seg[i,t]] with Â the per-rank
    group-normalised rank rewards `rollouts.extras["rank_rewards"]` [B, N]."""
    if RANK_REWARDS not in rollouts.extras or rollouts.segment_ids is None:
        raise ValueError(
            "advantage estimator 'rank_grpo' needs rollouts.extras['rank_rewards'] [B, N] "
            "and rollouts.segment_ids [B, T] (the rank of each token)"
        )
    R = torch.as_tensor(rollouts.extras[RANK_REWARDS], dtype=torch.float64)
    mask = rollouts.response_mask
    if R.ndim != 2 or R.shape[0] != mask.shape[0]:
        raise ValueError(
            f"rollouts.extras['rank_rewards'] has shape {tuple(R.shape)}; expected "
            f"[B={mask.shape[0]}, N]"
        )
    groups = torch.arange(mask.shape[0]) if rollouts.group_ids is None else rollouts.group_ids
    adv = rank_advantages(R, groups, eps=cfg.eps, scale=cfg.scale)
    return rank_token_advantages(adv, rollouts.segment_ids, mask).to(mask.dtype)


@dataclass(frozen=True)
class RankPPOClipOptions(PPOClipOptions):
    rank_list_length: int = option(20, "N: ranks 0..N−1 get their own ratio, later tokens one bin")
    reads: ClassVar[tuple[str, ...]] = ("segment_ids",)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("rank_ppo_clip", "rank_list_length", self.rank_list_length, low=1)


@policy_losses.register("rank_ppo_clip", config=RankPPOClipOptions)
def rank_ppo_clip_loss(
    logprobs,
    old_logprobs,
    advantages,
    response_mask,
    cfg: RankPPOClipOptions,
    *,
    ref_logprobs=None,
    rollouts=None,
    normaliser=None,
):
    """Rank-GRPO's loss (arXiv 2510.20150, §19.2): ppo_clip with the rank-level ratio
    ρ[i,k] = exp(mean_{t∈rank k} (logp − old_logp)) on every token of rank k (overflow
    tokens pooled), L = max(−A·ρ, −A·clip(ρ, 1−ε_low, 1+ε_high)) + β·KL [code
    rank_grpo_trainer.py:_compute_loss, importance_sampling_level="item"]. Reads
    `rollouts.segment_ids` [B, T] (the rank of each token)."""
    if rollouts is None or rollouts.segment_ids is None:
        raise ValueError(
            "policy loss 'rank_ppo_clip' needs rollouts= with segment_ids [B, T] (the rank "
            "of each token; the 'line_segments' stage numbers the lines)"
        )
    terms = token_terms(logprobs, old_logprobs, advantages, response_mask)
    seg = rollouts.segment_ids.to(terms.valid.device)
    old = torch.where(terms.valid, old_logprobs.detach().to(terms.logp.dtype), 0.0)
    log_ratio = segment_log_ratio(terms.logp, old, seg, terms.valid, cfg.rank_list_length)
    log_ratio = log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    terms = dataclasses.replace(terms, log_ratio=log_ratio, ratio=torch.exp(log_ratio))
    A, r = terms.adv, terms.ratio
    L = ppo_term(r, A, cfg.eps_low, cfg.eps_high)
    if cfg.dual_clip_c is not None:
        L = torch.where(A < 0, torch.minimum(L, -cfg.dual_clip_c * A), L)
    metrics = _clip_fractions(terms, r, 1.0 - cfg.eps_low, 1.0 + cfg.eps_high)
    metrics.update(ratio_metrics(terms))
    return add_kl_term(
        _reduce(L, terms, cfg, normaliser), metrics, terms, ref_logprobs, cfg, normaliser
    )
