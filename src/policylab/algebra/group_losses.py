"""Policy losses that read the whole group: Reg-GRPO, PACS and P3O (issue #8).

Same signature as every policy loss (algebra/losses.py), but each needs the group of every
row, and PACS and P3O its reward, from `rollouts` (group_ids [B], rewards [B], the rows of
`logprobs`). The trainer must keep every group whole inside one micro-batch: the group
statistics below are taken over the rows present.

Reduction [ours]: each loss builds one loss ℓ_i per row (a group or pair term shared out
to the rows), places it on the row's valid tokens and reduces with the shared `aggregate`
and the trainer's global normaliser. With the default `seq-mean-token-mean` that is
Σ_i ℓ_i / B' (B' = rows with a valid token in the minibatch): the papers' mean over groups
(Reg-GRPO), over rows (PACS) and over pairs (P3O) whenever groups have equal sizes, and
exact under micro-batching by construction. A row with no valid token was dropped (by a
selection) and leaves its group. Formulas: papers/seed_llm_algorithms.md §5, §10, §11.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from policylab.algebra.aggregate import aggregate
from policylab.algebra.losses import (
    LOG_RATIO_CLAMP,
    LossOptions,
    TokenTerms,
    add_kl_term,
    policy_losses,
    ratio_metrics,
    token_terms,
)
from policylab.algebra.options import check_choice, check_range, option

GRPO_STD_EPS = 1e-6  # PACS's "grpo" centring: (q − mean)/(std + 1e-6) [code compute_grpo_*]
ZERO = 1e-8  # a group statistic at or below this counts as zero


# ---- options ------------------------------------------------------------------------------
@dataclass(frozen=True)
class RegGRPOOptions(LossOptions):
    loss_agg_mode: str = option(
        "seq-mean-token-mean", "mean of the rows' squared errors (ours; see module doc)"
    )
    eps_rho: float = option(
        1e-8, "ε_ρ in σ_ρ = sqrt(var(ρ) + ε_ρ): finite gradient when all ρ are equal (ours)"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("reg_grpo", "eps_rho", self.eps_rho, low=0.0, low_open=True)


@dataclass(frozen=True)
class PACSOptions(LossOptions):
    loss_agg_mode: str = option(
        "seq-mean-token-mean", "mean of the rows' BCE terms (code BCEWithLogitsLoss, mean)"
    )
    beta: float = option(1.0, "β scaling the score q = β·Δ (code scripts pacs_beta_1.0.sh)")
    score: str = option(
        "log_ratio", "q: 'log_ratio' β·Σ(logp − old) or 'mean_logprob' β·mean logp (code)"
    )
    centring: str = option("rloo", "ψ from q within the group: 'rloo', 'grpo' or 'none' (code)")
    class_weight: str = option(
        "question", "'question' (balanced per group), 'none', 'only_positive', 'only_negative'"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("pacs", "beta", self.beta, low=0.0, low_open=True)
        check_choice("pacs", "score", self.score, ("log_ratio", "mean_logprob"))
        check_choice("pacs", "centring", self.centring, ("rloo", "grpo", "none"))
        check_choice(
            "pacs",
            "class_weight",
            self.class_weight,
            ("question", "none", "only_positive", "only_negative"),
        )


@dataclass(frozen=True)
class P3OOptions(LossOptions):
    loss_agg_mode: str = option(
        "seq-mean-token-mean", "mean over pairs via the rows' shares (ours; see module doc)"
    )
    clip: str = option("joint", "'joint' (V2, one clip of ρ_w/ρ_l) or 'separate' (V1, per row)")
    eps_low: float = option(0.2, "ratio floor 1 − eps_low (ours: PPO default)")
    eps_high: float = option(0.2, "ratio cap 1 + eps_high (ours: PPO default)")
    pairing: str = option("all", "pairs in a group: 'all' i<j, or 'disjoint' (0,1),(2,3),…")
    gap: str = option(
        "rewards", "δ_ij = ½(x_i − x_j) of 'rewards' (rollouts) or 'advantages' (the argument)"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("p3o", "clip", self.clip, ("joint", "separate"))
        check_range("p3o", "eps_low", self.eps_low, low=0.0, high=1.0)
        check_range("p3o", "eps_high", self.eps_high, low=0.0)
        check_choice("p3o", "pairing", self.pairing, ("all", "disjoint"))
        check_choice("p3o", "gap", self.gap, ("rewards", "advantages"))


# ---- shared pieces ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Groups:
    """Each row's group among the rows present (≥ 1 valid token and, where asked, a finite
    value); rows not present get size 0."""

    index: torch.Tensor  # [B] long, 0..n_groups−1
    n_groups: int
    present: torch.Tensor  # [B] bool
    size: torch.Tensor  # [B] number of present rows in the row's group (0 if absent)

    def sum(self, x: torch.Tensor) -> torch.Tensor:
        """Σ over the present rows of each row's group, differentiable ([B] → [B]);
        `group_stats` (advantages.py) detaches, so the policy's own statistics use this."""
        x = torch.where(self.present, x, torch.zeros_like(x))
        return x.new_zeros(self.n_groups).index_add(0, self.index, x)[self.index]


