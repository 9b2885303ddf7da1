"""Pendulum-v1 with gSDE: policylab's `use_sde=true` beside Stable-Baselines3's PPO with
rl-baselines3-zoo's tuned Pendulum-v1 entry (`use_sde: True, sde_sample_freq: 4`), same
seeds, one run at a time, alternating.

    .venv/bin/python benchmarks/pendulum_gsde.py --seeds 5 --out /tmp/pendulum-gsde.md

Per seed: the 10-episode evaluation return (episodes seeded 10,000 + i, deterministic
actions, the same function `policylab.workflows.episodes.evaluate_policy` for both) after
24 iterations of 4 × 1024 steps (98,304 steps). Columns: policylab with `use_sde=true`
(the zoo's setting, `config.CONTROL_SDE_DEFAULTS`), SB3 with the zoo's setting, and
(unless --no-baseline) policylab's default Gaussian PPO on Pendulum for reference. The
order of the frameworks rotates from seed to seed so drifting machine load falls on all;
each run is its own subprocess with one torch thread. Means come with a 95 % confidence
interval (Student's t over seeds).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from control_vs_sb3 import EVAL_EPISODES, EVAL_SEED, _version, run_sb3  # noqa: E402

TASK = "Pendulum-v1"
# the zoo's n_timesteps: both run 24 whole iterations = 98,304 steps (PENDULUM_GSDE_STEPS
# shortens it to try the script out)
STEPS = int(os.environ.get("PENDULUM_GSDE_STEPS", 100_000))
ITERATION = 4 * 1024
# Student's t, two-sided 95 %, by degrees of freedom (n − 1)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5, help="seeds 0 .. N-1 (2 to 10)")
    p.add_argument("--no-baseline", action="store_true", help="skip policylab without gSDE")
    p.add_argument("--out", help="also write the Markdown report to this file")
    p.add_argument("--work-dir", help="keep run folders here (default: a temporary folder)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not 2 <= args.seeds <= 10:
        p.error(f"--seeds = {args.seeds} must be 2 .. 10 (a confidence interval needs two)")
    if _version("stable-baselines3") is None:
        p.error("Stable-Baselines3 is not installed: pip install 'policylab[bench]'")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        return worker(json.loads(Path(args.worker).read_text()))
    command = shlex.join(["python", *sys.argv]) if argv is None else "(called from Python)"
    args.load = os.getloadavg()
    runners = ["policylab-gsde", "sb3-gsde"] + ([] if args.no_baseline else ["policylab-ppo"])
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="pendulum_gsde-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[tuple[str, int], dict] = {}
    try:
        for seed in range(args.seeds):
            k = seed % len(runners)
            for runner in runners[k:] + runners[:k]:  # rotate the order seed by seed
                spec = {"runner": runner, "seed": seed}
                r = launch(spec, work / f"{runner}-s{seed}")
                results[runner, seed] = r
                print(
                    f"seed {seed} {runner:>15}: return {r['final_return']:.1f} at "
                    f"{r['env_steps']} steps ({r['seconds']:.1f} s, load {r['load']:.1f})",
                    flush=True,
                )
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    report = render(args, command, runners, results)
    print("\n" + report)
    if args.out:
        Path(args.out).write_text(report)


def launch(spec: dict, folder: Path) -> dict:
    """One run in a fresh Python process; its output goes to folder/log.txt."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = {**spec, "dir": str(folder), "result": str(folder / "result.json")}
    (folder / "spec.json").write_text(json.dumps(spec))
    with open(folder / "log.txt", "w") as out:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--worker", str(folder / "spec.json")],
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if proc.returncode != 0 or not Path(spec["result"]).exists():
        tail = "\n".join((folder / "log.txt").read_text().splitlines()[-30:])
        sys.exit(f"error: {spec['runner']} seed {spec['seed']} failed:\n{tail}")
    return json.loads(Path(spec["result"]).read_text())


def mean_ci(values: list[float]) -> tuple[float, float]:
    """(mean, half-width of its 95 % Student-t interval)."""
    n = len(values)
    return statistics.mean(values), T95[n - 1] * statistics.stdev(values) / n**0.5


def render(args, command: str, runners: list[str], results: dict) -> str:
    seeds = range(args.seeds)
    lines = [
        f"### {TASK}: evaluation return after {STEPS // ITERATION * ITERATION:,} steps "
        f"({STEPS // ITERATION} iterations of 4 × 1024)",
        "",
        f"{EVAL_EPISODES} evaluation episodes seeded {EVAL_SEED} + i, deterministic actions, "
        "the same evaluation function for all; runs rotate order per seed, each in its own "
        "process with one torch thread; load = the 1-minute load average as the run started.",
        "",
        "| seed | " + " | ".join(f"{r} return | {r} s | load" for r in runners) + " |",
        "|---" * (1 + 3 * len(runners)) + "|",
    ]
    for s in seeds:
        cells = [
            f"{results[r, s]['final_return']:.1f} | {results[r, s]['seconds']:.1f} | "
            f"{results[r, s]['load']:.1f}"
            for r in runners
        ]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    cells = []
    for r in runners:
        mean, half = mean_ci([results[r, s]["final_return"] for s in seeds])
        secs = statistics.mean(results[r, s]["seconds"] for s in seeds)
        cells.append(f"**{mean:.1f} ± {half:.1f}** | {secs:.1f} | ")
    lines.append("| **mean ± 95 % CI** | " + " | ".join(cells) + " |")
    versions = ", ".join(
        f"{pkg} {_version(pkg)}" for pkg in ("torch", "gymnasium", "stable-baselines3")
    )
    lines += [
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs; load average (1, 5, 15 min) "
        f"{tuple(round(x, 2) for x in args.load)} at the start, "
        f"{tuple(round(x, 2) for x in os.getloadavg())} at the end. Versions: {versions}.",
        "",
        "```bash",
        command,
        "```",
        "",
    ]
    return "\n".join(lines)


def worker(spec: dict) -> None:
    import torch

    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    if spec["runner"] == "sb3-gsde":
        out = run_sb3({"task": TASK, "seed": spec["seed"], "cap": STEPS, "eval_every": None})
    else:
        out = run_policylab(spec, use_sde=spec["runner"] == "policylab-gsde")
    Path(spec["result"]).write_text(json.dumps({**out, "load": load}))


def run_policylab(spec: dict, *, use_sde: bool) -> dict:
    from policylab.config import load_control
    from policylab.trainers.control import train

    fields = {
        "task": TASK,
        "seed": spec["seed"],
        "run_dir": str(Path(spec["dir"]) / "run"),
        "progress": False,
        "threads": 1,
        "report_to": [],
        "eval_episodes": EVAL_EPISODES,
        "eval_seed": EVAL_SEED,
        "total_steps": STEPS,
        "eval_every": 0,  # the number reported is the final evaluation
    }
    if use_sde:
        fields["use_sde"] = True  # brings the zoo's sde_sample_freq 4, no obs normaliser
    result = train(load_control(None, fields))
    return {
        "env_steps": result.env_steps,
        "seconds": result.seconds,
        "final_return": result.evals[-1]["eval/return_mean"],
    }


if __name__ == "__main__":
    main()
