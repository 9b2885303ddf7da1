"""Deterministic actors and Q critics for DDPG/MADDPG (CleanRL ddpg_continuous_action.py:
ReLU MLPs, tanh output rescaled to the Box bounds; the critic reads [s, a])."""

from __future__ import annotations

import torch
from torch import nn


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DeterministicActor(nn.Module):
    """μ(s) = tanh(f(s))·scale + bias, scale = (high − low)/2, bias = (high + low)/2.
    `mode` and `normalize` make it a policy for workflows/episodes.evaluate_policy."""

    def __init__(self, obs_dim: int, low, high, hidden: list[int]) -> None:
        super().__init__()
        low = torch.as_tensor(low, dtype=torch.float32).reshape(-1)
        high = torch.as_tensor(high, dtype=torch.float32).reshape(-1)
        self.net = _mlp([obs_dim, *hidden, len(low)])
        self.register_buffer("action_scale", (high - low) / 2)
        self.register_buffer("action_bias", (high + low) / 2)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(obs)) * self.action_scale + self.action_bias

    @torch.no_grad()
    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        return self(obs)

    def normalize(self, obs: torch.Tensor, update: bool = False) -> torch.Tensor:
        return obs  # DDPG (CleanRL, SB3) reads raw observations


class QCritic(nn.Module):
    """Q(x, a) = g([x, a]) → [B]; for MADDPG x is every agent's observation and a every
    agent's action, concatenated."""

    def __init__(self, state_dim: int, action_dim: int, hidden: list[int]) -> None:
        super().__init__()
        self.net = _mlp([state_dim + action_dim, *hidden, 1])

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([state, action], dim=-1)).squeeze(-1)
