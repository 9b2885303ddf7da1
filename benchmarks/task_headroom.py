"""Headroom of task settings for the shipped tiny model: is there signal (greedy accuracy
well above 0) and room to improve (well below 1)? And does GRPO move it?

    # 1. the tiny model's held-out greedy accuracy on each candidate setting
    python benchmarks/task_headroom.py probe --eval-n 200
    # 2. GRPO before/after on the presets: 80 steps × 16 prompts × 8 samples = 10,240
    python benchmarks/task_headroom.py grpo --tasks arithmetic_mixed,countdown25,sudoku4_hard \
        --seeds 0,1 --steps 80 --lr 3e-5 --eval-n 200

Every number is the trainer's own held-out evaluation (`policylab.evaluate.evaluate`: the
first `--eval-n` test prompts of `eval_seed` 0, greedy, max_new_tokens 24), so `probe`'s
accuracy equals `grpo`'s start. torch runs on one thread (`--threads`).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from policylab import tasks

# (base task, knobs): the defaults, each preset, and settings measured and rejected
CANDIDATES: list[tuple[str, dict]] = [
    ("arithmetic", {}),
    ("arithmetic", {"ops": "+-"}),
    ("arithmetic", {"ops": "+*"}),
    ("arithmetic", {"ops": "+-*"}),
    ("arithmetic", {"n_operands": 3}),
    ("arithmetic", {"n_operands": 3, "ops": "+-"}),
    ("arithmetic", {"digits": 3}),
    ("countdown", {}),
    ("countdown", {"max_number": 10}),
    ("countdown", {"max_number": 25}),
    ("countdown", {"max_number": 30}),
    ("countdown", {"max_target": 200}),
    ("countdown", {"n_numbers": 4}),
    ("countdown", {"n_numbers": 5}),
    ("sudoku4", {}),
    ("sudoku4", {"blanks": 12}),
    ("plan_path", {}),
    ("plan_path", {"size": 6}),
    ("plan_path", {"size": 6, "wall_prob": 0.15}),
]


def knobs_text(knobs: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in knobs.items()) or "(defaults)"


def probe(args: argparse.Namespace) -> list[str]:
    from policylab.evaluate import evaluate
    from policylab.models import load_model

    model, tokenizer = load_model(args.model)
    rows = ["| task | knobs | greedy accuracy | sampled reward (T=1) |", "|---|---|---|---|"]
    for name, knobs in CANDIDATES:
        result = evaluate(model, tokenizer, tasks.get(name, **knobs), n=args.eval_n, seed=0)
        rows.append(
            f"| {name} | {knobs_text(knobs)} | {result.greedy_accuracy:.3f} | "
            f"{result.sampled_reward:.3f} |"
        )
        print(rows[-1], flush=True)
    return rows


def grpo(args: argparse.Namespace) -> list[str]:
    from policylab.routing import run_config, train

    seeds = [int(s) for s in args.seeds.split(",")]
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="task-headroom-"))
    budget = args.steps * args.prompts * args.samples
    per_seed = " | ".join(f"end s{s}" for s in seeds)
    rows = [
        f"| task | start | {per_seed} | end mean | samples | s / run |",
        "|---|---|" + "---|" * len(seeds) + "---|---|---|",
    ]
    for name in args.tasks.split(","):
        start, ends, seconds = None, [], []
        for seed in seeds:
            cfg = run_config(
                None,
                {
                    "algo": "grpo",
                    "task": name,
                    "model": args.model,
                    "seed": seed,
                    "lr": args.lr,
                    "steps": args.steps,
                    "prompts_per_step": args.prompts,
                    "samples_per_prompt": args.samples,
                    "max_samples": budget,
                    "eval_n": args.eval_n,
                    "eval_every": 0,
                    "save_every": 0,
                    "progress": False,
                    "run_dir": str(work / f"grpo-{name}-s{seed}"),
                },
            )
            t0 = time.time()
            result = train(cfg)
            seconds.append(time.time() - t0)
            start = result.before["eval/greedy_accuracy"]  # same model, same prompts
            ends.append(result.after["eval/greedy_accuracy"])
            print(f"{name} seed {seed}: {start:.3f} -> {ends[-1]:.3f}", flush=True)
        cells = " | ".join(f"{e:.3f}" for e in ends)
        rows.append(
            f"| {name} | {start:.3f} | {cells} | {sum(ends) / len(ends):.3f} | {budget} | "
            f"{sum(seconds) / len(seconds):.0f} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["probe", "grpo"])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--eval-n", type=int, default=200)
    parser.add_argument("--tasks", default=",".join(tasks.presets()), help="grpo: tasks")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--work-dir", default=None, help="grpo: keep the run folders here")
    parser.add_argument("--out", default=None, help="also write the table (Markdown) here")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = probe(args) if args.mode == "probe" else grpo(args)
    table = "\n".join([*rows, "", f"settings: {json.dumps(vars(args))}"])
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")


if __name__ == "__main__":
    main()
