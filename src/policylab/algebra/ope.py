"""Off-policy evaluation estimates whose autograd derivatives are gradient and Hessian
estimates of a value (Tang et al., "Unifying Gradient Estimators for Meta-Reinforcement
Learning via Off-Policy Evaluation", NeurIPS 2021, arXiv 2106.13125).

A row is one trajectory s₀, a₀, r₀, …, s_T logged by a behaviour policy μ. Every estimator is
`fn(logp[B,T], behaviour_logp[B,T], rewards[B,T], values[B,T+1], mask[B,T], cfg) -> V̂[B]`:
logp = log π_θ(a_t|s_t) (differentiable), behaviour_logp = log μ(a_t|s_t) (always
detached here: the stop-gradient of DiCE), values[:, t] = V(s_t) a fixed critic, and
values[:, L] the bootstrap after a row's last valid step L − 1. The mask is right-padded
(ones, then zeros). Averaging V̂ over rows and differentiating once or twice in θ gives the
gradient and Hessian estimates ĝ = E_μ[∇V̂], Ĥ = E_μ[∇²V̂] [paper §3–4].

With ρ_t = π(a_t|s_t)/μ(a_t|s_t) and δ_t = r_t + γV(s_{t+1}) − V(s_t):
- V-trace family [code evaluation_utils.py:Vtrace_evaluation]: unrolling
  v_t = V_t + ρ̄_t δ_t + γ c̄_t (v_{t+1} − V_{t+1}), v_T = V_T, ρ̄ = min(ρ, ρ_max),
  c̄ = min(ρ, c_max) gives V̂ = V₀ + Σ_t γᵗ (Π_{k<t} c̄_k) ρ̄_t δ_t, computed in log space.
  `stepwise_is` (ρ_max = c_max = ∞, V ≡ 0) is DiCE; `doubly_robust` (∞, critic) is
  loaded DiCE; `vtrace` truncates at ρ_max = c_max = 1.
- `taylor1` [code Firstorder_evaluation]: V̂ = V₀ + Σ_t γᵗ (ρ_t − 1)·sg(Ĝ_t − V_t), with
  Ĝ_t − V_t = Σ_{u≥t} γ^{u−t} δ_u (the return bootstrapped with V_T).
- `taylor2` [code Secondorder_evaluation]: first-order values W_t − V_t =
  Σ_{k≥t} γ^{k−t} e_k, e_k = (ρ_k − 1)·sg(Ĝ_k − V_k), W_T = V_T; then the expansion
  again on W with no stop-gradient on the multiplier:
  V̂ = V₀ + Σ_t γᵗ (ρ_t − 1)·(δ_t + γ(W_{t+1} − V_{t+1})).

The official code returns the two Taylor corrections without V₀; adding the constant V₀
changes no derivative [ours]. Its second-order routine indexes the critic by time, not by
state (`V[time]` on the per-state vector); here the critic is read at the visited states.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from policylab.algebra.options import check_range, option
from policylab.registry import Registry

ope_estimators: Registry = Registry("OPE estimator")


@dataclass(frozen=True)
class OPEOptions:
    gamma: float = option(0.8, "γ, discount [code main.py: gamma = 0.8]")
    rho_max: float = option(1.0, "ρ_max, V-trace truncation of ρ̄ [code main.py: rho = 1.0]")
    c_max: float = option(1.0, "c_max, V-trace truncation of c̄ [code main.py: c = 1.0]")

    def __post_init__(self) -> None:
        check_range("OPEOptions", "gamma", self.gamma, low=0.0, high=1.0)
        check_range("OPEOptions", "rho_max", self.rho_max, low=0.0, low_open=True)
        check_range("OPEOptions", "c_max", self.c_max, low=0.0, low_open=True)


def _check_rows(logp, behaviour_logp, rewards, values, mask) -> torch.Tensor:
    """Shapes, a right-padded mask and μ > 0 on logged actions; returns the bool mask."""
    if logp.dim() != 2:
        raise ValueError(f"logp must be [B, T], got shape {tuple(logp.shape)}")
    B, T = logp.shape
    for name, x in (("behaviour_logp", behaviour_logp), ("rewards", rewards), ("mask", mask)):
        if tuple(x.shape) != (B, T):
            raise ValueError(f"{name} must have logp's shape {(B, T)}, got {tuple(x.shape)}")
    if tuple(values.shape) != (B, T + 1):
        raise ValueError(f"values must be [B, T+1] = {(B, T + 1)}, got {tuple(values.shape)}")
    valid = mask > 0
    if bool((valid[:, 1:] & ~valid[:, :-1]).any()):
        raise ValueError(
            "mask must be right-padded (ones then zeros in each row); a row has a hole"
        )
    bad = valid & ~torch.isfinite(behaviour_logp.detach())
    if bool(bad.any()):
        b, t = (int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"behaviour_logp[{b}, {t}] = {float(behaviour_logp[b, t])}: μ(a|s) must be > 0 for "
            "every logged action (π/μ is undefined at μ = 0; the official code adds 1e-8 to μ)"
        )
    return valid


def _log_ratio(logp, behaviour_logp, valid) -> torch.Tensor:
    """log ρ_t = logp − sg(behaviour_logp), 0 on padding (ρ = 1 there)."""
    diff = logp - behaviour_logp.detach()
    return torch.where(valid, diff, torch.zeros_like(diff))


def _td_errors(rewards, values, valid, gamma: float) -> torch.Tensor:
    """δ_t = r_t + γV_{t+1} − V_t, 0 on padding: [B, T]."""
    delta = rewards + gamma * values[:, 1:] - values[:, :-1]
    return torch.where(valid, delta, torch.zeros_like(delta))


def _discounted_tail(x: torch.Tensor, gamma: float) -> torch.Tensor:
    """out[:, t] = Σ_{u≥t} γ^{u−t} x[:, u], as one matmul (vmap/hessian friendly)."""
    T = x.shape[-1]
    idx = torch.arange(T, device=x.device)
    power = (idx[None, :] - idx[:, None]).to(x.dtype)  # power[t, u] = u − t
    gamma_t = torch.as_tensor(gamma, dtype=x.dtype, device=x.device)
    weights = torch.where(power >= 0, gamma_t**power, torch.zeros_like(power))
    return x @ weights.T


def _discounts(T: int, gamma: float, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(gamma, dtype=like.dtype, device=like.device) ** torch.arange(
        T, dtype=like.dtype, device=like.device
    )


def _vtrace_value(log_rho, rewards, values, valid, gamma, rho_max, c_max) -> torch.Tensor:
    """V̂ = V₀ + Σ_t γᵗ exp(Σ_{k<t} log c̄_k + log ρ̄_t) δ_t (log-space products)."""
    log_rho_bar = log_rho.clamp(max=math.log(rho_max))
    log_c_bar = log_rho.clamp(max=math.log(c_max))
    log_c_before = torch.cumsum(log_c_bar, dim=1) - log_c_bar  # Σ_{k<t} log c̄_k
    weight = torch.exp(log_c_before + log_rho_bar)
    delta = _td_errors(rewards, values, valid, gamma)
    return values[:, 0] + (_discounts(log_rho.shape[1], gamma, delta) * weight * delta).sum(1)


@ope_estimators.register("stepwise_is", config=OPEOptions)
def stepwise_is(logp, behaviour_logp, rewards, values, mask, cfg: OPEOptions) -> torch.Tensor:
    """Step-wise importance sampling, no critic (DiCE): V̂ = Σ_t γᵗ (Π_{k≤t} ρ_k) r_t.

    The V-trace recursion with ρ_max = c_max = ∞ and V ≡ 0, `values` ignored
    [code main.py: evaluations_vtrace with V_bootstrapped * 0.0, rho = c = inf]."""
    valid = _check_rows(logp, behaviour_logp, rewards, values, mask)
    log_rho = _log_ratio(logp, behaviour_logp, valid)
    zeros = torch.zeros_like(values)
    return _vtrace_value(log_rho, rewards, zeros, valid, cfg.gamma, math.inf, math.inf)


@ope_estimators.register("doubly_robust", config=OPEOptions)
def doubly_robust(logp, behaviour_logp, rewards, values, mask, cfg: OPEOptions) -> torch.Tensor:
    """Doubly robust (loaded DiCE): V̂ = V₀ + Σ_t γᵗ (Π_{k≤t} ρ_k) δ_t.

    The V-trace recursion with ρ_max = c_max = ∞ and the critic [code main.py]."""
    valid = _check_rows(logp, behaviour_logp, rewards, values, mask)
    log_rho = _log_ratio(logp, behaviour_logp, valid)
    return _vtrace_value(log_rho, rewards, values, valid, cfg.gamma, math.inf, math.inf)


@ope_estimators.register("vtrace", config=OPEOptions)
def vtrace(logp, behaviour_logp, rewards, values, mask, cfg: OPEOptions) -> torch.Tensor:
    """V-trace (truncated IS, biased): V̂ = V₀ + Σ_t γᵗ (Π_{k<t} c̄_k) ρ̄_t δ_t,
    ρ̄ = min(ρ, ρ_max), c̄ = min(ρ, c_max); ρ_max = c_max = 1 [code main.py]. At a tie
    ρ = ρ_max the gradient passes (torch clamp; JAX's min would halve it) [ours]."""
    valid = _check_rows(logp, behaviour_logp, rewards, values, mask)
    log_rho = _log_ratio(logp, behaviour_logp, valid)
    return _vtrace_value(log_rho, rewards, values, valid, cfg.gamma, cfg.rho_max, cfg.c_max)


def _first_order_terms(log_rho, rewards, values, valid, gamma):
    """(ρ_t − 1, δ_t, e_t = (ρ_t − 1)·sg(Ĝ_t − V_t)), each [B, T], 0 on padding."""
    delta = _td_errors(rewards, values, valid, gamma)
    advantage = _discounted_tail(delta, gamma).detach()  # Ĝ_t − V_t
    rho_minus_one = torch.where(valid, torch.expm1(log_rho), torch.zeros_like(log_rho))
    return rho_minus_one, delta, rho_minus_one * advantage


@ope_estimators.register("taylor1", config=OPEOptions)
def taylor1(logp, behaviour_logp, rewards, values, mask, cfg: OPEOptions) -> torch.Tensor:
    """First-order expansion (TRPO/PPO surrogate): V̂ = V₀ + Σ_t γᵗ (ρ_t − 1)·sg(Ĝ_t − V_t)
    [code Firstorder_evaluation]. Only per-step ratios: its Hessian has no cross-state
    terms, and its gradient weights Q^μ rather than Q^π (biased once π ≠ μ). The sg only
    matters for a critic that depends on θ; with data rewards and values it is a no-op."""
    valid = _check_rows(logp, behaviour_logp, rewards, values, mask)
    log_rho = _log_ratio(logp, behaviour_logp, valid)
    _, _, e = _first_order_terms(log_rho, rewards, values, valid, cfg.gamma)
    return values[:, 0] + (_discounts(e.shape[1], cfg.gamma, e) * e).sum(1)


@ope_estimators.register("taylor2", config=OPEOptions)
def taylor2(logp, behaviour_logp, rewards, values, mask, cfg: OPEOptions) -> torch.Tensor:
    """Second-order expansion: V̂ = V₀ + Σ_t γᵗ (ρ_t − 1)·(δ_t + γ Σ_{k>t} γ^{k−t−1} e_k),
    e_k = (ρ_k − 1)·sg(Ĝ_k − V_k); no stop-gradient on the multiplier, so pairs of ratios
    (the cross-state Hessian terms) survive [code Secondorder_evaluation]."""
    valid = _check_rows(logp, behaviour_logp, rewards, values, mask)
    log_rho = _log_ratio(logp, behaviour_logp, valid)
    rho_minus_one, delta, e = _first_order_terms(log_rho, rewards, values, valid, cfg.gamma)
    tail_e = _discounted_tail(e, cfg.gamma)  # W_t − V_t
    next_tail = torch.cat([tail_e[:, 1:], torch.zeros_like(tail_e[:, :1])], dim=1)
    multiplier = delta + cfg.gamma * next_tail
    terms = _discounts(e.shape[1], cfg.gamma, e) * rho_minus_one * multiplier
    return values[:, 0] + terms.sum(1)


def effective_sample_size(logp, behaviour_logp, mask) -> torch.Tensor:
    """ESS = (Σ_b w_b)² / Σ_b w_b² of the whole-trajectory weights w_b = Π_t ρ_bt, from
    log-weights (no overflow); B when π = μ, near 1 when one row dominates [ours]."""
    valid = mask > 0
    log_w = _log_ratio(logp, behaviour_logp, valid).sum(1).detach()
    return torch.exp(2 * torch.logsumexp(log_w, 0) - torch.logsumexp(2 * log_w, 0))


def require_coverage(target_probs: torch.Tensor, behaviour_probs: torch.Tensor) -> None:
    """Raise unless μ(a|s) > 0 wherever π(a|s) > 0 (both [S, A]): otherwise no estimator
    here is unbiased, and π/μ is undefined on the actions μ never logs."""
    if target_probs.shape != behaviour_probs.shape:
        raise ValueError(
            f"target_probs {tuple(target_probs.shape)} and behaviour_probs "
            f"{tuple(behaviour_probs.shape)} must have the same [S, A] shape"
        )
    bad = (target_probs > 0) & (behaviour_probs <= 0)
    if bool(bad.any()):
        s, a = (int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"behaviour_probs[{s}, {a}] = {float(behaviour_probs[s, a])} but "
            f"target_probs[{s}, {a}] = {float(target_probs[s, a])}: μ must be > 0 on π's support"
        )


def truncated_value(P, R, logits, start: int, gamma: float, horizon: int | None):
    """Exact V^π(start) of a tabular MDP under π = softmax(logits) (rows), differentiable
    in logits (so torch.func.hessian gives the exact Hessian).

    horizon = T: Σ_{t<T} γᵗ E_π[r_t] by T sweeps v ← r_π + γP_π v from v = 0; horizon = None:
    the discounted infinite-horizon value (I − γP_π)⁻¹ r_π, the official code's oracle
    [code evaluation_utils.py:oracle_value]. P: [S, A, S'], R: [S, A], logits: [S, A]."""
    if P.dim() != 3 or P.shape[0] != P.shape[2]:
        raise ValueError(f"P must be [S, A, S], got shape {tuple(P.shape)}")
    S, A = P.shape[:2]
    if bool((P < 0).any()) or bool(((P.sum(-1) - 1).abs() > 1e-9).any()):
        raise ValueError("P must be non-negative with rows P[s, a, :] summing to 1 within 1e-9")
    for name, x in (("R", R), ("logits", logits)):
        if tuple(x.shape) != (S, A):
            raise ValueError(f"{name} must be [S, A] = {(S, A)}, got {tuple(x.shape)}")
    if not 0 <= start < S:
        raise ValueError(f"start = {start} must be a state in [0, {S})")
    if horizon is None:
        check_range("truncated_value", "gamma", gamma, low=0.0)
        if gamma >= 1:
            raise ValueError(f"truncated_value.gamma = {gamma} must be < 1 when horizon is None")
    else:
        check_range("truncated_value", "gamma", gamma, low=0.0, high=1.0)
        if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 0:
            raise ValueError(f"horizon = {horizon!r} must be a non-negative int or None")
    pi = torch.softmax(logits, dim=-1)
    r_pi = (pi * R).sum(-1)
    P_pi = torch.einsum("sa,sat->st", pi, P)
    if horizon is None:
        eye = torch.eye(S, dtype=P_pi.dtype, device=P_pi.device)
        return torch.linalg.solve(eye - gamma * P_pi, r_pi)[start]
    v = torch.zeros_like(r_pi)
    for _ in range(horizon):
        v = r_pi + gamma * (P_pi @ v)
    return v[start]


def centred_cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """cos(a − mean a, b − mean b) of the flattened tensors, in [−1, 1]; the official
    accuracy measure [code main.py:corr]."""
    if a.numel() != b.numel():
        raise ValueError(f"centred_cosine needs equal sizes, got {a.numel()} and {b.numel()}")
    x = a.flatten() - a.flatten().mean()
    y = b.flatten() - b.flatten().mean()
    nx, ny = x.norm(), y.norm()
    if float(nx) == 0.0 or float(ny) == 0.0:
        raise ValueError("centred_cosine is undefined for a constant tensor (zero centred norm)")
    return (x @ y) / (nx * ny)
