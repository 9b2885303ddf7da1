"""Short seeded runs that pin FPO (Pendulum-v1) and the ring methods (lab/ring) across the
issue-17 re-base of FlowPolicy on DiffusionPolicy (branch g17-rebase). Recorded before the
change; after it, every metric reproduces to the last digit except `cost/nfe` where the
count was fixed (dgpo with clip=0: 22 → 18; flow_grpo_sde with epochs=2: 20 → 30).

    PYTHONPATH=src .venv/bin/python benchmarks/g17_rebase_runs.py write FILE
    PYTHONPATH=src .venv/bin/python benchmarks/g17_rebase_runs.py compare \
        benchmarks/results/g17_rebase_before.json

The ring runs read the cached base model of lab/ring (seed 0, 3,000 steps; built on first
use). Numbers are machine-specific (torch version, CPU kernels): record and compare on
one machine."""

from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path

import torch

from policylab.config import ControlConfig, LabConfig
from policylab.trainers.control import train as train_control
from policylab.trainers.run import read_metrics
from policylab.trainers.tabular import train as train_lab

WALL = ("perf/", "time/")


def fpo(folder: Path) -> list[dict]:
    cfg = ControlConfig(
        algo="fpo",
        task="Pendulum-v1",
        total_steps=1024,
        num_envs=2,
        num_steps=128,
        epochs=2,
        minibatch_size=64,
        eval_every=2,
        eval_episodes=2,
        save_every=0,
        torch_threads=1,
        progress=False,
        seed=0,
        run_dir=str(folder),
    )
    train_control(cfg)
    return read_metrics(folder, drop=WALL)


def lab(folder: Path, algo: str, options: dict) -> list[dict]:
    cfg = LabConfig(
        algo=algo,
        task="lab/ring",
        budget=6 * 32,
        eval_every=2,
        save_every=0,
        progress=False,
        seed=0,
        torch_threads=1,
        options=options,
        knobs={"eval_samples": 200},
        run_dir=str(folder),
    )
    train_lab(cfg)
    return read_metrics(folder, drop=WALL)


RUNS = {
    "fpo-pendulum": fpo,
    "dgpo-ring": lambda d: lab(d, "dgpo", {"groups": 4, "switch_ema_ref": 2}),
    "dgpo-ring-emaref-noclip": lambda d: lab(
        d, "dgpo", {"groups": 4, "switch_ema_ref": 2, "use_ema_ref": True, "clip": 0.0}
    ),
    "dgpo-ring-noclip": lambda d: lab(d, "dgpo", {"groups": 4, "clip": 0.0}),
    "flow_grpo-ring": lambda d: lab(d, "flow_grpo_sde", {"groups": 4, "epochs": 2}),
}


def same(a, b) -> bool:
    return a == b or (
        isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    )


def main(mode: str, file: Path) -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        runs = {name: fn(Path(tmp) / name) for name, fn in RUNS.items()}
    if mode == "write":
        file.write_text(json.dumps(runs, indent=1))
        return
    recorded = json.loads(file.read_text())
    for name, rows in runs.items():
        old = recorded[name]
        assert len(rows) == len(old), (name, len(rows), len(old))
        diffs = sorted(
            {
                k
                for a, b in zip(old, rows, strict=True)
                for k in set(a) | set(b)
                if not same(a.get(k), b.get(k))
            }
        )
        verdict = "identical to the last digit" if not diffs else f"differs in {diffs}"
        print(f"{name}: {len(rows)} rows, {len({k for r in old for k in r})} columns, {verdict}")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
