"""Co-GRPO's schedule half in the MDM trainer (papers/seed_generative.md G1.5, inferred):
the schedule policy π_φ, its frozen reference π_φ0, its own Adam, the joint row
(L token columns, then S schedule columns, one `ppo_clip` with token-mean) and its
checkpoint. trainers/mdm.py calls it where a recipe's table sets `learn_schedule`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from policylab.algebra.mdm_schedule import joint_row
from policylab.algebra.options import check_range
from policylab.policies.mdm_schedule import SchedulePolicy, token_temperatures


@dataclass(frozen=True)
class ScheduleRun:
    """coef: weight of the schedule columns (0 = token loss only); lr: φ's Adam step;
    std: initial (σ_logτ, σ_logitq); alternate: odd steps update θ only, even steps φ only;
    score_at_sampling: tokens scored at their step's τ_s (`score_temperature=sampling`)."""

    coef: float
    lr: float
    std: tuple[float, float]
    alternate: bool
    score_at_sampling: bool

    @classmethod
    def from_table(cls, table: dict, score_at_sampling: bool) -> ScheduleRun:
        check_range("co_grpo", "schedule_coef", table["schedule_coef"], low=0.0, finite=True)
        check_range(
            "co_grpo", "schedule_lr", table["schedule_lr"], low=0.0, low_open=True, finite=True
        )
        std = tuple(float(s) for s in table["schedule_std"])
        if len(std) != 2 or min(std) <= 0:
            raise ValueError(f"schedule_std = {std!r}; accepted: two values > 0 (log τ, logit q)")
        if table["block"]:
            raise ValueError(
                f"block = {table['block']} with a learned schedule; accepted: 0 (one block, G1.5)"
            )
        return cls(
            float(table["schedule_coef"]),
            float(table["schedule_lr"]),
            std,
            bool(table["alternate"]),
            score_at_sampling,
        )


class Schedule:
    """π_φ with its optimiser and (when the loss has a KL term) the frozen π_φ0."""

    def __init__(self, run: ScheduleRun, steps: int, temperature: float, reference: bool):
        self.run = run
        self.policy = SchedulePolicy(steps, temperature, run.std)
        self.reference = copy.deepcopy(self.policy).requires_grad_(False) if reference else None
        self.optimiser = torch.optim.Adam(self.policy.parameters(), lr=run.lr)

    def token_temperature(self, batch) -> torch.Tensor | None:
        """τ per token [B, L] for the estimator, or None (score at the config's τ)."""
        if not self.run.score_at_sampling:
            return None
        return token_temperatures(batch.extras["schedule_actions"], batch.extras["reveal"])

    def old(self, batch) -> tuple[torch.Tensor, torch.Tensor | None]:
        """log π_φold and log π_φ0 of the batch's actions [B, S], before any update."""
        actions = batch.extras["schedule_actions"]
        with torch.no_grad():
            old = self.policy.log_prob(actions)
            ref = None if self.reference is None else self.reference.log_prob(actions)
        return old, ref

    def row(self, token_logp, batch, advantages, mask):
        """The joint row (logp, mask, advantages) [B, L+S] of Co-GRPO."""
        sched = self.policy.log_prob(batch.extras["schedule_actions"])
        return joint_row(token_logp, sched, mask, advantages, self.run.coef)

    def steps_now(self, step: int) -> tuple[bool, bool]:
        """(update θ, update φ) at training step `step` (1-based)."""
        if not self.run.alternate:
            return True, True
        return step % 2 == 1, step % 2 == 0

    def update(self, grad_clip: float, step_phi: bool) -> None:
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), grad_clip or 1e9)
        if step_phi:
            self.optimiser.step()
        self.optimiser.zero_grad(set_to_none=True)

    def metrics(self) -> dict[str, float]:
        mean = self.policy.mean.detach()
        out = {f"schedule/tau_{s}": float(mean[s, 0].exp()) for s in range(len(mean))}
        out.update({f"schedule/q_{s}": float(mean[s, 1].sigmoid()) for s in range(len(mean) - 1)})
        std = self.policy.log_std.detach().exp()
        out.update({"schedule/std_log_tau": float(std[0]), "schedule/std_logit_q": float(std[1])})
        return out

    def state(self) -> dict:
        return {"policy": self.policy.state_dict(), "optimizer": self.optimiser.state_dict()}

    def load(self, state: dict) -> None:
        self.policy.load_state_dict(state["policy"])
        self.optimiser.load_state_dict(state["optimizer"])


def cat_columns(tokens: torch.Tensor | None, schedule: torch.Tensor | None):
    """Token columns [B, L] then schedule columns [B, S] (None stays None)."""
    if tokens is None or schedule is None:
        return tokens
    return torch.cat([tokens, schedule.to(tokens.dtype)], 1)
