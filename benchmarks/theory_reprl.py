"""ES (Alg. 4) against RepES (Alg. 5) on the RepRL grid-world at equal trajectories
(papers/seed_control_theory.md §7.3; Nabati, Tennenholtz & Mannor, arXiv:2305.19922).

    PYTHONPATH=src .venv/bin/python benchmarks/theory_reprl.py --seeds 5 --budget 15000

Each seed is one starting policy (the same θ₀ for both methods: paired) and one stream of
rollout noise. The score is the EXACT expected return of the mean policy π_θ (the task's
oracle), read every `--eval-every` trajectories; v* is the backward-induction optimum (a
stationary deterministic policy attains it). The claim holds if RepES reaches
v ≥ 0.9·v* in more seeds or with fewer trajectories. Paired differences (RepES − ES) get
Student-t 95% intervals."""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
from scipy import stats

import policylab.tabular.gridworld  # noqa: F401  (registers the task and the methods)
from policylab.tabular.methods import tabular_methods
from policylab.tabular.tasks import build


def run(name: str, seed: int, budget: int, eval_every: int, overrides: dict):
    """Curve [(trajectories, exact value)], first budget with v ≥ 0.9v* (or None), and the
    run means of the bandit metrics."""
    problem = build("tabular/gridworld", seed)
    method = tabular_methods.get(name)
    options = method.build_options(overrides)
    g = torch.Generator().manual_seed(seed)
    state = method.init(problem, options, g)
    spent, curve, reached, bandit = 0, [(0, problem.value(method.policy(problem, state)))], None, []
    target = 0.9 * problem.optimum
    while spent < budget:
        state, metrics = method.step(problem, state, options, g)
        spent += metrics["cost"]
        if "bandit/linearity_r2" in metrics:
            bandit.append((metrics["bandit/linearity_r2"], metrics["bandit/optimism"]))
        if spent % eval_every == 0 or spent >= budget:
            v = problem.value(method.policy(problem, state))
            curve.append((spent, v))
            if reached is None and v >= target:
                reached = spent
    means = tuple(statistics.median(col) for col in zip(*bandit, strict=True)) if bandit else ()
    return curve, reached, means, problem.optimum


def t_interval(diffs: list[float]) -> tuple[float, float, float]:
    m = statistics.fmean(diffs)
    if len(diffs) < 2:
        return m, math.nan, math.nan
    half = stats.t.ppf(0.975, len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))
    return m, m - half, m + half


def verdict(lo: float, hi: float) -> str:
    if math.isnan(lo):
        return "inside the noise"
    return "held" if lo > 0 else "not held" if hi < 0 else "inside the noise"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--budget", type=int, default=15000, help="trajectories per run")
    p.add_argument("--eval-every", type=int, default=1000, help="trajectories between reads")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--set", nargs="*", default=[], help="rep_es option overrides k=v")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    overrides = {}
    for kv in args.set:
        k, v = kv.split("=", 1)
        overrides[k] = type(tabular_methods.get("rep_es").defaults[k].value)(v)
    es_overrides = {k: v for k, v in overrides.items() if k in tabular_methods.get("es").defaults}

    rows, t0 = {}, time.time()
    for seed in range(args.seeds):
        for name, ov in (("es", es_overrides), ("rep_es", overrides)):
            t = time.time()
            rows[name, seed] = run(name, seed, args.budget, args.eval_every, ov)
            print(
                f"seed {seed} {name:6s} final v = {rows[name, seed][0][-1][1]:7.3f} "
                f"reached 0.9v* at {rows[name, seed][1]}  ({time.time() - t:.0f} s)",
                flush=True,
            )
    v_star = rows["es", 0][3]
    print(
        f"\nv* = {v_star:.6f} (0.9v* = {0.9 * v_star:.3f}); budget {args.budget} "
        f"trajectories, {args.seeds} seeds; {time.time() - t0:.0f} s in all\n"
    )

    print("| trajectories | ES mean v | RepES mean v | RepES − ES [95% CI] |")
    print("|---:|---:|---:|---:|")
    budgets = [b for b, _ in rows["es", 0][0]]
    for i, b in enumerate(budgets):
        es_v = [rows["es", s][0][i][1] for s in range(args.seeds)]
        rep_v = [rows["rep_es", s][0][i][1] for s in range(args.seeds)]
        m, lo, hi = t_interval([r - e for r, e in zip(rep_v, es_v, strict=True)])
        print(
            f"| {b} | {statistics.fmean(es_v):.3f} | {statistics.fmean(rep_v):.3f} | "
            f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}] |"
        )

    print()
    for name in ("es", "rep_es"):
        hits = [rows[name, s][1] for s in range(args.seeds)]
        n = sum(h is not None for h in hits)
        print(f"{name}: {n}/{args.seeds} seeds reach v ≥ 0.9v*; budgets {hits}")
    finals = [rows["rep_es", s][0][-1][1] - rows["es", s][0][-1][1] for s in range(args.seeds)]
    m, lo, hi = t_interval(finals)
    print(f"final value, RepES − ES: {m:+.3f} [{lo:+.3f}, {hi:+.3f}] → {verdict(lo, hi)}")
    r2 = [rows["rep_es", s][2][0] for s in range(args.seeds)]
    opt = [rows["rep_es", s][2][1] for s in range(args.seeds)]
    print(
        f"RepES bandit/linearity_r2 (median over rounds) per seed: "
        f"{', '.join(f'{x:.3f}' for x in r2)}"
    )
    print(
        f"RepES bandit/optimism (median over rounds) per seed: {', '.join(f'{x:.3f}' for x in opt)}"
    )


if __name__ == "__main__":
    main()
