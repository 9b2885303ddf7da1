"""Advantage estimators: `fn(rollouts, cfg) -> A [B, T]`, zero where the mask is 0, or an
`Estimate` when the estimator also computes per-row columns a loss reads (COPO's global
advantage) or diagnostics (EMPG's step statistics). Estimators never write into their input.

Formulas in the notation of papers/seed_llm_algorithms.md (§1.3, §2.1–2.3, §2.6). Outcome
estimators turn the scalar reward R_i of each row into one advantage and broadcast it over
the row's valid tokens; `reinforce_pp` and `gae` work per token.

House rules (§0, §1.3): a group of size 1 gets A = 0; a group whose rewards are all equal
(σ ≤ 1e-8) gets A = 0 exactly; a NaN reward (unscorable) is left out of its group's
statistics and gets A = 0. "KL in the reward" (β > 0) subtracts β·Σ_t KL_est(old, ref)
from R_i for the outcome estimators and β·KL_est per token for `reinforce_pp` and `gae`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from policylab.algebra.kl import kl_estimators, kl_reward_penalty
from policylab.algebra.options import check_choice, check_range, option
from policylab.algebra.precision import at_least_float32
from policylab.registry import Registry
from policylab.rollouts import Rollouts

# filled by this module and the ones above it; read it via algebra/catalogue.py
advantage_estimators: Registry = Registry("advantage estimator")

ZERO_STD = 1e-8  # a group std at or below this counts as "all rewards equal"


@dataclass
class Estimate:
    """An estimator's full result: A [B, T]; `columns`, per-row values (name → [B] tensor
    or list) that the caller adds to `rollouts.extras` for a loss that reads them; and
    `metrics`, the estimator's own diagnostics for the log."""

    advantages: torch.Tensor
    columns: dict = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, result) -> Estimate:
        """An estimator's return value (a tensor or an Estimate) as an Estimate."""
        return result if isinstance(result, Estimate) else cls(result)


# ---- options ------------------------------------------------------------------------------
@dataclass(frozen=True)
class KLInRewardOptions:
    kl_coef: float = option(0.0, "β of the KL penalty placed in the reward (0 = none)")
    kl_estimator: str = option("k1", "KL estimator of the reward penalty: k1, k2, k3, k3_low_var")

    def __post_init__(self) -> None:
        owner = type(self).__name__
        check_range(owner, "kl_coef", self.kl_coef, low=0.0)
        check_choice(owner, "kl_estimator", self.kl_estimator, kl_estimators.names())


@dataclass(frozen=True)
class GRPOOptions(KLInRewardOptions):
    scale: str = option("group", "divide centred rewards by the group std, the batch std, or none")
    eps: float = option(1e-6, "added to the std (outside the sqrt); verl's 1e-6")
    bessel: bool = option(True, "Bessel-corrected std (verl, TRL); False: population std (DGPO)")
    clip: float = option(0.0, "clip A to ±clip after the scaling; 0 = no clip (DGPO: 5)")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("grpo", "scale", self.scale, ("group", "batch", "none"))
        check_range("grpo", "eps", self.eps, low=0.0)
        check_range("grpo", "clip", self.clip, low=0.0)


@dataclass(frozen=True)
class RLOOOptions(KLInRewardOptions):
    pass


@dataclass(frozen=True)
class DrGRPOOptions(KLInRewardOptions):
    pass


@dataclass(frozen=True)
class ReinforcePPOptions(KLInRewardOptions):
    kl_coef: float = option(0.01, "β of the per-token KL penalty in the reward (OpenRLHF default)")
    gamma: float = option(1.0, "discount of the per-token return")
    unbiased: bool = option(False, "verl's whitening (Bessel variance, rsqrt(v + 1e-8))")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("reinforce_pp", "gamma", self.gamma, low=0.0, high=1.0)


