"""DiffusionPolicy and its samplers (papers/seed_generative.md G0.3, G0.9 A4–A5)."""

from __future__ import annotations

import pytest
import torch

from policylab.algebra.generative import gaussian_step_logprob
from policylab.algebra.losses import PPOClipOptions, ppo_clip_loss
from policylab.policies.diffusion import DiffusionPolicy, chain_logprobs, diffusion_samplers
from policylab.policies.flow import FlowPolicy
from policylab.rollouts import Rollouts


class Linear(DiffusionPolicy):
    """v̂(x, τ) = scale·x: the hand-computable velocities of T16.2 / T16.3."""

    def __init__(self, steps, scale):
        super().__init__(1, steps=steps)
        self.scale = scale

    def velocity(self, x, tau, cond=None):
        return self.scale * x


@pytest.mark.parametrize(("steps", "expected"), [(1, 0.0), (2, 0.25), (10, 0.9**10)])
def test_t16_3_integrator_through_ode_euler(steps, expected):
    out = Linear(steps, -1.0).sample("ode_euler", 1, x_noise=torch.ones(1, 1, dtype=torch.float64))
    assert out.sample.item() == pytest.approx(expected, abs=1e-12)
    assert out.chain.shape == (1, steps + 1, 1) and out.logprobs is None


def test_t16_2_cfm_loss():
    x, eps, tau = torch.tensor([[1.0, -1.0]]), torch.tensor([[0.5, 0.5]]), torch.tensor([[0.5]])
    zero = DiffusionPolicy(2)
    torch.nn.init.zeros_(zero.velocity_net[-1].weight)
    assert zero.cfm_loss(x, tau, eps)[0].item() == pytest.approx(1.25)  # errors [0.25, 2.25]
    ident = Linear(10, 1.0)  # v̂(x^τ) = x^τ = [0.75, −0.25]: errors [0.0625, 1.5625]
    assert ident.cfm_loss(x, tau, eps)[0].item() == pytest.approx(0.8125)


def test_a5_flow_policy_weights_give_the_same_samples_and_losses():
    torch.manual_seed(0)
    flow = FlowPolicy(3, 2, hidden=(16, 16), flow_steps=5)
    diff = DiffusionPolicy(2, cond_dim=3, hidden=(16, 16), steps=5)
    diff.velocity_net.load_state_dict(flow.velocity_net.state_dict())
    obs, x0 = torch.randn(4, 3), torch.randn(4, 2)
    assert torch.equal(
        flow.integrate(obs, x0=x0), diff.sample("ode_euler", 4, cond=obs, x_noise=x0).sample
    )
    tau, eps, a = torch.rand(4, 1, 1), torch.randn(4, 1, 2), torch.randn(4, 2)
    flow.cfm_weight = "none"
    ell_flow = flow.cfm_losses(obs, a, tau, eps)[:, 0]
    assert torch.allclose(diff.cfm_loss(a, tau[:, 0], eps[:, 0], obs)[0], ell_flow, atol=1e-7)


def test_a4_sde_flow_logprobs_recomputed_and_zero_noise_is_euler():
    policy = DiffusionPolicy(2, hidden=(8,), steps=4)
    g = torch.Generator().manual_seed(1)
    out = policy.sample("sde_flow", 6, generator=g)
    assert out.chain.shape == (6, 5, 2) and out.logprobs.shape == (6, 4)
    again = chain_logprobs(policy, out.chain, out.taus, a=0.7)
    assert torch.allclose(again, out.logprobs, atol=1e-6)
    x0 = torch.randn(3, 2)
    ode = policy.sample("ode_euler", 3, x_noise=x0).sample
    tiny = policy.sample("sde_flow", 3, x_noise=x0, a=1e-7).sample  # a → 0: the Euler ODE
    assert torch.allclose(tiny, ode, atol=1e-5)
    with pytest.raises(ValueError, match="a = 0.0; accepted: a > 0.*ode_euler"):
        policy.sample("sde_flow", 3, x_noise=x0, a=0.0)


def test_a5_chain_row_through_ppo_clip_has_unit_ratio():
    policy = DiffusionPolicy(2, hidden=(8,), steps=4)
    out = policy.sample("sde_flow", 4, generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(out.logprobs)
    rows = Rollouts(
        rewards=torch.tensor([1.0, 0.0, 0.0, 1.0]),
        response_mask=mask,
        group_ids=torch.zeros(4, dtype=torch.long),
        logprobs=out.logprobs,
        segment_ids=torch.arange(4).expand(4, 4),
        extras={"chain": out.chain, "x_noise": out.x_noise},
    )
    logp = chain_logprobs(policy, rows.extras["chain"], out.taus)
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0]).unsqueeze(1).expand(4, 4)
    loss, metrics = ppo_clip_loss(logp, rows.logprobs, adv, mask, PPOClipOptions())
    assert metrics["pg/clipfrac"] == 0.0
    ratio = torch.exp(logp - rows.logprobs)
    assert torch.allclose(ratio, torch.ones_like(ratio), atol=1e-5)
    loss.backward()  # the gradient reaches the velocity net through the step means
    assert policy.velocity_net[0].weight.grad.abs().sum() > 0


def test_ddpm_gaussian_floors_std_clips_and_keeps_last_steps():
    policy = DiffusionPolicy(2, hidden=(8,), steps=5)
    out = policy.sample(
        "ddpm_gaussian", 7, generator=torch.Generator().manual_seed(3), fine_tuned=2
    )
    assert out.chain.shape == (7, 3, 2) and out.logprobs.shape == (7, 2)
    assert (out.logprobs >= -5).all() and (out.logprobs <= 2).all()
    assert torch.allclose(out.taus, torch.tensor([0.6, 0.8]))
    again = chain_logprobs(policy, out.chain, out.taus, std_min=0.1, clamp=(-5.0, 2.0))
    assert torch.allclose(again, out.logprobs, atol=1e-6)
    with pytest.raises(ValueError, match="fine_tuned = 9; must be in 1..5"):
        policy.sample("ddpm_gaussian", 2, fine_tuned=9)


def test_reference_is_frozen_and_sampler_names_are_checked():
    policy = DiffusionPolicy(2, hidden=(8,))
    with pytest.raises(ValueError, match="no reference"):
        policy.ref_velocity(torch.zeros(1, 2), torch.zeros(1, 1))
    policy.freeze_reference()
    with torch.no_grad():
        policy.velocity_net[-1].bias += 1.0
    x, tau = torch.zeros(1, 2), torch.zeros(1, 1)
    assert torch.allclose(policy.velocity(x, tau) - policy.ref_velocity(x, tau), torch.ones(1, 2))
    assert all(not p.requires_grad for p in policy.reference.parameters())
    assert len(policy.trainable()) == 4
    assert {"ode_euler", "sde_flow", "ddpm_gaussian"} <= set(diffusion_samplers.names())
    with pytest.raises(ValueError, match="unknown diffusion sampler 'euler'.*ode_euler"):
        policy.sample("euler", 2)


def test_gaussian_density_sums_over_dims_for_the_joint():
    x, mu = torch.randn(5, 3), torch.randn(5, 3)
    joint = torch.distributions.Normal(mu, 0.4).log_prob(x).sum(-1)
    assert torch.allclose(gaussian_step_logprob(x, mu, 0.4, reduce="sum"), joint, atol=1e-5)
