"""The natural (TRPO) step: conjugate gradient on the damped Fisher, scaled to a KL
radius, then a backtracking line search (Schulman et al., arXiv:1502.05477, App. C;
as HNPG's code, papers/seed_control_theory.md §8.1
[code YifeiZhou02/HNPG:trpo.py:conjugate_gradients, trpo_step, linesearch]).

Pure functions over flat tensors: the Fisher enters as a product `fvp(v) = F·v` (the
Hessian of the mean KL at the current policy), the loss as a callable of flat
parameters. Defaults: δ = 0.01, 10 CG iterations, damping 0.1, 10 halvings, accept ratio
0.1 [code trpo.py, main.py:parse_args]."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


def conjugate_gradient(
    fvp: Callable[[torch.Tensor], torch.Tensor],
    b: torch.Tensor,
    iters: int = 10,
    residual_tol: float = 1e-10,
) -> torch.Tensor:
    """x ≈ M⁻¹b by at most `iters` CG iterations, M given as a product v ↦ M·v; b: [P]."""
    x = torch.zeros_like(b)
    r, p = b.clone(), b.clone()
    rr = r @ r
    for _ in range(iters):
        if rr < residual_tol:
            break
        mp = fvp(p)
        alpha = rr / (p @ mp)
        x = x + alpha * p
        r = r - alpha * mp
        rr_new = r @ r
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x


@dataclass(frozen=True)
class NaturalStep:
    direction: torch.Tensor  # s = −(F + damping·I)⁻¹∇L (CG), [P]
    half_shs: float  # ½ sᵀ(F + damping·I)s
    multiplier: float  # √(½sᵀFs / δ)
    full_step: torch.Tensor  # s / multiplier: quadratic KL exactly δ
    expected_improvement: float  # −∇L · full_step


def natural(
    grad: torch.Tensor,
    fvp: Callable[[torch.Tensor], torch.Tensor],
    max_kl: float = 0.01,
    cg_iters: int = 10,
    damping: float = 0.1,
) -> NaturalStep:
    """The natural step for a loss L (minimised) with gradient `grad` [P]:

        s = CG(F + damping·I, −∇L),  β = √(2δ / sᵀ(F + damping·I)s),  Δθ = β·s,
        expected improvement −∇L·Δθ (the line search's first-order prediction).

    `fvp(v)` is F·v without the damping (added here)."""
    if max_kl <= 0:
        raise ValueError(f"natural: max_kl = {max_kl!r} must be > 0")
    if damping < 0:
        raise ValueError(f"natural: damping = {damping!r} must be >= 0")

    def damped(v: torch.Tensor) -> torch.Tensor:
        return fvp(v) + damping * v

    direction = conjugate_gradient(damped, -grad, cg_iters)
    half_shs = 0.5 * float(direction @ damped(direction))
    multiplier = (half_shs / max_kl) ** 0.5 if half_shs > 0 else float("inf")
    full_step = direction / multiplier if half_shs > 0 else torch.zeros_like(direction)
    return NaturalStep(direction, half_shs, multiplier, full_step, float(-grad @ full_step))


def line_search(
    loss: Callable[[torch.Tensor], float],
    x: torch.Tensor,
    full_step: torch.Tensor,
    expected_improvement: float,
    max_backtracks: int = 10,
    accept_ratio: float = 0.1,
) -> tuple[torch.Tensor, int, bool]:
    """Try x + 2⁻ᵏ·full_step for k = 0..max_backtracks−1; accept the first with an actual
    improvement > 0 and actual / (2⁻ᵏ·expected) > accept_ratio. Returns (x_new, k,
    accepted); x unchanged when none is accepted."""
    before = loss(x)
    for k in range(max_backtracks):
        frac = 0.5**k
        candidate = x + frac * full_step
        actual = before - loss(candidate)
        expected = expected_improvement * frac
        if expected > 0 and actual > 0 and actual / expected > accept_ratio:
            return candidate, k, True
    return x, max_backtracks, False
