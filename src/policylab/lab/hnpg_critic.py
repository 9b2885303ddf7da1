"""HNPG's per-step critics Q_h(s, a) and the hybrid FQE fit (papers/seed_control_theory.md
§8.1 [code YifeiZhou02/HNPG:models.py:QValue, trpo.py:TRPO.update_q, update_params]).

    L_h = mean_on (Q_h(s, a) − Ĝ)²  +  mean_off (Q_h(s, a) − y)²,
    y = r + Q_{h+1}(s', a'), a' ∼ π_{h+1}(s')   (y = r at h = H − 1),

fitted for h = H−1..0 (so y reads the Q_{h+1} just refitted) by `steps` Adam steps (lr
3e-4, a fresh optimiser each update, as the code). `hybrid=False` drops the offline term
(TRPO's critic); `on=None` drops the on-policy term (offline only)."""

from __future__ import annotations

import torch
from torch import nn


class QValue(nn.Module):
    """Q(s, a): an MLP 64-64 tanh on [s, a]; the head's weights scaled by 0.1, bias 0."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 64) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(obs_dim + act_dim, hidden, dtype=torch.float64),
            nn.Tanh(),
            nn.Linear(hidden, hidden, dtype=torch.float64),
            nn.Tanh(),
        )
        self.head = nn.Linear(hidden, 1, dtype=torch.float64)
        with torch.no_grad():
            self.head.weight.mul_(0.1)
            self.head.bias.zero_()

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(torch.cat([obs, action], -1))).squeeze(-1)


def state_value(q: QValue, pi_h, obs: torch.Tensor, draws: int, g: torch.Generator) -> torch.Tensor:
    """V_h(s) = mean of Q_h(s, a) over `draws` a ∼ π_h(s) [code QValue.get_value], [N]."""
    with torch.no_grad():
        mean, log_std = pi_h(obs)
        total = torch.zeros(obs.shape[0], dtype=torch.float64)
        for _ in range(draws):
            a = mean + torch.exp(log_std) * torch.randn(mean.shape, generator=g, dtype=mean.dtype)
            total += q(obs, a)
    return total / draws


def fit(
    q: QValue,
    on: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None,
    off: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None,
    steps: int,
    lr: float,
) -> tuple[float, float]:
    """`steps` Adam steps on the on-policy (obs, action, Ĝ) and offline (obs, action, y)
    squared errors; returns the last (on, off) losses before the last step (nan when a term
    is absent)."""
    opt = torch.optim.Adam(q.parameters(), lr=lr)
    on_loss = off_loss = torch.tensor(float("nan"))
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.zeros((), dtype=torch.float64)
        if on is not None:
            on_loss = (q(on[0], on[1]) - on[2]).pow(2).mean()
            loss = loss + on_loss
        if off is not None:
            off_loss = (q(off[0], off[1]) - off[2]).pow(2).mean()
            loss = loss + off_loss
        loss.backward()
        opt.step()
    return float(on_loss.detach()), float(off_loss.detach())


def offline_targets(reward: torch.Tensor, next_q: torch.Tensor | None) -> torch.Tensor:
    """y = r + Q_{h+1}(s', a') (γ = 1, forced), or y = r at the last step (next_q None)."""
    return reward if next_q is None else reward + next_q
