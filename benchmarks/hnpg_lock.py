"""HNPG against on-policy TRPO and offline FQE + greedy on the rich-observation
combination lock, at equal on-policy environment steps (papers/seed_control_theory.md
§8.3; Zhou, Sekhari, Song & Sun, arXiv:2311.08384).

Collect the offline data (ε-greedy optimal episodes, ε = 1/H; deterministic in the seed;
write it under runs/, which git ignores):

    PYTHONPATH=src .venv/bin/python benchmarks/hnpg_lock.py collect --H 5 --seed 0 \
        --episodes 10000 --out runs/hnpg/lock_H5_seed0.pt

(`policylab train --task lab/combination_lock knobs.offline_file=...` reads such a file;
without it the task collects the same data in memory from its seed.)

The arena (each seed: one lock, one dataset, one initial policy shared by the methods):

    PYTHONPATH=src .venv/bin/python benchmarks/hnpg_lock.py arena --H 5 --seeds 5 \
        --budget 30000 --eval-every 2000

Per method and arm (clean data; `corrupted`: half the episodes act uniformly at random):
the successes (greedy return ≥ 0.9 over 100 episodes at the end of the budget), the
final greedy return (mean and Student-t 95 % interval over seeds), the env steps to the
first successful evaluation, and the paired difference HNPG − each other method."""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from pathlib import Path

import torch

from policylab.arena.stats import mean_ci, paired_difference_ci
from policylab.envs.combination_lock import CombinationLock, collect_offline, reach_probability
from policylab.lab.catalogue import build, lab_methods
from policylab.lab.combination_lock import SUCCESS


def collect(args) -> None:
    lock = CombinationLock(args.H, args.seed)
    t0 = time.perf_counter()
    data = collect_offline(lock, args.episodes, args.seed + 1, corrupted=args.corrupted)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # which lock the data opens: the task checks it when the file is read back
    data["meta"] = {"H": args.H, "seed": args.seed, "corrupted": float(args.corrupted)}
    torch.save(data, out)
    reach = float(data["reached"].double().mean())
    print(
        f"{args.episodes} episodes of H = {args.H} (seed {args.seed}, corrupted "
        f"{args.corrupted}) → {out} in {time.perf_counter() - t0:.1f} s; reached the end: "
        f"{reach:.4f} (T8.1 ε-greedy: {reach_probability(args.H, epsilon=1 / args.H):.4f})"
    )


def one_run(name: str, seed: int, knobs: dict, budget: int, eval_every: int) -> dict:
    problem = build("lab/combination_lock", seed, **knobs)
    method = lab_methods.get(name)
    options = method.build_options({})
    g = torch.Generator().manual_seed(seed)
    state = method.init(problem, options, g)
    spent, next_eval, first, value, t0 = 0, eval_every, None, problem.initial, time.perf_counter()
    while spent < budget:
        state, metrics = method.step(problem, state, options, g)
        spent += metrics["cost"]
        if spent >= next_eval or spent >= budget:
            next_eval += eval_every
            value = problem.value(method.policy(problem, state))
            if first is None and value >= SUCCESS:
                first = spent
    return {"value": value, "first": first, "seconds": time.perf_counter() - t0}


def fmt(ci) -> str:
    if math.isnan(ci.low):
        return f"{ci.mean:.3f}"
    return f"{ci.mean:.3f} [{ci.low:.3f}, {ci.high:.3f}]"


def arena(args) -> None:
    corrupted = {"clean": 0.0, "corrupted": 0.5}
    # trpo never reads the offline data (tests/lab/test_hnpg.py): its corrupted arm is its clean one
    arms = {"clean": args.methods.split(","), "corrupted": args.corrupted_methods.split(",")}
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    results: dict[tuple[str, str], list[dict]] = {}
    for arm in args.arms.split(","):
        knobs = {"H": args.H, "offline_episodes": args.episodes, "corrupted": corrupted[arm]}
        for name in arms[arm]:
            runs = [
                one_run(name, s, knobs, args.budget, args.eval_every) for s in range(args.seeds)
            ]
            results[arm, name] = runs
            print(
                f"  {arm:9s} {name:10s} " + " ".join(f"{r['value']:.2f}" for r in runs), flush=True
            )
    seconds = time.perf_counter() - t0
    print(
        f"\nH = {args.H}, {args.seeds} seeds, {args.budget} on-policy env steps per run, "
        f"{args.episodes} offline episodes; {seconds:.0f} s; load average "
        f"{load0[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end\n"
    )
    print("| arm | method | successes | final greedy return (95% CI) | steps to success | s/run |")
    print("|---|---|---|---|---|---|")
    for (arm, name), runs in results.items():
        values = [r["value"] for r in runs]
        wins = sum(v >= SUCCESS for v in values)
        firsts = [r["first"] for r in runs if r["first"] is not None]
        steps = f"{statistics.median(firsts):.0f} (median of {len(firsts)})" if firsts else "never"
        secs = statistics.fmean(r["seconds"] for r in runs)
        print(
            f"| {arm} | {name} | {wins}/{len(runs)} | {fmt(mean_ci(values))} | {steps} "
            f"| {secs:.1f} |"
        )
    print("\n| arm | paired difference | final return (95% CI) |")
    print("|---|---|---|")
    for arm in args.arms.split(","):
        base = [r["value"] for r in results[arm, "hnpg"]] if (arm, "hnpg") in results else None
        for name in arms[arm]:
            if base is None or name == "hnpg":
                continue
            other = dict(enumerate(r["value"] for r in results[arm, name]))
            diff = paired_difference_ci(dict(enumerate(base)), other)
            print(f"| {arm} | hnpg − {name} | {fmt(diff)} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="write an offline dataset")
    c.add_argument("--H", type=int, default=5)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--episodes", type=int, default=10_000)
    c.add_argument("--corrupted", type=float, default=0.0)
    c.add_argument("--out", default="runs/hnpg/lock.pt")
    a = sub.add_parser("arena", help="hnpg, trpo, fqe_greedy at equal env steps")
    a.add_argument("--H", type=int, default=5)
    a.add_argument("--seeds", type=int, default=5)
    a.add_argument("--budget", type=int, default=30_000, help="on-policy env steps per run")
    a.add_argument("--eval-every", type=int, default=2000)
    a.add_argument("--episodes", type=int, default=10_000, help="offline episodes")
    a.add_argument("--methods", default="hnpg,trpo,fqe_greedy")
    a.add_argument("--corrupted-methods", default="hnpg,fqe_greedy")
    a.add_argument("--arms", default="clean,corrupted")
    a.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(getattr(args, "threads", 1))
    collect(args) if args.command == "collect" else arena(args)


if __name__ == "__main__":
    main()
