"""Policy losses: `fn(logprobs, old_logprobs, advantages, response_mask, cfg, *,
ref_logprobs=None, rollouts=None, normaliser=None) -> (loss, metrics)`.

Each builds a per-token loss matrix L [B, T] (minimised; L = −surrogate) and reduces it
with the shared `aggregate`, passing the trainer's global `normaliser` so micro-batches
add up exactly. A KL-to-reference term, when `kl_coef > 0`, is added by one shared helper
with the same aggregation (verl's dp_actor). Formulas follow
papers/seed_llm_algorithms.md §1.1, §2.4, §2.5, §2.6.

Shapes: logprobs (with grad), old_logprobs, ref_logprobs, response_mask: [B, T];
advantages: [B] (broadcast over the row's tokens) or [B, T]. Positions where the mask is 0
may hold anything (NaN, inf): they are replaced before any arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.algebra.aggregate import AGG_MODES, aggregate, masked_mean
from policylab.algebra.kl import kl_estimators
from policylab.algebra.options import check_choice, check_range, option
from policylab.algebra.precision import at_least_float32
from policylab.registry import Registry

# filled by this module and the ones above it; read it via algebra/catalogue.py
policy_losses: Registry = Registry("policy loss")

LOG_RATIO_CLAMP = 20.0  # |logp − old_logp| bound before exp (verl, OpenRLHF)


# ---- options ------------------------------------------------------------------------------
@dataclass(frozen=True)
class LossOptions:
    """Options every policy loss shares: aggregation and the KL-in-loss term."""

    loss_agg_mode: str = option("token-mean", f"how token losses become a scalar: {AGG_MODES}")
    L_max: int | None = option(None, "generation budget for seq-mean-token-sum-norm (Dr. GRPO)")
    kl_estimator: str | None = option(
        None, "KL-to-reference estimator in the loss: k1, k2, k3, ..."
    )
    kl_coef: float = option(0.0, "β of the KL term in the loss (0 = no reference model needed)")

    @property
    def needs_reference(self) -> bool:
        """Whether the loss reads ref_logprobs (the trainer then loads a reference model)."""
        return self.kl_coef > 0

    def __post_init__(self) -> None:
        owner = type(self).__name__
        check_choice(owner, "loss_agg_mode", self.loss_agg_mode, AGG_MODES)
        check_range(owner, "kl_coef", self.kl_coef, low=0.0)
        if self.kl_estimator is not None or self.kl_coef > 0:
            check_choice(owner, "kl_estimator", self.kl_estimator, kl_estimators.names())
        if self.loss_agg_mode == "seq-mean-token-sum-norm":
            if not isinstance(self.L_max, int) or self.L_max <= 0:
                raise ValueError(
                    f"{owner}.L_max = {self.L_max!r}: loss_agg_mode 'seq-mean-token-sum-norm' "
                    "divides by a fixed generation budget; set L_max to the maximum number of "
                    "generated tokens (a positive integer)"
                )


@dataclass(frozen=True)
class PPOClipOptions(LossOptions):
    eps_low: float = option(0.2, "lower clip range: ratio floor 1 − eps_low")
    eps_high: float = option(
        0.2, "upper clip range: ratio cap 1 + eps_high (clip-higher > eps_low)"
    )
    dual_clip_c: float | None = option(None, "dual-clip bound c > 1 for A < 0 (None = off)")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("ppo_clip", "eps_low", self.eps_low, low=0.0, high=1.0)
        check_range("ppo_clip", "eps_high", self.eps_high, low=0.0)
        check_range(
            "ppo_clip", "dual_clip_c", self.dual_clip_c, low=1.0, low_open=True, allow_none=True
        )


@dataclass(frozen=True)
class GSPOOptions(LossOptions):
    loss_agg_mode: str = option("seq-mean-token-mean", "GSPO averages per sequence (verl)")
    eps_low: float = option(3e-4, "sequence-ratio floor 1 − eps_low (GSPO §5.1)")
    eps_high: float = option(4e-4, "sequence-ratio cap 1 + eps_high (GSPO §5.1)")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("gspo", "eps_low", self.eps_low, low=0.0, high=1.0)
        check_range("gspo", "eps_high", self.eps_high, low=0.0)


@dataclass(frozen=True)
class CISPOOptions(LossOptions):
    eps_low: float | None = option(None, "IS-weight floor 1 − eps_low (None = no lower clip)")
    eps_high: float = option(0.2, "IS-weight cap 1 + eps_high (ours: the paper gives no number)")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("cispo", "eps_low", self.eps_low, low=0.0, high=1.0, allow_none=True)
        check_range("cispo", "eps_high", self.eps_high, low=0.0)


@dataclass(frozen=True)
class ReinforceOptions(LossOptions):
    pass


# ---- shared pieces --------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenTerms:
    """Masked inputs every loss starts from, in at least float32 (`at_least_float32`)."""

    valid: torch.Tensor  # [B, T] bool
    logp: torch.Tensor  # [B, T] logprobs, 0 where masked (keeps grad on valid tokens)
    log_ratio: torch.Tensor  # [B, T] clamp(logp − old, ±20), 0 where masked
    ratio: torch.Tensor  # [B, T] exp(log_ratio)
    adv: torch.Tensor  # [B, T] detached advantages, 0 where masked


def token_terms(logprobs, old_logprobs, advantages, response_mask) -> TokenTerms:
    valid = response_mask > 0
    if logprobs.shape != valid.shape or old_logprobs.shape != valid.shape:
        raise ValueError(
            f"logprobs {list(logprobs.shape)} and old_logprobs {list(old_logprobs.shape)} must "
            f"both have the shape of response_mask {list(valid.shape)}"
        )
    adv = advantages.detach()
    if adv.dim() == 1:
        adv = adv.unsqueeze(-1).expand(valid.shape)
    if adv.shape != valid.shape:
        raise ValueError(
            f"advantages has shape {list(advantages.shape)}; expected [B] or [B, T] = "
            f"{list(valid.shape)}"
        )
    # every term in at least float32, so a bf16 ratio does not round to 1 (precision.py)
    logprobs = at_least_float32(logprobs)
    zero = torch.zeros_like(logprobs)
    logp = torch.where(valid, logprobs, zero)
    old = torch.where(valid, old_logprobs.detach().to(logprobs.dtype), zero)
    log_ratio = torch.where(valid, logp - old, zero).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    adv = torch.where(valid, adv.to(logprobs.dtype), zero.detach())
    return TokenTerms(valid, logp, log_ratio, torch.exp(log_ratio), adv)


def ratio_metrics(terms: TokenTerms) -> dict[str, float]:
    """Importance-ratio statistics over valid tokens (verl ppo_kl, TRL ratio logs)."""
    with torch.no_grad():
        valid = terms.valid
        r = terms.ratio
        has_tokens = bool(valid.any())
        return {
            "pg/approx_kl": float(masked_mean(-terms.log_ratio, valid)),
            "pg/approx_kl_k3": float(masked_mean(r - 1 - terms.log_ratio, valid)),
            "pg/ratio_mean": float(masked_mean(r, valid)),
            "pg/ratio_max": float(r[valid].max()) if has_tokens else 0.0,
            "pg/ratio_min": float(r[valid].min()) if has_tokens else 0.0,
        }


def _reduce(matrix, terms: TokenTerms, cfg: LossOptions, normaliser) -> torch.Tensor:
    return aggregate(matrix, terms.valid, cfg.loss_agg_mode, normaliser, L_max=cfg.L_max)


def add_kl_term(
    pg_loss: torch.Tensor,
    metrics: dict[str, float],
    terms: TokenTerms,
    ref_logprobs: torch.Tensor | None,
    cfg: LossOptions,
    normaliser: float | None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """loss = pg_loss + β·agg(KL_est(logp, ref_logp)) when β > 0 (GRPO eq. 3)."""
    metrics["pg/loss"] = float(pg_loss.detach())
    if cfg.kl_coef <= 0:
        return pg_loss, metrics
    if ref_logprobs is None:
        raise ValueError(
            f"this loss has a KL term (kl_coef={cfg.kl_coef}, kl_estimator={cfg.kl_estimator!r}) "
            "and needs ref_logprobs; pass them, or set kl_coef=0 to train without a reference"
        )
    ref = torch.where(
        terms.valid, ref_logprobs.detach().to(terms.logp.dtype), torch.zeros_like(terms.logp)
    )
    kl = kl_estimators.get(cfg.kl_estimator)(terms.logp, ref)
    kl = torch.where(terms.valid, kl, torch.zeros_like(kl))
    kl_loss = _reduce(kl, terms, cfg, normaliser)
    metrics["kl/ref"] = float(masked_mean(kl.detach(), terms.valid))
    metrics["kl/loss"] = float(kl_loss.detach())
    metrics["kl/coef"] = float(cfg.kl_coef)
    return pg_loss + cfg.kl_coef * kl_loss.to(pg_loss.dtype), metrics


def _clip_fractions(terms: TokenTerms, ratio, low: float, high: float) -> dict[str, float]:
    with torch.no_grad():
        low_hit = (terms.adv < 0) & (ratio < low)
        high_hit = (terms.adv > 0) & (ratio > high)
        return {
            "pg/clipfrac_low": float(masked_mean(low_hit, terms.valid)),
            "pg/clipfrac_high": float(masked_mean(high_hit, terms.valid)),
            "pg/clipfrac": float(masked_mean((low_hit | high_hit), terms.valid)),
        }


# ---- losses -----------------------------------------------------------------------------------
def clipped_surrogate(
    ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float, eps_high: float
) -> torch.Tensor:
    """PPO's clipped term per element: max(−A·r, −A·clip(r, 1 − ε_low, 1 + ε_high)) =
    −min(r·A, clip(r)·A) (arXiv:1707.06347 eq. 7). The one home of the formula: ppo_clip,
    rank_ppo_clip and the lab methods' own PPO loops call it."""
    return torch.maximum(
        -advantages * ratio, -advantages * ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    )


