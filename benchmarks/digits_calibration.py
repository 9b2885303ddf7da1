"""The G0.7 calibration rows of the digits testbed (papers/seed_generative.md G0.7):
classifier A and B held-out accuracy, the label-noise base flow's p_A(c|x), accuracy under A
and B, pair distance (real images: 6.06) and distance to the nearest training image.

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/digits_calibration.py

Models are built (timed) or read from $POLICYLAB_CACHE; 2,000 ODE samples, labels i mod 10,
noise seed 1."""

from __future__ import annotations

import argparse
import time

import torch

from policylab.lab.digits import nn_dist, pair_dist
from policylab.lab.digits_data import load_digits_split
from policylab.lab.digits_models import (
    accuracy,
    base_digits_flow,
    classifier_a,
    classifier_b,
    one_hot,
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--flow-steps", type=int, default=2000)
    p.add_argument("--label-noise", type=float, default=0.5)
    args = p.parse_args()
    torch.set_num_threads(1)
    d = load_digits_split()
    built = {}
    for name, make in (
        ("A", classifier_a),
        ("B", classifier_b),
        ("flow", lambda: base_digits_flow(0, args.flow_steps, args.label_noise)),
    ):
        t = time.perf_counter()
        built[name] = make()
        print(f"{name}: {time.perf_counter() - t:.1f} s (build or cache read)")
    a, b, flow = built["A"], built["B"], built["flow"]
    print(
        f"held-out accuracy A {accuracy(a, d.x_test, d.y_test):.3f}, "
        f"B {accuracy(b, d.x_test, d.y_test):.3f}"
    )
    y = torch.arange(2000) % 10
    noise = torch.randn(2000, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        x = flow.sample("ode_euler", 2000, x_noise=noise, cond=one_hot(y)).sample.clamp(-1, 1)
        pa = a(x).softmax(-1)[torch.arange(2000), y].mean()
        pb = b(x).softmax(-1)[torch.arange(2000), y].mean()
    print(
        f"flow (steps {args.flow_steps}, label_noise {args.label_noise}): p_A {pa:.3f}, "
        f"acc_A {accuracy(a, x, y):.3f}, p_B {pb:.3f}, acc_B {accuracy(b, x, y):.3f}, "
        f"pair dist {pair_dist(x):.2f} (real train {pair_dist(d.x_train):.2f}), "
        f"nn dist {nn_dist(x):.2f} (real test images {nn_dist(d.x_test):.2f})"
    )


if __name__ == "__main__":
    main()
