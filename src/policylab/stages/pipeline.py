"""A run's stages, built from its config and recipe before any model loads, and the
rollout source that turns them into each step's kept groups."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from policylab.algebra.options import build_options
from policylab.algebra.selection import AllOptions, Selection, select_all, stage_of
from policylab.rollouts import Rollouts
from policylab.stages.base import Budget, Stage, StageContext, stages
from policylab.stages.prompts import PromptStage
from policylab.stages.rollouts import RULE_STAGES, AdvantageSelector, Filter, TokenMask
from policylab.workflows.rounds import Collected, collect_groups


@dataclass
class Pipeline:
    """The stages of one run, by kind: one prompt source, then any annotators and
    augmenters, at most one filter, advantage-time selectors, at most one token mask."""

    prompts: PromptStage | None  # None: the workflow has no prompts (control)
    annotators: list[Stage] = field(default_factory=list)
    augmenters: list[Stage] = field(default_factory=list)
    filter: Filter | None = None
    selectors: list[AdvantageSelector] = field(default_factory=list)
    token_mask: TokenMask | None = None

    def __iter__(self) -> Iterator[Stage]:
        yield from [self.prompts] if self.prompts is not None else []
        yield from self.annotators
        yield from self.augmenters
        yield from [self.filter] if self.filter is not None else []
        yield from self.selectors
        yield from [self.token_mask] if self.token_mask is not None else []

    def setup(self, ctx: StageContext) -> None:
        """Once per process, before a resumed run restores the stages' state."""
        for stage in self:
            if hasattr(stage, "setup"):
                stage.setup(ctx)

    def prepare(self, step: int, ctx: StageContext) -> None:
        """Before each step (`step` = steps done)."""
        for stage in self:
            if hasattr(stage, "prepare"):
                stage.prepare(step, ctx)

    def select(self, batch: Rollouts, advantages, step: int, total_steps: int):
        """The advantage-time selectors in order: the kept rows and their advantages."""
        _, batch, advantages = self.keep(batch, advantages, step, total_steps)
        return batch, advantages

    def keep(self, batch: Rollouts, advantages, step: int, total_steps: int):
        """(indices of the kept rows in `batch`, the kept rows with the selectors' token
        weights applied to their mask, their advantages), the selectors in order."""
        rows = torch.arange(len(batch))
        for selector in self.selectors:
            chosen = selector.select(batch, advantages, step, total_steps)
            kept = chosen.row_keep.nonzero(as_tuple=True)[0]
            rows, advantages, batch = rows[kept], advantages[kept], chosen.apply(batch)
            selector.last = chosen.metrics
        return rows, batch, advantages

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for stage in self:
            out.update(stage.metrics())
        return out

    def state_dict(self) -> dict[str, Any]:
        return {stage.name: stage.state_dict() for stage in self}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        missing = [stage.name for stage in self if stage.name not in state]
        if missing:
            raise ValueError(
                f"the checkpoint has no state for stage(s) {', '.join(missing)} (it holds "
                f"{', '.join(state) or 'none'}): resume with the stages the run was started with"
            )
        for stage in self:
            stage.load_state_dict(state[stage.name])

    def legacy_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """The stages' state of a checkpoint written before stages existed (keys "sampler",
        "curvature", "augmenter"), by the kind that held each."""
        old = {"prompts": "sampler", "learn": "curvature", "augment": "augmenter"}
        return {s.name: state.get(old.get(s.kind, "")) or {} for s in self}

    def describe(self) -> dict[str, dict[str, Any]]:
        """{name: {kind, options}} for the resolved config."""
        return {s.name: {"kind": s.kind, **_fields(s.options)} for s in self}


