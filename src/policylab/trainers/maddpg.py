"""MADDPG's update (Lowe et al. 2017, arXiv:1706.02275, Alg. 1), shared by the off-policy
trainer (trainers/offpolicy.py: DDPG is its one-agent case) and the multi-agent lab
methods (lab/hgam.py): one agent's networks (`Agent`) and one step of every agent
(`maddpg_update`). It lives apart from the trainer so a lab method can use it without
importing the trainer's run configuration."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from policylab.algebra.deterministic import deterministic_pg, soft_update, td_target
from policylab.policies.deterministic import DeterministicActor, QCritic
from policylab.trainers.run import mean_metrics


@dataclass
class Agent:
    """One agent's networks: actor μ_i, critic Q_i (centralised for MADDPG), their targets
    and optimisers."""

    actor: DeterministicActor
    critic: QCritic
    target_actor: DeterministicActor
    target_critic: QCritic
    actor_opt: torch.optim.Optimizer
    critic_opt: torch.optim.Optimizer

    @classmethod
    def build(cls, obs_dim, low, high, state_dim, joint_action_dim, hidden, lr) -> Agent:
        actor = DeterministicActor(obs_dim, low, high, hidden)
        critic = QCritic(state_dim, joint_action_dim, hidden)
        return cls(
            actor,
            critic,
            copy.deepcopy(actor),
            copy.deepcopy(critic),
            torch.optim.Adam(actor.parameters(), lr=lr),
            torch.optim.Adam(critic.parameters(), lr=lr),
        )

    def state_dict(self) -> dict:
        return {name: getattr(self, name).state_dict() for name in self.__dataclass_fields__}

    def load_state_dict(self, state: dict) -> None:
        for name, value in state.items():
            getattr(self, name).load_state_dict(value)


def maddpg_update(
    agents: list[Agent],
    batch: dict[str, torch.Tensor],
    gamma: float,
    tau: float,
    update_actor: bool,
) -> dict[str, float]:
    """One step of every agent (MADDPG, Lowe et al. 2017, arXiv:1706.02275, Alg. 1); with
    one agent it is DDPG's step. `batch`: obs_i, action_i, next_obs_i [B, ·], reward_i [B]
    per agent i, terminated [B]. x = [o_1..o_N], a = [a_1..a_N]:
      critic i: (Q_i(x, a) − y_i)², y_i = r_i + γ(1 − terminated)·Q_i'(x', μ_1'(o_1')..μ_N'(o_N'))
      actor i (if update_actor): −Q_i(x, a_1..μ_i(o_i)..a_N), then θ' ← τθ + (1 − τ)θ'."""
    n = len(agents)
    obs = [batch[f"obs_{i}"] for i in range(n)]
    acts = [batch[f"action_{i}"] for i in range(n)]
    state, next_state = (
        torch.cat(obs, -1),
        torch.cat([batch[f"next_obs_{i}"] for i in range(n)], -1),
    )
    with torch.no_grad():
        next_joint = torch.cat(
            [ag.target_actor(batch[f"next_obs_{i}"]) for i, ag in enumerate(agents)], -1
        )
    joint = torch.cat(acts, -1)
    rows: list[tuple[float, dict[str, float]]] = []
    for i, ag in enumerate(agents):
        with torch.no_grad():
            next_q = ag.target_critic(next_state, next_joint)
            y = td_target(batch[f"reward_{i}"], next_q, batch["terminated"], gamma)
        q = ag.critic(state, joint)
        critic_loss = F.mse_loss(q, y)
        ag.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        ag.critic_opt.step()
        rows.append(
            (1.0, {"critic/loss": critic_loss.item(), "critic/q_mean": q.detach().mean().item()})
        )
    if update_actor:
        for i, ag in enumerate(agents):
            mine = [a if j != i else ag.actor(obs[i]) for j, a in enumerate(acts)]
            q_pi = ag.critic(state, torch.cat(mine, -1))
            actor_loss = deterministic_pg(q_pi)
            ag.actor_opt.zero_grad(set_to_none=True)
            actor_loss.backward()
            ag.actor_opt.step()
            rows.append(
                (
                    1.0,
                    {"actor/loss": actor_loss.item(), "actor/q_mean": q_pi.detach().mean().item()},
                )
            )
        for ag in agents:
            soft_update(ag.target_actor, ag.actor, tau)
            soft_update(ag.target_critic, ag.critic, tau)
    return mean_metrics(rows)
