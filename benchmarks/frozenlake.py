"""FrozenLake-v1 (slippery 4×4) with the control trainer: evaluation success rate (100
fixed-seed episodes, the policy's mode) after `total_steps`, per seed and setting, the
settings alternated seed by seed on one machine.

    PYTHONPATH=src OMP_NUM_THREADS=1 .venv/bin/python benchmarks/frozenlake.py \
        --seeds 0 1 2 3 4 --total-steps 100000 --setting default --setting ent_coef=0.01

Each `--setting` is a list of comma-separated key=value fields over the task's defaults
(`default` = none). Prints one line per run and a mean with a 95 % t-interval per setting."""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile

import yaml

from policylab.config import load_control
from policylab.trainers.control import train

T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}


def fields_of(setting: str) -> dict:
    if setting == "default":
        return {}
    return {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in setting.split(","))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--total-steps", type=int, default=100_000)
    parser.add_argument("--setting", action="append", default=None)
    args = parser.parse_args()
    settings = args.setting or ["default"]
    scores: dict[str, list[float]] = {s: [] for s in settings}
    print(f"load before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for setting in settings:
                fields = {"task": "FrozenLake-v1", "seed": seed, "total_steps": args.total_steps}
                cfg = load_control(None, {**fields, **fields_of(setting)})
                cfg.run_dir = f"{tmp}/{setting}-{seed}"
                cfg.progress, cfg.report_to = False, []
                result = train(cfg)
                score = result.evals[-1]["eval/return_mean"]
                scores[setting].append(score)
                print(f"{setting} seed {seed}: success {score:.2f} ({result.seconds:.1f} s)")
    print(f"load after: {os.getloadavg()}")
    for setting, values in scores.items():
        mean = statistics.fmean(values)
        half = 0.0
        if len(values) > 1:
            half = T95[len(values) - 1] * statistics.stdev(values) / math.sqrt(len(values))
        print(f"{setting}: mean success {mean:.3f} ± {half:.3f} (95 %, {len(values)} seeds)")


if __name__ == "__main__":
    main()
