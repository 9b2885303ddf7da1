"""NLL-to-PO arena (papers/seed_generative.md G6.2): NLL training against PG under the
Gaussian-optimal reward U* (`nll_to_po` solver=heuristic: (λ/2)·S⁻¹ of the training data,
exact here because every task has one input) and PG under the implicit bilevel reward, over
seeds. Metrics against policy updates: test NLL, accuracy (digits), moment errors
‖μ̂ − ȳ‖ and ‖Σ̂ − S‖_F (Gaussian tasks), and the first update at which both moment errors
are <= 0.05.

Claim (G6.2) holds if PG(U*) is within the 95 % CI of NLL on test NLL (and accuracy) and
reaches a moment error of 0.05 in fewer updates.

    PYTHONPATH=src python benchmarks/nll_to_po.py --seeds 10 --updates 500
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

from policylab.lab.catalogue import build, lab_methods

ARMS = {
    "nll": ("nll", {}),
    "pg_u_star": ("nll_to_po", {"solver": "heuristic"}),
    "pg_implicit": ("nll_to_po", {"solver": "implicit"}),
}
TASKS = {
    "gaussian_fit": {"dim": 2},
    "po_mse": {},
    "digits_classify": {},
}
DIGITS_ARMS = {
    "nll": ("nll", {}),
    "pg_u_star": ("nll_to_po", {"solver": "heuristic", "reward_kind": "diag"}),
    "pg_implicit": ("nll_to_po", {"solver": "implicit", "reward_kind": "diag"}),
}
THRESHOLD = 0.05


def run(task: str, knobs: dict, algo: str, opts: dict, seed: int, updates: int, every: int):
    problem = build(f"lab/{task}", seed, **knobs)
    method = lab_methods.get(algo)
    options = method.build_options(opts)
    g = torch.Generator().manual_seed(seed)
    state = method.init(problem, options, g)
    spent, curve, reached = 0, [], None
    metrics_of = problem.extras["metrics"]
    while spent < updates:
        state, m = method.step(problem, state, options, g)
        spent += int(m["cost"])
        if spent % every == 0 or spent >= updates:
            point = {"updates": spent, **metrics_of(method.policy(problem, state))}
            curve.append(point)
            err = max(point.get("moment/mean_err", 1e9), point.get("moment/cov_err", 1e9))
            if reached is None and err <= THRESHOLD:
                reached = spent
    return {"final": curve[-1], "reached": reached, "curve": curve}


def ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of the 95 % t-interval (t = 2.262 for 10 seeds)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    t = {2: 12.706, 3: 4.303, 5: 2.776, 10: 2.262}.get(n, 1.96)
    return mean, t * sd / math.sqrt(n)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--updates", type=int, default=500)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--out", default="benchmarks/results/nll_to_po.json")
    parser.add_argument("--lr", type=float, default=None, help="every arm's lr (default 1e-3)")
    parser.add_argument("--transform", default=None, help="the PG arms' reward transform")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results, started = {}, time.perf_counter()
    for task in args.tasks.split(","):
        arms = DIGITS_ARMS if task == "digits_classify" else ARMS
        for arm, (algo, opts) in arms.items():
            opts = {**opts, **({"lr": args.lr} if args.lr else {})}
            if args.transform and algo == "nll_to_po":
                opts["transform"] = args.transform
            runs = [
                run(task, TASKS[task], algo, opts, s, args.updates, args.every)
                for s in range(args.seeds)
            ]
            results[f"{task}/{arm}"] = runs
            print(row(task, arm, runs, args.updates), flush=True)
    print(f"# {time.perf_counter() - started:.0f} s")
    verdicts = verdict(results, args.tasks.split(","), args.updates)
    for line in verdicts:
        print(line)
    slim = {
        k: [{"final": r["final"], "reached": r["reached"]} for r in runs]
        for k, runs in results.items()
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"args": vars(args), "runs": slim}, indent=1))


def row(task: str, arm: str, runs: list[dict], updates: int) -> str:
    cells = [f"{task:16s} {arm:12s}"]
    for key in ("test/nll", "test/accuracy", "moment/mean_err", "moment/cov_err"):
        if key in runs[0]["final"]:
            m, h = ci([r["final"][key] for r in runs])
            cells.append(f"{key} {m:.4f} ± {h:.4f}")
    if "moment/cov_err" in runs[0]["final"]:
        hit = [r["reached"] for r in runs if r["reached"] is not None]
        if hit:
            m, h = ci([float(v) for v in hit])
            cells.append(f"updates to {THRESHOLD}: {m:.0f} ± {h:.0f} ({len(hit)}/{len(runs)})")
        else:
            cells.append(f"updates to {THRESHOLD}: not reached in {updates} (0/{len(runs)})")
    return " | ".join(cells)


def verdict(results: dict, tasks: list[str], updates: int) -> list[str]:
    lines = []
    for task in tasks:
        nll, pg = results[f"{task}/nll"], results[f"{task}/pg_u_star"]
        keys = ["test/nll"] + (["test/accuracy"] if "test/accuracy" in nll[0]["final"] else [])
        inside = []
        for key in keys:
            m, h = ci([r["final"][key] for r in nll])
            p, _ = ci([r["final"][key] for r in pg])
            inside.append(abs(p - m) <= h)
        faster = None
        if "moment/cov_err" in nll[0]["final"]:
            # a run that never reaches counts as updates + 1 [ours]
            a = [r["reached"] or updates + 1 for r in nll]
            b = [r["reached"] or updates + 1 for r in pg]
            faster = sum(b) / len(b) < sum(a) / len(a)
        held = all(inside) and faster is not False
        lines.append(
            f"{task}: PG(U*) inside NLL's CI on {keys}: {inside}; fewer updates to "
            f"{THRESHOLD}: {faster} -> {'held' if held else 'not held'}"
        )
    return lines


if __name__ == "__main__":
    main()
