"""Dynamic vs simultaneous policy gradient on finite-horizon Garnets (arXiv:2310.02671;
papers/seed_control_theory.md §3.2): does training the epochs backwards in time need
fewer episodes to reach gap ≤ 0.01·H, and does its advantage grow with H?

Two parts, each over seeded instances (tabular/finite_garnet, S = 5, A = 3, 3 branches):
  sampled — `dynamic_pg_sampled` vs `simultaneous_pg_sampled`, budget in episodes (an
            episode from epoch h to H counts as one); episodes to gap ≤ 0.01·H and the
            gap at the budget, 95% Student-t intervals over instances, paired by seed.
  exact   — `dynamic_pg` vs `simultaneous_pg` at the theory step sizes: gradient steps
            to gap ≤ 0.01·H (capped).

    PYTHONPATH=src python benchmarks/theory_dynamic_pg.py  # both, ~10 min on 2 cores
    PYTHONPATH=src python benchmarks/theory_dynamic_pg.py --horizons 5 --seeds 2  # tiny
"""

from __future__ import annotations

import argparse
import math
import time

import torch
from scipy import stats

import policylab.tabular.dynamic  # noqa: F401  (registers the methods and tasks)
from policylab.tabular.methods import tabular_methods
from policylab.tabular.tasks import build


def run(method_name, task, seed, horizon, budget, options, n_states):
    """(budget spent when gap ≤ 0.01·H first held or None, final gap, gap₀)."""
    method = tabular_methods.get(method_name)
    problem = build(task, seed, horizon=horizon, n_states=n_states)
    opts = method.build_options(options)
    g = torch.Generator().manual_seed(seed)
    state, spent, hit = method.init(problem, opts, g), 0, None
    while spent < budget:
        state, metrics = method.step(problem, state, opts, g)
        spent += metrics["cost"]
        if hit is None and problem.gap(method.policy(problem, state)) <= 0.01 * horizon:
            hit = spent
    gap0 = problem.optimum - problem.initial
    return hit, problem.gap(method.policy(problem, state)), gap0


def t_interval(xs):
    xs = torch.tensor(xs, dtype=torch.float64)
    if len(xs) < 2:
        return float(xs.mean()), float("nan")
    half = stats.t.ppf(0.975, len(xs) - 1) * float(xs.std()) / math.sqrt(len(xs))
    return float(xs.mean()), half


def fmt(mean, half):
    return f"{mean:.4g} ± {half:.2g}"


def compare(part, pairs, task, horizons, seeds, budget_of, options_of, n_states):
    print(f"\n## {part}\n")
    print(
        "| H | budget | method | reached | to gap ≤ 0.01·H (mean ± 95% CI, reached) "
        "| final gap | gap₀ |"
    )
    print("|---|---|---|---|---|---|---|")
    summary = []
    for H in horizons:
        results = {}
        for name in pairs:
            rows = [
                run(name, task, s, H, budget_of(H), options_of(name, H), n_states) for s in seeds
            ]
            results[name] = rows
            hits = [r[0] for r in rows if r[0] is not None]
            reach = fmt(*t_interval(hits)) if hits else "—"
            print(
                f"| {H} | {budget_of(H)} | {name} | {len(hits)}/{len(rows)} | {reach} "
                f"| {fmt(*t_interval([r[1] for r in rows]))} "
                f"| {t_interval([r[2] for r in rows])[0]:.3f} |"
            )
        dyn, sim = (results[n] for n in pairs)
        diff = t_interval([d[1] - s[1] for d, s in zip(dyn, sim, strict=True)])
        both = [(s[0], d[0]) for d, s in zip(dyn, sim, strict=True) if d[0] and s[0]]
        ratio = t_interval([s / d for s, d in both]) if both else (float("nan"), float("nan"))
        gap_ratio = t_interval([d[1] / s[1] for d, s in zip(dyn, sim, strict=True)])
        summary.append((H, diff, gap_ratio, ratio, len(both)))
    print(
        f"\n{part}: paired by instance (dynamic − simultaneous final gap; ratio = "
        "simultaneous / dynamic budget to the threshold where both reached it)\n"
    )
    print(
        "| H | final-gap difference (95% CI) | final-gap ratio dyn/sim (95% CI) "
        "| budget ratio sim/dyn (95% CI) | pairs that reached |"
    )
    print("|---|---|---|---|---|")
    for H, diff, gap_ratio, ratio, n in summary:
        print(f"| {H} | {fmt(*diff)} | {fmt(*gap_ratio)} | {fmt(*ratio)} | {n} |")


