"""A toy lab task and method, registered for the tests of the lab route: a 3-armed
Bernoulli bandit, and REINFORCE on a softmax over a linear layer, whose state holds a
module (so its checkpoint and restore are exercised)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.algebra.options import option
from policylab.lab import add_method, lab_methods, lab_tasks
from policylab.recipes.base import S
from policylab.tabular.methods import Problem, TabularMethod

MEANS = torch.tensor([0.2, 0.5, 0.8], dtype=torch.float64)


def toy_bandit(seed: int, arms: int = 3) -> Problem:
    means = MEANS[:arms]
    return Problem(
        mdp=means,
        value=lambda pi: float(pi @ means),
        optimum=float(means.max()),
        initial_policy=torch.full((arms,), 1.0 / arms, dtype=torch.float64),
        budget_unit="pulls",
    )


@dataclass
class ToyOptions:
    lr: float = option(0.5, help="SGD step")
    batch: int = option(8, help="pulls per step")


def _net(arms: int) -> torch.nn.Linear:
    net = torch.nn.Linear(1, arms, dtype=torch.float64)
    torch.nn.init.zeros_(net.weight)
    torch.nn.init.zeros_(net.bias)
    return net


def init(problem, options, generator):
    return {"net": _net(len(problem.mdp))}


def policy(problem, state):
    return torch.softmax(state["net"](torch.ones(1, dtype=torch.float64)), -1).detach()


def step(problem, state, options, generator):
    net = state["net"]
    probs = torch.softmax(net(torch.ones(1, dtype=torch.float64)), -1)
    arms = torch.multinomial(probs.detach(), options.batch, replacement=True, generator=generator)
    rewards = (
        torch.rand(options.batch, generator=generator, dtype=torch.float64) < problem.mdp[arms]
    ).double()
    loss = -((rewards - rewards.mean()) * probs[arms].log()).mean()
    net.zero_grad()
    loss.backward()
    with torch.no_grad():
        for p in net.parameters():
            p -= options.lr * p.grad
    return state, {"cost": options.batch, "reward/mean": float(rewards.mean())}


def checkpoint(state):
    return {"net": state["net"].state_dict()}


def restore(problem, options, saved):
    net = _net(len(problem.mdp))
    net.load_state_dict(saved["net"])
    return {"net": net}


def register() -> None:
    if "toy_bandit" not in lab_tasks:
        lab_tasks.add("toy_bandit", toy_bandit)
    if "toy_reinforce" not in lab_methods:
        add_method(
            TabularMethod(
                name="toy_reinforce",
                title="REINFORCE on a toy bandit",
                paper="(test fixture)",
                formula="θ ← θ + lr·mean((r − r̄)∇log π(a))",
                options=ToyOptions,
                defaults={"lr": S(0.5, "[ours]"), "batch": S(8, "[ours]")},
                init=init,
                step=step,
                policy=policy,
                checkpoint=checkpoint,
                restore=restore,
            )
        )
