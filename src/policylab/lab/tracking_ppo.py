"""PPO on `lab/tracking` over the same TrackingPolicy (papers/seed_control_theory.md §11.2's
PPO arm): Gaussian commands u_t ~ N(κ(x_t; θ), diag σ²) around the embedded controller, a
learned log σ, and the clipped objective (Schulman et al., arXiv 1707.06347, eq. 7)

    L = −mean_t min(r_t·A_t, clip(r_t, 1 − ε, 1 + ε)·A_t),   r_t = π_θ(u_t|x_t)/π_old(u_t|x_t)

No critic [ours]: A_t = the discounted reward-to-go minus its mean over the step's
episodes at the same t, divided by the batch std. Reward r_t = −‖p_{t+1} − r_{t+1}‖².
A lab PPO (not the control trainer on a gymnasium twin) so every arm trains the same
policy class and spends the same real episodes."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.func import vmap

from policylab.algebra.losses import clipped_surrogate
from policylab.algebra.options import check_range, option
from policylab.algebra.tpgr import discounted_returns
from policylab.envs.tracking import initial_state, real_step
from policylab.lab import add_method
from policylab.lab.tracking import checkpoint, new_policy, plan_of, policy_state, restorer
from policylab.policies.structured import controls
from policylab.recipes.base import S
from policylab.tabular.methods import TabularMethod


@dataclass
class PPOOptions:
    lr: float = option(3e-4, help="Adam step size")
    hidden: int = option(32, help="hidden units of the offsets network")
    episodes: int = option(2, help="real episodes per update")
    epochs: int = option(4, help="passes over each batch")
    clip: float = option(0.2, help="ε of the clipped ratio")
    gamma: float = option(0.99, help="discount of the reward-to-go")
    init_std: float = option(0.1, help="initial σ of the commands (m/s, rad/s)")

    def __post_init__(self) -> None:
        for name in ("lr", "clip", "init_std"):
            check_range("options", name, getattr(self, name), low=0.0, low_open=True)
        for name in ("hidden", "episodes", "epochs"):
            check_range("options", name, getattr(self, name), low=1)
        check_range("options", "gamma", self.gamma, low=0.0, high=1.0)


def init(problem, options, generator):
    policy = new_policy(problem, options, generator, feedback=True)
    log_std = torch.nn.Parameter(torch.full((2,), math.log(options.init_std), dtype=torch.float64))
    return policy_state(policy, options, {"log_std": log_std})


def _means(inst, x: torch.Tensor, times: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """κ(x_t; θ) for a batch of model states x: [B, 3] at step indices times: [B]."""

    def kappa(x_t, basis_t):
        return controls(x_t, basis_t, offsets, inst.waypoints, inst.gains, True)

    return vmap(kappa)(x, inst.basis[:, times].movedim(1, 0))


def collect(inst, offsets: torch.Tensor, std: torch.Tensor, episodes: int, generator):
    """`episodes` noisy real episodes: states [E, T, 3], commands [E, T, 2], rewards [E, T]."""
    steps = inst.task.steps
    xs, us, rs = [], [], []
    for _ in range(episodes):
        x = initial_state(inst.task)
        for t in range(steps):
            mean = controls(x[:3], inst.basis[:, t], offsets, inst.waypoints, inst.gains, True)
            u = mean + std * torch.randn(2, generator=generator, dtype=torch.float64)
            xs.append(x[:3])
            us.append(u)
            x = real_step(x, u, inst.task)
            rs.append(-((x[:2] - inst.ref[t + 1]) ** 2).sum())
    return (
        torch.stack(xs).reshape(episodes, steps, 3),
        torch.stack(us).reshape(episodes, steps, 2),
        torch.stack(rs).reshape(episodes, steps),
    )


def ppo_step(problem, state, options, generator):
    inst, policy, log_std = problem.mdp, state["policy"], state["log_std"]
    steps = inst.task.steps
    with torch.no_grad():
        x, u, rewards = collect(inst, policy.offsets(), log_std.exp(), options.episodes, generator)
        returns = discounted_returns(rewards, options.gamma)  # [episodes, steps]
        adv = returns - returns.mean(0, keepdim=True)
        adv = (adv / (adv.std() + 1e-8)).reshape(-1)
    x, u = x.reshape(-1, 3), u.reshape(-1, 2)
    times = torch.arange(steps).repeat(options.episodes)
    old_logp = None
    for _ in range(options.epochs):
        dist = torch.distributions.Normal(_means(inst, x, times, policy.offsets()), log_std.exp())
        logp = dist.log_prob(u).sum(-1)
        if old_logp is None:
            old_logp = logp.detach()
        ratio = (logp - old_logp).exp()
        loss = clipped_surrogate(ratio, adv, options.clip, options.clip).mean()
        state["opt"].zero_grad()
        loss.backward()
        state["opt"].step()
    rmse = float((-rewards.mean(1)).mean().sqrt())
    return state, {
        "cost": options.episodes,
        "real/rmse": rmse,
        "policy/std": float(log_std.detach().exp().mean()),
    }


add_method(
    TabularMethod(
        tasks=("tracking",),
        name="ppo_tracking",
        title="PPO on Gaussian commands around the embedded tracking controller",
        paper="Schulman et al., arXiv 1707.06347 (the §11.2 PPO arm)",
        formula="L = −mean min(r·A, clip(r, 1±ε)·A), u ~ N(κ(x; θ), σ²)",
        options=PPOOptions,
        defaults={
            "lr": S(3e-4, "[code SB3:ppo/ppo.py learning_rate]"),
            "hidden": S(32, "[ours]"),
            "episodes": S(2, "[ours] (20-episode budget: 10 updates)"),
            "epochs": S(4, "[ours]"),
            "clip": S(0.2, "[paper 1707.06347 §6]"),
            "gamma": S(0.99, "[code SB3:ppo/ppo.py gamma]"),
            "init_std": S(0.1, "[ours]"),
        },
        init=init,
        step=ppo_step,
        policy=plan_of,
        checkpoint=checkpoint,
        restore=restorer(True),
    )
)
