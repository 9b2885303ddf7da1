"""A5 (papers/seed_generative.md G0.9): FPO's `FlowPolicy` is a thin subclass of
`DiffusionPolicy` and reproduces T16.2 and T16.3 of papers/seed_llm_algorithms.md exactly;
its weights, its Euler samples and its grid are the ones FPO always had; a row built from
one of its chains passes Rollouts validation with r ≡ 1 at θ = θ_old."""

from __future__ import annotations

import math

import pytest
import torch

from policylab.algebra.losses import PPOClipOptions, ppo_clip_loss
from policylab.policies.diffusion import DiffusionPolicy, chain_logprobs
from policylab.policies.flow import FlowPolicy
from policylab.rollouts import Rollouts

A = torch.tensor([[1.0, -1.0]], dtype=torch.float64)  # [B=1, D=2]
EPS = torch.tensor([[[0.5, 0.5]]], dtype=torch.float64)  # [B, N_mc=1, D]
TAU = torch.tensor([[[0.5]]], dtype=torch.float64)  # [B, N_mc, 1]


class Zero(FlowPolicy):
    def velocity(self, x, tau, cond=None):
        return torch.zeros_like(x)  # the "old" net of T16.2


class Ident(FlowPolicy):
    def velocity(self, x, tau, cond=None):
        return x  # the "new" net of T16.2


class Decay(FlowPolicy):
    def velocity(self, x, tau, cond=None):
        return -x  # T16.3: exact flow e^{−τ}; Euler gives (1 − 1/K)^K


def test_flow_policy_is_a_diffusion_policy_with_the_observation_as_condition():
    policy = FlowPolicy(3, 2, hidden=(16,), flow_steps=4)
    assert isinstance(policy, DiffusionPolicy)
    assert (policy.dim, policy.cond_dim, policy.steps) == (2, 3, 4)
    assert (policy.action_dim, policy.flow_steps) == (2, 4)
    assert policy.velocity_net[0].in_features == 3 + 2 + 9  # [o, x, time_embedding(τ)]


@pytest.mark.parametrize(
    ("reduce", "weight", "old", "new", "ratio"),
    [
        # x^τ = [0.75, −0.25], u = [0.5, −1.5]; v̂ ≡ 0: errors [0.25, 2.25]; v̂ = x: [0.0625, 1.5625]
        ("mean", "none", 1.25, 0.8125, 1.548830),  # exp(0.4375)
        ("sum", "none", 2.5, 1.625, 2.398875),  # exp(0.875)
        ("mean", "tau_sq", 0.3125, 0.203125, 1.115581),  # log-ratio × τ² = 0.25
        ("sum", "tau_sq", 0.625, 0.40625, 1.244520),
    ],
)
def test_t16_2_through_the_subclass(reduce, weight, old, new, ratio):
    kw = dict(flow_steps=10, n_mc=1, cfm_reduce=reduce, cfm_weight=weight)
    obs = torch.zeros(1, 3, dtype=torch.float64)
    ell_old = Zero(3, 2, **kw).cfm_losses(obs, A, TAU, EPS)
    ell_new = Ident(3, 2, **kw).cfm_losses(obs, A, TAU, EPS)
    assert ell_old.item() == old and ell_new.item() == new  # exact in binary: dyadic numbers
    assert math.exp(old - new) == pytest.approx(ratio, abs=1e-6)
    assert torch.exp(ell_old - ell_new).item() == pytest.approx(ratio, abs=1e-6)


@pytest.mark.parametrize(("steps", "expected"), [(1, 0.0), (2, 0.25), (10, 0.9**10)])
def test_t16_3_through_the_base_sampler(steps, expected):
    policy = Decay(3, 1, flow_steps=steps)
    feats, x0 = torch.zeros(1, 3, dtype=torch.float64), torch.ones(1, 1, dtype=torch.float64)
    a = policy.integrate(feats, x0=x0)
    assert a.item() == pytest.approx(expected, abs=1e-15)
    chain = DiffusionPolicy.sample(policy, "ode_euler", 1, cond=feats, x_noise=x0).chain
    assert torch.equal(chain[:, -1], a) and chain.shape == (1, steps + 1, 1)


def _old_integrate(policy, feats, x0):
    """FlowPolicy's Euler loop before the re-base, verbatim: τ = j·dt from a Python float."""
    x, dt = x0, 1.0 / policy.flow_steps
    for j in range(policy.flow_steps):
        tau = torch.full((feats.shape[0], 1), j * dt, dtype=feats.dtype)
        x = x + dt * policy.velocity(x, tau, feats)
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("steps", [3, 7, 10])
def test_euler_samples_are_bit_identical_to_the_old_loop(dtype, steps):
    torch.manual_seed(0)
    policy = FlowPolicy(3, 2, hidden=(16, 16), flow_steps=steps).to(dtype)
    feats, x0 = torch.randn(5, 3, dtype=dtype), torch.randn(5, 2, dtype=dtype)
    with torch.no_grad():
        assert torch.equal(policy.integrate(feats, x0=x0), _old_integrate(policy, feats, x0))
    # the grid is k·(1/K) rounded from double, not k/K (they differ in float64 for K = 10)
    grid = policy.grid(torch.float64)
    assert grid.tolist() == [k * (1.0 / steps) for k in range(steps)]


