"""d2-AnyOrder's one-pass likelihood: the attention-mask builder and the `any_order` entry
of the `mdm_logprob` registry (papers/seed_generative.md G0.4, G1.4).

The pass reads one sequence of length P + 2L [code d2:d2AnyOrderTrainer.get_logits]:

    [ prompt (P) | y permuted into reveal order (L) | L mask tokens ]

with position ids of the original positions (the l-th mask repeats the position of the
l-th revealed token, the one it predicts) and a boolean attention mask A[row, column]
(True = the row may attend to the column):

- every row sees the whole (real) prompt;
- the revealed token at order index l sees the revealed tokens at order indices ≤ l
  (causal in reveal order);
- the mask at order index l sees the revealed tokens of earlier *groups* and itself — no
  other mask, no token of its own group, so it predicts y at its position from exactly the
  state the sampler revealed it from; logp is read at the masks and gathered back into the
  original position order.

Groups: d2's AnyOrder sampler reveals exactly 2 tokens per step and its mask groups order
indices in pairs, l // 2 [code d2:get_logits `pair_mask`]; `tokens_per_step=k` reproduces
that, `tokens_per_step=None` groups by the reveal step ρ itself [ours: our LLaDA sampler
reveals a varying n_j per step (transfer_counts), and grouping by ρ makes the mask row of
token t see exactly z_{ρ_t}, so `any_order` equals `exact_steps` on a model that does
any-order decoding exactly; with 2 tokens per step the two groupings coincide]. Ties in the
reveal order (several tokens revealed in one step) are ordered by position [ours: d2 orders
the pair by position too, select_index_1 = min, select_index_2 = max].

Padding: a left-padded prompt's pads (`pad_id`) are seen by no row but their own (the
diagonal keeps every softmax row non-empty); positions count real tokens, as in
`MaskedDiffusionLM.forward`, so padding does not shift them.

What is not built: a model that can use this mask. `MaskedDiffusionLM` is a bidirectional
encoder trained for masked denoising with a key-padding mask only; d2 fine-tunes LLaDA for
any-order causal decoding before using this estimator, and training such a tiny model is a
separate, later issue (G1.4). The estimator therefore refuses every model that does not
declare `supports_any_order = True` and implement `forward(input_ids, position_ids,
attn_mask)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.algebra.mdm import prompt_mask
from policylab.policies.mdm_logprob import MDMLogprobConfig, mdm_logprob

PAIR = 2  # [code d2:d2AnyOrderTrainer.generate `num_tokens = 2`, get_logits `// 2`]


@dataclass(frozen=True)
class AnyOrderInputs:
    """One any-order pass. T = P + 2L.

    input_ids [B, T]: prompt, y in reveal order, L mask tokens; position_ids [B, T];
    attn_mask [B, T, T] bool, True = the row may attend to the column; order [B, L]:
    order[b, l] = the original position of the l-th revealed token; inverse [B, L]:
    inverse[b, t] = the order index of position t; gather [B, L]: the column of the mask
    that predicts position t (P + L + inverse), to read logits back in position order."""

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    attn_mask: torch.Tensor
    order: torch.Tensor
    inverse: torch.Tensor
    gather: torch.Tensor


def reveal_order(reveal: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(order, inverse) [B, L]: positions sorted by reveal step, ties by position."""
    length = reveal.shape[1]
    key = reveal.long() * length + torch.arange(length)
    order = key.argsort(dim=1)
    inverse = order.argsort(dim=1)
    return order, inverse


