"""TPGR against a flat softmax (lab/recsys) and Rank-GRPO against GRPO on the broadcast DCG
(lab/recsys_lists), papers/seed_control_theory.md §14.2, at equal budget, paired seeds.

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/recsys_rank.py \
        --seeds 5 --episodes 3200 --lists 12800

Arena 1 (budget = user episodes of L = 32): precision@32 / exact ceiling of each held-out
user's greedy episode (mean over 64 users), and seconds per 10⁴ decisions (sampling, no
grad, 320 episodes × 32 steps) of the trained policies at |I| = 1000, plus untrained
policies at |I| = 10⁴ (the complexity claim). The claim holds if TPGR matches the flat
precision within the CI at lower decision time, or beats it at equal samples.

Arena 2 (budget = sampled lists of N = 5 from 50 candidates): exact greedy NDCG@5 (mean
over 200 held-out users), sampled NDCG@5 of 10⁴ lists from the final policy (t-CI over
lists), and the mean p at each rank. The claim holds if rank-level credit gives higher
NDCG at equal sampled lists, with the gap at ranks 3–5.

Intervals: Student-t 95 % over seeds; differences paired by seed (arena/stats.py)."""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from policylab.arena.stats import mean_ci, paired_difference_ci
from policylab.envs.recsys import ideal_dcg
from policylab.lab.catalogue import build, lab_methods
from policylab.lab.recsys_lists import ndcg_per_rank
from policylab.lab.recsys_tpgr import episodes
from policylab.policies.ranking import plackett_luce_sample

CHECKPOINTS = (0.25, 0.5, 1.0)


def train(task: str, name: str, seed: int, budget: int, options: dict, probe):
    """Run `name` on `task` seed `seed` for `budget` units; `probe(problem, state)` at each
    checkpoint fraction. Returns (problem, state, {fraction: probe}, seconds)."""
    problem = build(task, seed)
    method = lab_methods.get(name)
    opts = method.build_options(options)
    g = torch.Generator().manual_seed(seed)
    state = method.init(problem, opts, g)
    spent, marks, out, t0 = 0, list(CHECKPOINTS), {}, time.perf_counter()
    while spent < budget:
        state, metrics = method.step(problem, state, opts, g)
        spent += int(metrics["cost"])
        while marks and spent >= marks[0] * budget:
            out[marks.pop(0)] = probe(problem, method, state)
    return problem, state, out, time.perf_counter() - t0


def decision_seconds(problem, policy, rows: int = 320) -> float:
    """Seconds per 10⁴ sampled decisions (no grad), best of 3."""
    inst = problem.mdp
    users = inst.model.users(rows, torch.Generator().manual_seed(0))
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        with torch.no_grad():
            episodes(inst, policy, users, torch.Generator().manual_seed(1))
        best = min(best, time.perf_counter() - t0)
    return best / (rows * inst.length) * 1e4


def ci(values) -> str:
    i = mean_ci(list(values))
    return f"{i.mean:.4f} [{i.low:.4f}, {i.high:.4f}]"


def arena_tpgr(seeds: int, budget: int) -> None:
    print(f"\n## lab/recsys: tpgr vs flat_softmax, {budget} user episodes, {seeds} seeds\n")

    def probe(problem, method, state):
        return problem.value(method.policy(problem, state)) / problem.optimum

    rows, timing, secs = {}, {}, {}
    for name in ("tpgr", "flat_softmax"):
        for seed in range(seeds):
            problem, state, curve, s = train("lab/recsys", name, seed, budget, {}, probe)
            rows.setdefault(name, {})[seed] = curve
            timing.setdefault(name, []).append(decision_seconds(problem, state["policy"]))
            secs.setdefault(name, []).append(s)
    print("| method | " + " | ".join(f"prec/ceiling @{int(f * budget)}" for f in CHECKPOINTS))
    print("|---|" + "---|" * len(CHECKPOINTS) + "---|---|")
    for name, per_seed in rows.items():
        cells = [ci(per_seed[s][f] for s in per_seed) for f in CHECKPOINTS]
        print(
            f"| {name} | " + " | ".join(cells) + f" | s/10⁴ decisions {ci(timing[name])} | "
            f"train s {statistics.mean(secs[name]):.1f} |"
        )
    for f in CHECKPOINTS:
        d = paired_difference_ci(
            {s: c[f] for s, c in rows["tpgr"].items()},
            {s: c[f] for s, c in rows["flat_softmax"].items()},
        )
        print(f"tpgr − flat @{int(f * budget)}: {d.mean:+.4f} [{d.low:+.4f}, {d.high:+.4f}]")
    # decision time at |I| = 10⁴, untrained (zero-init) policies: the complexity claim
    from policylab.lab.recsys_tpgr import FlatOptions, TPGROptions, _make_policy

    big = build("lab/recsys", 0, items=10_000, eval_users=1)
    for label, opts in (("tpgr", TPGROptions()), ("flat_softmax", FlatOptions())):
        print(
            f"|I| = 10⁴, {label}: "
            f"{decision_seconds(big, _make_policy(big, opts), rows=32):.3f} s/10⁴ decisions"
        )