def test_seeded_construction_draws_the_velocity_net_first():
    torch.manual_seed(7)
    flow = FlowPolicy(3, 2, hidden=(16, 16), flow_steps=5, normalize_obs=True)
    torch.manual_seed(7)
    base = DiffusionPolicy(2, cond_dim=3, hidden=(16, 16), steps=5)
    for a, b in zip(flow.velocity_net.parameters(), base.velocity_net.parameters(), strict=True):
        assert torch.equal(a, b)
    names = [n for n, _ in flow.named_parameters()]
    assert names[0].startswith("velocity_net.") and names[-1].startswith("critic.")


def test_cfm_losses_equal_the_base_cfm_loss_on_one_draw():
    torch.manual_seed(0)
    flow = FlowPolicy(3, 2, hidden=(16, 16), flow_steps=5, n_mc=1, cfm_weight="none")
    obs, a = torch.randn(4, 3), torch.randn(4, 2)
    tau, eps = torch.rand(4, 1, 1), torch.randn(4, 1, 2)
    ell_flow = flow.cfm_losses(obs, a, tau, eps)[:, 0]
    ell_base = DiffusionPolicy.cfm_loss(flow, a, tau[:, 0], eps[:, 0], obs)[0]
    assert torch.allclose(ell_flow, ell_base, atol=1e-7)


def test_a5_a_chain_row_of_the_subclass_has_unit_ratio():
    torch.manual_seed(1)
    policy = FlowPolicy(3, 2, hidden=(16,), flow_steps=4)
    obs = torch.randn(6, 3)
    out = DiffusionPolicy.sample(
        policy, "sde_flow", 6, cond=obs, generator=torch.Generator().manual_seed(2)
    )
    rows = Rollouts(
        rewards=torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5, 0.5]),
        response_mask=torch.ones_like(out.logprobs),
        group_ids=torch.tensor([0, 0, 0, 1, 1, 1]),
        logprobs=out.logprobs,
        segment_ids=torch.arange(4).expand(6, 4),
        extras={"chain": out.chain, "x_noise": out.x_noise, "cond": obs},
    )
    logp = chain_logprobs(policy, rows.extras["chain"], out.taus, obs)
    assert torch.allclose(logp, rows.logprobs, atol=1e-5)
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0, 1.0, -1.0]).unsqueeze(1).expand(6, 4)
    loss, metrics = ppo_clip_loss(logp, rows.logprobs, adv, rows.response_mask, PPOClipOptions())
    assert metrics["pg/clipfrac"] == 0.0
    loss.backward()
    assert policy.velocity_net[0].weight.grad.abs().sum() > 0
    assert policy.critic[0].weight.grad is None  # the chain's likelihood never reads V


def test_a5_an_fpo_row_has_exactly_unit_ratio():
    torch.manual_seed(3)
    policy = FlowPolicy(3, 2, hidden=(16,), flow_steps=4, n_mc=3)
    obs = torch.randn(5, 3)
    step = policy.sample(obs, generator=torch.Generator().manual_seed(4))
    rows = Rollouts(
        rewards=torch.zeros(5),
        response_mask=torch.ones(5, 1),
        logprobs=step.logprobs.unsqueeze(1),
        actions=step.actions,
        extras=step.extras,
    )
    logp = policy.evaluate(obs, rows.actions, extras=rows.extras).logprobs.unsqueeze(1)
    assert torch.equal(torch.exp(logp - rows.logprobs), torch.ones(5, 1))


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"flow_steps": 0}, "flow_steps = 0; accepted: an integer >= 1"),
        ({"n_mc": 0}, "n_mc = 0; accepted: an integer >= 1"),
        ({"cfm_weight": "tau"}, "cfm_weight='tau'; expected one of none, tau_sq"),
    ],
)
def test_bad_settings_are_named(kw, message):
    with pytest.raises(ValueError, match=message):
        FlowPolicy(3, 2, **kw)


def test_rollouts_check_the_generated_sample_extras_by_name():
    """G0.2: chain [B, K+1, D], x_noise [B, D], tau_draws [B, N, 1], eps_draws [B, N, D]."""
    ones = dict(rewards=torch.zeros(3), response_mask=torch.ones(3, 4))
    chain, x0 = torch.zeros(3, 5, 2), torch.zeros(3, 2)
    Rollouts(**ones, extras={"chain": chain, "x_noise": x0, "reveal": torch.zeros(3, 4)})
    with pytest.raises(ValueError, match=r"extras\['chain'\] has shape \[3, 5\]; expected \[B, K"):
        Rollouts(**ones, extras={"chain": chain[:, :, 0]})
    with pytest.raises(ValueError, match="disagree on the sample dimension D"):
        Rollouts(**ones, extras={"chain": chain, "x_noise": torch.zeros(3, 3)})
    with pytest.raises(ValueError, match="disagree on the number of draws N"):
        Rollouts(
            **ones, extras={"tau_draws": torch.zeros(3, 4, 1), "eps_draws": torch.zeros(3, 5, 2)}
        )
    rows = Rollouts(**ones, extras={"chain": chain, "x_noise": x0}).select([0, 2])
    assert rows.extras["chain"].shape == (2, 5, 2)
