"""Base models that `policylab pretrain NAME` builds once and caches (papers/seed_generative.md
G0.7): a small registry, name → builder. A builder is `fn(seed, *, progress, **knobs) ->
BuiltModel`; it returns at once when its cache already holds the model, else trains it,
calling `progress(done, total)` as it goes, and saves it under lab/cache.py's `cache_dir()`
($POLICYLAB_CACHE, default ~/.cache/policylab) with the settings' checksum in the name, so
a changed knob never reads a stale file.

    policylab pretrain --list
    policylab pretrain ring_flow seed=0 steps=3000

Registered here: `ring_flow` (lab/ring.py's base flow), `digits_flow`, `digits_classifier_a`
and `digits_classifier_b` (lab/digits_models.py) and `tiny_mdm` (the masked-diffusion LM of
policylab.pretrain_mdm). Knob defaults carry their sources."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policylab.registry import Registry

Progress = Callable[[int, int], None]  # (done, total)


@dataclass(frozen=True)
class BuiltModel:
    """Where a base model lies, one line about it, and whether this call trained it."""

    path: Path
    description: str
    built: bool
    sha256: str = ""


@dataclass(frozen=True)
class BaseModel:
    """A registered base model: its builder and its knobs (name → (default, source))."""

    title: str
    builder: Callable[..., BuiltModel]
    knobs: dict[str, tuple[Any, str]] = field(default_factory=dict)


base_models: Registry[BaseModel] = Registry("base model")


def add_base_model(name: str, model: BaseModel) -> None:
    base_models.add(name, model, summary=model.title)


def pretrain(name: str, seed: int = 0, *, progress: Progress | None = None, **knobs) -> BuiltModel:
    """Build (or find in the cache) the base model `name`; unknown names and knobs are
    errors naming the choices, before any work."""
    model, settings = resolve(name, seed, knobs)
    return model.builder(seed, progress=progress, **settings)


def resolve(name: str, seed: int, knobs: dict[str, Any]) -> tuple[BaseModel, dict[str, Any]]:
    """The registered model and its full knob settings; errors name the accepted values."""
    model = base_models.get(name)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"pretrain {name}: seed = {seed!r}; accepted: an integer >= 0")
    unknown = sorted(set(knobs) - set(model.knobs))
    if unknown:
        raise ValueError(
            f"pretrain {name}: unknown knob(s) {', '.join(unknown)}; "
            f"accepted: {', '.join(sorted(model.knobs)) or 'none'}"
        )
    return model, {k: default for k, (default, _) in model.knobs.items()} | knobs


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _positive_int(owner: str, name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"pretrain {owner}: {name} = {value!r}; accepted: an integer >= 1")


# ---- ring_flow ------------------------------------------------------------------------------
def _ring_flow(seed: int, *, progress: Progress | None = None, steps: int = 3000) -> BuiltModel:
    from policylab.lab.ring import HIDDEN, STEPS, base_ring_flow, ring_flow_path

    _positive_int("ring_flow", "steps", steps)
    path = ring_flow_path(seed, steps)
    cached = path.is_file()
    policy = base_ring_flow(seed, steps, progress=progress)
    size = sum(p.numel() for p in policy.trainable())
    text = (
        f"ring flow: MLP {len(HIDDEN)}×{HIDDEN[0]} SiLU, {size:,} parameters, {STEPS} Euler "
        f"steps, {steps:,} CFM steps from seed {seed}"
    )
    return BuiltModel(path, text, built=not cached, sha256=file_sha256(path))


add_base_model(
    "ring_flow",
    BaseModel(
        title="2-D flow on the 8-mode ring (lab/ring's base model, G0.7)",
        builder=_ring_flow,
        knobs={"steps": (3000, "[G0.7] 3,000 CFM steps, batch 256, Adam 1e-3")},
    ),
)


# ---- the digits testbed (lab/digits_models.py) ------------------------------------------------
def _digits_flow(
    seed: int, *, progress: Progress | None = None, steps: int = 2000, label_noise: float = 0.5
) -> BuiltModel:
    from policylab.lab.digits_models import base_digits_flow, digits_flow_path

    _positive_int("digits_flow", "steps", steps)
    path = digits_flow_path(seed, steps, label_noise)
    cached = path.is_file()
    policy = base_digits_flow(seed, steps, label_noise)
    size = sum(p.numel() for p in policy.trainable())
    text = (
        f"digits flow: {size:,} parameters, {steps:,} CFM steps from seed {seed}, "
        f"{label_noise:.0%} of labels replaced at random"
    )
    return BuiltModel(path, text, built=not cached, sha256=file_sha256(path))


def _digits_classifier(which: str):
    def build(seed: int, *, progress: Progress | None = None, steps: int = 2000) -> BuiltModel:
        from policylab.lab import digits_models as dm
        from policylab.lab.digits_data import load_digits_split

        _positive_int(f"digits_classifier_{which}", "steps", steps)
        arch, model_seed = ("mlp", seed) if which == "a" else ("cnn", seed + dm.B_SEED_OFFSET)
        path = dm.classifier_path(arch, model_seed, steps)
        cached = path.is_file()
        model = (dm.classifier_a if which == "a" else dm.classifier_b)(seed, steps)
        data = load_digits_split()
        text = (
            f"digits classifier {which.upper()} ({arch}), {steps:,} steps from seed {model_seed}: "
            f"held-out accuracy {dm.accuracy(model, data.x_test, data.y_test):.3f}"
        )
        return BuiltModel(path, text, built=not cached, sha256=file_sha256(path))

    return build


DIGITS_CLF_STEPS = (2000, "[G0.7] 2,000 steps, batch 128, input noise 0.05")
add_base_model(
    "digits_flow",
    BaseModel(
        title="class-conditional 8×8 digits flow, 50 % label noise (lab/digits' base model, G0.7)",
        builder=_digits_flow,
        knobs={
            "steps": (2000, "[G0.7] 2,000 CFM steps"),
            "label_noise": (0.5, "[G0.7] half the labels random, so RL has headroom"),
        },
    ),
)
add_base_model(
    "digits_classifier_a",
    BaseModel(
        title="digits classifier A, MLP 64-128-10 (the reward model, G0.6)",
        builder=_digits_classifier("a"),
        knobs={"steps": DIGITS_CLF_STEPS},
    ),
)
add_base_model(
    "digits_classifier_b",
    BaseModel(
        title="digits classifier B, 2-layer CNN (the held-out hacking detector, G0.6)",
        builder=_digits_classifier("b"),
        knobs={"steps": DIGITS_CLF_STEPS},
    ),
)


# ---- tiny_mdm -------------------------------------------------------------------------------
def _tiny_mdm(
    seed: int,
    *,
    progress: Progress | None = None,
    steps: int = 1000,
    batch_size: int = 64,
    lr: float = 1e-3,
    eval_n: int = 200,
) -> BuiltModel:
    from policylab.lab.cache import cache_dir
    from policylab.pretrain_mdm import PretrainMDMConfig
    from policylab.pretrain_mdm import pretrain as pretrain_mdm
    from policylab.trainers.sft import checksums

    settings = dict(steps=steps, batch_size=batch_size, lr=lr, eval_n=eval_n, seed=seed)
    PretrainMDMConfig(**settings)  # its range checks, before any work
    key = hashlib.sha256(repr(sorted(settings.items())).encode()).hexdigest()[:12]
    path = cache_dir() / f"tiny_mdm_{seed}_{steps}_{key}"
    sums = path / "SHA256SUMS"
    built = not (sums.is_file() and sums.read_text() == checksums(path))
    if built:
        meta = pretrain_mdm(PretrainMDMConfig(out=str(path), **settings), on_step=progress)
    else:
        import json

        meta = json.loads((path / "policylab.json").read_text())
    heldout = meta.get("heldout", {})
    text = (
        f"tiny MDM: {meta.get('parameters', 0):,} parameters, {steps:,} masked-SFT steps from "
        f"seed {seed}; greedy held-out accuracy S=6 {heldout.get('greedy_accuracy_S6', 0):.3f}, "
        f"S=3 {heldout.get('greedy_accuracy_S3', 0):.3f} (n = {eval_n})"
    )
    return BuiltModel(path, text, built=built, sha256=file_sha256(sums))


add_base_model(
    "tiny_mdm",
    BaseModel(
        title="masked-diffusion LM on 2-digit addition (policylab.pretrain_mdm, G0.7, G1.1)",
        builder=_tiny_mdm,
        knobs={
            "steps": (1000, "[G0.7] 1,000 steps: greedy ≈ 0.3, headroom for RL"),
            "batch_size": (64, "[G0.7]"),
            "lr": (1e-3, "[G0.7] AdamW, cosine to 0.1·lr"),
            "eval_n": (200, "[ours: as the shipped AR SFT] held-out prompts"),
        },
    ),
)
