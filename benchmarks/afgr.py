"""AFGR against random distinct views, the fixed view order and the oracle on multi-view
objects, accuracy at 2 glances, equal objects seen (papers/seed_control_theory.md §16.2;
Du et al., arXiv 2206.01153).

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/afgr.py --seeds 5 --budget 25600

Each seed is one task instance (held-out set, first views) and one run of each method from
the same initial weights (paired). The score is held-out accuracy after 2 glances (the
actor greedy over unseen views). Exact ceilings (T16.2): oracle 1.0, random 0.75, fixed
0.75. The claim holds at our scale if AFGR's 95 % interval lies at or above 0.95 while the
random and fixed orders' intervals reach no higher than 0.80 (their ceiling 0.75 plus the
held-out set's sampling noise). Student-t intervals over seeds (arena/stats.py); paired
differences AFGR − baseline."""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

from policylab.arena.stats import mean_ci, paired_difference_ci
from policylab.envs.procedural import multiview as mv
from policylab.lab.catalogue import build, lab_methods

METHODS = ("afgr", "random_views", "fixed_order", "oracle_views")
CEILING = {"afgr": 1.0, "oracle_views": 1.0, **{k: 0.75 for k in ("random_views", "fixed_order")}}


def run(name: str, seed: int, budget: int, eval_objects: int) -> tuple[float, float]:
    """(held-out accuracy at 2 glances after `budget` objects, seconds)."""
    problem = build("lab/multiview", seed, eval_objects=eval_objects)
    method = lab_methods.get(name)
    options = method.build_options({})
    g = torch.Generator().manual_seed(seed)
    state, spent, t0 = method.init(problem, options, g), 0, time.perf_counter()
    while spent < budget:
        state, metrics = method.step(problem, state, options, g)
        spent += metrics["cost"]
    return float(problem.value(method.policy(problem, state))), time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--budget", type=int, default=25600, help="objects per run")
    p.add_argument("--eval-objects", type=int, default=2048)
    p.add_argument("--json", default=None, help="write the raw numbers here")
    args = p.parse_args()
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    acc: dict[str, dict[int, float]] = {m: {} for m in METHODS}
    seconds: dict[str, list[float]] = {m: [] for m in METHODS}
    for seed in range(args.seeds):
        for name in METHODS:
            acc[name][seed], s = run(name, seed, args.budget, args.eval_objects)
            seconds[name].append(s)
            print(f"seed {seed} {name:13s} accuracy {acc[name][seed]:.4f} ({s:.1f} s)", flush=True)
    print(
        f"\nbudget {args.budget} objects per run, {args.seeds} seeds, held-out "
        f"{args.eval_objects} objects; load before {load_before}, after {os.getloadavg()}"
    )
    print("\n| method | accuracy at 2 glances (95 % CI) | exact ceiling | s/run |")
    print("|---|---|---|---|")
    cis = {}
    for name in METHODS:
        ci = cis[name] = mean_ci(list(acc[name].values()))
        sec = sum(seconds[name]) / len(seconds[name])
        print(
            f"| {name} | {ci.mean:.4f} [{ci.low:.4f}, {ci.high:.4f}] | {CEILING[name]} "
            f"| {sec:.1f} |"
        )
    print("\n| paired difference | mean (95 % CI) |")
    print("|---|---|")
    for base in ("random_views", "fixed_order", "oracle_views"):
        d = paired_difference_ci(acc["afgr"], acc[base])
        print(f"| afgr − {base} | {d.mean:+.4f} [{d.low:+.4f}, {d.high:+.4f}] |")
    afgr_ok = cis["afgr"].low >= 0.95
    base_ok = all(cis[b].high <= 0.80 for b in ("random_views", "fixed_order"))
    verdict = "held" if afgr_ok and base_ok else "not held"
    if not afgr_ok and cis["afgr"].high >= 0.95:
        verdict = "inside the noise"
    print(
        f"\nverdict: {verdict} (AFGR CI low {cis['afgr'].low:.4f} vs 0.95; random/fixed CI "
        f"high {cis['random_views'].high:.4f}/{cis['fixed_order'].high:.4f} vs 0.80)"
    )
    print(
        "Bayes ceilings: "
        + ", ".join(
            f"{k} {mv.bayes_accuracy(*mv.view_tables(k)):.2f}"
            for k in ("oracle", "random", "fixed")
        )
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "args": vars(args),
                    "accuracy": acc,
                    "seconds": seconds,
                    "load": [load_before, os.getloadavg()],
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
