"""EMPG — entropy-modulated policy gradients (spec §12): each step's share of the trajectory
advantage is rescaled by how confident the sampling policy was at that step, plus a small
bonus for steps that lead to a clear (low-entropy) next step.

Wang et al., "Harnessing Uncertainty: Entropy-Modulated Policy Gradients for Long-Horizon
LLM Agents", arXiv:2509.09265 (no official code; formulas as read by ARLArena appendix
A.3.2, eqs. S20–S23). Registered as the advantage estimator `empg`, which wraps GRPO.

Steps are the segments of `Rollouts.segment_ids` [B, T]. Without segment ids the whole
response is one step [ours]; for single-turn text the trainer can build "line" steps with
`segment_ids_from_newlines(response_ids, newline_ids)` and set `segment_ids` itself.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from policylab.algebra.advantages import (
    Estimate,
    GRPOOptions,
    advantage_estimators,
    grpo_advantages,
)
from policylab.algebra.options import check_range, option
from policylab.rollouts import Rollouts


@dataclass(frozen=True)
class EMPGOptions(GRPOOptions):
    """GRPO's options (the base advantage A_i) plus EMPG's three constants."""

    k_s: float = option(1.0, "k of the self-calibrating scale exp(−k·H̃) (ARLArena Table S1)")
    k_f: float = option(1.0, "k' of the future-clarity bonus exp(−k'·H̃_next) (ARLArena S1)")
    zeta: float = option(0.05, "ζ, weight of the future-clarity bonus (ARLArena Table S1)")
    entropy_eps: float = option(1e-8, "ε of the batch min-max of step entropies")
    # columns beyond a plain rollout: token entropies and the steps they are pooled over
    reads: ClassVar[tuple[str, ...]] = ("entropy", "segment_ids")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("empg", "k_s", self.k_s, low=0.0)
        check_range("empg", "k_f", self.k_f, low=0.0)
        check_range("empg", "zeta", self.zeta, low=0.0)
        check_range("empg", "entropy_eps", self.entropy_eps, low=0.0, low_open=True)


@dataclass(frozen=True)
class EMPGSteps:
    """The per-step table of one batch (N_st steps, in (trajectory, step) order) and A."""

    advantages: torch.Tensor  # [B, T] A_fin written onto each step's valid tokens
    row: torch.Tensor  # [N_st] the row of each step
    H: torch.Tensor  # [N_st] step entropy (mean token entropy of the step)
    g: torch.Tensor  # [N_st] self-calibrating scale, batch mean exactly 1
    f: torch.Tensor  # [N_st] future-clarity bonus exp(−k_f·H̃_next), 0 for a last step
    A_mod: torch.Tensor  # [N_st] g·A_i + ζ·f, before centring
    A_fin: torch.Tensor  # [N_st] A_mod − mean(A_mod)

    def metrics(self) -> dict[str, float]:
        """The spec's `empg/` metrics; the trainer logs them next to its `adv/` ones."""
        n = len(self.H)
        if n == 0:
            return {"empg/n_steps": 0.0}
        if n > 1 and self.H.std() > 0 and self.A_fin.abs().std() > 0:
            corr = float(torch.corrcoef(torch.stack([self.H, self.A_fin.abs()]))[0, 1])
        else:
            corr = 0.0
        return {
            "empg/step_H_mean": float(self.H.mean()),
            "empg/step_H_min": float(self.H.min()),
            "empg/step_H_max": float(self.H.max()),
            "empg/g_min": float(self.g.min()),
            "empg/g_max": float(self.g.max()),
            "empg/frac_g_gt1": int((self.g > 1).sum()) / n,
            "empg/bonus_mean": float(self.f.mean()),
            "empg/adv_mod_mean": float(self.A_mod.mean()),
            "empg/n_steps": float(n),
            "empg/corr_H_absA": corr,
        }