def build_pipeline(cfg, parts, pool_size: int, *, provided=None) -> Pipeline:
    """The stages a language-model run of `cfg` uses, every option checked: the prompt
    source (offline data, the configured sampler, or the recipe's), the annotators the
    components read and the workflow (its columns `provided`, default a single-turn
    rollout's) lacks, the augmenter, and the selection at the stage it declares. A config
    without offline data or augmentation fields (the bandit's) has neither."""
    recipe = parts.recipe
    sampler = cfg.sampler or recipe.sampler or "uniform"
    offline, augment = getattr(cfg, "offline_prompts", 0), getattr(cfg, "augment", "none")
    if (offline or augment != "none") and (sampler != "uniform" or cfg.sampler_options):
        why = f"offline_prompts={offline}" if offline else f"augment={augment}"
        raise ValueError(
            f"{why} draws its prompts uniformly; {cfg.algo}'s prompt sampler is {sampler!r} "
            f"(options {cfg.sampler_options}): use sampler=uniform without sampler_options"
        )
    if offline:
        name, options = "offline", {"prompts": offline}
    elif sampler == "offline":
        raise ValueError("sampler=offline: set offline_prompts=N to train on offline data")
    else:
        name = sampler
        options = recipe.component_defaults("sampler") if name == recipe.sampler else {}
        options = {**options, **cfg.sampler_options}
    prompts = _stage(name, options, "prompts")(
        build_options(stages.entry(name).config, options, where=f"sampler {name!r}"),
        pool_size,
        cfg.seed,
    )
    pipeline = Pipeline(prompts)
    if augment != "none":
        cls = _stage(cfg.augment, cfg.augment_options, "augment")
        where = f"augment {cfg.augment!r}"
        pipeline.augmenters.append(
            cls(build_options(cls.Options, cfg.augment_options, where=where), seed=cfg.seed)
        )
    rule = parts.selection
    if not getattr(rule.fn, "keeps_everything", False):
        stage = RULE_STAGES[rule.stage](rule)
        if isinstance(stage, AdvantageSelector):
            pipeline.selectors.append(stage)
        elif isinstance(stage, TokenMask):
            pipeline.token_mask = stage
        else:
            pipeline.filter = stage
    provided = WORKFLOW_COLUMNS if provided is None else provided
    pipeline.annotators = annotators_for(parts, provided, list(pipeline))
    return pipeline


# what a single-turn rollout carries without any annotator (workflows/single_turn.py)
WORKFLOW_COLUMNS = frozenset(
    {
        "rewards",
        "response_ids",
        "response_mask",
        "logprobs",
        "entropy",
        "group_ids",
        "truncated",
        "reward_parts",
        "prompt_ids",
        "ref_logprobs",
    }
)


def reads_of(parts, present: list[Stage] = ()) -> dict[str, tuple[str, ...]]:
    """{component or stage: the columns it reads}, as each declares (`reads`)."""
    named = {"advantage": parts.advantage, "loss": parts.loss, "selection": parts.selection}
    out = {
        f"{kind} {c.name!r}": tuple(getattr(c.options, "reads", ())) for kind, c in named.items()
    }
    out.update({f"stage {s.name!r}": tuple(s.reads) for s in present})
    return out


def annotators_for(parts, available: frozenset[str], present: list[Stage] = ()) -> list[Stage]:
    """The annotators that provide what the components and the `present` stages read and
    the workflow lacks: each time the one providing most of what is still missing (ties by
    name). A column nothing provides is an error naming its reader, before any model
    loads."""
    missing = {col: who for who, cols in reads_of(parts, present).items() for col in cols}
    for col in available:
        missing.pop(col, None)
    candidates = [stages.get(n) for n in stages.names() if stages.get(n).kind == "annotate"]
    chosen: list[Stage] = []
    while missing:
        best = max(candidates, key=lambda c: len(set(c.provides) & set(missing)), default=None)
        if best is None or not set(best.provides) & set(missing):
            col, who = next(iter(missing.items()))
            raise ValueError(
                f"{who} reads {col!r}, which this workflow does not provide and no annotate "
                f"stage adds (annotate stages: {', '.join(c.name for c in candidates)})"
            )
        chosen.append(best(best.Options()))
        candidates.remove(best)
        for col in best.provides:
            missing.pop(col, None)
    return chosen