@dataclass(frozen=True)
class ReinforcePPBaselineOptions(KLInRewardOptions):
    unbiased: bool = option(False, "verl's whitening (Bessel variance, rsqrt(v + 1e-8))")


@dataclass(frozen=True)
class GAEOptions(KLInRewardOptions):
    gamma: float = option(1.0, "discount γ (language models 1.0; control 0.99)")
    lam: float = option(1.0, "GAE λ (language models 1.0; control 0.95)")
    whiten: bool = option(True, "standardise A over the batch's valid tokens")
    unbiased: bool = option(False, "Bessel variance in the whitening")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("gae", "gamma", self.gamma, low=0.0, high=1.0)
        check_range("gae", "lam", self.lam, low=0.0, high=1.0)


# ---- shared pieces --------------------------------------------------------------------------
def broadcast_to_tokens(row_values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B] → [B, T]: the row's value on each valid token, 0 elsewhere."""
    values = at_least_float32(row_values)
    expanded = values.unsqueeze(-1).expand(mask.shape)
    return torch.where(mask > 0, expanded, torch.zeros_like(expanded))


@dataclass(frozen=True)
class GroupStats:
    """Per-row statistics of each row's group, over rows with a finite reward."""

    mean: torch.Tensor  # [B] group mean reward
    std: torch.Tensor  # [B] group sample std (Bessel); 0 for groups of size < 2
    size: torch.Tensor  # [B] number of scorable rows in the group
    total: torch.Tensor  # [B] sum of scorable rewards in the group
    valid: torch.Tensor  # [B] bool: this row's reward is finite

    @property
    def zero_std_frac(self) -> float:
        """Fraction of rows in groups whose rewards are all equal (no learning signal)."""
        return float(((self.std <= ZERO_STD) & self.valid).float().mean()) if len(self.std) else 0.0


def group_stats(
    rewards: torch.Tensor, group_ids: torch.Tensor, *, bessel: bool = True
) -> GroupStats:
    """Mean, std (Bessel-corrected, or the population std with bessel=False) and size of
    each row's group; NaN rewards are left out."""
    rewards = at_least_float32(rewards.detach())
    valid = torch.isfinite(rewards)
    r = torch.where(valid, rewards, torch.zeros_like(rewards))
    _, index = torch.unique(group_ids, return_inverse=True)
    n_groups = int(index.max()) + 1 if len(index) else 0
    zeros = r.new_zeros(n_groups)
    size = zeros.index_add(0, index, valid.to(r.dtype))
    total = zeros.index_add(0, index, r)
    mean = total / size.clamp(min=1)
    dev2 = torch.where(valid, (r - mean[index]) ** 2, torch.zeros_like(r))
    var = zeros.index_add(0, index, dev2) / ((size - 1) if bessel else size).clamp(min=1)
    std = torch.where(size > 1, var.sqrt(), torch.zeros_like(var))
    return GroupStats(mean[index], std[index], size[index], total[index], valid)


def kl_penalised_rewards(rollouts: Rollouts, cfg: KLInRewardOptions, *, by: str) -> torch.Tensor:
    """R_i − β·Σ_t KL_est(old, ref) (TRL's RLOO placement); R unchanged when β = 0."""
    rewards = rollouts.rewards
    if cfg.kl_coef == 0:
        return rewards
    rollouts.require("logprobs", "ref_logprobs", by=f"{by} with kl_coef > 0")
    penalty = kl_reward_penalty(
        rollouts.logprobs, rollouts.ref_logprobs, rollouts.response_mask, cfg.kl_estimator
    )
    return rewards - cfg.kl_coef * penalty.sum(dim=-1).to(rewards.dtype)


