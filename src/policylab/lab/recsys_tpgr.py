"""Lab task `lab/recsys` and the lab methods `tpgr` and `flat_softmax`
(papers/seed_control_theory.md §14.2; seed_llm_algorithms.md §20).

The task: the §14.1 user model over |I| items (1000), episodes of L = 32 recommendations
without repeats, Bernoulli(p) ratings as rewards. The policy sees the state
h = [u, mean embedding of the history] (the user's features are observed [ours]: with the
history alone no policy could know the user). The score is exact: each held-out user's
greedy episode has expected precision@L = mean p of its items, and the ceiling is the mean
of the user's top-L p; `oracle/value` is the mean over the held-out users, `optimum` the
mean ceiling, and the arena's metric precision@L / ceiling is value/optimum.

Both methods run TPGR's REINFORCE [code chenhaokun/TPGR src/tpgr.py:TPGR.train]: returns
Q_t = Σ γ^{t'−t} r_{t'}, standardised per user over that user's episodes and steps, and
loss = mean_decisions(−Q̃·log π(a|s) + λ_u·Σ_levels mean_c (π_n − 1/c)²) + λ_2·||θ||²
(a mean where the code sums: the same direction; Adam is scale-free [ours]). `tpgr` draws
items with the `TreePolicy`, `flat_softmax` with one softmax over all items."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from policylab.algebra.options import check_choice, check_range, option
from policylab.algebra.tpgr import discounted_returns, standardise_per_user, uniformity_penalty
from policylab.envs.recsys import UserModel, precision_ceiling
from policylab.lab import add_method, lab_methods, lab_tasks
from policylab.policies.ranking import FlatSoftmax, TreePolicy, balanced_tree
from policylab.recipes.base import S
from policylab.tabular.methods import Problem, TabularMethod

EVAL_SEED_OFFSET = 7919  # held-out users come from their own stream [ours]


@dataclass
class Recsys:
    """One seeded instance: the catalogue, the held-out users and their exact p."""

    model: UserModel
    length: int
    eval_users: torch.Tensor  # [U, d]
    eval_p: torch.Tensor  # [U, I]


def recsys(
    seed: int,
    items: int = 1000,
    dim: int = 8,
    tau: float = 3.0,
    length: int = 32,
    eval_users: int = 64,
) -> Problem:
    """`lab/recsys`: knobs items (|I|), dim (d), tau (τ), length (L), eval_users."""
    check_range("lab/recsys", "items", items, low=2)
    check_range("lab/recsys", "length", length, low=1, high=items)
    check_range("lab/recsys", "eval_users", eval_users, low=1)
    model = UserModel.make(items, dim, tau, seed=seed)
    users = model.users(eval_users, torch.Generator().manual_seed(seed + EVAL_SEED_OFFSET))
    inst = Recsys(model, length, users, model.p(users))
    start = torch.Generator().manual_seed(seed)
    random_lists = torch.stack([torch.randperm(items, generator=start)[:length] for _ in users])
    return Problem(
        mdp=inst,
        value=lambda recommend: _precision(inst, recommend),
        optimum=float(precision_ceiling(inst.eval_p, length).mean()),
        initial_policy=lambda users: random_lists,  # score 0: a random list per user
        budget_unit="user episodes",
    )


def _precision(inst: Recsys, recommend: Callable[[torch.Tensor], torch.Tensor]) -> float:
    """Mean over held-out users of the expected precision@L of their greedy episode."""
    items = recommend(inst.eval_users)
    return float(inst.eval_p.gather(1, items).mean())


# ---- the shared REINFORCE loop ---------------------------------------------------------------
@dataclass
class TPGROptions:
    users_per_step: int = option(8, "users sampled per step")
    episodes_per_user: int = option(4, "episodes per sampled user")
    lr: float = option(1e-3, "Adam learning rate")
    gamma: float = option(0.6, "γ of the discounted returns")
    l2: float = option(1e-5, "λ_2, weight of the squared parameter norm")
    lambda_u: float = option(5.0, "λ_u, weight of the node probabilities' distance to uniform")
    c: int = option(10, "children per tree node")
    clustering: str = option("pca", "balanced clustering of the item vectors: pca or random")
    logp_uses_mask: bool = option(False, "REINFORCE log-prob from the availability-masked nodes")

    def __post_init__(self) -> None:
        for name in ("users_per_step", "episodes_per_user"):
            check_range("tpgr", name, getattr(self, name), low=1)
        check_range("tpgr", "lr", self.lr, low=0.0, low_open=True)
        check_range("tpgr", "gamma", self.gamma, low=0.0, high=1.0)
        check_range("tpgr", "c", self.c, low=2)
        check_choice("tpgr", "clustering", self.clustering, ("pca", "random"))


@dataclass
class FlatOptions:
    users_per_step: int = option(8, "users sampled per step")
    episodes_per_user: int = option(4, "episodes per sampled user")
    lr: float = option(1e-3, "Adam learning rate")
    gamma: float = option(0.6, "γ of the discounted returns")
    l2: float = option(1e-5, "λ_2, weight of the squared parameter norm")

    def __post_init__(self) -> None:
        for name in ("users_per_step", "episodes_per_user"):
            check_range("flat_softmax", name, getattr(self, name), low=1)
        check_range("flat_softmax", "lr", self.lr, low=0.0, low_open=True)
        check_range("flat_softmax", "gamma", self.gamma, low=0.0, high=1.0)


def _features(users: torch.Tensor, history_sum: torch.Tensor, t: int) -> torch.Tensor:
    """h = [u, mean embedding of the items shown so far] [E, 2d]."""
    return torch.cat([users, history_sum / max(t, 1)], dim=-1)


def episodes(
    inst: Recsys,
    policy: TreePolicy | FlatSoftmax,
    users: torch.Tensor,
    generator: torch.Generator | None,
    *,
    greedy: bool = False,
    logp_uses_mask: bool = False,
) -> dict[str, torch.Tensor]:
    """Roll out one episode of L decisions per row of users [E, d]: items [E, L], logp
    [E, L] (Σ over tree levels), node probs [E, L, d, c] (tree only), p [E, L]."""
    n_rows, items = users.shape[0], inst.model.items
    tree = isinstance(policy, TreePolicy)
    available = (
        policy.leaf_available(n_rows) if tree else torch.ones(n_rows, len(items), dtype=torch.bool)
    )
    history = torch.zeros_like(users)
    rows = torch.arange(n_rows)
    chosen, logps, node_probs = [], [], []
    for t in range(inst.length):
        h = _features(users, history, t)
        if tree:
            leaf, logp, probs = policy.decide(
                h, available, generator, greedy=greedy, logp_uses_mask=logp_uses_mask
            )
            item = policy.leaf_items[leaf]
            node_probs.append(probs)
        else:
            leaf, logp = policy.decide(h, available, generator, greedy=greedy)
            item = leaf
        available[rows, leaf] = False
        history = history + items[item]
        chosen.append(item)
        logps.append(logp.sum(-1))
    out = {"items": torch.stack(chosen, 1), "logp": torch.stack(logps, 1)}
    if node_probs:
        out["node_probs"] = torch.stack(node_probs, 1)
    return out


def _make_policy(problem: Problem, options) -> TreePolicy | FlatSoftmax:
    inst: Recsys = problem.mdp
    features = 2 * inst.model.dim
    if isinstance(options, TPGROptions):
        leaves = balanced_tree(inst.model.items, options.c, options.clustering)
        return TreePolicy(leaves, options.c, features)
    return FlatSoftmax(len(inst.model.items), features)


def init(problem: Problem, options, generator: torch.Generator) -> dict:
    policy = _make_policy(problem, options)
    return {"policy": policy, "optim": torch.optim.Adam(policy.parameters(), lr=options.lr)}


def step(problem: Problem, state: dict, options, generator: torch.Generator):
    inst: Recsys = problem.mdp
    policy, optim = state["policy"], state["optim"]
    # 1. sample users, roll out their episodes (timed: the decision cost the arena compares)
    users = inst.model.users(options.users_per_step, generator)
    user_of_row = torch.arange(options.users_per_step).repeat_interleave(options.episodes_per_user)
    t0 = time.perf_counter()
    out = episodes(
        inst,
        policy,
        users[user_of_row],
        generator,
        logp_uses_mask=getattr(options, "logp_uses_mask", False),
    )
    rollout_s = time.perf_counter() - t0
    p = inst.model.p(users)[user_of_row].gather(1, out["items"])
    rewards = inst.model.rate(p, generator)
    # 2. TPGR's returns: discounted, standardised per user
    adv = standardise_per_user(discounted_returns(rewards, options.gamma), user_of_row)
    # 3. one REINFORCE step with the uniformity and L2 regularisers
    loss = -(adv * out["logp"]).mean()
    if "node_probs" in out:
        loss = loss + options.lambda_u * uniformity_penalty(out["node_probs"]).mean()
    loss = loss + options.l2 * sum((w**2).sum() for w in policy.parameters())
    optim.zero_grad()
    loss.backward()
    grad_norm = torch.sqrt(sum((w.grad**2).sum() for w in policy.parameters()))
    optim.step()
    decisions = out["items"].numel()
    metrics = {
        "cost": len(user_of_row),
        "reward/mean": float(rewards.mean()),
        "precision/sampled": float(p.mean()),
        "loss": float(loss.detach()),
        "grad/norm": float(grad_norm),
        "time/s_per_1e4_decisions": rollout_s / decisions * 1e4,
    }
    if "node_probs" in out:
        metrics["tree/rms_to_uniform"] = float(
            uniformity_penalty(out["node_probs"].detach()).mean().sqrt()
        )
    return state, metrics


def policy(problem: Problem, state: dict) -> Callable[[torch.Tensor], torch.Tensor]:
    """The greedy recommender: users [U, d] → items [U, L]."""
    net = state["policy"]

    def recommend(users: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return episodes(problem.mdp, net, users, None, greedy=True)["items"]

    return recommend


def checkpoint(state: dict) -> dict:
    return {"policy": state["policy"].state_dict(), "optim": state["optim"].state_dict()}


def restore(problem: Problem, options, saved: dict) -> dict:
    net = _make_policy(problem, options)
    net.load_state_dict(saved["policy"])
    optim = torch.optim.Adam(net.parameters(), lr=options.lr)
    optim.load_state_dict(saved["optim"])
    return {"policy": net, "optim": optim}


_CUT = "[ours: cut from the code's 4000 users × 16 episodes per batch]"
_SHARED = {
    "users_per_step": S(8, _CUT),
    "episodes_per_user": S(4, _CUT),
    "lr": S(1e-3, "[code chenhaokun/TPGR:config]"),
    "gamma": S(0.6, "[code chenhaokun/TPGR:config]"),
    "l2": S(1e-5, "[code chenhaokun/TPGR:config]"),
}
_LOOP = dict(init=init, step=step, policy=policy, checkpoint=checkpoint, restore=restore)


def register() -> None:
    if "recsys" not in lab_tasks:
        lab_tasks.add(
            "recsys", recsys, summary="synthetic recommender, exact precision@L ceiling (§14)"
        )
    if "tpgr" not in lab_methods:
        add_method(
            TabularMethod(
                tasks=("recsys",),
                name="tpgr",
                title="TPGR — tree-structured policy gradient recommendation",
                paper="Chen et al., AAAI 2019, arXiv 1811.05869",
                formula="π(a|s) = Π_l softmax(W_{n_l} h + b_{n_l})_{c_l}; "
                "loss = −Q̃·log π + λ_u Σ_l mean_c (π_n − 1/c)² + λ_2‖θ‖²",
                options=TPGROptions,
                defaults={
                    **_SHARED,
                    "lambda_u": S(5.0, "[code chenhaokun/TPGR:config]"),
                    "c": S(10, "[code chenhaokun/TPGR:config]"),
                    "clustering": S("pca", "[code chenhaokun/TPGR:config]"),
                    "logp_uses_mask": S(False, "[code chenhaokun/TPGR:src/tpgr.py:log_pi]"),
                },
                **_LOOP,
            )
        )
    if "flat_softmax" not in lab_methods:
        add_method(
            TabularMethod(
                tasks=("recsys",),
                name="flat_softmax",
                title="REINFORCE over one softmax of all items (TPGR's baseline)",
                paper="seed_control_theory.md §14.2 [ours]",
                formula="π(a|s) = softmax(W h + b)_a over available items; loss as tpgr's",
                options=FlatOptions,
                defaults=_SHARED,
                **_LOOP,
            )
        )


register()