# what a control rollout carries (workflows/episodes.py): one row per time step
CONTROL_COLUMNS = frozenset(
    {"rewards", "response_mask", "logprobs", "values", "actions", "dones", "truncated", "entropy"}
)


def control_pipeline(parts) -> Pipeline:
    """The stages a control run uses: its rows are time steps of environments, not groups
    of responses to prompts, so only an advantage-time selection applies (the control
    recipes name none; `selection=d3s` puts one on). Checked before any environment starts."""
    pipeline = Pipeline(prompts=None)
    rule = parts.selection
    if not getattr(rule.fn, "keeps_everything", False):
        stage = RULE_STAGES[rule.stage](rule)
        if not isinstance(stage, AdvantageSelector):
            raise ValueError(
                f"selection {rule.name!r} runs at {rule.stage!r}; on control time steps only "
                "an advantage-time selection applies (choices: "
                f"{', '.join(n for n in selections_at('advantages'))})"
            )
        pipeline.selectors.append(stage)
    if annotators_for(parts, CONTROL_COLUMNS, list(pipeline)):
        raise ValueError(f"{rule.name!r} reads columns a control rollout does not carry")
    return pipeline


def selections_at(stage: str) -> list[str]:
    from policylab.algebra.catalogue import selections

    return [n for n in selections.names() if stage_of(selections.get(n)) == stage]


def _stage(name: str, options: dict, kind: str) -> type[Stage]:
    """The registered stage class `name`, which must be of `kind`."""
    choices = [n for n in stages.names() if stages.get(n).kind == kind and n != "offline"]
    if name not in stages or stages.get(name).kind != kind:
        raise ValueError(f"unknown {kind} stage {name!r}; choices: {', '.join(choices)}")
    return stages.get(name)


def _fields(options: Any) -> dict[str, Any]:
    return dataclasses.asdict(options) if dataclasses.is_dataclass(options) else {}


class RolloutSource:
    """Each step's kept groups: rounds of (prompts drawn by the prompt stage → stored
    groups, or generation by the workflow with its annotators → augmenters) until the
    filter has kept `groups` of them; every generated sample and token is charged."""

    def __init__(self, pool: list[dict], pipeline: Pipeline, workflow, budget: Budget, cfg):
        self.pool, self.pipeline, self.workflow, self.budget = pool, pipeline, workflow, budget
        self.groups, self.max_rounds, self.on_exhaust = (
            cfg.prompts_per_step,
            cfg.max_gen_rounds,
            cfg.on_exhaust,
        )

    def next(self) -> Collected:
        keep = self.pipeline.filter
        collected = collect_groups(
            self._round,
            keep.select if keep is not None else _keep_all,
            self.groups,
            max_rounds=self.max_rounds,
            on_exhaust=self.on_exhaust,
        )
        if keep is not None:
            keep.last = collected.metrics
        spent = collected.samples if self.pipeline.prompts.spends else 0
        self.budget.charge(spent, collected.info.generated_tokens)
        return collected

    def update(self, collected: Collected) -> None:
        """What the prompt stage learns from the step's outcomes (VADE's posteriors)."""
        self.pipeline.prompts.update(collected.indices, collected.outcomes)

    def _round(self):
        prompts = self.pipeline.prompts
        indices = prompts.sample(self.groups)
        stored = prompts.stored(indices)
        if stored is not None:
            return stored
        examples = [self.pool[i] for i in indices]
        batch, info = self.workflow(examples)
        for augmenter in self.pipeline.augmenters:
            batch, info, extra = augmenter.augment(examples, batch, info, self.workflow)
            self.budget.charge(extra)
        return indices, batch, info


def _keep_all(batch: Rollouts) -> Selection:
    return select_all(batch, None, AllOptions())