def outcome_token_rewards(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B] → [B, T]: R_i on the last valid token of row i, 0 elsewhere."""
    T = mask.shape[-1]
    positions = torch.arange(T, device=mask.device).expand(mask.shape)
    last = torch.where(mask > 0, positions, torch.full_like(positions, -1)).max(dim=-1).values
    at_last = positions == last.unsqueeze(-1)
    values = at_least_float32(rewards).unsqueeze(-1)
    return torch.where(at_last & (mask > 0), values.expand(mask.shape), values.new_zeros(()))


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, *, unbiased: bool = False) -> torch.Tensor:
    """(x − μ)/σ over the valid tokens of the whole batch, 0 at masked positions.

    Population variance with sqrt(max(v, 1e-8)) (OpenRLHF), or with `unbiased` verl's
    masked_whiten: Bessel variance and rsqrt(v + 1e-8)."""
    valid = mask > 0
    n = valid.sum()
    xs = torch.where(valid, x, torch.zeros_like(x))
    mu = xs.sum() / n
    dev2 = torch.where(valid, (x - mu) ** 2, torch.zeros_like(x))
    if unbiased:
        var = dev2.sum() / (n - 1)
        out = (x - mu) * torch.rsqrt(var + 1e-8)
    else:
        var = dev2.sum() / n
        out = (x - mu) / torch.sqrt(var.clamp(min=1e-8))
    return torch.where(valid, out, torch.zeros_like(out))


def _backward_discounted(
    token_rewards: torch.Tensor,
    values: torch.Tensor | None,
    mask: torch.Tensor,
    gamma: float,
    lam: float,
    *,
    next_values: torch.Tensor | None = None,
    cuts: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE recursion over the valid positions of each row, right to left — the one home of
    the recursion for language models (tokens) and control (time steps).

    δ_t = ρ_t + γ·V_next − V_t,  Â_t = δ_t + γλ·(1 − c_t)·Â_next,  ret_t = Â_t + V_t.
    V_next and Â_next belong to the next *valid* position (0 after the last): masked
    positions (padding, tool output) neither produce a TD error nor break the chain.
    `next_values` [B, T], when given, replaces V_next at each position (control: the value
    of the observation that followed step t, 0 on termination); `cuts` [B, T] (0/1) stops
    Â_next from crossing an episode boundary after position t. With values None (V ≡ 0) and
    λ = 1 this is the discounted return. Returns (Â, ret), both 0 where mask is 0."""
    dtype = torch.promote_types(token_rewards.dtype, torch.float32)
    rho = token_rewards.to(dtype)
    V = torch.zeros_like(rho) if values is None else values.to(dtype)
    valid = mask > 0
    rho = torch.where(valid, rho, torch.zeros_like(rho))
    V = torch.where(valid, V, torch.zeros_like(V))
    keep = None if cuts is None else 1.0 - cuts.to(dtype)
    B, T = rho.shape
    adv = torch.zeros_like(rho)
    next_value = rho.new_zeros(B)
    next_adv = rho.new_zeros(B)
    for t in reversed(range(T)):
        v_next = next_value if next_values is None else next_values[:, t].to(dtype)
        carried = next_adv if keep is None else keep[:, t] * next_adv
        delta = rho[:, t] + gamma * v_next - V[:, t]
        a_t = delta + gamma * lam * carried
        v_t = valid[:, t]
        adv[:, t] = torch.where(v_t, a_t, torch.zeros_like(a_t))
        next_value = torch.where(v_t, V[:, t], next_value)
        next_adv = torch.where(v_t, a_t, next_adv)
    returns = torch.where(valid, adv + V, torch.zeros_like(adv))
    return adv, returns


