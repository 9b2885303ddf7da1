"""Time-indexed policies: one set of parameters per epoch h of a finite horizon
(papers/seed_control_theory.md §0.6; §3 trains the blocks backwards, §8 all at once).

`TimeIndexedGaussian` is HNPG's per-step Gaussian policy: for each h an MLP (16-16 tanh)
gives the mean, with a state-independent log-std (initial 0); the mean layer's weights are
scaled by 0.1 and its bias zeroed at initialisation [code YifeiZhou02/HNPG:models.py:Policy,
trpo.py:TRPO.__init__ (FINITE = True)]."""

from __future__ import annotations

import math

import torch
from torch import nn

BLOCK_SCHEDULES = ("simultaneous", "backward")


class GaussianHead(nn.Module):
    """One epoch's policy: obs [N, D] → (mean, log_std) [N, A]."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...] = (16, 16)) -> None:
        super().__init__()
        layers, width = [], obs_dim
        for h in hidden:
            layers += [nn.Linear(width, h, dtype=torch.float64), nn.Tanh()]
            width = h
        self.body = nn.Sequential(*layers)
        self.mean = nn.Linear(width, act_dim, dtype=torch.float64)
        with torch.no_grad():
            self.mean.weight.mul_(0.1)
            self.mean.bias.zero_()
        self.log_std = nn.Parameter(torch.zeros(1, act_dim, dtype=torch.float64))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = self.mean(self.body(obs))
        return mean, self.log_std.expand_as(mean)


def gaussian_log_prob(
    action: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor
) -> torch.Tensor:
    """log N(action; mean, diag e^{2·log_std}) summed over the last axis, [N]."""
    z = (action - mean) * torch.exp(-log_std)
    return (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)


def gaussian_kl(
    mean0: torch.Tensor, log_std0: torch.Tensor, mean1: torch.Tensor, log_std1: torch.Tensor
) -> torch.Tensor:
    """KL(N0 ‖ N1) per row, summed over the action axis, [N] (the code's get_kl with
    N0 the frozen old policy)."""
    var0, var1 = torch.exp(2 * log_std0), torch.exp(2 * log_std1)
    return (log_std1 - log_std0 + (var0 + (mean0 - mean1).pow(2)) / (2 * var1) - 0.5).sum(-1)


class TimeIndexedGaussian(nn.Module):
    """H Gaussian heads; `head(h)` acts at epoch h. `block_schedule` orders the updates
    (`blocks()`): all epochs from one batch (HNPG) or last epoch first (dynamic PG)."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        horizon: int,
        hidden: tuple[int, ...] = (16, 16),
        block_schedule: str = "simultaneous",
    ) -> None:
        super().__init__()
        if block_schedule not in BLOCK_SCHEDULES:
            raise ValueError(
                f"TimeIndexedGaussian: block_schedule = {block_schedule!r}; "
                f"choices: {', '.join(BLOCK_SCHEDULES)}"
            )
        self.horizon, self.block_schedule = int(horizon), block_schedule
        self.heads = nn.ModuleList(
            GaussianHead(obs_dim, act_dim, hidden) for _ in range(self.horizon)
        )

    def head(self, h: int) -> GaussianHead:
        return self.heads[h]

    def blocks(self) -> list[int]:
        order = list(range(self.horizon))
        return order if self.block_schedule == "simultaneous" else order[::-1]

    def sample(self, obs: torch.Tensor, h: int, g: torch.Generator) -> torch.Tensor:
        """a ∼ π_h(·|obs), [N, A], drawn with `g`."""
        with torch.no_grad():
            mean, log_std = self.heads[h](obs)
            return mean + torch.exp(log_std) * torch.randn(
                mean.shape, generator=g, dtype=mean.dtype
            )

    def greedy(self, obs: torch.Tensor, h: int) -> torch.Tensor:
        """The mean action, [N, A]."""
        with torch.no_grad():
            return self.heads[h](obs)[0]
