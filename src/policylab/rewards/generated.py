"""Rewards for generated samples (papers/seed_generative.md G0.6): a registry of tensor
functions `fn(samples [B, D], cond [B, C] | None, **cols) -> Tensor[B]`, each with a
`differentiable` flag (a pathwise objective refuses one without it at config time).

Unlike the TRL-signature text rewards (rewards/registry.py) these score a whole batch of
tensors at once; `score` checks what comes back: a wrong shape or a NaN/inf is an error
naming the reward, never a silent zero (issue 17 "Bad input").

`ring_mode` (the 2-D testbed of G2 and G3): 8 modes on a circle of radius 2,
R = 1[nearest mode ∈ good]·exp(−d²/(2·0.3²)), good = {0, 1, 2} (base rate 3/8) [ours].
Its metrics (G0.8): `div/mode_entropy` (entropy of the nearest-mode histogram, ln 8 at
uniform), `fid/on_manifold` (fraction within 0.3 of a mode).

The digits (G0.6): `digit_prob`, `digit_logprob` (classifier A), `heldout_digit_prob`
(classifier B, evaluation only, not differentiable by registration) and `digit_similarity`
(refs=...) take one-hot labels cond [B, 10] and an optional `classifier=` (lab/digits.py
passes its own; the default is the seed-0 model of lab/digits_models.py)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from policylab.registry import Registry

RING_MODES, RING_RADIUS, RING_DATA_STD = 8, 2.0, 0.1
RING_REWARD_WIDTH, RING_GOOD = 0.3, (0, 1, 2)
ON_MANIFOLD = 0.3  # fid/on_manifold radius (G0.8)


@dataclass(frozen=True)
class GeneratedReward:
    fn: Callable[..., torch.Tensor]
    differentiable: bool


generated_rewards: Registry[GeneratedReward] = Registry("generated-sample reward")


def add_reward(
    name: str, fn: Callable[..., torch.Tensor], *, differentiable: bool, replace: bool = False
) -> None:
    """Register `fn(samples, cond, **cols) -> Tensor[B]` under `name`."""
    entry = GeneratedReward(fn, differentiable)
    generated_rewards.add(name, entry, summary=_summary(fn), replace=replace)


def _summary(fn) -> str:
    doc = (fn.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else ""


def get_reward(name: str, *, need_gradient: bool = False) -> GeneratedReward:
    """The registered reward; `need_gradient` (a pathwise objective) refuses a
    non-differentiable one, naming the ones that qualify."""
    reward = generated_rewards.get(name)
    if need_gradient and not reward.differentiable:
        ok = [n for n in generated_rewards.names() if generated_rewards.get(n).differentiable]
        raise ValueError(
            f"reward {name!r} is not differentiable; a pathwise objective needs one of: "
            f"{', '.join(ok) or 'none'}"
        )
    return reward


def score(name: str, samples: torch.Tensor, cond: torch.Tensor | None = None, **cols):
    """R [B] of `samples` [B, D] under the reward `name`, checked: shape [B], finite."""
    out = get_reward(name).fn(samples, cond, **cols)
    batch = samples.shape[0]
    if not isinstance(out, torch.Tensor) or out.shape != (batch,):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"reward {name!r} returned shape {got}; expected ({batch},)")
    bad = ~torch.isfinite(out)
    if bad.any():
        rows = bad.nonzero().flatten()[:5].tolist()
        raise ValueError(
            f"reward {name!r} returned {int(bad.sum())} non-finite value(s) (rows {rows}); "
            "a reward must be finite"
        )
    return out


# ---- the ring -------------------------------------------------------------------------------
def ring_centres(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """[8, 2]: mode k at angle 2πk/8 on the circle of radius 2."""
    angles = 2 * math.pi * torch.arange(RING_MODES, dtype=dtype) / RING_MODES
    return RING_RADIUS * torch.stack([angles.cos(), angles.sin()], -1)


def ring_sample(n: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """n points of the target mixture: a uniform mode plus N(0, 0.1²I) (G0.6)."""
    modes = torch.randint(RING_MODES, (n,), generator=generator)
    return ring_centres()[modes] + RING_DATA_STD * torch.randn(n, 2, generator=generator)


def nearest_mode(samples: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(index [B], distance [B]) of each sample's nearest ring mode."""
    dist = torch.cdist(samples, ring_centres(samples.dtype))
    d, k = dist.min(-1)
    return k, d


def ring_mode(samples: torch.Tensor, cond: torch.Tensor | None = None, **cols) -> torch.Tensor:
    """1[nearest mode ∈ {0, 1, 2}]·exp(−d²/(2·0.3²)) on the 8-mode ring [ours, G0.6]."""
    if samples.ndim != 2 or samples.shape[1] != 2:
        raise ValueError(f"ring_mode scores 2-D points [B, 2]; got {tuple(samples.shape)}")
    k, _ = nearest_mode(samples.detach())
    good = torch.isin(k, torch.tensor(RING_GOOD))
    centre = ring_centres(samples.dtype)[k]
    d2 = ((samples - centre) ** 2).sum(-1)  # differentiable through the sample
    return good.to(samples.dtype) * torch.exp(-d2 / (2 * RING_REWARD_WIDTH**2))


