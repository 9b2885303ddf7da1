"""A language model as a control policy network (FLAG-Trader, arXiv:2502.11433;
papers/seed_agents.md §A5): one forward per decision over the state written as text,
an action-restricted policy head and a value head on the same trunk, and partial
fine-tuning of the top decoder layers.

    h = LM_trunk(text(s))[last position]           (final hidden state, after the norm)
    π(a|s) = softmax(W_P·h)_a,  a ∈ {B, S, H}       W_P [3, d] = the embedding rows of B, S, H
    V(s) = w_V·h + b_V                              (TRL's ValueHead layout, A0.7)

π is the LM's own next-token distribution restricted to the three action tokens
(exp ℓ_a / Σ_{a′} exp ℓ_{a′}) at initialisation. The shipped model ties its input
embeddings and LM head, so freezing the embeddings would freeze the LM head: the policy
head is a copy of those three rows, trained on its own [ours, §A5].

`trainable_layers = k`: only the top k decoder layers, the final norm and the two heads
receive gradients (the embeddings and layers below stay bitwise unchanged); None trains
every parameter (full fine-tuning, the `lm_ppo_full` ablation).

The policy takes the control trainer's 7-number observation of `policylab/TradeSim-v0`
(envs/trade_sim.py) and writes it as the state text `+3-1+2+0+4-2|1:` (15 tokens of the
character-level tokenizer) with a table lookup, so every row has the same length and no
padding. It implements the policy protocol (policies/base.py) as the MLP actor-critic
does, so trainers/control.py runs it unchanged: rows are time steps, GAE runs over time,
and `ppo_clip` + `value_clip` read [B, 1] log-probs and values."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from policylab.envs.trade_sim import ACTIONS
from policylab.policies.base import Evaluation, Sample


class LMControlPolicy(nn.Module):
    """π(a|s) over the action tokens and V(s) from one forward of a causal LM."""

    def __init__(self, model, tokenizer, *, trainable_layers: int | None = 2) -> None:
        super().__init__()
        self.model = model
        layers = model.model.layers
        if trainable_layers is not None and not 0 <= trainable_layers <= len(layers):
            raise ValueError(
                f"trainable_layers = {trainable_layers}; accepted: 0 … {len(layers)} "
                "(the model's decoder layers), or None for every parameter"
            )
        action_ids = tokenizer.convert_tokens_to_ids(list(ACTIONS))
        embedding = model.get_input_embeddings().weight.detach()
        self.policy_head = nn.Linear(embedding.shape[1], len(ACTIONS), bias=False)
        self.policy_head.weight.data.copy_(embedding[action_ids])
        # zero value head: V = 0 at the start [ours]; TRL initialises it randomly
        self.value_head = nn.Linear(embedding.shape[1], 1)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)
        if trainable_layers is not None:
            model.requires_grad_(False)
            for layer in layers[len(layers) - trainable_layers :]:
                layer.requires_grad_(True)
            model.model.norm.requires_grad_(True)
        self.trainable_layers = trainable_layers
        self.register_buffer("char_ids", _char_table(tokenizer), persistent=False)

    def ppo_parameters(self) -> list[nn.Parameter]:
        """What the optimiser updates: the parameters that receive gradients."""
        return [p for p in self.parameters() if p.requires_grad]

    def normalize(self, obs: torch.Tensor, *, update: bool = False) -> torch.Tensor:
        """The network's input is the observation itself (the text needs the raw buckets)."""
        return obs

    def token_ids(self, x: torch.Tensor) -> torch.Tensor:
        """[B, 7] observations → [B, 15] ids of `+3-1+2+0+4-2|1:` (sign, digit per move)."""
        values = x.round().long()
        moves, flag = values[:, :-1], values[:, -1:].clamp(0, 1)
        table = self.char_ids
        sign = torch.where(moves < 0, table[10], table[11])
        digit = table[moves.abs().clamp(max=9)]
        pairs = torch.stack([sign, digit], dim=-1).flatten(1)
        rows = len(x)
        bar, colon = table[12].expand(rows, 1), table[13].expand(rows, 1)
        return torch.cat([pairs, bar, table[flag], colon], dim=1)

    def heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(restricted logits [B, 3], V(s) [B]) from the trunk's last hidden state."""
        hidden = self.model.model(input_ids=self.token_ids(x)).last_hidden_state[:, -1]
        return self.policy_head(hidden), self.value_head(hidden).squeeze(-1)

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self.heads(x)[1]

    def mode(self, x: torch.Tensor) -> torch.Tensor:
        """The most likely action of each row [B] (evaluation)."""
        return self.heads(x)[0].argmax(-1)

    @torch.no_grad()
    def sample(
        self,
        x: torch.Tensor,
        *,
        generator: torch.Generator | None = None,
        deterministic: bool = False,
    ) -> Sample:
        """Actions [B] from the restricted softmax, with log π, entropy and V (no grad)."""
        logits, values = self.heads(x)
        logp_all = torch.log_softmax(logits, -1)
        if deterministic:
            actions = logits.argmax(-1)
        else:
            actions = torch.multinomial(logp_all.exp(), 1, generator=generator).squeeze(-1)
        logp = logp_all.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return Sample(actions, logp, entropy=entropy, values=values)

    def evaluate(
        self,
        x: torch.Tensor,
        actions: torch.Tensor,
        *,
        mask: torch.Tensor | None = None,
        extras: dict[str, Any] | None = None,
    ) -> Evaluation:
        """(log π(a|s) [B], entropy [B], V(s) [B]) with grad; mask and extras unused."""
        logits, values = self.heads(x)
        logp_all = torch.log_softmax(logits, -1)
        logp = logp_all.gather(-1, actions.long().view(-1, 1)).squeeze(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return Evaluation(logp, entropy, values)


def _char_table(tokenizer) -> torch.Tensor:
    """Token ids of 0…9, '-', '+', '|', ':' (indices 0–13) in the character tokenizer."""
    chars = [str(d) for d in range(10)] + ["-", "+", "|", ":"]
    ids = tokenizer.convert_tokens_to_ids(chars)
    if any(i is None or i == tokenizer.unk_token_id for i in ids):
        raise ValueError(
            "lm_control writes the state as characters; the tokenizer lacks one of "
            f"{''.join(chars)!r} as a token (accepted: the shipped character-level model)"
        )
    return torch.tensor(ids, dtype=torch.long)


def make_lm_control_policy(model_name: str = "tiny", trainable_layers: int | None = 2):
    """The LM actor-critic of `model_name` (policylab.models.load_model)."""
    from policylab.models import load_model

    model, tokenizer = load_model(model_name)
    return LMControlPolicy(model, tokenizer, trainable_layers=trainable_layers)
