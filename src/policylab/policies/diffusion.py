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


def check_number(owner: str, name: str, value, *, low: float, low_open: bool = False) -> None:
    """A finite number above `low` (strictly when low_open): NaN, ±inf, bools and
    non-numbers are refused with the option's name, before any work."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = ok and math.isfinite(value) and (value > low if low_open else value >= low)
    if not ok:
        need = f"{'>' if low_open else '>='} {low}"
        raise ValueError(f"{owner}: {name} = {value!r}; accepted: a finite number {need}")


def _check_int(owner: str, name: str, value, low: int, high: int | None = None) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= low
    if not ok or (high is not None and value > high):
        span = f"an integer >= {low}" if high is None else f"an integer in {low}..{high}"
        raise ValueError(f"{owner}: {name} = {value!r}; accepted: {span}")


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
        _check_int("DiffusionPolicy", "dim", dim, 1)
        _check_int("DiffusionPolicy", "steps", steps, 1)
        _check_int("DiffusionPolicy", "cond_dim", cond_dim, 0)
        for width in hidden:
            _check_int("DiffusionPolicy", "hidden width", width, 1)
        check_number("DiffusionPolicy", "head_gain", head_gain, low=0.0)
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
        """Draw `batch` samples with the registered `sampler` (its settings as keywords).
        x_noise [batch, D] and cond [batch, C] are checked against the network's sizes."""
        _check_int("DiffusionPolicy.sample", "batch", batch, 1)
        if x_noise is None:
            x_noise = torch.randn((batch, self.dim), generator=generator)
        if tuple(x_noise.shape) != (batch, self.dim):
            raise ValueError(
                f"DiffusionPolicy.sample: x_noise has shape {tuple(x_noise.shape)}; "
                f"expected (batch, D) = ({batch}, {self.dim})"
            )
        got = None if cond is None else tuple(cond.shape)
        if (self.cond_dim == 0 and cond is not None) or (
            self.cond_dim > 0 and got != (batch, self.cond_dim)
        ):
            need = "None (an unconditional net)" if self.cond_dim == 0 else (batch, self.cond_dim)
            raise ValueError(f"DiffusionPolicy.sample: cond has shape {got}; expected {need}")
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
    _check_int("diffusion sampler", "keep_from", keep_from, 0, policy.steps - 1)
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
    if not (isinstance(a, (int, float)) and a > 0 and math.isfinite(a)):
        raise ValueError(
            f"sde_flow: noise level a = {a!r}; accepted: a > 0, finite (a = 0 is "
            "deterministic, with no step density: use the ode_euler sampler)"
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
    if not (isinstance(keep, int) and not isinstance(keep, bool) and 1 <= keep <= policy.steps):
        raise ValueError(f"ddpm_gaussian.fine_tuned = {fine_tuned}; must be in 1..{policy.steps}")
    check_number("ddpm_gaussian", "std_min", std_min, low=0.0)
    check_number("ddpm_gaussian", "a", a, low=0.0)
    if z_clip is not None:  # None: no clip (and no [−5, 2] clamp of the densities)
        check_number("ddpm_gaussian", "z_clip", z_clip, low=0.0, low_open=True)
    if a == 0 and std_min == 0:
        raise ValueError(
            "ddpm_gaussian: a = 0 with std_min = 0 gives steps of zero std, with no density; "
            "accepted: a > 0 or std_min > 0"
        )
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
    chain: [B, K′+1, D]; taus: [K′] in [0, 1). Returns [B, K′]."""
    if chain.dim() != 3 or taus.dim() != 1 or chain.shape[1] != taus.shape[0] + 1:
        raise ValueError(
            f"chain_logprobs: chain {tuple(chain.shape)} and taus {tuple(taus.shape)}; "
            "expected chain [B, K′+1, D] with taus [K′]"
        )
    if taus.numel() and (taus.min() < 0 or taus.max() >= 1):
        raise ValueError("chain_logprobs: taus must lie in [0, 1) (the start of each step)")
    check_number("chain_logprobs", "a", a, low=0.0)
    check_number("chain_logprobs", "std_min", std_min, low=0.0)
    if a == 0 and std_min == 0:
        raise ValueError("chain_logprobs: a = 0 with std_min = 0 has no step density")
    dt, out = 1.0 / policy.steps, []
    for k, tau in enumerate(taus):
        x = chain[:, k]
        t = tau.expand(x.shape[0], 1)
        mean, std = sde_flow_step(x, t, policy.velocity(x, t, cond), dt, a)
        out.append(gaussian_step_logprob(chain[:, k + 1], mean, std, std_min=std_min, clamp=clamp))
    return torch.stack(out, 1)
