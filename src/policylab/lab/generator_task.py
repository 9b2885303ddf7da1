"""What a lab generator task gives its methods (papers/seed_generative.md G0.5, G0.6): the
sample dimension, how conditions are drawn, the reward, and the batch metrics. Every
continuous-generator method (DGPO, ORW-CFM-W2, Flow-GRPO, AC-Flow, ROCM, ...) reads the task
through this one record in `problem.extras["generator"]`, so a method written for the ring
runs on the class-conditional digits unchanged.

Conditions are drawn once per group: `conditions(n, generator)` returns [n, C] (one row per
group) or None for an unconditional task, which then draws nothing from the generator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from policylab.tabular.methods import Problem

Tensor = torch.Tensor

# the lab tasks that carry a GeneratorTask: every continuous-generator method runs on each
GENERATOR_TASKS: tuple[str, ...] = ("digits", "ring")


@dataclass(frozen=True)
class GeneratorTask:
    dim: int  # D of a sample
    reward: Callable[[Tensor, Tensor | None], Tensor]  # R(x [B, D], c [B, C] | None) -> [B]
    batch_metrics: Callable[[Tensor, Tensor | None], dict[str, float]]
    conditions: Callable[[int, torch.Generator | None], Tensor | None] = lambda n, g: None
    # a differentiable reward for pathwise objectives (G0.5 kind 3); None when there is none
    differentiable_reward: Callable[[Tensor, Tensor | None], Tensor] | None = None

    def group_conditions(
        self, groups: int, group_size: int, generator: torch.Generator | None
    ) -> Tensor | None:
        """One condition per group, repeated for its `group_size` rows: [groups·G, C] or None."""
        cond = self.conditions(groups, generator)
        return None if cond is None else cond.repeat_interleave(group_size, 0)


@torch.no_grad()
def ode_samples(policy, noise: Tensor, cond: Tensor | None = None) -> Tensor:
    """The tasks' evaluation samples: the policy's `ode_euler` sampler from fixed noise
    [N, D] (and fixed conditions [N, C] on a conditional task)."""
    return policy.sample("ode_euler", noise.shape[0], x_noise=noise, cond=cond).sample


def generator_problem(base, value, metrics, task: GeneratorTask, **extras) -> Problem:
    """The Problem of a continuous-generator lab task: the base flow as the starting policy
    and the MDP slot, `optimum` 1 (the rewards' maximum), budget in generated samples, the
    final `metrics`, the GeneratorTask and any further extras (eval noise, classifiers)."""
    return Problem(
        mdp=base,
        value=value,
        optimum=1.0,
        initial_policy=base,
        budget_unit="generated samples",
        extras={"metrics": metrics, **extras, "generator": task},
    )


def generator_task(problem) -> GeneratorTask:
    task = problem.extras.get("generator")
    if not isinstance(task, GeneratorTask):
        raise TypeError("this method needs a lab generator task (extras['generator'])")
    return task
