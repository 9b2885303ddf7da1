"""AFGR — active fine-grained recognition by view selection, on multi-view objects
(papers/seed_control_theory.md §16; Du, Yu, Wang, Chang, Lin, Li, Ma, arXiv 2206.01153;
code PRIS-CV/MAFR). Lab task `lab/multiview`; lab methods `afgr` and the baselines
`random_views`, `fixed_order`, `oracle_views`.

A GRU classifier accumulates glances at an object's views (policies/recurrent.py); AFGR's
PPO policy picks the next view, rewarded by the gain in the classifier's confidence in the
true class (algebra/view_rewards.py). Three stages by objects seen [code train.sh]:
  1. classifier (CNN + GRU + head) on random distinct views, cross-entropy at every glance;
  2. PPO on the actor-critic with the classifier frozen (one epoch per batch);
  3. classifier fine-tuned on the views the (now fixed) policy samples.
A baseline trains the same classifier for the whole budget on its own view order: random
distinct views, the fixed order 0, 1, 2, 3, or the oracle's (second view v*(c), read from
the true coarse class — privileged).

The task scores accuracy at `glances` (2) glances on a held-out balanced set, first view
uniform (view 0 for the fixed order), the actor greedy over unseen views. Exact ceilings
(envs/procedural/multiview.py `bayes_accuracy`): oracle 1.0, random 0.75, fixed 0.75."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from policylab.algebra.options import check_choice, check_range, option
from policylab.algebra.view_rewards import (
    confidence_gain,
    discounted_returns,
    normalise_batch,
    view_ppo_loss,
)
from policylab.envs.procedural import multiview as mv
from policylab.lab import add_method, lab_tasks
from policylab.policies.recurrent import GlanceAgent
from policylab.recipes.base import S
from policylab.tabular.methods import Problem, TabularMethod

KINDS = ("actor", "random", "fixed", "oracle")


# ---- the task -----------------------------------------------------------------------------
@dataclass
class Multiview:
    """The held-out set and how batches are drawn (the task's `mdp`)."""

    images: torch.Tensor  # [N, V, S, S]
    labels: torch.Tensor  # [N]
    first: torch.Tensor  # [N] first view of each held-out object (uniform)
    glances: int
    noise: float
    seed: int


@dataclass
class ViewPolicy:
    """A classifier and how it picks views: `kind` ∈ KINDS (`actor` is AFGR's policy)."""

    agent: GlanceAgent | None  # None: predict class 0 always (chance, 1/8 on a balanced set)
    kind: str = "actor"


def multiview(
    seed: int, eval_objects: int = 512, glances: int = 2, noise: float = mv.NOISE
) -> Problem:
    """`lab/multiview`: 4 coarse × 2 fine classes, 4 views of 16×16 (§16.2)."""
    check_range("lab/multiview", "glances", glances, low=1, high=mv.VIEWS)
    check_range("lab/multiview", "noise", noise, low=0.0)
    labels = mv.balanced_labels(eval_objects, seed + 7_000_001)
    images = mv.render(labels, seed + 7_000_002, noise)
    first = np.random.default_rng(seed + 7_000_003).integers(0, mv.VIEWS, eval_objects)
    task = Multiview(
        torch.from_numpy(images),
        torch.from_numpy(labels),
        torch.from_numpy(first),
        glances,
        noise,
        seed,
    )
    return Problem(
        mdp=task,
        value=lambda pi: accuracy(task, pi),
        optimum=1.0,  # the oracle's exact accuracy (T16.2)
        initial_policy=ViewPolicy(None),
        budget_unit="objects",
    )


def accuracy(task: Multiview, pi: ViewPolicy, glances: int | None = None) -> float:
    """Held-out accuracy at `glances` (the task's) glances; deterministic."""
    if pi.agent is None:
        return float((task.labels == 0).double().mean())
    generator = torch.Generator().manual_seed(task.seed + 7_000_004)  # the random baseline's
    first = torch.zeros_like(task.first) if pi.kind == "fixed" else task.first
    with torch.no_grad():
        logits, _ = rollout(
            pi.agent, task.images, task.labels, first, glances or task.glances, pi.kind, generator
        )
    return float((logits[-1].argmax(-1) == task.labels).double().mean())


# ---- glances ------------------------------------------------------------------------------
def next_view(kind, agent, h, visited, labels, t, generator, *, sample=False, mask=True):
    """The view of glance t+2 for each object: [B] (long)."""
    if kind == "fixed":
        return torch.full((h.shape[0],), t + 1, dtype=torch.long)
    unseen = (~visited).double()
    if kind == "oracle":
        star = labels // mv.FINE  # v*(c) = c
        fresh = ~visited[torch.arange(h.shape[0]), star]
        other = torch.multinomial(unseen, 1, generator=generator).squeeze(1)
        return torch.where(fresh, star, other)
    if kind == "random":
        return torch.multinomial(unseen, 1, generator=generator).squeeze(1)
    logits = agent.view_logits(h, visited if mask else None)
    if sample:
        return torch.multinomial(torch.softmax(logits, -1), 1, generator=generator).squeeze(1)
    return logits.argmax(-1)


def rollout(agent, images, labels, first, glances, kind, generator, *, sample=False, mask=True):
    """Run `glances` glances: (class logits [T, B, C], (h [T, B, H], views [T, B],
    visited-before [T, B, V]))."""
    b = images.shape[0]
    h, view = agent.start(b), first
    visited = torch.zeros(b, mv.VIEWS, dtype=torch.bool)
    logits, hs, views, masks = [], [], [], []
    for t in range(glances):
        h = agent.glance(h, images, view)
        visited = visited.clone()
        visited[torch.arange(b), view] = True
        logits.append(agent.classifier(h))
        hs.append(h)
        views.append(view)
        masks.append(visited)
        if t < glances - 1:
            view = next_view(
                kind, agent, h, visited, labels, t, generator, sample=sample, mask=mask
            )
    return torch.stack(logits), (torch.stack(hs), torch.stack(views), torch.stack(masks))


# ---- the methods --------------------------------------------------------------------------
@dataclass
class ViewOptions:
    batch: int = option(32, help="objects per step")
    glances: int = option(4, help="glances per training episode")
    cls_lr: float = option(1e-3, help="classifier Adam step")

    def __post_init__(self) -> None:
        check_range("options", "batch", self.batch, low=1)
        check_range("options", "glances", self.glances, low=2, high=mv.VIEWS)
        check_range("options", "cls_lr", self.cls_lr, low=0.0, low_open=True)


@dataclass
class AFGROptions(ViewOptions):
    stage1_objects: int = option(9600, help="objects of stage 1 (classifier, random views)")
    stage2_objects: int = option(9600, help="objects of stage 2 (PPO, classifier frozen)")
    ppo_lr: float = option(5e-3, help="actor-critic Adam step")
    gamma: float = option(0.7, help="discount of the confidence-gain returns")
    clip: float = option(0.2, help="PPO ratio clip")
    epochs: int = option(1, help="PPO epochs per batch")
    value_coef: float = option(0.5, help="weight of the critic's squared error")
    entropy_coef: float = option(1e-4, help="entropy bonus weight")
    finetune_lr_scale: float = option(0.1, help="stage 3 classifier step = cls_lr × this")
    train_mask: bool = option(True, help="mask seen views while sampling in training too")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("stage1_objects", "stage2_objects", "epochs"):
            check_range("options", name, getattr(self, name), low=0)
        check_range("options", "gamma", self.gamma, low=0.0, high=1.0)
        check_range("options", "clip", self.clip, low=0.0, low_open=True)
        check_range("options", "finetune_lr_scale", self.finetune_lr_scale, low=0.0)
        check_choice("options", "train_mask", self.train_mask, (True, False))


def draw(task: Multiview, batch: int, generator: torch.Generator):
    """A fresh batch (labels [B], images [B, V, S, S], first views [B]) from `generator`."""
    labels = torch.randint(0, mv.CLASSES, (batch,), generator=generator)
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
    images = torch.from_numpy(mv.render(labels.numpy(), seed, task.noise))
    first = torch.randint(0, mv.VIEWS, (batch,), generator=generator)
    return labels, images, first


def classifier_step(state, task, options, generator, kind, lr_scale=1.0):
    """Cross-entropy at every glance on `kind`'s views (the policy's, sampled, for actor)."""
    agent, opt = state["agent"], state["cls_opt"]
    labels, images, first = draw(task, options.batch, generator)
    if kind == "fixed":
        first = torch.zeros_like(first)
    mask = getattr(options, "train_mask", True)
    logits, _ = rollout(
        agent, images, labels, first, options.glances, kind, generator, sample=True, mask=mask
    )
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.repeat(options.glances))
    for group in opt.param_groups:
        group["lr"] = options.cls_lr * lr_scale
    opt.zero_grad()
    loss.backward()
    opt.step()
    right = (logits.argmax(-1) == labels).double().mean(1)
    return {"cls/loss": float(loss.detach()), "cls/acc_glance2": float(right[1])}


