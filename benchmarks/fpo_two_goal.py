"""FPO's flow policy against a Gaussian PPO policy on the two-goal task: does the policy
keep both modes? (issue #5; papers/seed_llm_algorithms.md §16; envs/two_goal.py)

    .venv/bin/python benchmarks/fpo_two_goal.py --seeds 3 --out /tmp/two-goal.md

Each (algorithm, seed) is an ordinary `policylab train` run on `policylab/TwoGoal-v0`; the
trained policy is then *sampled* (not its mode) for 1000 episodes and the fraction that
lands within 0.3 of each goal is reported. Both goals pay the same, so a policy that keeps
both modes reaches each about half the time; a collapsed one reaches one goal only.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from policylab.config import load_control
from policylab.envs import ID_TWO_GOAL, goal_fractions
from policylab.trainers.control import load_policy, train

# the same budget and loop for both; [ours] settings for a one-step task
COMMON = {
    "task": ID_TWO_GOAL,
    "num_envs": 8,
    "num_steps": 64,
    "minibatch_size": 128,
    "epochs": 10,
    "lr": 3e-4,
    "schedule": "constant",
    "gamma": 0.99,
    "lam": 0.95,
    "eval_every": 10,
    "progress": False,
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=51_200, help="environment steps per run")
    p.add_argument("--algos", default="ppo,fpo")
    p.add_argument("--work-dir", default="runs/two-goal")
    p.add_argument("--out", default=None, help="also write the Markdown table here")
    args = p.parse_args()
    rows = []
    for algo in args.algos.split(","):
        for seed in range(args.seeds):
            run_dir = f"{args.work_dir}/{algo}-s{seed}"
            overrides = dict(COMMON, algo=algo, seed=seed, total_steps=args.steps)
            cfg = load_control(None, {**overrides, "run_dir": run_dir})
            started = time.perf_counter()
            result = train(cfg)
            seconds = time.perf_counter() - started
            fractions = goal_fractions(load_policy(result.run_dir), 1000, seed=seed)
            rows.append((algo, seed, fractions, seconds))
            print(algo, seed, {k: round(v, 3) for k, v in fractions.items()}, f"{seconds:.0f}s")
    lines = [
        "| algorithm | seed | left goal | right goal | neither | mean reward | s |",
        "|---|---|---|---|---|---|---|",
    ]
    for algo, seed, f, s in rows:
        lines.append(
            f"| {algo} | {seed} | {f['goal_left']:.3f} | {f['goal_right']:.3f} | "
            f"{f['goal_none']:.3f} | {f['reward_mean']:.3f} | {s:.0f} |"
        )
    for algo in args.algos.split(","):
        minority = [min(f["goal_left"], f["goal_right"]) for a, _, f, _ in rows if a == algo]
        lines.append(
            f"\n{algo}: median share of the less-visited goal {statistics.median(minority):.3f}"
        )
    table = "\n".join(lines)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")


if __name__ == "__main__":
    main()
