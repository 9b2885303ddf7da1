"""Likelihood estimators for masked diffusion LMs: the registry `mdm_logprob`
(papers/seed_generative.md G0.4, G1.3, G1.4).

Every entry is `fn(model, prompt_ids [B, P], response_ids [B, L], reveal [B, L], cfg, *,
generator, temperature=None) -> (logp [B, L], forward_passes)` (temperature: an optional τ
per token [B, L], Co-GRPO's step τ_s), where `model(ids, attention_mask)` gives logits
[B, T, V] and has `mask_id` and `pad_id` (a `MaskedDiffusionLM`); prompts are left-padded
with `pad_id`; `reveal` holds the step ρ at which each position was revealed.
logp[i, t] = log softmax(logits/τ)[y_t] at completion position t, read from

| name | completion state the token is scored from | passes |
|---|---|---|
| `one_step` | all L positions M (d1) | 1 |
| `step_merge` | the snapshot at the start of the StepMerge segment holding ρ_t (d2) | N |
| `exact_steps` | z_{ρ_t} itself (`step_merge` with N = S) | S |

and in every pass the prompt has each real token replaced by M with probability
`prompt_mask_p` — one draw per call from `generator`, shared by the passes, so equal
generator seeds give equal masks and r = 1 at θ = θ_old (G1.3, G1.9).

What no estimator contains: the probability of *which* positions were revealed. With
`remasking=random` that choice does not depend on θ and `exact_steps` is the exact
log-likelihood of the trajectory; with `low_confidence` it is ignored (as by d1 and d2)
[G0.4]. `any_order` (d2-AnyOrder, policies/mdm_anyorder.py) scores in one pass with an
order-aware attention mask; it refuses a model not trained for any-order decoding, which
MaskedDiffusionLM is not (G1.4: training one is a separate, later issue).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from policylab.algebra.mdm import prompt_mask, segment_start_of, segment_starts
from policylab.registry import Registry

SCORE_TEMPERATURES = ("sampling", "one")


@dataclass(frozen=True)
class MDMLogprobConfig:
    """Estimator knobs. prompt_mask_p 0.15 [code d1 train.yaml; the config default is 0.3];
    segments N of `step_merge` (clamped to steps, G1.9) [d2 uses 8–16 at S = 64–256; ours 2
    at the toy's S = 6]; steps S of the sampler that produced `reveal`; temperature: the τ
    logits are divided by when scoring — the sampling τ_s (`score_temperature=sampling`, our
    default, so the ratio compares the behaviour policy with itself) or 1 (`one`, what both
    official codes do) [G0.4]; use `score_temperature()` to pick it."""

    prompt_mask_p: float = 0.15
    segments: int = 2
    steps: int = 6
    temperature: float = 1.0

    def __post_init__(self) -> None:
        if not 0 <= self.prompt_mask_p <= 1:
            raise ValueError(
                f"MDMLogprobConfig.prompt_mask_p = {self.prompt_mask_p}; accepted: [0, 1]"
            )
        for name in ("segments", "steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"MDMLogprobConfig.{name} = {value!r}; accepted: an integer >= 1")
        if not (self.temperature > 0 and math.isfinite(self.temperature)):
            raise ValueError(
                f"MDMLogprobConfig.temperature = {self.temperature}; accepted: finite and > 0 "
                "(RL with τ_s = 0 is refused: greedy decoding has no likelihood ratio, G1.9)"
            )


def score_temperature(choice: str, sampling_temperature: float) -> float:
    """The scoring τ for `score_temperature` ∈ {sampling, one} (G0.4)."""
    if choice not in SCORE_TEMPERATURES:
        raise ValueError(
            f"score_temperature = {choice!r}; accepted: {', '.join(SCORE_TEMPERATURES)}"
        )
    return sampling_temperature if choice == "sampling" else 1.0


Estimator = Callable[..., tuple[torch.Tensor, int]]
mdm_logprob: Registry[Estimator] = Registry("mdm likelihood estimator")


def score_from_segments(
    model,
    prompt_ids: torch.Tensor,
    response_ids: torch.Tensor,
    reveal: torch.Tensor,
    starts: list[int],
    cfg: MDMLogprobConfig,
    generator: torch.Generator | None,
    temperature: torch.Tensor | None = None,
) -> tuple[torch.Tensor, int]:
    """logp [B, L] with each token scored from z_s, s = the start of its segment (the
    state with positions ρ < s revealed), one forward pass per segment start. `temperature`
    [B, L]: a τ per token (Co-GRPO: its step's τ_s) in place of `cfg.temperature`."""
    valid = prompt_ids != model.pad_id
    uniforms = torch.rand(prompt_ids.shape, generator=generator)
    hidden = prompt_mask(uniforms, cfg.prompt_mask_p, valid)
    prompt = torch.where(hidden, torch.full_like(prompt_ids, model.mask_id), prompt_ids)
    attention = torch.cat([valid, torch.ones_like(response_ids, dtype=torch.bool)], 1)
    width = prompt_ids.shape[1]
    start_of = segment_start_of(reveal, starts)
    logp = torch.zeros(response_ids.shape)
    for s in starts:
        state = torch.where(reveal < s, response_ids, torch.full_like(response_ids, model.mask_id))
        logits = model(torch.cat([prompt, state], 1), attention)[:, width:]
        tau = cfg.temperature if temperature is None else temperature[..., None]
        token = (logits / tau).log_softmax(-1).gather(-1, response_ids[..., None])
        logp = torch.where(start_of == s, token[..., 0], logp)
    return logp, len(starts)


@mdm_logprob.register("one_step")
def one_step(
    model,
    prompt_ids,
    response_ids,
    reveal,
    cfg: MDMLogprobConfig,
    *,
    generator=None,
    temperature=None,
):
    """d1's one-step estimate: every completion token scored from the all-M completion
    with the prompt re-masked (1 pass) [code d1:diffu_grpo_trainer.py:forward_process,
    _get_per_token_logps]. `reveal` is not read (may be None)."""
    zeros = torch.zeros_like(response_ids)
    return score_from_segments(
        model, prompt_ids, response_ids, zeros, [0], cfg, generator, temperature
    )


@mdm_logprob.register("step_merge")
def step_merge(
    model,
    prompt_ids,
    response_ids,
    reveal,
    cfg: MDMLogprobConfig,
    *,
    generator=None,
    temperature=None,
):
    """d2's StepMerge(N): token t scored from the snapshot at the start of the segment
    holding ρ_t, boundaries ⌊k·S/N⌋ (N passes) [code d2:d2StepMergeTrainer.generate,
    _get_per_token_logps_oldandref]. N = 1 is `one_step`; N = S is `exact_steps`."""
    _check_reveal(reveal, response_ids, cfg)
    starts = segment_starts(cfg.steps, cfg.segments)
    return score_from_segments(
        model, prompt_ids, response_ids, reveal, starts, cfg, generator, temperature
    )


@mdm_logprob.register("exact_steps")
def exact_steps(
    model,
    prompt_ids,
    response_ids,
    reveal,
    cfg: MDMLogprobConfig,
    *,
    generator=None,
    temperature=None,
):
    """The per-step log-likelihood Σ_s Σ_{t: ρ_t = s} log p_θ(y_t | z_s): `step_merge`
    with N = S (S passes) [d2's limit; exact given the revealed positions, G0.4]."""
    _check_reveal(reveal, response_ids, cfg)
    starts = segment_starts(cfg.steps, cfg.steps)
    return score_from_segments(
        model, prompt_ids, response_ids, reveal, starts, cfg, generator, temperature
    )


def _check_reveal(reveal, response_ids: torch.Tensor, cfg: MDMLogprobConfig) -> None:
    if reveal is None or reveal.shape != response_ids.shape:
        shape = None if reveal is None else tuple(reveal.shape)
        raise ValueError(
            f"reveal has shape {shape}; this estimator needs the reveal steps [B, L] = "
            f"{tuple(response_ids.shape)} that MaskedDiffusionLM.generate returns"
        )
    if reveal.numel() and (reveal.min() < 0 or reveal.max() >= cfg.steps):
        raise ValueError(
            f"reveal steps span {int(reveal.min())} .. {int(reveal.max())}; accepted: "
            f"0 .. steps − 1 = {cfg.steps - 1} (MDMLogprobConfig.steps = {cfg.steps})"
        )
