"""The §11 arena on lab/tracking (papers/seed_control_theory.md §11.2): MB-PG with the
embedded controller against its open-loop twin, model-only optimisation, PPO and the oracle
(exact real derivatives), at an equal budget of real episodes, paired seeds, 95 % t
intervals (policylab.arena.stats).

    python benchmarks/mbpg_tracking.py                  # 5 seeds, 20 real episodes
    python benchmarks/mbpg_tracking.py --seeds 3 --budget 10
    python benchmarks/mbpg_tracking.py --optimum        # the oracle at 400 episodes, seed 0
                                                        # (lab/tracking's BEST_KNOWN)
    python benchmarks/mbpg_tracking.py --cosines        # cos(estimate, exact) at the start
                                                        # policy, with and without feedback,
                                                        # over lag × drift

Each run is the trainer's loop (method.init, then method.step until the budget is spent;
trainers/tabular.py) inside this process. Pass criterion [§11.2]: MB-PG + controller reaches
≤ 1.1× the oracle's RMSE while PPO and open-loop do not. The ratio is per seed against the
oracle at the same seed and budget."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from policylab.arena.stats import mean_ci
from policylab.lab.catalogue import build, lab_methods

ARMS = (
    "tracking_oracle",
    "mbpg_tracking_provisional",
    "mbpg_open_loop_provisional",
    "model_only",
    "ppo_tracking",
)
CRITERION = 1.1


def run(algo: str, seed: int, budget: int, knobs: dict) -> dict:
    problem = build("lab/tracking", seed, **knobs)
    method = lab_methods.get(algo)
    options = method.build_options({})
    generator = torch.Generator().manual_seed(seed)
    state = method.init(problem, options, generator)
    spent, steps, t0 = 0, [], time.perf_counter()
    while spent < budget:
        state, metrics = method.step(problem, state, options, generator)
        spent += int(metrics.pop("cost"))
        steps.append(metrics)
    rmse = -problem.value(method.policy(problem, state))
    out = {"algo": algo, "seed": seed, "spent": spent, "rmse": rmse}
    out["seconds"] = time.perf_counter() - t0
    out["best_rmse"] = min([rmse] + [m["real/rmse"] for m in steps])
    for key in ("grad/cosine_oracle", "grad/sensitivity_T"):
        if key in steps[0]:
            out[key] = sum(m[key] for m in steps) / len(steps)
    return out


def cosines() -> str:
    """T11.1's mechanism on the testbed: how well the model-derivative estimate points along
    the exact real gradient at the nominal policy, with and without the controller."""
    from policylab.lab.mbpg import exact_real_gradient, model_derivative_estimate
    from policylab.lab.tracking import Plan

    lines = ["| lag (s) | drift | cos closed loop | cos open loop | RMSE closed | RMSE open |"]
    lines.append("|---|---|---|---|---|---|")
    for lag in (0.1, 0.2, 0.4):
        for drift in (0.0, 0.1, 0.3):
            inst = build("lab/tracking", 0, lag=lag, drift=drift).mdp
            row = []
            for feedback in (True, False):
                plan = Plan(torch.zeros(inst.waypoints.numel() + 3, dtype=torch.float64), feedback)
                est, mse = model_derivative_estimate(inst, plan)
                exact, _ = exact_real_gradient(inst, plan)
                row.append(
                    (
                        float(torch.nn.functional.cosine_similarity(est.grad, exact, 0)),
                        float(mse.sqrt()),
                    )
                )
            (cos_c, rmse_c), (cos_o, rmse_o) = row
            lines.append(
                f"| {lag} | {drift} | {cos_c:.3f} | {cos_o:.3f} | {rmse_c:.4f} | {rmse_o:.4f} |"
            )
    return "\n".join(lines)


def fmt(ci) -> str:
    return f"{ci.mean:.4f} [{ci.low:.4f}, {ci.high:.4f}]"


def table(results: list[dict], seeds: list[int]) -> tuple[str, dict]:
    by = {(r["algo"], r["seed"]): r for r in results}
    oracle = {s: by[("tracking_oracle", s)]["rmse"] for s in seeds}
    lines = [
        "| arm | real RMSE (m) | RMSE / oracle | cos(est, exact) | ‖S_T‖ |",
        "|---|---|---|---|---|",
    ]
    ratios = {}
    for algo in ARMS:
        rows = [by[(algo, s)] for s in seeds]
        ratio = mean_ci([r["rmse"] / oracle[r["seed"]] for r in rows])
        ratios[algo] = ratio
        cos = (
            mean_ci([r["grad/cosine_oracle"] for r in rows])
            if "grad/cosine_oracle" in rows[0]
            else None
        )
        sens = (
            mean_ci([r["grad/sensitivity_T"] for r in rows])
            if "grad/sensitivity_T" in rows[0]
            else None
        )
        lines.append(
            f"| {algo} | {fmt(mean_ci([r['rmse'] for r in rows]))} | {fmt(ratio)} | "
            f"{fmt(cos) if cos else '—'} | {fmt(sens) if sens else '—'} |"
        )
    return "\n".join(lines), ratios


def verdict(ratios: dict) -> str:
    mb = ratios["mbpg_tracking_provisional"]
    others = [ratios["ppo_tracking"], ratios["mbpg_open_loop_provisional"]]
    if mb.high <= CRITERION and all(o.low > CRITERION for o in others):
        return "held"
    if mb.low > CRITERION or any(o.high <= CRITERION for o in others):
        return "not held"
    return "inside the noise"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget", type=int, default=20, help="real episodes per run")
    parser.add_argument("--optimum", action="store_true")
    parser.add_argument("--cosines", action="store_true")
    parser.add_argument("--out", default="runs/mbpg_tracking")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    if args.cosines:
        print(cosines())
        print(f"loadavg before/after {[load_before, os.getloadavg()]}")
        return
    if args.optimum:
        result = run("tracking_oracle", 0, 400, {})
        print(json.dumps({**result, "loadavg": [load_before, os.getloadavg()]}, indent=1))
        return
    seeds = list(range(args.seeds))
    results = []
    for algo in ARMS:
        for seed in seeds:
            results.append(run(algo, seed, args.budget, {}))
            print(json.dumps(results[-1]), flush=True)
    text, ratios = table(results, seeds)
    loads = [load_before, os.getloadavg()]
    report = (
        f"{text}\n\nverdict (MB-PG ≤ {CRITERION}× oracle, PPO and open-loop not): "
        f"{verdict(ratios)}\nseeds {seeds}, budget {args.budget} real episodes; "
        f"loadavg before/after {loads}\n"
    )
    print(report)
    (out / "results.json").write_text(json.dumps({"results": results, "loadavg": loads}))
    (out / "table.md").write_text(report)


if __name__ == "__main__":
    main()