def _groups(rollouts, terms: TokenTerms, by: str, *, need_rewards: bool) -> Groups:
    B = terms.valid.shape[0]
    if rollouts is None:
        wants = "group_ids [B] and rewards [B]" if need_rewards else "group_ids [B]"
        raise ValueError(
            f"policy loss {by!r} reads its groups from rollouts: pass rollouts= with {wants} "
            "for the same rows as logprobs (whole groups per micro-batch)"
        )
    rollouts.require("group_ids", *(("rewards",) if need_rewards else ()), by=f"loss {by!r}")
    if len(rollouts) != B:
        raise ValueError(
            f"policy loss {by!r}: rollouts has {len(rollouts)} rows but logprobs has {B}; "
            "pass the micro-batch's own rows"
        )
    present = terms.valid.any(dim=-1)
    if need_rewards:
        present = present & torch.isfinite(rollouts.rewards.to(terms.valid.device))
    _, index = torch.unique(rollouts.group_ids.to(terms.valid.device), return_inverse=True)
    n_groups = int(index.max()) + 1 if B else 0
    count = terms.logp.new_zeros(n_groups).index_add(0, index, present.to(terms.logp.dtype))
    size = torch.where(present, count[index], torch.zeros_like(count[index]))
    return Groups(index, n_groups, present, size)


def _seq_log_ratio(terms: TokenTerms) -> torch.Tensor:
    """Δ_i = Σ_t m·(logp − old_logp) [B] (each token clamped to ±20, as every loss)."""
    return terms.log_ratio.sum(dim=-1)


def _row_values(x: torch.Tensor, terms: TokenTerms) -> torch.Tensor:
    """[B, T] (0 where masked) → [B]: the row's mean over its valid tokens."""
    return x.sum(dim=-1) / terms.valid.sum(dim=-1).clamp(min=1).to(x.dtype)


def _reduce_rows(row_loss, terms: TokenTerms, cfg: LossOptions, normaliser) -> torch.Tensor:
    """ℓ_i on each valid token of row i, reduced by `loss_agg_mode` and the normaliser."""
    matrix = row_loss.unsqueeze(-1).expand(terms.valid.shape)
    return aggregate(matrix, terms.valid, cfg.loss_agg_mode, normaliser, L_max=cfg.L_max)


def _mean(x: torch.Tensor, where: torch.Tensor) -> float:
    return float(x[where].double().mean()) if bool(where.any()) else 0.0


