"""A flow-matching action policy for Box action spaces, trained with FPO (Flow Policy
Optimization, McAllister et al., arXiv:2507.21053; papers/seed_llm_algorithms.md §16).

Time convention (§16.1): τ = 0 is pure noise, τ = 1 is the action. A velocity MLP
v̂_θ(x, τ, o) is integrated from x_0 ~ N(0, I) with K explicit Euler steps,
x_{j+1} = x_j + (1/K)·v̂_θ(x_j, j/K, o), a = x_K (§16.2 "Sampling").

The network and the Euler sampler are `DiffusionPolicy`'s (policies/diffusion.py, G0.3);
this module adds what FPO needs on top. The likelihood is intractable; FPO replaces
log π(a|o) by −L̂_θ(a, o), the conditional flow-matching (CFM) loss averaged over N_mc
(τ, ε) draws that are made once, at rollout time, and stored with the action (common
random numbers, §16.4):

    x^τ = τ·a + (1 − τ)·ε,  u = a − ε
    ℓ_θ[i,k] = scale · w(τ_k) · reduce_d (v̂_θ(x^{τ_k}_i, τ_k, o_i) − u_{i,k})²
    L̂_θ[i] = mean_k ℓ_θ[i,k]

So the policy protocol's "log-prob" (policies/base.py) is a surrogate: `sample` returns
logprobs = −L̂_old with the draws in its extras, and `evaluate` returns −L̂_θ on those stored
draws, so the shared `ppo_clip`'s exp(logp − old_logp) is exactly the FPO ratio
exp(L̂_old − L̂_θ) (averaged before the exponential, §16.2 "Ratio, averaged mode"). It is
not log π(a|o): it is comparable only between two parameter settings on the same draws.
The critic is mlp.py's."""

from __future__ import annotations

import math
from typing import Any

import torch

from policylab.policies.base import Evaluation, Sample
from policylab.policies.diffusion import (  # noqa: F401  (time_embedding: its old public path)
    DiffusionPolicy,
    diffusion_samplers,
    time_embedding,
)
from policylab.policies.mlp import ActorCritic, RunningMeanStd, _mlp
from policylab.policies.spaces import mlp_input_dim

CFM_REDUCE = ("mean", "sum")
CFM_WEIGHT = ("none", "tau_sq")
TAU_SAMPLING = ("grid", "uniform")


def fpo_cfm_loss(
    velocity: torch.Tensor,
    actions: torch.Tensor,
    eps: torch.Tensor,
    tau: torch.Tensor,
    *,
    reduce: str = "mean",
    weight: str = "none",
    scale: float = 1.0,
) -> torch.Tensor:
    """Per-draw CFM loss ℓ[i,k] = scale · w(τ) · reduce_d (v̂ − (a − ε))² (§16.2).

    velocity: [B, N_mc, D] the network's v̂ at x^τ = τ·a + (1 − τ)·ε; actions: [B, D];
    eps: [B, N_mc, D]; tau: [B, N_mc, 1]. Returns [B, N_mc]. reduce: mean over D (every
    official implementation) or sum (the paper's squared norm); weight: none (w = 1,
    gridworld) or tau_sq (w = τ², the playground's noise supervision)."""
    target = actions.unsqueeze(1) - eps
    sq = (velocity - target) ** 2
    per_draw = sq.mean(-1) if reduce == "mean" else sq.sum(-1)
    if weight == "tau_sq":
        per_draw = per_draw * tau.squeeze(-1) ** 2
    return scale * per_draw


