"""Multi-reward PPO on NoisyPointMass: L learners trained at once on one tensor each
(actors [L, D], critics [L, Dv]), learner l on the reward w_l·r, r the k+1 per-step
rewards (objective proxy, then the measures' proxies) — PPGA's vectorised PPO
(papers/seed_control_theory.md §9.1–§9.2; Batra et al., arXiv:2305.13795).

Each critic has k+1 value heads, all trained on one batch (one head per reward, targets
R_k = GAE_k + V_k); learner l's advantage is w_l·A, A the per-head GAE advantages (GAE is
linear in rewards and values, so this is GAE of the combined reward under the combined
value). Per minibatch, as CleanRL's ppo_continuous_action.py:

    r = exp(logp − old_logp),  Â = (A − mean)/std  (per learner, per minibatch)
    loss_l = mean(max(−Â·r, −Â·clip(r, 1 ± ε))) + vf_coef·½·mean((V − R)²)

with gradient-norm clipping and Adam per learner, and a learner stops its epochs once its
approximate KL mean((r − 1) − log r) exceeds target_kl. The rows are independent, so one
backward serves all learners. Why not trainers/control.py: PPGA runs k+1 PPO learners from
one θ, reads their parameter changes as gradients and then walks θ on a combined reward —
an outer loop around several PPO states that the control trainer's one-policy loop does
not expose."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policylab.algebra.advantages import gae_over_time
from policylab.algebra.losses import clipped_surrogate
from policylab.envs.noisy_point_mass import (
    N_REWARDS,
    OBS_DIM,
    NoisyPointMass,
    gaussian_logp,
    mean_action,
    rollout,
)
from policylab.search.reprl import mlp_apply, mlp_init, mlp_numel, mlp_sizes

DTYPE = torch.float64


@dataclass(frozen=True)
class PPOSettings:
    lr: float = 1e-3
    epochs: int = 4
    minibatches: int = 4
    clip: float = 0.2
    vf_coef: float = 2.0
    target_kl: float | None = 0.008
    max_grad_norm: float = 1.0
    gamma: float = 0.99
    gae_lambda: float = 0.95
    action_std: float = 0.3
    episodes: int = 8  # per learner per iteration


def critic_sizes(env: NoisyPointMass) -> list[tuple[int, int]]:
    return mlp_sizes(OBS_DIM, (env.hidden,), N_REWARDS)


def init_critics(env: NoisyPointMass, n: int, generator: torch.Generator) -> torch.Tensor:
    sizes = critic_sizes(env)
    return torch.stack([mlp_init(sizes, generator) for _ in range(n)])


def gae(rewards: torch.Tensor, values: torch.Tensor, gamma: float, lam: float) -> torch.Tensor:
    """Per-head GAE over time axis 1, the episode ending after the last step (no
    bootstrap): rewards, values [L, T, E, K] → advantages [L, T, E, K]. The control
    trainer's `gae_over_time` on the time-first view (one home)."""
    T = rewards.shape[1]
    r = rewards.movedim(1, 0).reshape(T, -1)
    v = values.movedim(1, 0).reshape(T, -1)
    next_v = torch.cat([v[1:], torch.zeros_like(v[:1])])
    ended = torch.zeros_like(v, dtype=torch.bool)
    ended[-1] = True  # the episode ends after its last step: V' = 0, nothing carries over
    adv, _ = gae_over_time(r, v, next_v, ended, torch.zeros_like(ended), gamma, lam)
    return adv.reshape(T, *rewards.movedim(1, 0).shape[1:]).movedim(0, 1)


def _adam(p, g, m, v, t, lr, active, b1=0.9, b2=0.999, eps=1e-8):
    """One masked Adam step per row: rows with active False keep p, m, v, t."""
    a = active[:, None].to(p.dtype)
    t = t + active.long()
    m = a * (b1 * m + (1 - b1) * g) + (1 - a) * m
    v = a * (b2 * v + (1 - b2) * g * g) + (1 - a) * v
    tt = t.clamp(min=1).to(p.dtype)[:, None]
    step = lr * (m / (1 - b1**tt)) / ((v / (1 - b2**tt)).sqrt() + eps)
    return p - a * step, m, v, t


