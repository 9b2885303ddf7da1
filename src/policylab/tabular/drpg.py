"""DRPG — double-loop robust policy gradient (Wang, Ho & Petrik, ICML 2023,
arXiv:2212.10439; papers/seed_control_theory.md §1), and nominal projected PG, its
baseline.

Outer loop (rewards maximised; the paper minimises costs C = −R, the same step):
    P_t      = the worst kernel for π_t (inner loop)
    G_t(s,a) = d^{π_t,P_t}(s)·Q^{π_t,P_t}(s,a)/(1 − γ)
    π_{t+1}(·|s) = Proj_Δ(π_t(·|s) + α·G_t(s,·))
[code JerrisonWang/ICML-DRPG:Sampling Garnet.cpp:MDP_grad_pi, DLRPG_outermin_SA].
Inner loop `exact_l1`: robust policy evaluation with the closed-form L1 maximiser
(robust.py). `nominal_pg` is the same outer step on the nominal kernel: it climbs the
nominal value and is scored, like DRPG, on the robust one."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.algebra.options import option
from policylab.algebra.simplex import project_simplex
from policylab.recipes.base import S
from policylab.tabular.methods import Problem, State, TabularMethod, add
from policylab.tabular.robust import project_l1_simplex, robust_evaluate
from policylab.tabular.solve import NotConverged, evaluate, occupancy


@dataclass
class ProjectedPGOptions:
    step: float = option(0.05, "outer step α of π ← Proj_Δ(π + α·G)")
    inner_tol: float = option(1e-10, "robust evaluation stops when ‖ΔV‖_∞ ≤ inner_tol")

    def __post_init__(self) -> None:
        if not self.step > 0:
            raise ValueError(f"step: must be > 0, got {self.step}")
        if not self.inner_tol > 0:
            raise ValueError(f"inner_tol: must be > 0, got {self.inner_tol}")


def init_table(problem: Problem, options, generator) -> State:
    return {"pi": problem.initial_policy.clone()}


def table_policy(problem: Problem, state: State) -> torch.Tensor:
    return state["pi"]


def projected_step(pi: torch.Tensor, gradient: torch.Tensor, step: float) -> torch.Tensor:
    """`projected_gradient`: π ← Proj_Δ(π + α·∂J/∂π), state by state."""
    return project_simplex(pi + step * gradient)


def drpg_step(problem: Problem, state: State, options: ProjectedPGOptions, generator):
    mdp, ball, pi = problem.mdp, problem.extras["ball"], state["pi"]
    rob = robust_evaluate(mdp, pi, ball, tol=options.inner_tol)
    G = occupancy(mdp, pi, rob.P).unsqueeze(-1) * rob.Q / (1 - mdp.gamma)
    metrics = {
        "inner/iterations": rob.iterations,
        "kernel/l1_used": ball.used(mdp, rob.P),
        "grad/norm": float(G.norm()),
        "cost": 1,
    }
    return {"pi": projected_step(pi, G, options.step)}, metrics


def nominal_step(problem: Problem, state: State, options: ProjectedPGOptions, generator):
    mdp, pi = problem.mdp, state["pi"]
    G = occupancy(mdp, pi).unsqueeze(-1) * evaluate(mdp, pi).Q / (1 - mdp.gamma)
    return {"pi": projected_step(pi, G, options.step)}, {"grad/norm": float(G.norm()), "cost": 1}


@dataclass
class PGDKernelOptions:
    step: float = option(0.05, "outer step α of π ← Proj_Δ(π + α·G)")
    inner_step: float = option(0.1, "adversary's step on the kernel")
    inner_tol: float = option(1e-3, "inner ascent stops when ‖ΔV‖₂ ≤ inner_tol")
    inner_max_iter: int = option(10_000, "inner iterations before NotConverged")

    def __post_init__(self) -> None:
        for name in ("step", "inner_step", "inner_tol"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: must be > 0, got {getattr(self, name)}")
        if self.inner_max_iter < 1:
            raise ValueError(f"inner_max_iter: must be ≥ 1, got {self.inner_max_iter}")


def init_pgd(problem: Problem, options, generator) -> State:
    return {"pi": problem.initial_policy.clone(), "P": problem.mdp.P.clone()}


def drpg_pgd_step(problem: Problem, state: State, options: PGDKernelOptions, generator):
    """The inner loop by projected gradient on the kernel [code ICML-DRPG:Sampling
    Garnet.cpp:MDP_grad_P, DLRPG_PGD_Innermax_SA]: ∂J/∂P(s'|s,a) = d(s)·π(a|s)·(R(s,a,s') +
    γV(s'))/(1 − γ); the adversary steps against it and projects each row onto 𝒫_{s,a},
    warm-started from the previous outer step's kernel, until ‖ΔV‖₂ ≤ inner_tol."""
    mdp, ball, pi, P = problem.mdp, problem.extras["ball"], state["pi"], state["P"]
    S, A = mdp.n_states, mdp.n_actions
    V, iterations, moved = evaluate(mdp, pi, P).V, 0, float("inf")
    while moved > options.inner_tol:
        if iterations == options.inner_max_iter:
            raise NotConverged(
                f"drpg_pgd: the kernel ascent moved V by more than {options.inner_tol:g} "
                f"after {options.inner_max_iter} iterations"
            )
        d = occupancy(mdp, pi, P)
        grad = (d[:, None] * pi)[..., None] * (mdp.R + mdp.gamma * V) / (1 - mdp.gamma)
        P = project_l1_simplex(
            (P - options.inner_step * grad).reshape(S * A, S),
            mdp.P.reshape(S * A, S),
            ball.kappa.reshape(S * A),
        ).reshape(S, A, S)
        new = evaluate(mdp, pi, P).V
        moved, V, iterations = float(torch.linalg.vector_norm(new - V)), new, iterations + 1
    ev = evaluate(mdp, pi, P)
    G = occupancy(mdp, pi, P).unsqueeze(-1) * ev.Q / (1 - mdp.gamma)
    metrics = {
        "inner/iterations": iterations,
        "kernel/l1_used": ball.used(mdp, P),
        "grad/norm": float(G.norm()),
        "cost": 1,
    }
    return {"pi": projected_step(pi, G, options.step), "P": P}, metrics


DRPG_DEFAULTS = {
    "step": S(0.05, "[code ICML-DRPG:Main.cpp Sample_sa(5,6,3,200,0.05,0.1,50)] α = 0.05"),
    "inner_tol": S(
        1e-10,
        "[ours] exact robust evaluation (the code's value iteration stops at ‖Δv‖₂ ≤ 1e-8)",
    ),
}

add(
    TabularMethod(
        name="drpg",
        title="DRPG, double-loop robust policy gradient (exact L1 inner solver)",
        paper="Wang, Ho & Petrik 2023, Policy Gradient in Robust MDPs with Global "
        "Convergence Guarantee, arXiv:2212.10439",
        formula=(
            "P_t = argmin_{P∈𝒫} ρᵀV^{π_t,P}  (sa-rectangular L1 ball, closed form)\n"
            "G = d^{π_t,P_t}·Q^{π_t,P_t}/(1 − γ);  π_{t+1} = Proj_Δ(π_t + α·G)"
        ),
        options=ProjectedPGOptions,
        defaults=DRPG_DEFAULTS,
        init=init_table,
        step=drpg_step,
        policy=table_policy,
        notes=(
            "Rewards maximised (R = −C for the paper's costs); scored on the robust value.",
            "The gradient inner solver is `drpg_pgd`; the parametric kernel's inner ascent is "
            "not built (`robust.parametric_kernel` gives the kernel itself).",
        ),
    )
)

add(
    TabularMethod(
        name="drpg_pgd",
        title="DRPG with the gradient inner solver (projected ascent on the kernel)",
        paper="Wang, Ho & Petrik 2023, Policy Gradient in Robust MDPs with Global "
        "Convergence Guarantee, arXiv:2212.10439",
        formula=(
            "inner: P ← Proj_𝒫(P − β·∂J/∂P),  ∂J/∂P(s'|s,a) = d(s)π(a|s)(R + γV(s'))/(1 − γ),\n"
            "       until ‖ΔV‖₂ ≤ inner_tol (warm-started);  outer: π ← Proj_Δ(π + α·d·Q/(1 − γ))"
        ),
        options=PGDKernelOptions,
        defaults={
            **DRPG_DEFAULTS,
            "inner_step": S(0.1, "[code ICML-DRPG:Main.cpp Sample_sa(...,0.05,0.1,50)] 0.1"),
            "inner_tol": S(1e-3, "[code ICML-DRPG:DLRPG_PGD_Innermax_SA] stops at ‖Δv‖₂ ≤ 1e-3"),
            "inner_max_iter": S(10_000, "[ours] a cap that raises NotConverged"),
        },
        init=init_pgd,
        step=drpg_pgd_step,
        policy=table_policy,
        notes=(
            "The projection onto simplex ∩ L1 ball ∩ support is exact (robust.project_l1_simplex)"
            "; the code projects with Gurobi.",
            "The paper's shrinking inner tolerance ε_t → 0 is not applied: the code's fixed "
            "1e-3 is the default.",
        ),
    )
)

add(
    TabularMethod(
        name="nominal_pg",
        title="Projected policy gradient on the nominal kernel (DRPG's baseline)",
        paper="Wang, Ho & Petrik 2023 (baseline), arXiv:2212.10439",
        formula="G = d^π·Q^π/(1 − γ) under the nominal P̄;  π ← Proj_Δ(π + α·G)",
        options=ProjectedPGOptions,
        defaults=DRPG_DEFAULTS,
        init=init_table,
        step=nominal_step,
        policy=table_policy,
        notes=("Ignores the uncertainty set; the arena scores it on the robust value.",),
    )
)
