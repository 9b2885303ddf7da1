"""Held-out evaluation of a causal LM on a task: greedy accuracy and sampled reward."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.engines import HFEngine, Sampling
from policylab.prompting import PLAIN, PromptFormat, check_room, context_length


@dataclass(frozen=True)
class EvalResult:
    task: str
    n: int
    greedy_accuracy: float  # fraction of greedy answers with full reward (1.0)
    greedy_reward: float  # mean verifier reward of the greedy answers
    sampled_reward: float  # mean verifier reward at temperature 1

    def as_dict(self) -> dict[str, float]:
        return {
            "eval/greedy_accuracy": self.greedy_accuracy,
            "eval/greedy_reward": self.greedy_reward,
            "eval/sampled_reward": self.sampled_reward,
        }


METRICS = tuple(EvalResult("", 0, 0.0, 0.0, 0.0).as_dict())  # what a held-out evaluation logs


def prompt_ids(tokenizer, prompts: list) -> list[list[int]]:
    """Token ids of plain-text prompts, or of chat messages via the chat template
    (`PromptFormat.encode` with the default format)."""
    return PLAIN.encode(tokenizer, prompts)


def evaluate(
    model,
    tokenizer,
    task,
    *,
    n: int = 200,
    seed: int = 0,
    max_new_tokens: int = 24,
    batch_size: int = 256,
    prompt_format: PromptFormat = PLAIN,
    reward=None,
) -> EvalResult:
    """Score `n` held-out examples of `task` (a `policylab.tasks.Task`), its prompts
    rendered by `prompt_format` (plain text by default; chat=True for instruct models),
    with its verifier, or with `reward` when given (a `rewards.CombinedReward`, e.g. the
    training rewards of a task with no verifier of its own): its total per sample, called
    as in training (conversational completions, completion_ids); samples it cannot score
    (NaN) are left out of the mean rewards and count as not solved."""
    examples = task.examples("test", n, seed=seed)
    engine = HFEngine(model, tokenizer)
    context = context_length(model.config)
    columns = {
        k: [e[k] for e in examples] for k in examples[0] if k not in ("prompt", "completion")
    }
    prompts = [e["prompt"] for e in examples]
    generator = torch.Generator().manual_seed(seed)
    scores: dict[str, list[float]] = {"greedy": [], "sampled": []}
    for mode, sampling in (
        ("greedy", Sampling(temperature=0.0, max_new_tokens=max_new_tokens)),
        ("sampled", Sampling(temperature=1.0, max_new_tokens=max_new_tokens)),
    ):
        for start in range(0, len(prompts), batch_size):
            chunk = slice(start, start + batch_size)
            ids = prompt_format.encode(tokenizer, prompts[chunk])
            check_room(
                ids, prompts[chunk], context, max_new_tokens, first=start, what="held-out prompt"
            )
            out = engine.generate(ids, 1, sampling, generator)
            cols = {k: v[chunk] for k, v in columns.items()}
            if reward is None:
                scores[mode] += task.reward(prompts[chunk], out.texts, **cols)
            else:
                masks = zip(out.response_ids, out.response_mask, strict=True)
                completion_ids = [row[m > 0].tolist() for row, m in masks]
                scored = reward(prompts[chunk], out.texts, completion_ids=completion_ids, **cols)
                scores[mode] += scored.total
    greedy = scores["greedy"]
    return EvalResult(
        task=task.name,
        n=len(examples),
        greedy_accuracy=sum(s >= 1.0 for s in greedy) / len(greedy),
        greedy_reward=_mean(greedy),
        sampled_reward=_mean(scores["sampled"]),
    )


def _mean(scores: list[float]) -> float:
    """The mean of the scored samples (NaN: unscored, left out); NaN when none is."""
    scored = [s for s in scores if s == s]
    return sum(scored) / len(scored) if scored else float("nan")
