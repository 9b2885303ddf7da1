"""SPARK's recycled data (Liu et al., arXiv:2509.22624; seed_agents.md §A7; code
InternLM/Spark `Lmm_XC/openrlhf/trainer/ppo_utils/new_data_gen.py:new_data_gen`,
`reward_data_gen.py`): the groups of an RLVR step, with their verifier outcomes, become
judge and reflection examples for the same model, with labels that cost nothing.

Per group of G answers to one question (correct = the verifier's reward ≥ 1):

- all correct or all wrong → one pointwise judge of answer 0 (label Y or N);
- mixed → with probability `pointwise_prob` (0.3) a pointwise judge of one random answer
  of a randomly drawn class, else a pairwise judge of one random correct and one random
  wrong answer in random order (label: the correct one's position, 1 or 2);
- reflection (`reflection=True`): of the groups with ≥ 1 wrong answer, the first half give a
  "cot" item (question + one wrong completion's full text → the gold answer), the second
  half an "ans" item (question + one wrong final answer → the gold answer); at most
  `reflect_max` (32) are kept, a random subset in order.

A missing answer (no `<answer>…</answer>`, or one that cannot be shown in the judge's
format) is replaced by a random wrong non-missing answer of the group [code]; a group
with none to replace it gives no item [ours]. The random draws come from an injected `rng`
(`random()` in [0, 1), `randrange(n)`), in the order: per group u (mixed only), then the
class and member (pointwise) or positive, negative, order (pairwise); then the reflection
subset and each kept item's wrong answer.

Formats for the tiny model's character set [ours; the code's templates are chat prose
with \\boxed answers]: pointwise `17+25=42?` → Y / N; pairwise `17+25=42|43?` → 1 / 2;
reflection ans `17+25=43!` → 42; cot `17+25=<answer>43</answer>!` → 42. Every example
carries `prompt`, `answer` (the label) and `kind`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from policylab import rewards
from policylab.algebra.options import build_options, check_range, option
from policylab.tasks.base import extract_answer
from policylab.workflows.rounds import Collected, RecycleBuffer, Recycling
from policylab.workflows.single_turn import SingleTurn

KINDS = ("pointwise", "pairwise", "reflect_cot", "reflect_ans")
_SEPARATORS = "?|!\n"  # characters of the formats: an answer holding one cannot be shown


class Draws(Protocol):
    """The random source the builder draws from (random.Random, or a scripted one)."""

    def random(self) -> float: ...

    def randrange(self, n: int) -> int: ...


@dataclass(frozen=True)
class RecycleOptions:
    """SPARK's recycling knobs (`recycle={...}` in a run's config; the spark recipe's
    `training.recycle.*` are the defaults)."""

    reflection: bool = option(True, "build reflection items [code: iar-reflection script]")
    pointwise_prob: float = option(
        0.3, "P(pointwise) for a mixed group, else pairwise [code new_data_gen 0.3]"
    )
    reflect_max: int = option(32, "reflection items kept per step at most [code 32]")
    capacity: int = option(1024, "cached examples at most, oldest dropped (0: unbounded) [ours]")
    max_answer_chars: int = option(
        12, "a longer extracted answer counts as missing (context 128) [ours]"
    )

    def __post_init__(self) -> None:
        if not isinstance(self.reflection, bool):
            raise ValueError(f"recycle.reflection = {self.reflection!r} must be true or false")
        check_range("recycle", "pointwise_prob", self.pointwise_prob, low=0.0, high=1.0)
        for name in ("reflect_max", "capacity", "max_answer_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"recycle.{name} = {value!r} must be an integer >= 0")


@dataclass
class Group:
    """One question's rollouts: its prompt text, gold answer, completions and which of
    them the verifier accepted."""

    question: str
    gold: str
    completions: list[str]
    correct: list[bool]


@dataclass
class Built:
    """What one step's groups gave: the examples and their counts."""

    items: list[dict]
    pointwise: int = 0
    pairwise: int = 0
    reflect: int = 0
    skipped: int = 0  # groups with no showable answer: no judge item

    @property
    def pairwise_frac(self) -> float:
        judged = self.pointwise + self.pairwise
        return self.pairwise / judged if judged else 0.0


