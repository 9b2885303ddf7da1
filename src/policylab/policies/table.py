"""A tabular softmax policy: π(a|s) = softmax(θ[s])_a over a table of logits θ [S, K].

The bandit (bandit.py) uses it over its S states (one by default); tabular MDPs use it over
theirs. No critic: a kind that needs V(s) keeps its own (the bandit's V[S])."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from policylab.policies.base import Evaluation, Sample


class TablePolicy(nn.Module):
    """logits [n_states, n_actions], zeros at init (the uniform policy)."""

    def __init__(self, n_states: int, n_actions: int) -> None:
        super().__init__()
        if n_states < 1 or n_actions < 1:
            raise ValueError(
                f"TablePolicy({n_states}, {n_actions}): need at least one state and one action"
            )
        self.logits = nn.Parameter(torch.zeros(n_states, n_actions))

    def log_probs(self) -> torch.Tensor:
        """log π(·|s) for every state: [S, K]."""
        return torch.log_softmax(self.logits, dim=-1)

    def probs(self) -> torch.Tensor:
        """π(·|s) for every state: [S, K], no grad."""
        return torch.softmax(self.logits.detach(), dim=-1)

    @torch.no_grad()
    def sample(self, states: torch.Tensor, *, generator: torch.Generator | None = None) -> Sample:
        """One action per row of states [B] (long). The n_s rows of each distinct state,
        state by state in increasing order, come from one `torch.multinomial(π(·|s), n_s,
        replacement=True)`, so a single state draws as the bandit always did. Returns
        log-probs and entropy [B]."""
        log_pi = self.log_probs()
        actions = torch.empty(states.shape, dtype=torch.long)
        for s in torch.unique(states).tolist():
            rows = (states == s).nonzero(as_tuple=True)[0]
            draws = torch.multinomial(
                log_pi[s].exp(), len(rows), replacement=True, generator=generator
            )
            actions[rows] = draws
        entropy = -(log_pi.exp() * log_pi).sum(-1)
        return Sample(actions, log_pi[states, actions], entropy=entropy[states])

    def evaluate(
        self,
        states: torch.Tensor,
        actions: torch.Tensor,
        *,
        mask: torch.Tensor | None = None,
        extras: dict[str, Any] | None = None,
    ) -> Evaluation:
        """(log π(a|s) [B], entropy [B], None), with grad into the logits; mask and extras
        are unused (one action per row, exact log-probs)."""
        log_pi = self.log_probs()
        entropy = -(log_pi.exp() * log_pi).sum(-1)
        return Evaluation(log_pi[states, actions], entropy[states], None)
