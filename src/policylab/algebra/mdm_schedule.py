"""Pure pieces of Co-GRPO's schedule policy π_φ on a masked diffusion LM
(papers/seed_generative.md G1.5, inferred from the abstract and project page of Zhou et al.
2025, Co-GRPO, arXiv:2512.22288; no code was found).

At each decoding step s = 0 … S−1 the schedule action is a_s = (log τ_s, logit q_s): τ_s the
sampling temperature of that step, q_s the fraction of the still-masked positions it reveals.
π_φ(a_s | s) is a product of independent Gaussians, a learned mean per step and a learned
log-std per action dimension [ours, G1.5]; the log-density is that of the unsquashed value
(no Jacobian: it cancels in the ratio). The last step reveals every remaining position, so
its q is not an action (its column holds only log τ) [ours: G1.5 "last step reveals all"].

No model and no global randomness here (tests/algebra/test_mdm_schedule.py).
"""

from __future__ import annotations

import math

import torch

LOG_2PI = math.log(2 * math.pi)
ACTION_DIMS = 2  # (log τ_s, logit q_s)


def gaussian_log_density(x: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor):
    """log N(x; μ, σ²) = −(x − μ)²/(2σ²) − log σ − ½ log 2π, elementwise (broadcasting).
    D5: x = 0.3, μ = 0, σ = 0.5 → −0.4057914; x = ln 0.8, μ = 0, σ = 0.25 → 0.0690115."""
    return -((x - mean) ** 2) / (2 * torch.exp(2 * log_std)) - log_std - 0.5 * LOG_2PI


def active_dims(steps: int) -> torch.Tensor:
    """[S, 2] bool: which action dimensions are actions. All but the last step's q (the
    last step reveals every remaining position)."""
    if steps < 1:
        raise ValueError(f"steps = {steps}; accepted: an integer >= 1")
    active = torch.ones(steps, ACTION_DIMS, dtype=torch.bool)
    active[-1, 1] = False
    return active


def schedule_log_prob(
    actions: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor
) -> torch.Tensor:
    """Per-step log π_φ(a_s | s) [B, S]: Σ over the active dimensions of
    log N(a_{s,d}; μ_{s,d}, σ_d²). actions [B, S, 2], mean [S, 2], log_std [2]."""
    steps = actions.shape[1]
    if actions.shape[-1] != ACTION_DIMS or mean.shape != (steps, ACTION_DIMS):
        raise ValueError(
            f"actions {list(actions.shape)} and mean {list(mean.shape)}: expected [B, S, 2] "
            f"and [S, 2] = [{steps}, 2]"
        )
    density = gaussian_log_density(actions, mean, log_std)
    return torch.where(active_dims(steps), density, torch.zeros_like(density)).sum(-1)


def hand_schedule(steps: int, temperature: float) -> torch.Tensor:
    """The hand schedule as action means [S, 2]: log τ_s = log τ_0 and q_s = 1/(S − s), so
    logit q_s = −log(S − s − 1); the last step's q (not an action) is set to 0 [G1.5].
    S = 3, τ_0 = 1 → [[0, −log 2], [0, 0], [0, 0]]."""
    if not temperature > 0:
        raise ValueError(f"temperature = {temperature}; accepted: > 0 (the schedule's τ_0)")
    mean = torch.zeros(steps, ACTION_DIMS)
    mean[:, 0] = math.log(temperature)
    for s in range(steps - 1):
        mean[s, 1] = -math.log(steps - s - 1)  # logit(1/(S − s))
    return mean


def reveal_counts(q: torch.Tensor, masked: torch.Tensor, last: bool) -> torch.Tensor:
    """Tokens each row reveals at a step: n = min(masked, max(1, ⌊q·masked + ½⌋)) (round half
    up [ours]); the last step reveals all `masked`; a row with nothing masked reveals 0.
    q, masked: [B]. q = [0.5, 0.1, 0.9], masked = [6, 6, 3] → [3, 1, 3]."""
    if last:
        return masked.clone()
    n = torch.floor(q.double() * masked.double() + 0.5).long().clamp(min=1)
    return torch.minimum(n, masked)


def joint_row(
    token_logp: torch.Tensor,
    schedule_logp: torch.Tensor,
    token_mask: torch.Tensor,
    advantages: torch.Tensor,
    coef: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Co-GRPO's row (G0.2): the L token columns, then the S schedule columns.

    token_logp [B, L], schedule_logp [B, S], token_mask [B, L], advantages [B] (or [B, L],
    one outcome advantage per row broadcast over the tokens: column 0 is the row's) →
    (logp [B, L+S], mask [B, L+S], advantages [B, L+S]). Schedule columns have mask 1 and
    advantage coef·A, so in one `ppo_clip` their clipped terms weigh coef (the clip term is
    positively homogeneous in A) [ours]; coef = 0 masks them out, leaving exactly the
    token-only loss of d2 on the same rows. Per-token A: [1, 2], L = 2, S = 1, coef 0.5 →
    [[1, 1, 0.5], [2, 2, 1]]."""
    if coef < 0:
        raise ValueError(f"schedule_coef = {coef}; accepted: >= 0")
    rows, steps = schedule_logp.shape
    logp = torch.cat([token_logp, schedule_logp.to(token_logp.dtype)], 1)
    on = torch.full((rows, steps), 1.0 if coef > 0 else 0.0, dtype=token_mask.dtype)
    mask = torch.cat([token_mask, on], 1)
    adv = advantages.detach()
    tokens = adv if adv.dim() == 2 else adv[:, None].expand_as(token_logp)
    row = tokens[:, :1].expand(rows, steps)
    adv = torch.cat([tokens.to(logp.dtype), coef * row.to(logp.dtype)], 1)
    return logp, mask, adv