@policy_losses.register("ppo_clip", config=PPOClipOptions)
def ppo_clip_loss(
    logprobs,
    old_logprobs,
    advantages,
    response_mask,
    cfg: PPOClipOptions,
    *,
    ref_logprobs=None,
    rollouts=None,
    normaliser=None,
):
    """PPO's clipped surrogate per token, with clip-higher and optional dual clip.

    L = max(−A·r, −A·clip(r, 1 − ε_low, 1 + ε_high)); dual clip (Ye et al.,
    arXiv:1912.09729): where A < 0, L ← min(L, −c·A). r = exp(logp − old_logp).
    PPO arXiv:1707.06347 eq. 7; clip-higher: DAPO arXiv:2503.14476 §3.1."""
    terms = token_terms(logprobs, old_logprobs, advantages, response_mask)
    A, r = terms.adv, terms.ratio
    L = clipped_surrogate(r, A, cfg.eps_low, cfg.eps_high)
    metrics = _clip_fractions(terms, r, 1.0 - cfg.eps_low, 1.0 + cfg.eps_high)
    if cfg.dual_clip_c is not None:
        L = torch.where(A < 0, torch.minimum(L, -cfg.dual_clip_c * A), L)
        with torch.no_grad():
            dual = (A < 0) & (r > cfg.dual_clip_c)
            metrics["pg/dualclip_frac"] = float(masked_mean(dual, terms.valid))
    metrics.update(ratio_metrics(terms))
    return add_kl_term(
        _reduce(L, terms, cfg, normaliser), metrics, terms, ref_logprobs, cfg, normaliser
    )


