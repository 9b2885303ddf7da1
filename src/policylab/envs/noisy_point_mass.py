"""NoisyPointMass (ours; papers/seed_control_theory.md §9.3), the testbed of PPGA at CPU
scale, batched in torch over policies and episodes:

    p_{t+1} = p_t + a_t + σ·ε_t,   a_t ∈ [−1, 1]² (clipped),   ε_t ∼ N(0, I),   T = 50
    f = 1 − (1/T)·Σ_t |a_t|²/2          objective, per-step proxy 1 − |a_t|²/2
    m = displacement/T                   realised measures; per-step proxies a_t (Markovian)

Observation [p_x/T, p_y/T, t/T]. Its optimal archive is exact: for a cell of measures the
best f is 1 − min_{m ∈ cell}|m|²/2 (a constant action is optimal by Jensen), so a grid's
optimal QD-score is known while every evaluation stays stochastic.

A policy is a tanh MLP's flat parameters (search/reprl.py's batched functional MLP) whose
output, squashed by tanh, is the mean action; PPO samples around it with a fixed std,
evaluation takes the mean."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.search.reprl import mlp_apply, mlp_sizes

DTYPE = torch.float64
OBS_DIM, ACT_DIM, N_REWARDS = 3, 2, 3  # rewards: objective proxy, then one per measure


@dataclass(frozen=True)
class NoisyPointMass:
    horizon: int = 50
    sigma: float = 0.1
    hidden: int = 16

    def __post_init__(self) -> None:
        if self.horizon < 1:
            raise ValueError(f"horizon: need ≥ 1 step, got {self.horizon}")
        if self.sigma < 0:
            raise ValueError(f"sigma: the dynamics noise must be ≥ 0, got {self.sigma}")
        if self.hidden < 1:
            raise ValueError(f"hidden: need ≥ 1 unit, got {self.hidden}")

    @property
    def sizes(self) -> list[tuple[int, int]]:
        return mlp_sizes(OBS_DIM, (self.hidden,), ACT_DIM)


def mean_action(env: NoisyPointMass, params: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
    """tanh of the MLP: params [B, D], obs [B, E, 3] → [B, E, 2]."""
    return torch.tanh(mlp_apply(params, env.sizes, obs))


def rollout(
    env: NoisyPointMass,
    params: torch.Tensor,
    episodes: int,
    generator: torch.Generator,
    std: float | None = None,
) -> dict[str, torch.Tensor]:
    """`episodes` episodes of each of B policies (params [B, D]); std None takes the mean
    action. Returns obs [B, T, E, 3], actions (sampled, unclipped) [B, T, E, 2],
    logp [B, T, E] (with std), rewards [B, T, E, 3], f [B, E], m [B, E, 2]."""
    B, T = params.shape[0], env.horizon
    p = torch.zeros(B, episodes, ACT_DIM, dtype=DTYPE)
    obs, acts, logps, rewards = [], [], [], []
    params = params.detach()
    for t in range(T):
        o = torch.cat([p / T, torch.full((B, episodes, 1), t / T, dtype=DTYPE)], dim=-1)
        mu = mean_action(env, params, o)
        if std is None:
            a = mu
        else:
            a = mu + std * torch.randn(mu.shape, generator=generator, dtype=DTYPE)
            logps.append(gaussian_logp(a, mu, std))
        applied = a.clamp(-1.0, 1.0)
        noise = torch.randn(applied.shape, generator=generator, dtype=DTYPE)
        p = p + applied + env.sigma * noise
        rewards.append(torch.cat([1 - (applied**2).sum(-1, keepdim=True) / 2, applied], dim=-1))
        obs.append(o)
        acts.append(a)
    rewards = torch.stack(rewards, 1)
    out = {
        "obs": torch.stack(obs, 1),
        "actions": torch.stack(acts, 1),
        "rewards": rewards,
        "f": rewards[..., 0].mean(1),
        "m": p / T,
    }
    if std is not None:
        out["logp"] = torch.stack(logps, 1)
    return out


def gaussian_logp(a: torch.Tensor, mu: torch.Tensor, std: float) -> torch.Tensor:
    """log N(a; μ, std²I) summed over the action's last axis."""
    var = std**2
    return (-((a - mu) ** 2) / (2 * var) - 0.5 * torch.log(torch.tensor(2 * torch.pi * var))).sum(
        -1
    )


def optimal_cell_fitness(cells: int, low: float = -1.0, high: float = 1.0) -> torch.Tensor:
    """Best f of each cell of a cells × cells grid over [low, high]² (row-major, as
    qd/archive.py indexes): 1 − d²/2, d the distance from 0 to the closed cell. [C]."""
    if not -1.0 <= low < high <= 1.0:
        raise ValueError(
            f"low, high: the exact optimum needs −1 ≤ low < high ≤ 1 (reachable mean "
            f"actions), got {low}, {high}"
        )
    edges = torch.linspace(low, high, cells + 1, dtype=DTYPE)
    lo, hi = edges[:-1], edges[1:]
    nearest = torch.where(lo > 0, lo, torch.where(hi < 0, hi, torch.zeros_like(lo)))
    d2 = nearest[:, None] ** 2 + nearest[None, :] ** 2
    return (1 - d2 / 2).flatten()
