"""StepTool's step-grained rewards (spec papers/seed_agents.md §A2; seed §21): per-step
scores placed as token rewards at the end of each turn of a `pack_trajectories` row, and
TRL's adaptive KL coefficient.

Yu et al., "StepTool: Enhancing Multi-Step Tool Usage in LLMs through Step-Grained
Reinforcement Learning", arXiv:2410.07745; code yuyq18/StepTool
(src/steptool/step_ppotrainer.py:compute_rewards). The token rewards feed the existing
`gae` (with a value head) or `reinforce_pp` estimators through `Rollouts.token_rewards`;
the per-token −β·KL is theirs to add (`kl_coef`), not this module's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from policylab.algebra.options import check_choice

PLACEMENTS = ("paper", "code")


def place_step_scores(
    response_mask: torch.Tensor,
    segment_ids: torch.Tensor,
    scores: Sequence[Sequence[float]] | torch.Tensor,
    *,
    placement: str = "paper",
) -> torch.Tensor:
    """Token rewards [B, T] holding each step's score at the last generated token of its
    segment, 0 elsewhere.

    Segments: the distinct `segment_ids` (turn index on generated and observation tokens,
    −1 on padding) that own at least one generated token (`response_mask` = 1), in
    increasing id order: n segments, s = 0..n−1; "last token of segment s" = its last
    generated token. Observation tokens never receive a score.

    paper (default): the score of step s goes to segment s, ρ[last(s)] = r_s; row i needs
    exactly n scores, the last being IsSolved of the final step [paper §3, as summarised;
    `steptool_provisional`].
    code: TRL step_ppotrainer.compute_rewards walks the segments from the last with the
        scores from the last: the segment j places from the end (j = 0 for the last) gets
        score index S − 1 − j times the multiplier (S − (S − 1 − j) − 1) = j, for
        j < min(n, S). Data rows carry S = n + 1 scores, so segment s gets r_{s+1}·(n−1−s):
        the last segment gets weight 0 and score 0 is never placed [code
        yuyq18/StepTool src/steptool/step_ppotrainer.py:compute_rewards]. Spec §A2 T1: mask
        (1,1,1,0,0,1,1), segments (0,0,0,0,0,1,1), scores (0.8333, 0.8333, 0.0) → the last
        segment gets 0.0·0 at position 6, the first 0.8333·1 at position 2, score 0 unused.
        Segments here are segment ids; the code splits runs of the mask instead, which
        merges two turns with no observation between them [ours].

    Shapes: response_mask, segment_ids [B, T]; scores [B, S] or B lists (ragged).
    Returns float [B, T] (scores' dtype, at least float32)."""
    check_choice("place_step_scores", "placement", placement, PLACEMENTS)
    if response_mask.shape != segment_ids.shape or response_mask.dim() != 2:
        raise ValueError(
            f"place_step_scores: response_mask {list(response_mask.shape)} and segment_ids "
            f"{list(segment_ids.shape)} must both be [B, T]"
        )
    B = response_mask.shape[0]
    if len(scores) != B:
        raise ValueError(f"place_step_scores: scores has {len(scores)} rows; expected B={B}")
    dtype = scores.dtype if isinstance(scores, torch.Tensor) else torch.get_default_dtype()
    out = torch.zeros(response_mask.shape, dtype=torch.promote_types(dtype, torch.float32))
    for i in range(B):
        row = [float(s) for s in scores[i]]
        ends = _segment_ends(response_mask[i] > 0, segment_ids[i])
        n, S = len(ends), len(row)
        if placement == "paper":
            if S != n:
                raise ValueError(
                    f"place_step_scores(placement='paper'): row {i} has {n} segments with "
                    f"generated tokens but {S} scores; expected one score per segment"
                )
            for s, end in enumerate(ends):
                out[i, end] += row[s]
        else:
            for j in range(min(n, S)):
                out[i, ends[n - 1 - j]] += row[S - 1 - j] * j
    return out


def _segment_ends(generated: torch.Tensor, segments: torch.Tensor) -> list[int]:
    """Position of the last generated token of each segment, segments in id order."""
    ends: dict[int, int] = {}
    for t in generated.nonzero(as_tuple=True)[0].tolist():
        seg = int(segments[t])
        if seg >= 0:
            ends[seg] = t
    return [ends[s] for s in sorted(ends)]


@dataclass
class AdaptiveKL:
    """TRL's adaptive KL coefficient (Ziegler et al., arXiv:1909.08593 §2.2; TRL
    AdaptiveKLController), used by StepTool's PPO.

    e = clip(KL/target − 1, −0.2, 0.2),  β ← β·(1 + e·n/horizon), where KL is the batch
    mean of the per-sequence summed KL and n the number of sequences in the batch (TRL:
    batch_size × processes). Defaults β₀ = 0.3, target 6, horizon 10,000 [code StepTool
    configs `*/StepTool_ppo.json`, per spec §A2]."""

    value: float = 0.3
    target: float = 6.0
    horizon: int = 10_000

    def __post_init__(self) -> None:
        if self.value < 0 or self.target <= 0 or self.horizon <= 0:
            raise ValueError(
                f"AdaptiveKL needs value >= 0, target > 0, horizon > 0; got value={self.value}, "
                f"target={self.target}, horizon={self.horizon}"
            )

    def update(self, kl: float, n_steps: int) -> float:
        """One controller step after a batch of `n_steps` sequences; returns the new β."""
        error = min(max(kl / self.target - 1.0, -0.2), 0.2)
        self.value *= 1.0 + error * n_steps / self.horizon
        return self.value

    def state_dict(self) -> dict[str, Any]:
        return {"value": self.value, "target": self.target, "horizon": self.horizon}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.value = float(state["value"])
        self.target = float(state["target"])
        self.horizon = int(state["horizon"])
