"""Lab tasks: seeded testbeds with their own scorer, trained by a registered method's own
loop (papers/seed_control_theory.md §0.8: "the arena for oracle-scored tasks").

Some seed systems are not a loss over one trainer's rollouts: a quality-diversity search
around PPO (PPGA), a gradient from a physics model's derivatives (MB-PG), keypoint
matching (DISK), a recommender's tree policy (TPGR). Each is a `TabularMethod` (the same
data type as the tabular methods: sourced defaults and three plain functions) registered
here, over a `Problem` a lab task builds (its instance, `value(policy)`, the best value
known, the budget unit). trainers/tabular.py runs both: `policylab train --task
lab/<name> --algo NAME` (docs/lab.md).

A lab method whose state holds networks gives `checkpoint` (its tensors and numbers) and
`restore` (the state rebuilt from them), so a run resumes exactly."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from policylab.registry import Registry
from policylab.tabular.methods import Problem, TabularMethod
from policylab.tabular.methods import add as _add

PREFIX = "lab/"

lab_methods: Registry[TabularMethod] = Registry("lab method")
lab_tasks: Registry[Callable[..., Problem]] = Registry("lab task")


def add_method(method: TabularMethod) -> TabularMethod:
    """Register a lab method (every option with a sourced default)."""
    return _add(method, lab_methods)


def is_lab_task(task: str) -> bool:
    return str(task).startswith(PREFIX)


def build(task: str, seed: int, **knobs) -> Problem:
    """The seeded instance of `lab/<name>`; unknown knobs name the accepted ones."""
    name = task[len(PREFIX) :] if is_lab_task(task) else task
    make = lab_tasks.get(name)
    parameters = inspect.signature(make).parameters
    accepted = [k for k, p in parameters.items() if k != "seed" and p.kind != p.VAR_KEYWORD]
    open_ended = any(p.kind == p.VAR_KEYWORD for p in parameters.values())  # checks its own
    unknown = sorted(set(knobs) - set(accepted))
    if unknown and not open_ended:
        raise ValueError(
            f"task {task!r} has no knob {', '.join(map(repr, unknown))}; its knobs: "
            f"{', '.join(accepted) or 'none'}"
        )
    return make(seed=seed, **knobs)