def _gspo(
    logprobs,
    old_logprobs,
    advantages,
    response_mask,
    cfg,
    ref_logprobs,
    normaliser,
    *,
    token_level: bool,
):
    terms = token_terms(logprobs, old_logprobs, advantages, response_mask)
    lengths = terms.valid.sum(dim=-1)
    seq_log_ratio = (terms.log_ratio.sum(dim=-1) / lengths.clamp(min=1)).clamp(
        -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP
    )
    s = torch.exp(seq_log_ratio)  # [B]
    if token_level:  # value s_i, gradient s_i·∂logp_t on its own token only (§4.3)
        s_tok = s.detach().unsqueeze(-1) * torch.exp(terms.logp - terms.logp.detach())
    else:
        s_tok = s.unsqueeze(-1).expand(terms.valid.shape)
    A = terms.adv
    low, high = 1.0 - cfg.eps_low, 1.0 + cfg.eps_high
    L = torch.maximum(-A * s_tok, -A * s_tok.clamp(low, high))
    metrics = _clip_fractions(terms, s_tok.detach(), low, high)
    with torch.no_grad():
        rows = lengths > 0
        row_adv = A.sum(dim=-1) / lengths.clamp(min=1)
        n_rows = max(int(rows.sum()), 1)
        metrics["gspo/seq_clipfrac_low"] = float(((row_adv < 0) & (s < low) & rows).sum()) / n_rows
        metrics["gspo/seq_clipfrac_high"] = (
            float(((row_adv > 0) & (s > high) & rows).sum()) / n_rows
        )
        metrics["gspo/seq_ratio_mean"] = float(s[rows].mean()) if rows.any() else 0.0
        metrics["gspo/seq_ratio_max"] = float(s[rows].max()) if rows.any() else 0.0
        metrics["gspo/seq_ratio_min"] = float(s[rows].min()) if rows.any() else 0.0
    metrics.update(ratio_metrics(terms))
    return add_kl_term(
        _reduce(L, terms, cfg, normaliser), metrics, terms, ref_logprobs, cfg, normaliser
    )


