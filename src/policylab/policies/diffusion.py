"""A continuous generator as a policy: a velocity network v̂_θ(x, τ, c), an optional frozen
reference copy, and a registry of samplers (papers/seed_generative.md G0.3).

Convention (G0.1, as policies/flow.py): τ = 0 noise, τ = 1 data, x^τ = τ·x + (1 − τ)·ε,
u = x − ε. The grid has K steps, τ_k = k/K, Δτ = 1/K. Each sampler returns a
`SamplerOutput` with what an objective needs: the sample, the chain [B, K+1, D], the ODE's
start point, and for stochastic samplers the step log-densities ℓp[i,k] (G0.2: a chain is
one row of Rollouts, its steps the token axis).

| sampler | step | log-densities |
|---|---|---|
| `ode_euler` | x_{k+1} = x_k + Δτ·v̂ | none |
| `sde_flow` (a) | x_{k+1} ~ N(x_k + Δτ·[v̂ + ½σ_k²·s_k], σ_k²Δτ) | [B, K], mean over D |
| `ddpm_gaussian` (K′, s_min, z_clip) | sde_flow mean, std ≥ s_min, z clipped | last K′, [−5, 2] |

FPO's `FlowPolicy` (policies/flow.py) is a thin subclass (G0.3, test A5): the observation
is the condition c, and it adds a critic, observation normalisation and FPO's Monte-Carlo
CFM surrogate. What FPO's seeded runs pin is kept here: the layer order of the velocity
MLP ([c, x, time_embedding(τ)] → SiLU layers → head), built before anything else draws
from the global RNG, and the grid τ_k = k·(1/K) rounded from double precision (FPO's
Euler loop; in float32 it equals k/K for every K ≤ 1,000)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from policylab.algebra.generative import (
    DPPO_LOGP_CLAMP,
    gaussian_step_logprob,
    sde_flow_step,
)
from policylab.policies.mlp import _layer
from policylab.registry import Registry


def time_embedding(tau: torch.Tensor) -> torch.Tensor:
    """[..., 1] → [..., 9]: τ and cos/sin(2^k·τ), k = 0..3 (the playground's 8-dim
    embedding [code fpo:playground embed_timestep], plus τ itself — our choice)."""
    freqs = 2.0 ** torch.arange(4, dtype=tau.dtype)
    angles = tau * freqs
    return torch.cat([tau, torch.cos(angles), torch.sin(angles)], dim=-1)


@dataclass
class SamplerOutput:
    """sample [B, D]; chain [B, K+1, D] (x_0 = noise … x_K = sample; the last K′ + 1 states
    for ddpm_gaussian); x_noise [B, D]; logprobs [B, K] or None (deterministic); taus [K]
    the τ_k of the stored steps."""

    sample: torch.Tensor
    chain: torch.Tensor
    x_noise: torch.Tensor
    taus: torch.Tensor
    logprobs: torch.Tensor | None = None
    settings: dict = field(default_factory=dict)


class DiffusionPolicy(nn.Module):
    """Velocity network v̂_θ(x, τ, c) for x ∈ R^D with an optional condition c ∈ R^C."""

    def __init__(
        self,
        dim: int,
        *,
        cond_dim: int = 0,
        hidden: tuple[int, ...] = (64, 64, 64),
        steps: int = 10,
        head_gain: float = 0.01,
    ) -> None:
        super().__init__()
        if dim < 1 or steps < 1:
            raise ValueError(f"DiffusionPolicy: dim = {dim}, steps = {steps}; both must be >= 1")
        self.dim, self.cond_dim, self.steps = dim, cond_dim, steps
        layers: list[nn.Module] = []
        n_in = cond_dim + dim + 9
        for width in hidden:
            layers += [_layer(n_in, width, math.sqrt(2)), nn.SiLU()]
            n_in = width
        layers.append(_layer(n_in, dim, head_gain))
        self.velocity_net = nn.Sequential(*layers)
        self.reference: nn.Sequential | None = None

    # ---- networks ---------------------------------------------------------------------------
    @staticmethod
    def _inputs(x: torch.Tensor, tau: torch.Tensor, cond: torch.Tensor | None) -> torch.Tensor:
        parts = [x, time_embedding(tau.to(x.dtype))]
        return torch.cat(parts if cond is None else [cond, *parts], dim=-1)

    def velocity(
        self, x: torch.Tensor, tau: torch.Tensor, cond: torch.Tensor | None = None
    ) -> torch.Tensor:
        """v̂_θ(x, τ, c): x [..., D], τ [..., 1], c [..., C] or None → [..., D]."""
        return self.velocity_net(self._inputs(x, tau, cond))

    def freeze_reference(self) -> None:
        """Keep a frozen copy of the current velocity net as the reference v̂_ref."""
        self.reference = copy.deepcopy(self.velocity_net).requires_grad_(False)

    @torch.no_grad()
    def ref_velocity(
        self, x: torch.Tensor, tau: torch.Tensor, cond: torch.Tensor | None = None
    ) -> torch.Tensor:
        if self.reference is None:
            raise ValueError("DiffusionPolicy has no reference: call freeze_reference() first")
        return self.reference(self._inputs(x, tau, cond))

    def trainable(self) -> list[nn.Parameter]:
        """The velocity net's parameters (the reference is never trained)."""
        return list(self.velocity_net.parameters())

    def cfm_loss(
        self,
        x: torch.Tensor,
        tau: torch.Tensor,
        eps: torch.Tensor,
        cond: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-sample CFM loss ℓ_θ(x; τ, ε) = mean_d (v̂_θ(x^τ, τ, c) − (x − ε))² (G0.1).

        x, eps: [B, D]; tau: [B, 1]. Returns (ℓ [B], v̂ [B, D], x^τ [B, D])."""
        xt = tau * x + (1 - tau) * eps
        v = self.velocity(xt, tau, cond)
        return ((v - (x - eps)) ** 2).mean(-1), v, xt

    # ---- sampling ---------------------------------------------------------------------------
    def grid(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """τ_k = k·Δτ, k = 0..K−1 (the start of each step), each product rounded from double
        precision as FPO's Euler loop always did (k/K itself can differ in the last bit)."""
        return (torch.arange(self.steps, dtype=torch.float64) * (1.0 / self.steps)).to(dtype)

    def sample(
        self,
        sampler: str,
        batch: int,
        *,
        cond: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        x_noise: torch.Tensor | None = None,
        **settings,
    ) -> SamplerOutput:
        """Draw `batch` samples with the registered `sampler` (its settings as keywords)."""
        if x_noise is None:
            x_noise = torch.randn((batch, self.dim), generator=generator)
        return diffusion_samplers.get(sampler)(self, x_noise, cond, generator=generator, **settings)


SamplerFn = Callable[..., SamplerOutput]
diffusion_samplers: Registry[SamplerFn] = Registry("diffusion sampler")


@diffusion_samplers.register("ode_euler")
@torch.no_grad()
def ode_euler(policy: DiffusionPolicy, x_noise, cond, *, generator=None) -> SamplerOutput:
    """K Euler steps x_{k+1} = x_k + Δτ·v̂_θ(x_k, τ_k, c) from x_0 = x_noise (G0.3)."""
    dt, taus = 1.0 / policy.steps, policy.grid(x_noise.dtype)
    chain = [x_noise]
    for tau in taus:
        x = chain[-1]
        chain.append(x + dt * policy.velocity(x, tau.expand(x.shape[0], 1), cond))
    stacked = torch.stack(chain, 1)
    return SamplerOutput(stacked[:, -1], stacked, x_noise, taus)


def _stochastic(policy, x_noise, cond, generator, a, std_min, z_clip, keep_from):
    dt, taus = 1.0 / policy.steps, policy.grid(x_noise.dtype)
    chain, logps = [x_noise], []
    for k, tau in enumerate(taus):
        x = chain[-1]
        t = tau.expand(x.shape[0], 1)
        mean, std = sde_flow_step(x, t, policy.velocity(x, t, cond), dt, a)
        std = std.clamp_min(std_min)
        z = torch.randn(x.shape, generator=generator, dtype=x.dtype)
        if z_clip is not None:
            z = z.clamp(-z_clip, z_clip)
        x_next = mean + std * z
        chain.append(x_next)
        if k >= keep_from:
            clamp = DPPO_LOGP_CLAMP if z_clip is not None else None
            logps.append(gaussian_step_logprob(x_next, mean, std, clamp=clamp))
    stacked = torch.stack(chain, 1)[:, keep_from:]
    return stacked, torch.stack(logps, 1), taus[keep_from:]


@diffusion_samplers.register("sde_flow")
@torch.no_grad()
def sde_flow(policy, x_noise, cond, *, generator=None, a: float = 0.7) -> SamplerOutput:
    """Flow-GRPO's marginal-preserving SDE in the τ = 0-is-noise convention (G0.3), noise
    level a = 0.7 [code DGPO:config/base.py sample.noise_level, Flow-GRPO's default]; stores
    ℓp[i,k] = mean_d log N(x_{k+1}; μ_θ, σ_k²Δτ) for every step. a = 0 is the Euler ODE:
    its steps have no density, so it is refused here (use `ode_euler`)."""
    if not a > 0:
        raise ValueError(
            f"sde_flow: noise level a = {a!r}; accepted: a > 0 (a = 0 is deterministic, "
            "with no step density: use the ode_euler sampler)"
        )
    chain, logps, taus = _stochastic(policy, x_noise, cond, generator, a, 0.0, None, 0)
    return SamplerOutput(chain[:, -1], chain, x_noise, taus, logps, {"a": a})


@diffusion_samplers.register("ddpm_gaussian")
@torch.no_grad()
def ddpm_gaussian(
    policy,
    x_noise,
    cond,
    *,
    generator=None,
    fine_tuned: int | None = None,
    std_min: float = 0.1,
    z_clip: float = 3.0,
    a: float = 0.7,
) -> SamplerOutput:
    """DPPO-style Gaussian chain (G0.3): the `sde_flow` mean with std max(s_k, s_min) and z
    clipped to ±z_clip [code dppo: min_sampling_denoising_std 0.1, randn_clip_value 3];
    stores the last K′ = fine_tuned steps (all by default) and their log-densities, mean
    over D, clamped to [−5, 2] [code dppo]. The flow-form mean is ours."""
    keep = policy.steps if fine_tuned is None else fine_tuned
    if not 1 <= keep <= policy.steps:
        raise ValueError(f"ddpm_gaussian.fine_tuned = {fine_tuned}; must be in 1..{policy.steps}")
    chain, logps, taus = _stochastic(
        policy, x_noise, cond, generator, a, std_min, z_clip, policy.steps - keep
    )
    settings = {"a": a, "std_min": std_min, "z_clip": z_clip}
    return SamplerOutput(chain[:, -1], chain, x_noise, taus, logps, settings)


def chain_logprobs(
    policy: DiffusionPolicy,
    chain: torch.Tensor,
    taus: torch.Tensor,
    cond: torch.Tensor | None = None,
    *,
    a: float = 0.7,
    std_min: float = 0.0,
    clamp: tuple[float, float] | None = None,
) -> torch.Tensor:
    """ℓp_θ[i,k] of a stored chain under the current weights (differentiable): the
    `likelihood` objective's logprobs for `sde_flow` / `ddpm_gaussian` rows (G0.2).
    chain: [B, K′+1, D]; taus: [K′]. Returns [B, K′]."""
    dt, out = 1.0 / policy.steps, []
    for k, tau in enumerate(taus):
        x = chain[:, k]
        t = tau.expand(x.shape[0], 1)
        mean, std = sde_flow_step(x, t, policy.velocity(x, t, cond), dt, a)
        out.append(gaussian_step_logprob(chain[:, k + 1], mean, std, std_min=std_min, clamp=clamp))
    return torch.stack(out, 1)
