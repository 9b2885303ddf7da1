"""Exact MDP objects and solvers (papers/seed_control_theory.md §0.1): the ground truth
that the theory papers' claims are checked against. See docs/theory.md."""

from policylab.tabular.mdp import (
    FiniteHorizonMDP,
    TabularMDP,
    finite_garnet,
    garnet,
    mdp2,
    ring_mdp,
)
from policylab.tabular.solve import (
    NotConverged,
    backward_induction,
    direct_gradient,
    evaluate,
    evaluate_finite,
    linear_program,
    objective,
    occupancy,
    policy_iteration,
    softmax_gradient,
    value_iteration,
)

__all__ = [
    "FiniteHorizonMDP",
    "NotConverged",
    "TabularMDP",
    "backward_induction",
    "direct_gradient",
    "evaluate",
    "evaluate_finite",
    "finite_garnet",
    "garnet",
    "linear_program",
    "mdp2",
    "objective",
    "occupancy",
    "policy_iteration",
    "ring_mdp",
    "softmax_gradient",
    "value_iteration",
]
