"""ROCM (pathwise, f-divergence regularised) against RLCM-style policy gradient on a lab
generator task, equal generated samples (papers/seed_generative.md G4.2; Shekhar & Zhang,
arXiv:2503.06171).

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/rocm_ring.py --seeds 5 \
        --json runs/rocm_ring.json
    # the digits (its reward is classifier A, its metrics hold classifier B; docs/generative.md):
    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/rocm_ring.py --task lab/digits \
        --seeds 5 --json runs/rocm_digits.json

Every seed starts all arms from the same distilled consistency model (cached) and
evaluates them on the same fixed noise and re-noising draws (paired). Budget: 32,000
generated samples per run (500 steps × 64 [G4.2]). Final metrics: the task's own
evaluation metrics (`problem.extras["metrics"]`: on the ring reward, mode entropies and
on-manifold; on the digits also the held-out classifier B, plus the nearest-image and pair
distances of the samples clamped to [−1, 1] and the fraction of pixels beyond ±1) and
`ref/drift` = mean_d (f_θ − f_ref)² over the evaluation chain's states. 95 % Student-t
intervals over seeds; paired differences per seed. `--from a.json,b.json` prints the tables
of saved runs."""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

from policylab.arena.stats import mean_ci, paired_difference_ci
from policylab.lab.catalogue import build, lab_methods
from policylab.lab.rocm import clean_gap

START = "start"  # the distilled consistency model before any update (rocm_none at budget 0)
ARMS = {
    START: ("rocm_none", {}),
    "rocm_kl_provisional": ("rocm_kl_provisional", {}),
    "rocm_hellinger_provisional": ("rocm_hellinger_provisional", {}),
    "rocm_tv_provisional": ("rocm_tv_provisional", {}),
    "rocm_js_provisional": ("rocm_js_provisional", {}),
    "rocm_none": ("rocm_none", {}),
    "rlcm": ("rlcm", {}),
    "rocm_kl_provisional@steps=2": ("rocm_kl_provisional", {"steps": 2}),
    "rocm_none@steps=2": ("rocm_none", {"steps": 2}),
    "rlcm@steps=2": ("rlcm", {"steps": 2}),
    "rocm_kl_provisional@beta=0.01": ("rocm_kl_provisional", {"beta": 0.01, "beta_last": 0.01}),
    "rocm_tv_provisional@beta=0.01": ("rocm_tv_provisional", {"beta": 0.01, "beta_last": 0.01}),
}


def parse_arm(arm: str) -> tuple[str, dict]:
    """A named arm, or any `algo@key=value@key=value` (values read as JSON)."""
    if arm in ARMS:
        return ARMS[arm]
    algo, *pairs = arm.split("@")
    overrides = {}
    for pair in pairs:
        key, value = pair.split("=", 1)
        overrides[key] = json.loads(value)
    return algo, overrides


def run(task: str, arm: str, seed: int, budget: int) -> dict:
    algo, overrides = parse_arm(arm)
    budget = 0 if arm == START else budget
    problem = build(task, seed)
    method = lab_methods.get(algo)
    options = method.build_options(overrides)
    g = torch.Generator().manual_seed(seed)
    state, spent, nfe = method.init(problem, options, g), 0, 0
    t0 = time.perf_counter()
    while spent < budget:
        state, metrics = method.step(problem, state, options, g)
        spent += int(metrics["cost"])
        nfe += metrics["cost/nfe"] * metrics["cost"]
    seconds = time.perf_counter() - t0
    policy = method.policy(problem, state)
    final = dict(problem.extras["metrics"](policy))
    noise, cond = problem.extras["eval_noise"], problem.extras.get("eval_labels")
    with torch.no_grad():  # the paired evaluation draws
        out = policy.sample("ode_euler", noise.shape[0], cond=cond, x_noise=noise)
        gap = clean_gap(policy, out.chain[:, : policy.steps], out.taus, cond)
    final["ref/drift"] = float((gap**2).mean())
    if "fid/nn_dist" in final:  # the digits: is "off-manifold" only pixels outside the box?
        final.update(clamped_metrics(out.sample))
    return {"seconds": seconds, "nfe": nfe, "final": final}


