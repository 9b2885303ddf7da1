"""Co-GRPO's schedule policy π_φ for a masked diffusion LM (papers/seed_generative.md G1.5,
inferred; Zhou et al. 2025, arXiv:2512.22288).

Per decoding step s, a_s = (log τ_s, logit q_s) ~ N(μ_s, diag σ²): a learned mean per step
(initialised at the hand schedule τ_s = τ_0, q_s = 1/(S − s)) and a learned log-std per
action dimension [ours]. `MaskedDiffusionLM.generate(..., schedule=actions)` decodes with
them (τ_s the step's sampling temperature, n_s = max(1, round(q_s·masked)), the last step
reveals all); the pure pieces are in `policylab.algebra.mdm_schedule`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from policylab.algebra.mdm_schedule import ACTION_DIMS, hand_schedule, schedule_log_prob


class SchedulePolicy(nn.Module):
    """π_φ(a_s | s): independent Gaussians, mean [S, 2] and log_std [2] learned.
    `std` = initial (σ_logτ, σ_logitq) [ours: D5's 0.25 and 0.5]."""

    def __init__(self, steps: int, temperature: float, std: tuple[float, float] = (0.25, 0.5)):
        super().__init__()
        if len(std) != ACTION_DIMS or not all(s > 0 for s in std):
            raise ValueError(f"schedule std = {std!r}; accepted: two values > 0 (log τ, logit q)")
        self.steps = steps
        self.mean = nn.Parameter(hand_schedule(steps, temperature))
        self.log_std = nn.Parameter(torch.tensor([math.log(s) for s in std]))

    def sample(self, rows: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Actions [rows, S, 2] drawn from π_φ (no gradient: they are stored as data)."""
        with torch.no_grad():
            z = torch.randn(rows, self.steps, ACTION_DIMS, generator=generator)
            return self.mean + torch.exp(self.log_std) * z

    def mean_actions(self, rows: int) -> torch.Tensor:
        """The schedule's mean for every row [rows, S, 2] (greedy evaluation)."""
        return self.mean.detach().expand(rows, -1, -1).clone()

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """log π_φ(a_s | s) per row and step [B, S] (with grad to φ)."""
        return schedule_log_prob(actions, self.mean, self.log_std)


def token_temperatures(actions: torch.Tensor, reveal: torch.Tensor) -> torch.Tensor:
    """τ of the step that revealed each token, exp(a[i, ρ_t, 0]) [B, L]: what the token
    log-probability π_θ(y_t | z_{ρ_t}, a_{ρ_t}) divides the logits by."""
    return torch.exp(actions[..., 0]).gather(1, reveal)