def answers_of(group: Group, options: RecycleOptions) -> list[str | None]:
    """Each completion's final answer, None where missing or not showable."""
    out: list[str | None] = []
    for text in group.completions:
        found = extract_answer(text)
        bad = (
            not found
            or len(found) > options.max_answer_chars
            or any(c in found for c in _SEPARATORS)
        )
        out.append(None if bad else found)
    return out


def _shown(i: int, answers: list, group: Group, rng: Draws) -> str | None:
    """Answer i, or (missing) a random wrong non-missing answer of the group [code]."""
    if answers[i] is not None:
        return answers[i]
    spare = [a for a, ok in zip(answers, group.correct, strict=True) if a is not None and not ok]
    return spare[rng.randrange(len(spare))] if spare else None


def judge_item(group: Group, rng: Draws, options: RecycleOptions) -> dict | None:
    """The group's one judge example (pointwise or pairwise), or None (nothing showable)."""
    answers = answers_of(group, options)
    right = [i for i, ok in enumerate(group.correct) if ok]
    wrong = [i for i, ok in enumerate(group.correct) if not ok]
    if not right or not wrong:  # one class: answer 0, pointwise
        shown = _shown(0, answers, group, rng)
        return None if shown is None else _pointwise(group, shown, bool(right))
    if rng.random() < options.pointwise_prob:
        is_right = rng.randrange(2) == 1  # class draw: 0 a wrong answer, 1 a correct one
        members = right if is_right else wrong
        shown = _shown(members[rng.randrange(len(members))], answers, group, rng)
        return None if shown is None else _pointwise(group, shown, is_right)
    positive = answers[right[rng.randrange(len(right))]]  # a correct answer is never missing
    negative = _shown(wrong[rng.randrange(len(wrong))], answers, group, rng)
    negative_first = rng.random() >= 0.5
    if positive is None or negative is None:
        return None
    first, second = (negative, positive) if negative_first else (positive, negative)
    return {
        "prompt": f"{group.question}{first}|{second}?",
        "answer": "2" if negative_first else "1",
        "kind": "pairwise",
    }


def _pointwise(group: Group, shown: str, is_right: bool) -> dict:
    return {
        "prompt": f"{group.question}{shown}?",
        "answer": "Y" if is_right else "N",
        "kind": "pointwise",
    }


def reflection_items(groups: list[Group], rng: Draws, options: RecycleOptions) -> list[dict]:
    """Reflection examples: cot from the first half of the groups with a wrong answer, ans
    from the second half, at most `reflect_max` kept (a random subset, in order)."""
    candidates = [g for g in groups if not all(g.correct)]
    half = len(candidates) // 2
    modes = ["cot"] * half + ["ans"] * (len(candidates) - half)
    kept = _subset(rng, len(candidates), options.reflect_max)
    items = []
    for k in kept:
        group, mode = candidates[k], modes[k]
        answers = answers_of(group, options)
        wrong = [i for i, ok in enumerate(group.correct) if not ok]
        i = wrong[rng.randrange(len(wrong))]
        if mode == "cot":
            shown = group.completions[i]
        else:
            shown = _shown(i, answers, group, rng)
            if shown is None:
                continue
        items.append(
            {"prompt": f"{group.question}{shown}!", "answer": group.gold, "kind": f"reflect_{mode}"}
        )
    return items


def _subset(rng: Draws, n: int, k: int) -> list[int]:
    """k of range(n) drawn without replacement (all when n ≤ k), in ascending order."""
    if n <= k:
        return list(range(n))
    pool = list(range(n))
    for j in range(k):  # partial Fisher–Yates
        swap = j + rng.randrange(n - j)
        pool[j], pool[swap] = pool[swap], pool[j]
    return sorted(pool[:k])


def build_items(groups: list[Group], rng: Draws, options: RecycleOptions) -> Built:
    """One step's recycled examples: a judge item per group (in group order), then the
    reflection items."""
    built = Built([])
    for group in groups:
        item = judge_item(group, rng, options)
        if item is None:
            built.skipped += 1
            continue
        built.items.append(item)
        setattr(built, item["kind"], getattr(built, item["kind"]) + 1)
    if options.reflection:
        reflect = reflection_items(groups, rng, options)
        built.items += reflect
        built.reflect = len(reflect)
    return built


