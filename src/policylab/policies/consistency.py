"""A few-step consistency model f_θ(x, τ, c) and its `consistency` sampler
(papers/seed_generative.md G0.3, G4.1, G4.2), the generator ROCM and RLCM fine-tune.

f_θ(x, τ, c) = x + (1 − τ)·v̂_θ(x, τ, c) — the clean-sample estimate x̂ of a velocity net
(G0.1), so f_θ(x, 1) = x by construction and a flow's DiffusionPolicy weights load into it
unchanged (the distillation starts from the teacher's one-step estimate [ours]).

n-step sampling on the grid τ_j = (j − 1)/n, j = 1..n, with stored noises ε_1..ε_n:
x_1 = ε_1; x̂_j = f_θ(x_j, τ_j); x_{j+1} = τ_{j+1}·x̂_j + (1 − τ_{j+1})·ε_{j+1}; output x̂_n.
Each re-noising is N(τ_{j+1}·x̂_j, (1 − τ_{j+1})²·I).

Distillation (G4.2 [ours: direct distillation rather than consistency training]): regress
f_θ(x^τ, τ) on the teacher's 10-step Euler ODE endpoint from x^τ, for τ on the
`grid`-step grid, where x^τ = τ·x + (1 − τ)·ε and x is a teacher sample — so only the
teacher is needed, never the task's data. The result is cached in the lab's cache folder
(lab/rocm.py passes it) keyed by a hash of the teacher's weights and the settings."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from policylab.algebra.generative import gaussian_step_logprob
from policylab.lab.cache import load_or_build
from policylab.policies.diffusion import DiffusionPolicy, SamplerOutput, diffusion_samplers

log = logging.getLogger(__name__)

EVAL_RENOISE_SEED = 20_250_306  # the re-noising draws of every evaluation: paired runs [ours]
TEACHER_STEPS = 10  # the teacher's Euler steps from τ to 1 [G4.2]


@dataclass
class ConsistencyOutput(SamplerOutput):
    """SamplerOutput plus the re-noising draws eps [B, n − 1, D] (ε_2..ε_n) and the clean
    estimates clean [B, n, D] (x̂_1..x̂_n). chain [B, n + 1, D] = (x_1 … x_n, x̂_n)."""

    eps: torch.Tensor = field(default_factory=lambda: torch.empty(0))
    clean: torch.Tensor = field(default_factory=lambda: torch.empty(0))


class ConsistencyPolicy(DiffusionPolicy):
    """f_θ(x, τ, c) = x + (1 − τ)·v̂_θ(x, τ, c); `steps` = n, the sampler's steps."""

    def clean(self, x: torch.Tensor, tau: torch.Tensor, cond: torch.Tensor | None = None):
        """f_θ(x, τ, c): x [..., D], τ [..., 1] → [..., D]."""
        return x + (1 - tau) * self.velocity(x, tau, cond)

    @torch.no_grad()
    def ref_clean(self, x: torch.Tensor, tau: torch.Tensor, cond: torch.Tensor | None = None):
        """f_ref(x, τ, c) of the frozen reference."""
        return x + (1 - tau) * self.ref_velocity(x, tau, cond)

    @classmethod
    def from_flow(cls, flow: DiffusionPolicy, steps: int) -> ConsistencyPolicy:
        """A consistency model with the flow's velocity-net layout and weights."""
        widths = [m.out_features for m in flow.velocity_net if isinstance(m, nn.Linear)]
        model = cls(flow.dim, cond_dim=flow.cond_dim, hidden=tuple(widths[:-1]), steps=steps)
        model.velocity_net.load_state_dict(flow.velocity_net.state_dict())
        return model

    def sample(self, sampler, batch, *, cond=None, generator=None, x_noise=None, **settings):
        """As DiffusionPolicy.sample; a consistency model has no ODE of its own, so the
        tasks' evaluation sampler `ode_euler` runs the n-step `consistency` sampler with
        re-noising draws from a fixed seed (every evaluation paired) [ours]."""
        if sampler == "ode_euler":
            sampler = "consistency"
            if generator is None:
                generator = torch.Generator().manual_seed(EVAL_RENOISE_SEED)
        return super().sample(
            sampler, batch, cond=cond, generator=generator, x_noise=x_noise, **settings
        )


def consistency_chain(
    policy: ConsistencyPolicy,
    x_noise: torch.Tensor,
    eps: torch.Tensor,
    cond: torch.Tensor | None = None,
) -> ConsistencyOutput:
    """The n-step chain from stored noises, differentiable in θ (the pathwise objective).
    x_noise: [B, D] = ε_1; eps: [B, n − 1, D] = ε_2..ε_n."""
    taus = policy.grid(x_noise.dtype)
    n = taus.shape[0]
    if eps.shape != (x_noise.shape[0], n - 1, x_noise.shape[1]):
        raise ValueError(
            f"consistency: eps has shape {tuple(eps.shape)}; expected "
            f"{(x_noise.shape[0], n - 1, x_noise.shape[1])} (n − 1 = {n - 1} re-noisings)"
        )
    states, cleans = [x_noise], []
    for j, tau in enumerate(taus):
        x = states[-1]
        cleans.append(policy.clean(x, tau.expand(x.shape[0], 1), cond))
        if j + 1 < n:
            nxt = taus[j + 1]
            states.append(nxt * cleans[-1] + (1 - nxt) * eps[:, j])
    chain = torch.stack([*states, cleans[-1]], 1)
    return ConsistencyOutput(
        cleans[-1], chain, x_noise, taus, None, {"n": n}, eps, torch.stack(cleans, 1)
    )