# ---- Reg-GRPO ---------------------------------------------------------------------------------
@policy_losses.register("reg_grpo", config=RegGRPOOptions)
def reg_grpo_loss(
    logprobs,
    old_logprobs,
    advantages,
    response_mask,
    cfg: RegGRPOOptions,
    *,
    ref_logprobs=None,
    rollouts=None,
    normaliser=None,
):
    """Reg-GRPO: regress the group-standardised sequence log-ratio onto the GRPO advantage;
    no ratio clip, no min (DeepVideo-R1, Park et al., arXiv:2506.07464 §3.2 Eqs. 7–8).

    ρ_i = Σ_t m·(logp − old_logp);  Â_θ,i = (ρ_i − μ_ρ)/σ_ρ, σ_ρ = sqrt(var_unbiased(ρ) + ε_ρ)
    over the row's group;  ℓ_i = (Â_i − Â_θ,i)²;  L = agg(ℓ) + β·agg(KL_est(logp, ref)).
    Â_i = `advantages` (the grpo estimator's Â = (R − μ_R)/(σ_R + ε_A); a [B, T] input is
    averaged over the row's valid tokens). Needs rollouts.group_ids; rewards are not read.
    Shapes: logprobs, old_logprobs, ref_logprobs, response_mask [B, T]; advantages [B] or
    [B, T]; ρ, Â, Â_θ [B].
    Defaults: β = 0.1 with k3 [paper App. C.1, set by the recipe]; +β·KL in a minimised loss
    (the paper prints −β); ε_ρ = 1e-8, unbiased σ, groups of one give ℓ = 0, and
    row-mean reduction (the paper's mean over groups when sizes are equal) — ours."""
    terms = token_terms(logprobs, old_logprobs, advantages, response_mask)
    groups = _groups(rollouts, terms, "reg_grpo", need_rewards=False)
    rho = _seq_log_ratio(terms)
    n = groups.size.to(rho.dtype)
    mu = groups.sum(rho) / n.clamp(min=1)
    var = groups.sum((rho - mu) ** 2) / (n - 1).clamp(min=1)
    sigma = torch.sqrt(var + cfg.eps_rho)
    a_theta = (rho - mu) / sigma
    target = _row_values(terms.adv, terms)
    used = groups.present & (groups.size > 1)
    row_loss = torch.where(used, (target - a_theta) ** 2, torch.zeros_like(rho))
    metrics = _reg_grpo_metrics(target, a_theta.detach(), sigma.detach(), groups, used)
    metrics.update(ratio_metrics(terms))
    loss = _reduce_rows(row_loss, terms, cfg, normaliser)
    metrics["reg_grpo/loss"] = float(loss.detach())
    return add_kl_term(loss, metrics, terms, ref_logprobs, cfg, normaliser)


def _reg_grpo_metrics(target, a_theta, sigma, groups: Groups, used) -> dict[str, float]:
    with torch.no_grad():
        t, p = target[used].double(), a_theta[used].double()
        corr = 0.0
        if len(t) > 1 and float(t.std()) > ZERO and float(p.std()) > ZERO:
            corr = float(torch.corrcoef(torch.stack([t, p]))[0, 1])
        target_spread = groups.sum(target.abs()) > ZERO
        return {
            "reg_grpo/corr": corr,
            "reg_grpo/sigma_rho_mean": _mean(sigma, used),
            "reg_grpo/vanishing_adv_frac": _mean(~target_spread, used),
        }


