"""The lab task `lab/noisy_point_mass` (papers/seed_control_theory.md §9.3): quality
diversity on NoisyPointMass (envs/noisy_point_mass.py) over a cells × cells grid of the
measures m ∈ [−1, 1]², budget in env steps.

A method's "policy" is its archive as one tensor [C, 2 + D]: per cell (occupied, f at
insertion, the elite's actor parameters). The score re-evaluates every elite with
`eval_episodes` fresh episodes (mean action, a fixed evaluation seed), re-bins it by its
mean measures and sums the best f per cell: the re-evaluated QD-score, so a lucky noisy
evaluation at insertion time does not count. `optimum` is the exact optimal QD-score
Σ_cells (1 − min_{m∈cell}|m|²/2); `eval/score` = QD-score/optimum."""

from __future__ import annotations

import torch

from policylab.envs.noisy_point_mass import NoisyPointMass, optimal_cell_fitness, rollout
from policylab.lab import lab_tasks
from policylab.qd.archive import GridArchive
from policylab.qd.metrics import best_fitness, coverage, qd_score
from policylab.qd.multi_ppo import actor_dim
from policylab.tabular.methods import Problem

LOW, HIGH = -1.0, 1.0
EVAL_SEED_OFFSET = 1_000_003  # the re-evaluation's generator: seed + this, fixed per run


def archive_policy(archive: GridArchive) -> torch.Tensor:
    """The archive as the task's policy tensor [C, 2 + D]."""
    return torch.cat(
        [archive.occupied[:, None].double(), archive.fitness[:, None], archive.solutions], dim=1
    )


def archive_metrics(archive: GridArchive) -> dict[str, float]:
    """Metrics of the archive as stored (insertion-time f): a step's log."""
    return {
        "qd/coverage": coverage(archive.occupied),
        "qd/score_claimed": qd_score(archive.occupied, archive.fitness),
        "qd/best_f": best_fitness(archive.occupied, archive.fitness),
    }


def reevaluate(
    env: NoisyPointMass, cells: int, pi: torch.Tensor, episodes: int, seed: int
) -> dict[str, float]:
    """The archive `pi` [C, 2 + D] re-evaluated: each elite's mean f and m over `episodes`
    episodes, re-binned, best f per cell. Returns qd_score, coverage, best_f (re-evaluated)
    and qd_score_claimed (the f stored at insertion)."""
    occupied = pi[:, 0] > 0.5
    claimed = qd_score(occupied, pi[:, 1])
    out = {"qd_score_claimed": claimed, "qd_score": 0.0, "coverage": 0.0, "best_f": float("nan")}
    if not bool(occupied.any()):
        return out
    generator = torch.Generator().manual_seed(seed + EVAL_SEED_OFFSET)
    data = rollout(env, pi[occupied, 2:], episodes, generator)
    f, m = data["f"].mean(1), data["m"].mean(1)
    grid = GridArchive((cells, cells), LOW, HIGH, solution_dim=1, alpha=1.0)
    idx = grid.index(m)
    best = torch.full((cells * cells,), float("-inf"), dtype=f.dtype)
    best = best.scatter_reduce(0, idx, f, reduce="amax")
    filled = torch.isfinite(best)
    fitness = torch.where(filled, best, torch.zeros_like(best))
    out.update(
        qd_score=qd_score(filled, fitness),
        coverage=coverage(filled),
        best_f=best_fitness(filled, fitness),
    )
    return out


def noisy_point_mass(
    seed: int,
    sigma: float = 0.1,
    horizon: int = 50,
    cells: int = 10,
    hidden: int = 16,
    eval_episodes: int = 8,
) -> Problem:
    """Knobs: sigma (dynamics noise, 0.1 [paper §9.3, ours]), horizon T (50), cells per
    measure (10: a 10×10 grid), hidden (the actor's tanh layer, 16 [ours]),
    eval_episodes (the score's re-evaluation, 8 [ours])."""
    env = NoisyPointMass(horizon=horizon, sigma=sigma, hidden=hidden)
    if cells < 1:
        raise ValueError(f"cells: need ≥ 1 cell per measure, got {cells}")
    if eval_episodes < 1:
        raise ValueError(f"eval_episodes: need ≥ 1, got {eval_episodes}")
    optimum_cells = optimal_cell_fitness(cells, LOW, HIGH)

    def report(pi: torch.Tensor) -> dict[str, float]:
        return reevaluate(env, cells, pi, eval_episodes, seed)

    return Problem(
        mdp=env,
        value=lambda pi: report(pi)["qd_score"],
        optimum=float(optimum_cells.sum()),
        initial_policy=torch.zeros(cells * cells, 2 + actor_dim(env), dtype=torch.float64),
        budget_unit="env steps",
        extras={"env": env, "cells": cells, "report": report, "optimal_cells": optimum_cells},
    )


if "noisy_point_mass" not in lab_tasks:
    lab_tasks.add("noisy_point_mass", noisy_point_mass)
