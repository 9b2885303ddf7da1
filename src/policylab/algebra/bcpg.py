"""BCPG-NSA: behaviour-constrained policy gradient on a fixed offline set, with negative
sample augmentation (Yang et al., "Unearthing Gems from Stones", arXiv:2505.14403 §4,
Eqs. 6–7; spec papers/seed_llm_algorithms.md §15.3).

Per prompt with G offline responses, R̄ = mean_g R and Δ^ref_i = Σ_t m·(logp − ref_logp):

    J = (1/G)·Σ_i (1/|o_i|)·[ Σ_t m·logp·β_{i,t}·(R_i − R̄) − (τ/2)·(Δ^ref_i)² ],   L = −J
    β_{i,t} = β  if token t lies in a step judged correct and response i is wrong (R_i < R̄)
              1  otherwise

No importance ratio and no clip: logp enters linearly (offline policy gradient, Eq. 6).
Gradient per token: ∂L/∂logp[i,t] = −(1/(G·|o_i|))·[β_{i,t}(R_i − R̄) − τ·Δ^ref_i].

Inputs the loss reads besides logprobs and the mask (shapes [B, T] unless stated):
- `rollouts.rewards` [B] and `rollouts.group_ids` [B]: R and the groups. R̄ is the mean over
  the group's rows in this call, so every call must hold whole groups (the trainer's
  micro-batches do). The `advantages` argument is not used: R − R̄ is computed here.
- `ref_logprobs`: π_ref = the model that generated the offline data (the initial policy);
  required.
- `rollouts.segment_ids` [B, T] int: the step index (0, 1, …) of each token; any negative
  value = outside every step (e.g. the answer line), weight 1.
- `rollouts.extras["step_correct"]`: per row, a list of bools, the consensus label of each
  step in order (step k of row i → labels[i][k]); a [B, S_max] bool tensor is accepted too.
  Labels of positive rows are ignored. Every step id on a response token must have a label.
  With β = 1 (plain BCPG) neither segment ids nor labels are needed.
- `old_logprobs` (may be None) only feed the ratio metrics `pg/approx_kl`, …: with the
  offline set's logprobs they show how far the policy has moved from the data.

"Wrong" is R_i < R̄ [ours]: with 1/0 rewards in a mixed group it is exactly "wrong final
answer"; in a group with equal rewards R − R̄ = 0, so only the τ term acts (the data
protocol drops such groups, §15.3).

Aggregation. The token matrix L[i,t] = −logp·β_{i,t}·(R_i − R̄) + (τ/2)·(Δ^ref_i)²/n_i
(the row's constraint spread evenly over its n_i tokens, so every mode sees it as a row
total (τ/2)·(Δ^ref_i)²) is reduced by `aggregate` with the trainer's global normaliser.
Under the default seq-mean-token-mean each row gives (1/|o_i|)[…] and the normaliser is
the number of rows B': with one group B' = G, exactly Eq. 6; with n prompts of G rows each,
1/(nG) = the mean over prompts of Eq. 6 (the paper's expectation over questions). With
unequal group sizes every row weighs 1/B' rather than 1/(n·G_q) [ours, as GRPO's
seq-mean-token-mean in this library].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from policylab.algebra.advantages import group_stats
from policylab.algebra.aggregate import aggregate
from policylab.algebra.losses import (
    LossOptions,
    add_kl_term,
    policy_losses,
    ratio_metrics,
    token_terms,
)
from policylab.algebra.options import check_range, option
from policylab.rollouts import Rollouts

STEP_LABELS = "step_correct"  # the key of the step labels in Rollouts.extras


@dataclass(frozen=True)
class BCPGOptions(LossOptions):
    loss_agg_mode: str = option(
        "seq-mean-token-mean", "Eq. 6: (1/G)Σ_i (1/|o_i|)[…] (arXiv:2505.14403 §4)"
    )
    beta: float = option(
        0.5,
        "β: weight of tokens in correct steps of wrong answers, in [−1, 1]; 1 = plain BCPG, "
        "< 0 = credit (P Table 3, §6.2)",
    )
    tau: float = option(1e-3, "τ of the constraint (τ/2)(Σ_t logp − ref_logp)² (P App. C, Table 8)")

    @property
    def needs_reference(self) -> bool:
        return True  # the behaviour constraint is to the reference (initial) policy

    @property
    def needs_step_labels(self) -> bool:
        return self.beta != 1.0

    @property
    def reads(self) -> tuple[str, ...]:
        """Columns beyond a plain rollout: the judged steps, when β ≠ 1."""
        return ("segment_ids", STEP_LABELS) if self.needs_step_labels else ()

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("bcpg", "beta", self.beta, low=-1.0, high=1.0)
        check_range("bcpg", "tau", self.tau, low=0.0)


def _labels_matrix(step_correct, batch_size: int, device: torch.device) -> torch.Tensor:
    """The labels as bool [B, S + 1]: ragged lists padded with False, and one trailing False
    column where tokens outside every step point."""
    if isinstance(step_correct, torch.Tensor):
        if step_correct.dim() != 2 or step_correct.shape[0] != batch_size:
            raise ValueError(
                f"rollouts.extras[{STEP_LABELS!r}] has shape {list(step_correct.shape)}; "
                f"expected [B, S_max] with B={batch_size}, or a list of B lists of bools"
            )
        labels = step_correct.to(device=device, dtype=torch.bool)
    else:
        rows = [[bool(x) for x in row] for row in step_correct]
        width = max((len(r) for r in rows), default=0)
        labels = torch.zeros(len(rows), width, dtype=torch.bool, device=device)
        for i, row in enumerate(rows):
            labels[i, : len(row)] = torch.tensor(row, dtype=torch.bool, device=device)
    return torch.cat([labels, labels.new_zeros(batch_size, 1)], dim=1)


@dataclass(frozen=True)
class StepTokens:
    """Where the labelled steps sit: tokens [B, T], steps [B, S] (all bool)."""

    in_correct: torch.Tensor  # response token lies in a step labelled correct
    present: torch.Tensor  # step k of row i has at least one response token
    correct: torch.Tensor  # present and labelled correct


def step_tokens(segment_ids: torch.Tensor, step_correct, valid: torch.Tensor) -> StepTokens:
    """Look up each response token's step label. segment_ids [B, T] (negative = no step),
    step_correct: B lists of bools or a [B, S_max] bool tensor, valid [B, T] bool. A step id
    on a response token without a label is an error; masked tokens are never read."""
    B = valid.shape[0]
    if isinstance(step_correct, torch.Tensor):
        counts = [int(step_correct.shape[-1])] * B
    else:
        counts = [len(row) for row in step_correct]
    if len(step_correct) != B:
        raise ValueError(
            f"rollouts.extras[{STEP_LABELS!r}] has {len(step_correct)} rows; expected B={B}"
        )
    labels = _labels_matrix(step_correct, B, valid.device)
    S = labels.shape[1] - 1
    seg = segment_ids.to(valid.device).long()
    in_step = valid & (seg >= 0)
    limit = torch.tensor(counts, device=valid.device, dtype=torch.long).unsqueeze(-1)
    missing = in_step & (seg >= limit)
    if missing.any():
        i, t = (int(x) for x in missing.nonzero()[0])
        raise ValueError(
            f"rollouts.segment_ids[{i}, {t}] = {int(seg[i, t])} is the step id of a response "
            f"token, but rollouts.extras[{STEP_LABELS!r}] row {i} has {counts[i]} label(s); "
            "give one label per step (steps numbered 0, 1, … in order)"
        )
    index = torch.where(in_step, seg, torch.full_like(seg, S))
    in_correct = torch.gather(labels, 1, index) & in_step
    present = torch.zeros(B, S + 1, dtype=torch.bool, device=valid.device)
    present.scatter_(1, index, torch.ones_like(in_step))
    present = present[:, :S]
    return StepTokens(in_correct, present, present & labels[:, :S])


def token_weights(
    segment_ids: torch.Tensor,
    step_correct: Sequence[Sequence[bool]] | torch.Tensor,
    negative: torch.Tensor,
    response_mask: torch.Tensor,
    beta: float,
) -> torch.Tensor:
    """β_{i,t} [B, T] of Eq. 7: β on response tokens of a step labelled correct in a row with
    `negative[i]` (bool [B]), 1 elsewhere (float64; for inspection and tests)."""
    valid = response_mask > 0
    nsa = step_tokens(segment_ids, step_correct, valid).in_correct & negative.bool()[:, None]
    ones = torch.ones(valid.shape, dtype=torch.float64, device=valid.device)
    return torch.where(nsa, ones * beta, ones)


def _require(rollouts: Rollouts | None, ref_logprobs, valid: torch.Tensor) -> None:
    if rollouts is None:
        raise ValueError(
            "bcpg needs rollouts= (rewards and group_ids of whole groups, segment_ids and "
            f"extras[{STEP_LABELS!r}]); the loss computes R − R̄ itself"
        )
    if ref_logprobs is None:
        raise ValueError(
            "bcpg needs ref_logprobs: the behaviour constraint (τ/2)(Σ_t logp − ref_logp)² "
            "compares to the model that generated the offline data (the initial policy)"
        )
    if ref_logprobs.shape != valid.shape or len(rollouts) != valid.shape[0]:
        raise ValueError(
            f"bcpg: ref_logprobs {list(ref_logprobs.shape)} and rollouts ({len(rollouts)} rows) "
            f"must match response_mask {list(valid.shape)}"
        )


@policy_losses.register("bcpg", config=BCPGOptions)
def bcpg_loss(
    logprobs,
    old_logprobs,
    advantages,
    response_mask,
    cfg: BCPGOptions,
    *,
    ref_logprobs=None,
    rollouts: Rollouts | None = None,
    normaliser=None,
):
    """BCPG-NSA: group-baselined offline policy gradient with a squared sequence log-ratio
    constraint, β on correct steps of wrong answers (arXiv:2505.14403 Eqs. 6–7).

    L[i,t] = −logp·β_{i,t}·(R_i − R̄) + (τ/2)·(Δ^ref_i)²/n_i, aggregated; defaults β = 0.5,
    τ = 1e-3, seq-mean-token-mean. Inputs and aggregation: see the module docstring."""
    valid = response_mask > 0
    _require(rollouts, ref_logprobs, valid)
    old = logprobs.detach() if old_logprobs is None else old_logprobs
    terms = token_terms(logprobs, old, logprobs.new_zeros(valid.shape[0]), response_mask)
    logp, dtype = terms.logp, terms.logp.dtype
    ref = torch.where(valid, ref_logprobs.detach().to(dtype), torch.zeros_like(logp))
    delta = (logp - ref).sum(dim=-1)  # Δ^ref_i [B]; masked positions are 0 in both

    stats = group_stats(rollouts.rewards.to(logp.device), rollouts.group_ids.to(logp.device))
    rewards = rollouts.rewards.to(logp.device, stats.mean.dtype)
    centred = torch.where(stats.valid, rewards - stats.mean, torch.zeros_like(rewards))
    negative = centred < 0

    if rollouts.segment_ids is not None and STEP_LABELS in rollouts.extras:
        steps = step_tokens(rollouts.segment_ids, rollouts.extras[STEP_LABELS], valid)
    elif cfg.beta != 1.0:
        raise ValueError(
            f"bcpg with beta={cfg.beta} needs rollouts.segment_ids and "
            f"rollouts.extras[{STEP_LABELS!r}] (the steps judged correct); set beta=1 for "
            "plain BCPG without step labels"
        )
    else:
        none = torch.zeros(valid.shape[0], 0, dtype=torch.bool, device=valid.device)
        steps = StepTokens(torch.zeros_like(valid), none, none)
    nsa = steps.in_correct & negative.unsqueeze(-1)
    weight = torch.where(nsa, torch.full_like(logp, cfg.beta), torch.ones_like(logp))

    lengths = valid.sum(dim=-1).clamp(min=1).to(dtype)
    pg = -logp * weight * centred.to(dtype).unsqueeze(-1)
    bc = (0.5 * cfg.tau * delta.square() / lengths).unsqueeze(-1).expand_as(logp)
    pg_loss = aggregate(pg, valid, cfg.loss_agg_mode, normaliser, L_max=cfg.L_max)
    bc_loss = aggregate(bc, valid, cfg.loss_agg_mode, normaliser, L_max=cfg.L_max)

    with torch.no_grad():
        rows = valid.any(dim=-1)
        n_rows = max(int(rows.sum()), 1)
        neg_tokens = valid & negative.unsqueeze(-1)
        neg_steps = steps.present & negative.unsqueeze(-1)
        correct_steps = steps.correct & negative.unsqueeze(-1)
        metrics = {
            "bcpg/pg_term": float(pg_loss.detach()),
            "bcpg/bc_loss": float(bc_loss.detach()),
            "bcpg/bc_term": float((0.5 * cfg.tau * delta.square())[rows].sum()) / n_rows,
            "bcpg/delta_ref_abs_mean": float(delta.abs()[rows].sum()) / n_rows,
            "bcpg/nsa_token_frac": _frac(nsa & valid, neg_tokens),
            "bcpg/steps_correct_frac_in_negatives": _frac(correct_steps, neg_steps),
        }
        if old_logprobs is not None:
            metrics.update(ratio_metrics(terms))
    return add_kl_term(pg_loss + bc_loss, metrics, terms, ref_logprobs, cfg, normaliser)


def _frac(part: torch.Tensor, whole: torch.Tensor) -> float:
    total = int(whole.sum())
    return int(part.sum()) / total if total else 0.0
