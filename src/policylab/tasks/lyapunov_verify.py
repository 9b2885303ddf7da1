"""Verification of a Lyapunov candidate: the honest check of §6.3 (papers/
seed_control_theory.md), stronger than the sampled reward.

- Exact, for a quadratic V(x) = xᵀPx on a linear system ẋ = Ax: V is a strict Lyapunov
  function iff P ≻ 0 and AᵀP + PA ≺ 0 (all eigenvalues of the symmetric matrices of the
  right sign) — `quadratic_certificate`; `solve_lyapunov` solves AᵀP + PA = −Q.
- Otherwise (weaker, "sampled-verified" [ours]): on a dense grid of the box, outside the
  ball ‖x‖ < r, require g(c) + 2·‖∇g(c)‖·h·√n/2 < 0 at every grid point c for
  g = V(0) − V and g = V̇ (h the grid spacing): a local Lipschitz estimate with a safety
  factor 2. It is an estimate, not a bound, so this is not a proof.
- dReal (the paper's formal verifier) is not installable here (no wheel in this
  environment; `pip install` is not allowed); nothing in this module calls it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from policylab.tasks.lyapunov import System
from policylab.tasks.symbolic import Node, evaluate

EIG_TOL = 1e-9  # an eigenvalue within this of 0 is not strict [ours]
LIPSCHITZ_SAFETY = 2.0  # [ours]


@dataclass(frozen=True)
class Verdict:
    verified: bool
    method: str  # "exact_quadratic" or "grid_lipschitz" (the weaker check)
    detail: str


def solve_lyapunov(A: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """P with AᵀP + PA = −Q (A, Q [n, n], float64), by the Kronecker linear system
    (I⊗Aᵀ + Aᵀ⊗I)·vec(P) = −vec(Q). Raises ValueError when the system is singular (A
    and −A share an eigenvalue)."""
    A, Q = A.double(), Q.double()
    n = A.shape[0]
    eye = torch.eye(n, dtype=torch.float64)
    At = A.T.contiguous()
    K = torch.kron(eye, At) + torch.kron(At, eye)
    if torch.linalg.matrix_rank(K) < n * n:
        raise ValueError("AᵀP + PA = −Q has no unique solution: A and −A share an eigenvalue")
    vec = torch.linalg.solve(K, -Q.T.contiguous().reshape(-1))
    P = vec.reshape(n, n).T
    return (P + P.T) / 2


def quadratic_certificate(
    A: torch.Tensor, P: torch.Tensor
) -> tuple[bool, torch.Tensor, torch.Tensor]:
    """(strict, eig(P), eig(AᵀP + PA)): strict iff min eig P > tol and max eig(AᵀP + PA)
    < −tol. P is symmetrised first."""
    A, P = A.double(), P.double()
    P = (P + P.T) / 2
    eig_p = torch.linalg.eigvalsh(P)
    eig_lie = torch.linalg.eigvalsh(A.T @ P + P @ A)
    strict = bool(eig_p.min() > EIG_TOL and eig_lie.max() < -EIG_TOL)
    return strict, eig_p, eig_lie


def quadratic_form(tree: Node, n: int, seed: int = 0) -> torch.Tensor | None:
    """P when V(x) − V(0) = xᵀPx exactly (checked at 64 random points to 1e-9
    relative), else None. P = ½·Hessian of V at 0."""
    zero = torch.zeros(n, dtype=torch.float64)
    H = torch.autograd.functional.hessian(lambda z: evaluate(tree, z.unsqueeze(0))[0], zero)
    P = H / 2
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, n, generator=g, dtype=torch.float64)
    v = evaluate(tree, x) - evaluate(tree, zero.unsqueeze(0))
    quad = ((x @ P) * x).sum(-1)
    ok = torch.allclose(v, quad, rtol=1e-9, atol=1e-9)
    return P if ok else None


def grid_check(tree: Node, system: System, points_per_dim: int, radius: float) -> Verdict:
    """The weaker sampled check on a grid of `points_per_dim`^n points (see module doc)."""
    axes = [
        torch.linspace(lo, hi, points_per_dim, dtype=torch.float64)
        for lo, hi in zip(system.low, system.high, strict=True)
    ]
    x = torch.cartesian_prod(*axes).reshape(-1, system.n).requires_grad_(True)
    outside = x.detach().norm(dim=-1) >= radius
    h = max(
        (hi - lo) / (points_per_dim - 1) for lo, hi in zip(system.low, system.high, strict=True)
    )
    reach = h * math.sqrt(system.n) / 2  # farthest distance from a box point to the grid
    v = evaluate(tree, x)
    v0 = evaluate(tree, torch.zeros(1, system.n, dtype=torch.float64))
    (grad_v,) = torch.autograd.grad(v.sum(), x, create_graph=True)
    lie = (grad_v * system.f(x)).sum(-1)
    (grad_lie,) = torch.autograd.grad(lie.sum(), x)
    failures = []
    for name, g, grad in (("V(0) − V", (v0 - v).detach(), grad_v), ("V̇", lie.detach(), grad_lie)):
        local = LIPSCHITZ_SAFETY * grad.detach().norm(dim=-1)
        worst = float((g + local * reach)[outside].max())
        if not math.isfinite(worst) or worst >= 0:
            failures.append(f"{name}: max g + 2‖∇g‖·h√n/2 = {worst:.3g} (h = {h:.3g})")
    detail = "; ".join(failures) or (
        f"V > V(0) and V̇ < 0 on {points_per_dim}^{system.n} grid, ‖x‖ ≥ {radius}"
    )
    return Verdict(not failures, "grid_lipschitz", detail)


def verify(
    tree: Node, system: System, *, points_per_dim: int = 201, radius: float = 0.1
) -> Verdict:
    """The exact eigenvalue check for a quadratic V on a linear system, else the weaker
    grid + Lipschitz check (labelled by `Verdict.method`)."""
    if system.A is not None:
        P = quadratic_form(tree, system.n)
        if P is not None:
            A = torch.tensor(system.A, dtype=torch.float64)
            strict, eig_p, eig_lie = quadratic_certificate(A, P)
            detail = f"eig(P) = {eig_p.tolist()}, eig(AᵀP + PA) = {eig_lie.tolist()}"
            return Verdict(strict, "exact_quadratic", detail)
    return grid_check(tree, system, points_per_dim, radius)


__all__ = [
    "Verdict",
    "grid_check",
    "quadratic_certificate",
    "quadratic_form",
    "solve_lyapunov",
    "verify",
]