class FlowPolicy(DiffusionPolicy):
    """FPO's policy for a D-dimensional Box action: a `DiffusionPolicy` (policies/diffusion.py,
    G0.3) whose condition c is the normalised observation o, plus a critic V(o), optional
    observation normalisation and the Monte-Carlo CFM surrogate above.

    The velocity network, `velocity` and the Euler integrator (the `ode_euler` sampler) are
    the base class's; its head is initialised at gain 0.01, so the untrained policy samples
    a ≈ x_0 ~ N(0, I), the exploration of a unit-std Gaussian policy. `sample` here is the
    policy protocol's (observations → a `Sample`); the base's sampler registry stays
    reachable as `DiffusionPolicy.sample(policy, "sde_flow", B, cond=feats)`."""

    discrete = False
    log_std = None  # no Gaussian head; the trainer's std metric skips it

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        *,
        hidden: tuple[int, ...] = (64, 64),
        normalize_obs: bool = False,
        flow_steps: int = 10,
        n_mc: int = 8,
        cfm_reduce: str = "mean",
        cfm_weight: str = "tau_sq",
        cfm_scale: float = 1.0,
        tau_sampling: str = "grid",
    ) -> None:
        for name, value, choices in (
            ("cfm_reduce", cfm_reduce, CFM_REDUCE),
            ("cfm_weight", cfm_weight, CFM_WEIGHT),
            ("tau_sampling", tau_sampling, TAU_SAMPLING),
        ):
            if value not in choices:
                raise ValueError(f"{name}={value!r}; expected one of {', '.join(choices)}")
        for name, value in (("flow_steps", flow_steps), ("n_mc", n_mc)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"FlowPolicy {name} = {value!r}; accepted: an integer >= 1")
        # the velocity net draws its initialisation first and the critic second: the order
        # FPO's seeded runs pin (the normaliser draws nothing)
        super().__init__(action_dim, cond_dim=obs_dim, hidden=hidden, steps=flow_steps)
        self.n_mc = n_mc
        self.cfm_reduce, self.cfm_weight, self.cfm_scale = cfm_reduce, cfm_weight, cfm_scale
        self.tau_sampling = tau_sampling
        self.obs_norm = RunningMeanStd((obs_dim,)) if normalize_obs else None
        self.critic = _mlp(obs_dim, hidden, 1, head_gain=1.0)

    @property
    def action_dim(self) -> int:
        return self.dim

    @property
    def flow_steps(self) -> int:
        return self.steps

    normalize = ActorCritic.normalize  # raw observations → the networks' input x

    def value(self, x: torch.Tensor) -> torch.Tensor:
        """V(s): input x = normalize(obs) [B, obs_dim] → [B]."""
        return self.critic(x).squeeze(-1)

    def integrate(
        self,
        feats: torch.Tensor,
        generator: torch.Generator | None = None,
        *,
        deterministic: bool = False,
        x0: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The `ode_euler` sampler, K Euler steps x_{j+1} = x_j + (1/K)·v̂_θ(x_j, j/K, o), from
        x_0 ~ N(0, I) (x_0 = 0, the noise's mode, when deterministic — our choice for
        evaluation; or the given x0): [B, obs_dim] features → [B, D] actions."""
        shape = (feats.shape[0], self.action_dim)
        if x0 is None and deterministic:
            x0 = torch.zeros(shape, dtype=feats.dtype)
        elif x0 is None:
            x0 = torch.randn(shape, generator=generator, dtype=feats.dtype)
        return diffusion_samplers.get("ode_euler")(self, x0, feats).sample

    def draws(
        self, batch: int, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """N_mc (τ [B, N_mc, 1], ε [B, N_mc, D]) per action. grid: τ uniform on the Euler
        grid {0, 1/K, …, (K−1)/K} [code fpo:playground discretize_t_for_training];
        uniform: τ ~ U[0, 1] [code fpo:gridworld]."""
        if self.tau_sampling == "grid":
            idx = torch.randint(self.flow_steps, (batch, self.n_mc, 1), generator=generator)
            tau = idx.float() / self.flow_steps
        else:
            tau = torch.rand((batch, self.n_mc, 1), generator=generator)
        eps = torch.randn((batch, self.n_mc, self.action_dim), generator=generator)
        return tau, eps

    def cfm_losses(
        self, feats: torch.Tensor, actions: torch.Tensor, tau: torch.Tensor, eps: torch.Tensor
    ) -> torch.Tensor:
        """ℓ_θ[i,k] on given draws: [B, N_mc]."""
        x = tau * actions.unsqueeze(1) + (1 - tau) * eps
        f = feats.unsqueeze(1).expand(-1, tau.shape[1], -1)
        return fpo_cfm_loss(
            self.velocity(x, tau, f),
            actions,
            eps,
            tau,
            reduce=self.cfm_reduce,
            weight=self.cfm_weight,
            scale=self.cfm_scale,
        )

    def evaluate(
        self,
        x: torch.Tensor,
        actions: torch.Tensor,
        *,
        mask: torch.Tensor | None = None,
        extras: dict[str, Any] | None = None,
    ) -> Evaluation:
        """(−L̂_θ [B], entropy [B] = 0 (intractable; FPO has no entropy bonus, §16.2), V [B])
        on the draws stored at rollout time, `extras["fpo_tau"]` and `extras["fpo_eps"]`."""
        if not extras or "fpo_tau" not in extras:
            raise ValueError("FlowPolicy.evaluate needs the rollout's fpo_tau and fpo_eps draws")
        ell = self.cfm_losses(x, actions, extras["fpo_tau"], extras["fpo_eps"])
        values = self.critic(x).squeeze(-1)
        return Evaluation(-ell.mean(-1), torch.zeros_like(values), values)

    @torch.no_grad()
    def sample(
        self,
        x: torch.Tensor,
        *,
        generator: torch.Generator | None = None,
        deterministic: bool = False,
    ) -> Sample:
        """Integrate to an action at inputs x = normalize(obs), draw its N_mc (τ, ε) and
        record ℓ_old on them: logprobs −L̂_old [B], values [B], no entropy, extras fpo_tau
        [B, N_mc, 1], fpo_eps [B, N_mc, D], fpo_old_cfm [B, N_mc]."""
        actions = self.integrate(x, generator, deterministic=deterministic)
        tau, eps = self.draws(x.shape[0], generator)
        ell = self.cfm_losses(x, actions, tau, eps)
        values = self.critic(x).squeeze(-1)
        extras = {"fpo_tau": tau, "fpo_eps": eps, "fpo_old_cfm": ell}
        return Sample(actions, -ell.mean(-1), values=values, extras=extras)

    act = ActorCritic.act  # `sample` under the name callers used before the protocol


def make_flow_policy(observation_space, action_space, **kwargs) -> FlowPolicy:
    """A FlowPolicy sized for gymnasium spaces: observations of policies/spaces.py
    without images, and Box actions."""
    from gymnasium import spaces

    if not isinstance(action_space, spaces.Box):
        raise ValueError(
            f"action space {action_space} is not supported by the flow policy (fpo); "
            "expected a Box (continuous actions)"
        )
    obs_dim = mlp_input_dim(observation_space, "flow (fpo)")  # flat, one-hot (policies/spaces.py)
    return FlowPolicy(obs_dim, int(math.prod(action_space.shape)), **kwargs)
