"""How a [B, T] per-token loss matrix becomes one scalar (verl's `agg_loss`, made exact
under micro-batching).

Every mode is `numerator(L, m) / normaliser`, where the numerator is a sum over rows and
therefore splits over micro-batches, and the normaliser is a property of the whole batch.
The trainer computes `global_normaliser(full_mask, mode)` once and passes it to every
micro-batch, so the micro-batch losses add up to the full-batch loss and gradient.

Modes (notation of papers/seed_llm_algorithms.md §0; m is the mask, n_i = Σ_t m[i,t],
B' = number of rows with n_i > 0):

| mode                      | numerator                 | normaliser     | used by            |
|---------------------------|---------------------------|----------------|--------------------|
| token-mean                | Σ_{i,t} m·L               | Σ_{i,t} m      | DAPO, verl default |
| token-sum                 | Σ_{i,t} m·L               | 1              |                    |
| seq-mean-token-mean       | Σ_i (Σ_t m·L) / n_i       | B'             | GRPO (eq. 3)       |
| seq-mean-token-sum        | Σ_i Σ_t m·L               | B'             |                    |
| seq-mean-token-sum-norm   | Σ_i Σ_t m·L               | B' · L_max     | Dr. GRPO Listing 1 |
"""

from __future__ import annotations

import torch

AGG_MODES = (
    "token-mean",
    "token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
)


def _check_mode(mode: str, L_max: int | None) -> None:
    if mode not in AGG_MODES:
        raise ValueError(f"loss_agg_mode = {mode!r} is not valid; choices: {', '.join(AGG_MODES)}")
    if mode == "seq-mean-token-sum-norm" and (L_max is None or L_max <= 0):
        raise ValueError(
            "loss_agg_mode 'seq-mean-token-sum-norm' divides by a fixed generation budget: "
            f"set L_max to the maximum number of generated tokens (got L_max={L_max!r})"
        )


def global_normaliser(mask: torch.Tensor, mode: str, *, L_max: int | None = None) -> float:
    """The denominator of `mode` for a whole batch (mask [B, T]); pass it to `aggregate`
    for each micro-batch of that batch."""
    _check_mode(mode, L_max)
    mask = mask.detach()
    if mode == "token-mean":
        return float(mask.sum())
    if mode == "token-sum":
        return 1.0
    rows = float((mask.sum(dim=-1) > 0).sum())
    if mode == "seq-mean-token-sum-norm":
        return rows * float(L_max)
    return rows


def aggregate(
    loss_matrix: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    normaliser: float | None = None,
    *,
    L_max: int | None = None,
) -> torch.Tensor:
    """Reduce `loss_matrix` [B, T] over the valid positions of `mask` [B, T] by `mode`.

    normaliser: the full batch's `global_normaliser`; None computes it from this `mask`
    (correct when the whole batch is one micro-batch). Masked entries may hold anything,
    NaN and inf included: they are replaced by 0 before any arithmetic. A batch with no
    valid token returns 0 with the graph kept."""
    _check_mode(mode, L_max)
    valid = mask > 0
    masked = torch.where(valid, loss_matrix, torch.zeros_like(loss_matrix))
    if mode == "seq-mean-token-mean":
        lengths = valid.sum(dim=-1).clamp(min=1).to(masked.dtype)
        numerator = (masked.sum(dim=-1) / lengths).sum()
    else:
        numerator = masked.sum()
    if normaliser is None:
        normaliser = global_normaliser(mask, mode, L_max=L_max)
    # An empty batch has numerator 0; dividing by 1 keeps the graph without a 0/0.
    return numerator / (float(normaliser) if normaliser > 0 else 1.0)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """⟨x⟩ = Σ m·x / Σ m over valid positions (0 when there are none); a boolean x gives the
    fraction of valid positions where it holds (computed in float64, so it is exact)."""
    if x.dtype == torch.bool:
        x = x.to(torch.float64)
    valid = mask > 0
    total = valid.sum()
    if total == 0:
        return x.new_zeros(())
    return torch.where(valid, x, torch.zeros_like(x)).sum() / total
