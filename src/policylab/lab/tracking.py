"""The lab task `lab/tracking` (papers/seed_control_theory.md §11.2): the real unicycle of
envs/tracking.py following a figure-eight, scored by the real RMSE (value = −RMSE).

A policy here is a `Plan`: the offsets (Δw, ΔK) a TrackingPolicy's network puts out and
whether the controller feeds back. The instance is deterministic (the seed only draws the
methods' networks and PPO's noise). The best value known is the oracle's (exact real
derivatives) after 400 episodes at the default knobs — `python benchmarks/mbpg_tracking.py
--optimum` measures it; with other knobs it is 0 (perfect tracking, a bound), so the score is
the fraction of the start's RMSE removed."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.dynamics import unicycle
from policylab.envs.tracking import (
    TrackingTask,
    figure_eight,
    initial_state,
    reference,
    rollout,
    tracking_mse,
)
from policylab.lab import lab_tasks
from policylab.policies.structured import (
    GAINS,
    TrackingPolicy,
    catmull_rom_basis,
    controls,
    task_features,
)
from policylab.tabular.methods import Problem

# −RMSE of the oracle after 400 real episodes at the default knobs, seed 0:
# `python benchmarks/mbpg_tracking.py --optimum` (measured, see docs fragment)
BEST_KNOWN = -0.005565  # RMSE 0.005565 m (loadavg 12.7–14.0 during the run)
DEFAULT_KNOTS = 16


@dataclass(frozen=True)
class Plan:
    offsets: torch.Tensor  # [2N + 3] (Δw, ΔK)
    feedback: bool = True


@dataclass(frozen=True)
class Tracking:
    """The instance the methods read: the real task, the reference, the spline basis."""

    task: TrackingTask
    ref: torch.Tensor  # [T+1, 2]
    basis: torch.Tensor  # [3, T, N]
    waypoints: torch.Tensor  # [N, 2] nominal w₀
    features: torch.Tensor  # [d]
    gains: torch.Tensor  # [3] nominal K₀

    def controller(self, offsets: torch.Tensor, feedback: bool):
        def u(t: int, x: torch.Tensor) -> torch.Tensor:
            return controls(x[:3], self.basis[:, t], offsets, self.waypoints, self.gains, feedback)

        return u

    def real_episode(self, plan: Plan) -> tuple[torch.Tensor, torch.Tensor]:
        """States [T+1, 5] and commands [T, 2]; differentiable in plan.offsets."""
        return rollout(self.controller(plan.offsets, plan.feedback), self.task)

    def real_mse(self, plan: Plan) -> torch.Tensor:
        return tracking_mse(self.real_episode(plan)[0][:, :2], self.ref)

    def model_mse(self, plan: Plan) -> torch.Tensor:
        """The same cost on the kinematic model (dynamics/unicycle.py), differentiable."""
        u = self.controller(plan.offsets, plan.feedback)
        xs = [initial_state(self.task)[:3]]
        for t in range(self.task.steps):
            xs.append(unicycle.step(xs[-1], u(t, xs[-1]), self.task.dt))
        return tracking_mse(torch.stack(xs)[:, :2], self.ref)


def build_tracking(
    seed: int,
    lag: float = 0.2,
    drift: float = 0.1,
    seconds: float = 10.0,
    hz: float = 20.0,
    knots: int = DEFAULT_KNOTS,
) -> Problem:
    """lab/tracking: knobs lag (s) [paper §11.2], drift, seconds, hz [paper §11.2: 10 s at
    20 Hz], knots (spline waypoints) [ours]."""
    if int(knots) != knots or knots < 4:
        raise ValueError(f"tracking knob knots = {knots!r}: must be an integer >= 4")
    task = TrackingTask(lag=lag, drift=drift, seconds=seconds, hz=hz)
    times = torch.arange(task.steps, dtype=torch.float64) * task.dt
    knot_times = torch.arange(knots, dtype=torch.float64) * task.period / knots
    inst = Tracking(
        task=task,
        ref=reference(task),
        basis=catmull_rom_basis(times, int(knots), task.period),
        waypoints=figure_eight(knot_times, task),
        features=task_features(task.amplitude, task.period),
        gains=torch.tensor(GAINS, dtype=torch.float64),
    )

    def value(plan: Plan) -> float:
        with torch.no_grad():
            return -float(inst.real_mse(plan).sqrt())

    nominal = Plan(torch.zeros(2 * int(knots) + 3, dtype=torch.float64))
    default = (lag, drift, seconds, hz, knots) == (0.2, 0.1, 10.0, 20.0, DEFAULT_KNOTS)
    return Problem(
        mdp=inst,
        value=value,
        optimum=BEST_KNOWN if default else 0.0,
        initial_policy=nominal,
        budget_unit="real episodes",
    )


# ---- state shared by the arms: the policy and its optimiser ---------------------------


def new_policy(problem, options, generator, feedback: bool) -> TrackingPolicy:
    inst = problem.mdp
    policy = TrackingPolicy(inst.waypoints, inst.features, options.hidden, feedback)
    first = policy.net[0]
    with torch.no_grad():  # the seed draws the hidden layer (the output starts at zero)
        bound = first.in_features**-0.5
        first.weight.uniform_(-bound, bound, generator=generator)
        first.bias.uniform_(-bound, bound, generator=generator)
    return policy


def policy_state(policy: TrackingPolicy, options, extra: dict | None = None) -> dict:
    params = list(policy.parameters()) + list((extra or {}).values())
    return {"policy": policy, "opt": torch.optim.Adam(params, lr=options.lr), **(extra or {})}


def initialiser(feedback: bool):
    def init(problem, options, generator):
        return policy_state(new_policy(problem, options, generator, feedback), options)

    return init


def plan_of(problem, state) -> Plan:
    policy = state["policy"]
    with torch.no_grad():
        return Plan(policy.offsets(), policy.feedback)


def checkpoint(state) -> dict:
    saved = {"policy": state["policy"].state_dict(), "opt": state["opt"].state_dict()}
    if "log_std" in state:
        saved["log_std"] = state["log_std"].detach().clone()
    return saved


def restorer(feedback: bool):
    def restore(problem, options, saved):
        inst = problem.mdp
        policy = TrackingPolicy(inst.waypoints, inst.features, options.hidden, feedback)
        policy.load_state_dict(saved["policy"])
        extra = {}
        if "log_std" in saved:
            extra["log_std"] = torch.nn.Parameter(saved["log_std"].clone())
        state = policy_state(policy, options, extra)
        state["opt"].load_state_dict(saved["opt"])
        return state

    return restore


lab_tasks.add("tracking", build_tracking)
