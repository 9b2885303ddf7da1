"""DiLoCo's outer loop: global parameters, pseudo-gradients, the outer optimiser and
DiLoCoX's one-step delay (papers/seed_agents.md §A10).

DiLoCo (Douillard et al., arXiv 2311.08455; code OpenDiLoCo `train_diloco_torch.py:main`):
each of N workers runs H inner steps from the global θ_t to its local θ̃_i; the
pseudo-gradients Δ_i = θ_t − θ̃_i are averaged, Δ̄ = (1/N) Σ_i Δ_i, set as the gradient of θ_t,
and the outer optimiser steps — SGD, lr 0.7, momentum 0.9, Nesterov:

    b ← μ·b + Δ̄,   θ_{t+1} = θ_t − η·(Δ̄ + μ·b)

Every worker then starts round t + 1 from θ_{t+1}.

DiLoCoX's one-step delay (arXiv 2506.21263, [ours: our reading of the abstract], provisional):
the outer step that ends round t applies the average of round t − 1, whose communication
overlapped round t's training: θ_{t+1} = Outer(θ_t, Δ̄_{t−1}), Δ̄_{−1} = 0 (`Delay`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

import torch

OUTER_LR = 0.7  # OpenDiLoCo
OUTER_MOMENTUM = 0.9  # OpenDiLoCo (Nesterov)


class OuterLoop:
    """The global copy θ of a model's parameters and its outer SGD (Nesterov when momentum
    is set). The model's own parameters are the worker's local θ̃."""

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        lr: float = OUTER_LR,
        momentum: float = OUTER_MOMENTUM,
    ) -> None:
        self.params = list(params)
        self.globals = [p.detach().clone() for p in self.params]
        for g in self.globals:
            g.requires_grad_(True)
        nesterov = momentum > 0  # torch's SGD refuses Nesterov without momentum
        self.optimizer = torch.optim.SGD(self.globals, lr=lr, momentum=momentum, nesterov=nesterov)

    @torch.no_grad()
    def pseudo_gradients(self) -> list[torch.Tensor]:
        """Δ = θ − θ̃ per parameter (global minus local)."""
        return [g - p for g, p in zip(self.globals, self.params, strict=True)]

    @torch.no_grad()
    def step(self, averaged: Sequence[torch.Tensor] | None) -> None:
        """θ ← Outer(θ, Δ̄) (None: Δ̄ = 0, the delay's first round), then θ̃ ← θ."""
        for g, delta in zip(self.globals, averaged or [None] * len(self.globals), strict=True):
            g.grad = torch.zeros_like(g) if delta is None else delta.to(g.dtype).clone()
        self.optimizer.step()
        for p, g in zip(self.params, self.globals, strict=True):
            p.copy_(g)


class Delay:
    """A queue that hands back what was pushed `steps` rounds earlier (None while it fills):
    `steps` 0 is synchronous DiLoCo, 1 DiLoCoX's one-step delay. Items may be pending
    collectives, awaited by the caller when they come out."""

    def __init__(self, steps: int) -> None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"delay={steps!r} is invalid; accepted: an integer >= 0")
        self.steps = steps
        self.queue: deque = deque()

    def push(self, item: Any) -> Any | None:
        """Add this round's item; return the one due now."""
        self.queue.append(item)
        return self.queue.popleft() if len(self.queue) > self.steps else None

    def drain(self) -> list:
        """Everything still pending, oldest first (the end of training)."""
        items = list(self.queue)
        self.queue.clear()
        return items
