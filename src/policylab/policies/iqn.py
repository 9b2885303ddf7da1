"""PG-Rainbow (Jeon, Lee, Lee, arXiv:2407.13146; papers/seed_llm_algorithms.md §17): PPO
whose value baseline reads an implicit quantile network (IQN, Dabney et al. 2018,
arXiv:1806.06923) trained off-policy from a replay buffer of PPO's own transitions.

- `IQNCritic`: Z_τ(s, a) = g(ψ(s) ⊙ φ(τ))_a with φ(τ) = ReLU(Σ_i cos(π·i·τ)·W_i + b),
  i = 0..n−1 (§17.1).
- `PGRainbowPolicy`: mlp.py's categorical actor-critic (V_θ) plus the IQN and a
  distillation layer f_ψ. q_φ(s)_j = Σ_a π(a|s)·Z_{τ̂_j}(s, a) at the mid-fractions
  τ̂_j = (2j − 1)/(2N) (§17.2 our reading; no grad into the IQN). The value the rollout
  records, that GAE uses and that the PPO value loss trains is
  V_ψ(s) = f_ψ(input(V_θ(s), q_φ(s))), input ∈ {concat [V_θ, q], scaled V_θ·q,
  quantiles_only q}; until the replay buffer holds `replay_min` transitions it is V_θ
  alone (§17.7). `iqn_value(s)` = mean_j q_φ(s)_j, the IQN's own value estimate.
- `IQNLearner`: the replay buffer and the IQN's own optimiser and target network; M
  quantile-Huber steps per PPO iteration (§17.4)."""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from policylab.algebra.value import quantile_huber, quantile_targets
from policylab.policies.base import Evaluation
from policylab.policies.mlp import ActorCritic, _layer
from policylab.policies.spaces import mlp_input_dim

PGR_INPUTS = ("concat", "scaled", "quantiles_only")


def cosine_features(tau: torch.Tensor, n: int) -> torch.Tensor:
    """[...] fractions → [..., n]: cos(π·i·τ), i = 0..n−1 (IQN §3; T17.3)."""
    i = torch.arange(n, dtype=tau.dtype)
    return torch.cos(math.pi * i * tau.unsqueeze(-1))


class IQNCritic(nn.Module):
    """Quantile values Z_τ(s, a) for every discrete action: [B, obs] × [B, N] → [B, N, A]."""

    def __init__(self, obs_dim: int, n_actions: int, *, hidden: int = 64, n_cos: int = 64) -> None:
        super().__init__()
        self.n_cos = n_cos
        self.torso = nn.Sequential(
            _layer(obs_dim, hidden, math.sqrt(2)),
            nn.ReLU(),
            _layer(hidden, hidden, math.sqrt(2)),
            nn.ReLU(),
        )
        self.embed = nn.Sequential(_layer(n_cos, hidden, math.sqrt(2)), nn.ReLU())
        self.head = nn.Sequential(
            _layer(hidden, hidden, math.sqrt(2)), nn.ReLU(), _layer(hidden, n_actions, 1.0)
        )

    def forward(self, feats: torch.Tensor, taus: torch.Tensor) -> torch.Tensor:
        psi = self.torso(feats).unsqueeze(1)  # [B, 1, H]
        phi = self.embed(cosine_features(taus, self.n_cos))  # [B, N, H]
        return self.head(psi * phi)  # [B, N, A]


