"""Selection: which rows and tokens of a scored batch are trained on.

`fn(rollouts, advantages, cfg, state) -> Selection(row_keep [B] bool, token_weight [B, T],
metrics)`. The trainer drops rows with row_keep False and multiplies the loss mask by
token_weight (`Selection.apply`). Each selection declares when it runs (`stage`):

- "rollouts" (default): each generation round as it arrives, before the advantage, so the
  advantage is computed on the kept rows only (DAPO Algorithm 1, line 9); it receives
  `advantages=None`. `all`, and `dynamic_sampling` (DAPO's group filter;
  workflows/rounds.py refills the step with new rounds).
- "advantages": once per step on the advantages of the kept groups, with `state` =
  {"step": steps done, "total_steps": n}. `d3s` (D³S), `top_quantile` (risk-seeking PG).
- "learn": on every micro-batch inside the update, with the forward pass's tensors in
  `rollouts.extras` (CAPO, algebra/capo.py).

Prompt-level samplers (VADE, VAS) choose prompts before generation: samplers.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from policylab.algebra.advantages import reward_quantile
from policylab.algebra.capo import CapoOptions, CurvatureState, capo_mask
from policylab.algebra.options import check_choice, check_range, option
from policylab.registry import Registry
from policylab.rollouts import Rollouts

selections: Registry = Registry("selection")


STAGES = ("rollouts", "advantages", "learn")


@dataclass
class Selection:
    row_keep: torch.Tensor  # [B] bool
    token_weight: torch.Tensor  # [B, T] float
    metrics: dict[str, float] = field(default_factory=dict)

    def apply(self, rollouts: Rollouts) -> Rollouts:
        """The kept rows, their response mask multiplied by the token weight (the loss
        and its normaliser then count kept tokens only)."""
        rows = self.row_keep.nonzero(as_tuple=True)[0]
        mask = rollouts.response_mask[rows] * (self.token_weight[rows] > 0)
        return rollouts.select(rows).replace(response_mask=mask)


def runs_at(stage: str):
    """Decorator: the trainer calls this selection at `stage` (one of STAGES)."""
    if stage not in STAGES:
        raise ValueError(f"stage {stage!r} is not one of {STAGES}")

    def mark(fn):
        fn.stage = stage
        return fn

    return mark


def stage_of(fn) -> str:
    return getattr(fn, "stage", "rollouts")


@dataclass(frozen=True)
class AllOptions:
    pass


@selections.register("all", config=AllOptions)
def select_all(
    rollouts: Rollouts, advantages: torch.Tensor | None, cfg: AllOptions, state: Any = None
) -> Selection:
    """Keep every row and every token (the default)."""
    mask = rollouts.response_mask
    return Selection(
        torch.ones(mask.shape[0], dtype=torch.bool), torch.ones_like(mask, dtype=torch.float32)
    )


select_all.keeps_everything = True  # a trainer need not call it at all


@dataclass(frozen=True)
class DynamicSamplingOptions:
    metric: str | None = option(
        None,
        "reward part to filter on (verl filter_groups.metric); None: the part 'acc' if the "
        "batch has one, else the total reward before any shaping",
    )


@selections.register("dynamic_sampling", config=DynamicSamplingOptions)
def dynamic_sampling(
    rollouts: Rollouts,
    advantages: torch.Tensor | None,
    cfg: DynamicSamplingOptions,
    state: Any = None,
) -> Selection:
    """DAPO's dynamic sampling: keep a group iff its answers do not all agree.

    Keep group g iff std_g(acc) > 0, i.e. 0 < #correct < G_g for 0/1 accuracy [paper
    arXiv:2503.14476 §3.2 eq. 11; code verl dapo_ray_trainer keeps `std > 0 or len == 1`].
    A group of one row is kept (its advantage is 0 anyway, §1.3) [code].

    acc [B]: `rollouts.reward_parts[cfg.metric]`; with metric None, the part "acc" if
    present, else `rollouts.rewards`. Reading of the spec (ours): DAPO filters on
    accuracy, not on the shaped score, so that groups equally right but of different
    lengths are still dropped; our rewards come from verifiers (1/0, or partial credit),
    so the accuracy is the unshaped total reward, which the trainer hands over before any
    reward shaping. For any reward, "std > 0" is read as "not all equal", tested exactly
    as max_g > min_g. NaN (unscorable) rows are left out; a group with no finite value is
    dropped.

    Metrics (counts of groups): `ds/kept_groups`; dropped groups split by their common
    value, `ds/drop_all_correct` (> 0) and `ds/drop_all_wrong` (≤ 0, or no finite value)
    (ours: this reads "correct" for 1/0 and ±1 rewards, and counts a group whose partial
    credits are all equal and positive as correct); `ds/kept_frac` = kept / groups.

    Shapes: rewards, group_ids [B]; row_keep [B] bool; token_weight [B, T] (all ones).
    """
    values = accuracy(rollouts, cfg.metric).detach().double()
    mask = rollouts.response_mask
    _, group = torch.unique(rollouts.group_ids, return_inverse=True)
    n = int(group.max()) + 1 if len(group) else 0
    finite = torch.isfinite(values)
    highest = torch.full((n,), -torch.inf, dtype=values.dtype).scatter_reduce(
        0, group, torch.where(finite, values, -torch.inf), reduce="amax"
    )
    lowest = torch.full((n,), torch.inf, dtype=values.dtype).scatter_reduce(
        0, group, torch.where(finite, values, torch.inf), reduce="amin"
    )
    rows = torch.zeros(n, dtype=torch.long).index_add(0, group, torch.ones_like(group))
    keep = (highest > lowest) | (rows == 1)
    all_correct = ~keep & (highest > 0)
    kept = int(keep.sum())
    return Selection(
        row_keep=keep[group],
        token_weight=torch.ones_like(mask, dtype=torch.float32),
        metrics={
            "ds/kept_groups": float(kept),
            "ds/drop_all_correct": float(all_correct.sum()),
            "ds/drop_all_wrong": float(n - kept - int(all_correct.sum())),
            "ds/kept_frac": kept / n if n else 0.0,
        },
    )


def accuracy(rollouts: Rollouts, metric: str | None = None) -> torch.Tensor:
    """[B] the reward part `metric`; None: the part "acc" if present, else the total
    reward (which the trainer hands over before any shaping)."""
    parts = rollouts.reward_parts
    if metric is None:
        return parts.get("acc", rollouts.rewards)
    if metric not in parts:
        raise ValueError(
            f"dynamic_sampling.metric = {metric!r} is not a reward part of this batch; "
            f"parts: {', '.join(sorted(parts)) or '(none)'} (None = the total reward)"
        )
    return parts[metric]


@dataclass(frozen=True)
class D3SOptions:
    sample_init: float = option(0.5, "f_s at the start: fraction of rows kept [ours]")
    sample_final: float = option(1.0, "f_s at the end of training [ours]")
    token_init: float = option(0.2, "f_k at the start: fraction of kept rows' tokens [ours]")
    token_final: float = option(1.0, "f_k at the end of training [ours]")
    mode: str = option(
        "cross", "cross: max-Var(Â) subset over the batch (D³S); intra: within each group"
    )
    reads: ClassVar[tuple[str, ...]] = ("entropy",)  # the behaviour policy's, per token

    def __post_init__(self) -> None:
        for name in ("sample_init", "sample_final", "token_init", "token_final"):
            check_range("d3s", name, getattr(self, name), low=0.0, high=1.0, low_open=True)
        check_choice("d3s", "mode", self.mode, ("cross", "intra"))


@selections.register("d3s", config=D3SOptions)
@runs_at("advantages")
def d3s(
    rollouts: Rollouts, advantages: torch.Tensor, cfg: D3SOptions, state: Any = None
) -> Selection:
    """D³S, dynamic dual-level down-sampling (Wang et al., arXiv:2509.22115 §3.1–3.3;
    papers/seed_llm_algorithms.md §9): train on the rows whose advantages vary most and,
    inside them, on the tokens with the largest |A|·H; both budgets relax to "keep all".

    Progress p = clamp(step / total_steps, 0, 1) (`state`, steps done before this one);
    f(p) = (1 − p)·f_init + p·f_final for rows (f_s) and tokens (f_k) [paper §3.3].
    Rows: Â_i = A[i, first valid t]; over the B_v rows with a valid token keep N = ⌈f_s·B_v⌉
    maximising the population Var(Â) [paper §3.1]. Solved exactly: the optimum is the k
    largest ∪ the N − k smallest for some k [PODS, arXiv:2504.13818 Lemma 3.1]; rows sorted
    by (−Â_i, i), ties → the largest k, so all-equal Â keep the first N [ours]. `intra`
    applies it per group with N_g = ⌈f_s·G_g⌉. Tokens: key κ = |A|·H over kept rows' valid
    tokens, pooled over the batch; keep the top ⌈f_k·n_tok⌉, ties by position (i, t)
    [paper §3.2; pooling ours]. H is the behaviour policy's entropy at generation
    (`rollouts.entropy`) [ours; the paper writes π_θ]. Advantages are not renormalised
    after selection [paper §3.1].

    Shapes: advantages, response_mask, entropy [B, T]; row_keep [B]; token_weight [B, T].
    Metrics: d3s/p, d3s/sample_keep_frac (of B_v), d3s/token_keep_frac (of all valid
    tokens), d3s/var_adv_all, d3s/var_adv_kept, d3s/useful_frac_kept (Â ≠ 0),
    d3s/pos_frac_kept, d3s/key_threshold (smallest kept key).
    """
    if advantages is None:
        raise ValueError("d3s selects on advantages; it runs after the advantage estimator")
    if rollouts.entropy is None:
        raise ValueError(
            "d3s needs the per-token entropy of the sampling policy (rollouts.entropy); the "
            "HF engine records it — a custom engine must fill Generations.entropy"
        )
    state = state or {}
    total = max(int(state.get("total_steps", 1)), 1)
    p = min(max(state.get("step", 0) / total, 0.0), 1.0)
    f_s = (1 - p) * cfg.sample_init + p * cfg.sample_final
    f_k = (1 - p) * cfg.token_init + p * cfg.token_final

    mask = rollouts.response_mask > 0
    valid_rows = mask.any(-1)
    first = mask.float().argmax(-1)
    row_adv = advantages.gather(1, first.unsqueeze(1)).squeeze(1).double()
    keep = torch.zeros(len(row_adv), dtype=torch.bool)
    if cfg.mode == "cross":
        rows = valid_rows.nonzero(as_tuple=True)[0]
        keep[rows[max_variance_subset(row_adv[rows], math.ceil(f_s * len(rows)))]] = True
    else:
        for g in torch.unique(rollouts.group_ids):
            rows = ((rollouts.group_ids == g) & valid_rows).nonzero(as_tuple=True)[0]
            keep[rows[max_variance_subset(row_adv[rows], math.ceil(f_s * len(rows)))]] = True

    candidates = mask & keep.unsqueeze(1)
    key = (advantages.abs() * rollouts.entropy).double()
    flat = candidates.flatten().nonzero(as_tuple=True)[0]
    n_keep = max(math.ceil(f_k * len(flat)), 1) if len(flat) else 0
    # stable sort on −κ: equal keys stay in (i, t) order
    order = torch.sort(-key.flatten()[flat], stable=True).indices[:n_keep]
    weight = torch.zeros(mask.numel())
    weight[flat[order]] = 1.0
    kept_adv = row_adv[keep]
    return Selection(
        row_keep=keep,
        token_weight=weight.view_as(rollouts.response_mask),
        metrics={
            "d3s/p": p,
            "d3s/sample_keep_frac": float(keep.sum()) / max(int(valid_rows.sum()), 1),
            "d3s/token_keep_frac": n_keep / max(int(mask.sum()), 1),
            "d3s/var_adv_all": _population_var(row_adv[valid_rows]),
            "d3s/var_adv_kept": _population_var(kept_adv),
            "d3s/useful_frac_kept": float((kept_adv != 0).double().mean())
            if len(kept_adv)
            else 0.0,
            "d3s/pos_frac_kept": float((kept_adv > 0).double().mean()) if len(kept_adv) else 0.0,
            "d3s/key_threshold": float(key.flatten()[flat[order[-1]]]) if n_keep else 0.0,
        },
    )


def max_variance_subset(values: torch.Tensor, n: int) -> torch.Tensor:
    """Indices of the n values with the largest population variance (D³S §3.1).

    The optimum is the k largest ∪ the n − k smallest for some k (PODS Lemma 3.1); values
    are sorted by (−v, index) and k = n..0 tried, ties → the largest k (all-equal values
    keep the first n) [ours]. n ≥ len → every index. Shapes: values [M] → indices
    [min(n, M)]."""
    m = len(values)
    order = torch.sort(-values, stable=True).indices
    if n >= m:
        return order
    best, best_var = order[m - n :], -math.inf
    for k in range(n, -1, -1):
        subset = torch.cat([order[:k], order[m - (n - k) :]])
        var = _population_var(values[subset])
        if var > best_var + 1e-12:
            best, best_var = subset, var
    return best


def _population_var(values: torch.Tensor) -> float:
    return float(values.double().var(unbiased=False)) if len(values) else 0.0


@dataclass(frozen=True)
class TopQuantileOptions:
    epsilon: float = option(0.1, "ε: keep the rows whose reward is at least the (1 − ε)-quantile")

    def __post_init__(self) -> None:
        check_range("top_quantile", "epsilon", self.epsilon, low=0.0, high=1.0, low_open=True)


@selections.register("top_quantile", config=TopQuantileOptions)
@runs_at("advantages")
def top_quantile(
    rollouts: Rollouts, advantages: torch.Tensor, cfg: TopQuantileOptions, state: Any = None
) -> Selection:
    """Risk-seeking PG's filter: keep row i iff R_i ≥ R_ε, R_ε the (1 − ε)-quantile of the
    whole step's finite rewards with numpy's "higher" interpolation, so every row tied at
    R_ε is kept [paper arXiv:2502.02014 §6.1; code DSO train.py `keep = r >= quantile`].
    Runs once per step after the advantage (so `quantile_baseline` sees the same batch);
    NaN rewards are dropped. Shapes: rewards [B]; row_keep [B]; token_weight [B, T] ones.
    Metrics: rs/quantile (R_ε), rs/kept_frac."""
    rewards = rollouts.rewards.detach().double()
    threshold = reward_quantile(rewards, cfg.epsilon)
    keep = torch.isfinite(rewards) & (rewards >= threshold)
    return Selection(
        row_keep=keep,
        token_weight=torch.ones_like(rollouts.response_mask, dtype=torch.float32),
        metrics={
            "rs/quantile": float(threshold),
            "rs/kept_frac": float(keep.double().mean()) if len(keep) else 0.0,
        },
    )


@selections.register("capo", config=CapoOptions)
@runs_at("learn")
def capo(
    rollouts: Rollouts, advantages: torch.Tensor, cfg: CapoOptions, state: Any = None
) -> Selection:
    """CAPO, curvature-aware token masking (Melo et al., arXiv:2510.00819; papers §14;
    algebra/capo.py holds the formulas): each token's predicted objective change m_H and
    policy change m_F under its own Adam-shaped step of the LM head; tokens outside
    −τ_H < m_H < τ_H, m_F < τ_F are masked. Runs on every micro-batch of the update, on
    that forward pass: `rollouts.extras` "head_input" [B, T, d] and "logits" [B, T, V]
    (detached; logits tempered and head_input divided by the temperature, so the model of
    the head is the sampling policy's [ours; the code takes top-K of the raw logits]);
    `state` {"state": CurvatureState (the Adam model, checkpointed; made by
    `capo.make_state`), "lr": η now}.

    Shapes: advantages [B, T]; row_keep [B] all True; token_weight [B, T] 0/1. A row whose
    every token is masked contributes 0 to the loss."""
    mask = rollouts.response_mask > 0
    out = capo_mask(
        rollouts.extras["head_input"][mask],
        rollouts.extras["logits"][mask],
        rollouts.response_ids[mask],
        advantages[mask],
        state["lr"],
        state["state"],
        cfg,
    )
    weight = torch.zeros(mask.shape)
    weight[mask] = out.accepted.float()
    return Selection(torch.ones(mask.shape[0], dtype=torch.bool), weight, out.metrics)


capo.make_state = CurvatureState.from_options  # the stage running capo keeps one
