"""Quadratic games: f_i(x) = ½ x_iᵀ Q_i x_i + Σ_{j≠i} x_iᵀ J_ij x_j, so the pseudo-gradient
is F(x) = Jx with J_ii = Q_i (symmetric) (spec §4.2).

- `linear_game(J, player_dims)`: the game whose Jacobian is J.
- `scalar_game(mu1, mu2, a, b)`: the code's 2-D game f₁ = ½μ₁x₁² + a·x₁x₂,
  f₂ = ½μ₂x₂² + b·x₁x₂, J = [[μ₁, a], [b, μ₂]] [code experiments/quadratic_phase.py:
  μ₁ = μ₂ = 1, a = 10, b = 0.05].
- `quadratic_game(seed, lam)`: the random LQ ensemble [code LQ_GAMES/random_suite.py:
  generate_random_game, config.py:GameConfig]: d = 64 (two players of 32),
  Q_i = R_iᵀR_i + μ₀I with R_i standard Gaussian, R = Gaussian / ‖·‖₂ (spectral norm 1),
  J = [[Q₁, λ·a·R], [λ·b·Rᵀ, Q₂]], μ₀ = 1, a = 10, b = 0.05; numpy's default_rng(seed)
  drawn in the code's order (R₁, R₂, R), so seed 12345 + 1000·s is the code's game s.
"""

from __future__ import annotations

import numpy as np
import torch

from policylab.games.game import F64, DifferentiableGame, player_slices

GAME_DIM = 64  # [code LQ_GAMES/config.py:GameConfig.d_total]
MU0, A_SCALE, B_SCALE = 1.0, 10.0, 0.05  # [code GameConfig.mu0, .a, .b]
SUITE_SEED = 12345  # [code GameConfig.seed]; game s uses SUITE_SEED + 1000·s
SUITE_LAMBDAS = tuple(float(v) for v in np.linspace(0.0, 2.5, 61)[::10])  # [code random_suite]


def linear_game(J: torch.Tensor, player_dims: tuple[int, ...]) -> DifferentiableGame:
    """The quadratic game with Jacobian J: [d, d]; each own block J_ii must be symmetric."""
    J = torch.as_tensor(J, dtype=F64)
    d = sum(player_dims)
    if J.shape != (d, d):
        raise ValueError(f"J has shape {tuple(J.shape)}; player_dims {player_dims} need [{d}, {d}]")
    slices = player_slices(player_dims)
    for i, s in enumerate(slices):
        if not torch.allclose(J[s, s], J[s, s].T, atol=1e-12):
            raise ValueError(
                f"J's own block {i} is not symmetric; it is player {i}'s Hessian ∇²f_i"
            )

    def cost(i: int):
        s = slices[i]

        def f(x: torch.Tensor) -> torch.Tensor:
            own = 0.5 * x[s] @ J[s, s] @ x[s]
            cross = x[s] @ (J[s] @ x) - x[s] @ J[s, s] @ x[s]
            return own + cross

        return f

    return DifferentiableGame(player_dims, tuple(cost(i) for i in range(len(slices))), True)


def scalar_game(
    mu1: float = 1.0, mu2: float = 1.0, a: float = 10.0, b: float = 0.05
) -> DifferentiableGame:
    """J = [[μ₁, a], [b, μ₂]] (defaults: the code's 2-D game, spec T4.1–T4.3)."""
    return linear_game(torch.tensor([[mu1, a], [b, mu2]], dtype=F64), (1, 1))


def quadratic_jacobian(
    seed: int,
    lam: float,
    d_total: int = GAME_DIM,
    mu0: float = MU0,
    a: float = A_SCALE,
    b: float = B_SCALE,
) -> torch.Tensor:
    """J of the code's random LQ game (module docstring): [d_total, d_total]."""
    if d_total < 2 or d_total % 2:
        raise ValueError(f"d_total = {d_total}; the generator needs an even d_total >= 2")
    half = d_total // 2
    rng = np.random.default_rng(seed)
    R1 = rng.standard_normal((half, half))
    R2 = rng.standard_normal((half, half))
    Q1 = R1.T @ R1 + mu0 * np.eye(half)
    Q2 = R2.T @ R2 + mu0 * np.eye(half)
    base = rng.standard_normal((half, half))
    R = base / np.linalg.svd(base, compute_uv=False)[0]
    J = np.block([[Q1, lam * a * R], [lam * b * R.T, Q2]])
    return torch.from_numpy(J).to(F64)


def quadratic_game(seed: int, lam: float, **kwargs) -> DifferentiableGame:
    """The code's random 2-player LQ game as a `DifferentiableGame` (64-dim by default)."""
    J = quadratic_jacobian(seed, lam, **kwargs)
    half = J.shape[0] // 2
    return linear_game(J, (half, half))
