"""TPGR's REINFORCE pieces (papers/seed_llm_algorithms.md §20.1; Chen et al. AAAI 2019,
arXiv 1811.05869; code chenhaokun/TPGR src/tpgr.py:TPGR.train). Pure functions."""

from __future__ import annotations

import torch

from policylab.algebra.view_rewards import discounted_returns as time_first_returns


def discounted_returns(rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """Q_t = Σ_{t'≥t} γ^{t'−t} r_{t'}. rewards [E, L] (episode, step) → [E, L]; the time-first
    form is view_rewards.discounted_returns (one home)."""
    return time_first_returns(rewards.T, gamma).T


def standardise_per_user(returns: torch.Tensor, users: torch.Tensor) -> torch.Tensor:
    """Q̃ = (Q − mean_u)/std_u over all of user u's sampled episodes and steps, population std;
    a user whose returns are all equal keeps Q − mean_u undivided [code standardization].
    returns [E, L], users [E] (user id of each episode) → [E, L]."""
    out = torch.empty_like(returns)
    for u in torch.unique(users):
        rows = users == u
        block = returns[rows]
        centred = block - block.mean()
        std = block.std(unbiased=False)
        out[rows] = centred / std if float(std) > 0 else centred
    return out


def uniformity_penalty(node_probs: torch.Tensor) -> torch.Tensor:
    """Σ_levels mean_{c'} (π_n(c'|s) − 1/c)² per decision [code
    weighted_negative_likelyhood_with_l2_norm; named "entropy factor" there].
    node_probs [E, d, c] → [E]."""
    c = node_probs.shape[-1]
    return ((node_probs - 1.0 / c) ** 2).mean(-1).sum(-1)