# ---- PACS -------------------------------------------------------------------------------------
@policy_losses.register("pacs", config=PACSOptions)
def pacs_loss(
    logprobs,
    old_logprobs,
    advantages,
    response_mask,
    cfg: PACSOptions,
    *,
    ref_logprobs=None,
    rollouts=None,
    normaliser=None,
):
    """PACS: the outcome reward is the label of a score built from the policy's scaled
    sequence log-ratio, with class-balanced BCE (Li et al., arXiv:2509.02522; formulas from
    the official code ritzz-ai/PACS src/pacs/pacs_core_algos.py, spec §10.1).

    q_i = β·Σ_t m·(logp − old_logp) (score="mean_logprob": β·Σ_t m·logp / |o_i|);
    ψ_i = q_i − (1/(|g|−1))·Σ_{j∈g, j≠i} q_j (rloo; grpo: (q − μ)/(σ + 1e-6); none: q);
    y_i = R_i ∈ [0, 1] from rollouts.rewards; cw_i = |g|/(K_g·count_g(y_i)) when the group
    has K_g ≥ 2 distinct labels, else 1 (sklearn "balanced", class_weight="question");
    ℓ_i = cw_i·[−y_i·log σ(ψ_i) − (1 − y_i)·log(1 − σ(ψ_i))];  L = agg(ℓ).
    Gradient: ∂L/∂Δ_k = (β/N)·[e_k − (1/(|g|−1))·Σ_{i≠k} e_i], e_i = cw_i·(σ(ψ_i) − y_i):
    REINFORCE with advantage y − σ(ψ), leave-one-out centred; σ(ψ) is the implicit critic.
    `advantages` is not read (the labels are the rewards). Shapes: [B, T] token inputs;
    rewards, group_ids, q, ψ, cw [B].
    Defaults: β = 1, rloo, question weights, score log_ratio [code scripts]; loss divided by
    the row count, not Σcw [code BCEWithLogitsLoss(weight)]; a NaN reward or an empty row
    leaves its group, and rows in groups of one give ℓ = 0 under rloo/grpo (ours)."""
    terms = token_terms(logprobs, old_logprobs, advantages, response_mask)
    groups = _groups(rollouts, terms, "pacs", need_rewards=True)
    labels = rollouts.rewards.to(device=terms.logp.device, dtype=terms.logp.dtype).detach()
    labels = torch.where(groups.present, labels, torch.zeros_like(labels))
    bad = groups.present & ((labels < 0) | (labels > 1))
    if bool(bad.any()):
        raise ValueError(
            f"policy loss 'pacs' uses rewards as BCE labels, which must lie in [0, 1]; got "
            f"{labels[bad][:5].tolist()}; map the verifier's outcome to a 0/1 label first"
        )
    delta = _seq_log_ratio(terms)
    if cfg.score == "log_ratio":
        q = cfg.beta * delta
    else:
        q = cfg.beta * _row_values(terms.logp, terms)
    psi = _centre(q, groups, cfg.centring)
    cw = _class_weights(labels, groups, cfg.class_weight)
    used = groups.present & ((groups.size > 1) | (cfg.centring == "none"))
    bce = F.binary_cross_entropy_with_logits(psi, labels, reduction="none")
    row_loss = torch.where(used, cw * bce, torch.zeros_like(bce))
    loss = _reduce_rows(row_loss, terms, cfg, normaliser)
    metrics = _pacs_metrics(psi.detach(), labels, cw, delta.detach(), groups, used)
    metrics["pacs/loss"] = float(loss.detach())
    metrics.update(ratio_metrics(terms))
    return add_kl_term(loss, metrics, terms, ref_logprobs, cfg, normaliser)


def _centre(q: torch.Tensor, groups: Groups, centring: str) -> torch.Tensor:
    if centring == "none":
        return q
    n = groups.size.to(q.dtype)
    if centring == "rloo":  # q_i − (S_g − q_i)/(n − 1)
        return q - (groups.sum(q) - q) / (n - 1).clamp(min=1)
    mu = groups.sum(q) / n.clamp(min=1)
    var = groups.sum((q - mu) ** 2) / (n - 1).clamp(min=1)
    # sqrt only where var > 0: sqrt'(0) = inf would turn the zero gradient into NaN
    positive = var > 0
    std = torch.where(positive, torch.sqrt(torch.where(positive, var, torch.ones_like(var))), 0)
    return (q - mu) / (std + GRPO_STD_EPS)


