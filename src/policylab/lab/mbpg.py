"""Model-based policy gradient with an embedded tracking controller and its comparison arms,
as lab methods on `lab/tracking` (papers/seed_control_theory.md §11; Westenbroek, Levy,
Fridovich-Keil, arXiv 2307.08168).

Every arm trains the same TrackingPolicy (policies/structured.py) with Adam and spends one
real episode per step (PPO: `episodes` per step):

- mbpg_tracking_provisional: one real episode, then ∇J from model_derivative_pg — the
  kinematic model's Jacobians at the real (x_t, u_t), the controller's ∂κ/∂x and ∂κ/∂θ
  (algebra/model_derivative.py, our reading of "uses model derivatives").
- mbpg_open_loop_provisional: the same estimator on the same policy class without
  feedback (u = the spline's feed-forward).
- model_only: gradients through a rollout of the model alone; its real episode per step
  only measures (`real/rmse`).
- tracking_oracle: exact gradients through the real simulator (the ceiling).
- ppo_tracking: PPO on Gaussian commands u ~ N(κ(x; θ), σ²) around the same controller.

Logged per step: `real/rmse` (the episode's), and for the model-derivative arms
`grad/cosine_oracle` (estimate vs exact real gradient at the same θ) and `grad/sensitivity_T`
(‖S_T‖_F)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.func import jacrev, vmap

from policylab.algebra.model_derivative import model_derivative_pg
from policylab.algebra.options import check_range, option
from policylab.dynamics import unicycle
from policylab.lab import (
    add_method,
    tracking_ppo,  # noqa: F401  (registers the PPO arm)
)
from policylab.lab.tracking import Plan, checkpoint, initialiser, plan_of, restorer
from policylab.policies.structured import controls
from policylab.recipes.base import S
from policylab.tabular.methods import TabularMethod

PAPER = "Westenbroek et al., arXiv 2307.08168 (CoRL 2023)"


@dataclass
class GradientOptions:
    lr: float = option(0.001, help="Adam step size on the network's parameters")
    hidden: int = option(32, help="hidden units of the offsets network")

    def __post_init__(self) -> None:
        check_range("options", "lr", self.lr, low=0.0, low_open=True)
        check_range("options", "hidden", self.hidden, low=1)


@dataclass
class ModelOnlyOptions(GradientOptions):
    model_steps: int = option(2, help="model-gradient steps per real (measuring) episode")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("options", "model_steps", self.model_steps, low=1)


GRADIENT_DEFAULTS = {
    "lr": S(
        0.001, "[ours: best of 0.001, 0.003, 0.01 for MB-PG on seed 0, then used by every arm]"
    ),
    "hidden": S(32, "[ours]"),
}


def _apply(state, offsets: torch.Tensor, grad: torch.Tensor) -> None:
    """One Adam step on the network, given ∇J with respect to its output (Δw, ΔK)."""
    state["opt"].zero_grad()
    offsets.backward(grad)
    state["opt"].step()


def exact_real_gradient(inst, plan: Plan) -> tuple[torch.Tensor, torch.Tensor]:
    """(∇_{Δw,ΔK} J_real, J_real) by autograd through the real simulator."""
    z = plan.offsets.detach().clone().requires_grad_(True)
    mse = inst.real_mse(Plan(z, plan.feedback))
    (grad,) = torch.autograd.grad(mse, z)
    return grad, mse.detach()


def model_derivative_estimate(inst, plan: Plan):
    """One real episode with `plan`, then model_derivative_pg along it: (estimate, mse)."""
    z = plan.offsets.detach()
    with torch.no_grad():
        xs, us = inst.real_episode(plan)
    x = xs[:-1, :3]  # the model's state read off the real one
    A, B = unicycle.jacobians(x, us, inst.task.dt)  # noqa: N806

    def kappa(x_t, basis_t, offsets):
        return controls(x_t, basis_t, offsets, inst.waypoints, inst.gains, plan.feedback)

    kx, kz = vmap(jacrev(kappa, argnums=(0, 2)), in_dims=(0, 1, None))(x, inst.basis, z)
    steps = inst.task.steps
    cx = xs.new_zeros(steps + 1, 3)  # ∂/∂x_t of mean_t ‖p_t − r_t‖²
    cx[1:, :2] = 2.0 / steps * (xs[1:, :2] - inst.ref[1:])
    mse = ((xs[1:, :2] - inst.ref[1:]) ** 2).sum(-1).mean()
    return model_derivative_pg(A, B, kx, kz, cx, feedback=plan.feedback), mse


# ---- the arms ---------------------------------------------------------------------------


def mbpg_step(problem, state, options, generator):
    inst, policy = problem.mdp, state["policy"]
    offsets = policy.offsets()
    plan = Plan(offsets.detach(), policy.feedback)
    est, mse = model_derivative_estimate(inst, plan)
    exact, _ = exact_real_gradient(inst, plan)  # a diagnostic: costs no real episode
    cosine = float(torch.nn.functional.cosine_similarity(est.grad, exact, dim=0))
    _apply(state, offsets, est.grad)
    return state, {
        "cost": 1,
        "real/rmse": float(mse.sqrt()),
        "grad/cosine_oracle": cosine,
        "grad/sensitivity_T": float(est.sensitivity.norm()),
        "grad/norm": float(est.grad.norm()),
    }


def oracle_step(problem, state, options, generator):
    policy = state["policy"]
    offsets = policy.offsets()
    grad, mse = exact_real_gradient(problem.mdp, Plan(offsets.detach(), policy.feedback))
    _apply(state, offsets, grad)
    return state, {"cost": 1, "real/rmse": float(mse.sqrt()), "grad/norm": float(grad.norm())}


def model_only_step(problem, state, options, generator):
    inst, policy = problem.mdp, state["policy"]
    for _ in range(options.model_steps):
        offsets = policy.offsets()
        z = offsets.detach().clone().requires_grad_(True)
        model_mse = inst.model_mse(Plan(z, policy.feedback))
        (grad,) = torch.autograd.grad(model_mse, z)
        _apply(state, offsets, grad)
    with torch.no_grad():  # the real episode measures only
        real = inst.real_mse(plan_of(problem, state))
    return state, {
        "cost": 1,
        "real/rmse": float(real.sqrt()),
        "model/rmse": float(model_mse.detach().sqrt()),
    }


def _register() -> None:
    common = {
        "paper": PAPER,
        "policy": plan_of,
        "checkpoint": checkpoint,
    }
    add_method(
        TabularMethod(
            tasks=("tracking",),
            name="mbpg_tracking_provisional",
            title="MB-PG: model-derivative gradient through an embedded tracking controller",
            formula="S_{t+1} = (∂f̃/∂x + ∂f̃/∂u·∂κ/∂x)S_t + ∂f̃/∂u·∂κ/∂θ; "
            "∇J ≈ Σ_t ∂c/∂x_t·S_t  (model Jacobians at the real x_t, u_t)",
            options=GradientOptions,
            defaults=GRADIENT_DEFAULTS,
            init=initialiser(True),
            step=mbpg_step,
            restore=restorer(True),
            notes=("the estimator is our reading of the abstract: _provisional",),
            **common,
        )
    )
    add_method(
        TabularMethod(
            tasks=("tracking",),
            name="mbpg_open_loop_provisional",
            title="MB-PG without feedback: the same estimator, u = the spline's feed-forward",
            formula="S_{t+1} = ∂f̃/∂x·S_t + ∂f̃/∂u·∂u_t/∂θ; ∇J ≈ Σ_t ∂c/∂x_t·S_t",
            options=GradientOptions,
            defaults=GRADIENT_DEFAULTS,
            init=initialiser(False),
            step=mbpg_step,
            restore=restorer(False),
            **common,
        )
    )
    add_method(
        TabularMethod(
            tasks=("tracking",),
            name="model_only",
            title="Model-only optimisation: gradients through the kinematic model alone",
            formula="θ ← Adam(∇_θ J_model(θ)); the real episode only measures",
            options=ModelOnlyOptions,
            defaults={**GRADIENT_DEFAULTS, "model_steps": S(2, "[ours]")},
            init=initialiser(True),
            step=model_only_step,
            restore=restorer(True),
            **common,
        )
    )
    add_method(
        TabularMethod(
            tasks=("tracking",),
            name="tracking_oracle",
            title="Oracle: exact derivatives of the real simulator, same policy class",
            formula="θ ← Adam(∇_θ J_real(θ)) by autograd through the real rollout",
            options=GradientOptions,
            defaults=GRADIENT_DEFAULTS,
            init=initialiser(True),
            step=oracle_step,
            restore=restorer(True),
            notes=("the seed's oracle: 'the same policy class optimised with exact derivatives'",),
            **common,
        )
    )


_register()
