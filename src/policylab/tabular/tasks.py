"""Tabular tasks: seeded instances with their exact oracle (papers/seed_control_theory.md
§0.8). A task is `tabular/<name>`; `build(name, seed, **knobs) -> Problem`. Each seed is a
different instance (a new Garnet, a new starting policy), so an arena over seeds is an
arena over instances."""

from __future__ import annotations

from collections.abc import Callable

import torch

from policylab.registry import Registry
from policylab.tabular.mdp import DTYPE, garnet
from policylab.tabular.methods import Problem
from policylab.tabular.robust import L1Ball, robust_evaluate, robust_policy_iteration
from policylab.tabular.solve import objective, policy_iteration

PREFIX = "tabular/"

tabular_tasks: Registry[Callable[..., Problem]] = Registry("tabular task")


def is_tabular_task(task: str) -> bool:
    return str(task).startswith(PREFIX)


def build(task: str, seed: int, **knobs) -> Problem:
    """The seeded instance of `tabular/<name>`; unknown knobs name the accepted ones."""
    name = task[len(PREFIX) :] if is_tabular_task(task) else task
    make = tabular_tasks.get(name)
    try:
        return make(seed=seed, **knobs)
    except TypeError as err:
        raise ValueError(f"task {task!r}: {err}") from None


def random_policy(n_states: int, n_actions: int, generator: torch.Generator) -> torch.Tensor:
    """Rows ∝ U(0.1, 0.5) [code ICML-DRPG:Sampling Garnet.cpp:Rand_Policy]."""
    w = 0.1 + 0.4 * torch.rand(n_states, n_actions, generator=generator, dtype=DTYPE)
    return w / w.sum(-1, keepdim=True)


def robust_garnet(
    seed: int,
    n_states: int = 5,
    n_actions: int = 6,
    branches: int = 3,
    gamma: float = 0.95,
    kappa_low: float = 0.1,
    kappa_high: float = 0.5,
) -> Problem:
    """The DRPG paper's experiment [code ICML-DRPG:Main.cpp, Rand_tolerance]: a Garnet with
    rewards U(0, 5) per (s, a, s') (costs, negated), κ(s, a) ∼ U(κ_low, κ_high), a random
    starting policy; the value is the robust one, the oracle robust value iteration."""
    mdp = garnet(n_states, n_actions, branches, seed=seed, gamma=gamma)
    mdp = type(mdp)(mdp.P, -mdp.R, mdp.rho, gamma)  # the paper's costs, minimised
    g = torch.Generator().manual_seed(10_000 + seed)
    kappa = kappa_low + (kappa_high - kappa_low) * torch.rand(
        n_states, n_actions, generator=g, dtype=DTYPE
    )
    ball = L1Ball(kappa)
    V_star, pi_star = robust_policy_iteration(mdp, ball)

    def robust_value(pi: torch.Tensor) -> float:
        return float(mdp.rho @ robust_evaluate(mdp, pi, ball).V)

    nominal_best = policy_iteration(mdp)[1]
    return Problem(
        mdp,
        robust_value,
        float(mdp.rho @ V_star),
        random_policy(n_states, n_actions, g),
        extras={
            "ball": ball,
            "optimal_policy": pi_star,
            "nominal_optimum_differs": bool((nominal_best != pi_star).any()),
        },
    )


def nominal_garnet(
    seed: int,
    n_states: int = 10,
    n_actions: int = 4,
    branches: int = 3,
    gamma: float = 0.9,
    sampled: bool = False,
) -> Problem:
    """A Garnet scored by its nominal value; the oracle is policy iteration. `sampled`:
    the budget is counted in environment steps (methods that learn from a simulator)
    instead of exact-gradient evaluations."""
    mdp = garnet(n_states, n_actions, branches, seed=seed, gamma=gamma)
    g = torch.Generator().manual_seed(10_000 + seed)
    V_star, _ = policy_iteration(mdp)
    return Problem(
        mdp,
        lambda pi: float(objective(mdp, pi)),
        float(mdp.rho @ V_star),
        random_policy(n_states, n_actions, g),
        budget_unit="env steps" if sampled else "gradient evaluations",
    )


tabular_tasks.add("robust_garnet", robust_garnet)
tabular_tasks.add("garnet", nominal_garnet)
