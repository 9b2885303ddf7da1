"""The ideal kinematic unicycle, the crude model of papers/seed_control_theory.md §11.2.

State x = (p_x, p_y, θ), control u = (v, ω), Euler step of length dt:

    p_x' = p_x + dt·v·cos θ,   p_y' = p_y + dt·v·sin θ,   θ' = θ + dt·ω

No actuator lag and no drift: the "real" unicycle of envs/tracking.py has both."""

from __future__ import annotations

import torch


def step(x: torch.Tensor, u: torch.Tensor, dt: float) -> torch.Tensor:
    """x: [..., 3], u: [..., 2] -> the next state [..., 3] (differentiable)."""
    theta, v, omega = x[..., 2], u[..., 0], u[..., 1]
    return torch.stack(
        (
            x[..., 0] + dt * v * torch.cos(theta),
            x[..., 1] + dt * v * torch.sin(theta),
            theta + dt * omega,
        ),
        dim=-1,
    )


def jacobians(x: torch.Tensor, u: torch.Tensor, dt: float) -> tuple[torch.Tensor, torch.Tensor]:
    """∂f̃/∂x: [T, 3, 3] and ∂f̃/∂u: [T, 3, 2] at each (x_t, u_t) (x: [T, 3], u: [T, 2])."""
    T = x.shape[0]  # noqa: N806
    c, s, v = torch.cos(x[:, 2]), torch.sin(x[:, 2]), u[:, 0]
    A = torch.eye(3, dtype=x.dtype).repeat(T, 1, 1)  # noqa: N806
    A[:, 0, 2] = -dt * v * s
    A[:, 1, 2] = dt * v * c
    B = x.new_zeros(T, 3, 2)  # noqa: N806
    B[:, 0, 0] = dt * c
    B[:, 1, 0] = dt * s
    B[:, 2, 1] = dt
    return A, B