class PGRainbowPolicy(ActorCritic):
    """Categorical actor-critic whose value is V_ψ = f_ψ(V_θ, q_φ) (see the module doc)."""

    def __init__(
        self,
        obs_dim: int,
        n_actions: int,
        *,
        hidden: tuple[int, ...] = (64, 64),
        normalize_obs: bool = False,
        pgr_quantiles: int = 32,
        pgr_input: str = "concat",
        iqn_cosines: int = 64,
    ) -> None:
        super().__init__(
            obs_dim, n_actions, discrete=True, hidden=hidden, normalize_obs=normalize_obs
        )
        if pgr_input not in PGR_INPUTS:
            raise ValueError(f"pgr_input={pgr_input!r}; expected one of {', '.join(PGR_INPUTS)}")
        self.pgr_input, self.n_quantiles = pgr_input, pgr_quantiles
        self.iqn = IQNCritic(obs_dim, n_actions, hidden=hidden[-1], n_cos=iqn_cosines)
        self.iqn_target = copy.deepcopy(self.iqn).requires_grad_(False)
        n_in = pgr_quantiles + (1 if pgr_input == "concat" else 0)
        self.distill = nn.Linear(n_in, 1)
        with torch.no_grad():  # start as V_θ (concat) or the quantile mean (the others)
            self.distill.weight.zero_()
            self.distill.bias.zero_()
            if pgr_input == "concat":
                self.distill.weight[0, 0] = 1.0
            else:
                self.distill.weight.fill_(1.0 / pgr_quantiles)
        j = torch.arange(1, pgr_quantiles + 1, dtype=torch.float32)
        self.register_buffer("mid_taus", (2 * j - 1) / (2 * pgr_quantiles))
        self.register_buffer("active", torch.tensor(False))  # replay_min reached

    def ppo_parameters(self) -> list[nn.Parameter]:
        """What PPO's optimiser updates: actor, V_θ and f_ψ (the IQN has its own)."""
        return [*self.actor.parameters(), *self.critic.parameters(), *self.distill.parameters()]

    @torch.no_grad()
    def quantile_vector(self, feats: torch.Tensor):
        """q_φ(s) [B, N] = Σ_a π(a|s)·Z_{τ̂_j}(s, a), sorted (crossing, §17.7); feats are
        the networks' input normalize(obs)."""
        z = self.iqn(feats, self.mid_taus.expand(feats.shape[0], -1))  # [B, N, A]
        probs = torch.softmax(self.actor(feats), dim=-1).unsqueeze(1)
        return (z * probs).sum(-1).sort(dim=-1).values

    def iqn_value(self, x: torch.Tensor) -> torch.Tensor:
        """The IQN's value estimate at inputs x: the mean over quantiles of q_φ(s), [B]."""
        return self.quantile_vector(x).mean(-1)

    def _combine(self, feats: torch.Tensor, v_theta: torch.Tensor) -> torch.Tensor:
        if not bool(self.active):
            return v_theta
        q = self.quantile_vector(feats)
        if self.pgr_input == "concat":
            x = torch.cat([v_theta.unsqueeze(-1), q], dim=-1)
        elif self.pgr_input == "scaled":
            x = v_theta.unsqueeze(-1) * q
        else:
            x = q
        return self.distill(x).squeeze(-1)

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self._combine(x, self.critic(x).squeeze(-1))

    def evaluate(
        self,
        x: torch.Tensor,
        actions: torch.Tensor,
        *,
        mask: torch.Tensor | None = None,
        extras: dict | None = None,
    ) -> Evaluation:
        """(log π(a|s) [B], entropy [B], V_ψ(s) [B]) with grad; V_ψ as in `value`."""
        logp, entropy, v_theta = super().evaluate(x, actions)
        return Evaluation(logp, entropy, self._combine(x, v_theta))


def make_pg_rainbow_policy(observation_space, action_space, **kwargs) -> PGRainbowPolicy:
    """A PGRainbowPolicy for observations of policies/spaces.py without images
    and Discrete actions."""
    from gymnasium import spaces

    if not isinstance(action_space, spaces.Discrete):
        raise ValueError(
            f"action space {action_space} is not supported by pg_rainbow (IQN over discrete "
            "actions, papers §17.1); expected Discrete"
        )
    obs_dim = mlp_input_dim(observation_space, "pg_rainbow")  # flat, one-hot (policies/spaces.py)
    return PGRainbowPolicy(obs_dim, int(action_space.n), **kwargs)


