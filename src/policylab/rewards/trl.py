"""What TRL's GRPOTrainer hands its reward functions, so that theirs run here unchanged.

TRL calls `fn(prompts=..., completions=..., completion_ids=..., trainer_state=...,
**columns)`: every argument by keyword, every dataset column but "prompt" and
"completion" as a list (one value per completion), `completion_ids` the sampled token
ids of each completion, `trainer_state` the run's progress (`global_step`, `max_steps`,
`epoch`, as `transformers.TrainerState` names them). When the prompts are
conversational (lists of {"role", "content"} messages), each completion is a
conversation of one assistant message, `[{"role": "assistant", "content": text}]`,
whose content starts with the prompt's final assistant message when the prompt ends
with one (a prefilled reply); plain-text prompts keep plain-text completions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

EXTRAS = ("completion_ids", "trainer_state")  # what TRL passes besides prompts, completions


def is_conversational(prompt: Any) -> bool:
    """A prompt given as chat messages: a non-empty list of dicts with a "role"."""
    return (
        isinstance(prompt, (list, tuple))
        and bool(prompt)
        and all(isinstance(m, dict) and "role" in m for m in prompt)
    )


def as_completions(prompts: Sequence, completions: Sequence) -> list:
    """TRL's completions: a text completion of a conversational prompt becomes
    `[{"role": "assistant", "content": prefill + text}]`, where `prefill` is the content
    of the prompt's last message when that message is the assistant's; anything else
    (plain-text prompts, completions already given as messages) is kept as it is."""
    out = []
    for prompt, completion in zip(prompts, completions, strict=True):
        if isinstance(completion, str) and is_conversational(prompt):
            last = prompt[-1]
            prefill = last.get("content", "") if last.get("role") == "assistant" else ""
            completion = [{"role": "assistant", "content": f"{prefill}{completion}"}]
        out.append(completion)
    return out


@dataclass
class TrainerState:
    """The run's progress as TRL's reward functions read `trainer_state`, under the names
    of `transformers.TrainerState` (importing transformers for it would cost seconds):
    `global_step` optimiser steps done before these completions were sampled,
    `max_steps` the run's steps, `epoch` passes over the training prompts (fractional)."""

    global_step: int = 0
    max_steps: int = 0
    epoch: float = 0.0
    num_train_epochs: int = 1
    log_history: list[dict[str, float]] = field(default_factory=list)
    is_local_process_zero: bool = True
    is_world_process_zero: bool = True