@policy_losses.register("gspo", config=GSPOOptions)
def gspo_loss(
    logprobs,
    old_logprobs,
    advantages,
    response_mask,
    cfg: GSPOOptions,
    *,
    ref_logprobs=None,
    rollouts=None,
    normaliser=None,
):
    """GSPO: one length-normalised importance ratio per sequence, clipped in a tiny range
    (Zheng et al., arXiv:2507.18071 eq. 5).

    s_i = exp(Σ_t m·(logp − old_logp) / |o_i|); L[i,t] = max(−A·s_i, −A·clip(s_i, 1 − ε_low,
    1 + ε_high)); defaults ε = (3e-4, 4e-4) from §5.1, seq-mean-token-mean."""
    return _gspo(
        logprobs,
        old_logprobs,
        advantages,
        response_mask,
        cfg,
        ref_logprobs,
        normaliser,
        token_level=False,
    )


@policy_losses.register("gspo_token", config=GSPOOptions)
def gspo_token_loss(
    logprobs,
    old_logprobs,
    advantages,
    response_mask,
    cfg: GSPOOptions,
    *,
    ref_logprobs=None,
    rollouts=None,
    normaliser=None,
):
    """GSPO-token: the sequence ratio's value with a per-token gradient, so token-level
    advantages are possible (arXiv:2507.18071 §4.3); equals GSPO when A is constant per row.

    s[i,t] = sg[s_i]·exp(logp[i,t] − sg[logp[i,t]]); same min/clip per token."""
    return _gspo(
        logprobs,
        old_logprobs,
        advantages,
        response_mask,
        cfg,
        ref_logprobs,
        normaliser,
        token_level=True,
    )


@policy_losses.register("cispo", config=CISPOOptions)
def cispo_loss(
    logprobs,
    old_logprobs,
    advantages,
    response_mask,
    cfg: CISPOOptions,
    *,
    ref_logprobs=None,
    rollouts=None,
    normaliser=None,
):
    """CISPO: REINFORCE with a clipped, detached importance weight, so no token loses its
    gradient (MiniMax-M1, arXiv:2506.13585 §3.1).

    w = sg[clip(r, 1 − ε_low, 1 + ε_high)] (no lower clip when ε_low is None);
    L = −w·A·logp. The loss value is not a surrogate of anything; the gradient is −w·A."""
    terms = token_terms(logprobs, old_logprobs, advantages, response_mask)
    low = None if cfg.eps_low is None else 1.0 - cfg.eps_low
    w = terms.ratio.detach().clamp(min=low, max=1.0 + cfg.eps_high)
    L = -w * terms.adv * terms.logp
    with torch.no_grad():
        metrics = {
            "cispo/is_clipfrac": float(masked_mean((w != terms.ratio), terms.valid)),
            "cispo/weight_mean": float(masked_mean(w, terms.valid)),
            "cispo/surrogate": float(masked_mean(w * terms.adv, terms.valid)),
        }
    metrics.update(ratio_metrics(terms))
    return add_kl_term(
        _reduce(L, terms, cfg, normaliser), metrics, terms, ref_logprobs, cfg, normaliser
    )


@policy_losses.register("reinforce", config=ReinforceOptions)
def reinforce_loss(
    logprobs,
    old_logprobs,
    advantages,
    response_mask,
    cfg: ReinforceOptions,
    *,
    ref_logprobs=None,
    rollouts=None,
    normaliser=None,
):
    """Plain REINFORCE (Williams 1992): L = −A·logp, no importance ratio, no clip.
    On-policy only: with several inner epochs the samples are stale and uncorrected."""
    terms = token_terms(logprobs, old_logprobs, advantages, response_mask)
    L = -terms.adv * terms.logp
    metrics = ratio_metrics(terms)
    return add_kl_term(
        _reduce(L, terms, cfg, normaliser), metrics, terms, ref_logprobs, cfg, normaliser
    )