def sampled_ndcg(problem, state, lists: int = 10_000) -> float:
    """Mean NDCG@N of `lists` lists sampled from the final PL policy over the held-out users."""
    inst = problem.mdp
    per_user = max(1, lists // len(inst.eval_users))
    users = inst.eval_users.repeat_interleave(per_user, 0)
    cands = inst.eval_cands.repeat_interleave(per_user, 0)
    p = inst.eval_p.repeat_interleave(per_user, 0)
    with torch.no_grad():
        scores = state["policy"].scores(users, inst.model.items[cands])
    order = plackett_luce_sample(scores, inst.length, torch.Generator().manual_seed(0))
    d = 1.0 / torch.log2(torch.arange(2, inst.length + 2, dtype=p.dtype))
    return float(((p.gather(1, order) @ d) / ideal_dcg(p, inst.length)).mean())


def arena_rank(seeds: int, budget: int) -> None:
    print(
        f"\n## lab/recsys_lists: rank_grpo vs grpo_list_dcg, {budget} sampled lists, "
        f"{seeds} seeds\n"
    )

    def probe(problem, method, state):
        ndcg, per_rank = ndcg_per_rank(problem.mdp, method.policy(problem, state))
        return float(ndcg), per_rank.tolist()

    arms = {
        "rank_grpo (exp_inf)": ("rank_grpo", {}),
        "rank_grpo (log_decay)": ("rank_grpo", {"reward": "log_decay"}),
        "grpo_list_dcg": ("grpo_list_dcg", {}),
    }
    curves, sampled = {}, {}
    for label, (name, opts) in arms.items():
        for seed in range(seeds):
            problem, state, curve, _ = train("lab/recsys_lists", name, seed, budget, opts, probe)
            curves.setdefault(label, {})[seed] = curve
            sampled.setdefault(label, []).append(sampled_ndcg(problem, state))
    print(
        "| method | "
        + " | ".join(f"greedy NDCG@5 @{int(f * budget)}" for f in CHECKPOINTS)
        + " | sampled NDCG@5 | p at ranks 1..5 (end) |"
    )
    print("|---|" + "---|" * (len(CHECKPOINTS) + 2))
    for label, per_seed in curves.items():
        cells = [ci(per_seed[s][f][0] for s in per_seed) for f in CHECKPOINTS]
        ranks = [statistics.mean(per_seed[s][1.0][1][k] for s in per_seed) for k in range(5)]
        print(
            f"| {label} | "
            + " | ".join(cells)
            + f" | {ci(sampled[label])} | "
            + ", ".join(f"{r:.3f}" for r in ranks)
            + " |"
        )
    base = curves["grpo_list_dcg"]
    for label in ("rank_grpo (exp_inf)", "rank_grpo (log_decay)"):
        for f in CHECKPOINTS:
            d = paired_difference_ci(
                {s: c[f][0] for s, c in curves[label].items()},
                {s: c[f][0] for s, c in base.items()},
            )
            print(
                f"{label} − grpo_list_dcg @{int(f * budget)}: "
                f"{d.mean:+.4f} [{d.low:+.4f}, {d.high:+.4f}]"
            )
        for k in range(5):
            d = paired_difference_ci(
                {s: c[1.0][1][k] for s, c in curves[label].items()},
                {s: c[1.0][1][k] for s, c in base.items()},
            )
            print(f"  rank {k + 1}: {d.mean:+.4f} [{d.low:+.4f}, {d.high:+.4f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=3200, help="lab/recsys budget")
    parser.add_argument("--lists", type=int, default=12800, help="lab/recsys_lists budget")
    parser.add_argument("--only", choices=("tpgr", "rank"), default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    print(f"load average at start: {os.getloadavg()}")
    if args.only != "rank":
        arena_tpgr(args.seeds, args.episodes)
    if args.only != "tpgr":
        arena_rank(args.seeds, args.lists)
    print(f"\nwall {time.perf_counter() - t0:.0f} s; load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