def any_order_inputs(
    prompt_ids: torch.Tensor,
    response_ids: torch.Tensor,
    reveal: torch.Tensor,
    mask_id: int,
    tokens_per_step: int | None = PAIR,
    *,
    pad_id: int | None = None,
) -> AnyOrderInputs:
    """The any-order pass of G1.4 for prompts [B, P] (left-padded with `pad_id`, or no
    padding when `pad_id` is None), responses [B, L] and reveal steps [B, L]. Groups of
    `tokens_per_step` in reveal order (d2: 2) or, with None, one group per reveal step."""
    _check_inputs(prompt_ids, response_ids, reveal, tokens_per_step)
    rows, width = prompt_ids.shape
    length = response_ids.shape[1]
    total = width + 2 * length
    order, inverse = reveal_order(reveal)
    if tokens_per_step is None:
        group = reveal.long().gather(1, order)
    else:
        group = (torch.arange(length) // tokens_per_step).expand(rows, length)

    valid = (
        torch.ones_like(prompt_ids, dtype=torch.bool) if pad_id is None else prompt_ids != pad_id
    )
    real = valid.long().sum(1, keepdim=True)
    prompt_positions = (valid.long().cumsum(1) - 1).clamp(min=0)
    completion_positions = real + order
    position_ids = torch.cat([prompt_positions, completion_positions, completion_positions], 1)
    input_ids = torch.cat(
        [prompt_ids, response_ids.gather(1, order), torch.full_like(response_ids, mask_id)], 1
    )

    attn = torch.zeros(rows, total, total, dtype=torch.bool)
    attn[:, :, :width] = valid[:, None, :]  # everyone sees the real prompt
    diagonal = torch.arange(total)
    attn[:, diagonal, diagonal] = True  # a pad row sees itself; masks see themselves
    revealed = slice(width, width + length)
    masks = slice(width + length, total)
    attn[:, revealed, revealed] = torch.ones(length, length, dtype=torch.bool).tril()
    attn[:, masks, revealed] = group[:, :, None] > group[:, None, :]
    return AnyOrderInputs(input_ids, position_ids, attn, order, inverse, width + length + inverse)


def check_any_order_model(model) -> None:
    """Refuse a model that does not declare any-order causal decoding."""
    if getattr(model, "supports_any_order", False) is not True:
        raise ValueError(
            f"estimator any_order: {type(model).__name__} does not declare "
            "supports_any_order = True; it needs a model fine-tuned for any-order causal "
            "decoding (d2-AnyOrder) with forward(input_ids, position_ids, attn_mask); "
            "training one is a later issue (G1.4). Use one_step, step_merge or exact_steps "
            "for a MaskedDiffusionLM."
        )


@mdm_logprob.register("any_order")
def any_order(
    model,
    prompt_ids,
    response_ids,
    reveal,
    cfg: MDMLogprobConfig,
    *,
    generator=None,
    temperature=None,
    tokens_per_step: int | None = None,
):
    """d2-AnyOrder: every token y_t scored at its mask, which sees the prompt and the
    tokens revealed in earlier groups — one pass of length P + 2L [code d2:get_logits,
    _get_per_token_logps]. Needs `model.supports_any_order` (refused before any work
    otherwise). The prompt is re-masked as by the other estimators (one draw from
    `generator`) [ours: d2-AnyOrder does not re-mask; set prompt_mask_p = 0 for that].
    `tokens_per_step`: None groups by reveal step (exact given the reveal, the default
    [ours], see the module docstring); 2 is d2's pairs."""
    check_any_order_model(model)
    _check_reveal_steps(reveal, response_ids, cfg)
    _check_inputs(prompt_ids, response_ids, reveal, tokens_per_step)
    valid = prompt_ids != model.pad_id
    uniforms = torch.rand(prompt_ids.shape, generator=generator)
    hidden = prompt_mask(uniforms, cfg.prompt_mask_p, valid)
    prompt = torch.where(hidden, torch.full_like(prompt_ids, model.mask_id), prompt_ids)
    inputs = any_order_inputs(
        prompt, response_ids, reveal, model.mask_id, tokens_per_step, pad_id=model.pad_id
    )
    logits = model(inputs.input_ids, inputs.position_ids, inputs.attn_mask)
    at = logits.gather(1, inputs.gather[..., None].expand(-1, -1, logits.shape[-1]))
    tau = cfg.temperature if temperature is None else temperature[..., None]
    logp = (at / tau).log_softmax(-1).gather(-1, response_ids[..., None])[..., 0]
    return logp, 1


def _check_inputs(prompt_ids, response_ids, reveal, tokens_per_step) -> None:
    if tokens_per_step is not None and (
        isinstance(tokens_per_step, bool)
        or not isinstance(tokens_per_step, int)
        or tokens_per_step < 1
    ):
        raise ValueError(
            f"tokens_per_step = {tokens_per_step!r}; accepted: an integer >= 1 (d2: 2) or "
            "None (one group per reveal step)"
        )
    if prompt_ids.dim() != 2 or response_ids.dim() != 2:
        raise ValueError(
            f"prompt_ids {tuple(prompt_ids.shape)} and response_ids "
            f"{tuple(response_ids.shape)}; accepted: 2-D [B, P] and [B, L]"
        )
    if reveal is None or reveal.shape != response_ids.shape:
        shape = None if reveal is None else tuple(reveal.shape)
        raise ValueError(
            f"reveal has shape {shape}; any_order needs the reveal steps [B, L] = "
            f"{tuple(response_ids.shape)} that MaskedDiffusionLM.generate returns"
        )
    if prompt_ids.shape[0] != response_ids.shape[0]:
        raise ValueError(
            f"prompt_ids has {prompt_ids.shape[0]} rows, response_ids "
            f"{response_ids.shape[0]}; accepted: equal"
        )
    if reveal.numel() and reveal.min() < 0:
        raise ValueError(f"reveal steps start at {int(reveal.min())}; accepted: >= 0")


def _check_reveal_steps(reveal, response_ids, cfg: MDMLogprobConfig) -> None:
    if reveal is not None and reveal.shape == response_ids.shape and reveal.numel():
        if reveal.min() < 0 or reveal.max() >= cfg.steps:
            raise ValueError(
                f"reveal steps span {int(reveal.min())} .. {int(reveal.max())}; accepted: "
                f"0 .. steps − 1 = {cfg.steps - 1} (MDMLogprobConfig.steps = {cfg.steps})"
            )