def ppo_step(state, task, options, generator):
    """Stage 2: roll out the sampled policy (classifier frozen), one PPO epoch."""
    agent, opt = state["agent"], state["ppo_opt"]
    labels, images, first = draw(task, options.batch, generator)
    with torch.no_grad():
        logits, (h, views, visited) = rollout(
            agent,
            images,
            labels,
            first,
            options.glances,
            "actor",
            generator,
            sample=True,
            mask=options.train_mask,
        )
        confidence = torch.softmax(logits, -1).gather(-1, labels.expand(len(logits), -1)[..., None])
        returns = normalise_batch(
            discounted_returns(confidence_gain(confidence[..., 0]), options.gamma)
        )
        h, masks, actions = h[:-1], visited[:-1], views[1:]  # the state each action was taken in
        old_logp = _log_probs(agent, h, masks, options.train_mask).gather(-1, actions[..., None])[
            ..., 0
        ]
    for _ in range(options.epochs):
        logp_all = _log_probs(agent, h, masks, options.train_mask)
        logp = logp_all.gather(-1, actions[..., None])[..., 0]
        entropy = -(logp_all.exp() * logp_all.masked_fill(logp_all.isinf(), 0.0)).sum(-1)
        loss = view_ppo_loss(
            logp,
            old_logp,
            returns,
            agent.value(h),
            entropy,
            clip=options.clip,
            value_coef=options.value_coef,
            entropy_coef=options.entropy_coef,
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    star = (views[1] == labels // mv.FINE) | (views[0] == labels // mv.FINE)
    return {
        "ppo/loss": float(loss.detach()),
        "ppo/seen_informative_2": float(star.double().mean()),
        "ppo/confidence_gain": float(confidence[-1].mean() - confidence[0].mean()),
    }


def _log_probs(agent, h, masks, mask):
    return torch.log_softmax(agent.view_logits(h, masks if mask else None), -1)


def _init(problem, options, generator):
    agent = GlanceAgent(mv.VIEWS, mv.CLASSES, mv.SIZE)
    # the agent's weights come from the run's generator, so a seed fixes the whole run
    with torch.no_grad():
        for p in agent.parameters():
            p.copy_(_reinit(p, generator))
    state = {"agent": agent, "objects": 0}
    state["cls_opt"] = torch.optim.Adam(agent.classifier_parameters(), lr=options.cls_lr)
    if isinstance(options, AFGROptions):
        state["ppo_opt"] = torch.optim.Adam(
            agent.policy_parameters(), lr=options.ppo_lr, betas=(0.9, 0.999)
        )
    return state


def _reinit(p: torch.Tensor, generator) -> torch.Tensor:
    """uniform(±1/√fan_in) (a bias: its length as fan_in) [ours], drawn from `generator`."""
    fan_in = p.shape[1] * (p[0][0].numel() if p.dim() > 2 else 1) if p.dim() > 1 else p.shape[0]
    bound = 1.0 / fan_in**0.5
    return (torch.rand(p.shape, generator=generator) * 2 - 1) * bound


def _afgr_step(problem, state, options, generator):
    task, seen = problem.mdp, state["objects"]
    if seen < options.stage1_objects:
        metrics = {"stage": 1, **classifier_step(state, task, options, generator, "random")}
    elif seen < options.stage1_objects + options.stage2_objects:
        metrics = {"stage": 2, **ppo_step(state, task, options, generator)}
    else:
        scale = options.finetune_lr_scale
        metrics = {"stage": 3, **classifier_step(state, task, options, generator, "actor", scale)}
    state["objects"] = seen + options.batch
    return state, {"cost": options.batch, **metrics}


def _baseline_step(kind):
    def step(problem, state, options, generator):
        metrics = classifier_step(state, problem.mdp, options, generator, kind)
        state["objects"] += options.batch
        return state, {"cost": options.batch, **metrics}

    return step


def _policy(kind):
    return lambda problem, state: ViewPolicy(state["agent"], kind)


def _checkpoint(state) -> dict[str, Any]:
    saved = {"agent": state["agent"].state_dict(), "objects": state["objects"]}
    for key in ("cls_opt", "ppo_opt"):
        if key in state:
            saved[key] = state[key].state_dict()
    return saved


def _restore(problem, options, saved):
    state = _init(problem, options, torch.Generator().manual_seed(0))
    state["agent"].load_state_dict(saved["agent"])
    state["objects"] = int(saved["objects"])
    for key in ("cls_opt", "ppo_opt"):
        if key in saved:
            state[key].load_state_dict(saved[key])
    return state


PAPER = "Du et al., Multi-View Active Fine-Grained Recognition, arXiv 2206.01153 (ICCV 2023)"
COMMON = {
    "batch": S(32, "[code PRIS-CV/MAFR:configs.py batch_size]"),
    "glances": S(4, "[ours: the paper's T = views (8), scaled to our 4 views]"),
    "cls_lr": S(
        1e-3,
        "[ours: Adam for a small CNN from scratch; the paper fine-tunes a "
        "pretrained ResNet-50 by SGD 0.01/0.1]",
    ),
}
AFGR_DEFAULTS = {
    **COMMON,
    "stage1_objects": S(9600, "[ours: the paper's stage lengths are epochs of MvCars]"),
    "stage2_objects": S(9600, "[ours]"),
    "ppo_lr": S(5e-3, "[code PRIS-CV/MAFR:train.py argparse ppo_lr]"),
    "gamma": S(0.7, "[code PRIS-CV/MAFR:network.py PPO gamma]"),
    "clip": S(0.2, "[code PRIS-CV/MAFR:network.py PPO eps_clip]"),
    "epochs": S(1, "[code PRIS-CV/MAFR:network.py PPO K_epochs]"),
    "value_coef": S(0.5, "[code PRIS-CV/MAFR:network.py PPO.update]"),
    "entropy_coef": S(1e-4, "[code PRIS-CV/MAFR:network.py PPO.update]"),
    "finetune_lr_scale": S(0.1, "[ours]"),
    "train_mask": S(True, "[ours: the code masks seen views at test only (overlap_mask)]"),
}


def register() -> None:
    if "multiview" not in lab_tasks:
        lab_tasks.add("multiview", multiview)
    add_method(
        TabularMethod(
            tasks=("multiview",),
            name="afgr",
            title="AFGR: PPO view selection rewarded by confidence gain",
            paper=PAPER,
            formula="r_t = p_{t+1}(y) − p_t(y); G = γ-returns (γ 0.7), normalised; PPO clip 0.2",
            options=AFGROptions,
            defaults=AFGR_DEFAULTS,
            init=_init,
            step=_afgr_step,
            policy=_policy("actor"),
            checkpoint=_checkpoint,
            restore=_restore,
            notes=(
                "stages: classifier on random views → PPO, classifier frozen → "
                "classifier fine-tuned on the policy's views [code train.sh]",
            ),
        )
    )
    for name, kind, title in (
        ("random_views", "random", "GRU classifier on random distinct views"),
        ("fixed_order", "fixed", "GRU classifier on the fixed view order 0, 1, 2, 3"),
        ("oracle_views", "oracle", "GRU classifier on the oracle's views (v*(c) second)"),
    ):
        add_method(
            TabularMethod(
                tasks=("multiview",),
                name=name,
                title=title,
                paper=f"baseline for AFGR ({PAPER})",
                formula="cross-entropy at every glance on this view order",
                options=ViewOptions,
                defaults=COMMON,
                init=_init,
                step=_baseline_step(kind),
                policy=_policy(kind),
                checkpoint=_checkpoint,
                restore=_restore,
            )
        )


register()
