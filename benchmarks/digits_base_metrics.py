"""The digits base flow's final metrics measured exactly as benchmarks/dgpo_digits.py measures
each arm's (lab/digits' `digit_metrics` on 2,000 ODE samples from the held-out noise
HELDOUT_SEED + seed, labels i mod 10, samples not clamped), averaged over seeds 0..N−1; the
clamped pair and nearest-image distances (benchmarks/digits_calibration.py's measure)
beside them.

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/digits_base_metrics.py --seeds 5
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dgpo_digits import HELDOUT_SEED  # noqa: E402

from policylab.lab.catalogue import build  # noqa: E402
from policylab.lab.digits import digit_metrics, ode_samples  # noqa: E402
from policylab.lab.digits_models import one_hot  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(1)
    problem = build("lab/digits", 0, eval_samples=16)  # the base: the same for every seed
    labels = one_hot(torch.arange(2000) % 10)
    rows = []
    for seed in range(args.seeds):
        g = torch.Generator().manual_seed(HELDOUT_SEED + seed)
        x = ode_samples(problem.mdp, torch.randn(2000, 64, generator=g), labels)
        raw = digit_metrics(x, labels, *problem.extras["classifiers"])
        box = digit_metrics(x.clamp(-1, 1), labels, *problem.extras["classifiers"])
        rows.append(
            [raw["reward/mean"], raw["div/pair_dist"], raw["fid/nn_dist"]]
            + [box["div/pair_dist"], box["fid/nn_dist"]]
        )
    mean = torch.tensor(rows).mean(0).tolist()
    print(
        f"base over {args.seeds} seeds: p_A {mean[0]:.3f}; unclamped (the arena's measure) "
        f"pair {mean[1]:.3f}, nn {mean[2]:.3f}; clamped pair {mean[3]:.3f}, nn {mean[4]:.3f}"
    )


if __name__ == "__main__":
    main()
