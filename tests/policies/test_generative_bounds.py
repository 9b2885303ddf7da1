"""Inputs of the generative pieces that would silently give garbage are refused with the
option's name and the accepted range, before any work: sampler settings (steps, a, std_min,
z_clip, fine_tuned/keep_from), sample shapes, chain shapes, ring helpers, estimator τ."""

from __future__ import annotations

import math

import pytest
import torch

from policylab.lab.catalogue import build
from policylab.policies.diffusion import DiffusionPolicy, _stochastic, chain_logprobs
from policylab.policies.mdm_logprob import MDMLogprobConfig
from policylab.rewards.generated import ring_metrics, ring_sample

NAN, INF = math.nan, math.inf


@pytest.fixture
def policy():
    return DiffusionPolicy(2, hidden=(8,), steps=4)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"steps": 0}, "steps = 0; accepted: an integer >= 1"),
        ({"steps": 2.5}, "steps = 2.5; accepted: an integer >= 1"),
        ({"dim": 0}, "dim = 0; accepted: an integer >= 1"),
        ({"cond_dim": -1}, "cond_dim = -1; accepted: an integer >= 0"),
        ({"hidden": (8, 0)}, "hidden width = 0"),
        ({"head_gain": NAN}, "head_gain = nan; accepted: a finite number >= 0"),
    ],
)
def test_policy_sizes(kw, message):
    with pytest.raises(ValueError, match=message):
        DiffusionPolicy(**{"dim": 2, **kw})


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"z_clip": -1.0}, "z_clip = -1.0; accepted: a finite number > 0"),
        ({"z_clip": 0.0}, "z_clip = 0.0; accepted: a finite number > 0"),
        ({"z_clip": NAN}, "z_clip = nan"),
        ({"std_min": -0.1}, "std_min = -0.1; accepted: a finite number >= 0"),
        ({"std_min": INF}, "std_min = inf"),
        ({"a": NAN}, "a = nan; accepted: a finite number >= 0"),
        ({"a": -0.7}, "a = -0.7"),
        ({"a": 0.0, "std_min": 0.0}, "zero std, with no density"),
        ({"fine_tuned": 0}, "fine_tuned = 0; must be in 1..4"),
        ({"fine_tuned": 2.0}, "fine_tuned = 2.0; must be in 1..4"),
    ],
)
def test_ddpm_gaussian_settings(policy, settings, message):
    with pytest.raises(ValueError, match=message):
        policy.sample("ddpm_gaussian", 3, **settings)


def test_ddpm_gaussian_edge_settings_that_are_meaningful_still_run(policy):
    g = torch.Generator().manual_seed(0)
    out = policy.sample("ddpm_gaussian", 3, generator=g, a=0.0, std_min=0.1)  # pure floor
    assert torch.isfinite(out.logprobs).all()
    out = policy.sample("ddpm_gaussian", 3, generator=g, z_clip=None)  # no clip, no clamp
    assert torch.isfinite(out.logprobs).all()


@pytest.mark.parametrize("a", [NAN, INF, 0.0, -1.0, "0.7"])
def test_sde_flow_noise_level(policy, a):
    with pytest.raises(ValueError, match="sde_flow: noise level a = .*accepted: a > 0, finite"):
        policy.sample("sde_flow", 2, a=a)


@pytest.mark.parametrize("keep_from", [-1, 4, 1.5])
def test_keep_from_outside_the_chain(policy, keep_from):
    with pytest.raises(ValueError, match=f"keep_from = {keep_from}; accepted: an integer in 0..3"):
        _stochastic(policy, torch.zeros(2, 2), None, None, 0.7, 0.0, None, keep_from)


def test_sample_shapes_are_checked(policy):
    with pytest.raises(ValueError, match="batch = 0; accepted: an integer >= 1"):
        policy.sample("ode_euler", 0)
    with pytest.raises(ValueError, match=r"x_noise has shape \(3, 3\); expected .* \(3, 2\)"):
        policy.sample("ode_euler", 3, x_noise=torch.zeros(3, 3))
    with pytest.raises(ValueError, match="cond has shape \\(3, 1\\); expected None"):
        policy.sample("ode_euler", 3, cond=torch.zeros(3, 1))
    conditional = DiffusionPolicy(2, cond_dim=4, hidden=(8,), steps=4)
    with pytest.raises(ValueError, match="cond has shape None; expected \\(3, 4\\)"):
        conditional.sample("ode_euler", 3)


def test_chain_logprobs_inputs(policy):
    out = policy.sample("sde_flow", 3, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="expected chain \\[B, K′\\+1, D\\] with taus \\[K′\\]"):
        chain_logprobs(policy, out.chain[:, 1:], out.taus)
    with pytest.raises(ValueError, match="taus must lie in \\[0, 1\\)"):
        chain_logprobs(policy, out.chain, out.taus + 1.0)
    with pytest.raises(ValueError, match="a = nan"):
        chain_logprobs(policy, out.chain, out.taus, a=NAN)
    with pytest.raises(ValueError, match="std_min = -1.0"):
        chain_logprobs(policy, out.chain, out.taus, std_min=-1.0)
    with pytest.raises(ValueError, match="a = 0 with std_min = 0 has no step density"):
        chain_logprobs(policy, out.chain, out.taus, a=0.0)


def test_ring_helpers():
    with pytest.raises(ValueError, match="ring_sample: n = 0; accepted: an integer >= 1"):
        ring_sample(0)
    with pytest.raises(ValueError, match="ring_metrics needs 2-D points"):
        ring_metrics(torch.zeros(0, 2))
    with pytest.raises(ValueError, match="ring_metrics needs 2-D points"):
        ring_metrics(torch.zeros(4, 3))
    with pytest.raises(ValueError, match="NaN or inf"):
        ring_metrics(torch.tensor([[0.0, NAN]]))
    with pytest.raises(ValueError, match="lab/ring knob base_seed = -1; must be an integer >= 0"):
        build("lab/ring", 0, base_seed=-1)
    with pytest.raises(ValueError, match="lab/ring knob eval_samples = True"):
        build("lab/ring", 0, eval_samples=True)


@pytest.mark.parametrize("temperature", [NAN, INF, 0.0])
def test_estimator_temperature(temperature):
    with pytest.raises(ValueError, match="temperature = .*; accepted: finite and > 0"):
        MDMLogprobConfig(temperature=temperature)
