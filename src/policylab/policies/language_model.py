"""A causal language model as a policy: an action is a response, a row of token ids.

`sample` is the engine's generation (engines/: n responses per prompt, each token's
log-prob under the temperature-scaled distribution); `evaluate` is models.py's
`response_forward` over the same tokens (one forward of [prompt | response], with grad).
Both log-probs are per token, [B, T], 0 where the response mask is 0; on the same
parameters they agree (tests/policies/test_language_model.py), so the first update's
ratio is 1 without an extra forward."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from policylab.engines.base import Engine, Sampling
from policylab.engines.hf import HFEngine
from policylab.models import response_forward
from policylab.policies.base import Evaluation, Sample


class LanguageModelPolicy(nn.Module):
    """A `transformers` causal LM with its tokenizer and engine (default: an HFEngine on
    the same model object). `sampling` is how `sample` draws by default, and its
    temperature is the one `evaluate` scores under (1 when greedy, as the engine)."""

    def __init__(
        self,
        model,
        tokenizer,
        *,
        sampling: Sampling | None = None,
        engine: Engine | None = None,
        value_head: bool = False,
        packing: bool = False,
    ) -> None:
        super().__init__()
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad token; set tokenizer.pad_token first")
        self.model, self.tokenizer = model, tokenizer
        self.sampling = sampling or Sampling()
        self.engine = engine if engine is not None else HFEngine(model, tokenizer)
        self.packing = packing  # evaluate on packed rows (packing.py)
        # the critic of PPO-style recipes (papers/seed_agents.md §A0.7): V = w·h + b on the
        # shared trunk's final hidden state (TRL's AutoModelForCausalLMWithValueHead
        # layout); zero-initialised, so V starts at 0 [ours]
        self.value_head = None
        if value_head:
            self.value_head = nn.Linear(model.config.hidden_size, 1)
            nn.init.zeros_(self.value_head.weight)
            nn.init.zeros_(self.value_head.bias)

    @property
    def temperature(self) -> float:
        return self.sampling.temperature if not self.sampling.greedy else 1.0

    def sample(
        self,
        prompt_ids: list[list[int]],
        *,
        generator: torch.Generator | None = None,
        n: int = 1,
        sampling: Sampling | None = None,
    ) -> Sample:
        """n responses to each of the N prompts, prompt-major (B = N·n rows): actions =
        response ids [B, T] (right-padded), logprobs and entropy [B, T], mask [B, T] (the
        end token included). extras: "prompt_ids" (each row's prompt, what `evaluate`
        reads), "prompt_index" [B], "finish_reason" and "texts" (lists of B). A `sampling`
        other than the policy's draws (and scores) under its own temperature."""
        gen = self.engine.generate(prompt_ids, n, sampling or self.sampling, generator)
        index = gen.prompt_index
        if index is None:
            index = torch.arange(len(prompt_ids)).repeat_interleave(n)
        extras = {
            "prompt_ids": [prompt_ids[i] for i in index.tolist()],
            "prompt_index": index,
            "finish_reason": gen.finish_reason,
            "texts": gen.texts,
        }
        return Sample(
            gen.response_ids,
            gen.logprobs,
            mask=gen.response_mask,
            entropy=gen.entropy,
            extras=extras,
        )

    def evaluate(
        self,
        prompt_ids: list[list[int]],
        actions: torch.Tensor,
        *,
        mask: torch.Tensor | None = None,
        extras: dict[str, Any] | None = None,
        with_entropy: bool = True,
        with_head: bool = False,
        observation_mask: torch.Tensor | None = None,
    ) -> Evaluation:
        """Per-token log π_θ [B, T] (with grad) of responses `actions` [B, T] after one
        prompt per row (`Sample.extras["prompt_ids"]`), 0 where mask [B, T] is 0 (default:
        every position real); entropy [B, T] detached (None without `with_entropy`);
        values [B, T] from the value head (None without one; 0 where mask is 0); with
        `with_head`, the head's input and logits (CAPO's stage reads them).
        `observation_mask` [B, T]: tokens inside the response that are attended to but not
        scored (multi-turn rows: the environment's text)."""
        if mask is None:
            mask = torch.ones(actions.shape)
        if len(prompt_ids) != actions.shape[0]:
            raise ValueError(
                f"evaluate got {len(prompt_ids)} prompts for {actions.shape[0]} responses; "
                "pass one prompt per row (Sample.extras['prompt_ids'])"
            )
        out = response_forward(
            self.model,
            prompt_ids,
            actions,
            mask,
            pad_id=self.tokenizer.pad_token_id,
            temperature=self.temperature,
            with_entropy=with_entropy,
            with_head=with_head,
            observation_mask=observation_mask,
            with_hidden=self.value_head is not None,
            packing=self.packing,
        )
        head = {"head_input": out.head_input, "logits": out.logits} if with_head else {}
        values = None
        if self.value_head is not None:
            values = self.value_head(out.hidden.float()).squeeze(-1)
            values = (values * (mask > 0).to(values.device)).to(mask.device)
        return Evaluation(out.logprobs, out.entropy, values, head)
