"""AC-Flow against ORW-CFM-W2 and its two ablations on the 2-D ring, equal generated samples
(papers/seed_generative.md G3.2; Fan et al., arXiv:2510.18072, inferred → ac_flow_provisional).

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/ac_flow_ring.py --seeds 10
    # or score the finished runs of `policylab arena --task lab/ring --algos ... --out DIR`:
    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/ac_flow_ring.py --arena DIR

Arms: `orw_cfm_w2` (code defaults), `ac_flow_provisional` (defaults: c_A = 2, warm-up 30
steps), `...@clip=inf` (no advantage clip) and `...@warmup=0` (the critic weights the actor
from the first step). Every seed starts all arms from the same cached base model (lab/ring,
base_seed 0), paired. Budget 38,400 generated samples per run (300 steps × 128, the spec's).
Curve: `oracle/value` every 10 steps; late reward = mean of the last 5 evaluations (the last
50 steps). Final metrics on a held-out noise (2,000 draws): reward, `div/mode_entropy`
(ln 8 = 2.079), `div/good_mode_entropy` (ln 3 = 1.099), `fid/on_manifold`. A run collapses
when its good-mode entropy is < 0.5·ln 3. Criterion (G3.2): AC-Flow's late reward ≥ ORW's
(paired CI), good-mode entropy and held-out reward not lower, and each ablation collapses
in more seeds than the full method. Student-t intervals over seeds; Wilson intervals for
collapse fractions."""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import torch
import yaml

from policylab.arena.stats import mean_ci, paired_difference_ci
from policylab.lab.catalogue import build, lab_methods
from policylab.rewards.generated import ring_metrics
from policylab.trainers.run import latest_checkpoint, read_metrics
from policylab.trainers.run_safety import load_state

ARMS = {
    "orw_cfm_w2": ("orw_cfm_w2", {}),
    "ac_flow_provisional": ("ac_flow_provisional", {}),
    "ac_flow_provisional@clip=inf": ("ac_flow_provisional", {"clip": math.inf}),
    "ac_flow_provisional@warmup=0": ("ac_flow_provisional", {"warmup": 0}),
}
HELDOUT_SEED = 777_777
COLLAPSE = 0.5 * math.log(3)
COLS = ["reward/mean", "div/mode_entropy", "div/good_mode_entropy", "fid/on_manifold"]


def run(arm: str, seed: int, budget: int, eval_every: int) -> dict:
    algo, overrides = ARMS[arm]
    problem = build("lab/ring", seed)
    method = lab_methods.get(algo)
    options = method.build_options(overrides)
    g = torch.Generator().manual_seed(seed)
    state, spent, step = method.init(problem, options, g), 0, 0
    curve = [(0, problem.value(method.policy(problem, state)))]
    t0 = time.perf_counter()
    while spent < budget:
        state, metrics = method.step(problem, state, options, g)
        spent, step = spent + int(metrics["cost"]), step + 1
        if step % eval_every == 0 or spent >= budget:
            curve.append((spent, problem.value(method.policy(problem, state))))
    seconds = time.perf_counter() - t0
    late = sum(v for _, v in curve[-5:]) / len(curve[-5:])
    final = heldout_metrics(method.policy(problem, state), seed)
    return {"curve": curve, "late": late, "seconds": seconds, "final": final}


def heldout_metrics(policy, seed: int) -> dict[str, float]:
    heldout = torch.randn(2000, 2, generator=torch.Generator().manual_seed(HELDOUT_SEED + seed))
    with torch.no_grad():
        return ring_metrics(policy.sample("ode_euler", 2000, x_noise=heldout).sample)


