"""Lab task `lab/recsys_lists` and the lab methods `rank_grpo` and `grpo_list_dcg`
(papers/seed_control_theory.md §14.2, "Rank-GRPO without an LLM"; seed_llm_algorithms.md
§19).

The task: each user u (§14.1's model) comes with M = 50 candidate items; the policy writes a
list of N = 5 of them with a `PlackettLuce` over scores s = MLP([u, e_i]); the ranks are
the list's "tokens". Sampled relevance rel = Bernoulli(p) of each listed item. The score is
exact: the mean over held-out users of the greedy list's NDCG@5 with p as graded
relevance (DCG = Σ_k p_{o_k} d_k over the ideal DCG of the user's candidates), so the
optimum is 1.

Both methods take the same clipped policy step (token-mean over the ranks, μ epochs) on
G lists per user; they differ only in credit:
- `rank_grpo`: rank rewards (exp_inf: R[i,k] = rel[i,k]; log_decay: causal DCG) and per-rank
  group-normalised advantages, the registered estimator `rank_grpo`; the ratio is the
  rank-level one (one token per rank here, so the token ratio) [§19.2].
- `grpo_list_dcg`: the list's DCG as one reward, group-normalised by the registered `grpo`
  estimator and broadcast to every rank [§19.6's non-causal contrast]."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from policylab.algebra.catalogue import advantage_estimators
from policylab.algebra.options import check_choice, check_range, option
from policylab.algebra.rank import (
    RANK_REWARD_KINDS,
    RANK_REWARDS,
    clipped_surrogate,
    list_dcg,
    rank_discounts,
    rank_rewards,
    segment_log_ratio,
)
from policylab.envs.recsys import UserModel, ideal_dcg
from policylab.lab import add_method, lab_methods, lab_tasks
from policylab.policies.ranking import PlackettLuce, plackett_luce_logp, plackett_luce_sample
from policylab.recipes.base import S
from policylab.rollouts import Rollouts
from policylab.tabular.methods import Problem, TabularMethod

EVAL_SEED_OFFSET = 7919  # held-out users come from their own stream [ours]


@dataclass
class RankingInstance:
    model: UserModel
    candidates: int
    length: int
    eval_users: torch.Tensor  # [U, d]
    eval_cands: torch.Tensor  # [U, M] item ids
    eval_p: torch.Tensor  # [U, M]

    def draw(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """n users [n, d] and their candidate item ids [n, M] (M distinct items each)."""
        users = self.model.users(n, generator)
        n_items = len(self.model.items)
        keys = torch.rand(n, n_items, generator=generator)
        return users, keys.topk(self.candidates, dim=1).indices

    def p(self, users: torch.Tensor, cands: torch.Tensor) -> torch.Tensor:
        """p(u, i) of each user's candidates [n, M]."""
        emb = self.model.items[cands]  # [n, M, d]
        return torch.sigmoid(self.model.scale * (emb @ users[:, :, None])[..., 0])


def recsys_lists(
    seed: int,
    items: int = 1000,
    dim: int = 8,
    tau: float = 3.0,
    candidates: int = 50,
    length: int = 5,
    eval_users: int = 200,
) -> Problem:
    """`lab/recsys_lists`: knobs items, dim, tau, candidates (M), length (N), eval_users."""
    check_range("lab/recsys_lists", "candidates", candidates, low=2, high=items)
    check_range("lab/recsys_lists", "length", length, low=1, high=candidates)
    check_range("lab/recsys_lists", "eval_users", eval_users, low=1)
    model = UserModel.make(items, dim, tau, seed=seed)
    inst = RankingInstance(model, candidates, length, None, None, None)  # type: ignore[arg-type]
    users, cands = inst.draw(eval_users, torch.Generator().manual_seed(seed + EVAL_SEED_OFFSET))
    inst.eval_users, inst.eval_cands, inst.eval_p = users, cands, inst.p(users, cands)
    first = torch.arange(length).expand(eval_users, -1)  # candidates are a random draw
    return Problem(
        mdp=inst,
        value=lambda rank: float(ndcg_per_rank(inst, rank)[0]),
        optimum=1.0,
        initial_policy=lambda users, cands: first,  # score 0: a random list
        budget_unit="sampled lists",
    )


