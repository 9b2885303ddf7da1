"""`lab/uav_coverage`: the multi-UAV coverage testbed of papers/seed_control_theory.md
§12.2 as a lab task (envs/uav_coverage.py), and the team policies it scores.

A team policy maps every agent's padded observation to its action; agent k of a type uses
that type's k-th actor modulo their number, so a team trained with 3 mission UAVs flies 2
or 5 of them without retraining (the held-out counts of §12.2). The task's value is the
mean coverage over `eval_episodes` fixed episodes of the seed; the best value known is the
scripted reference's (nearest PoI with data, the charger below 30 % battery), so
eval/score = 1 at the script's coverage and 0 at hovering."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from policylab.envs.uav_coverage import UAVConfig, UAVCoverage, scripted_actions
from policylab.lab import lab_tasks
from policylab.tabular.methods import Problem

EVAL_SEED = 1_000_003  # eval episodes: seed + EVAL_SEED, never the training draws
HELD_OUT = ((2, 20), (5, 50))  # (mission UAVs, PoIs) not seen in training (§12.2)


class TeamPolicy:
    """Deterministic actors by agent type: `mission` and `charger` lists of modules."""

    def __init__(self, mission: list, charger: list) -> None:
        self.mission, self.charger = mission, charger

    @torch.no_grad()
    def act(self, obs: np.ndarray, cfg: UAVConfig) -> np.ndarray:
        x = torch.as_tensor(obs, dtype=torch.float32)
        out = []
        for k in range(cfg.n_agents):
            actors, j = (
                (self.mission, k) if k < cfg.n_mission else (self.charger, k - cfg.n_mission)
            )
            out.append(actors[j % len(actors)](x[:, k]))
        return torch.stack(out, 1).double().numpy()


class ScriptPolicy:
    """The reference policy of §12.2 (envs/uav_coverage.scripted_actions)."""

    def __init__(self, low_battery: float = 0.3) -> None:
        self.low_battery = low_battery

    def act(self, obs: np.ndarray, cfg: UAVConfig) -> np.ndarray:
        return scripted_actions(obs, cfg, self.low_battery)


class HoverPolicy:
    """Zero velocity: the starting point of eval/score."""

    def act(self, obs: np.ndarray, cfg: UAVConfig) -> np.ndarray:
        return np.zeros(obs.shape[:-1] + (2,))


def evaluate(policy, cfg: UAVConfig, episodes: int, seed: int) -> dict[str, float]:
    """Mean coverage, Jain fairness and charging efficiency of `policy` over `episodes`
    episodes drawn from `seed` (the same episodes for every policy)."""
    env = UAVCoverage(cfg, episodes)
    obs, done = env.reset(torch.Generator().manual_seed(seed)), False
    while not done:
        obs, _, done = env.step(policy.act(obs, cfg))
    return {k: float(v.mean()) for k, v in env.metrics().items()}


def uav_coverage(seed: int, eval_episodes: int = 8, **knobs) -> Problem:
    """Build the seeded instance; knobs are UAVConfig's fields (counts, physics)."""
    accepted = {f.name for f in dataclasses.fields(UAVConfig)}
    unknown = sorted(set(knobs) - accepted)
    if unknown:
        raise ValueError(
            f"lab/uav_coverage: unknown knob(s) {', '.join(unknown)}; accepted: "
            f"eval_episodes, {', '.join(sorted(accepted))}"
        )
    if eval_episodes < 1:
        raise ValueError(f"lab/uav_coverage: eval_episodes={eval_episodes}; accepted: >= 1")
    cfg = UAVConfig(**knobs)
    eval_seed = seed + EVAL_SEED

    def value(policy) -> float:
        return evaluate(policy, cfg, eval_episodes, eval_seed)["coverage"]

    return Problem(
        mdp=cfg,
        value=value,
        optimum=value(ScriptPolicy()),
        initial_policy=HoverPolicy(),
        budget_unit="env steps",
        extras={"eval_seed": eval_seed, "eval_episodes": eval_episodes},
    )


if "uav_coverage" not in lab_tasks:
    lab_tasks.add(
        "uav_coverage",
        uav_coverage,
        summary="§12 mission and charging UAVs over PoIs (coverage; best known: the script)",
    )
