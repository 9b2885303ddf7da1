"""Model-derivative policy gradient: sensitivities of a real trajectory, propagated with the
Jacobians of an approximate model (papers/seed_control_theory.md §11.1, our reading of
Westenbroek, Levy, Fridovich-Keil, arXiv 2307.08168 — the estimator is `_provisional`).

Along a real trajectory (x_t, u_t), t = 0..T−1, with u_t = κ(x_t; θ):

    S_0     = 0
    du_t    = ∂κ/∂x·S_t + ∂κ/∂θ                      (feedback=False drops ∂κ/∂x·S_t)
    S_{t+1} = ∂f̃/∂x·S_t + ∂f̃/∂u·du_t
    ∇J      ≈ Σ_{t=0}^{T} ∂c/∂x_t·S_t + Σ_{t=0}^{T−1} ∂c/∂u_t·du_t

with the model f̃'s Jacobians evaluated at the real (x_t, u_t). The closed-loop Jacobian
∂f̃/∂x + ∂f̃/∂u·∂κ/∂x is contractive under feedback, so f̃ ≠ f errors in S_t stay bounded in
the horizon; open loop they grow like the product of ∂f̃/∂x (T11.1)."""

from __future__ import annotations

from typing import NamedTuple

import torch


class ModelDerivativeGrad(NamedTuple):
    grad: torch.Tensor  # [p]  the estimate of ∇_θ J
    sensitivity: torch.Tensor  # [n, p]  S_T = ∂x_T/∂θ as the model sees it
    sensitivity_norms: torch.Tensor  # [T+1]  ‖S_t‖_F, t = 0..T


def model_derivative_pg(
    A: torch.Tensor,  # noqa: N803 - the paper's names
    B: torch.Tensor,  # noqa: N803
    Kx: torch.Tensor,  # noqa: N803
    Ktheta: torch.Tensor,  # noqa: N803
    cx: torch.Tensor,
    cu: torch.Tensor | None = None,
    *,
    feedback: bool = True,
) -> ModelDerivativeGrad:
    """∇J from model sensitivities along one real trajectory (formula in the module doc).

    A: [T, n, n] = ∂f̃/∂x at (x_t, u_t); B: [T, n, m] = ∂f̃/∂u; Kx: [T, m, n] = ∂κ/∂x;
    Ktheta: [T, m, p] = ∂κ/∂θ; cx: [T+1, n] = ∂c/∂x_t (t = 0..T; x_0 does not depend on θ);
    cu: [T, m] = ∂c/∂u_t (None: controls cost nothing). feedback=False propagates the
    sensitivities as if the controls were open loop (the controller's ∂κ/∂x ignored)."""
    horizon, n, _ = A.shape
    p = Ktheta.shape[-1]
    if cx.shape[0] != horizon + 1:
        raise ValueError(f"cx has {cx.shape[0]} rows; expected T+1 = {horizon + 1} (x_0..x_T)")
    S = A.new_zeros(n, p)  # noqa: N806
    grad = A.new_zeros(p)
    norms = [S.norm()]
    for t in range(horizon):
        du = Ktheta[t] + (Kx[t] @ S if feedback else 0.0)
        grad = grad + cx[t] @ S
        if cu is not None:
            grad = grad + cu[t] @ du
        S = A[t] @ S + B[t] @ du  # noqa: N806
        norms.append(S.norm())
    grad = grad + cx[horizon] @ S
    return ModelDerivativeGrad(grad, S, torch.stack(norms))
