"""Exponential natural evolution strategies, xNES (Glasmachers, Schaul, Sun, Wierstra &
Schmidhuber, GECCO 2010; Wierstra et al., JMLR 15 (2014), Alg. 5 and Table 1), the
distribution PPGA adapts over combination coefficients (papers/seed_control_theory.md §9.1).

Search distribution N(μ, σ²BBᵀ), det B = 1. One generation of n samples:

    z_i ∼ N(0, I),  x_i = μ + σ·B·z_i
    u_i = max(0, log(n/2 + 1) − log rank_i) / Σ_j max(0, …) − 1/n   (rank 1 = best)
    G_δ = Σ u_i z_i,  G_M = Σ u_i (z_i z_iᵀ − I),  G_σ = tr(G_M)/d,  G_B = G_M − G_σ·I
    μ ← μ + η_μ·σ·B·G_δ,  σ ← σ·exp(η_σ/2·G_σ),  B ← B·expm(η_B/2·G_B)

Defaults [paper JMLR Table 1]: n = 4 + ⌊3 ln d⌋, η_μ = 1,
η_σ = η_B = 3(3 + ln d)/(5 d √d). Pure: tensors in, tensors out; a generator for sampling."""

from __future__ import annotations

import math

import torch

DTYPE = torch.float64


def default_population(dim: int) -> int:
    return 4 + int(math.floor(3 * math.log(dim)))


def default_rates(dim: int) -> tuple[float, float, float]:
    """(η_μ, η_σ, η_B)."""
    eta = 3 * (3 + math.log(dim)) / (5 * dim * math.sqrt(dim))
    return 1.0, eta, eta


def utilities(n: int) -> torch.Tensor:
    """Rank-based utilities u [n] for ranks 1..n (best first); they sum to 0."""
    ranks = torch.arange(1, n + 1, dtype=DTYPE)
    raw = torch.clamp(math.log(n / 2 + 1) - torch.log(ranks), min=0.0)
    return raw / raw.sum() - 1.0 / n


def sample(
    mu: torch.Tensor, sigma: float, B: torch.Tensor, n: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """(z [n, d], x [n, d]) with x_i = μ + σ·B·z_i."""
    z = torch.randn(n, mu.shape[0], generator=generator, dtype=mu.dtype)
    return z, mu + sigma * z @ B.T


def update(
    mu: torch.Tensor,
    sigma: float,
    B: torch.Tensor,
    z: torch.Tensor,
    scores: torch.Tensor,
    rates: tuple[float, float, float] | None = None,
) -> tuple[torch.Tensor, float, torch.Tensor]:
    """The natural-gradient step from samples z [n, d] and their scores [n] (higher is
    better; ties keep sample order). Returns (μ, σ, B)."""
    n, d = z.shape
    if scores.shape != (n,):
        raise ValueError(f"scores: expected shape ({n},), got {tuple(scores.shape)}")
    eta_mu, eta_sigma, eta_B = default_rates(d) if rates is None else rates
    order = torch.argsort(-scores.to(DTYPE), stable=True)
    u = torch.empty(n, dtype=z.dtype)
    u[order] = utilities(n).to(z.dtype)
    g_delta = u @ z
    eye = torch.eye(d, dtype=z.dtype)
    g_M = torch.einsum("i,ij,ik->jk", u, z, z) - u.sum() * eye
    g_sigma = float(torch.trace(g_M)) / d
    g_B = g_M - g_sigma * eye
    mu = mu + eta_mu * sigma * B @ g_delta
    sigma = sigma * math.exp(eta_sigma / 2 * g_sigma)
    B = B @ torch.linalg.matrix_exp(eta_B / 2 * g_B)
    return mu, sigma, B
