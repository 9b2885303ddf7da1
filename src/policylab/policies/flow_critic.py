"""The critic of AC-Flow (papers/seed_generative.md G3.1, inferred): a value head
V_φ(x^τ, τ, c) on an intermediate state of the flow, trained by regression on the shaped
reward R̃ of the sample the state leads to.

It reads [c, x^τ, time_embedding(τ)] — the input layout and time embedding of
`DiffusionPolicy`'s velocity net (policies/flow.py `time_embedding`) — through an MLP of
2 × 128 SiLU layers [ours, G3.1] to one number. The head starts at zero, so V ≡ 0 (the mean
of a standardised reward) before the first update [ours]."""

from __future__ import annotations

import math

import torch
from torch import nn

from policylab.policies.diffusion import time_embedding
from policylab.policies.mlp import _layer


class ValueHead(nn.Module):
    """V_φ(x^τ, τ, c) for x ∈ R^D and an optional condition c ∈ R^C."""

    def __init__(self, dim: int, *, cond_dim: int = 0, hidden: tuple[int, ...] = (128, 128)):
        super().__init__()
        if dim < 1 or not hidden or min(hidden) < 1:
            raise ValueError(f"ValueHead: dim = {dim}, hidden = {hidden}; all must be >= 1")
        layers: list[nn.Module] = []
        n_in = cond_dim + dim + 9
        for width in hidden:
            layers += [_layer(n_in, width, math.sqrt(2)), nn.SiLU()]
            n_in = width
        layers.append(_layer(n_in, 1, 0.0))
        self.net = nn.Sequential(*layers)
        self.dim, self.cond_dim = dim, cond_dim

    def forward(
        self, x: torch.Tensor, tau: torch.Tensor, cond: torch.Tensor | None = None
    ) -> torch.Tensor:
        """x [..., D], τ [..., 1], c [..., C] or None → V [...]."""
        parts = [x, time_embedding(tau.to(x.dtype))]
        return self.net(torch.cat(parts if cond is None else [cond, *parts], dim=-1)).squeeze(-1)


def critic_loss(values: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """loss_V = mean (V_φ − R̃)² (G3.1; test F2: V = [0.5, 0.2, −1.5], R̃ = [1, 0, −1] →
    0.18). values, targets: [N] (targets carry no gradient)."""
    return ((values - targets.detach()) ** 2).mean()


def chain_points(
    chain: torch.Tensor, cond: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The states of ODE chains as critic inputs: chain [B, K+1, D] (x_0 = noise … x_K =
    the sample) → x [B·(K+1), D], τ [B·(K+1), 1] with τ_k = k/K (so τ = 1 at the sample
    itself, G3.2's anchor), c repeated per state (or None). Rows are sample-major."""
    B, n, D = chain.shape
    tau = (torch.arange(n, dtype=chain.dtype) / (n - 1)).repeat(B).unsqueeze(-1)
    c = None if cond is None else cond.repeat_interleave(n, 0)
    return chain.reshape(B * n, D), tau, c
