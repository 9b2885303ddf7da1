"""Thread settings idle and under load: `threads=auto` vs torch's default count vs 1.

    .venv/bin/python benchmarks/threads_under_load.py --repeats 3 --out /tmp/threads.md

Two short fixed trainings, each run in its own process so torch starts fresh: the
language-model trainer on the shipped tiny model (`--lm-steps` GRPO steps, 4 prompts × 4
samples, 16 new tokens) and the control trainer on CartPole-v1 (`--cartpole-iterations`
iterations of 8 × 32 steps). Each runs with `threads` = auto (trainers/run.py
`auto_threads`), 0 (torch's own count) and 1, alternating in that order, `--repeats`
times, first on the machine as it is ("as is": other people's processes included), then
with `--busy` busy-loop processes this script starts itself ("+N busy"). Timed: each step
from the end of the previous one (a callback), the first step left out (warm-up); the
figure per run is its median step time. Reported: the median over repeats with min–max,
and the 1-minute load average as each run started.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SETTINGS = ("auto", 0, 1)  # the trainers' `threads`: auto, torch's own count, one
WORKLOADS = ("lm", "cartpole")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=2, help="runs per setting and condition")
    p.add_argument("--busy", type=int, default=4, help="busy-loop processes for the load")
    p.add_argument("--lm-steps", type=int, default=10)
    p.add_argument("--cartpole-iterations", type=int, default=10)
    p.add_argument("--only", choices=WORKLOADS, help="one workload only")
    p.add_argument(
        "--conditions", choices=("both", "as-is", "busy"), default="both",
        help="the machine as it is, with the busy loops, or both (default)",
    )  # fmt: skip
    p.add_argument("--out", help="also write the Markdown report here")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for name in ("repeats", "lm_steps", "cartpole_iterations"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} = {getattr(args, name)} must be >= 1")
    if args.busy < 0:
        p.error(f"--busy = {args.busy} must be >= 0")
    return args


def _spin() -> None:
    while True:
        pass


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        return worker(json.loads(args.worker))
    command = shlex.join([Path(sys.executable).name, *sys.argv]) if argv is None else ""
    workloads = [args.only] if args.only else list(WORKLOADS)
    conditions = []
    if args.conditions in ("both", "as-is"):
        conditions.append("as is")
    if args.conditions in ("both", "busy") and args.busy:
        conditions.append(f"+{args.busy} busy")
    if not conditions:
        sys.exit("error: --conditions busy needs --busy >= 1")
    results = []
    for condition in conditions:
        spinners = []
        if condition != "as is":
            spinners = [
                multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)
            ]
            for s in spinners:
                s.start()
            time.sleep(5)  # let the load average see them
        try:
            for _ in range(args.repeats):
                for workload in workloads:
                    for threads in SETTINGS:
                        spec = {
                            "workload": workload,
                            "threads": threads,
                            "lm_steps": args.lm_steps,
                            "iterations": args.cartpole_iterations,
                        }
                        r = {**spec, **launch(spec), "condition": condition}
                        results.append(r)
                        print(
                            f"{condition:>8} {workload:>8} threads={threads!s:>4} "
                            f"({r['torch_threads']} torch): {r['step_s']:.3f} s/step, "
                            f"load {r['load']:.1f}",
                            flush=True,
                        )
        finally:
            for s in spinners:
                s.terminate()
                s.join()
    report = render(args, command, conditions, workloads, results)
    print("\n" + report)
    if args.out:
        Path(args.out).write_text(report)


def launch(spec: dict) -> dict:
    with tempfile.TemporaryDirectory(prefix="threads-") as folder:
        spec = {**spec, "dir": folder}
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
            capture_output=True,
            text=True,
            check=False,
        )
    if proc.returncode != 0:
        sys.exit(f"error: the run {spec} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def render(args, command: str, conditions: list[str], workloads: list[str], results) -> str:
    def spread(values: list[float]) -> str:
        return f"{statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f})"

    unit = {"lm": "s per GRPO step (tiny model)", "cartpole": "s per iteration (8 × 32 steps)"}
    lines = [
        "| workload | condition | threads | torch threads | median (min–max) | load |",
        "|---|---|---|---|---|---|",
    ]
    for workload in workloads:
        for condition in conditions:
            for threads in SETTINGS:
                rows = [
                    r
                    for r in results
                    if (r["workload"], r["condition"], r["threads"])
                    == (workload, condition, threads)
                ]
                counts = sorted({r["torch_threads"] for r in rows})
                loads = [r["load"] for r in rows]
                name = {0: "0 (torch's)"}.get(threads, str(threads))
                lines.append(
                    f"| {unit[workload]} | {condition} | {name} | "
                    f"{'/'.join(map(str, counts))} | {spread([r['step_s'] for r in rows])} | "
                    f"{statistics.median(loads):.1f} ({min(loads):.1f}–{max(loads):.1f}) |"
                )
    import torch

    lines += [
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
        f"(its own count here: {torch.get_num_threads()}); {args.repeats} runs per cell, "
        "alternating auto / 0 / 1; load = 1-minute load average as each run started.",
        "",
        "```bash",
        command or "(called from Python)",
        "```",
        "",
    ]
    return "\n".join(lines)


# ---- the worker: one short training in its own process ------------------------------------
def worker(spec: dict) -> None:
    import torch

    from policylab.callbacks import Callback

    class Clock(Callback):
        def __init__(self) -> None:
            self.marks = [time.perf_counter()]
            self.threads = 0

        def on_step(self, step, metrics) -> None:
            self.marks.append(time.perf_counter())
            self.threads = torch.get_num_threads()

    clock, load = Clock(), os.getloadavg()[0]
    common = {"threads": spec["threads"], "progress": False, "report_to": [], "seed": 0}
    if spec["workload"] == "lm":
        from policylab.config import TrainConfig
        from policylab.trainers.llm import train

        cfg = TrainConfig(
            model="tiny",
            algo="grpo",
            task="arithmetic",
            steps=spec["lm_steps"],
            prompts_per_step=4,
            samples_per_prompt=4,
            max_new_tokens=16,
            train_pool=64,
            eval_n=8,
            eval_every=0,
            save_every=0,
            run_dir=str(Path(spec["dir"]) / "run"),
            **common,
        )
    else:
        from policylab.config import load_control
        from policylab.trainers.control import train

        fields = {
            "task": "CartPole-v1",
            "total_steps": 256 * spec["iterations"],
            "eval_every": 0,
            "eval_episodes": 1,
            "run_dir": str(Path(spec["dir"]) / "run"),
            **common,
        }
        cfg = load_control(None, fields)
    # the clock starts at the first step's end: setup and the step-0 evaluation left out
    train(cfg, callbacks=[clock])
    steps = [b - a for a, b in zip(clock.marks[1:], clock.marks[2:], strict=False)]
    print(
        json.dumps(
            {"step_s": statistics.median(steps), "torch_threads": clock.threads, "load": load}
        )
    )


if __name__ == "__main__":
    main()
