"""Policies of a multi-role system (papers/seed_agents.md §A0.7): roles → policy index.

`regime="shared"` maps every role to policy 0 (one model plays all roles: role sharing);
`"per_role"` gives each role its own copy of the model with its own optimiser and lr
schedule (the tiny model is small enough for full copies; LoRA adapters are the GPU
analogue). Advantages are computed once on the whole batch; each policy then runs the
learner's `update` on the rows whose `agent_ids` are its roles. With one policy the set
is exactly the single-policy trainer (no row selection, no metric prefix)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

REGIMES = ("shared", "per_role")


@dataclass
class Member:
    policy: object  # a LanguageModelPolicy
    optimiser: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    roles: tuple[int, ...]
    scaler: torch.amp.GradScaler | None = None  # float16 loss scaling (devices.py)


class PolicySet:
    """`policies(role)` → the policy that plays `role`; `members` in policy order."""

    def __init__(self, members: list[Member], role_to_policy: list[int], actor=None) -> None:
        self.members, self.role_to_policy = members, role_to_policy
        self.actor = actor  # a frozen LanguageModelPolicy playing every act turn, or None

    @classmethod
    def build(cls, policy, n_roles: int, regime: str, make_optimiser) -> PolicySet:
        """From one policy: shared (every role → it) or per role (deep copies, the first
        being `policy` itself). `make_optimiser(module)` → (optimiser, scheduler)."""
        if regime not in REGIMES:
            raise ValueError(f"regime = {regime!r}; choices: {', '.join(REGIMES)}")
        if regime == "shared" or n_roles == 1:
            return cls(
                [Member(policy, *make_optimiser(policy), tuple(range(n_roles)))], [0] * n_roles
            )
        members = []
        for role in range(n_roles):
            # one deepcopy keeps shared references shared: the copy's engine samples from
            # the copy's model
            own = policy if role == 0 else copy.deepcopy(policy)
            members.append(Member(own, *make_optimiser(own), (role,)))
        return cls(members, list(range(n_roles)))

    def __call__(self, role: int):
        return self.members[self.role_to_policy[role]].policy

    def __len__(self) -> int:
        return len(self.members)

    def rows_of(self, index: int, agent_ids: torch.Tensor | None) -> torch.Tensor | None:
        """Row indices policy `index` trains on (None: every row, a single policy)."""
        if len(self.members) == 1:
            return None
        roles = torch.tensor(self.members[index].roles)
        return torch.isin(agent_ids, roles).nonzero(as_tuple=True)[0]

    def state_dict(self) -> list[dict]:
        return [
            {"optimizer": m.optimiser.state_dict(), "scheduler": m.scheduler.state_dict()}
            for m in self.members
        ]

    def load_state_dict(self, state: list[dict]) -> None:
        for m, s in zip(self.members, state, strict=True):
            m.optimiser.load_state_dict(s["optimizer"])
            m.scheduler.load_state_dict(s["scheduler"])
