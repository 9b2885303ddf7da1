"""PPGA against MAP-Elites and gradient-free CMA-MAE on lab/noisy_point_mass
(papers/seed_control_theory.md §9.3), equal env steps, paired seeds, 95 % Student-t
intervals (policylab/arena/stats.py):

    PYTHONPATH=src OMP_NUM_THREADS=1 .venv/bin/python benchmarks/ppga.py \
        --seeds 0 1 2 3 4 --budget 300000

Per run: `policylab.train` of each method, then its final archive re-evaluated by the
task's scorer (8 fresh episodes per elite, re-binned): QD-score/optimum, coverage, best f,
and the QD-score/optimum the archive claims from its insertion-time evaluations. The
spec's pass criterion: PPGA ≥ CMA-MAE with non-overlapping intervals."""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch

import policylab
from policylab.arena.stats import mean_ci, paired_difference_ci
from policylab.lab.catalogue import build
from policylab.trainers.run import latest_checkpoint, load_state

TASK = "lab/noisy_point_mass"
ALGOS = ["ppga_provisional", "cma_mae", "map_elites"]
METRICS = ["qd/opt", "coverage", "best_f", "claimed qd/opt", "seconds"]


def final_report(run_dir: str, problem) -> dict[str, float]:
    saved = load_state(latest_checkpoint(run_dir) / "state.pt")["method"]["archive"]
    pi = torch.cat(
        [saved["occupied"][:, None].double(), saved["fitness"][:, None], saved["solutions"]], 1
    )
    report = problem.extras["report"](pi)
    return {
        "qd/opt": report["qd_score"] / problem.optimum,
        "coverage": report["coverage"],
        "best_f": report["best_f"],
        "claimed qd/opt": report["qd_score_claimed"] / problem.optimum,
    }


def fmt(interval) -> str:
    return f"{interval.mean:.3f} [{interval.low:.3f}, {interval.high:.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--budget", type=int, default=300_000, help="env steps per run")
    parser.add_argument("--algos", nargs="+", default=ALGOS)
    args = parser.parse_args()
    load_before = os.getloadavg()
    results: dict[str, dict[int, dict[str, float]]] = {a: {} for a in args.algos}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:  # methods alternate seed by seed on one machine
            problem = build(TASK, seed)
            for algo in args.algos:
                run_dir = f"{tmp}/{algo}-{seed}"
                t0 = time.perf_counter()
                policylab.train(
                    task=TASK,
                    algo=algo,
                    seed=seed,
                    budget=args.budget,
                    eval_every=10**9,
                    run_dir=run_dir,
                    progress=False,
                )
                row = final_report(run_dir, problem)
                row["seconds"] = time.perf_counter() - t0
                results[algo][seed] = row
                print(algo, seed, {k: round(v, 4) for k, v in row.items()}, flush=True)
    print(
        f"\nloadavg before {load_before}, after {os.getloadavg()}; budget {args.budget} env "
        f"steps; seeds {args.seeds}\n"
    )
    print("| method | " + " | ".join(METRICS) + " |")
    print("|---" * (len(METRICS) + 1) + "|")
    for algo in args.algos:
        cells = [fmt(mean_ci([r[m] for r in results[algo].values()])) for m in METRICS]
        print(f"| {algo} | " + " | ".join(cells) + " |")
    base = args.algos[0]
    for other in args.algos[1:]:
        for m in ["qd/opt", "coverage", "best_f"]:
            diff = paired_difference_ci(
                {s: r[m] for s, r in results[base].items()},
                {s: r[m] for s, r in results[other].items()},
            )
            print(f"{base} − {other}, {m}: {fmt(diff)}")


if __name__ == "__main__":
    main()