def from_arena(folders: list[Path]) -> dict[str, dict[int, dict]]:
    """The same records from arenas' finished runs (arena_done.json): the eval curve
    from metrics.jsonl, the final policy restored from the last checkpoint."""
    runs: dict[str, dict[int, dict]] = {}
    for run_dir in sorted(d for folder in folders for d in (folder / "runs").iterdir()):
        if not (run_dir / "arena_done.json").is_file():
            continue
        cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
        label = cfg["algo"] + "".join(f"@{k}={v}" for k, v in cfg["options"].items())
        method = lab_methods.get(cfg["algo"])
        options = method.build_options(cfg["options"])
        problem = build(cfg["task"], cfg["seed"], **cfg["knobs"])
        saved = load_state(latest_checkpoint(run_dir) / "state.pt")["method"]
        policy = method.policy(problem, method.restore(problem, options, saved))
        curve = [(r["budget/spent"], r["oracle/value"]) for r in read_metrics(run_dir, kind="eval")]
        done = json.loads((run_dir / "arena_done.json").read_text())
        late_rows = read_metrics(run_dir, kind="train")[-100:]  # the last 100 steps
        diag = {
            k: sum(r[k] for r in late_rows) / len(late_rows)
            for k in ("critic/ev", "acflow/clipped", "acflow/w_mean", "orw/w_mean")
            if late_rows and k in late_rows[0]
        }
        runs.setdefault(label, {})[cfg["seed"]] = {
            "curve": curve,
            "late": sum(v for _, v in curve[-5:]) / len(curve[-5:]),
            "seconds": done["seconds"],
            "final": heldout_metrics(policy, cfg["seed"]),
            "diagnostics": diag,
        }
    return runs


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def fmt(i) -> str:
    return f"{i.mean:.3f} [{i.low:.3f}, {i.high:.3f}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--budget", type=int, default=38_400, help="generated samples per run")
    p.add_argument("--eval-every", type=int, default=10, help="method steps")
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--json", default=None, help="write the raw numbers here")
    p.add_argument(
        "--arena", default=None, help="score these arena folders' finished runs (comma-separated)"
    )
    args = p.parse_args()
    torch.set_num_threads(1)
    started, load = time.perf_counter(), os.getloadavg()
    if args.arena:
        runs = from_arena([Path(f) for f in args.arena.split(",")])
        common = set.intersection(*(set(r) for r in runs.values()))  # seeds every arm finished
        runs = {a: {s: r for s, r in rs.items() if s in common} for a, rs in runs.items()}
        arms = sorted(runs, key=lambda a: (a != "orw_cfm_w2", a))
        args.seeds = len(common)
        print(f"arena {args.arena}: seeds {sorted(common)}")
    else:
        arms = args.arms.split(",")
        runs = {
            a: {s: run(a, s, args.budget, args.eval_every) for s in range(args.seeds)} for a in arms
        }
    n = args.seeds
    print(f"budget {args.budget} samples; {n} seeds; loadavg at start {load}")
    print(
        "| method | late reward | final reward (held-out noise) | mode entropy | "
        "good-mode entropy | on-manifold | collapsed seeds (95 % Wilson) | s/run |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for a in arms:
        finals = {c: mean_ci([r["final"][c] for r in runs[a].values()]) for c in COLS}
        late = mean_ci([r["late"] for r in runs[a].values()])
        k = sum(r["final"]["div/good_mode_entropy"] < COLLAPSE for r in runs[a].values())
        lo, hi = wilson(k, n)
        sec = sum(r["seconds"] for r in runs[a].values()) / n
        print(
            f"| {a} | {fmt(late)} | "
            + " | ".join(fmt(finals[c]) for c in COLS)
            + f" | {k}/{n} [{lo:.2f}, {hi:.2f}] | {sec:.1f} |"
        )
    base = "ac_flow_provisional"
    if base in arms:
        print(f"\npaired differences {base} − comparator (95 % t CI over seeds):")
        print(
            "| comparator | Δ late reward | Δ final reward | Δ good-mode entropy | Δ on-manifold |"
        )
        print("|---|---|---|---|---|")
        for a in arms:
            if a == base:
                continue
            d_late = paired_difference_ci(
                {s: r["late"] for s, r in runs[base].items()},
                {s: r["late"] for s, r in runs[a].items()},
            )
            ds = [
                paired_difference_ci(
                    {s: r["final"][c] for s, r in runs[base].items()},
                    {s: r["final"][c] for s, r in runs[a].items()},
                )
                for c in ("reward/mean", "div/good_mode_entropy", "fid/on_manifold")
            ]
            print(f"| {a} | {fmt(d_late)} | " + " | ".join(fmt(d) for d in ds) + " |")
    if args.arena:
        print("\nlast 100 steps, mean over steps and seeds (metrics.jsonl):")
        for a in arms:
            keys = sorted({k for r in runs[a].values() for k in r["diagnostics"]})
            means = {k: sum(r["diagnostics"][k] for r in runs[a].values()) / n for k in keys}
            print(f"  {a}: " + ", ".join(f"{k} {v:.3f}" for k, v in means.items()))
    print(f"\nwall {time.perf_counter() - started:.0f} s; loadavg at end {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "load": load}, f)


if __name__ == "__main__":
    main()