def curvature(horizons, seeds, n_states, points=8):
    """Largest |eigenvalue| of ∇²J at random θ (scales 0..3) against the step-size bounds."""
    from policylab.tabular.dynamic import reward_bound
    from policylab.tabular.mdp import finite_garnet
    from policylab.tabular.solve import evaluate_finite

    print("\n## curvature: max |eig ∇²J(θ)| at random θ vs the smoothness bounds\n")
    print("| H | largest abs eigenvalue seen | 5/2·H·R_max (η₀⁻¹) | 5/2·H²·R_max (η_sim⁻¹) |")
    print("|---|---|---|---|")
    for H in horizons:
        worst, R = 0.0, 0.0
        for seed in seeds:
            mdp = finite_garnet(n_states, 3, 3, H, seed=seed)
            R = max(R, reward_bound(mdp))
            g = torch.Generator().manual_seed(seed)
            for i in range(points):
                theta = torch.randn(H, n_states, 3, dtype=torch.float64, generator=g) * (i % 4)
                hess = torch.autograd.functional.hessian(
                    lambda th, mdp=mdp: evaluate_finite(mdp, torch.softmax(th, -1)).J, theta
                ).reshape(theta.numel(), -1)
                worst = max(worst, float(torch.linalg.eigvalsh(hess).abs().max()))
        print(f"| {H} | {worst:.4f} | {2.5 * H * R:.2f} | {2.5 * H * H * R:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--horizons", type=int, nargs="+", default=[5, 10, 20])
    ap.add_argument("--seeds", type=int, default=5, help="instances 0..seeds−1")
    ap.add_argument("--states", type=int, default=5)
    ap.add_argument("--episodes", type=int, default=100, help="K per step (both methods)")
    ap.add_argument("--epoch-steps", type=int, default=40, help="N_h of dynamic PG")
    ap.add_argument("--step-scale", type=float, default=10.0, help="sampled: both methods")
    ap.add_argument("--sweeps", type=int, default=6, help="sampled budget = sweeps·H·N_h·K")
    ap.add_argument("--exact-cap", type=int, default=3000, help="exact: gradient steps")
    ap.add_argument("--part", choices=["both", "sampled", "exact", "curvature"], default="both")
    args = ap.parse_args()
    torch.set_num_threads(1)  # thousands of tiny ops: threads only add hand-offs
    seeds = list(range(args.seeds))
    start = time.time()
    if args.part in ("both", "sampled"):
        K, N = args.episodes, args.epoch_steps
        compare(
            f"sampled (K = {K}, N_h = {N}, step_scale = {args.step_scale}, S = {args.states})",
            ("dynamic_pg_sampled", "simultaneous_pg_sampled"),
            "tabular/finite_garnet_sampled",
            args.horizons,
            seeds,
            lambda H: args.sweeps * H * N * K,
            lambda name, H: {"episodes": K, "epoch_steps": N, "step_scale": args.step_scale},
            args.states,
        )
    if args.part in ("both", "exact"):
        compare(
            f"exact (theory steps, tol = 0.01·H, cap {args.exact_cap} steps, S = {args.states})",
            ("dynamic_pg", "simultaneous_pg"),
            "tabular/finite_garnet",
            args.horizons,
            seeds,
            lambda H: args.exact_cap,
            lambda name, H: {"tol": 0.01 * H},
            args.states,
        )
    if args.part == "curvature":
        curvature([h for h in args.horizons if h <= 10], seeds, args.states)
    print(f"\n{time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
