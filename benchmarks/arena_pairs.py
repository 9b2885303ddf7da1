"""Paired comparisons inside a finished arena on any held-out metric the runs logged
(the arena's own table uses eval/greedy_accuracy): per-seed differences of the final
evaluation, mean and 95 % t interval (policylab.arena.stats).

    python benchmarks/arena_pairs.py runs/arena-plan_path_fog lamer gigpo eval/pass@1
    python benchmarks/arena_pairs.py runs/arena-plan_path_fog lamer gigpo gain
        # gain = eval/pass@3 − eval/pass@1 (what attempts after the first add)
    python benchmarks/arena_pairs.py runs/arena-countdown_calc steptool mt_grpo \
        train:agent/invalid_frac
        # train:KEY = the mean of KEY over each run's last 10 training steps
"""

from __future__ import annotations

import sys
from pathlib import Path

from policylab.arena.stats import mean_ci, paired_difference_ci
from policylab.trainers.run import read_metrics

LAST_STEPS = 10


def finals(folder: Path, algo: str, key: str) -> dict[int, float]:
    out = {}
    for run in (folder / "runs").glob(f"{algo}-s*"):
        name, seed = run.name.rsplit("-s", 1)
        if name != algo:
            continue
        if key.startswith("train:"):
            rows = read_metrics(run, kind="train")[-LAST_STEPS:]
            out[int(seed)] = sum(r[key.removeprefix("train:")] for r in rows) / len(rows)
            continue
        last = read_metrics(run, kind="eval")[-1]
        if key == "gain":
            out[int(seed)] = last["eval/pass@3"] - last["eval/pass@1"]
        else:
            out[int(seed)] = last[key]
    return out


def main(folder: str, a: str, b: str, key: str = "eval/greedy_accuracy") -> None:
    first, second = finals(Path(folder), a, key), finals(Path(folder), b, key)
    for name, values in ((a, first), (b, second)):
        i = mean_ci(list(values.values()))
        print(f"{name} {key}: {i.mean:.3f} [{i.low:.3f}, {i.high:.3f}] (n={i.n})")
    i = paired_difference_ci(first, second)
    print(f"{a} − {b}: {i.mean:+.3f} [{i.low:+.3f}, {i.high:+.3f}] (paired, n={i.n})")


if __name__ == "__main__":
    main(*sys.argv[1:])
