"""Euclidean projection onto the probability simplex, row by row.

proj(y) = argmin_{p ∈ Δ} ‖p − y‖₂ = max(y − τ, 0), τ chosen so that Σ p = 1; τ from the
sorted entries (Held, Wolfe & Crowder 1974; Duchi et al. 2008, Fig. 1). Used by projected
policy gradient (papers/seed_control_theory.md §1.1, §2.1) and by the robust kernels'
inner ascent."""

from __future__ import annotations

import torch


def project_simplex(y: torch.Tensor) -> torch.Tensor:
    """Project each row of y [..., K] onto {p ≥ 0, Σ p = 1}.

    >>> project_simplex(torch.tensor([0.45, 0.35]))  # → [0.55, 0.45]
    """
    if y.shape[-1] < 1:
        raise ValueError(f"project_simplex: need at least one entry per row, got {tuple(y.shape)}")
    if not torch.isfinite(y).all():
        raise ValueError("project_simplex: the input holds NaN or ±inf")
    u, _ = torch.sort(y, dim=-1, descending=True)
    css = u.cumsum(-1) - 1.0
    k = torch.arange(1, y.shape[-1] + 1, dtype=y.dtype, device=y.device)
    # ρ = the largest k with u_k − (Σ_{j≤k} u_j − 1)/k > 0
    active = (u - css / k) > 0
    rho = active.to(torch.long).cumsum(-1).argmax(-1, keepdim=True)
    tau = css.gather(-1, rho) / (rho + 1).to(y.dtype)
    return (y - tau).clamp_min(0.0)
