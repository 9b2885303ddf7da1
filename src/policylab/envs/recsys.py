"""A synthetic recommender with a known user model (papers/seed_control_theory.md §14.1,
ours): items e_i ~ N(0, I_d), users u ~ N(0, I_d), d = 8, and the probability that user u
finds item i relevant

    p(u, i) = σ(uᵀe_i / √d · τ),   τ = 3.

Ratings are Bernoulli(p) ∈ {0, 1}; preferences are static and an episode never repeats an
item, so the best episode of length L is the top-L items by p and precision@L has an
exact ceiling; the expected DCG of a list uses p as graded relevance."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


def relevance(users: torch.Tensor, items: torch.Tensor, scale: float) -> torch.Tensor:
    """p = σ(scale · uᵀe). users [U, d], items [I, d] → [U, I]; the model's scale is τ/√d."""
    return torch.sigmoid(scale * users @ items.T)


@dataclass
class UserModel:
    """A seeded catalogue: `items` [I, d] and the relevance scale τ/√d."""

    items: torch.Tensor
    tau: float = 3.0

    @classmethod
    def make(cls, n_items: int, dim: int = 8, tau: float = 3.0, *, seed: int) -> UserModel:
        g = torch.Generator().manual_seed(seed)
        return cls(torch.randn(n_items, dim, generator=g, dtype=torch.float64), tau)

    @property
    def dim(self) -> int:
        return self.items.shape[1]

    @property
    def scale(self) -> float:
        return self.tau / math.sqrt(self.dim)

    def users(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """n users u ~ N(0, I_d) [n, d]."""
        return torch.randn(n, self.dim, generator=generator, dtype=torch.float64)

    def p(self, users: torch.Tensor, items: torch.Tensor | None = None) -> torch.Tensor:
        """Relevance probabilities [U, I] (of the whole catalogue unless `items` is given)."""
        return relevance(users, self.items if items is None else items, self.scale)

    def rate(self, p: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Bernoulli(p) ratings in {0, 1}, same shape as p."""
        return (torch.rand(p.shape, generator=generator, dtype=p.dtype) < p).to(p.dtype)


def precision_ceiling(p: torch.Tensor, length: int) -> torch.Tensor:
    """Exact best expected precision@L per user: the mean of the L largest p [U]."""
    return p.topk(length, dim=-1).values.mean(-1)


def ideal_dcg(p: torch.Tensor, length: int) -> torch.Tensor:
    """Exact ideal DCG@L per row with graded relevance p: the top-L p in order [U]."""
    top = p.topk(length, dim=-1).values
    d = 1.0 / torch.log2(torch.arange(2, length + 2, dtype=p.dtype))
    return top @ d
