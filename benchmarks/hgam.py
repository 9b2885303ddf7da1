"""HGAM against MADDPG (MLP actors on padded observations) and the scripted reference on
lab/uav_coverage, at the training counts and at held-out counts without retraining
(papers/seed_control_theory.md §12.2; Hu et al., arXiv:2501.14488).

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/hgam.py --seeds 5 --budget 12000

Each seed trains both learners with the same seed (the same warm-up actions' generator
state, the same training episodes drawn at reset) for `--budget` env steps (the spec's
5·10⁵ is out of reach on a shared 2-core CPU), then scores the final team on
`--episodes` fixed episodes per count setting: training counts (3 mission UAVs, 30 PoIs)
and the held-out (2, 20) and (5, 50), where mission actor k mod 3 flies UAV k. Metrics:
coverage, Jain fairness over per-PoI collected fractions, charging efficiency (energy
charged / mission energy spent). The claim holds if HGAM beats MADDPG at the training
counts and loses less coverage at held-out counts; its margin over the script is reported.
Intervals: Student-t 95 % over seeds; differences paired by seed."""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor

import torch

from policylab.arena.stats import mean_ci, paired_difference_ci
from policylab.envs.uav_coverage import UAVConfig
from policylab.lab.catalogue import build, lab_methods
from policylab.lab.uav_coverage import EVAL_SEED, HELD_OUT, ScriptPolicy, evaluate

COUNTS = ((3, 30), *HELD_OUT)
LEARNERS = ("maddpg", "hgam_provisional")


def run(name: str, seed: int, budget: int, episodes: int, overrides: dict) -> dict:
    """Train `name` for `budget` env steps on seed `seed`; its metrics per count setting."""
    torch.set_num_threads(1)
    started, cpu = time.perf_counter(), time.process_time()
    problem = build("lab/uav_coverage", seed)
    if name == "uav_script":
        team = ScriptPolicy()
    else:
        method = lab_methods.get(name)
        options = method.build_options(overrides)
        g = torch.Generator().manual_seed(seed)
        state, spent = method.init(problem, options, g), 0
        while spent < budget:
            state, metrics = method.step(problem, state, options, g)
            spent += metrics["cost"]
        team = method.policy(problem, state)
    scores = {
        f"{m}x{p}": evaluate(team, UAVConfig(n_mission=m, n_poi=p), episodes, seed + EVAL_SEED)
        for m, p in COUNTS
    }
    return {
        "name": name,
        "seed": seed,
        "scores": scores,
        "seconds": time.perf_counter() - started,
        "cpu_s": time.process_time() - cpu,
    }


def fmt(iv) -> str:
    return f"{iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget", type=int, default=12_000, help="env steps per learner")
    parser.add_argument("--episodes", type=int, default=16, help="eval episodes per count")
    parser.add_argument("--jobs", type=int, default=1, help="processes")
    parser.add_argument("--options", default="{}", help="learner options (json), both learners")
    parser.add_argument("--out", default="", help="write the raw results (json) here")
    args = parser.parse_args()
    load_before, started = os.getloadavg(), time.perf_counter()
    jobs = [(n, s) for s in range(args.seeds) for n in (*LEARNERS, "uav_script")]
    with ProcessPoolExecutor(args.jobs) as pool:
        overrides = json.loads(args.options)
        futures = [pool.submit(run, n, s, args.budget, args.episodes, overrides) for n, s in jobs]
        results = [f.result() for f in futures]
    by = {(r["name"], r["seed"]): r for r in results}
    names = (*LEARNERS, "uav_script")
    print(
        f"# lab/uav_coverage, {args.seeds} seeds, {args.budget} env steps per learner, "
        f"{args.episodes} eval episodes per count; learner options {args.options}"
    )
    for metric in ("coverage", "jain", "charge_eff"):
        print(f"\n## {metric} (mean [95 % CI] over seeds)\n")
        print("| counts (mission, PoIs) | " + " | ".join(names) + " | HGAM − MADDPG (paired) |")
        print("|---" * (len(names) + 2) + "|")
        for m, p in COUNTS:
            key = f"{m}x{p}"
            vals = {
                n: {s: by[n, s]["scores"][key][metric] for s in range(args.seeds)} for n in names
            }
            cells = [fmt(mean_ci(list(vals[n].values()))) for n in names]
            diff = paired_difference_ci(vals["hgam_provisional"], vals["maddpg"])
            print(
                f"| ({m}, {p}){' train' if key == '3x30' else ' held out'} | "
                + " | ".join(cells)
                + f" | {fmt(diff)} |"
            )
    print(
        "\n## coverage relative to the script at the same counts and seed: held out − "
        "training (paired by seed; 0 = no loss)\n"
    )
    print("| counts | maddpg | hgam_provisional | HGAM − MADDPG |")
    print("|---|---|---|---|")

    def rel(n: str, s: int, key: str) -> float:
        script = by["uav_script", s]["scores"][key]["coverage"]
        return by[n, s]["scores"][key]["coverage"] / script

    for m, p in HELD_OUT:
        drop = {
            n: {s: rel(n, s, f"{m}x{p}") - rel(n, s, "3x30") for s in range(args.seeds)}
            for n in LEARNERS
        }
        d = paired_difference_ci(drop["hgam_provisional"], drop["maddpg"])
        print(
            f"| ({m}, {p}) | {fmt(mean_ci(list(drop['maddpg'].values())))} | "
            f"{fmt(mean_ci(list(drop['hgam_provisional'].values())))} | {fmt(d)} |"
        )
    cpu = {n: sum(by[n, s]["cpu_s"] for s in range(args.seeds)) for n in names}
    print(
        "\nCPU seconds per method (all seeds): "
        f"{json.dumps({k: round(v) for k, v in cpu.items()})}; "
        f"wall {time.perf_counter() - started:.0f} s; os.getloadavg() before "
        f"{tuple(round(x, 2) for x in load_before)}, after "
        f"{tuple(round(x, 2) for x in os.getloadavg())}"
    )
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
