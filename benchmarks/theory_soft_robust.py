"""Soft-robust MDPs (arXiv:2306.11626, papers/seed_control_theory.md §2.3): three checks
against the exact soft-robust DP.

  pg     projected PG on the Toy-10 ring (β 3, slip 0.01, γ 0.95, η 0.1): updates until the
         code's stop criterion V* − J < 1e-6 [code PG_train.py], per starting policy.
  rate   RFZI's error against n samples per (s, a): the greedy policy's suboptimality
         V*(ρ) − J(π̂) and the value error ‖V̂ − V*‖_∞ (V̂ = max_a [r − (γ/β) log Z]),
         with each seed's log-log slope and a Student-t interval over seeds.
  arena  RFZI vs risk-neutral fitted Q iteration on the same data, scored by the
         soft-robust value (β 3) under the true kernel: paired differences, 95% t
         intervals, on the instances whose risk-sensitive and neutral optima differ.

    python benchmarks/theory_soft_robust.py --part pg
    python benchmarks/theory_soft_robust.py --part rate --seeds 5
    python benchmarks/theory_soft_robust.py --part arena --seeds 20
"""

from __future__ import annotations

import argparse
import math
import time

import torch
from scipy import stats

import policylab.tabular.soft_robust  # noqa: F401  (registers the methods and tasks)
from policylab.tabular.catalogue import build, tabular_methods


def t_interval(xs: list[float]) -> tuple[float, float, float]:
    """Mean and 95% Student-t interval."""
    n = len(xs)
    mean = sum(xs) / n
    if n < 2:
        return mean, float("nan"), float("nan")
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def run_pg(args) -> None:
    method = tabular_methods.get("soft_robust_pg")
    options = method.build_options()
    print("| seed | start | updates to V* − J < 1e-6 | final gap | seconds |")
    print("|---|---|---|---|---|")
    for seed in range(args.seeds):
        problem = build("tabular/soft_robust_ring", seed, beta=args.beta)
        state = method.init(problem, options, torch.Generator().manual_seed(seed))
        started, updates = time.perf_counter(), 0
        gap = problem.gap(method.policy(problem, state))
        while gap >= 1e-6 and updates < args.max_updates:
            state, _ = method.step(problem, state, options, None)
            updates += 1
            gap = problem.gap(method.policy(problem, state))
        start = "uniform (the code's)" if seed == 0 else "random"
        reached = updates if gap < 1e-6 else f"> {args.max_updates}"
        print(f"| {seed} | {start} | {reached} | {gap:.2e} | {time.perf_counter() - started:.1f} |")


def fit_offline(name: str, problem, samples: int, seed: int, max_iter: int):
    """Run an offline method on its seeded data until its update stops moving."""
    method = tabular_methods.get(name)
    options = method.build_options({"samples_per_pair": samples})
    state = method.init(problem, options, torch.Generator().manual_seed(seed))
    for _ in range(max_iter):
        state, metrics = method.step(problem, state, options, None)
        if max(v for k, v in metrics.items() if k.startswith("fit/")) < 1e-11:
            return method, state
    raise RuntimeError(f"{name}: not converged in {max_iter} iterations")


def run_rate(args) -> None:
    ns = [int(n) for n in args.ns.split(",")]
    for task in args.tasks.split(","):
        print(f"\n### tabular/{task}, β = {args.beta}, {args.seeds} seeds\n")
        subopt = {n: [] for n in ns}
        verr = {n: [] for n in ns}
        for seed in range(args.seeds):
            problem = build(f"tabular/{task}", seed, beta=args.beta)
            soft, mdp = problem.extras["soft_robust"], problem.mdp
            V_star, _ = soft.optimum(mdp)
            for n in ns:
                method, state = fit_offline("rfzi", problem, n, seed, args.max_iter)
                V_hat = (soft.rewards(mdp) - mdp.gamma / soft.beta * state["log_Z"]).max(-1)
                subopt[n].append(problem.gap(method.policy(problem, state)))
                verr[n].append(float((V_hat.values - V_star).abs().max()))
        print(
            "| n per (s,a) | suboptimality V* − J (mean [95% CI]) | zero-gap seeds | "
            "‖V̂ − V*‖_∞ (mean [95% CI]) |"
        )
        print("|---|---|---|---|")
        for n in ns:
            m, lo, hi = t_interval(subopt[n])
            vm, vlo, vhi = t_interval(verr[n])
            zeros = sum(x < 1e-9 for x in subopt[n])
            print(
                f"| {n} | {m:.4g} [{lo:.3g}, {hi:.3g}] | {zeros}/{args.seeds} | "
                f"{vm:.4g} [{vlo:.3g}, {vhi:.3g}] |"
            )
        for low in sorted({ns[0], args.fit_min}):
            for label, table in (("‖V̂ − V*‖_∞", verr), ("suboptimality", subopt)):
                print(log_log_slope(label, table, [n for n in ns if n >= low], args.seeds))


