"""Generalised state-dependent exploration (gSDE; Raffin, Kober & Stulp 2021, arXiv
2005.05719, §3) for the MLP actor-critic's Gaussian actions, as Stable-Baselines3's
`StateDependentNoiseDistribution` does it (`use_sde=True`, its defaults: full_std, exp,
no squashing, features not learnt through the noise).

The noise of an action is a linear function of the actor's last hidden features z(s)
[F] (detached), through an exploration matrix θ_ε [F, A] drawn from N(0, σ²) with one
learnt log σ per (feature, action) entry:

    a = μ(s) + z(s) θ_ε,   θ_ε[i, j] ~ N(0, σ_ij²)            (paper eq. 3)
    given s, a ~ N(μ(s), diag(v(s))),  v_j(s) = Σ_i z_i(s)² σ_ij² + ε   (ε = 1e-6, SB3)
    log π(a|s) = Σ_j [−(a_j − μ_j)² / (2 v_j) − ½ log(2π v_j)]
    H(π(·|s)) = Σ_j [½ + ½ log(2π v_j)]

θ_ε is held fixed between draws, so the exploration is smooth in time: the collector
draws one matrix per environment at the start of each rollout and again every
`sde_sample_freq` steps (−1: only at the start), as SB3's `collect_rollouts` does
(`reset_noise`). The matrices are not part of the state dict: a new rollout draws new
ones from the trainer's generator, which checkpoints carry."""

from __future__ import annotations

import math
from typing import Any

import torch

from policylab.policies.base import Evaluation, Sample
from policylab.policies.mlp import ActorCritic, observation_inputs

SDE_EPS = 1e-6  # SB3's StateDependentNoiseDistribution(epsilon=1e-6), added to v_j


def gsde_variance(features: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """v(s) [B, A] = (z(s)²) @ exp(log σ)² + ε, features z [B, F], log_std [F, A]."""
    return features.pow(2) @ log_std.exp().pow(2) + SDE_EPS


def gsde_log_prob(
    mean: torch.Tensor, variance: torch.Tensor, actions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log π(a|s) [B], entropy [B]) of N(mean, diag(variance)), summed over action dims;
    mean, variance, actions [B, A]."""
    log_var = variance.log()
    logp = (-0.5 * (actions - mean) ** 2 / variance - 0.5 * (math.log(2 * math.pi) + log_var)).sum(
        -1
    )
    entropy = (0.5 + 0.5 * (math.log(2 * math.pi) + log_var)).sum(-1)
    return logp, entropy


class GSDEActorCritic(ActorCritic):
    """The MLP actor-critic with gSDE exploration: `log_std` is [F, A] (F = the actor's
    last hidden width), init `log_std_init` (SB3's ActorCriticPolicy default 0.0)."""

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        *,
        hidden: tuple[int, ...] = (64, 64),
        normalize_obs: bool = False,
        log_std_init: float = 0.0,
        sde_sample_freq: int = -1,
        encoder: torch.nn.Module | None = None,
        features: int | None = None,
    ) -> None:
        if not hidden:
            raise ValueError("use_sde needs a hidden layer: its noise is a function of features")
        super().__init__(
            obs_dim,
            action_dim,
            discrete=False,
            hidden=hidden,
            normalize_obs=normalize_obs,
            encoder=encoder,
            features=features,
        )
        self.log_std = torch.nn.Parameter(torch.full((hidden[-1], action_dim), log_std_init))
        self.sde_sample_freq = sde_sample_freq
        self.exploration: torch.Tensor | None = None  # θ_ε per environment [N, F, A]

    def latent(self, x: torch.Tensor) -> torch.Tensor:
        """z(s) [B, F]: the actor's last hidden layer (before the mean head), SB3's
        latent_pi (`features` is what actor and critic read, ActorCritic's)."""
        return self.actor[:-1](self.features(x))

    def reset_noise(self, n: int, generator: torch.Generator | None = None) -> None:
        """Draw n exploration matrices θ_ε [n, F, A] ~ N(0, exp(log_std)²) (SB3's
        `sample_weights(log_std, batch_size=n)`)."""
        std = self.log_std.detach().exp()
        self.exploration = std * torch.randn((n, *std.shape), generator=generator)

    def noise_due(self, t: int) -> bool:
        """Whether step t of a rollout draws new matrices: t = 0, and every
        `sde_sample_freq` steps after when it is positive."""
        return t == 0 or (self.sde_sample_freq > 0 and t % self.sde_sample_freq == 0)

    def _distribution(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        z = self.latent(x)
        return z, self.actor[-1](z), gsde_variance(z.detach(), self.log_std)

    def evaluate(
        self,
        x: torch.Tensor,
        actions: torch.Tensor,
        *,
        mask: torch.Tensor | None = None,
        extras: dict[str, Any] | None = None,
    ) -> Evaluation:
        _, mean, variance = self._distribution(x)
        logp, entropy = gsde_log_prob(mean, variance, actions)
        return Evaluation(logp, entropy, self.value(x))

    @torch.no_grad()
    def sample(
        self,
        x: torch.Tensor,
        *,
        generator: torch.Generator | None = None,
        deterministic: bool = False,
    ) -> Sample:
        """a = μ(s) + z(s) θ_ε with row i's matrix θ_ε[i] (new matrices are drawn when
        none fit the batch); the mode μ(s) when deterministic."""
        z, mean, variance = self._distribution(x)
        if deterministic:
            actions = mean
        else:
            if self.exploration is None or len(self.exploration) != len(x):
                self.reset_noise(len(x), generator)
            actions = mean + torch.bmm(z.unsqueeze(1), self.exploration).squeeze(1)
        logp, entropy = gsde_log_prob(mean, variance, actions)
        return Sample(actions, logp, entropy=entropy, values=self.value(x))


def make_gsde_actor_critic(observation_space, action_space, **kwargs) -> GSDEActorCritic:
    """A GSDEActorCritic sized for gymnasium spaces: any observation space the MLP
    actor-critic reads (policies/spaces.py: one-hot, per key, images through the CNN),
    Box actions."""
    from gymnasium import spaces

    if not isinstance(action_space, spaces.Box):
        raise ValueError(
            f"use_sde=true needs continuous (Box) actions; this environment's action space "
            f"is {action_space}: set use_sde=false"
        )
    obs_dim, kwargs = observation_inputs(observation_space, kwargs)
    return GSDEActorCritic(obs_dim, int(math.prod(action_space.shape)), **kwargs)
