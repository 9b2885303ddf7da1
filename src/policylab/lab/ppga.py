"""PPGA — Proximal Policy Gradient Arborescence (Batra, Tjanaka, Fontaine, Petrenko,
Nikolaidis & Sukhatme, ICLR 2024, arXiv:2305.13795; papers/seed_control_theory.md §9) as
the lab method `ppga_provisional` on `lab/noisy_point_mass`. Provisional: the exact form
of the DQD gradients was not read (our reading: PPO's parameter change).

One generation (one `step`), θ the search policy's actor parameters:
    1. gradients: N1 PPO iterations from θ on each of the k+1 rewards (vectorised,
       qd/multi_ppo.py), G_j = normalise(θ_j − θ)
    2. branch: c⁽ⁱ⁾ ∼ N(μ, σ²BBᵀ) (xNES, search/xnes.py), θ⁽ⁱ⁾ = θ + c⁽ⁱ⁾·G (qd/dqd.py)
    3. evaluate each branch (mean action) → (f, m); insert into the CMA-MAE archive → Δ
    4. xNES update of (μ, σ, B) from the ranking of the branches by Δ
    5. no branch inserted → restart θ from a random elite and reset the xNES
       ("no_improvement"); else walk: N2 PPO iterations on the reward μ·r
The budget is env steps: PPO's rollouts and the branches' evaluations."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.algebra.options import check_choice, option
from policylab.envs.noisy_point_mass import N_REWARDS, rollout
from policylab.lab import add_method
from policylab.lab import qd_baselines as _baselines  # noqa: F401  (registers the baselines)
from policylab.lab.noisy_point_mass import HIGH, LOW, archive_metrics, archive_policy
from policylab.qd.archive import GridArchive
from policylab.qd.dqd import branch, normalize_rows
from policylab.qd.multi_ppo import PPOSettings, init_critics, ppo_iterations
from policylab.recipes.base import S
from policylab.search import xnes
from policylab.search.reprl import mlp_init
from policylab.tabular.methods import TabularMethod

DTYPE = torch.float64


@dataclass(frozen=True)
class PPGAOptions:
    n1: int = option(10, help="N1: PPO iterations per gradient estimate (calc_gradient_iters)")
    n2: int = option(10, help="N2: PPO iterations of the walk (move_mean_iters)")
    archive_lr: float = option(0.1, help="α_A, the CMA-MAE archive learning rate")
    threshold_min: float = option(0.0, help="initial cell threshold t_e")
    sigma0: float = option(1.0, help="σ₀ of the xNES over combination coefficients")
    population: int = option(16, help="branches per generation")
    normalize_grad: bool = option(True, help="unit-norm gradients before branching")
    restart: str = option("no_improvement", help="'no_improvement' or 'never'")
    eval_episodes: int = option(1, help="episodes per branch evaluation")
    lr: float = option(1e-3, help="PPO Adam step")
    vf_coef: float = option(2.0, help="PPO value-loss weight")
    target_kl: float = option(0.008, help="PPO early stop per learner (≤ 0: none)")
    max_grad_norm: float = option(1.0, help="PPO gradient-norm clip")
    clip: float = option(0.2, help="PPO ratio clip ε")
    epochs: int = option(4, help="PPO epochs per iteration")
    minibatches: int = option(4, help="PPO minibatches per epoch")
    episodes: int = option(8, help="PPO episodes per learner per iteration")
    action_std: float = option(0.3, help="fixed Gaussian exploration std")
    gamma: float = option(0.99, help="discount")
    gae_lambda: float = option(0.95, help="GAE λ")

    def __post_init__(self) -> None:
        check_choice("ppga_provisional", "restart", self.restart, ["no_improvement", "never"])
        for name in ("n1", "n2", "population", "eval_episodes", "epochs", "minibatches"):
            if getattr(self, name) < 1:
                raise ValueError(
                    f"ppga_provisional.{name} = {getattr(self, name)!r} is not valid; need ≥ 1"
                )
        for name in ("sigma0", "lr", "action_std", "clip", "max_grad_norm"):
            if not getattr(self, name) > 0:
                raise ValueError(
                    f"ppga_provisional.{name} = {getattr(self, name)!r} is not valid; need > 0"
                )
        if not 0 < self.archive_lr <= 1:
            raise ValueError(
                f"ppga_provisional.archive_lr = {self.archive_lr!r} is not valid; need (0, 1]"
            )

    def ppo(self) -> PPOSettings:
        return PPOSettings(
            lr=self.lr,
            epochs=self.epochs,
            minibatches=self.minibatches,
            clip=self.clip,
            vf_coef=self.vf_coef,
            target_kl=self.target_kl if self.target_kl > 0 else None,
            max_grad_norm=self.max_grad_norm,
            gamma=self.gamma,
            gae_lambda=self.gae_lambda,
            action_std=self.action_std,
            episodes=self.episodes,
        )


def archive_settings(problem, solution_dim: int, alpha: float, threshold_min: float) -> dict:
    cells = problem.extras["cells"]
    return {
        "cells": (cells, cells),
        "low": LOW,
        "high": HIGH,
        "solution_dim": solution_dim,
        "alpha": alpha,
        "threshold_min": threshold_min,
    }


def new_archive(problem, solution_dim: int, alpha: float, threshold_min: float) -> GridArchive:
    return GridArchive(**archive_settings(problem, solution_dim, alpha, threshold_min))


def _reset_es(state: dict, options: PPGAOptions) -> None:
    state["mu"] = torch.zeros(N_REWARDS, dtype=DTYPE)  # pyribs resets the coefficient mean to 0
    state["sigma"] = float(options.sigma0)
    state["B"] = torch.eye(N_REWARDS, dtype=DTYPE)


def init(problem, options: PPGAOptions, generator):
    env = problem.extras["env"]
    theta = mlp_init(env.sizes, generator)
    state = {
        "archive": new_archive(problem, theta.numel(), options.archive_lr, options.threshold_min),
        "theta": theta,
        "critic": init_critics(env, 1, generator),
        "restarts": 0,
    }
    _reset_es(state, options)
    return state


def step(problem, state, options: PPGAOptions, generator):
    env, archive, theta = problem.extras["env"], state["archive"], state["theta"]
    ppo = options.ppo()
    # 1. gradients: k+1 PPO learners from θ, one per reward
    eye = torch.eye(N_REWARDS, dtype=DTYPE)
    after, _, info = ppo_iterations(
        env,
        theta.expand(N_REWARDS, -1),
        state["critic"].expand(N_REWARDS, -1),
        eye,
        options.n1,
        ppo,
        generator,
    )
    grads = after - theta
    if options.normalize_grad:
        grads = normalize_rows(grads)
    cost = info["env_steps"]
    # 2. branch along coefficients from the xNES, 3. evaluate and insert
    z, coeffs = xnes.sample(state["mu"], state["sigma"], state["B"], options.population, generator)
    branches = branch(theta, grads, coeffs)
    data = rollout(env, branches, options.eval_episodes, generator)
    cost += options.population * options.eval_episodes * env.horizon
    deltas, inserted = archive.add(branches, data["f"].mean(1), data["m"].mean(1))
    # 4. the coefficient distribution follows the archive improvement
    state["mu"], state["sigma"], state["B"] = xnes.update(
        state["mu"], state["sigma"], state["B"], z, deltas
    )
    # 5. restart from an elite when nothing was added, else walk along μ·r
    if options.restart == "no_improvement" and not bool(inserted.any()):
        state["theta"] = archive.sample_elites(1, generator)[0]
        _reset_es(state, options)
        state["restarts"] += 1
    else:
        walked, state["critic"], walk = ppo_iterations(
            env, theta[None], state["critic"], state["mu"][None], options.n2, ppo, generator
        )
        state["theta"] = walked[0]
        cost += walk["env_steps"]
    metrics = {
        "cost": cost,
        **archive_metrics(archive),
        "qd/mean_delta": float(deltas.clamp(min=0).mean()),
        "qd/inserted": float(inserted.sum()),
        "qd/restarts": float(state["restarts"]),
        "es/sigma": state["sigma"],
        "ppo/approx_kl": info["approx_kl"],
        "ppo/value_loss": info["value_loss"],
    }
    return state, metrics


def policy(problem, state) -> torch.Tensor:
    return archive_policy(state["archive"])


def checkpoint(state) -> dict:
    return {**state, "archive": state["archive"].state()}


def restore(problem, options: PPGAOptions, saved) -> dict:
    settings = archive_settings(
        problem, saved["theta"].numel(), options.archive_lr, options.threshold_min
    )
    return {**saved, "archive": GridArchive.from_state(saved["archive"], **settings)}


RUNNER = "[code sumeetbatra/PPGA:train_ppga_*.sh]"
add_method(
    TabularMethod(
        tasks=("noisy_point_mass",),
        name="ppga_provisional",
        title="PPGA: PPO inside differentiable quality diversity (our reading of the gradients)",
        paper="Batra et al., ICLR 2024, arXiv:2305.13795",
        formula=(
            "G_j = normalise(PPO_N1(θ; r_j) − θ); θ⁽ⁱ⁾ = θ + c⁽ⁱ⁾·G, c ∼ N(μ, Σ) (xNES); "
            "Δ = f − t_e, t_e ← (1 − α_A)t_e + α_A f; xNES by rank of Δ; θ ← PPO_N2(θ; μ·r)"
        ),
        options=PPGAOptions,
        defaults={
            "n1": S(10, RUNNER + " calc_gradient_iters"),
            "n2": S(10, RUNNER + " move_mean_iters"),
            "archive_lr": S(0.1, RUNNER + " (0.5 in some)"),
            "threshold_min": S(0.0, RUNNER + " (−500, 0 or 200 by env; f ∈ [0, 1] here)"),
            "sigma0": S(1.0, RUNNER + " (0.5, 1.0 or 3.0 by env)"),
            "population": S(16, "[ours] (paper 300 over 3000 envs; cut for 2 CPU cores)"),
            "normalize_grad": S(True, "[code pyribs GradientArborescenceEmitter normalize_grad]"),
            "restart": S("no_improvement", RUNNER),
            "eval_episodes": S(1, "[ours]"),
            "lr": S(1e-3, RUNNER + " (3e-4 in some)"),
            "vf_coef": S(2.0, RUNNER),
            "target_kl": S(0.008, RUNNER),
            "max_grad_norm": S(1.0, RUNNER),
            "clip": S(0.2, "[paper PPO, Schulman et al. 2017]"),
            "epochs": S(4, "[ours]"),
            "minibatches": S(4, "[ours]"),
            "episodes": S(8, "[ours] (paper: 3000 parallel envs)"),
            "action_std": S(0.3, "[ours] (fixed: entropy 0 in the runners)"),
            "gamma": S(0.99, "[code CleanRL ppo_continuous_action.py]"),
            "gae_lambda": S(0.95, "[code CleanRL ppo_continuous_action.py]"),
        },
        init=init,
        step=step,
        policy=policy,
        checkpoint=checkpoint,
        restore=restore,
        notes=(
            "Provisional: the DQD gradients are PPO's parameter changes after N1 iterations "
            "(our reading; the paper's exact form was not read).",
        ),
    )
)
