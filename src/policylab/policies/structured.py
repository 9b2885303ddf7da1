"""A structured policy with a tracking controller inside (papers/seed_control_theory.md §11.1):

    task features → network → (Δw, ΔK)
    x^d(t) = CatmullRom(w₀ + Δw)(t)                   (periodic spline through N waypoints)
    u_t    = κ(x_t, x^d_t; K₀·exp(ΔK))

κ is designed from the kinematic unicycle (dynamics/unicycle.py) — Kanayama's tracking law
[ours; the paper uses a model-derived controller, Fig. 1]. With e = R(θ)ᵀ(p^d − p) the
error in the body frame and e_θ = θ^d − θ (only its sine and cosine, from ṗ^d):

    v = v_d·cos e_θ + k_x·e_x,      ω = ω_d + v_d·(k_y·e_y + k_θ·sin e_θ)

v_d = ‖ṗ^d‖, ω_d = (ẋ^d ÿ^d − ẏ^d ẍ^d)/v_d². feedback=False gives the open-loop policy of
the same class: u = (v_d, ω_d), the gains unused. The gains are offset in log space so they
stay positive [ours]. `controls` is a pure function of (x, spline basis rows, offsets), so
torch.func takes its Jacobians ∂κ/∂x and ∂κ/∂(Δw, ΔK) at every time step."""

from __future__ import annotations

import math

import torch
from torch import nn

GAINS = (2.0, 4.0, 3.0)  # (k_x, k_y, k_θ) [ours]: critically damped-ish at 20 Hz


def catmull_rom_basis(times: torch.Tensor, knots: int, period: float) -> torch.Tensor:
    """Rows of the periodic uniform Catmull-Rom spline: [3, T, N] (value, d/dt, d²/dt²),
    so p^d(t) = basis[0] @ W for the waypoints W: [N, 2] at times i·period/N."""
    s = times / period * knots
    i = torch.floor(s).long()
    u = (s - i).unsqueeze(-1)
    rate = knots / period
    # the four weights on P_{i−1}, P_i, P_{i+1}, P_{i+2} and their u-derivatives
    value = 0.5 * torch.cat(
        (-(u**3) + 2 * u**2 - u, 3 * u**3 - 5 * u**2 + 2, -3 * u**3 + 4 * u**2 + u, u**3 - u**2),
        -1,
    )
    first = 0.5 * torch.cat(
        (-3 * u**2 + 4 * u - 1, 9 * u**2 - 10 * u, -9 * u**2 + 8 * u + 1, 3 * u**2 - 2 * u), -1
    )
    second = 0.5 * torch.cat((-6 * u + 4, 18 * u - 10, -18 * u + 8, 6 * u - 2), -1)
    basis = times.new_zeros(3, times.shape[0], knots)
    rows = torch.arange(times.shape[0])
    for j in range(4):
        cols = (i - 1 + j) % knots
        basis[0, rows, cols] += value[:, j]
        basis[1, rows, cols] += first[:, j] * rate
        basis[2, rows, cols] += second[:, j] * rate**2
    return basis


def controls(
    x: torch.Tensor,
    basis: torch.Tensor,
    offsets: torch.Tensor,
    waypoints: torch.Tensor,
    gains: torch.Tensor,
    feedback: bool = True,
) -> torch.Tensor:
    """u = κ(x, x^d; K): x: [3] (p_x, p_y, θ), basis: [3, N] (this time's spline rows),
    offsets: [2N + 3] = (Δw flattened, ΔK), waypoints: [N, 2], gains: [3] -> u: [2]."""
    n = waypoints.shape[0]
    w = waypoints + offsets[: 2 * n].reshape(n, 2)
    p, dp, ddp = basis[0] @ w, basis[1] @ w, basis[2] @ w
    speed = torch.sqrt((dp**2).sum() + 1e-12)
    omega_d = (dp[0] * ddp[1] - dp[1] * ddp[0]) / speed**2
    if not feedback:
        return torch.stack((speed, omega_d))
    k = gains * torch.exp(offsets[2 * n :])
    c, s = torch.cos(x[2]), torch.sin(x[2])
    ex = c * (p[0] - x[0]) + s * (p[1] - x[1])
    ey = -s * (p[0] - x[0]) + c * (p[1] - x[1])
    cos_e = (dp[0] * c + dp[1] * s) / speed
    sin_e = (dp[1] * c - dp[0] * s) / speed
    return torch.stack((speed * cos_e + k[0] * ex, omega_d + speed * (k[1] * ey + k[2] * sin_e)))


class TrackingPolicy(nn.Module):
    """Network → waypoint and gain offsets → spline reference → feedback controller.

    waypoints: [N, 2] the nominal w₀ (the task's reference at the knot times); features:
    [d] the task's description; the last layer starts at zero, so the first policy is the
    nominal controller on the nominal spline. float64 throughout."""

    def __init__(
        self,
        waypoints: torch.Tensor,
        features: torch.Tensor,
        hidden: int = 32,
        feedback: bool = True,
        gains: tuple[float, float, float] = GAINS,
    ):
        super().__init__()
        self.feedback = feedback
        self.register_buffer("waypoints", waypoints.to(torch.float64))
        self.register_buffer("features", features.to(torch.float64))
        self.register_buffer("gains", torch.tensor(gains, dtype=torch.float64))
        out = 2 * waypoints.shape[0] + 3
        self.net = nn.Sequential(
            nn.Linear(features.shape[0], hidden), nn.Tanh(), nn.Linear(hidden, out)
        ).double()
        nn.init.zeros_(self.net[2].weight)
        nn.init.zeros_(self.net[2].bias)

    def offsets(self) -> torch.Tensor:
        """(Δw, ΔK): [2N + 3]."""
        return self.net(self.features)

    def control(self, x: torch.Tensor, basis: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return controls(x, basis, offsets, self.waypoints, self.gains, self.feedback)


def task_features(amplitude: float, period: float) -> torch.Tensor:
    """The network's input for a figure-eight of this size and period [ours]."""
    return torch.tensor(
        [1.0, amplitude / 2.0, period / 10.0, math.log(period)], dtype=torch.float64
    )
