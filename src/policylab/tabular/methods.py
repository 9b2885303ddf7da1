"""The tabular method catalogue: each theory paper's algorithm as a registered
`TabularMethod` (papers/seed_control_theory.md §0.2), trained by trainers/tabular.py.

A method is data, like an LLM recipe: its defaults with their sources, and three plain
functions over a `Problem` (the seeded instance a tabular task built, with its exact
oracle):

    state            = method.init(problem, options, generator)
    state, metrics   = method.step(problem, state, options, generator)
    pi               = method.policy(problem, state)        # [S, A] or [H, S, A]

`state` is a dict of tensors (and plain numbers), so a checkpoint is a `torch.save` that
loads with `weights_only=True`. `cost` (in `metrics`) is what one step spent from the
budget (exact-gradient evaluations, episodes, ...) in the task's budget unit."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from policylab.recipes.base import Setting
from policylab.registry import Registry

State = dict[str, Any]


@dataclass
class Problem:
    """One seeded instance of a tabular task.

    mdp: the model (a TabularMDP or FiniteHorizonMDP); `value(pi)` is the objective the
    task scores (nominal, robust, soft-robust or finite-horizon, per the task), `optimum`
    its exact optimal value (from the oracle solver), `initial` the value of the starting
    policy, so `score(pi) = 1 − gap/gap₀` is 0 at the start and 1 at the optimum.
    `extras` carries what some methods read (the uncertainty set, β, offline data
    settings)."""

    mdp: Any
    value: Callable[[torch.Tensor], float]
    optimum: float
    initial_policy: torch.Tensor
    budget_unit: str = "gradient evaluations"
    extras: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.initial = float(self.value(self.initial_policy))

    def gap(self, pi: torch.Tensor) -> float:
        return self.optimum - float(self.value(pi))

    def score(self, pi: torch.Tensor) -> float:
        """1 − gap/gap₀ (1 when the start is already optimal)."""
        gap0 = self.optimum - self.initial
        return 1.0 - self.gap(pi) / gap0 if gap0 > 1e-12 else 1.0


@dataclass(frozen=True)
class TabularMethod:
    name: str
    title: str
    paper: str
    formula: str
    options: type  # a dataclass of options (algebra/options.option fields)
    defaults: dict[str, Setting]  # each option's default and its source
    init: Callable[..., State]
    step: Callable[..., tuple[State, dict[str, float]]]
    policy: Callable[[Problem, State], torch.Tensor]
    notes: tuple[str, ...] = ()
    # the lab tasks (names without "lab/") the method runs on; empty: any task of its kind
    tasks: tuple[str, ...] = ()
    # a state holding modules: what its checkpoint keeps (tensors and plain values) and how
    # a resumed run rebuilds the state from it; None keeps the state as it is
    checkpoint: Callable[[State], dict[str, Any]] | None = None
    restore: Callable[..., State] | None = None  # (problem, options, saved) -> state
    # the method starts from a policy of its own (ROCM's distilled consistency model), not the
    # task's initial policy: the run's start value (and its score's scale) is measured on it
    own_start: bool = False

    @property
    def citations(self) -> dict[str, str]:
        return {k: s.source for k, s in self.defaults.items()}

    def build_options(self, overrides: dict[str, Any] | None = None):
        """The options with this method's defaults, then `overrides`; unknown keys are an
        error naming the valid ones."""
        from policylab.algebra.options import build_options

        values = {k: s.value for k, s in self.defaults.items()}
        values.update(overrides or {})
        return build_options(self.options, values, where=f"method {self.name!r}")

    def option_help(self) -> dict[str, str]:
        return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(self.options)}


tabular_methods: Registry[TabularMethod] = Registry("tabular method")


def add(method: TabularMethod, registry: Registry[TabularMethod] | None = None) -> TabularMethod:
    """Register `method` in `registry` (the tabular methods; lab/ passes its own)."""
    missing = sorted({f.name for f in dataclasses.fields(method.options)} - set(method.defaults))
    if missing:
        raise ValueError(f"{method.name}: options without a sourced default: {missing}")
    registry = tabular_methods if registry is None else registry
    registry.add(method.name, method, summary=f"{method.title} — {method.paper}")
    return method