def gae_over_time(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    gamma: float = 0.99,
    lam: float = 0.95,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE along the time axis of a vector environment (control: one row per time step).

    All inputs are [T, N] (time step, environment). `next_values[t]` is V of the observation
    that followed step t: the next step's observation, or on truncation the *final*
    observation before the reset, so a time limit is bootstrapped, not treated as death;
    at the last step of the rollout it is V of the current observation.
        δ_t = r_t + γ·(1 − term_t)·V'_t − V_t,   Â_t = δ_t + γλ·(1 − done_t)·Â_{t+1},
    done = term ∨ trunc (Schulman et al., arXiv:1506.02438 eq. 16; Pardo et al.,
    arXiv:1712.00378 for bootstrapping at time limits). Returns (Â, ret = Â + V), [T, N],
    never whitened (the trainer normalises per minibatch)."""
    term = terminated.to(values.dtype)
    done = torch.maximum(term, truncated.to(values.dtype))
    bootstrap = (1.0 - term) * next_values.to(values.dtype)
    mask = torch.ones_like(values.T)
    adv, returns = _backward_discounted(
        rewards.T, values.T, mask, gamma, lam, next_values=bootstrap.T, cuts=done.T
    )
    return adv.T, returns.T


def _token_rewards(rollouts: Rollouts, cfg: KLInRewardOptions, *, by: str) -> torch.Tensor:
    """ρ[i,t] = −β·KL_est[i,t] + R_i·[t = last(i)], or the rollouts' own token_rewards."""
    mask = rollouts.response_mask
    if rollouts.token_rewards is not None:
        rho = rollouts.token_rewards
    else:
        rho = outcome_token_rewards(rollouts.rewards, mask)
    if cfg.kl_coef > 0:
        rollouts.require("logprobs", "ref_logprobs", by=f"{by} with kl_coef > 0")
        penalty = kl_reward_penalty(
            rollouts.logprobs, rollouts.ref_logprobs, mask, cfg.kl_estimator
        )
        rho = rho - cfg.kl_coef * penalty.to(rho.dtype)
    return rho


# ---- estimators -----------------------------------------------------------------------------
@advantage_estimators.register("grpo", config=GRPOOptions)
def grpo_advantages(rollouts: Rollouts, cfg: GRPOOptions) -> torch.Tensor:
    """GRPO: reward standardised within its group (DeepSeekMath, arXiv:2402.03300 §4.1.2).

    A[i,t] = m[i,t]·(R_i − R̄_g(i)) / (S + eps), S = σ_g(i) (scale="group"), the sample std
    of the raw rewards of the whole batch (scale="batch", LitePPO / TRL), or 1 with eps = 0
    (scale="none", Dr. GRPO). σ is Bessel-corrected (verl, TRL); eps = 1e-6 (verl).
    DGPO's variant (G2.1 of papers/seed_generative.md): bessel=False (population std),
    eps = 1e-4, then A clipped to ±clip, clip = 5 (algebra/generative.dgpo_advantages)."""
    rewards = kl_penalised_rewards(rollouts, cfg, by="grpo")
    stats = group_stats(rewards, rollouts.group_ids, bessel=cfg.bessel)
    centred = torch.where(stats.valid, rewards - stats.mean, torch.zeros_like(stats.mean))
    if cfg.scale == "group":
        adv = centred / (stats.std + cfg.eps)
    elif cfg.scale == "batch":
        finite = rewards[stats.valid].to(centred.dtype)
        batch_std = finite.std(unbiased=cfg.bessel) if finite.numel() > 1 else finite.new_zeros(())
        adv = centred / (batch_std + cfg.eps) if batch_std > ZERO_STD else torch.zeros_like(centred)
    else:
        adv = centred
    signal = stats.valid & (stats.size > 1) & (stats.std > ZERO_STD)
    adv = torch.where(signal, adv, torch.zeros_like(adv))
    if cfg.clip > 0:
        adv = adv.clamp(-cfg.clip, cfg.clip)
    return broadcast_to_tokens(adv, rollouts.response_mask)


@advantage_estimators.register("dr_grpo", config=DrGRPOOptions)
def dr_grpo_advantages(rollouts: Rollouts, cfg: DrGRPOOptions) -> torch.Tensor:
    """Dr. GRPO: group-centred reward, no std division (arXiv:2503.20783 §3.2).

    A[i,t] = m[i,t]·(R_i − R̄_g(i)); equal to grpo with scale="none"."""
    options = GRPOOptions(kl_coef=cfg.kl_coef, kl_estimator=cfg.kl_estimator, scale="none")
    return grpo_advantages(rollouts, options)


@advantage_estimators.register("rloo", config=RLOOOptions)
def rloo_advantages(rollouts: Rollouts, cfg: RLOOOptions) -> torch.Tensor:
    """RLOO: leave-one-out baseline (Ahmadian et al., arXiv:2402.14740).

    A_i = R_i − (1/(G_g − 1))·Σ_{j∈g, j≠i} R_j = G_g/(G_g − 1)·(R_i − R̄_g), broadcast to
    tokens. Singletons get 0; NaN rewards are left out of their siblings' baselines."""
    rewards = kl_penalised_rewards(rollouts, cfg, by="rloo")
    stats = group_stats(rewards, rollouts.group_ids)
    r = torch.where(stats.valid, rewards, torch.zeros_like(rewards)).to(stats.total.dtype)
    baseline = (stats.total - r) / (stats.size - 1).clamp(min=1)
    adv = torch.where(stats.valid & (stats.size > 1), r - baseline, torch.zeros_like(r))
    return broadcast_to_tokens(adv, rollouts.response_mask)


@advantage_estimators.register("reinforce_pp", config=ReinforcePPOptions)
def reinforce_pp_advantages(rollouts: Rollouts, cfg: ReinforcePPOptions) -> torch.Tensor:
    """REINFORCE++: per-token KL-shaped return, whitened over the global batch
    (Hu et al., arXiv:2501.03262; OpenRLHF compute_advantages_and_returns).

    ρ[i,t] = −β·k1[i,t] + R_i·[t = last(i)],  G[i,t] = Σ_{s≥t} γ^{s−t} m[i,s]·ρ[i,s],
    A = m·(G − ⟨G⟩)/sqrt(max(Var⟨G⟩, 1e-8)) over all valid tokens (population variance;
    `unbiased` gives verl's rule). A batch with ≤ 1 valid token gets A = 0."""
    mask = rollouts.response_mask
    rho = _token_rewards(rollouts, cfg, by="reinforce_pp")
    returns, _ = _backward_discounted(rho, None, mask, cfg.gamma, 1.0)
    if (mask > 0).sum() <= 1:
        return torch.zeros_like(returns)
    return masked_whiten(returns, mask, unbiased=cfg.unbiased)


@advantage_estimators.register("reinforce_pp_baseline", config=ReinforcePPBaselineOptions)
def reinforce_pp_baseline_advantages(
    rollouts: Rollouts, cfg: ReinforcePPBaselineOptions
) -> torch.Tensor:
    """REINFORCE++-baseline: group-mean-centred reward, then whitened over all valid tokens
    of the batch (arXiv:2501.03262; OpenRLHF estimator "reinforce_baseline").

    c_i = R_i − R̄_g(i) (no std; singleton groups c = 0), broadcast to tokens, then
    A = m·(c − ⟨c⟩)/sqrt(max(Var⟨c⟩, 1e-8)), token-weighted."""
    mask = rollouts.response_mask
    rewards = kl_penalised_rewards(rollouts, cfg, by="reinforce_pp_baseline")
    centred = GRPOOptions(scale="none")
    c = grpo_advantages(rollouts.replace(rewards=rewards), centred)
    if (mask > 0).sum() <= 1:
        return torch.zeros_like(c)
    return masked_whiten(c, mask, unbiased=cfg.unbiased)


@advantage_estimators.register("gae", config=GAEOptions)
def gae_advantages(rollouts: Rollouts, cfg: GAEOptions) -> torch.Tensor:
    """GAE over the valid tokens of each row (Schulman et al., arXiv:1506.02438; PPO
    arXiv:1707.06347 eqs. 11–12), optionally whitened over the batch.

    ρ = rollouts.token_rewards, or R_i on the last valid token minus β·KL_est per token;
    δ_t = ρ_t + γ·V_next − V_t, Â_t = δ_t + γλ·Â_next (next *valid* token). The value
    targets are `gae_returns(...)` = Â + V, never whitened."""
    rollouts.require("values", by="gae")
    rho = _token_rewards(rollouts, cfg, by="gae")
    adv, _ = _backward_discounted(rho, rollouts.values, rollouts.response_mask, cfg.gamma, cfg.lam)
    if cfg.whiten and (rollouts.response_mask > 0).sum() > 1:
        adv = masked_whiten(adv, rollouts.response_mask, unbiased=cfg.unbiased)
    return adv


def value_targets(rollouts: Rollouts, cfg: GAEOptions) -> torch.Tensor:
    """The critic's regression targets for `gae_advantages(rollouts, cfg)`: Â + V, built from
    the same token rewards (KL penalty included), never whitened."""
    rollouts.require("values", by="gae value targets")
    rho = _token_rewards(rollouts, cfg, by="gae")
    _, returns = _backward_discounted(
        rho, rollouts.values, rollouts.response_mask, cfg.gamma, cfg.lam
    )
    return returns


def gae_returns(
    token_rewards: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 1.0,
) -> torch.Tensor:
    """Value targets of GAE: ret = Â + V (not whitened), 0 where the mask is 0."""
    _, returns = _backward_discounted(token_rewards, values, response_mask, gamma, lam)
    return returns


# ---- risk-seeking policy gradient (DSO; Lyapunov search, arXiv:2502.02014) ------------------
@dataclass(frozen=True)
class QuantileBaselineOptions:
    epsilon: float = option(0.1, "ε: the baseline is the (1 − ε)-quantile of the batch's rewards")

    def __post_init__(self) -> None:
        check_range("quantile_baseline", "epsilon", self.epsilon, low=0.0, high=1.0, low_open=True)


def reward_quantile(rewards: torch.Tensor, epsilon: float) -> torch.Tensor:
    """R_ε, the (1 − ε)-quantile of the finite rewards [B] with numpy's "higher"
    interpolation (the sorted value at index ⌈virtual index⌉) [code DSO train.py
    `np.quantile(r, 1 - epsilon, interpolation="higher")`] — computed by numpy itself, so
    float rounding of the index matches DSO exactly. NaN when no reward is finite."""
    finite = rewards[torch.isfinite(rewards)].detach().double()
    if finite.numel() == 0:
        return torch.tensor(float("nan"), dtype=torch.float64)
    return torch.tensor(np.quantile(finite.numpy(), 1.0 - epsilon, method="higher"))


@advantage_estimators.register("quantile_baseline", config=QuantileBaselineOptions)
def quantile_baseline_advantages(rollouts: Rollouts, cfg: QuantileBaselineOptions) -> torch.Tensor:
    """Risk-seeking PG's advantage: A_i = R_i − R_ε over the whole batch (not per group),
    R_ε = the (1 − ε)-quantile of the batch's rewards ("higher") [paper arXiv:2502.02014
    §6.1 via DSO, Petersen et al. arXiv:1912.04871 eq. 3; code DSO train.py baseline "R_e"].

    Rows below R_ε get a negative A here; the selection `top_quantile(ε)` drops them, as
    DSO trains on the kept rows only. A NaN reward gets A = 0. All rewards equal → A = 0.
    Shapes: rewards [B] → A [B, T] on the valid tokens."""
    rewards = rollouts.rewards.double()
    threshold = reward_quantile(rewards, cfg.epsilon)
    finite = torch.isfinite(rewards)
    adv = torch.where(finite, rewards - threshold, torch.zeros_like(rewards))
    return broadcast_to_tokens(adv, rollouts.response_mask)
