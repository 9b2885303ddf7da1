"""The policy protocol every policy kind implements: `sample` and `evaluate`.

A policy maps inputs (observations, states, prompts) to a distribution over actions.
Trainers and workflows need two things from it, and only these two:

- `sample(inputs, *, generator)` → `Sample`: actions drawn at rollout time, with their
  log-probs under the sampling policy (no grad), and what else is free at that moment
  (entropy, critic values, per-row draws that `evaluate` must see again).
- `evaluate(inputs, actions, *, mask, extras)` → `Evaluation`: log-probs of given actions
  under the current parameters, with grad, for the loss; entropy where the kind has one;
  values where it has a critic.

Shapes. A row is one sampled response (language model) or one time step (control, table).
Per-row kinds give log-probs [B]; token kinds give [B, T] with a 0/1 `mask` [B, T] that
marks real positions (masked positions hold 0). The shared algebra reads [B, T], so a
per-row kind's log-probs become [B, 1] with `.unsqueeze(-1)`.

Implementations add keyword options with defaults (`deterministic`, `n`, `sampling`);
the protocol is `runtime_checkable`, so `isinstance(policy, Policy)` checks that both
methods exist (not their signatures). docs/policies.md lists the kinds and how the
coming ones fit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch


@dataclass
class Sample:
    """What `sample` drew, B rows (no grad).

    actions: [B] long (discrete, table), [B, D] float (continuous), [B, T] token ids
        (language model, right-padded).
    logprobs: log π_old(action) — [B], or [B, T] per token for token kinds.
    mask: [B, T] 0/1 real positions for token kinds; None when a row is one action.
    entropy: entropy of the sampling distribution, shaped as logprobs; None when not cheap.
    values: critic V(s) [B]; None without a critic.
    extras: per-row things `evaluate` must see again (FlowPolicy's FPO draws: tensors with
        B rows) and what the kind reports beside (the language model's `prompt_index`,
        `finish_reason`, `texts`)."""

    actions: torch.Tensor
    logprobs: torch.Tensor
    mask: torch.Tensor | None = None
    entropy: torch.Tensor | None = None
    values: torch.Tensor | None = None
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class Evaluation:
    """What `evaluate` computes for given actions, B rows, with grad.

    `logp, entropy, values = policy.evaluate(...)` unpacks the first three fields.
    logprobs: log π_θ(action), shaped as `Sample.logprobs` ([B] or [B, T], 0 where masked).
    entropy: shaped as logprobs, or None; may be detached where the kind says so.
    values: critic V(s) [B] with grad, or None without a critic.
    head: what the output layer saw, for a stage that models it (CAPO), when asked for
        (`with_head=True`): "head_input" [B, T, d] and "logits" [B, T, V], detached."""

    logprobs: torch.Tensor
    entropy: torch.Tensor | None
    values: torch.Tensor | None
    head: dict[str, torch.Tensor] = field(default_factory=dict)

    def __iter__(self):
        return iter((self.logprobs, self.entropy, self.values))


@runtime_checkable
class Policy(Protocol):
    """sample → actions with their log-probs; evaluate → log-probs (with grad), entropy,
    values. `inputs` is the kind's: the network input normalize(obs) [B, obs_dim] for
    control, states [B] for a table, prompt token ids (list of lists) for a language
    model."""

    def sample(self, inputs: Any, *, generator: torch.Generator | None = None) -> Sample: ...

    def evaluate(
        self,
        inputs: Any,
        actions: torch.Tensor,
        *,
        mask: torch.Tensor | None = None,
        extras: dict[str, Any] | None = None,
    ) -> Evaluation: ...
