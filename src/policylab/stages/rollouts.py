"""Stages that act on each generated round: annotators (columns a component reads),
augmenters (replace some prompts of the round) and filters (drop groups; the rollout
source refills the step with new rounds, workflows/rounds.py)."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from policylab.algebra.bcpg import STEP_LABELS
from policylab.algebra.copo import ANSWERS
from policylab.algebra.empg import segment_ids_from_newlines
from policylab.algebra.options import option
from policylab.algebra.selection import Selection
from policylab.rollouts import Rollouts
from policylab.stages.base import Stage, StageContext, register
from policylab.tasks.base import extract_answer
from policylab.workflows.augment import DifficultyAugmenter, augment_round
from policylab.workflows.offline import label_steps
from policylab.workflows.single_turn import RolloutInfo, newline_ids

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NoOptions:
    pass


@register
class StepLabels(Stage):
    """BCPG-NSA's step labels (papers §15): the task's step judge splits each completion
    into steps and labels each right or wrong; sets `segment_ids` and
    `extras["step_correct"]`. A task without a judge labels no step (plain BCPG)."""

    name = "step_labels"
    kind = "annotate"
    Options = NoOptions
    provides = ("segment_ids", STEP_LABELS)

    def setup(self, ctx: StageContext) -> None:
        if getattr(ctx.workflow.task, "step_labels", None) is None:
            log.warning(
                "%s has no step judge: no step is labelled, so NSA weights nothing",
                ctx.workflow.task,
            )

    def annotate(
        self, batch: Rollouts, examples: list[dict], info: RolloutInfo, workflow
    ) -> Rollouts:
        judge = getattr(workflow.task, "step_labels", None)
        return label_steps(batch, examples, workflow.tokenizer, judge)


@register
class LineSegments(Stage):
    """Steps = lines: `segment_ids` [B, T] numbers each response token's line (EMPG's
    per-step entropy, papers §11)."""

    name = "line_segments"
    kind = "annotate"
    Options = NoOptions
    provides = ("segment_ids",)

    def annotate(
        self, batch: Rollouts, examples: list[dict], info: RolloutInfo, workflow
    ) -> Rollouts:
        breaks = newline_ids(workflow.tokenizer)
        return batch.replace(segment_ids=segment_ids_from_newlines(batch.response_ids, breaks))


@register
class Answers(Stage):
    """Each row's final answer (<answer>…</answer>, None if absent) in
    `extras["answers"]` (COPO's consistency, papers §12)."""

    name = "answers"
    kind = "annotate"
    Options = NoOptions
    provides = (ANSWERS,)

    def annotate(
        self, batch: Rollouts, examples: list[dict], info: RolloutInfo, workflow
    ) -> Rollouts:
        found = [extract_answer(text) for text in info.completions]
        return batch.replace(extras={**batch.extras, ANSWERS: found})


@dataclass(frozen=True)
class DifficultyOptions:
    window: int = option(100, "W: recent group means in the buffer [paper App. C.1]")
    tol: float = option(0.0, "vary a group when |ΔR| > tol [ours]")
    reward_range: float = option(1.0, "R_max − R_min, the scale of ℓ [ours]")
    only_uniform_groups: bool = option(False, "vary only zero-variance groups [ours]")


@register
class Difficulty(Stage):
    """Reg-GRPO's difficulty-aware augmentation (arXiv:2506.07464 Eq. 9;
    workflows/augment.py): a group better than the recent mean is rolled out again as a
    harder variant, a worse one as an easier variant, in place of the original; the
    variants' samples are charged."""

    name = "difficulty"
    kind = "augment"
    Options = DifficultyOptions
    spends = "samples"

    def __init__(self, options: DifficultyOptions, seed: int = 0) -> None:
        super().__init__(options)
        self.augmenter = DifficultyAugmenter(**dataclasses.asdict(options), seed=seed)

    def augment(
        self, examples: list[dict], batch: Rollouts, info: RolloutInfo, workflow
    ) -> tuple[Rollouts, RolloutInfo, int]:
        """The round with its planned groups replaced, and the extra samples generated."""
        return augment_round(examples, batch, info, self.augmenter, workflow.task, workflow)

    def metrics(self) -> dict[str, float]:
        return self.augmenter.metrics()

    def state_dict(self) -> dict[str, Any]:
        return self.augmenter.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.augmenter.load_state_dict(state)


class RuleStage(Stage):
    """A stage over a registered selection rule (algebra/selection.py): the rule is the
    formula, the stage says when it runs and keeps the rule's state, if it has one."""

    Options = type(None)

    def __init__(self, rule) -> None:
        super().__init__(rule.options)
        self.rule = rule
        self.name = rule.name
        make_state = getattr(rule.fn, "make_state", None)
        self.state = make_state(rule.options) if make_state is not None else None
        self.last: dict[str, float] = {}  # the rule's metrics at its last call this step

    def metrics(self) -> dict[str, float]:
        return self.last

    def state_dict(self) -> dict[str, Any]:
        return self.state.state_dict() if self.state is not None else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.state is not None:
            self.state.load_state_dict(state)


class Filter(RuleStage):
    """A `filter`: the rule on each round (advantages not yet known); dropped groups are
    replaced by new rounds (DAPO's dynamic sampling)."""

    kind = "filter"

    def select(self, batch: Rollouts) -> Selection:
        return self.rule(batch)


class AdvantageSelector(RuleStage):
    """An `advantages` stage: the rule once per step on the kept groups' advantages, with
    the training progress (D³S's schedules)."""

    kind = "advantages"

    def select(self, batch: Rollouts, advantages, step: int, total_steps: int) -> Selection:
        return self.rule(batch, advantages, {"step": step, "total_steps": total_steps})


class TokenMask(RuleStage):
    """A `learn` stage: the rule on every micro-batch, with that forward pass's head
    input and logits in `extras`, the rule's state and the current lr (CAPO). The policy
    evaluates with `with_head=True` for it."""

    kind = "learn"
    needs_head = True

    def mask(self, part: Rollouts, advantages, head: dict, lr: float) -> Selection:
        """`head`: the forward pass's "head_input" [B, T, d] and "logits" [B, T, V]."""
        part = part.with_extras(head)
        return self.rule(part, advantages, {"state": self.state, "lr": lr})


RULE_STAGES = {"rollouts": Filter, "advantages": AdvantageSelector, "learn": TokenMask}
