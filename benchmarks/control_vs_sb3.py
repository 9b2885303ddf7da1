"""policylab vs Stable-Baselines3's PPO on gymnasium control, side by side in one invocation.

    .venv/bin/python benchmarks/control_vs_sb3.py --seeds 5 --out /tmp/bench-control.md
    .venv/bin/python benchmarks/control_vs_sb3.py --seeds 5 --pendulum   # adds Pendulum-v1

CartPole-v1: for each seed, both frameworks train with the same environment seeds (env i
seeded with seed + i) until the 10-episode evaluation return first reaches 475, or the
step cap (100k). Both are evaluated every `--eval-every` iterations of 8 × 32 steps by the
same function, `policylab.workflows.episodes.evaluate_policy`: 10 fixed-seed episodes,
deterministic actions. The evaluation of the untrained policy (step 0) is done and timed
on both sides but cannot count as solving. Reported per seed: environment steps and
wall-clock seconds from the start of training to the end of the first evaluation that
reached 475, steps/s over that span, and the load average as the run started; then each
figure's median with min–max over seeds and the per-seed ratios' (policylab / SB3).

Pendulum-v1 (`--pendulum`, slow): the evaluation return after 24 iterations of 4 × 1024
steps (98,304 steps) over 3 seeds.

policylab runs its own tuned defaults (`CONTROL_DEFAULTS`); SB3 runs rl-baselines3-zoo's
tuned hyperparameters (`hyperparams/ppo.yml`). Each run is its own subprocess with one
torch thread; runs alternate framework by framework within a seed, so drifting machine
load falls on both. See benchmarks/README.md for what matches and what differs.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FRAMEWORKS = ("policylab", "sb3")
SOLVED = 475.0  # CartPole-v1's reward threshold
EVAL_EPISODES = 10
EVAL_SEED = 10_000  # policylab's ControlConfig.eval_seed default, used for both
# rl-baselines3-zoo hyperparams/ppo.yml ("# Tuned" entries, commit 00128b5); batch_size is
# SB3's default (64) where the zoo leaves it out (Pendulum-v1)
ZOO = {
    "CartPole-v1": {
        "n_envs": 8,
        "n_steps": 32,
        "batch_size": 256,
        "gae_lambda": 0.8,
        "gamma": 0.98,
        "n_epochs": 20,
        "ent_coef": 0.0,
        "learning_rate": ("lin", 1e-3),
        "clip_range": ("lin", 0.2),
    },
    "Pendulum-v1": {
        "n_envs": 4,
        "n_steps": 1024,
        "gae_lambda": 0.95,
        "gamma": 0.9,
        "n_epochs": 10,
        "ent_coef": 0.0,
        "learning_rate": 1e-3,
        "clip_range": 0.2,
        "use_sde": True,
        "sde_sample_freq": 4,
    },
}


# ---- the parent: run each (task, seed, framework) in a subprocess, print the table --------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5, help="CartPole seeds 0 .. N-1")
    p.add_argument("--cap", type=int, default=100_000, help="CartPole step cap")
    p.add_argument(
        "--eval-every", type=int, default=10, help="evaluate every N iterations (8 × 32 steps)"
    )
    p.add_argument("--pendulum", action="store_true", help="also Pendulum-v1 (slow)")
    p.add_argument("--pendulum-seeds", type=int, default=3, help="Pendulum seeds 0 .. N-1")
    p.add_argument("--only", choices=FRAMEWORKS, help="run one framework only")
    p.add_argument("--out", help="also write the Markdown report to this file")
    p.add_argument("--work-dir", help="keep run folders here (default: a temporary folder)")
    p.add_argument("--worker", help=argparse.SUPPRESS)  # internal: path of a run spec
    args = p.parse_args(argv)
    for name in ("seeds", "cap", "eval_every", "pendulum_seeds"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} = {getattr(args, name)} must be >= 1")
    if args.only != "policylab" and _version("stable-baselines3") is None:
        p.error("Stable-Baselines3 is not installed: pip install 'policylab[bench]'")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        return worker(json.loads(Path(args.worker).read_text()))
    python = os.path.relpath(sys.executable)
    python = python if not python.startswith("..") else Path(sys.executable).name
    command = shlex.join([python, *sys.argv]) if argv is None else ""
    args.load = os.getloadavg()[0]
    if args.load > 0.5:
        print(f"warning: the machine is busy (load average {args.load:.1f})", flush=True)
    frameworks = [args.only] if args.only else list(FRAMEWORKS)
    jobs = [("CartPole-v1", s) for s in range(args.seeds)]
    if args.pendulum:
        jobs += [("Pendulum-v1", s) for s in range(args.pendulum_seeds)]
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="control_vs_sb3-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for task, seed in jobs:
            for framework in frameworks:
                spec = {
                    "framework": framework,
                    "task": task,
                    "seed": seed,
                    "cap": args.cap if task == "CartPole-v1" else 100_000,
                    "eval_every": args.eval_every if task == "CartPole-v1" else None,
                }
                r = launch(spec, work / f"{task}-{framework}-s{seed}")
                results.append(r)
                print(f"{task} seed {seed} {framework:>9}: {_line(r)}", flush=True)
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    report = render(args, command, frameworks, results)
    print("\n" + report)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(report)
        print(f"written to {args.out}")


def launch(spec: dict, folder: Path) -> dict:
    """Run one configuration in a fresh Python process; its output goes to folder/log.txt."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = {**spec, "dir": str(folder), "result": str(folder / "result.json")}
    (folder / "spec.json").write_text(json.dumps(spec, indent=1))
    log = folder / "log.txt"
    with open(log, "w") as out:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--worker", str(folder / "spec.json")],
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if proc.returncode != 0 or not Path(spec["result"]).exists():
        tail = "\n".join(log.read_text().splitlines()[-40:])
        who = f"{spec['framework']} {spec['task']} seed {spec['seed']}"
        sys.exit(f"error: the {who} run failed (exit {proc.returncode}); {log}:\n{tail}")
    return {**spec, **json.loads(Path(spec["result"]).read_text())}


