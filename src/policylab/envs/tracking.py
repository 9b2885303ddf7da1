"""The "real" system of papers/seed_control_theory.md §11.2: a unicycle with first-order
actuator lag and speed-dependent drift, tracking a figure-eight for 10 s at 20 Hz.

State x = (p_x, p_y, θ, v, ω) (the actual speed and turn rate lag the commands),
command u = (v_c, ω_c), Euler step dt:

    s     = drift·v·ω                                   (lateral slip, grows with speed)
    p_x'  = p_x + dt·(v·cos θ − s·sin θ)
    p_y'  = p_y + dt·(v·sin θ + s·cos θ)
    θ'    = θ + dt·ω
    v'    = v + dt/τ·(v_c − v),   ω' = ω + dt/τ·(ω_c − ω)         τ = lag = 0.2 s [paper §11.2]

Reference r(t) = (A·sin(2πt/P), (A/2)·sin(4πt/P)), A = 2 m, P = 10 s [ours]. Cost: the
mean squared position error over t = 1..T; the task's score is the real RMSE. Everything is
torch float64, so the oracle differentiates the real simulator exactly."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TrackingTask:
    """The testbed's knobs (defaults: lag [paper §11.2], the rest [ours])."""

    lag: float = 0.2  # actuator time constant τ, s
    drift: float = 0.1  # lateral slip per unit v·ω, s
    seconds: float = 10.0
    hz: float = 20.0
    amplitude: float = 2.0  # m
    period: float = 10.0  # s, one figure-eight

    def __post_init__(self) -> None:
        for name in ("lag", "seconds", "hz", "amplitude", "period"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"tracking knob {name} = {value!r}: must be > 0")
        if self.drift < 0:
            raise ValueError(f"tracking knob drift = {self.drift!r}: must be >= 0")
        if self.lag < 1.0 / self.hz:
            raise ValueError(f"tracking knob lag = {self.lag!r}: must be >= dt = 1/hz")

    @property
    def dt(self) -> float:
        return 1.0 / self.hz

    @property
    def steps(self) -> int:
        return int(round(self.seconds * self.hz))


def figure_eight(t: torch.Tensor, task: TrackingTask) -> torch.Tensor:
    """r(t): [..., 2] at times t: [...]."""
    w = 2 * math.pi / task.period
    return torch.stack(
        (task.amplitude * torch.sin(w * t), 0.5 * task.amplitude * torch.sin(2 * w * t)), dim=-1
    )


def reference(task: TrackingTask) -> torch.Tensor:
    """r(t_k) for k = 0..T: [T+1, 2]."""
    return figure_eight(torch.arange(task.steps + 1, dtype=torch.float64) * task.dt, task)


def initial_state(task: TrackingTask) -> torch.Tensor:
    """On the reference at t = 0, heading along it, at its speed, not turning: [5]."""
    speed = task.amplitude * 2 * math.pi / task.period  # |ṙ(0)| / √2 per axis
    return torch.tensor([0.0, 0.0, math.pi / 4, speed * math.sqrt(2), 0.0], dtype=torch.float64)


def real_step(x: torch.Tensor, u: torch.Tensor, task: TrackingTask) -> torch.Tensor:
    """x: [..., 5], u: [..., 2] -> the next real state (differentiable)."""
    px, py, theta, v, omega = x.unbind(-1)
    slip = task.drift * v * omega
    c, s, dt = torch.cos(theta), torch.sin(theta), task.dt
    return torch.stack(
        (
            px + dt * (v * c - slip * s),
            py + dt * (v * s + slip * c),
            theta + dt * omega,
            v + dt / task.lag * (u[..., 0] - v),
            omega + dt / task.lag * (u[..., 1] - omega),
        ),
        dim=-1,
    )


def rollout(
    controller: Callable[[int, torch.Tensor], torch.Tensor], task: TrackingTask
) -> tuple[torch.Tensor, torch.Tensor]:
    """One real episode: states [T+1, 5] and commands [T, 2]; u_t = controller(t, x_t).
    Differentiable when the controller is."""
    xs, us = [initial_state(task)], []
    for t in range(task.steps):
        us.append(controller(t, xs[-1]))
        xs.append(real_step(xs[-1], us[-1], task))
    return torch.stack(xs), torch.stack(us)


def tracking_mse(positions: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """J = mean_{t=1..T} ‖p_t − r_t‖² (positions, ref: [T+1, 2]); RMSE = √J."""
    return ((positions[1:] - ref[1:]) ** 2).sum(-1).mean()
