"""The lab task `lab/digits` (papers/seed_generative.md G0.6–G0.8, G2.2 testbed (b)):
fine-tune the class-conditional digits flow, pre-trained with 50 % label noise so that it
follows its label only partly (G0.7), towards `digit_prob` = p_A(c | x) under classifier A.
Budget unit: generated samples.

Conditions are one-hot labels, one uniform label per group, drawn from the method's
generator. `value(policy)` = mean p_A of `eval_samples` ODE samples from a fixed noise
(seed + EVAL_SEED_OFFSET) and fixed balanced labels (i mod 10) [ours], so every method and
every evaluation of a run are scored on the same inputs; `optimum` = 1. `extras["metrics"]`
gives the final metrics on those samples (G0.8): reward/mean (A), reward/heldout (classifier
B, never trained on: the reward-hacking probe), reward/gap = A − B, div/pair_dist (mean
pairwise L2 of ≤ 200 samples; real images 6.06), fid/nn_dist (mean L2 to the nearest
training image).

The models (lab/digits_models.py) are built from seeds and cached; the knobs make tiny ones
for tests."""

from __future__ import annotations

import functools

import torch

from policylab.algebra.options import check_range
from policylab.lab import lab_tasks
from policylab.lab.digits_data import CLASSES, DIM, load_digits_split
from policylab.lab.digits_models import (
    accuracy,
    base_digits_flow,
    classifier_a,
    classifier_b,
    one_hot,
)
from policylab.lab.generator_task import GeneratorTask, generator_problem, ode_samples
from policylab.rewards.generated import digit_prob, heldout_digit_prob
from policylab.tabular.methods import Problem

__all__ = ["accuracy", "base_digits_flow", "classifier_a", "classifier_b", "digits"]

EVAL_SEED_OFFSET = 1_000_003  # as lab/ring
PAIR_SAMPLES = 200  # div/pair_dist over at most 200 samples [G0.8]


def pair_dist(samples: torch.Tensor) -> float:
    """Mean pairwise L2 distance of the first ≤ 200 samples (G0.8)."""
    x = samples[:PAIR_SAMPLES]
    n = x.shape[0]
    return float(torch.cdist(x, x).sum() / (n * (n - 1))) if n > 1 else 0.0


def nn_dist(samples: torch.Tensor) -> float:
    """Mean L2 distance of each sample to its nearest training image (G0.8)."""
    return float(torch.cdist(samples, load_digits_split().x_train).min(-1).values.mean())


def digit_metrics(samples, cond, clf_a, clf_b) -> dict[str, float]:
    """G0.8 on the digits: reward/mean (A), reward/heldout (B), reward/gap (A − B),
    digits/acc_a (argmax A = label), div/pair_dist, fid/nn_dist. The rewards and the
    accuracy read clamp(x, −1, 1); the two distances read the samples as drawn, so pixels
    outside the box show (real images, in the box, have pair distance 6.06)."""
    with torch.no_grad():
        a = float(digit_prob(samples, cond, classifier=clf_a).mean())
        b = float(heldout_digit_prob(samples, cond, classifier=clf_b).mean())
        acc = accuracy(clf_a, samples.clamp(-1, 1), cond.argmax(-1))
    return {
        "reward/mean": a,
        "reward/heldout": b,
        "reward/gap": a - b,
        "digits/acc_a": acc,
        "div/pair_dist": pair_dist(samples),
        "fid/nn_dist": nn_dist(samples),
    }


def uniform_labels(n: int, generator: torch.Generator | None) -> torch.Tensor:
    """One uniform one-hot label per group: [n, 10]."""
    return one_hot(torch.randint(CLASSES, (n,), generator=generator))


def digits(
    seed: int,
    base_seed: int = 0,
    base_steps: int = 2000,
    label_noise: float = 0.5,
    classifier_steps: int = 2000,
    eval_samples: int = 2000,
) -> Problem:
    """Knobs: base_seed (the models' seed, 0: every run seed starts from the same flow and
    classifiers, so methods compare paired [ours, as lab/ring]), base_steps (2,000 CFM steps
    [G0.7]), label_noise (0.5 [G0.7]), classifier_steps (2,000 for A and B [G0.7]),
    eval_samples (2,000 fixed-noise ODE samples per evaluation [ours, as lab/ring])."""
    check_range("lab/digits", "base_seed", base_seed, low=0)
    check_range("lab/digits", "label_noise", label_noise, low=0.0, high=1.0)
    for name, value in (
        ("base_steps", base_steps),
        ("classifier_steps", classifier_steps),
        ("eval_samples", eval_samples),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"lab/digits knob {name} = {value!r}; must be an integer >= 1")
    if not isinstance(base_seed, int):
        raise ValueError(f"lab/digits knob base_seed = {base_seed!r}; must be an integer >= 0")
    clf_a = classifier_a(base_seed, classifier_steps)
    clf_b = classifier_b(base_seed, classifier_steps)
    base = base_digits_flow(base_seed, base_steps, float(label_noise))
    g = torch.Generator().manual_seed(seed + EVAL_SEED_OFFSET)
    noise = torch.randn(eval_samples, DIM, generator=g)
    labels = one_hot(torch.arange(eval_samples) % CLASSES)
    reward = functools.partial(digit_prob, classifier=clf_a)

    def value(policy) -> float:
        return float(reward(ode_samples(policy, noise, labels), labels).mean())

    def metrics(policy) -> dict[str, float]:
        return digit_metrics(ode_samples(policy, noise, labels), labels, clf_a, clf_b)

    task = GeneratorTask(
        dim=DIM,
        reward=reward,
        batch_metrics=functools.partial(digit_metrics, clf_a=clf_a, clf_b=clf_b),
        conditions=uniform_labels,
        differentiable_reward=reward,
    )
    return generator_problem(
        base, value, metrics, task, eval_noise=noise, eval_labels=labels, classifiers=(clf_a, clf_b)
    )


lab_tasks.add("digits", digits)
