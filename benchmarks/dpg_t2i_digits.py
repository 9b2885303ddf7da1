"""DPG-T2I against DreamBooth on the digits personalisation testbed, equal steps
(papers/seed_generative.md G5.2; Wei et al., arXiv:2407.06642).

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/dpg_t2i_digits.py \
        --subjects 0,1,2 --seeds 5 --steps 1000

Every run starts from the same cached base flow (lab/digits_personal, base_seed 0) with
the "sks" column at zero; a (subject, seed) pair is one paired unit: both methods see the
same references, prior images and evaluation noise. Each step is 5 instance + 5 prior
rows. Final metrics on 200 fixed-noise ODE samples of "sks 3" (the task's metrics):
`fid/subject` (cosine of classifier-B features to the 5 references, mean over pairs),
`align/p3` (p_A(3 | x)), `div/pair_dist`, `copy/nn_ref` (mean L2 to the nearest reference),
and on "3" samples `prior/p3`. Criterion (G5.2): DPG's fidelity − DreamBooth's has a 95 %
CI above 0 while alignment and diversity are not lower (their paired CI not wholly below
0). Student-t intervals over the paired units."""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.nn.functional as F

from policylab.arena.stats import mean_ci, paired_difference_ci
from policylab.lab.catalogue import build, lab_methods
from policylab.lab.digits_data import load_digits_split

ARMS = {
    "dpg_t2i": ("dpg_t2i", {}),
    "dpg_t2i_similarity": ("dpg_t2i_similarity", {}),
    "dreambooth": ("dreambooth", {}),
    "dpg_t2i@per_row_gamma": ("dpg_t2i", {"per_row_gamma": True}),
    # sensitivity: a weaker prior term, for both (not a default of either)
    "dpg_t2i@prior_weight=0.1": ("dpg_t2i", {"prior_weight": 0.1}),
    "dreambooth@prior_weight=0.1": ("dreambooth", {"prior_weight": 0.1}),
}
COLS = ["fid/subject", "align/p3", "div/pair_dist", "copy/nn_ref", "prior/p3"]


def run(arm: str, subject: int, seed: int, steps: int) -> dict:
    algo, overrides = ARMS[arm]
    problem = build("lab/digits_personal", seed, subject=subject)
    method = lab_methods.get(algo)
    options = method.build_options(overrides)
    g = torch.Generator().manual_seed(seed)
    state = method.init(problem, options, g)
    t0 = time.perf_counter()
    for _ in range(steps):
        state, _ = method.step(problem, state, options, g)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "final": problem.extras["metrics"](method.policy(problem, state))}


def scale(subjects: list[int]) -> None:
    """Where real images fall on the fidelity scale: the references themselves, the class-3
    test images, the other test digits (classifier B's features, as `fid/subject`)."""
    data = load_digits_split()
    for s in subjects:
        problem = build("lab/digits_personal", 0, subject=s)
        clf_a, clf_b = problem.extras["classifiers"]
        refs = problem.extras["refs"]
        fr = F.normalize(clf_b.features(refs), dim=-1)

        def cos(x, fr=fr, clf_b=clf_b) -> float:
            return float((F.normalize(clf_b.features(x), dim=-1) @ fr.T).mean())

        threes, others = data.x_test[data.y_test == 3], data.x_test[data.y_test != 3]
        p3 = float(clf_a(refs).softmax(-1)[:, 3].mean())
        prior = float(clf_a(problem.extras["prior_images"]).softmax(-1)[:, 3].mean())
        print(
            f"subject {s}: refs {cos(refs):.3f}, test 3s {cos(threes):.3f}, "
            f"other test digits {cos(others):.3f}; p_A(3) of the refs {p3:.3f}, "
            f"of the prior images {prior:.3f}"
        )


def fmt(i) -> str:
    return f"{i.mean:.3f} [{i.low:.3f}, {i.high:.3f}]"


def table(runs: dict, base: dict, against: str) -> None:
    """Print the metric table and the paired differences; runs: arm → unit → result."""
    arms = list(runs)
    print("| method | " + " | ".join(COLS) + " | s/run |")
    print("|---|" + "---|" * (len(COLS) + 1))
    base_row = " | ".join(fmt(mean_ci([b[c] for b in base.values()])) for c in COLS)
    print(f"| base (sks 3 = 3) | {base_row} | — |")
    for a in arms:
        finals = [fmt(mean_ci([r["final"][c] for r in runs[a].values()])) for c in COLS]
        sec = sum(r["seconds"] for r in runs[a].values()) / len(runs[a])
        print(f"| {a} | " + " | ".join(finals) + f" | {sec:.1f} |")
    if against not in arms:
        return
    print(f"\npaired differences method − {against} (95 % t CI over subject × seed):")
    print("| method | " + " | ".join(f"Δ {c}" for c in COLS) + " |")
    print("|---|" + "---|" * len(COLS))
    for a in arms:
        if a == against:
            continue
        ds = [
            paired_difference_ci(
                {u: r["final"][c] for u, r in runs[a].items()},
                {u: r["final"][c] for u, r in runs[against].items()},
            )
            for c in COLS
        ]
        print(f"| {a} | " + " | ".join(fmt(d) for d in ds) + " |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--subjects", default="0,1,2", help="comma-separated subject ids")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--arms", default="dpg_t2i,dpg_t2i_similarity,dreambooth")
    p.add_argument("--against", default="dreambooth", help="the arm of the paired differences")
    p.add_argument("--json", default=None, help="write the raw numbers here")
    p.add_argument("--combine", nargs="*", default=None, help="print the tables of these JSONs")
    p.add_argument("--scale", action="store_true", help="print the fidelity of real images")
    args = p.parse_args()
    if args.scale:
        with torch.no_grad():
            scale([int(s) for s in args.subjects.split(",")])
        return
    if args.combine:
        runs, base = {}, {}
        for path in args.combine:
            with open(path) as f:
                saved = json.load(f)
            base.update(saved["base"])
            for a, by_unit in saved["runs"].items():
                runs.setdefault(a, {}).update(by_unit)
        table(runs, base, args.against)
        return
    torch.set_num_threads(1)
    arms = args.arms.split(",")
    units = [(int(s), k) for s in args.subjects.split(",") for k in range(args.seeds)]
    started, load = time.perf_counter(), os.getloadavg()
    base = {}
    for subject, seed in units:
        problem = build("lab/digits_personal", seed, subject=subject)
        base[f"s{subject}-{seed}"] = problem.extras["metrics"](problem.mdp)
    runs = {a: {f"s{s}-{k}": run(a, s, k, args.steps) for s, k in units} for a in arms}
    print(
        f"subjects {args.subjects} × {args.seeds} seeds, {args.steps} steps of 5 + 5 rows; "
        f"loadavg at start {load}"
    )
    table(runs, base, args.against)
    print(f"\nwall {time.perf_counter() - started:.0f} s; loadavg at end {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "base": base, "runs": runs, "load": load}, f)


if __name__ == "__main__":
    main()
