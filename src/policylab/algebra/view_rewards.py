"""AFGR's view-selection rewards and PPO loss, pure tensor functions (papers/
seed_control_theory.md §16.1; Du et al., arXiv 2206.01153; code PRIS-CV/MAFR train.py
reward "simple", network.py `PPO.update`).

Glances t = 1..T give the classifier's confidence in the true class p_t(y); the action
after glance t (the view of glance t+1) is rewarded by the gain it bought:

    r_t = p_{t+1}(y) − p_t(y),          t = 1..T−1
    G_t = r_t + γ G_{t+1},  γ = 0.7      (discounted returns, G_T = 0)
    Ĝ = (G − mean(G)) / (std(G) + 1e-5)  (over the whole batch, unbiased std, as torch.std)
    A = Ĝ − V(h_t)  (V detached)
    loss = mean(−min(ρA, clip(ρ, 1 ± 0.2)A) + ½(V − Ĝ)² − 1e-4·H(π))

Every default is the code's: γ 0.7, clip 0.2, value coefficient ½, entropy 1e-4."""

from __future__ import annotations

import torch

from policylab.algebra.losses import clipped_surrogate


def confidence_gain(confidence: torch.Tensor) -> torch.Tensor:
    """r_t = p_{t+1}(y) − p_t(y). confidence: [T, B] → rewards [T−1, B]."""
    return confidence[1:] - confidence[:-1]


def discounted_returns(rewards: torch.Tensor, gamma: float = 0.7) -> torch.Tensor:
    """G_t = Σ_{k≥t} γ^{k−t} r_k. rewards: [T, B] → returns [T, B]."""
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


def normalise_batch(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """(x − mean) / (std + eps) over every entry; std unbiased (MAFR `PPO.update`)."""
    return (x - x.mean()) / (x.std() + eps)


def view_ppo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    returns: torch.Tensor,
    values: torch.Tensor,
    entropy: torch.Tensor,
    *,
    clip: float = 0.2,
    value_coef: float = 0.5,
    entropy_coef: float = 1e-4,
) -> torch.Tensor:
    """The module docstring's loss; every argument [T, B], `returns` already normalised."""
    advantages = returns - values.detach()
    ratio = torch.exp(logp - old_logp.detach())
    value_loss = (values - returns) ** 2
    return (
        clipped_surrogate(ratio, advantages, clip, clip)
        + value_coef * value_loss
        - entropy_coef * entropy
    ).mean()