class IQNLearner:
    """Replay buffer of (s, a, r, s', done) and the IQN's Adam and target-network sync.

    Rows come from a PPO batch: s' of step t is the observation of step t + 1 of the same
    environment (the collector's current observation for the last step); rows that ended
    by truncation are left out (their s' was replaced by the reset), rows that ended by
    termination keep done = 1, so their s' is masked."""

    def __init__(
        self,
        policy: PGRainbowPolicy,
        *,
        obs_dim: int,
        capacity: int,
        lr: float,
        adam_eps: float,
        kappa: float,
        n_tau: int,
        n_tau_target: int,
        n_tau_select: int,
        target_every: int,
        replay_min: int,
    ) -> None:
        self.policy, self.capacity, self.replay_min = policy, capacity, replay_min
        self.kappa, self.n_tau, self.n_tau_target = kappa, n_tau, n_tau_target
        self.n_tau_select, self.target_every = n_tau_select, target_every
        self.optimiser = torch.optim.Adam(policy.iqn.parameters(), lr=lr, eps=adam_eps)
        self.obs = torch.zeros(capacity, obs_dim)
        self.next_obs = torch.zeros(capacity, obs_dim)
        self.actions = torch.zeros(capacity, dtype=torch.long)
        self.rewards = torch.zeros(capacity)
        self.dones = torch.zeros(capacity)
        self.size, self.pos, self.steps = 0, 0, 0

    def push(self, batch, last_obs: torch.Tensor) -> None:
        """Store a PPO batch's transitions; batch.obs and `last_obs` (the input after the
        batch's last step) are the networks' inputs, normalised as the sampler saw them."""
        T, N = batch.rewards.shape
        obs = batch.obs.reshape(T, N, -1)
        nxt = torch.cat([obs[1:], last_obs.unsqueeze(0)], dim=0)
        keep = (batch.truncated.reshape(-1) == 0).nonzero().squeeze(-1)
        rows = {
            "obs": obs.reshape(T * N, -1)[keep],
            "next_obs": nxt.reshape(T * N, -1)[keep],
            "actions": batch.rollouts.actions.reshape(-1).long()[keep],
            "rewards": batch.rewards.reshape(-1)[keep],
            "dones": batch.terminated.reshape(-1)[keep],
        }
        idx = (self.pos + torch.arange(len(keep))) % self.capacity
        for name, value in rows.items():
            getattr(self, name)[idx] = value.to(getattr(self, name).dtype)
        self.pos = int((self.pos + len(keep)) % self.capacity)
        self.size = min(self.capacity, self.size + len(keep))

    def update(self, steps: int, batch_size: int, gamma: float, generator) -> dict[str, float]:
        """`steps` quantile-Huber steps on replay minibatches (§17.1); turns V_ψ on once the
        buffer holds `replay_min` transitions. Returns the iqn/ metrics (§17.6)."""
        policy, out = self.policy, {"iqn/replay_size": float(self.size)}
        if self.size < self.replay_min or steps == 0:
            return out
        losses = []
        for _ in range(steps):
            rows = torch.randint(self.size, (batch_size,), generator=generator)
            feats = self.obs[rows]  # stored as the networks' input
            with torch.no_grad():
                nfeats = self.next_obs[rows]
                sel = torch.rand(batch_size, self.n_tau_select, generator=generator)
                a_star = policy.iqn_target(nfeats, sel).mean(1).argmax(-1)  # [B]
                tau_t = torch.rand(batch_size, self.n_tau_target, generator=generator)
                z_next = policy.iqn_target(nfeats, tau_t)  # [B, N', A]
                z_next = z_next.gather(-1, a_star.view(-1, 1, 1).expand(-1, z_next.shape[1], 1))
                target = quantile_targets(
                    self.rewards[rows], gamma, self.dones[rows], z_next.squeeze(-1)
                )
            taus = torch.rand(batch_size, self.n_tau, generator=generator)
            z = policy.iqn(feats, taus)  # [B, N, A]
            a = self.actions[rows].view(-1, 1, 1).expand(-1, z.shape[1], 1)
            loss, _ = quantile_huber(z.gather(-1, a).squeeze(-1), target, taus, self.kappa)
            self.optimiser.zero_grad(set_to_none=True)
            loss.backward()
            self.optimiser.step()
            self.steps += 1
            if self.steps % self.target_every == 0:
                policy.iqn_target.load_state_dict(policy.iqn.state_dict())
            losses.append(float(loss.detach()))
        self.optimiser.zero_grad(set_to_none=True)  # no stale IQN grads beside PPO's
        policy.active.fill_(True)
        with torch.no_grad():
            q = policy.quantile_vector(self.obs[: min(self.size, 1024)])
            n = q.shape[-1]
            lo, hi = q[:, int(0.1 * n)], q[:, min(n - 1, int(0.9 * n))]
            m = min(self.size, 256)
            z = policy.iqn(self.obs[:m], policy.mid_taus.expand(m, -1))
            out["iqn/quantile_spread"] = float((hi - lo).mean())
            out["iqn/crossed_frac"] = float((z.diff(dim=1) < 0).float().mean())
        out["iqn/loss"] = sum(losses) / len(losses)
        return out

    def state_dict(self) -> dict:
        keep = ("obs", "next_obs", "actions", "rewards", "dones", "size", "pos", "steps")
        return {"optimiser": self.optimiser.state_dict(), **{k: getattr(self, k) for k in keep}}

    def load_state_dict(self, state: dict) -> None:
        self.optimiser.load_state_dict(state["optimiser"])
        for key, value in state.items():
            if key != "optimiser":
                setattr(self, key, value)