def ndcg_per_rank(inst: RankingInstance, rank: Callable) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean greedy NDCG@N over the held-out users, mean p at each rank [N])."""
    order = rank(inst.eval_users, inst.eval_cands)  # [U, N] candidate positions
    rel = inst.eval_p.gather(1, order)
    ndcg = (rel @ rank_discounts(inst.length)) / ideal_dcg(inst.eval_p, inst.length)
    return ndcg.mean(), rel.mean(0)


@dataclass
class RankGRPOOptions:
    users_per_step: int = option(4, "users (prompts) per step")
    group_size: int = option(8, "G, lists sampled per user")
    reward: str = option("exp_inf", "rank reward: exp_inf (own item) or log_decay (causal DCG)")
    eps_low: float = option(0.06, "ε_low of the clipped rank ratio")
    eps_high: float = option(0.08, "ε_high of the clipped rank ratio")
    epochs: int = option(1, "μ, policy steps per batch of lists")
    lr: float = option(1e-2, "Adam learning rate")
    hidden: int = option(32, "hidden units of the scoring MLP")

    def __post_init__(self) -> None:
        check_range("rank_grpo", "users_per_step", self.users_per_step, low=1)
        check_range("rank_grpo", "group_size", self.group_size, low=2)
        check_choice("rank_grpo", "reward", self.reward, RANK_REWARD_KINDS)
        check_range("rank_grpo", "epochs", self.epochs, low=1)
        check_range("rank_grpo", "lr", self.lr, low=0.0, low_open=True)
        check_range("rank_grpo", "hidden", self.hidden, low=1)


@dataclass
class ListGRPOOptions:
    users_per_step: int = option(4, "users (prompts) per step")
    group_size: int = option(8, "G, lists sampled per user")
    eps_low: float = option(0.2, "ε_low of the clipped token ratio")
    eps_high: float = option(0.2, "ε_high of the clipped token ratio")
    epochs: int = option(1, "μ, policy steps per batch of lists")
    lr: float = option(1e-2, "Adam learning rate")
    hidden: int = option(32, "hidden units of the scoring MLP")

    def __post_init__(self) -> None:
        check_range("grpo_list_dcg", "users_per_step", self.users_per_step, low=1)
        check_range("grpo_list_dcg", "group_size", self.group_size, low=2)
        check_range("grpo_list_dcg", "epochs", self.epochs, low=1)
        check_range("grpo_list_dcg", "lr", self.lr, low=0.0, low_open=True)
        check_range("grpo_list_dcg", "hidden", self.hidden, low=1)


def _seed_from(generator: torch.Generator) -> int:
    return int(torch.randint(0, 2**31 - 1, (1,), generator=generator))


def _make_net(problem: Problem, options, seed: int | None) -> PlackettLuce:
    dim = problem.mdp.model.dim
    with torch.random.fork_rng() if seed is not None else contextlib.nullcontext():
        if seed is not None:
            torch.manual_seed(seed)  # the MLP's init is the run's seed, not the global RNG
        return PlackettLuce(dim, dim, options.hidden)


def init(problem: Problem, options, generator: torch.Generator) -> dict:
    net = _make_net(problem, options, _seed_from(generator))
    return {"policy": net, "optim": torch.optim.Adam(net.parameters(), lr=options.lr)}


def _advantages(rel: torch.Tensor, group_ids: torch.Tensor, options) -> torch.Tensor:
    """A [B, N] from sampled relevance rel [B, N], through the registered estimators."""
    n_rows, n = rel.shape
    mask = torch.ones(n_rows, n, dtype=torch.float64)
    if isinstance(options, RankGRPOOptions):
        rollouts = Rollouts(
            rewards=list_dcg(rel),
            response_mask=mask,
            group_ids=group_ids,
            segment_ids=torch.arange(n).expand(n_rows, -1),  # one token per rank
            extras={RANK_REWARDS: rank_rewards(rel, options.reward)},
        )
        entry = advantage_estimators.entry("rank_grpo")
    else:
        rollouts = Rollouts(rewards=list_dcg(rel), response_mask=mask, group_ids=group_ids)
        entry = advantage_estimators.entry("grpo")
    return entry.fn(rollouts, entry.config()).to(torch.float64)


def step(problem: Problem, state: dict, options, generator: torch.Generator):
    inst: RankingInstance = problem.mdp
    net, optim = state["policy"], state["optim"]
    # 1. G lists per user from the behaviour policy, and their sampled relevance
    users, cands = inst.draw(options.users_per_step, generator)
    users = users.repeat_interleave(options.group_size, 0)
    cands = cands.repeat_interleave(options.group_size, 0)
    group_ids = torch.arange(options.users_per_step).repeat_interleave(options.group_size)
    emb = inst.model.items[cands]
    with torch.no_grad():
        scores = net.scores(users, emb)
        order = plackett_luce_sample(scores, inst.length, generator)
        old_logp = plackett_luce_logp(scores, order)
    rel = inst.model.rate(inst.p(users, cands).gather(1, order), generator)
    # 2. credit: per rank (rank_grpo) or one DCG per list (grpo_list_dcg)
    adv = _advantages(rel, group_ids, options)
    # 3. μ clipped steps, token-mean over the ranks
    seg = torch.arange(inst.length).expand(len(order), -1)
    mask = torch.ones_like(old_logp)
    for _ in range(options.epochs):
        logp = plackett_luce_logp(net.scores(users, emb), order)
        log_ratio = segment_log_ratio(logp, old_logp, seg, mask, inst.length)
        loss = clipped_surrogate(log_ratio, adv, options.eps_low, options.eps_high).mean()
        optim.zero_grad()
        loss.backward()
        optim.step()
    metrics = {
        "cost": len(order),
        "loss": float(loss.detach()),
        "dcg/sampled": float(list_dcg(rel).mean()),
    }
    for k in range(inst.length):
        metrics[f"rewards/pos_{k + 1}"] = float(rel[:, k].mean())
    return state, metrics


def policy(problem: Problem, state: dict) -> Callable:
    """The greedy ranker: (users [U, d], candidate ids [U, M]) → top-N positions [U, N]."""
    net, inst = state["policy"], problem.mdp

    def rank(users: torch.Tensor, cands: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return net.scores(users, inst.model.items[cands]).topk(inst.length, dim=1).indices

    return rank


def checkpoint(state: dict) -> dict:
    return {"policy": state["policy"].state_dict(), "optim": state["optim"].state_dict()}


def restore(problem: Problem, options, saved: dict) -> dict:
    net = _make_net(problem, options, None)
    net.load_state_dict(saved["policy"])
    optim = torch.optim.Adam(net.parameters(), lr=options.lr)
    optim.load_state_dict(saved["optim"])
    return {"policy": net, "optim": optim}


_SHARED = {
    "users_per_step": S(4, "[ours]"),
    "group_size": S(8, "[code yaochenzhu/Rank-GRPO:train_rank_grpo.py num_generations]"),
    "epochs": S(1, "[code yaochenzhu/Rank-GRPO:train_rank_grpo.py num_iterations]"),
    "lr": S(1e-2, "[ours: the code's 1e-6 is for a 0.5B LM; 1e-3 left both flat in 10⁴ lists]"),
    "hidden": S(32, "[ours]"),
}
_LOOP = dict(init=init, step=step, policy=policy, checkpoint=checkpoint, restore=restore)


def register() -> None:
    if "recsys_lists" not in lab_tasks:
        lab_tasks.add(
            "recsys_lists",
            recsys_lists,
            summary="ranked lists of 5 from 50 candidates, exact NDCG@5",
        )
    if "rank_grpo" not in lab_methods:
        add_method(
            TabularMethod(
                tasks=("recsys_lists",),
                name="rank_grpo",
                title="Rank-GRPO — rank-level rewards, advantages and ratios",
                paper="Zhu et al., arXiv 2510.20150",
                formula="Â[i,k] = (R[i,k] − mean_g R[·,k])/(std_g R[·,k] + 1e-4); "
                "L = −min(ρ_k Â, clip(ρ_k, 1−ε_l, 1+ε_h) Â), "
                "ρ_k = geometric mean of rank k's token ratios",
                options=RankGRPOOptions,
                defaults={
                    **_SHARED,
                    "reward": S("exp_inf", "[code yaochenzhu/Rank-GRPO:README]"),
                    "eps_low": S(0.06, "[code yaochenzhu/Rank-GRPO:train_rank_grpo.py]"),
                    "eps_high": S(0.08, "[code yaochenzhu/Rank-GRPO:train_rank_grpo.py]"),
                },
                **_LOOP,
            )
        )
    if "grpo_list_dcg" not in lab_methods:
        add_method(
            TabularMethod(
                tasks=("recsys_lists",),
                name="grpo_list_dcg",
                title="GRPO on the list's DCG, broadcast to every rank (Rank-GRPO's baseline)",
                paper="Shao et al., arXiv 2402.03300 (§19.6's contrast)",
                formula="A_i = (DCG_i − mean_g)/(std_g + 1e-6) on every rank; ppo_clip",
                options=ListGRPOOptions,
                defaults={
                    **_SHARED,
                    "eps_low": S(0.2, "[code verl clip_ratio]"),
                    "eps_high": S(0.2, "[code verl clip_ratio]"),
                },
                **_LOOP,
            )
        )


register()
