"""MLP actor-critics (policies/mlp.py): log-probs and entropies against torch.distributions,
orthogonal initialisation, the running observation normaliser, seeded sampling."""

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces

from policylab.policies import ActorCritic, RunningMeanStd, make_actor_critic


def test_categorical_logprob_and_entropy():
    torch.manual_seed(0)
    policy = ActorCritic(4, 3, discrete=True)
    obs, actions = torch.randn(5, 4), torch.tensor([0, 1, 2, 1, 0])
    logp, entropy, values = policy.evaluate(obs, actions)
    dist = torch.distributions.Categorical(logits=policy.actor(obs))
    assert torch.allclose(logp, dist.log_prob(actions), atol=1e-6)
    assert torch.allclose(entropy, dist.entropy(), atol=1e-6)
    assert values.shape == (5,)


def test_gaussian_logprob_and_entropy_by_hand():
    # mean 0 (zeroed head), log_std = log 2 in 1-D: log N(2; 0, 4) = −½·1 − log 2 − ½ log 2π
    policy = ActorCritic(3, 1, discrete=False, log_std_init=math.log(2.0))
    torch.nn.init.zeros_(policy.actor[-1].weight)
    logp, entropy, _ = (
        x.detach() for x in policy.evaluate(torch.randn(1, 3), torch.tensor([[2.0]]))
    )
    assert float(logp) == pytest.approx(-0.5 - math.log(2.0) - 0.5 * math.log(2 * math.pi))
    # entropy of N(μ, σ²) = ½ + ½ log 2π + log σ
    assert float(entropy) == pytest.approx(0.5 + 0.5 * math.log(2 * math.pi) + math.log(2.0))


def test_gaussian_sums_over_action_dimensions():
    torch.manual_seed(0)
    policy = ActorCritic(3, 2, discrete=False)
    with torch.no_grad():
        policy.log_std.copy_(torch.tensor([-0.5, 0.3]))
    obs, actions = torch.randn(4, 3), torch.randn(4, 2)
    logp, entropy, _ = policy.evaluate(obs, actions)
    dist = torch.distributions.Normal(policy.actor(obs), policy.log_std.exp())
    assert torch.allclose(logp, dist.log_prob(actions).sum(-1), atol=1e-5)
    assert torch.allclose(entropy, dist.entropy().sum(-1), atol=1e-5)


def test_orthogonal_init_gains():
    policy = ActorCritic(8, 2, discrete=True, hidden=(64, 64))
    w = policy.actor[0].weight  # [64, 8]: orthonormal columns scaled by √2
    assert torch.allclose(w.T @ w, 2.0 * torch.eye(8), atol=1e-5)
    head = policy.actor[-1].weight  # [2, 64]: rows orthonormal × 0.01
    assert torch.allclose(head @ head.T, 1e-4 * torch.eye(2), atol=1e-8)
    assert all(
        float(layer.bias.detach().abs().sum()) == 0
        for layer in policy.critic
        if hasattr(layer, "bias")
    )


def test_running_mean_std_matches_the_whole_data():
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(300, 2))
    rms = RunningMeanStd((2,))
    for chunk in np.split(data, 6):
        rms.update(torch.as_tensor(chunk))
    assert rms.mean.numpy() == pytest.approx(data.mean(0), rel=1e-4)
    assert rms.var.numpy() == pytest.approx(data.var(0), rel=1e-3)
    z = rms(torch.as_tensor(data, dtype=torch.float32))
    assert z.mean(0).abs().max() < 1e-3 and (z.std(0) - 1).abs().max() < 1e-2


def test_normaliser_statistics_are_in_the_state_dict():
    policy = ActorCritic(2, 2, discrete=True, normalize_obs=True)
    policy.obs_norm.update(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    state = policy.state_dict()
    assert {"obs_norm.mean", "obs_norm.var", "obs_norm.count"} <= state.keys()
    fresh = ActorCritic(2, 2, discrete=True, normalize_obs=True)
    fresh.load_state_dict(state)
    assert torch.equal(fresh.obs_norm.mean, policy.obs_norm.mean)


def test_sampling_is_seeded_and_the_mode_is_deterministic():
    policy = make_actor_critic(spaces.Box(-1, 1, (3,)), spaces.Box(-2, 2, (2,)))
    obs = torch.randn(6, 3)
    a = policy.act(obs, torch.Generator().manual_seed(5)).actions
    b = policy.act(obs, torch.Generator().manual_seed(5)).actions
    assert torch.equal(a, b)
    mode = policy.act(obs, deterministic=True)
    assert torch.equal(mode.actions, policy.actor(obs).detach())
    discrete = make_actor_critic(spaces.Box(-1, 1, (3,)), spaces.Discrete(4))
    assert discrete.act(obs, deterministic=True).actions.dtype == torch.long


def test_unsupported_spaces_are_named():
    with pytest.raises(ValueError, match="MultiBinary"):
        make_actor_critic(spaces.Box(-1, 1, (3,)), spaces.MultiBinary(3))


def test_normalize_updates_only_when_asked():
    policy = ActorCritic(2, 2, discrete=True, normalize_obs=True)
    obs = torch.tensor([[1.0, 2.0], [3.0, 6.0]])
    x = policy.normalize(obs, update=True)  # statistics first include these observations
    # mean (2, 4), population std (1, 2); the 1e-4 prior count is negligible
    torch.testing.assert_close(x, torch.tensor([[-1.0, -1.0], [1.0, 1.0]]), atol=1e-3, rtol=0)
    before = policy.obs_norm.count.clone()
    policy.normalize(obs)
    assert torch.equal(policy.obs_norm.count, before)
    plain = ActorCritic(2, 2, discrete=True)
    assert plain.normalize(obs) is obs