def _class_weights(labels: torch.Tensor, groups: Groups, mode: str) -> torch.Tensor:
    if mode == "none":
        return torch.ones_like(labels)
    if mode == "only_positive":
        return (labels == 1).to(labels.dtype)
    if mode == "only_negative":
        return (labels == 0).to(labels.dtype)
    # balanced per group: each distinct label value is a class (sklearn compute_class_weight)
    rows = groups.present.nonzero(as_tuple=True)[0]
    keys = torch.stack([groups.index[rows].to(labels.dtype), labels[rows]], dim=-1)
    unique, key_of, key_count = torch.unique(keys, dim=0, return_inverse=True, return_counts=True)
    group_of_key = unique[:, 0].long()
    classes = labels.new_zeros(groups.n_groups).index_add(
        0, group_of_key, torch.ones_like(unique[:, 0])
    )
    n = groups.size[rows].to(labels.dtype)
    k = classes[groups.index[rows]].to(labels.dtype)
    balanced = n / (k * key_count[key_of].to(labels.dtype))
    cw = torch.ones_like(labels)
    cw[rows] = torch.where(k > 1, balanced, torch.ones_like(balanced))
    return cw


def _pacs_metrics(psi, labels, cw, delta, groups: Groups, used) -> dict[str, float]:
    with torch.no_grad():
        p = torch.sigmoid(psi)
        pos, neg = used & (labels > 0.5), used & (labels <= 0.5)
        n = groups.size.to(labels.dtype).clamp(min=1)
        spread = groups.sum((labels - groups.sum(labels) / n) ** 2)
        uniform = used & (spread <= ZERO)
        return {
            "pacs/score_mean": _mean(psi, used),
            "pacs/score_abs_mean": _mean(psi.abs(), used),
            "pacs/pred_acc": _mean((psi > 0) == (labels > 0.5), used),
            "pacs/p_success_pos": _mean(p, pos),
            "pacs/p_success_neg": _mean(p, neg),
            "pacs/pos_weight": _mean(cw, pos),
            "pacs/frac_uniform_groups": _mean(uniform, used),
            "pacs/log_ratio_abs_mean": _mean(delta.abs(), used),
        }