add_reward("ring_mode", ring_mode, differentiable=True)  # a.e.: zero outside the good modes


def ring_metrics(samples: torch.Tensor) -> dict[str, float]:
    """G0.8 on the ring: reward/mean, div/mode_entropy (nats over the 8 nearest-mode bins),
    div/good_mode_entropy (over modes 0–2, ln 3 at uniform), fid/on_manifold, good-mode
    fraction."""
    k, d = nearest_mode(samples)
    counts = torch.bincount(k, minlength=RING_MODES).double()
    p = counts / counts.sum()
    entropy = float(-(p[p > 0] * p[p > 0].log()).sum())
    good = counts[list(RING_GOOD)]
    pg = good / good.sum().clamp_min(1)
    good_entropy = float(-(pg[pg > 0] * pg[pg > 0].log()).sum())
    return {
        "reward/mean": float(ring_mode(samples).mean()),
        "div/mode_entropy": entropy,
        "div/good_mode_entropy": good_entropy,
        "fid/on_manifold": float((d < ON_MANIFOLD).double().mean()),
        "ring/good_fraction": float(good.sum() / counts.sum()),
    }


# ---- the digits (G0.6) ----------------------------------------------------------------------
# Each digit reward takes the classifier as the keyword `classifier` (the lab task passes the
# one it built); without it, the default model of lab/digits_models.py (seed 0, 2,000 steps,
# built once and cached). The sample is clamped to [−1, 1] inside the reward, never in the
# sample, so a pathwise gradient stays informative inside the box [G0.6].
def _digit_inputs(name: str, samples: torch.Tensor, cond: torch.Tensor | None):
    if samples.ndim != 2 or samples.shape[1] != 64:
        raise ValueError(f"{name} scores 8×8 digits [B, 64]; got {tuple(samples.shape)}")
    if cond is None or cond.shape != (samples.shape[0], 10):
        got = None if cond is None else tuple(cond.shape)
        raise ValueError(
            f"{name} needs one-hot labels cond [B, 10] = ({samples.shape[0]}, 10); got {got}"
        )
    return samples.clamp(-1.0, 1.0), cond.argmax(-1)


def _default_classifier(which: str):
    from policylab.lab import digits_models  # lazy: only the digits need the models

    return digits_models.classifier_a() if which == "a" else digits_models.classifier_b()


def digit_logprob(samples, cond, *, classifier=None, **cols) -> torch.Tensor:
    """log p_A(c | clamp(x, −1, 1)) under classifier A (MLP 64-128-10) [G0.6]."""
    x, label = _digit_inputs("digit_logprob", samples, cond)
    clf = classifier if classifier is not None else _default_classifier("a")
    return clf(x).log_softmax(-1).gather(-1, label[:, None]).squeeze(-1)


def digit_prob(samples, cond, *, classifier=None, **cols) -> torch.Tensor:
    """p_A(c | clamp(x, −1, 1)) under classifier A (MLP 64-128-10), differentiable [G0.6]."""
    x, label = _digit_inputs("digit_prob", samples, cond)
    clf = classifier if classifier is not None else _default_classifier("a")
    return clf(x).softmax(-1).gather(-1, label[:, None]).squeeze(-1)


@torch.no_grad()
def heldout_digit_prob(samples, cond, *, classifier=None, **cols) -> torch.Tensor:
    """p_B(c | clamp(x, −1, 1)) under classifier B (a 2-layer CNN, another seed): evaluation
    only, the reward-hacking probe [G0.6]; registered as not differentiable so no pathwise
    objective trains on it."""
    x, label = _digit_inputs("heldout_digit_prob", samples, cond)
    clf = classifier if classifier is not None else _default_classifier("b")
    return clf(x).softmax(-1).gather(-1, label[:, None]).squeeze(-1)


def digit_similarity(samples, cond=None, *, refs, classifier=None, **cols) -> torch.Tensor:
    """cos(f_A(clamp(x)), mean_r f_A(r)): cosine similarity of classifier A's hidden features
    to the mean feature of a reference set refs [R, 64] (the DINO-similarity analogue) [G0.6].
    The condition is not used."""
    if samples.ndim != 2 or samples.shape[1] != 64:
        raise ValueError(f"digit_similarity scores 8×8 digits [B, 64]; got {tuple(samples.shape)}")
    if not isinstance(refs, torch.Tensor) or refs.ndim != 2 or refs.shape[1] != 64 or not len(refs):
        got = tuple(refs.shape) if isinstance(refs, torch.Tensor) else type(refs).__name__
        raise ValueError(f"digit_similarity needs refs [R >= 1, 64]; got {got}")
    clf = classifier if classifier is not None else _default_classifier("a")
    centre = clf.features(refs.clamp(-1.0, 1.0)).mean(0, keepdim=True)
    return torch.nn.functional.cosine_similarity(clf.features(samples.clamp(-1.0, 1.0)), centre)


add_reward("digit_prob", digit_prob, differentiable=True)
add_reward("digit_logprob", digit_logprob, differentiable=True)
add_reward("heldout_digit_prob", heldout_digit_prob, differentiable=False)
add_reward("digit_similarity", digit_similarity, differentiable=True)
