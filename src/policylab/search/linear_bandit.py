"""Linear bandits over feature vectors: ridge statistics, OFUL and Thompson sampling
(papers/seed_control_theory.md §0.5, §7.1; Nabati, Tennenholtz & Mannor, Representation-
Driven Reinforcement Learning, ICML 2023, arXiv:2305.19922, eq. 2 and §2).

    V = λI + Σ_t x_t x_tᵀ,   b = Σ_t x_t y_t,   ŵ = V⁻¹b
    OFUL score(x) = ⟨x, ŵ⟩ + α·‖x‖_{V⁻¹},   ‖x‖_{V⁻¹} = √(xᵀV⁻¹x)
    TS score(x)   = ⟨x, w̃⟩,  w̃ ∼ N(ŵ, σ²V⁻¹)

Pure functions over float64 tensors: X [n, d], y [n], V [d, d], b [d]. Randomness only
through a passed `torch.Generator`. λ = 0.1 is the grid-world default [paper App. F.1]."""

from __future__ import annotations

import torch

DTYPE = torch.float64


def _matrix(x, name: str, ndim: int) -> torch.Tensor:
    x = torch.as_tensor(x, dtype=DTYPE)
    if x.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-d tensor, got shape {tuple(x.shape)}")
    return x


def ridge_stats(X, y, lam: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """(V, b) = (λI + XᵀX, Xᵀy). X: [n, d], y: [n]; λ > 0 [paper App. F.1: λ = 0.1]."""
    X, y = _matrix(X, "X", 2), _matrix(y, "y", 1)
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"y: expected {X.shape[0]} targets (rows of X), got {y.shape[0]}")
    if not lam > 0:
        raise ValueError(f"lam: the ridge λ must be > 0, got {lam}")
    V = lam * torch.eye(X.shape[1], dtype=DTYPE) + X.T @ X
    return V, X.T @ y


def ridge_update(V: torch.Tensor, b: torch.Tensor, x, y: float):
    """One observation: (V + xxᵀ, b + x·y). x: [d]."""
    x = _matrix(x, "x", 1)
    return V + torch.outer(x, x), b + x * float(y)


def ridge_weights(V: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """ŵ = V⁻¹b [d], by a Cholesky solve (V is symmetric positive definite)."""
    L = torch.linalg.cholesky(V)
    return torch.cholesky_solve(b.unsqueeze(-1), L).squeeze(-1)


def inverse_norms(X, V: torch.Tensor) -> torch.Tensor:
    """‖x‖_{V⁻¹} = √(xᵀV⁻¹x) for each row of X [n, d] → [n]."""
    X = _matrix(X, "X", 2)
    L = torch.linalg.cholesky(V)
    Z = torch.linalg.solve_triangular(L, X.T, upper=False)  # L⁻¹xᵀ, so ‖Z‖² = xᵀV⁻¹x
    return Z.pow(2).sum(0).sqrt()


def oful_scores(X, V: torch.Tensor, w_hat: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """⟨x, ŵ⟩ + α‖x‖_{V⁻¹} for each row of X [n, d] → [n]; α ≥ 0 the confidence width."""
    if alpha < 0:
        raise ValueError(f"alpha: the OFUL width must be ≥ 0, got {alpha}")
    X = _matrix(X, "X", 2)
    return X @ w_hat + alpha * inverse_norms(X, V)


def thompson_weights(
    V: torch.Tensor, w_hat: torch.Tensor, sigma: float, generator: torch.Generator
) -> torch.Tensor:
    """w̃ = ŵ + σ·L⁻ᵀε, ε ∼ N(0, I), V = LLᵀ, so w̃ ∼ N(ŵ, σ²V⁻¹) [d]."""
    if sigma < 0:
        raise ValueError(f"sigma: the Thompson scale must be ≥ 0, got {sigma}")
    L = torch.linalg.cholesky(V)
    eps = torch.randn(w_hat.shape[0], generator=generator, dtype=DTYPE)
    return w_hat + sigma * torch.linalg.solve_triangular(L.T, eps.unsqueeze(-1), upper=True)[:, 0]


def thompson_scores(
    X, V: torch.Tensor, w_hat: torch.Tensor, sigma: float, generator: torch.Generator
) -> torch.Tensor:
    """⟨x, w̃⟩ for each row of X [n, d] with one shared draw w̃ ∼ N(ŵ, σ²V⁻¹) → [n]."""
    return _matrix(X, "X", 2) @ thompson_weights(V, w_hat, sigma, generator)
