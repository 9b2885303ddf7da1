"""DGPO against ORW-CFM-W2 and a Flow-GRPO-style policy gradient on the class-conditional
digits (papers/seed_generative.md G2.2 testbed (b); Luo, Hu, Tang, arXiv:2510.08425).

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/dgpo_digits.py --seeds 5 --jobs 2

Every seed starts all methods from the same cached base flow (lab/digits, base_seed 0: 2,000
CFM steps with 50 % label noise) and scores them on the same fixed ODE noise and balanced
labels (paired). Budget: 38,400 generated samples per run (300 steps × 128). The curve is
`oracle/value` (mean p_A(c|x) of 2,000 ODE samples) every 10 steps; the threshold is 90 % of
the best final mean of any method; samples-to-threshold of a run that never reaches it is
counted as the budget (censored; the count is shown). Final metrics on a held-out noise
(another 2,000 draws, labels i mod 10): reward/mean (classifier A, trained on), reward/heldout
(classifier B, never trained on), reward/gap (A − B: reward hacking), div/pair_dist (≤ 200
samples; real images 6.06), fid/nn_dist (to the nearest training image). Pass criterion
(G2.2): DGPO's samples-to-threshold smaller with a CI excluding 0, and its held-out reward and
diversity not lower. Student-t intervals over seeds; paired differences DGPO − comparator."""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor

import torch

from policylab.arena.stats import budget_to_threshold, mean_ci, paired_difference_ci
from policylab.lab.catalogue import build, lab_methods
from policylab.lab.digits import digit_metrics, ode_samples
from policylab.lab.digits_models import one_hot

ARMS = {
    "dgpo": ("dgpo", {}),
    "orw_cfm_w2": ("orw_cfm_w2", {}),
    "flow_grpo_sde": ("flow_grpo_sde", {}),
    "dgpo@use_ema_ref": ("dgpo", {"use_ema_ref": True}),
    "dgpo@beta_dpo=1": ("dgpo", {"beta_dpo": 1.0}),
}
HELDOUT_SEED = 777_777
COLS = ["reward/mean", "reward/heldout", "reward/gap", "div/pair_dist", "fid/nn_dist"]


def run(arm: str, seed: int, budget: int, eval_every: int, eval_samples: int) -> dict:
    torch.set_num_threads(1)
    algo, overrides = ARMS[arm]
    problem = build("lab/digits", seed, eval_samples=eval_samples)
    method = lab_methods.get(algo)
    options = method.build_options(overrides)
    g = torch.Generator().manual_seed(seed)
    state, spent, step, nfe = method.init(problem, options, g), 0, 0, 0
    curve = [(0, problem.value(method.policy(problem, state)))]
    t0 = time.perf_counter()
    while spent < budget:
        state, metrics = method.step(problem, state, options, g)
        spent, step = spent + int(metrics["cost"]), step + 1
        nfe += metrics["cost/nfe"] * metrics["cost"]
        if step % eval_every == 0 or spent >= budget:
            curve.append((spent, problem.value(method.policy(problem, state))))
    seconds = time.perf_counter() - t0
    noise = torch.randn(2000, 64, generator=torch.Generator().manual_seed(HELDOUT_SEED + seed))
    labels = one_hot(torch.arange(2000) % 10)
    x = ode_samples(method.policy(problem, state), noise, labels)
    final = digit_metrics(x, labels, *problem.extras["classifiers"])
    return {
        "arm": arm,
        "seed": seed,
        "curve": curve,
        "seconds": seconds,
        "nfe": nfe,
        "final": final,
    }


def fmt(i, digits: int = 3) -> str:
    return f"{i.mean:.{digits}f} [{i.low:.{digits}f}, {i.high:.{digits}f}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--budget", type=int, default=38_400, help="generated samples per run")
    p.add_argument("--eval-every", type=int, default=10, help="method steps")
    p.add_argument("--arms", default="dgpo,orw_cfm_w2,flow_grpo_sde")
    p.add_argument("--eval-samples", type=int, default=2000, help="ODE samples per curve point")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--json", default=None, help="write the raw numbers here")
    args = p.parse_args()
    arms = args.arms.split(",")
    build("lab/digits", 0)  # build and cache the models once, before the workers start
    started, load = time.perf_counter(), os.getloadavg()
    jobs = [
        (a, s, args.budget, args.eval_every, args.eval_samples)
        for s in range(args.seeds)
        for a in arms
    ]
    done = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for r in pool.map(run, *zip(*jobs, strict=True)):
            done.append(r)  # each finished run is logged: a cut measurement keeps its runs
            print(json.dumps({k: r[k] for k in ("arm", "seed", "seconds", "final")}), flush=True)
    runs = {a: {r["seed"]: r for r in done if r["arm"] == a} for a in arms}
    best = max(mean_ci([r["curve"][-1][1] for r in runs[a].values()]).mean for a in arms)
    threshold = 0.9 * best
    base = runs[arms[0]][0]["curve"][0][1]
    to_thr, reached = {}, {}
    for a in arms:
        hits = {s: budget_to_threshold(r["curve"], threshold) for s, r in runs[a].items()}
        reached[a] = sum(h is not None for h in hits.values())
        to_thr[a] = {s: (h if h is not None else float(args.budget)) for s, h in hits.items()}
    print(
        f"threshold = 0.9 × {best:.3f} = {threshold:.3f} (base value {base:.3f}); budget "
        f"{args.budget} samples; {args.seeds} seeds; loadavg at start {load}"
    )
    print(
        "| method | samples to threshold (reached) | final p_A (A) | p_B (held-out B) | "
        "gap A − B | pair dist | nn dist | NFE/run | s/run |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for a in arms:
        finals = {c: mean_ci([r["final"][c] for r in runs[a].values()]) for c in COLS}
        sec = sum(r["seconds"] for r in runs[a].values()) / args.seeds
        nfe = sum(r["nfe"] for r in runs[a].values()) / args.seeds
        print(
            f"| {a} | {fmt(mean_ci(list(to_thr[a].values())), 0)} ({reached[a]}/{args.seeds}) | "
            + " | ".join(fmt(finals[c]) for c in COLS)
            + f" | {nfe:.3g} | {sec:.1f} |"
        )
    print("\npaired differences dgpo − comparator (95 % t CI over seeds):")
    print("| comparator | Δ samples to threshold | " + " | ".join(f"Δ {c}" for c in COLS) + " |")
    print("|---|---|" + "---|" * len(COLS))
    for a in arms:
        if a == "dgpo" or "dgpo" not in arms:
            continue
        d_thr = paired_difference_ci(to_thr["dgpo"], to_thr[a])
        ds = [
            paired_difference_ci(
                {s: r["final"][c] for s, r in runs["dgpo"].items()},
                {s: r["final"][c] for s, r in runs[a].items()},
            )
            for c in COLS
        ]
        print(f"| {a} | {fmt(d_thr, 0)} | " + " | ".join(fmt(d) for d in ds) + " |")
    print(f"\nwall {time.perf_counter() - started:.0f} s; loadavg at end {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threshold": threshold, "runs": runs, "load": load}, f)


if __name__ == "__main__":
    main()