def _line(r: dict) -> str:
    if r["task"] != "CartPole-v1":
        return f"return {r['final_return']:.1f} at {r['env_steps']} steps ({r['seconds']:.1f} s)"
    if r["solved_steps"] is None:
        return f"not solved in {r['env_steps']} steps ({r['seconds']:.1f} s)"
    return f"475 at {r['solved_steps']} steps, {r['solved_seconds']:.1f} s"


def _median(values: list[float | None]) -> float | None:
    """Median with an unsolved run counted as slower than any solved one (None if the
    median itself is unsolved)."""
    ranked = sorted(values, key=lambda v: (v is None, v or 0.0))
    if len(ranked) % 2:
        return ranked[len(ranked) // 2]
    low, high = ranked[len(ranked) // 2 - 1], ranked[len(ranked) // 2]
    return None if low is None or high is None else (low + high) / 2


def _spread(values: list[float]) -> str:
    """median (min–max) of values that all exist; "-" when none do."""
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def steps_per_s(r: dict) -> float | None:
    """Environment steps per wall-clock second up to the solving evaluation (evaluations
    included; the whole run when unsolved)."""
    if r["solved_steps"] is not None:
        return r["solved_steps"] / r["solved_seconds"]
    return r["env_steps"] / r["seconds"] if r["seconds"] > 0 else None


def render(args: argparse.Namespace, command: str, frameworks: list[str], results: list) -> str:
    cart = [r for r in results if r["task"] == "CartPole-v1"]
    k = args.eval_every * 256
    lines = [
        "### CartPole-v1: environment steps and wall-clock seconds until the "
        f"{EVAL_EPISODES}-episode evaluation return first reaches {SOLVED:g}",
        "",
        f"Cap {args.cap:,} steps; evaluation every {k:,} steps ({args.eval_every} iterations of "
        f"8 × 32) for both, by the same function (episodes seeded {EVAL_SEED} + i, "
        "deterministic actions); seconds from the start of training to the end of the solving "
        "evaluation, evaluations included; steps/s = steps to 475 / seconds to 475. Runs "
        f"alternate {' '.join(f[:3].upper() for f in frameworks)} per seed, each in its own "
        "process; load = the 1-minute load average as each run started.",
        "",
        "| seed | "
        + " | ".join(f"{f} steps | {f} s | {f} steps/s | {f} load" for f in frameworks)
        + " |",
        "|---" * (1 + 4 * len(frameworks)) + "|",
    ]

    def cell(r: dict | None, key: str, fmt: str) -> str:
        value = None if r is None else r[key]
        return "not solved" if value is None else format(value, fmt)

    seeds = sorted({r["seed"] for r in cart})
    by = {(r["framework"], r["seed"]): r for r in cart}
    for s in seeds:
        cells = []
        for f in frameworks:
            r = by[f, s]
            cells += [
                cell(r, "solved_steps", ","),
                cell(r, "solved_seconds", ".1f"),
                f"{steps_per_s(r):,.0f}",
                f"{r['load']:.1f}",
            ]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    cells = []
    for f in frameworks:
        steps = _median([by[f, s]["solved_steps"] for s in seeds])
        secs = _median([by[f, s]["solved_seconds"] for s in seeds])
        rates = [steps_per_s(by[f, s]) for s in seeds]
        loads = [by[f, s]["load"] for s in seeds]
        cells += [
            f"**{'not solved' if steps is None else format(steps, ',.0f')}**",
            f"**{'not solved' if secs is None else format(secs, '.1f')}**",
            f"**{statistics.median(rates):,.0f}** ({min(rates):,.0f}–{max(rates):,.0f})",
            f"{statistics.median(loads):.1f} ({min(loads):.1f}–{max(loads):.1f})",
        ]
    lines.append("| **median** | " + " | ".join(cells) + " |")
    if set(FRAMEWORKS) <= set(frameworks):
        rate = [steps_per_s(by["policylab", s]) / steps_per_s(by["sb3", s]) for s in seeds]
        both = [s for s in seeds if by["policylab", s]["solved_seconds"] is not None]
        both = [s for s in both if by["sb3", s]["solved_seconds"] is not None]
        time = [by["policylab", s]["solved_seconds"] / by["sb3", s]["solved_seconds"] for s in both]
        lines += [
            "",
            "Per-seed ratios policylab / SB3, median (min–max): steps/s "
            f"{_spread(rate)}; seconds to 475 {_spread(time)} (seeds both solved: {len(both)}).",
        ]
    pend = [r for r in results if r["task"] == "Pendulum-v1"]
    if pend:
        lines += [
            "",
            "### Pendulum-v1: evaluation return after 98,304 steps (24 iterations of 4 × 1024)",
            "",
            "| seed | " + " | ".join(f"{f} return | {f} s" for f in frameworks) + " |",
            "|---" * (1 + 2 * len(frameworks)) + "|",
        ]
        pby = {(r["framework"], r["seed"]): r for r in pend}
        pseeds = sorted({r["seed"] for r in pend})
        for s in pseeds:
            cells = [
                f"{pby[f, s]['final_return']:.1f} | {pby[f, s]['seconds']:.1f}" for f in frameworks
            ]
            lines.append(f"| {s} | " + " | ".join(cells) + " |")
        cells = []
        for f in frameworks:
            mean = statistics.mean(pby[f, s]["final_return"] for s in pseeds)
            secs = statistics.mean(pby[f, s]["seconds"] for s in pseeds)
            cells.append(f"**{mean:.1f}** | {secs:.1f}")
        lines.append("| **mean** | " + " | ".join(cells) + " |")
    versions = ", ".join(
        f"{pkg} {_version(pkg)}"
        for pkg in ("policylab", "torch", "gymnasium", "stable-baselines3")
        if _version(pkg)
    )
    lines += [
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, 1 torch thread per run, "
        f"load average {args.load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end. "
        f"Versions: {versions}.",
        "",
        "```bash",
        command or "(called from Python)",
        "```",
        "",
    ]
    return "\n".join(lines)


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


# ---- the worker: one run in its own process ---------------------------------------------
def worker(spec: dict) -> None:
    import torch

    torch.set_num_threads(1)
    runner = run_policylab if spec["framework"] == "policylab" else run_sb3
    load = os.getloadavg()[0]
    Path(spec["result"]).write_text(json.dumps({**runner(spec), "load": load}, indent=1))


def run_policylab(spec: dict) -> dict:
    from policylab.config import load_control
    from policylab.trainers.control import train

    fields = {
        "task": spec["task"],
        "seed": spec["seed"],
        "run_dir": str(Path(spec["dir"]) / "run"),
        "progress": False,
        "threads": 1,
        "eval_episodes": EVAL_EPISODES,
        "eval_seed": EVAL_SEED,
    }
    if spec["task"] == "CartPole-v1":
        fields.update(total_steps=spec["cap"], eval_every=spec["eval_every"], stop_return=SOLVED)
    else:  # evaluate at the end only: the number reported is the final one
        fields.update(total_steps=spec["cap"], eval_every=0)
    result = train(load_control(None, fields))
    solved = result.solved_at or {}
    return {
        "env_steps": result.env_steps,
        "seconds": result.seconds,
        "final_return": result.evals[-1]["eval/return_mean"],
        "solved_steps": solved.get("env_steps"),
        "solved_seconds": solved.get("seconds"),
        "evals": [(e["env_steps"], e["eval/return_mean"]) for e in result.evals],
    }


class _SB3Actor:
    """`policy.normalize`, `policy.mode(obs)` and `policy.act(obs, deterministic)` for
    `evaluate_policy`, answered by `model.predict` (which applies SB3's own preprocessing)."""

    def __init__(self, model) -> None:
        self.model = model

    def normalize(self, obs):
        return obs

    def mode(self, obs):
        import torch

        actions, _ = self.model.predict(obs.numpy(), deterministic=True)
        return torch.as_tensor(actions)

    def act(self, obs, deterministic: bool = True):
        from types import SimpleNamespace

        import torch

        actions, _ = self.model.predict(obs.numpy(), deterministic=deterministic)
        return SimpleNamespace(actions=torch.as_tensor(actions))


def run_sb3(spec: dict) -> dict:
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    from policylab.workflows.episodes import evaluate_policy

    task, seed = spec["task"], spec["seed"]
    hp = dict(ZOO[task])
    n_envs = hp.pop("n_envs")
    for key in ("learning_rate", "clip_range"):
        if isinstance(hp[key], tuple):  # zoo's lin_X: X · progress_remaining, 1 → 0
            start = hp[key][1]
            hp[key] = lambda progress, start=start: progress * start
    per_iteration = n_envs * hp["n_steps"]
    total = max(1, spec["cap"] // per_iteration) * per_iteration  # whole iterations, as ours
    every = spec["eval_every"] * per_iteration if spec["eval_every"] else None
    evals: list[tuple[int, float]] = []
    state = {"solved": None, "t0": 0.0}

    def evaluation(model, steps: int) -> None:
        score = evaluate_policy(_SB3Actor(model), task, EVAL_EPISODES, EVAL_SEED)
        evals.append((steps, score["eval/return_mean"]))
        seconds = time.perf_counter() - state["t0"]
        if steps > 0 and state["solved"] is None and score["eval/return_mean"] >= SOLVED:
            state["solved"] = {"env_steps": steps, "seconds": seconds}

    class EvalEvery(BaseCallback):
        """Evaluate after every `every` steps' update (at the next rollout's start, i.e.
        after `train()`), and stop once solved."""

        def _on_training_start(self) -> None:
            state["t0"] = time.perf_counter()

        def _on_rollout_start(self) -> None:
            steps = self.model.num_timesteps
            due = steps == 0 or (every and steps % every == 0)  # step 0: as policylab
            if due and state["solved"] is None:
                evaluation(self.model, steps)

        def _on_step(self) -> bool:
            return state["solved"] is None

    env = make_vec_env(task, n_envs=n_envs, seed=seed)
    model = PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **hp)
    model.learn(total_timesteps=total, callback=EvalEvery())
    if state["solved"] is None and (not evals or evals[-1][0] != model.num_timesteps):
        evaluation(model, model.num_timesteps)  # the last iteration, as policylab's trainer
    seconds = time.perf_counter() - state["t0"]
    solved = state["solved"] or {}
    return {
        "env_steps": evals[-1][0],
        "seconds": seconds,
        "final_return": evals[-1][1],
        "solved_steps": solved.get("env_steps"),
        "solved_seconds": solved.get("seconds"),
        "evals": evals,
    }


if __name__ == "__main__":
    main()
