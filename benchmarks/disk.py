"""DISK against a supervised fixed-grid descriptor and Harris corners on lab/image_pairs, at
equal image pairs (papers/seed_control_theory.md §15.2; arXiv 2006.13566).

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/disk.py --seeds 5 --budget 300

Each seed is one network initialisation, one stream of training pairs and one held-out
set of `--eval-pairs` pairs (the task's instance: the same for every method: paired).
Metrics on the held-out pairs after the budget: correct matches per pair (cycle-consistent
nearest neighbours within 2 px both ways), matching precision (correct / matches) and the
fraction of pairs whose RANSAC homography has a mean corner error < 3 px. The
runs are the lab methods' own loop (trainers/tabular.py runs the same steps). Claim at
our scale: DISK's correct matches exceed supervised_grid's with non-overlapping
intervals. Student-t 95 % intervals per method and for the paired differences."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from policylab.arena.stats import mean_ci, paired_difference_ci
from policylab.lab.catalogue import build, lab_methods
from policylab.lab.image_pairs import match_metrics

METHODS = ("disk", "supervised_grid", "harris")


def run(name: str, seed: int, budget: int, eval_pairs: int) -> dict:
    problem = build("lab/image_pairs", seed, eval_pairs=eval_pairs)
    held_out = problem.extras["held_out"]
    method = lab_methods.get(name)
    options = method.build_options({})
    g = torch.Generator().manual_seed(seed)
    state = method.init(problem, options, g)
    start = match_metrics(method.policy(problem, state), held_out)
    t0, spent = time.process_time(), 0
    while spent < budget:
        state, metrics = method.step(problem, state, options, g)
        spent += int(metrics["cost"])
    seconds = time.process_time() - t0
    end = match_metrics(method.policy(problem, state), held_out)
    return {"method": name, "seed": seed, "pairs": spent, "cpu_s": seconds, "start": start, **end}


def fmt(interval) -> str:
    return f"{interval.mean:.2f} [{interval.low:.2f}, {interval.high:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget", type=int, default=300, help="training image pairs")
    parser.add_argument("--eval-pairs", type=int, default=32)
    parser.add_argument("--out", default="runs/disk_arena.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in range(args.seeds):
        for name in METHODS:
            rows.append(run(name, seed, args.budget, args.eval_pairs))
            print(json.dumps(rows[-1]), flush=True)  # a partial run still leaves its rows
    load_after = os.getloadavg()
    Path(args.out).write_text(
        json.dumps({"args": vars(args), "load": [load_before, load_after], "rows": rows}, indent=1)
    )
    print(f"budget {args.budget} image pairs, {args.seeds} seeds, {args.eval_pairs} held-out pairs")
    print(f"os.getloadavg() before {load_before}, after {load_after}")
    print(
        "| method | correct matches / pair | precision | matches / pair | homography < 3 px "
        "| correct at start | CPU s |"
    )
    print("|---|---|---|---|---|---|---|")
    by = {m: {r["seed"]: r for r in rows if r["method"] == m} for m in METHODS}
    for m in METHODS:
        rs = list(by[m].values())
        print(
            f"| {m} | {fmt(mean_ci([r['correct'] for r in rs]))} | "
            f"{fmt(mean_ci([r['precision'] for r in rs]))} | "
            f"{fmt(mean_ci([r['matches'] for r in rs]))} | "
            f"{fmt(mean_ci([r.get('homography_3px', float('nan')) for r in rs]))} | "
            f"{fmt(mean_ci([r['start']['correct'] for r in rs]))} | "
            f"{sum(r['cpu_s'] for r in rs) / len(rs):.1f} |"
        )
    for other in METHODS[1:]:
        for key in ("correct", "precision", "homography_3px"):
            d = paired_difference_ci(
                {s: r.get(key, float("nan")) for s, r in by["disk"].items()},
                {s: r.get(key, float("nan")) for s, r in by[other].items()},
            )
            print(f"disk − {other}, {key}: {fmt(d)} (paired by seed)")


if __name__ == "__main__":
    main()
