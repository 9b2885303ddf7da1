"""Antithetic evolution strategies (papers/seed_control_theory.md §0.5, §7.1; the ES of
Nabati, Tennenholtz & Mannor, arXiv:2305.19922, Alg. 4, after Salimans et al. 2017 and
Mania et al. 2018):

    δ_i ∼ N(0, ν²I), i = 1..N
    g   = (1/N)·Σ_i [v(θ + δ_i) − v(θ − δ_i)]·δ_i
    θ  ← θ + α·g

Defaults of the grid-world [paper App. F.1]: ν = 0.1 (perturbation std), α = 0.1 (ES step),
100 trajectories per round (N = 50 antithetic pairs, one trajectory each). Pure functions:
theta [D], delta [N, D], values [N]."""

from __future__ import annotations

import torch


def antithetic_perturbations(
    n_pairs: int, dim: int, std: float, generator: torch.Generator, dtype=torch.float64
) -> torch.Tensor:
    """δ [n_pairs, dim] ∼ N(0, std²I); the candidates are θ + δ_i and θ − δ_i."""
    if n_pairs < 1:
        raise ValueError(f"n_pairs: need ≥ 1 antithetic pair, got {n_pairs}")
    if not std > 0:
        raise ValueError(f"std: the perturbation std ν must be > 0, got {std}")
    return std * torch.randn(n_pairs, dim, generator=generator, dtype=dtype)


def es_gradient(v_plus, v_minus, delta: torch.Tensor) -> torch.Tensor:
    """g = (1/N)·Σ_i [v⁺_i − v⁻_i]·δ_i [D]. v_plus, v_minus: [N]; delta: [N, D]."""
    v_plus = torch.as_tensor(v_plus, dtype=delta.dtype)
    v_minus = torch.as_tensor(v_minus, dtype=delta.dtype)
    if delta.ndim != 2 or v_plus.shape != (delta.shape[0],) or v_minus.shape != v_plus.shape:
        raise ValueError(
            f"es_gradient: expected v_plus, v_minus [N] and delta [N, D], got "
            f"{tuple(v_plus.shape)}, {tuple(v_minus.shape)}, {tuple(delta.shape)}"
        )
    return (v_plus - v_minus) @ delta / delta.shape[0]


def es_step(theta: torch.Tensor, gradient: torch.Tensor, step: float) -> torch.Tensor:
    """θ + α·g (ascent: values are returns, maximised)."""
    return theta + step * gradient
