"""DRPG's check (papers/seed_control_theory.md §1.3): on Garnet robust MDPs with L1 sets,
DRPG (exact L1 inner solver) reaches the robust optimum on every instance within 200 outer
iterations; nominal projected PG keeps a positive robust gap wherever the nominal and the
robust optima differ. The oracle is robust policy iteration (checked against robust value
iteration and, for the inner maximiser, scipy's LP in tests/tabular/test_robust.py).

    PYTHONPATH=src python benchmarks/theory_drpg.py --instances 50 --sizes 5,10,15
    PYTHONPATH=src python benchmarks/theory_drpg.py --method drpg_pgd --instances 10 --sizes 5
"""

from __future__ import annotations

import argparse
import statistics
import time

from policylab.tabular.catalogue import build, tabular_methods


def final_gap(name: str, problem, iterations: int) -> tuple[float, int | None]:
    """(gap after `iterations` steps, first step with gap ≤ 1e-6 or None)."""
    method = tabular_methods.get(name)
    options = method.build_options()
    state, first = method.init(problem, options, None), None
    for k in range(iterations):
        if first is None and problem.gap(method.policy(problem, state)) <= 1e-6:
            first = k
        state, _ = method.step(problem, state, options, None)
    gap = problem.gap(method.policy(problem, state))
    if first is None and gap <= 1e-6:
        first = iterations
    return gap, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=50)
    parser.add_argument("--sizes", default="5,10,15", help="numbers of states")
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument(
        "--method", default="drpg", help="drpg (exact L1 inner) or drpg_pgd (gradient inner)"
    )
    args = parser.parse_args()
    print(
        "| S | instances | DRPG gap ≤ 1e-6 | DRPG median steps to 1e-6 | DRPG max gap (relative) | "
        "optima differ | nominal PG gap > 1e-6 where they differ | nominal PG median gap "
        "there | seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for S in map(int, args.sizes.split(",")):
        t0 = time.perf_counter()
        drpg, steps, differ, nominal, relative = [], [], 0, [], []
        for seed in range(args.instances):
            problem = build("tabular/robust_garnet", seed, n_states=S)
            gap, first = final_gap(args.method, problem, args.iterations)
            drpg.append(gap)
            relative.append(gap / abs(problem.optimum))
            if first is not None:
                steps.append(first)
            if problem.extras["nominal_optimum_differs"]:
                differ += 1
                nominal.append(final_gap("nominal_pg", problem, args.iterations)[0])
        ok = sum(g <= 1e-6 for g in drpg)
        stuck = sum(g > 1e-6 for g in nominal)
        med = statistics.median(nominal) if nominal else float("nan")
        print(
            f"| {S} | {args.instances} | {ok}/{args.instances} | "
            f"{statistics.median(steps) if steps else '—'} | "
            f"{max(drpg):.2e} ({max(relative):.1e}) | {differ} | "
            f"{stuck}/{differ} | {med:.3g} | {time.perf_counter() - t0:.0f} |"
        )


if __name__ == "__main__":
    main()
