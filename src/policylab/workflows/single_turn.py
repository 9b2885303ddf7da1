"""Single-turn rollouts: prompts → n completions each → rewards → Rollouts.

Rows are prompt-major: rows i·n … i·n + n − 1 answer prompt i and form group i. Every
column of the examples (answer, numbers, …) is repeated per row and handed to the
reward functions; per-function rewards are kept in `reward_parts`.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field

import torch

from policylab.algebra.selection import accuracy
from policylab.policies.language_model import LanguageModelPolicy
from policylab.prompting import PLAIN, PromptFormat, check_room, context_length
from policylab.rewards import CombinedReward, RewardCounts
from policylab.rollouts import Rollouts


@dataclass
class RolloutInfo:
    completions: list[str]
    prompts: list  # one per row
    failures: dict[str, int]
    generated_tokens: int
    generate_s: float  # wall time in the engine
    score_s: float  # wall time in the reward functions (environment steps for agents)
    metrics: dict[str, float] = field(default_factory=dict)  # the workflow's own (agent/*)
    # per reward function: failed, non-finite and unscored samples (None: the workflow has
    # no reward functions, e.g. environments' rewards, or stored rollouts)
    reward_counts: RewardCounts | None = None
    # samples generated when not one per row (an agent's turns left out of the rows, e.g.
    # a frozen actor's); None: one per completion
    generated_samples: int | None = None

    @property
    def samples(self) -> int:
        """Samples generated: what a step is charged in `budget/samples`."""
        if self.generated_samples is None:
            return len(self.completions)
        return self.generated_samples

    @classmethod
    def concat(cls, infos: list[RolloutInfo]) -> RolloutInfo:
        """One info for several rollouts (generation rounds): rows in order, sums."""
        failures: Counter[str] = Counter()
        for info in infos:
            failures.update(info.failures)
        counts = [info.reward_counts for info in infos if info.reward_counts is not None]
        return cls(
            [c for info in infos for c in info.completions],
            [p for info in infos for p in info.prompts],
            dict(failures),
            sum(info.generated_tokens for info in infos),
            sum(info.generate_s for info in infos),
            sum(info.score_s for info in infos),
            _mean_metrics([info.metrics for info in infos]),
            sum(counts[1:], counts[0]) if counts else None,
            None
            if all(info.generated_samples is None for info in infos)
            else sum(info.samples for info in infos),
        )


def _mean_metrics(rounds: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for m in rounds for k in m}
    return {k: sum(m[k] for m in rounds if k in m) / sum(k in m for m in rounds) for k in keys}


def newline_ids(tokenizer) -> list[int]:
    """Ids of every token whose text contains a line break (computed once per tokenizer)."""
    cached = getattr(tokenizer, "_policylab_newline_ids", None)
    if cached is None:
        vocab = tokenizer.get_vocab().values()
        cached = [i for i in vocab if "\n" in tokenizer.decode([i])]
        tokenizer._policylab_newline_ids = cached
    return cached


def rollout(
    examples: list[dict],
    policy: LanguageModelPolicy,
    n: int,
    reward_fn: CombinedReward,
    *,
    generator: torch.Generator | None = None,
    mask_truncated: bool = False,
    prompt_format: PromptFormat = PLAIN,
) -> tuple[Rollouts, RolloutInfo]:
    """Sample `n` completions per example from `policy`, score them, and pack the batch.
    Prompts are rendered by `prompt_format`; the reward functions see them as given."""
    prompts = [e["prompt"] for e in examples]
    ids = prompt_format.encode(policy.tokenizer, prompts)
    context = context_length(policy.model.config)
    check_room(ids, prompts, context, policy.sampling.max_new_tokens, what="training prompt")
    start = time.perf_counter()
    gen = policy.sample(ids, generator=generator, n=n)
    texts = gen.extras["texts"]
    generated = time.perf_counter()
    row_prompts = [p for p in prompts for _ in range(n)]
    columns = {
        k: [e[k] for e in examples for _ in range(n)]
        for k in examples[0]
        if k not in ("prompt", "completion")
    }
    # the sampled tokens of each row (its end token included), as TRL's completion_ids
    completion_ids = [row[m > 0].tolist() for row, m in zip(gen.actions, gen.mask, strict=True)]
    scored = reward_fn(row_prompts, texts, completion_ids=completion_ids, **columns)
    scored_at = time.perf_counter()
    truncated = torch.tensor([r == "length" for r in gen.extras["finish_reason"]])
    mask = gen.mask.clone()
    if mask_truncated:
        mask[truncated] = 0
    rewards = torch.tensor(scored.total, dtype=torch.float32)
    batch = Rollouts(
        rewards=rewards,
        response_mask=mask,
        group_ids=torch.arange(len(prompts)).repeat_interleave(n),
        response_ids=gen.actions,
        logprobs=gen.logprobs,
        entropy=gen.entropy,
        truncated=truncated,
        reward_parts={k: torch.tensor(v, dtype=torch.float32) for k, v in scored.parts.items()},
        # columns only some methods read (steps, answers) come from annotate stages
        extras={"prompt_ids": [p for p in ids for _ in range(n)]},
    )
    tokens = int(gen.mask.sum())
    info = RolloutInfo(
        texts,
        row_prompts,
        scored.failures,
        tokens,
        generated - start,
        scored_at - generated,
        reward_counts=scored.counts,
    )
    if any(math.isnan(r) for r in scored.total):
        info.failures = {**info.failures, "unscored": sum(math.isnan(r) for r in scored.total)}
    return batch, info


def score_prompts(
    examples: list[dict],
    policy: LanguageModelPolicy,
    n: int,
    reward_fn: CombinedReward,
    *,
    generator: torch.Generator | None = None,
    chunk: int = 16,
    prompt_format: PromptFormat = PLAIN,
) -> tuple[torch.Tensor, list[list[list[int]]], RolloutInfo]:
    """A scoring pass (VAS, papers §7): n completions of each example, `chunk` examples
    per generation call. Returns the accuracy [P, n] (the reward part "acc" if present,
    else the total), each completion's token ids, and the rounds' info (for the budget)."""
    correct, responses, infos = [], [], []
    for start in range(0, len(examples), chunk):
        batch, info = rollout(
            examples[start : start + chunk],
            policy,
            n,
            reward_fn,
            generator=generator,
            prompt_format=prompt_format,
        )
        correct.append(accuracy(batch).view(-1, n))
        masks = batch.response_mask > 0
        ids = [row[m].tolist() for row, m in zip(batch.response_ids, masks, strict=True)]
        responses += [ids[i : i + n] for i in range(0, len(ids), n)]
        infos.append(info)
    return torch.cat(correct), responses, RolloutInfo.concat(infos)


class SingleTurn:
    """The single-turn workflow of one run: `workflow(examples) -> (Rollouts, RolloutInfo)`
    samples G completions per example from the policy, scores them and applies the run's
    annotators (stages of kind "annotate"); `score(examples, n)` is a scoring pass (VAS)."""

    def __init__(
        self,
        policy: LanguageModelPolicy,
        task,
        n: int,
        reward_fn: CombinedReward,
        generator: torch.Generator,
        *,
        mask_truncated: bool = False,
        annotators: list | None = None,
        prompt_format: PromptFormat = PLAIN,
    ) -> None:
        self.policy, self.tokenizer, self.task = policy, policy.tokenizer, task
        self.prompt_format = prompt_format
        self.n, self.reward_fn = n, reward_fn
        self.generator, self.mask_truncated = generator, mask_truncated
        self.annotators = annotators or []

    def __call__(self, examples: list[dict]) -> tuple[Rollouts, RolloutInfo]:
        batch, info = rollout(
            examples,
            self.policy,
            self.n,
            self.reward_fn,
            generator=self.generator,
            mask_truncated=self.mask_truncated,
            prompt_format=self.prompt_format,
        )
        for annotator in self.annotators:
            batch = annotator.annotate(batch, examples, info, self)
        return batch, info

    def score(self, examples: list[dict], n: int, *, chunk: int = 16):
        """`score_prompts` with this run's policy and rewards."""
        return score_prompts(
            examples,
            self.policy,
            n,
            self.reward_fn,
            generator=self.generator,
            chunk=chunk,
            prompt_format=self.prompt_format,
        )