def clamped_metrics(samples: torch.Tensor) -> dict[str, float]:
    """The digits' distances on samples clamped to the data box [−1, 1] (the rewards clamp
    inside, so pixels beyond ±1 cost them nothing) and the fraction of pixels beyond it."""
    from policylab.lab.digits import nn_dist, pair_dist

    box = samples.clamp(-1, 1)
    return {
        "fid/nn_dist_clamped": nn_dist(box),
        "div/pair_dist_clamped": pair_dist(box),
        "fid/out_of_box": float((samples.abs() > 1).float().mean()),
    }


def merge_runs(saved: list[dict]) -> dict:
    """Saved runs {arm: {seed: run}} merged seed by seed; an arm and seed saved twice is an
    error (a silent overwrite would mix two measurements)."""
    runs: dict = {}
    for one in saved:
        for arm, by_seed in one.items():
            for seed, r in by_seed.items():
                if int(seed) in runs.setdefault(arm, {}):
                    raise ValueError(f"--from: arm {arm!r} seed {seed} is saved twice")
                runs[arm][int(seed)] = r
    return runs


def fmt(i) -> str:
    return f"{i.mean:.3f} [{i.low:.3f}, {i.high:.3f}]"


def report(runs: dict, cols: list[str]) -> None:
    arms = list(runs)
    print("| method | " + " | ".join(cols) + " | NFE/run | s/run |")
    print("|---|" + "---|" * (len(cols) + 2))
    for a in arms:
        finals = {c: mean_ci([r["final"][c] for r in runs[a].values()]) for c in cols}
        sec = sum(r["seconds"] for r in runs[a].values()) / len(runs[a])
        nfe = sum(r["nfe"] for r in runs[a].values()) / len(runs[a])
        cells = " | ".join(fmt(finals[c]) for c in cols)
        print(f"| {a} | {cells} | {nfe:.3g} | {sec:.1f} |")
    for base in ("rlcm", "rocm_none"):
        if base not in arms:
            continue
        print(f"\npaired differences arm − {base} at the arm's n (95 % t CI over seeds):")
        print("| arm | " + " | ".join(f"Δ {c}" for c in cols) + " |")
        print("|---|" + "---|" * len(cols))
        for a in arms:
            other = f"{base}@steps=2" if a.endswith("@steps=2") else base
            if a == other or other not in arms or a.startswith(base):
                continue
            ds = [
                paired_difference_ci(
                    {s: r["final"][c] for s, r in runs[a].items()},
                    {s: r["final"][c] for s, r in runs[other].items()},
                )
                for c in cols
            ]
            print(f"| {a} − {other} | " + " | ".join(fmt(d) for d in ds) + " |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="lab/ring")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--first-seed", type=int, default=0, help="seeds first..first+seeds-1")
    p.add_argument("--budget", type=int, default=32_000, help="generated samples per run")
    p.add_argument("--arms", default=",".join(ARMS), help="named arms or algo@key=value")
    p.add_argument("--json", default=None, help="write the raw numbers here")
    p.add_argument("--from", dest="sources", default=None, help="print saved runs: a.json,b.json")
    args = p.parse_args()
    if args.sources:
        saved = []
        for path in args.sources.split(","):
            with open(path) as f:
                saved.append(json.load(f))
        runs = merge_runs(saved)
    else:
        torch.set_num_threads(1)
        started, load = time.perf_counter(), os.getloadavg()
        runs = {}
        for a in args.arms.split(","):
            seeds = range(args.first_seed, args.first_seed + args.seeds)
            runs[a] = {s: run(args.task, a, s, args.budget) for s in seeds}
            if args.json:  # after every arm: a cut-short measurement keeps what it finished
                with open(args.json, "w") as f:
                    json.dump(runs, f)
        print(f"{args.task}; budget {args.budget} samples; {args.seeds} seeds; load {load}")
        print(f"wall {time.perf_counter() - started:.0f} s; load at end {os.getloadavg()}")
    first = next(iter(next(iter(runs.values())).values()))["final"]
    cols = [c for c in first if c.startswith(("reward/", "div/", "fid/", "ref/"))]
    report(runs, cols)


if __name__ == "__main__":
    main()
