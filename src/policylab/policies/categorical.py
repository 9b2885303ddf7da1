"""A product of independent categoricals, for MultiDiscrete actions (SB3's
`MultiCategoricalDistribution`): the actor's logits [B, Σ n_k] are split into K blocks of
sizes nvec = (n_1, …, n_K), one categorical per action entry, and

    log π(a|s) = Σ_k log softmax(l_k)[a_k],   H(π(·|s)) = Σ_k H(softmax(l_k)).

Summing over the entries makes one time step one row of the shared algebra, as the
diagonal Gaussian sums over action dimensions."""

from __future__ import annotations

import torch


def log_prob_entropy(
    logits: torch.Tensor, actions: torch.Tensor, nvec: tuple[int, ...]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log π(a|s) [B], entropy [B]) for logits [B, Σ nvec] and actions [B, K] (indices)."""
    logp = torch.zeros(logits.shape[0], dtype=logits.dtype)
    entropy = torch.zeros(logits.shape[0], dtype=logits.dtype)
    for block, a in zip(logits.split(nvec, dim=-1), actions.long().unbind(-1), strict=True):
        logp_all = torch.log_softmax(block, dim=-1)
        logp = logp + logp_all.gather(-1, a.unsqueeze(-1)).squeeze(-1)
        entropy = entropy - (logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def sample(
    logits: torch.Tensor, nvec: tuple[int, ...], generator: torch.Generator | None = None
) -> torch.Tensor:
    """Actions [B, K]: entry k drawn from softmax(l_k), the entries independently."""
    draws = [
        torch.multinomial(torch.softmax(block, dim=-1), 1, generator=generator).squeeze(-1)
        for block in logits.split(nvec, dim=-1)
    ]
    return torch.stack(draws, dim=-1)


def mode(logits: torch.Tensor, nvec: tuple[int, ...]) -> torch.Tensor:
    """The most likely action [B, K]: the argmax of each block."""
    return torch.stack([block.argmax(-1) for block in logits.split(nvec, dim=-1)], dim=-1)
