"""An engine over a masked diffusion LM (papers/seed_generative.md G0.3, G1.7): the Engine
protocol's `generate(prompt_ids, n, sampling, generator) -> Generations`, decoding by G1.2.

What differs from an autoregressive engine: `logprobs` are zeros (an MDM has no exact
per-token log-probability; the trainer scores rows with an `mdm_logprob` estimator), and
each row's reveal steps ρ come back in `reveal` [N·n, L], which the estimators read.
`Sampling.temperature` is τ_s; `max_new_tokens` must be the model's completion length L
(the canvas is fixed); top-p, top-k and stop strings are not part of LLaDA's sampler and
are refused rather than ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.engines.base import Generations, Sampling, check_request, load_unless_shared
from policylab.policies.masked_lm import MaskedDiffusionLM, MDMSampling, decode
from policylab.policies.mdm_schedule import SchedulePolicy


@dataclass
class MDMEngineGenerations(Generations):
    """`Generations` plus the reveal step of every completion position [N·n, L] and, with a
    Co-GRPO schedule policy, the schedule actions each row was decoded with [N·n, S, 2]."""

    reveal: torch.Tensor | None = None
    schedule_actions: torch.Tensor | None = None


class MDMEngine:
    """Generation from a `MaskedDiffusionLM` the trainer also optimises (shared object).
    `steps`, `block` and `remasking` are the decoding settings of `MDMSampling`."""

    def __init__(
        self,
        model: MaskedDiffusionLM,
        tokenizer,
        *,
        steps: int = 6,
        block: int = 0,
        remasking: str = "low_confidence",
    ) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.steps, self.block, self.remasking = steps, block, remasking
        MDMSampling(model.config.completion_length, steps, block, 1.0, remasking)  # checks

    def load_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        load_unless_shared(self.model, state_dict)

    def generate(
        self,
        prompt_ids: list[list[int]],
        n: int,
        sampling: Sampling,
        generator: torch.Generator | None = None,
        schedule: SchedulePolicy | None = None,
    ) -> MDMEngineGenerations:
        """With `schedule` (Co-GRPO's π_φ, G1.5): every row's actions are drawn from it with
        `generator` before decoding (its mean when greedy, τ_s = 0) and returned."""
        check_request(prompt_ids, n)
        length = self.model.config.completion_length
        if sampling.max_new_tokens != length:
            raise ValueError(
                f"Sampling.max_new_tokens = {sampling.max_new_tokens}: a masked diffusion LM "
                f"decodes a fixed canvas; accepted: its completion_length {length}"
            )
        if sampling.top_p != 1.0 or sampling.top_k or sampling.stop_strings:
            raise ValueError(
                "top_p, top_k and stop_strings are not part of the MDM sampler (G1.2); "
                "accepted: top_p 1, top_k 0, no stop strings"
            )
        mdm = MDMSampling(length, self.steps, self.block, sampling.temperature, self.remasking)
        rows = [p for p in prompt_ids for _ in range(n)]
        actions = None
        if schedule is not None:
            if sampling.greedy:
                actions = schedule.mean_actions(len(rows))
            else:
                actions = schedule.sample(len(rows), generator)
        out = self.model.generate(rows, mdm, generator, schedule=actions)
        texts = decode(self.tokenizer, out.response_ids, self.model.eos_id)
        return MDMEngineGenerations(
            response_ids=out.response_ids,
            logprobs=torch.zeros(out.response_ids.shape),
            response_mask=out.response_mask,
            finish_reason=out.finish_reason,
            texts=texts,
            prompt_index=torch.arange(len(prompt_ids)).repeat_interleave(n),
            reveal=out.reveal,
            schedule_actions=actions,
        )
