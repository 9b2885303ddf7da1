"""The branching rule of differentiable quality diversity (Fontaine & Nikolaidis,
arXiv:2106.03894; PPGA, Batra et al., arXiv:2305.13795, §9.1 of
papers/seed_control_theory.md):

    θ⁽ⁱ⁾ = θ + c₀⁽ⁱ⁾∇f + Σ_j c_j⁽ⁱ⁾∇m_j,   c⁽ⁱ⁾ ∼ N(μ, Σ)

In PPGA the "gradients" are PPO's parameter changes (our reading: θ_j after N1 PPO
iterations on reward j, minus θ), normalised to unit length as pyribs' gradient emitters
do with `normalize_grad=True`."""

from __future__ import annotations

import torch


def branch(theta: torch.Tensor, grads: torch.Tensor, coeffs: torch.Tensor) -> torch.Tensor:
    """θ + c·G. theta [D], grads [k+1, D] (∇f first), coeffs [n, k+1] → [n, D].
    T9.1: θ = [0,0], G = [[1,0],[0,2]], c = [0.5, −1] → [0.5, −2]."""
    if grads.ndim != 2 or grads.shape[1] != theta.shape[-1] or coeffs.shape[-1] != grads.shape[0]:
        raise ValueError(
            f"branch: expected theta [D], grads [k+1, D], coeffs [n, k+1], got "
            f"{tuple(theta.shape)}, {tuple(grads.shape)}, {tuple(coeffs.shape)}"
        )
    return theta + coeffs @ grads


def normalize_rows(grads: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Each row divided by its Euclidean norm (a zero row stays zero). [k+1, D]."""
    return grads / grads.norm(dim=-1, keepdim=True).clamp_min(eps)
