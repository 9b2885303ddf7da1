"""Selection: which rows and tokens of a scored batch are trained on.

`fn(rollouts, advantages, cfg, state) -> Selection(row_keep [B] bool, token_weight [B, T],
metrics)`. The trainer drops rows with row_keep False and multiplies the loss mask by
token_weight. DAPO's dynamic sampling, VAS, VADE, D³S and CAPO plug in here (issue #7);
`all` keeps everything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from policylab.registry import Registry
from policylab.rollouts import Rollouts

selections: Registry = Registry("selection")


@dataclass
class Selection:
    row_keep: torch.Tensor  # [B] bool
    token_weight: torch.Tensor  # [B, T] float
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class AllOptions:
    pass


@selections.register("all", config=AllOptions)
def select_all(
    rollouts: Rollouts, advantages: torch.Tensor, cfg: AllOptions, state: Any = None
) -> Selection:
    """Keep every row and every token (the default)."""
    mask = rollouts.response_mask
    return Selection(
        torch.ones(mask.shape[0], dtype=torch.bool), torch.ones_like(mask, dtype=torch.float32)
    )
