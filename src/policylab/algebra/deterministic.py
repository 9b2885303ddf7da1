"""Deterministic actor-critic algebra (DDPG, MADDPG): the TD target, the soft target
update and the deterministic policy-gradient loss, as pure functions, plus their registry
entries (a `td_target` advantage estimator and a `deterministic_pg` policy loss) so the
`ddpg` recipe names registered components like every other recipe.

DDPG: Lillicrap et al. 2015, arXiv:1509.02971, Algorithm 1. MADDPG: Lowe et al. 2017,
arXiv:1706.02275, eq. 5–6 (centralised critics Q_i(x, a_1..a_N)).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.algebra.advantages import advantage_estimators
from policylab.algebra.losses import policy_losses


def td_target(
    rewards: torch.Tensor, next_q: torch.Tensor, terminated: torch.Tensor, gamma: float
) -> torch.Tensor:
    """y = r + γ·(1 − terminated)·Q'(s', μ'(s')) (DDPG Alg. 1; MADDPG eq. 6).

    rewards, next_q, terminated: [B] (terminated 0/1). Only a true terminal state stops the
    bootstrap: a time-limit truncation is not `terminated` and keeps γ·Q' (Pardo et al.
    2018, arXiv:1712.00378)."""
    return rewards + gamma * (1.0 - terminated.to(rewards.dtype)) * next_q


@torch.no_grad()
def soft_update(target: torch.nn.Module, source: torch.nn.Module, tau: float) -> None:
    """θ' ← τ·θ + (1 − τ)·θ' for every parameter (DDPG Alg. 1, "update the target
    networks"); buffers (action scale) are copied as they are."""
    for t, s in zip(target.parameters(), source.parameters(), strict=True):
        t.mul_(1.0 - tau).add_(s, alpha=tau)
    for t, s in zip(target.buffers(), source.buffers(), strict=True):
        t.copy_(s)


def deterministic_pg(q_of_policy: torch.Tensor) -> torch.Tensor:
    """Actor loss L = −mean_b Q(s_b, μ(s_b)) (Silver et al. 2014 DPG; DDPG Alg. 1);
    q_of_policy: [B]. For MADDPG agent i: −Q_i(x, a_1..μ_i(o_i)..a_N) (eq. 5)."""
    return -q_of_policy.mean()


@dataclass(frozen=True)
class TDTargetOptions:
    gamma: float = 0.99

    def __post_init__(self) -> None:
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"td_target: gamma={self.gamma}; accepted: 0 ≤ γ ≤ 1")


@advantage_estimators.register(
    "td_target", config=TDTargetOptions, summary="y = r + γ(1 − terminated)·Q'(s', μ'(s'))"
)
def td_target_estimator(rollouts, cfg: TDTargetOptions) -> torch.Tensor:
    """The critic's regression target per row, [B, 1]: y = r + γ(1 − terminated)·Q', with
    Q' from `rollouts.extras["next_q"]` [B] and `rollouts.dones` [B] the terminations
    (not truncations). The off-policy trainer calls `td_target` directly."""
    if "next_q" not in rollouts.extras:
        raise ValueError("td_target needs rollouts.extras['next_q'] (Q' of the next state)")
    done = torch.zeros_like(rollouts.rewards) if rollouts.dones is None else rollouts.dones
    y = td_target(rollouts.rewards, rollouts.extras["next_q"], done, cfg.gamma)
    return y.unsqueeze(-1) * rollouts.response_mask


@dataclass(frozen=True)
class DeterministicPGOptions:
    pass


@policy_losses.register(
    "deterministic_pg", config=DeterministicPGOptions, summary="L = −Q(s, μ(s))"
)
def deterministic_pg_loss(
    logprobs,
    old_logprobs,
    advantages,
    response_mask,
    cfg: DeterministicPGOptions,
    *,
    ref_logprobs=None,
    rollouts=None,
    normaliser=None,
):
    """The DPG actor loss in the policy-loss signature: `advantages` [B, 1] hold
    Q(s, μ(s)) (differentiable in μ); logprobs are unused (a deterministic policy has
    none). L = −Σ m·Q / Σ m."""
    mask = response_mask.to(advantages.dtype)
    q = (advantages * mask).sum() / mask.sum().clamp(min=1.0)
    return -q, {"actor/q_mean": float(q.detach())}