def segment_ids_from_newlines(
    response_ids: torch.Tensor, newline_ids: Collection[int]
) -> torch.Tensor:
    """[B, T] step ids for single-turn text: a new step starts at each token that follows
    a newline token and is not one itself (the issue's "lines or reasoning steps") [ours].

    `newline_ids`: the tokenizer's ids of every token whose text contains a line break
    (with BPE vocabularies "\\n", "\\n\\n", ".\\n" are distinct tokens). A newline closes
    the step it ends, and a run of newlines ("\\n\\n") does not open empty steps. With no
    newline ids every row is one step (ids all 0). Masked positions get ids too; EMPG
    ignores them."""
    if response_ids.dim() != 2:
        raise ValueError(f"response_ids has shape {list(response_ids.shape)}; expected [B, T]")
    ids = torch.as_tensor(sorted(set(int(i) for i in newline_ids)), dtype=response_ids.dtype)
    is_newline = torch.isin(response_ids, ids.to(response_ids.device))
    after_newline = torch.zeros_like(is_newline)
    after_newline[:, 1:] = is_newline[:, :-1]
    opens = after_newline & ~is_newline
    return opens.long().cumsum(dim=-1)


def _trajectory_keys(
    B: int, traj_ids: Sequence[Any] | None, step_idx: Sequence[int] | torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: an integer trajectory key and the row's step index inside it."""
    if traj_ids is None:
        return torch.arange(B), torch.zeros(B, dtype=torch.long)
    if step_idx is None:
        raise ValueError(
            'empg: extras["traj_id"] is set but extras["step_idx"] is not; rows of one '
            "trajectory need their step order"
        )
    codes: dict[Any, int] = {}
    traj = torch.tensor([codes.setdefault(t, len(codes)) for t in traj_ids], dtype=torch.long)
    order = torch.as_tensor(step_idx).long().reshape(-1)
    pairs = list(zip(traj.tolist(), order.tolist(), strict=True))
    if len(set(pairs)) != len(pairs):
        raise ValueError('empg: two rows share the same extras["traj_id"] and ["step_idx"]')
    return traj, order


def empg_steps(
    row_advantages: torch.Tensor,
    entropy: torch.Tensor,
    response_mask: torch.Tensor,
    segment_ids: torch.Tensor | None,
    cfg: EMPGOptions,
    *,
    rows: torch.Tensor | None = None,
    traj_ids: Sequence[Any] | None = None,
    step_idx: Sequence[int] | torch.Tensor | None = None,
) -> EMPGSteps:
    """EMPG from per-row base advantages (arXiv:2509.09265; ARLArena eqs. S20–S23).

    S_{i,k} = {t : m[i,t] = 1, seg[i,t] = k};  H_{i,k} = mean_{t∈S_{i,k}} H[i,t]   (S20)
    H̃ = (H − min H)/(max H − min H + ε), min/max over every step of the batch
    g_{i,k} = exp(−k_s·H̃_{i,k}) / mean_{steps} exp(−k_s·H̃)                      (S22)
    f_{i,k} = exp(−k_f·H̃_{i,k+1}) if step k+1 exists in the trajectory, else 0  (S23)
    A_mod = g_{i,k}·A_i + ζ·f_{i,k}                                               (S21)
    A_fin = A_mod − mean_{steps} A_mod;  A[i,t] = A_fin(i, seg[i,t])·m[i,t]
    (every step weighs once in the centring mean [ours]).

    row_advantages [B]; entropy, response_mask, segment_ids [B, T] (segment_ids None: one
    step per row). `rows` [B] bool leaves rows out (A = 0, not in any statistic). A row
    is its own trajectory unless `traj_ids` [B] (any hashable) and `step_idx` [B] link
    one-step rows; steps follow (step_idx, segment id) order and a step without valid
    tokens is skipped. Batch statistics: call on the whole batch, never a micro-batch."""
    B, T = response_mask.shape
    device = response_mask.device
    dtype = torch.promote_types(row_advantages.dtype, entropy.dtype)
    dtype = torch.promote_types(dtype, torch.float32)
    valid = response_mask > 0
    if rows is not None:
        valid = valid & rows.reshape(B, 1).bool()
    seg = torch.zeros_like(valid, dtype=torch.long) if segment_ids is None else segment_ids.long()
    traj, order = (k.to(device) for k in _trajectory_keys(B, traj_ids, step_idx))
    row_of = torch.arange(B, device=device).unsqueeze(-1).expand(B, T)
    keys = torch.stack([traj[row_of], order[row_of], seg, row_of], dim=-1)[valid]  # [N_tok, 4]
    if len(keys) == 0:
        none = torch.zeros(0, dtype=dtype, device=device)
        zeros = torch.zeros(B, T, dtype=dtype, device=device)
        return EMPGSteps(zeros, keys[:, 3], none, none, none, none, none)
    steps, token_step = torch.unique(keys, dim=0, return_inverse=True)  # lexicographic order
    n = len(steps)
    ent = entropy.detach().to(dtype)[valid]
    count = ent.new_zeros(n).index_add(0, token_step, torch.ones_like(ent))
    H = ent.new_zeros(n).index_add(0, token_step, ent) / count
    H_tilde = (H - H.min()) / (H.max() - H.min() + cfg.entropy_eps)
    confidence = torch.exp(-cfg.k_s * H_tilde)
    g = confidence / confidence.mean()
    next_in_trajectory = steps[1:, 0] == steps[:-1, 0]
    f = torch.zeros_like(H)
    f[:-1] = torch.where(next_in_trajectory, torch.exp(-cfg.k_f * H_tilde[1:]), f[:-1])
    step_row = steps[:, 3]
    A_mod = g * row_advantages.detach().to(dtype)[step_row] + cfg.zeta * f
    A_fin = A_mod - A_mod.mean()
    out = torch.zeros(B, T, dtype=dtype, device=device)
    out[valid] = A_fin[token_step]
    return EMPGSteps(out, step_row, H, g, f, A_mod, A_fin)


def empg_details(rollouts: Rollouts, cfg: EMPGOptions) -> EMPGSteps:
    """The `empg` estimator with its step table (for the trainer's `empg/` metrics)."""
    rollouts.require("entropy", by="empg (the sampling policy's per-token entropy)")
    grpo = GRPOOptions(
        kl_coef=cfg.kl_coef, kl_estimator=cfg.kl_estimator, scale=cfg.scale, eps=cfg.eps
    )
    # GRPO writes A_i on every valid token of row i; read it back as one value per row
    mask = rollouts.response_mask  # (a row without valid tokens has no step)
    tokens = grpo_advantages(rollouts, grpo)
    first = (mask > 0).to(torch.int8).argmax(dim=-1, keepdim=True)
    base = tokens.gather(1, first)[:, 0]
    return empg_steps(
        base,
        rollouts.entropy,
        rollouts.response_mask,
        rollouts.segment_ids,
        cfg,
        rows=torch.isfinite(rollouts.rewards),
        traj_ids=rollouts.extras.get("traj_id"),
        step_idx=rollouts.extras.get("step_idx"),
    )


@advantage_estimators.register("empg", config=EMPGOptions)
def empg_advantages(rollouts: Rollouts, cfg: EMPGOptions) -> Estimate:
    """EMPG (arXiv:2509.09265, eqs. S20–S23 as read by ARLArena): the GRPO advantage A_i of
    each row rescaled per step by g = exp(−k_s·H̃)/mean exp(−k_s·H̃), plus ζ·exp(−k_f·H̃_next),
    centred to zero mean over the batch's steps (details: `empg_steps`).

    Needs Rollouts.entropy [B, T] (the sampling policy's, recorded at generation);
    segment_ids [B, T] optional (None: one step per row, so no bonus). Defaults k_s = k_f = 1,
    ζ = 0.05, ε = 1e-8 (ARLArena Table S1; paper values not read). Rows with a NaN reward
    get A = 0 and stay out of the statistics [ours]. Returns an Estimate: A [B, T] and the
    `empg/` step statistics as metrics."""
    details = empg_details(rollouts, cfg)
    return Estimate(details.advantages, metrics=details.metrics())