# ---- P3O --------------------------------------------------------------------------------------
@policy_losses.register("p3o", config=P3OOptions)
def p3o_loss(
    logprobs,
    old_logprobs,
    advantages,
    response_mask,
    cfg: P3OOptions,
    *,
    ref_logprobs=None,
    rollouts=None,
    normaliser=None,
):
    """P3O: clipped trajectory-level policy gradient on pairs of responses to one prompt,
    weighted by half the reward gap (Wu et al., arXiv:2310.00212 Thm. 1 / Eq. 6, §4.2).

    For a pair (i, j) of one group: δ_ij = ½(R_i − R_j), ρ_k = exp(clamp(Δ_k, ±20)),
    Δ_k = Σ_t m·(logp − old_logp). Winner w, loser l: the row with the larger reward first,
    d = |δ_ij|.
      joint (V2):    J = d·min(ρ_w/ρ_l, clip(ρ_w/ρ_l, 1 − ε_low, 1 + ε_high))
      separate (V1): J = sg(ρ_j)·min(ρ_i·δ, clip(ρ_i)·δ) + sg(ρ_i)·min(−ρ_j·δ, −clip(ρ_j)·δ)
    Pair loss −J; row i gets ℓ_i = Σ_{pairs ∋ i} (−J)/c_i with c_i = |g| − 1 ("all") or 1
    ("disjoint"), so agg(ℓ) is the mean over pairs for equal group sizes. At θ = θ_old both
    give the pairwise gradient δ_ij·∇(log π(y_i) − log π(y_j)). Rewards enter only through
    differences: adding c_g to every reward of group g changes nothing.
    gap="advantages" reads x = `advantages` (row means) instead of rollouts.rewards; with
    the dr_grpo estimator and its kl_coef this is the paper's KL-penalised trajectory reward
    R̃ = R − β·Σ_t(old − ref). Shapes: token inputs [B, T]; rewards, group_ids [B].
    Defaults [ours; the paper's clipped forms and values were not recoverable]: ε = 0.2,
    joint clip, all pairs, winner-first orientation (V2's value and clip region depend on it;
    V1's do not); ties give d = 0 and no gradient; groups of one give ℓ = 0."""
    terms = token_terms(logprobs, old_logprobs, advantages, response_mask)
    groups = _groups(rollouts, terms, "p3o", need_rewards=cfg.gap == "rewards")
    if cfg.gap == "rewards":
        x = rollouts.rewards.to(device=terms.logp.device, dtype=terms.logp.dtype).detach()
    else:
        x = _row_values(terms.adv, terms)
    x = torch.where(groups.present, x, torch.zeros_like(x))
    delta = _seq_log_ratio(terms).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    a, b = _pairs(groups, cfg.pairing)
    gap = 0.5 * (x[a] - x[b])
    low, high = 1.0 - cfg.eps_low, 1.0 + cfg.eps_high
    if cfg.clip == "joint":
        a_wins = gap >= 0
        w, lose = torch.where(a_wins, a, b), torch.where(a_wins, b, a)
        rel = torch.exp((delta[w] - delta[lose]).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
        J = gap.abs() * torch.minimum(rel, rel.clamp(low, high))
        clipped = (gap != 0) & (rel > high)
    else:
        ratio = torch.exp(delta)
        r_a, r_b = ratio[a], ratio[b]
        surrogate_a = torch.minimum(r_a * gap, r_a.clamp(low, high) * gap)
        surrogate_b = torch.minimum(-r_b * gap, -r_b.clamp(low, high) * gap)
        J = r_b.detach() * surrogate_a + r_a.detach() * surrogate_b
        # a PPO clip is active where it zeroes the row's gradient (advantage +δ for a, −δ for b)
        hit_a = ((gap > 0) & (r_a > high)) | ((gap < 0) & (r_a < low))
        hit_b = ((gap < 0) & (r_b > high)) | ((gap > 0) & (r_b < low))
        clipped = torch.cat([hit_a, hit_b])
    clipfrac = float(clipped.double().mean()) if len(a) else 0.0
    if cfg.pairing == "all":
        share = (groups.size - 1).clamp(min=1).to(J.dtype)
    else:
        share = torch.ones_like(delta)
    row_loss = (delta * 0).index_add(0, a, -J / share[a]).index_add(0, b, -J / share[b])
    loss = _reduce_rows(row_loss, terms, cfg, normaliser)
    with torch.no_grad():
        metrics = {
            "p3o/loss": float(loss.detach()),
            "p3o/clipfrac": clipfrac,
            "p3o/pairs": float(len(a)),
            "p3o/gap_abs_mean": float(gap.abs().double().mean()) if len(a) else 0.0,
            "p3o/frac_zero_gap": float((gap == 0).double().mean()) if len(a) else 0.0,
            "p3o/log_ratio_abs_mean": _mean(delta.abs(), groups.present),
        }
    metrics.update(ratio_metrics(terms))
    return add_kl_term(loss, metrics, terms, ref_logprobs, cfg, normaliser)


def _pairs(groups: Groups, pairing: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Row indices (a, b), a < b, of the pairs inside each group among present rows."""
    B = len(groups.index)
    same = groups.index.unsqueeze(0) == groups.index.unsqueeze(1)
    same &= groups.present.unsqueeze(0) & groups.present.unsqueeze(1)
    order = torch.arange(B, device=same.device)
    after = order.unsqueeze(0) > order.unsqueeze(1)  # [i, j]: j comes after i
    if pairing == "all":
        chosen = same & after
    else:  # rank within the group among present rows: pair ranks (0,1), (2,3), ...
        rank = (same & after.T).sum(dim=-1)
        chosen = same & (rank.unsqueeze(0) == rank.unsqueeze(1) + 1) & (rank % 2 == 0)[:, None]
    a, b = chosen.nonzero(as_tuple=True)
    return a, b
