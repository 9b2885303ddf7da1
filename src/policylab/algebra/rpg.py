"""RPG: KL-regularised policy-gradient losses (Zhang et al., On the Design of KL-Regularized
Policy Gradient Algorithms for LLM Reasoning, arXiv:2505.17508; papers/seed_llm_algorithms.md §3).

Samples come from π_old; per token w = πθ/π_old = exp(logp − old_logp). Each regulariser D
gives a loss whose expected gradient under π_old is exactly −∇J, J = E_πθ[R] − β·D
(spec §3.1; A stands in for R, §3.2):

| kl               | D                  | surrogate k_D (form="surrogate") | REINFORCE weight C_D  |
|------------------|--------------------|----------------------------------|-----------------------|
| forward          | KL(π_ref ‖ πθ)     | −log w                           | β                     |
| reverse          | KL(πθ ‖ π_ref)     | w·log w                          | −β·w̄·(log w̄ + 1)     |
| unnorm_forward   | UKL(π_ref ‖ πθ)    | w − log w − 1                    | β·(1 − w̄)             |
| unnorm_reverse   | UKL(πθ ‖ π_ref)    | w·(log w − 1) + 1                | −β·w̄·log w̄           |

with π_ref = π_old (the code's iterative reference, `reference="old"`). Sources: Table 1
(Prop. 3.2, 3.6), Table 4 (Prop. E.1, E.3), Table 2 (Prop. 4.1), App. F–G; code
complex-reasoning/RPG core_algos.py `kl_penalty`, `compute_policy_loss(_reinforce)`.

Frozen reference (`reference="ref"`, [ours], spec §3.2): with d = old_logp − ref_logp and
log u = log w + d = logp − ref_logp, k_FKL = −e^{−d}·log u, k_RKL = w·log u, k_UFKL =
k_FKL + w − 1, k_URKL = w·log u − w + 1 and C_FKL = β·e^{−d}, C_RKL = −β·w̄·(log w̄ + d + 1),
C_UFKL = β·(e^{−d} − w̄), C_URKL = −β·w̄·(log w̄ + d); d = 0 gives the table above.

Shapes: logprobs (with grad), old_logprobs, ref_logprobs, response_mask: [B, T];
advantages: [B] or [B, T]. Masked positions may hold NaN/inf: they are replaced first.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.algebra.aggregate import masked_mean
from policylab.algebra.losses import (
    LOG_RATIO_CLAMP,
    LossOptions,
    TokenTerms,
    _reduce,
    add_kl_term,
    policy_losses,
    ratio_metrics,
    token_terms,
)
from policylab.algebra.options import check_choice, check_range, option

KLS = ("forward", "reverse", "unnorm_forward", "unnorm_reverse")
FORMS = ("surrogate", "reinforce")


@dataclass(frozen=True)
class RPGOptions(LossOptions):
    kl: str = option(
        "reverse",
        f"regulariser D: {KLS} ([ours] reverse; the paper compares all four, no default)",
    )
    form: str = option(
        "surrogate",
        "surrogate: dual-clip PPO + β·k_D, fully differentiable (the released code); "
        "reinforce: −sg(w·A + C_D)·logp with RPG-style clip (paper Alg. 2)",
    )
    beta: float = option(1e-4, "β of the regulariser ([paper App. H; code kl_loss_coef=1e-4])")
    eps_low: float = option(0.2, "ratio floor 1 − eps_low ([paper §5, App. H; code scripts])")
    eps_high: float = option(0.28, "ratio cap 1 + eps_high ([paper §5, App. H; code scripts])")
    dual_clip_c: float | None = option(
        10.0, "dual-clip bound c > 1 on negative advantages ([code clip_ratio_c=10.0]; None = off)"
    )
    kl_clamp: float | None = option(
        10.0, "surrogate: clamp of k_D to ±kl_clamp for all but forward ([code kl_penalty])"
    )
    kl_placement: str = option(
        "additive",
        "surrogate: 'additive' (β·k_D added, the code) or 'in_advantage' (A′ = A + C_D/w "
        "inside the dual-clip PPO term, paper App. G.1 Alg. 1)",
    )
    reinforce_clip: str = option(
        "rpg",
        "reinforce: 'rpg' (mask by branch, paper Alg. 2), 'hard' (weight A·w̄ + C_D(w̄), no mask, "
        "Remark F.2) or 'none' (Table 2 as written)",
    )
    clip_branch: str = option(
        "effective",
        "reinforce_clip='rpg': branch on the sign of A′ = A + C_D/w ('effective', paper Alg. 2) "
        "or of A ('reward', the code's clip_ppo)",
    )
    reference: str = option(
        "old",
        "'old': π_ref = π_old, refreshed every rollout ([code use_iterative_ref_model=True]); "
        "'ref': a frozen reference, needs ref_logprobs ([ours] importance-weighted)",
    )

    @property
    def needs_reference(self) -> bool:
        return self.reference == "ref" or self.kl_coef > 0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("rpg", "kl", self.kl, KLS)
        check_choice("rpg", "form", self.form, FORMS)
        check_range("rpg", "beta", self.beta, low=0.0)
        check_range("rpg", "eps_low", self.eps_low, low=0.0, high=1.0)
        check_range("rpg", "eps_high", self.eps_high, low=0.0)
        check_range("rpg", "dual_clip_c", self.dual_clip_c, low=1.0, low_open=True, allow_none=True)
        check_range("rpg", "kl_clamp", self.kl_clamp, low=0.0, low_open=True, allow_none=True)
        check_choice("rpg", "kl_placement", self.kl_placement, ("additive", "in_advantage"))
        check_choice("rpg", "reinforce_clip", self.reinforce_clip, ("rpg", "hard", "none"))
        check_choice("rpg", "clip_branch", self.clip_branch, ("effective", "reward"))
        check_choice("rpg", "reference", self.reference, ("old", "ref"))
        # an option of the other form would be silently ignored: say so instead
        if self.form == "reinforce" and self.kl_placement != "additive":
            raise ValueError(
                f"rpg.kl_placement = {self.kl_placement!r} applies to form='surrogate' only; "
                "the reinforce form always puts C_D in the weight"
            )
        if self.form == "surrogate" and self.reinforce_clip != "rpg":
            raise ValueError(
                f"rpg.reinforce_clip = {self.reinforce_clip!r} applies to form='reinforce' only"
            )
        if self.clip_branch != "effective" and (
            self.form != "reinforce" or self.reinforce_clip != "rpg"
        ):
            raise ValueError(
                f"rpg.clip_branch = {self.clip_branch!r} applies to form='reinforce' with "
                "reinforce_clip='rpg' only"
            )


# ---- the regulariser's two forms ----------------------------------------------------------
def kl_surrogate(kl: str, w: torch.Tensor, log_w: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """k_D per token, differentiable through w and log w (d = old − ref is detached).
    E_old[k_D] = D(π_ref, πθ) exactly for normalised policies, so ∇E_old[k_D] = ∇D."""
    log_u = log_w + d
    if kl == "forward":
        return -torch.exp(-d) * log_u
    if kl == "reverse":
        return w * log_u
    if kl == "unnorm_forward":
        return -torch.exp(-d) * log_u + w - 1.0
    return w * log_u - w + 1.0


def kl_weight(kl: str, beta: float, w_bar: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """C_D: the regulariser's part of the REINFORCE weight W = w·A + C_D, so that
    E_old[C_D·∇logp] = −β·∇D (spec §3.2b); w̄ is the (clipped) detached ratio."""
    if kl == "forward":
        return beta * torch.exp(-d)
    if kl == "reverse":
        return -beta * w_bar * (torch.log(w_bar) + d + 1.0)
    if kl == "unnorm_forward":
        return beta * (torch.exp(-d) - w_bar)
    return -beta * w_bar * (torch.log(w_bar) + d)


def _reference_gap(terms: TokenTerms, old_logprobs, ref_logprobs, cfg: RPGOptions):
    """d = old_logp − ref_logp [B, T], detached, 0 where masked (and for reference='old')."""
    zero = torch.zeros_like(terms.log_ratio).detach()
    if cfg.reference == "old":
        return zero
    if ref_logprobs is None:
        raise ValueError(
            "rpg with reference='ref' needs ref_logprobs (a frozen reference's log-probs of the "
            "sampled tokens); pass them, or use reference='old' (the paper's iterative reference)"
        )
    dtype = terms.logp.dtype
    old = torch.where(terms.valid, old_logprobs.detach().to(dtype), zero)
    ref = torch.where(terms.valid, ref_logprobs.detach().to(dtype), zero)
    return torch.where(terms.valid, old - ref, zero).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)


def _mean(x: torch.Tensor, valid: torch.Tensor) -> float:
    """⟨x⟩ over valid tokens; for a boolean x, the fraction where it holds."""
    return float(masked_mean(x, valid))


# ---- the two forms ------------------------------------------------------------------------
def _dual_clip_ppo(A, w, cfg: RPGOptions, valid, metrics) -> torch.Tensor:
    """ℓ = max(−A·w, −A·clip(w, 1−ε_low, 1+ε_high)); where A < 0, ℓ ← min(ℓ, −c·A)."""
    low, high = 1.0 - cfg.eps_low, 1.0 + cfg.eps_high
    L = torch.maximum(-A * w, -A * w.clamp(low, high))
    wd = w.detach()
    metrics["rpg/clipfrac_low"] = _mean((A < 0) & (wd < low), valid)
    metrics["rpg/clipfrac_high"] = _mean((A > 0) & (wd > high), valid)
    if cfg.dual_clip_c is None:
        metrics["rpg/clipfrac_dual"] = 0.0
        return L
    metrics["rpg/clipfrac_dual"] = _mean((A < 0) & (wd > cfg.dual_clip_c), valid)
    return torch.where(A < 0, torch.minimum(L, -cfg.dual_clip_c * A), L)


def _surrogate(terms: TokenTerms, d, cfg: RPGOptions, normaliser, metrics):
    """Spec §3.2(a): agg(ℓ_PPO(A)) + β·agg(k_D(w)), or ℓ_PPO(A′) with A′ = A + sg(C_D(w)/w)."""
    w, log_w, A, valid = terms.ratio, terms.log_ratio, terms.adv, terms.valid
    k = kl_surrogate(cfg.kl, w, log_w, d)
    if cfg.kl_clamp is not None and cfg.kl != "forward":  # the code leaves −log w unclamped
        with torch.no_grad():
            metrics["rpg/kl_clamp_frac"] = _mean(k.abs() > cfg.kl_clamp, valid)
        k = k.clamp(-cfg.kl_clamp, cfg.kl_clamp)
    else:
        metrics["rpg/kl_clamp_frac"] = 0.0
    k = torch.where(valid, k, torch.zeros_like(k))
    kl_value = _reduce(k, terms, cfg, normaliser)
    metrics["rpg/kl"] = float(kl_value.detach())
    if cfg.kl_placement == "additive":
        pg = _reduce(_dual_clip_ppo(A, w, cfg, valid, metrics), terms, cfg, normaliser)
        metrics["rpg/pg_loss"] = float(pg.detach())
        return pg + cfg.beta * kl_value
    with torch.no_grad():
        wd = w.detach()
        A_eff = A + kl_weight(cfg.kl, cfg.beta, wd, d) / wd
        metrics["rpg/branch_disagree_frac"] = _mean((A >= 0) != (A_eff >= 0), valid)
    pg = _reduce(_dual_clip_ppo(A_eff, w, cfg, valid, metrics), terms, cfg, normaliser)
    metrics["rpg/pg_loss"] = float(pg.detach())
    return pg


def _reinforce(terms: TokenTerms, d, cfg: RPGOptions, normaliser, metrics):
    """Spec §3.2(b)/(c): ℓ = −sg(W)·logp on active tokens, a constant elsewhere."""
    logp, A, valid = terms.logp, terms.adv, terms.valid
    w = terms.ratio.detach()
    low, high = 1.0 - cfg.eps_low, 1.0 + cfg.eps_high
    w_bar = w if cfg.reinforce_clip == "none" else w.clamp(low, high)
    C = kl_weight(cfg.kl, cfg.beta, w_bar, d)
    with torch.no_grad():
        k = torch.where(valid, kl_surrogate(cfg.kl, w, terms.log_ratio.detach(), d), 0.0)
        metrics["rpg/kl"] = float(_reduce(k, terms, cfg, normaliser))
    if cfg.reinforce_clip != "rpg":
        W = (A * w_bar if cfg.reinforce_clip == "hard" else A * w) + C
        metrics["rpg/weight_mean"] = _mean(W, valid)
        return _reduce(-W * logp, terms, cfg, normaliser)
    W = A * w + C
    A_eff = A + C / w  # sg(w)·A′ = W
    positive = (A_eff >= 0) if cfg.clip_branch == "effective" else (A >= 0)
    c = float("inf") if cfg.dual_clip_c is None else cfg.dual_clip_c
    high_hit = positive & (w >= high)
    low_hit = ~positive & (w <= low)  # the tie w = 1 − ε_low is clipped (paper Alg. 2)
    dual_hit = ~positive & (w >= c)
    # constants of inactive tokens (paper Alg. 2 lines 21–34): only the logged loss sees them
    dual_bound = A * c if cfg.dual_clip_c is not None else torch.zeros_like(A)  # no 0·inf
    bound = torch.where(high_hit, A * high, torch.where(low_hit, A * low, dual_bound))
    active = ~(high_hit | low_hit | dual_hit)
    L = torch.where(active, -W * logp, -(bound + C) * logp.detach())
    metrics["rpg/clipfrac_high"] = _mean(high_hit, valid)
    metrics["rpg/clipfrac_low"] = _mean(low_hit, valid)
    metrics["rpg/clipfrac_dual"] = _mean(dual_hit, valid)
    metrics["rpg/branch_disagree_frac"] = _mean((A >= 0) != (A_eff >= 0), valid)
    metrics["rpg/weight_mean"] = _mean(torch.where(active, W, 0.0), valid)
    return _reduce(L, terms, cfg, normaliser)


@policy_losses.register("rpg", config=RPGOptions)
def rpg_loss(
    logprobs,
    old_logprobs,
    advantages,
    response_mask,
    cfg: RPGOptions,
    *,
    ref_logprobs=None,
    rollouts=None,
    normaliser=None,
):
    """RPG: a KL-regularised policy gradient whose expected gradient is exactly
    −∇(E_πθ[A] − β·D(π_ref, πθ)) (arXiv:2505.17508, Tables 1, 2, 4; spec §3).

    form="surrogate" (spec §3.2a; code compute_policy_loss + kl_penalty):
      ℓ = max(−A·w, −A·clip(w, 1−ε_low, 1+ε_high)), ℓ ← min(ℓ, −c·A) where A < 0;
      loss = agg(ℓ) + β·agg(k_D(w)), k_D clamped to ±10 except forward.
      kl_placement="in_advantage" (App. G.1 Alg. 1): loss = agg(ℓ(A′)), A′ = A + sg(C_D(w)/w).
    form="reinforce" (§4, Eq. 4.1, App. G.2 Alg. 2): W = w·A + C_D(w̄), w̄ = clip(w),
      A′ = A + C_D/w; ℓ = −sg(W)·logp where active, else a constant:
      positive branch (A′ ≥ 0) active iff w < 1+ε_high, negative iff 1−ε_low < w < c.
      reinforce_clip="hard": ℓ = −sg(A·w̄ + C_D(w̄))·logp everywhere; "none": w̄ = w.

    Defaults: β = 1e-4, ε = (0.2, 0.28), c = 10, token-mean (paper App. H, code scripts);
    kl = "reverse" (ours). Metrics: rpg/pg_loss, rpg/kl (agg of k_D), rpg/clipfrac_low,
    rpg/clipfrac_high, rpg/clipfrac_dual, rpg/branch_disagree_frac, rpg/kl_clamp_frac,
    rpg/weight_mean, pg/approx_kl (the code's ppo_kl) and the ratio statistics."""
    terms = token_terms(logprobs, old_logprobs, advantages, response_mask)
    d = _reference_gap(terms, old_logprobs, ref_logprobs, cfg)
    metrics: dict[str, float] = {}
    if cfg.form == "surrogate":
        loss = _surrogate(terms, d, cfg, normaliser, metrics)
    else:
        loss = _reinforce(terms, d, cfg, normaliser, metrics)
    metrics.update(ratio_metrics(terms))
    return add_kl_term(loss, metrics, terms, ref_logprobs, cfg, normaliser)