def ppo_iterations(
    env: NoisyPointMass,
    actors: torch.Tensor,
    critics: torch.Tensor,
    weights: torch.Tensor,
    iterations: int,
    cfg: PPOSettings,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """`iterations` PPO iterations of L learners: actors [L, D], critics [L, Dv], reward
    weights [L, k+1]. Fresh Adam state per call (our choice). Returns the new actors,
    critics and {"env_steps", "approx_kl", "value_loss"}."""
    L = actors.shape[0]
    csizes = critic_sizes(env)
    actors, critics = actors.clone(), critics.clone()
    state = [torch.zeros_like(actors), torch.zeros_like(actors)]
    cstate = [torch.zeros_like(critics), torch.zeros_like(critics)]
    steps_t = torch.zeros(L, dtype=torch.long)
    env_steps, kl, vloss_last = 0, torch.zeros(L, dtype=DTYPE), 0.0
    for _ in range(iterations):
        # 1. collect: E episodes per learner with its current actor
        data = rollout(env, actors, cfg.episodes, generator, std=cfg.action_std)
        env_steps += L * env.horizon * cfg.episodes
        obs = data["obs"].reshape(L, -1, OBS_DIM)
        N = obs.shape[1]
        with torch.no_grad():
            values = mlp_apply(critics, csizes, obs).reshape(data["rewards"].shape)
        # 2. per-head GAE; the learner's advantage is its weighted sum
        adv = gae(data["rewards"], values, cfg.gamma, cfg.gae_lambda)
        returns = (adv + values).reshape(L, N, N_REWARDS)
        A = (adv * weights[:, None, None, :]).sum(-1).reshape(L, N)
        actions = data["actions"].reshape(L, N, -1)
        old_logp = data["logp"].reshape(L, N)
        # 3. learn: epochs of minibatches, one backward for all learners
        active = torch.ones(L, dtype=torch.bool)
        size = N // cfg.minibatches
        for _epoch in range(cfg.epochs):
            perm = torch.randperm(N, generator=generator)
            for b in range(cfg.minibatches):
                idx = perm[b * size : (b + 1) * size]
                a_p = actors.clone().requires_grad_(True)
                c_p = critics.clone().requires_grad_(True)
                mu = mean_action(env, a_p, obs[:, idx])
                logratio = gaussian_logp(actions[:, idx], mu, cfg.action_std) - old_logp[:, idx]
                ratio = logratio.exp()
                adv_mb = A[:, idx]
                adv_mb = (adv_mb - adv_mb.mean(1, keepdim=True)) / (
                    adv_mb.std(1, keepdim=True) + 1e-8
                )
                pg = clipped_surrogate(ratio, adv_mb, cfg.clip, cfg.clip).mean(1)
                v = mlp_apply(c_p, csizes, obs[:, idx])
                vloss = 0.5 * ((v - returns[:, idx]) ** 2).mean((1, 2))
                loss = (pg + cfg.vf_coef * vloss) * active
                ga, gc = torch.autograd.grad(loss.sum(), [a_p, c_p])
                norm = torch.sqrt((ga**2).sum(1) + (gc**2).sum(1))
                scale = (cfg.max_grad_norm / (norm + 1e-6)).clamp(max=1.0)[:, None]
                actors, state[0], state[1], t_new = _adam(
                    actors, ga * scale, *state, steps_t, cfg.lr, active
                )
                critics, cstate[0], cstate[1], _ = _adam(
                    critics, gc * scale, *cstate, steps_t, cfg.lr, active
                )
                steps_t = t_new
                with torch.no_grad():
                    kl = ((ratio - 1) - logratio).mean(1).detach()
                vloss_last = float(vloss.detach().mean())
            if cfg.target_kl is not None:
                active = active & (kl <= cfg.target_kl)
                if not bool(active.any()):
                    break
    info = {"env_steps": env_steps, "approx_kl": float(kl.mean()), "value_loss": vloss_last}
    return actors.detach(), critics.detach(), info


def actor_dim(env: NoisyPointMass) -> int:
    return mlp_numel(env.sizes)