def log_log_slope(label: str, table: dict, ns: list[int], seeds: int) -> str:
    """Each seed's least-squares slope of log(error) on log(n) over its non-zero points
    (at least 3), then the mean and a 95% t interval over seeds."""
    slopes = []
    for i in range(seeds):
        pts = [(math.log(n), math.log(table[n][i])) for n in ns if table[n][i] > 1e-12]
        if len(pts) >= 3:
            slopes.append(stats.linregress(*zip(*pts, strict=True)).slope)
    where = f"n ∈ [{ns[0]}, {ns[-1]}]"
    if len(slopes) < 2:
        return f"\nlog-log slope of {label} over {where}: too few non-zero points"
    m, lo, hi = t_interval(slopes)
    return (
        f"\nlog-log slope of {label} over {where}: {m:.3f} [{lo:.3f}, {hi:.3f}] "
        f"({len(slopes)} seeds with ≥ 3 non-zero points)"
    )


def run_arena(args) -> None:
    ns = [int(n) for n in args.ns.split(",")]
    for task in args.tasks.split(","):
        problems = [build(f"tabular/{task}", s, beta=args.beta) for s in range(args.seeds)]
        differ = [p.extras["neutral_optimum_differs"] for p in problems]
        print(
            f"\n### tabular/{task}, β = {args.beta}: risk-sensitive and neutral optima "
            f"differ on {sum(differ)}/{len(differ)} instances\n"
        )
        print(
            "| n per (s,a) | instances | RFZI value | FQI value | RFZI − FQI (mean [95% CI]) "
            "| RFZI wins / ties / losses | verdict |"
        )
        print("|---|---|---|---|---|---|---|")
        for n in ns:
            for subset in ("differ", "all"):
                rows = [(s, p) for s, p in enumerate(problems) if subset == "all" or differ[s]]
                if len(rows) < 2:
                    continue
                rz, fq = [], []
                for s, p in rows:
                    for name, out in (("rfzi", rz), ("fitted_q", fq)):
                        method, state = fit_offline(name, p, n, s, args.max_iter)
                        out.append(p.value(method.policy(p, state)))
                diff = [a - b for a, b in zip(rz, fq, strict=True)]
                m, lo, hi = t_interval(diff)
                verdict = "held" if lo > 0 else "not held" if hi < 0 else "inside the noise"
                wins = sum(d > 1e-9 for d in diff), sum(abs(d) <= 1e-9 for d in diff)
                print(
                    f"| {n} | {subset} ({len(rows)}) | {sum(rz) / len(rz):.4f} | "
                    f"{sum(fq) / len(fq):.4f} | {m:+.4f} [{lo:+.4f}, {hi:+.4f}] | "
                    f"{wins[0]} / {wins[1]} / {len(diff) - sum(wins)} | {verdict} |"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["pg", "rate", "arena"], required=True)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--beta", type=float, default=3.0)
    parser.add_argument("--tasks", default="soft_robust_garnet,soft_robust_ring")
    parser.add_argument("--ns", default=None, help="samples per (s, a), comma-separated")
    parser.add_argument("--fit-min", type=int, default=300, help="rate: also fit n ≥ this")
    parser.add_argument("--max-updates", type=int, default=50_000)
    parser.add_argument("--max-iter", type=int, default=5_000)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.ns is None:
        args.ns = "10,30,100,300,1000,3000,10000" if args.part == "rate" else "30,100,1000"
    {"pg": run_pg, "rate": run_rate, "arena": run_arena}[args.part](args)


if __name__ == "__main__":
    main()
