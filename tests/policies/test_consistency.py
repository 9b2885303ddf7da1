"""policies/consistency.py (papers/seed_generative.md G0.3, G4.1–G4.3): f_θ(x, 1) = x, the
reparameterised chain (C3), the registered `consistency` sampler, distillation and its
cache."""

from __future__ import annotations

import pytest
import torch

from policylab.policies.consistency import (
    ConsistencyPolicy,
    base_consistency,
    consistency_chain,
    teacher_endpoint,
)
from policylab.policies.diffusion import DiffusionPolicy, diffusion_samplers


class Shift(ConsistencyPolicy):
    """f_θ(x, τ) = x + θ (1-D), the spec's C3 model."""

    def __init__(self, steps: int):
        super().__init__(1, hidden=(4,), steps=steps)
        self.theta = torch.nn.Parameter(torch.zeros(()))

    def clean(self, x, tau, cond=None):
        return x + self.theta


def test_c3_reparameterisation_gradient():
    # n = 2, τ_2 = 0.5, ε = (1, −1): x̂_2 = 0.5(1 + θ) − 0.5 + θ, so ∂x̂_2/∂θ = 1.5
    model = Shift(2)
    out = consistency_chain(model, torch.tensor([[1.0]]), torch.tensor([[[-1.0]]]))
    assert out.sample.item() == pytest.approx(0.0)  # θ = 0: 0.5 − 0.5
    (grad,) = torch.autograd.grad(out.sample.sum(), model.theta)
    assert grad.item() == pytest.approx(1.5)
    assert out.chain.shape == (1, 3, 1) and out.clean.shape == (1, 2, 1)


def test_identity_at_tau_one_and_flow_weights_load():
    torch.manual_seed(0)
    flow = DiffusionPolicy(3, hidden=(8, 8), steps=10)
    model = ConsistencyPolicy.from_flow(flow, 4)
    x = torch.randn(5, 3)
    assert torch.equal(model.clean(x, torch.ones(5, 1)), x)
    tau = torch.full((5, 1), 0.25)  # the flow's clean estimate x^τ + (1 − τ)·v̂
    assert torch.allclose(model.clean(x, tau), x + 0.75 * flow.velocity(x, tau))
    assert model.steps == 4 and torch.allclose(model.grid(), torch.tensor([0, 0.25, 0.5, 0.75]))


def test_sampler_is_registered_and_renoises_with_the_stored_draws():
    torch.manual_seed(0)
    model = ConsistencyPolicy.from_flow(DiffusionPolicy(2, hidden=(8,)), 4)
    assert "consistency" in diffusion_samplers.names()
    g = torch.Generator().manual_seed(1)
    out = model.sample("consistency", 6, generator=g)
    assert out.eps.shape == (6, 3, 2) and not out.sample.requires_grad
    again = consistency_chain(model, out.x_noise, out.eps)  # the same draws: the same chain
    assert torch.allclose(again.chain, out.chain)
    # x_{j+1} = τ_{j+1}·x̂_j + (1 − τ_{j+1})·ε_{j+1}
    assert torch.allclose(out.chain[:, 1], 0.25 * out.clean[:, 0] + 0.75 * out.eps[:, 0])
    with_grad = model.sample("consistency", 6, generator=g, grad=True)
    assert with_grad.sample.requires_grad
    # the tasks' ode_euler evaluation runs the consistency sampler on fixed draws
    noise = torch.randn(6, 2)
    a, b = (model.sample("ode_euler", 6, x_noise=noise).sample for _ in range(2))
    assert torch.equal(a, b)


def test_distillation_fits_the_teacher_and_is_cached(tmp_path):
    torch.manual_seed(0)
    teacher = DiffusionPolicy(2, hidden=(16, 16), steps=10, head_gain=1.0)
    teacher.velocity_net.requires_grad_(False)

    def none(n, g):
        return None

    kw = dict(steps=2, grid=4, distill_steps=150, batch=64, lr=3e-3, cache=tmp_path)
    student = base_consistency(teacher, none, **kw)
    x, tau = torch.randn(256, 2), torch.full((256, 1), 0.5)
    target = teacher_endpoint(teacher, x, tau)
    before = ((ConsistencyPolicy.from_flow(teacher, 2).clean(x, tau) - target) ** 2).mean()
    with torch.no_grad():
        after = ((student.clean(x, tau) - target) ** 2).mean()
    assert after < 0.5 * before
    assert len(list(tmp_path.glob("consistency_*.pt"))) == 1
    cached = base_consistency(teacher, none, **{**kw, "steps": 4})  # same grid: same file
    assert len(list(tmp_path.glob("consistency_*.pt"))) == 1 and cached.steps == 4
    for a, b in zip(student.trainable(), cached.trainable(), strict=True):
        assert torch.equal(a, b)
    assert cached.reference is not None
    with pytest.raises(ValueError, match="n = 3 must divide the distillation grid 4"):
        base_consistency(teacher, none, **{**kw, "steps": 3})


def test_cold_and_warm_cache_draw_the_same_global_random_numbers(tmp_path):
    """lab/cache.py's promise: a run draws the same global random numbers whether the
    distilled model is built (cold cache) or read (warm) — the distillation's student must
    not draw from the global generator."""
    torch.manual_seed(0)
    teacher = DiffusionPolicy(2, hidden=(8,), steps=4, head_gain=1.0)

    def none(n, g):
        return None

    kw = dict(steps=2, grid=2, distill_steps=2, batch=8, cache=tmp_path)
    after = []
    for _ in range(2):  # cold, then warm
        torch.manual_seed(123)
        base_consistency(teacher, none, **kw)
        after.append(torch.rand(3))
    assert torch.equal(after[0], after[1])
