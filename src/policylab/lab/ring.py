"""The lab task `lab/ring` (papers/seed_generative.md G0.7, G2.2): fine-tune a 2-D flow
generator, pre-trained on an 8-mode ring, towards the `ring_mode` reward (good modes
{0, 1, 2}; rewards/generated.py). Budget unit: generated samples.

The base model — MLP 3×64 SiLU velocity net (9,218 parameters), 10 Euler steps — is built
here from `base_seed` by CFM pre-training on the ring mixture (3,000 steps, batch 256,
Adam 1e-3 [G0.7]) and cached under `$POLICYLAB_CACHE` (default ~/.cache/policylab) with a
checksum of its settings in the file name; a rebuild takes seconds.

A method's "policy" is a DiffusionPolicy. `value(policy)` = the mean `ring_mode` reward of
`eval_samples` ODE samples from a fixed noise (seed + EVAL_SEED_OFFSET), so every method
and every evaluation of a run are scored on the same noise; `optimum` = 1, the reward's
maximum (a sample on a good mode's centre). `extras` carries the base model and the
shared ring metrics (G0.8)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from policylab.lab import lab_tasks
from policylab.lab.cache import cache_file, load_or_build
from policylab.lab.generator_task import GeneratorTask, generator_problem, ode_samples
from policylab.policies.diffusion import DiffusionPolicy
from policylab.rewards.generated import ring_metrics, ring_mode, ring_sample
from policylab.tabular.methods import Problem

HIDDEN, STEPS = (64, 64, 64), 10  # G0.7
EVAL_SEED_OFFSET = 1_000_003


def pretrain_ring_flow(
    seed: int,
    steps: int = 3000,
    batch: int = 256,
    lr: float = 1e-3,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> DiffusionPolicy:
    """CFM pre-training on the ring mixture (G0.7): τ ~ U[0, 1], ε ~ N(0, I), Adam;
    `progress(done, steps)` every 50 steps and at the end."""
    with torch.random.fork_rng(devices=[]):  # the net's initialisation, no global effect
        torch.manual_seed(seed)
        policy = DiffusionPolicy(2, hidden=HIDDEN, steps=STEPS)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(policy.trainable(), lr=lr)
    for step in range(steps):
        x = ring_sample(batch, g)
        tau, eps = torch.rand(batch, 1, generator=g), torch.randn(batch, 2, generator=g)
        loss = policy.cfm_loss(x, tau, eps)[0].mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if progress is not None and ((step + 1) % 50 == 0 or step + 1 == steps):
            progress(step + 1, steps)
    return policy


def ring_flow_path(seed: int = 0, steps: int = 3000) -> Path:
    """The cache file of the base model of (seed, steps), its settings' checksum in the name."""
    return cache_file(
        f"ring_flow_{seed}_{steps}", f"ring-flow|{HIDDEN}|{STEPS}|{seed}|{steps}|256|1e-3"
    )


def base_ring_flow(
    seed: int = 0, steps: int = 3000, *, progress: Callable[[int, int], None] | None = None
) -> DiffusionPolicy:
    """The cached base model of `base_seed`, built on first use (`policylab pretrain
    ring_flow`, policylab/base_models.py); its reference frozen."""
    policy = load_or_build(
        ring_flow_path(seed, steps),
        lambda: DiffusionPolicy(2, hidden=HIDDEN, steps=STEPS),
        lambda: pretrain_ring_flow(seed, steps, progress=progress),
        part=lambda p: p.velocity_net,
        what="ring flow",
    )
    policy.freeze_reference()
    return policy


def ring_batch_metrics(samples: torch.Tensor, cond=None) -> dict[str, float]:
    """The per-step metrics of a batch (G0.8): reward, mode entropy, on-manifold."""
    m = ring_metrics(samples)
    return {k: m[k] for k in ("reward/mean", "div/mode_entropy", "fid/on_manifold")}


def ring(
    seed: int, base_seed: int = 0, base_steps: int = 3000, eval_samples: int = 2000
) -> Problem:
    """Knobs: base_seed (the pre-trained model's seed, 0: every run seed starts from the
    same model, so methods compare paired [ours]), base_steps (3,000 CFM steps [G0.7]),
    eval_samples (2,000 fixed-noise ODE samples per evaluation [ours])."""
    for name, value in (("base_steps", base_steps), ("eval_samples", eval_samples)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"lab/ring knob {name} = {value!r}; must be an integer >= 1")
    if not isinstance(base_seed, int) or isinstance(base_seed, bool) or base_seed < 0:
        raise ValueError(f"lab/ring knob base_seed = {base_seed!r}; must be an integer >= 0")
    base = base_ring_flow(base_seed, base_steps)
    noise = torch.randn(
        eval_samples, 2, generator=torch.Generator().manual_seed(seed + EVAL_SEED_OFFSET)
    )

    def value(policy: DiffusionPolicy) -> float:
        return float(ring_mode(ode_samples(policy, noise)).mean())

    def metrics(policy: DiffusionPolicy) -> dict[str, float]:
        return ring_metrics(ode_samples(policy, noise))

    task = GeneratorTask(
        dim=2, reward=ring_mode, batch_metrics=ring_batch_metrics, differentiable_reward=ring_mode
    )
    return generator_problem(base, value, metrics, task, eval_noise=noise)


lab_tasks.add("ring", ring)