@diffusion_samplers.register("consistency")
def consistency(policy, x_noise, cond, *, generator=None, grad: bool = False):
    """n consistency steps with fresh re-noising draws ε′ (G0.3); grad=True keeps the graph
    (the pathwise objective), otherwise no gradient is recorded."""
    if not isinstance(policy, ConsistencyPolicy):
        raise TypeError(f"the consistency sampler needs a ConsistencyPolicy, got {type(policy)}")
    n = policy.steps
    eps = torch.randn(
        (x_noise.shape[0], n - 1, x_noise.shape[1]), generator=generator, dtype=x_noise.dtype
    )
    with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
        return consistency_chain(policy, x_noise, eps, cond)


# ---- distillation from a flow teacher -----------------------------------------------------
@torch.no_grad()
def teacher_endpoint(
    teacher: DiffusionPolicy, x: torch.Tensor, tau: torch.Tensor, cond=None, steps: int = 10
):
    """ODE_{τ→1}(x): `steps` equal Euler steps of the teacher from τ [B, 1] to 1."""
    dt = (1 - tau) / steps
    for k in range(steps):
        x = x + dt * teacher.velocity(x, tau + k * dt, cond)
    return x


def distill(
    teacher: DiffusionPolicy,
    conditions,
    *,
    steps: int,
    grid: int,
    distill_steps: int,
    batch: int = 256,
    lr: float = 1e-3,
    seed: int = 0,
) -> ConsistencyPolicy:
    """Regress f_θ(x^τ, τ) on teacher_endpoint(x^τ, τ), τ ∈ {0, 1/grid, …} (G4.2), Adam.
    conditions(n, generator) -> [n, C] or None (the task's condition draws)."""
    student = ConsistencyPolicy.from_flow(teacher, steps)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(student.trainable(), lr=lr)
    for _ in range(distill_steps):
        cond = conditions(batch, g)
        with torch.no_grad():
            x = teacher_endpoint(
                teacher, torch.randn(batch, teacher.dim, generator=g), torch.zeros(batch, 1), cond
            )
            tau = torch.randint(0, grid, (batch, 1), generator=g).to(x.dtype) / grid
            xt = tau * x + (1 - tau) * torch.randn(batch, teacher.dim, generator=g)
            target = teacher_endpoint(teacher, xt, tau, cond, TEACHER_STEPS)
        loss = ((student.clean(xt, tau, cond) - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return student


def weights_hash(policy: DiffusionPolicy) -> str:
    h = hashlib.sha256()
    for name, tensor in policy.velocity_net.state_dict().items():
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def base_consistency(
    teacher: DiffusionPolicy,
    conditions,
    *,
    steps: int,
    grid: int = 4,
    distill_steps: int = 2000,
    batch: int = 256,
    lr: float = 1e-3,
    seed: int = 0,
    task_key: str = "",
    cache: Path,
) -> ConsistencyPolicy:
    """The distilled consistency model, cached in `cache` (atomic write), reference frozen.
    The cache key: the teacher's weights and every setting but `steps` (the n-step sampler
    uses grid points j/n ⊂ j/grid, so one distillation serves n = 1, 2, 4 when grid = 4)."""
    if grid % steps:
        raise ValueError(f"consistency steps n = {steps} must divide the distillation grid {grid}")
    settings = f"{weights_hash(teacher)}|{task_key}|{grid}|{distill_steps}|{batch}|{lr}|{seed}"
    key = hashlib.sha256(settings.encode()).hexdigest()[:16]
    path = Path(cache) / f"consistency_{key}.pt"
    student = load_or_build(
        path,
        lambda: ConsistencyPolicy.from_flow(teacher, steps),
        lambda: distill(
            teacher,
            conditions,
            steps=steps,
            grid=grid,
            distill_steps=distill_steps,
            batch=batch,
            lr=lr,
            seed=seed,
        ),
        part=lambda model: model.velocity_net,
        what="consistency model",
    )
    student.freeze_reference()
    return student


def consistency_logprobs(
    policy: ConsistencyPolicy,
    chain: torch.Tensor,
    taus: torch.Tensor,
    cond: torch.Tensor | None = None,
) -> torch.Tensor:
    """ℓp_θ[i,j] = mean_d log N(x_{j+1}; τ_{j+1}·f_θ(x_j, τ_j), (1 − τ_{j+1})²) of the n − 1
    re-noisings of a stored chain [B, n + 1, D] (differentiable): RLCM's likelihood rows
    (G4.2). The last step, x̂_n = f_θ(x_n, τ_n), has no noise and no density. Returns
    [B, n − 1]."""
    cleans = [
        policy.clean(chain[:, j], taus[j].expand(chain.shape[0], 1), cond)
        for j in range(taus.shape[0] - 1)
    ]
    return renoising_logprobs(chain, torch.stack(cleans, 1), taus)


def renoising_logprobs(chain: torch.Tensor, clean: torch.Tensor, taus: torch.Tensor):
    """The re-noisings' step log-densities from clean estimates already made (the sampler's
    `clean` [B, ≥ n − 1, D]): no network pass. [B, n − 1]."""
    out = [
        gaussian_step_logprob(chain[:, j + 1], taus[j + 1] * clean[:, j], 1 - taus[j + 1])
        for j in range(taus.shape[0] - 1)
    ]
    return torch.stack(out, 1)
