"""`fqe_greedy`: the offline-only baseline of HNPG's arena (papers/seed_control_theory.md
§8.3, "offline FQE + greedy"). Fitted Q iteration on the offline data alone, greedy over
the one-hot actions e_k the data's collector sends for its greedy choice:

    y = r + max_k Q_{h+1}(s', e_k)   (y = r at h = H − 1),  fitted for h = H−1..0,
    π_h(s) = e_{argmax_k Q_h(s, e_k)}.

Each step is one backward sweep (30 Adam steps per critic on `batch` rows per h, lr 3e-4,
as HNPG's critic [code YifeiZhou02/HNPG:trpo.py:update_q]). It spends no environment
steps; each sweep is charged `steps_per_update` (as HNPG's update) only so that an arena at
equal budget runs it for as many updates."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.algebra.options import check_range, option
from policylab.lab import add_method
from policylab.lab.hnpg_critic import QValue, fit, offline_targets
from policylab.recipes.base import S
from policylab.tabular.methods import TabularMethod


@dataclass
class FQEGreedyOptions:
    steps_per_update: int = option(1000, help="budget charged per sweep (no env steps are taken)")
    batch: int = option(200, help="offline rows per step h per sweep")
    critic_steps: int = option(30, help="Adam steps per critic per sweep")
    critic_lr: float = option(3e-4, help="critic Adam learning rate")

    def __post_init__(self) -> None:
        for name in ("steps_per_update", "batch", "critic_steps"):
            check_range("fqe_greedy", name, getattr(self, name), low=1)
        check_range("fqe_greedy", "critic_lr", self.critic_lr, low=0, low_open=True)


class GreedyQ:
    """The greedy policy of per-step critics: e_{argmax_k Q_h(s, e_k)}."""

    def __init__(self, q: torch.nn.ModuleList, actions: int) -> None:
        self.q, self.eye = q, torch.eye(actions, dtype=torch.float64)

    def values(self, obs: torch.Tensor, h: int) -> torch.Tensor:
        """Q_h(s, e_k) for every k, [N, A]."""
        n, a = obs.shape[0], self.eye.shape[0]
        with torch.no_grad():
            flat = self.q[h](obs.repeat_interleave(a, 0), self.eye.repeat(n, 1))
        return flat.view(n, a)

    def greedy(self, obs: torch.Tensor, h: int) -> torch.Tensor:
        return self.eye[self.values(obs, h).argmax(-1)]


def _critics(problem) -> torch.nn.ModuleList:
    lock = problem.mdp
    return torch.nn.ModuleList(QValue(lock.obs_dim, lock.actions) for _ in range(lock.horizon))


def init(problem, options, generator):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(2**31, (1,), generator=generator)))
        return {"q": _critics(problem)}


def step(problem, state, options, generator):
    data, q, H = problem.extras["offline"], state["q"], problem.mdp.horizon
    act = GreedyQ(q, problem.mdp.actions)
    losses = []
    for h in reversed(range(H)):
        idx = torch.randint(data["obs"].shape[0], (options.batch,), generator=generator)
        nxt = data["obs"][idx, h + 1]
        next_q = None if h == H - 1 else act.values(nxt, h + 1).max(-1).values
        rows = (
            data["obs"][idx, h],
            data["action"][idx, h],
            offline_targets(data["reward"][idx, h], next_q),
        )
        losses.append(fit(q[h], None, rows, options.critic_steps, options.critic_lr)[1])
    return state, {"cost": options.steps_per_update, "critic/off_loss": sum(losses) / H}


def policy_of(problem, state):
    return GreedyQ(state["q"], problem.mdp.actions)


def checkpoint(state):
    return {"q": state["q"].state_dict()}


def restore(problem, options, saved):
    q = _critics(problem)
    q.load_state_dict(saved["q"])
    return {"q": q}


add_method(
    TabularMethod(
        tasks=("combination_lock",),
        name="fqe_greedy",
        title="Offline fitted Q iteration, greedy over one-hot actions (HNPG's offline baseline)",
        paper="HNPG arena baseline, arXiv:2311.08384 §6; our construction",
        formula="y = r + max_k Q_{h+1}(s', e_k); π_h(s) = e_{argmax_k Q_h(s, e_k)}",
        options=FQEGreedyOptions,
        defaults={
            "steps_per_update": S(1000, "[ours: HNPG's update size, for equal pacing]"),
            "batch": S(200, "[ours: HNPG's offline rows per step at H = 5]"),
            "critic_steps": S(30, "[code YifeiZhou02/HNPG:trpo.py:TRPO.update_q]"),
            "critic_lr": S(3e-4, "[code YifeiZhou02/HNPG:trpo.py:TRPO.update_q]"),
        },
        init=init,
        step=step,
        policy=policy_of,
        checkpoint=checkpoint,
        restore=restore,
    )
)
