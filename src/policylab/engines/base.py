"""The engine contract shared by the Hugging Face engine and (later) vLLM."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch


@dataclass(frozen=True)
class Sampling:
    """How to sample. temperature 0 means greedy."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = no top-k
    max_new_tokens: int = 32
    stop_strings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"Sampling.temperature = {self.temperature} must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"Sampling.top_p = {self.top_p} must be in (0, 1]")
        if self.top_k < 0:
            raise ValueError(f"Sampling.top_k = {self.top_k} must be >= 0 (0 = off)")
        if self.max_new_tokens < 1:
            raise ValueError(f"Sampling.max_new_tokens = {self.max_new_tokens} must be >= 1")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass
class Generations:
    """n responses per prompt, prompt-major (rows i*n ... i*n + n - 1 belong to prompt i).

    response_ids [N*n, T] right-padded with the pad id; logprobs [N*n, T] of each sampled
    token under the temperature-scaled policy (0 on padding); response_mask [N*n, T];
    finish_reason "stop" (end token or stop string) or "length"; entropy [N*n, T] of the
    sampling distribution at each step (full vocabulary, temperature-scaled; 0 on padding),
    when the engine reports it."""

    response_ids: torch.Tensor
    logprobs: torch.Tensor
    response_mask: torch.Tensor
    finish_reason: list[str]
    texts: list[str] = field(default_factory=list)
    prompt_index: torch.Tensor | None = None  # [N*n] which prompt each row answers
    entropy: torch.Tensor | None = None

    @property
    def truncated(self) -> torch.Tensor:
        return torch.tensor([r == "length" for r in self.finish_reason])


def load_unless_shared(model: torch.nn.Module, state_dict: dict[str, torch.Tensor]) -> None:
    """Copy `state_dict` into `model` unless it already holds the same tensors (an engine
    that shares the trainer's model needs no copy)."""
    own = model.state_dict()
    if any(own[k].data_ptr() != v.data_ptr() for k, v in state_dict.items() if k in own):
        model.load_state_dict(state_dict)


class Engine(Protocol):
    def generate(
        self,
        prompt_ids: list[list[int]],
        n: int,
        sampling: Sampling,
        generator: torch.Generator | None = None,
    ) -> Generations: ...

    def load_weights(self, state_dict: dict[str, torch.Tensor]) -> None: ...


def check_request(prompt_ids: list[list[int]], n: int) -> None:
    """What every engine refuses before generating: n < 1, or a prompt without tokens."""
    if n < 1:
        raise ValueError(f"n = {n}: need at least one sample per prompt")
    if not prompt_ids or any(len(p) == 0 for p in prompt_ids):
        raise ValueError("every prompt needs at least one token")
