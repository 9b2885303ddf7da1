"""Truncated importance sampling (TIS) between the sampling engine and the learner.

An engine such as vLLM samples y_t from π_sampler, which differs slightly from the
learner's π_θ_old on the same weights (other kernels, bf16, batch-dependent reductions),
so an on-policy loss is silently off-policy. TIS re-weights each token's loss by

    w_t = min( π_θ_old(y_t | x, y_<t) / π_sampler(y_t | x, y_<t), C )
        = min( exp(log π_θ_old − log π_sampler), C ),   detached,

bounded above by the cap C so that a rare token the sampler under-weighted cannot blow up
the gradient (Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy
RL Training", the TIS fix; TRL's `vllm_importance_sampling_correction` with
`vllm_importance_sampling_cap` C, 2.0 when introduced; verl's rollout importance sampling).
"""

from __future__ import annotations

import torch

from policylab.algebra.precision import at_least_float32


def truncated_is_weights(
    learner_logprobs: torch.Tensor,
    sampler_logprobs: torch.Tensor,
    mask: torch.Tensor,
    cap: float,
) -> torch.Tensor:
    """w = min(exp(learner_logprobs − sampler_logprobs), cap) [B, T], detached, 0 where
    mask [B, T] is 0. learner_logprobs: log π_θ_old [B, T] (the learner's forward before
    the update); sampler_logprobs: log π_sampler [B, T] (the engine's); cap C > 0."""
    if not cap > 0:
        raise ValueError(f"tis_cap = {cap!r}: the truncation C must be > 0 (0 = TIS off)")
    log_ratio = at_least_float32(learner_logprobs.detach()) - at_least_float32(
        sampler_logprobs.detach()
    )
    valid = mask > 0
    # masked positions may hold anything (padding): never exponentiate them
    weights = torch.exp(torch.where(valid, log_ratio, torch.zeros_like(log_ratio)))
    return torch.where(valid, weights.clamp(max=cap), torch.zeros_like(weights))


def logprob_gap(
    learner_logprobs: torch.Tensor, sampler_logprobs: torch.Tensor, mask: torch.Tensor
) -> tuple[float, float]:
    """(mean, max) of |log π_learner − log π_sampler| over the valid tokens of mask [B, T]
    ((0, 0) when there are none): how far the engine's log-probs are from the learner's on
    the same weights (~1e-7 for the HF engine in float32 on the CPU)."""
    valid = mask > 0
    if not valid.any():
        return 0.0, 0.0
    gap = (
        at_least_float32(learner_logprobs.detach()) - at_least_float32(sampler_logprobs.detach())
    ).abs()[valid]
    return float(gap.mean()), float(gap.max())
