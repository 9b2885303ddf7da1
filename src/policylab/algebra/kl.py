"""KL estimators of Schulman's note "Approximating KL Divergence" (2020).

Samples come from the policy π_θ, the other distribution is the reference π_ref, so the
target is the reverse KL(π_θ ‖ π_ref) and the log-ratio is log ρ = ref_logp − logp
(papers/seed_llm_algorithms.md §4). Each estimator maps logp, ref_logp [B, T] to a
per-token estimate [B, T]; the caller masks and aggregates.

Gradients, on-policy, per token w.r.t. logp:
- k1 in the loss: ∂/∂logp = 1, expected gradient 0 (noise, not a KL pull); as a detached
  reward it gives the correct reverse-KL gradient (REINFORCE++, RLOO, PPO-RLHF).
- k2 in the loss: ∂/∂logp = logp − ref_logp, the reverse-KL gradient.
- k3 in the loss (GRPO eq. 4): ∂/∂logp = 1 − ρ, whose expectation is the *forward*
  KL(π_ref ‖ π_θ) gradient, although its value estimates the reverse KL.
"""

from __future__ import annotations

import torch

from policylab.algebra.precision import at_least_float32
from policylab.registry import Registry

kl_estimators: Registry = Registry("KL estimator")


# exp() of a log-ratio in bf16/fp16 loses the small KL values entirely (precision.py).
_upcast = at_least_float32


@kl_estimators.register("k1")
def k1(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """k1 = logp − ref_logp; unbiased for KL(π_θ‖π_ref), high variance, can be negative."""
    return _upcast(logprobs) - _upcast(ref_logprobs)


@kl_estimators.register("k2")
def k2(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """k2 = ½ (logp − ref_logp)²; biased (second-order), low variance, ≥ 0."""
    return 0.5 * (_upcast(logprobs) - _upcast(ref_logprobs)) ** 2


@kl_estimators.register("k3")
def k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """k3 = ρ − 1 − log ρ with log ρ = ref_logp − logp; unbiased, low variance, ≥ 0
    (GRPO, arXiv:2402.03300 eq. 4). Unclamped: overflows once log ρ > 88 in float32."""
    log_rho = _upcast(ref_logprobs) - _upcast(logprobs)
    return torch.exp(log_rho) - log_rho - 1.0


@kl_estimators.register("k3_low_var")
def k3_low_var(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """k3 with verl's clamps (`low_var_kl`): log ρ clamped to ±20, the estimate to ±10
    (zero gradient where a clamp is active)."""
    log_rho = (_upcast(ref_logprobs) - _upcast(logprobs)).clamp(-20.0, 20.0)
    return (torch.exp(log_rho) - log_rho - 1.0).clamp(-10.0, 10.0)


def kl_estimator(name: str):
    """The registered estimator `name` (k1, k2, k3, k3_low_var)."""
    return kl_estimators.get(name)


def kl_reward_penalty(
    old_logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    mask: torch.Tensor,
    estimator: str = "k1",
) -> torch.Tensor:
    """Per-token KL estimate of the behaviour policy against the reference, detached and
    zeroed where mask is 0: the "KL in the reward" placement (REINFORCE++, RLOO, PPO-RLHF),
    computed once at rollout time."""
    with torch.no_grad():
        est = kl_estimator(estimator)(old_logprobs, ref_logprobs)
        return torch.where(mask > 0, est, torch.zeros_like(est))
