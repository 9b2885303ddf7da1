"""Policies for likelihood-vs-policy-gradient experiments (papers/seed_generative.md G6):
π_θ(ŷ | x) as a torch distribution whose `log_prob` is the joint log-density of one ŷ and
whose `entropy` is per input — Gaussian (free or MLP mean and log-std heads) and categorical.
`draw` takes M samples from a seeded generator, detached (score-function estimators)."""

from __future__ import annotations

import torch
from torch import distributions as D
from torch import nn

Tensor = torch.Tensor


def _mlp(n_in: int, hidden: tuple[int, ...], n_out: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [nn.Linear(n_in, h), nn.ReLU()]
        n_in = h
    layers.append(nn.Linear(n_in, n_out))
    return nn.Sequential(*layers)


class FreeGaussian(nn.Module):
    """π = N(μ, Σ) ignoring x: μ [D], Σ = L·Lᵀ with L lower-triangular, log-diagonal
    (`full`) or diagonal. Starts at N(0, I) [ours]."""

    def __init__(self, dim: int, full: bool = True) -> None:
        super().__init__()
        self.dim, self.full = dim, full
        self.mu = nn.Parameter(torch.zeros(dim))
        self.log_diag = nn.Parameter(torch.zeros(dim))
        self.lower = nn.Parameter(torch.zeros(dim * (dim - 1) // 2)) if full else None

    def scale_tril(self) -> Tensor:
        L = torch.diag(self.log_diag.exp())
        if self.lower is not None:
            rows, cols = torch.tril_indices(self.dim, self.dim, offset=-1)
            L = L.index_put((rows, cols), self.lower)
        return L

    def forward(self, x: Tensor) -> D.Distribution:
        B = x.shape[0]
        if self.lower is None:
            scale = self.log_diag.exp().expand(B, -1)
            return D.Independent(D.Normal(self.mu.expand(B, -1), scale, validate_args=False), 1)
        loc = self.mu.expand(B, -1)
        return D.MultivariateNormal(loc, scale_tril=self.scale_tril(), validate_args=False)


class GaussianMLP(nn.Module):
    """π(·|x) = N(m_θ(x), diag σ_θ(x)²): an MLP trunk with mean and log-std heads [code
    models/dn_policy.py MLPPolicy, hidden [64, 64] ReLU]."""

    def __init__(self, n_in: int, n_out: int, hidden: tuple[int, ...] = (64, 64)) -> None:
        super().__init__()
        self.net = _mlp(n_in, hidden, 2 * n_out)
        self.n_out = n_out

    def forward(self, x: Tensor) -> D.Distribution:
        mean, log_std = self.net(x).split(self.n_out, dim=-1)
        return D.Independent(
            D.Normal(mean, log_std.clamp(-10.0, 5.0).exp(), validate_args=False), 1
        )


class CategoricalMLP(nn.Module):
    """π(·|x) = Categorical(logits = MLP(x)) [code loss.py PO_Entropy_Classification]."""

    def __init__(self, n_in: int, classes: int, hidden: tuple[int, ...] = (64, 64)) -> None:
        super().__init__()
        self.net = _mlp(n_in, hidden, classes)

    def forward(self, x: Tensor) -> D.Distribution:
        return D.Categorical(logits=self.net(x), validate_args=False)


@torch.no_grad()
def draw(dist: D.Distribution, m: int, generator: torch.Generator | None) -> Tensor:
    """M detached samples: [M, B, D] (Gaussian) or [M, B] class indices (categorical)."""
    if isinstance(dist, D.Categorical):
        idx = torch.multinomial(dist.probs, m, replacement=True, generator=generator)
        return idx.T.contiguous()
    if isinstance(dist, D.Independent):
        base = dist.base_dist
        eps = torch.randn((m, *base.loc.shape), generator=generator)
        return base.loc + base.scale * eps
    if isinstance(dist, D.MultivariateNormal):
        eps = torch.randn((m, *dist.loc.shape), generator=generator)
        return dist.loc + (dist.scale_tril @ eps.unsqueeze(-1)).squeeze(-1)
    raise TypeError(f"draw: no sampler for {type(dist).__name__}")


def moments(dist: D.Distribution) -> tuple[Tensor, Tensor]:
    """Mean and covariance of a Gaussian policy, averaged over the inputs: [D], [D, D]."""
    if isinstance(dist, D.Independent):
        return dist.base_dist.loc.mean(0), torch.diag_embed(dist.base_dist.scale**2).mean(0)
    return dist.loc.mean(0), dist.covariance_matrix.mean(0)
