"""Simultaneous gradient play as registered tabular methods on a random quadratic game
(papers/seed_control_theory.md §4.2; Sharma, arXiv:2512.06791), so the certificate is
checked against simulated learning in the trainer and the arena.

    x ← x − h·F(x),   F(x) = Jx, Nash equilibrium x* = 0

`sgn_play` takes h = `h_fraction`·h_euler from the SGN certificate (in ‖·‖_M every step
must contract by at least √(1 − 2hα + h²β²) — `play/contraction` is measured against
`certificate/bound`); `gradient_play` takes h = `h_fraction`·h_stab, the true Euler
stability limit ρ(I − hJ) < 1 (known here because J is; uncertified in general). The
task `tabular/quadratic_game` scores a point by 1 − ‖x‖/‖x₀‖ (value −‖x‖₂)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.algebra.options import option
from policylab.games.quadratic import SUITE_SEED, quadratic_jacobian
from policylab.games.sgn import expand_weights, sgn_certificate
from policylab.games.stability import h_stab
from policylab.recipes.base import S
from policylab.tabular.methods import Problem, State, TabularMethod, add
from policylab.tabular.tasks import tabular_tasks


def quadratic_game_task(seed: int, lam: float = 0.5, dim: int = 64) -> Problem:
    """The code's random LQ game number `seed` (SUITE_SEED + 1000·seed) at coupling λ, a
    Gaussian start x₀ (seeded); the value of a point is −‖x‖₂ (Nash at 0)."""
    J = quadratic_jacobian(SUITE_SEED + 1000 * seed, lam, d_total=dim)
    x0 = torch.randn(dim, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return Problem(
        J,
        lambda x: -float(torch.linalg.vector_norm(x)),
        0.0,
        x0,
        budget_unit="gradient-play steps",
        extras={"player_dims": (dim // 2, dim // 2)},
    )


tabular_tasks.add("quadratic_game", quadratic_game_task)


@dataclass
class PlayOptions:
    h_fraction: float = option(0.99, "the Euler step as a fraction of its limit")

    def __post_init__(self) -> None:
        if not 0 < self.h_fraction < 1:
            raise ValueError(f"h_fraction: must lie in (0, 1), got {self.h_fraction}")


def init_sgn(problem: Problem, options: PlayOptions, generator) -> State:
    cert = sgn_certificate(problem.mdp, player_dims=problem.extras["player_dims"])
    if not cert.certified:
        raise ValueError(f"sgn_play: this game has no SGN certificate ({cert.reason})")
    h = options.h_fraction * cert.h_euler
    return {
        "x": problem.initial_policy.clone(),
        "h": h,
        "m": expand_weights(cert.w[None], problem.extras["player_dims"])[0],
        "bound": cert.euler_factor(h),
        "alpha": cert.alpha,
    }


def init_stab(problem: Problem, options: PlayOptions, generator) -> State:
    return {"x": problem.initial_policy.clone(), "h": options.h_fraction * h_stab(problem.mdp)}


def play_step(problem: Problem, state: State, options: PlayOptions, generator):
    x = state["x"]
    new = x - state["h"] * (problem.mdp @ x)
    metrics = {"play/step_h": state["h"], "cost": 1}
    if "m" in state:  # the certificate's promise, checked on this step
        norm = lambda v: float(torch.sqrt((state["m"] * v * v).sum()))  # noqa: E731
        metrics["play/contraction"] = norm(new) / max(norm(x), 1e-300)
        metrics["certificate/bound"] = state["bound"]
        metrics["certificate/alpha"] = state["alpha"]
    return {**state, "x": new}, metrics


def point(problem: Problem, state: State) -> torch.Tensor:
    return state["x"]


PAPER = "Sharma 2025, Small-Gain Nash: Certified Contraction to Nash Equilibria, arXiv:2512.06791"

add(
    TabularMethod(
        name="sgn_play",
        title="Simultaneous gradient play at the SGN-certified Euler step",
        paper=PAPER,
        formula=(
            "M = blockdiag(w_i I), α* = ½λ_min(D^{-½}C(w)D^{-½}), β = Lip(F) in ‖·‖_M\n"
            "x ← x − h·F(x),  h = h_fraction·2α*/β²;  ‖x_{t+1}‖_M ≤ √(1 − 2hα* + h²β²)‖x_t‖_M"
        ),
        options=PlayOptions,
        defaults={"h_fraction": S(0.99, "[ours] just inside the certified h < 2α*/β²")},
        init=init_sgn,
        step=play_step,
        policy=point,
        notes=("Refuses a game without a certificate, naming the reason.",),
    )
)

add(
    TabularMethod(
        name="gradient_play",
        title="Simultaneous gradient play at a fraction of the true Euler stability limit",
        paper=PAPER + " (the baseline of §4.2)",
        formula="x ← x − h·F(x),  h = h_fraction·h_stab,  h_stab = min_λ 2·Re λ/|λ|²",
        options=PlayOptions,
        defaults={"h_fraction": S(0.5, "[ours] half the limit ρ(I − hJ) = 1 (uncertified)")},
        init=init_stab,
        step=play_step,
        policy=point,
    )
)