def groups_of(
    collected: Collected, pool: list[dict], verify: Callable[[str, dict], float] | None = None
) -> list[Group]:
    """Every group an infer period generated (kept by a filter or not; rows are
    prompt-major over the drawn prompts, workflows/single_turn.py), with the verifier's
    verdict: correct = verify(completion, example) ≥ 1 (the task's verifier, whatever
    rewards the run trains on), or the run's reward ≥ 1 without one. Rows the rewards could
    not score (NaN) are left out."""
    indices, outcomes = collected.indices, collected.outcomes.tolist()
    completions = collected.info.completions
    if not indices or len(outcomes) % len(indices):
        raise ValueError(
            f"recycling: {len(outcomes)} generated rows for {len(indices)} prompts; SPARK "
            "recycles single-turn groups of samples_per_prompt rows each"
        )
    n = len(outcomes) // len(indices)
    groups = []
    for j, i in enumerate(indices):
        rows = [r for r in range(j * n, (j + 1) * n) if outcomes[r] == outcomes[r]]
        if rows:
            groups.append(
                Group(
                    pool[i]["prompt"],
                    str(pool[i]["answer"]),
                    [completions[r] for r in rows],
                    [
                        (outcomes[r] if verify is None else verify(completions[r], pool[i])) >= 1.0
                        for r in rows
                    ],
                )
            )
    return groups


class SparkBuilder:
    """`builder(collected) -> (examples, metrics)` for the recycle hook: the step's groups
    → judge and reflection examples, drawn from its own seeded RNG (checkpointed)."""

    def __init__(
        self,
        pool: list[dict],
        options: RecycleOptions,
        seed: int,
        verify: Callable[[str, dict], float] | None = None,
    ) -> None:
        self.pool, self.options, self.verify = pool, options, verify
        self.rng = random.Random(seed)

    def __call__(self, collected: Collected) -> tuple[list[dict], dict[str, float]]:
        groups = groups_of(collected, self.pool, self.verify)
        built = build_items(groups, self.rng, self.options)
        return built.items, {
            "spark/pairwise_frac": built.pairwise_frac,
            "spark/reflect_items": float(built.reflect),
            "spark/judge_items": float(built.pointwise + built.pairwise),
            "spark/skipped_groups": float(built.skipped),
        }

    def state_dict(self) -> dict:
        version, internal, gauss = self.rng.getstate()
        return {"rng": [version, list(internal), gauss]}

    def load_state_dict(self, state: dict) -> None:
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))


def recycling(source, policy, task, pool, options: RecycleOptions, cfg, generator, budget):
    """SPARK's rollout source: `source`'s infer periods, recycled into reward periods of
    `cfg.prompts_per_step` cached examples, G samples each, scored by `judge_label`."""
    judge = rewards.combine(
        {"judge_label": 1.0},
        failure_reward=cfg.failure_reward,
        timeout_s=cfg.reward_timeout_s,
        failure_limit=cfg.reward_failure_limit,
    )
    reward_workflow = SingleTurn(
        policy, task, cfg.samples_per_prompt, judge, generator, mask_truncated=cfg.mask_truncated
    )
    builder = SparkBuilder(pool, options, cfg.seed, verify=task.verify)
    buffer = RecycleBuffer(options.capacity)
    return Recycling(source, builder, reward_workflow, cfg.prompts_per_step, budget, buffer)


def recycle_options(recipe, overrides: dict) -> RecycleOptions | None:
    """The run's recycling options: the recipe's `training["recycle.*"]` defaults updated
    by the config's `recycle` field; None when neither asks for recycling."""
    defaults = {
        key.removeprefix("recycle."): s.value
        for key, s in recipe.training.items()
        if key.startswith("recycle.")
    }
    if not defaults and not overrides:
        return None
    return build_options(RecycleOptions, {**defaults, **overrides}, where="recycle")
