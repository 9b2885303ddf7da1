"""Step maps of gradient play on a linear game F(x) = Jx and their exact stability
thresholds (spec §4.2; code AashVed/SmallGainNash LQ_GAMES/compute_stability.py).

- Euler: T(h) = I − hJ. RK4 on x' = −Jx: T(h) = P(−hJ), P(z) = 1 + z + z²/2 + z³/6 + z⁴/24.
- h_stab: the largest h with ρ(T(h')) ≤ 1 for every h' ∈ (0, h]. Euler in closed form:
  |1 − hλ|² ≤ 1 ⇔ h ≤ 2·Re λ/|λ|², so h_stab = min_k 2·Re λ_k/|λ_k|² (0 if some
  Re λ_k ≤ 0) [ours; the code bisects on a grid]. RK4: per eigenvalue, first exit of
  |P(−hλ)| ≤ 1 on a grid of h|λ| ∈ [0, 4] (step 4e-3) refined by bisection [ours].
- ‖T‖_M = ‖M^{1/2} T M^{−1/2}‖₂, M = diag(m).
"""

from __future__ import annotations

import torch

from policylab.games.game import F64

METHODS = ("euler", "rk4")
RK4_SCAN = torch.linspace(0.0, 4.0, 1001, dtype=F64)  # [ours] grid of h·|λ|


def _check_square(J: torch.Tensor) -> torch.Tensor:
    J = torch.as_tensor(J, dtype=F64)
    if J.ndim != 2 or J.shape[0] != J.shape[1]:
        raise ValueError(f"J has shape {tuple(J.shape)}; expected a square [d, d]")
    return J


def euler_step_matrix(J: torch.Tensor, h: float) -> torch.Tensor:
    """T = I − hJ: [d, d]."""
    J = _check_square(J)
    return torch.eye(J.shape[0], dtype=F64) - h * J


def rk4_step_matrix(J: torch.Tensor, h: float) -> torch.Tensor:
    """T = P(−hJ), P(z) = 1 + z + z²/2 + z³/6 + z⁴/24: [d, d]."""
    Z = -h * _check_square(J)
    eye = torch.eye(Z.shape[0], dtype=F64)
    return eye + Z @ (eye + Z @ (eye / 2 + Z @ (eye / 6 + Z / 24)))


def step_matrix(J: torch.Tensor, h: float, method: str = "euler") -> torch.Tensor:
    if method not in METHODS:
        raise ValueError(f"method = {method!r}; accepted: {METHODS}")
    return euler_step_matrix(J, h) if method == "euler" else rk4_step_matrix(J, h)


def metric_norm(T: torch.Tensor, m: torch.Tensor) -> float:
    """‖T‖_M = ‖M^{1/2} T M^{−1/2}‖₂ for M = diag(m), m: [d] > 0."""
    s = torch.as_tensor(m, dtype=F64).sqrt()
    return float(torch.linalg.matrix_norm(s[:, None] * T / s[None, :], ord=2))


def spectral_radius(T: torch.Tensor) -> float:
    return float(torch.linalg.eigvals(T).abs().max())


def _rk4_abs(z: torch.Tensor) -> torch.Tensor:
    return (1 + z + z**2 / 2 + z**3 / 6 + z**4 / 24).abs()


def _rk4_exit(eig: torch.Tensor) -> torch.Tensor:
    """Per eigenvalue λ ≠ 0: the largest h with |P(−h'λ)| ≤ 1 for all h' ≤ h: [E]."""
    unit = eig / eig.abs()
    outside = _rk4_abs(-RK4_SCAN[None, :] * unit[:, None]) > 1 + 1e-12
    outside[:, 0] = False
    never = ~outside.any(dim=1)
    k = outside.to(torch.int64).argmax(dim=1).clamp_min(1)
    lo, hi = RK4_SCAN[k - 1], RK4_SCAN[k]
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        inside = _rk4_abs(-mid * unit) <= 1 + 1e-12
        lo, hi = torch.where(inside, mid, lo), torch.where(inside, hi, mid)
    exit_h = lo / eig.abs()
    exit_h = torch.where(never, torch.full_like(exit_h, float("inf")), exit_h)
    return torch.where(eig.real < 0, torch.zeros_like(exit_h), exit_h)  # grows at once


def h_stab(J: torch.Tensor, method: str = "euler") -> float:
    """Largest h with ρ(T(h')) ≤ 1 on (0, h]; 0 when play is unstable for every h > 0."""
    if method not in METHODS:
        raise ValueError(f"method = {method!r}; accepted: {METHODS}")
    eig = torch.linalg.eigvals(_check_square(J))
    eig = eig[eig.abs() > 0]
    if eig.numel() == 0:
        return float("inf")
    if method == "euler":
        if bool((eig.real <= 0).any()):
            return 0.0
        return float((2 * eig.real / eig.abs() ** 2).min())
    return float(_rk4_exit(eig).min())
