"""Rollouts from gymnasium vector environments (workflows/episodes.py): time-major rows,
termination vs truncation, bootstrapping from the final observation, seeding."""

import numpy as np
import pytest
import torch

from policylab.policies import ActorCritic, make_actor_critic
from policylab.workflows.episodes import EpisodeCollector, RewardScaler, evaluate_policy


def policy_for_cartpole(seed=0):
    torch.manual_seed(seed)
    return ActorCritic(4, 2, discrete=True)


def test_truncation_is_bootstrapped_from_the_final_observation():
    # a 5-step time limit: random CartPole episodes rarely fall within 5 steps
    collector = EpisodeCollector("CartPole-v1", 2, seed=0, max_episode_steps=5)
    policy = policy_for_cartpole()
    batch = collector.collect(policy, 12, torch.Generator().manual_seed(0))
    assert batch.rollouts.batch_size == 24 and batch.obs.shape == (24, 4)
    assert batch.truncated[4].tolist() == [1.0, 1.0] and batch.terminated[4].sum() == 0
    assert batch.truncated[9].tolist() == [1.0, 1.0]
    assert batch.episode_lengths == [5, 5, 5, 5]
    assert batch.episode_returns == [5.0, 5.0, 5.0, 5.0]
    # row t·N + n is step t of env n; at t = 4 the next observation is a reset one, the
    # final observation is not; next_values holds V(final) ≠ V(reset observation)
    reset_obs = batch.obs.reshape(12, 2, 4)[5]
    with torch.no_grad():
        assert not torch.allclose(batch.next_values[4], policy.value(reset_obs))
        # between steps of one episode next_values[t] is V(obs at t + 1)
        assert torch.allclose(batch.next_values[2], batch.values[3], atol=1e-6)
    assert batch.rollouts.dones.reshape(12, 2)[4].all()
    assert batch.rollouts.truncated.reshape(12, 2)[4].all()


def test_termination_is_not_truncation():
    collector = EpisodeCollector("CartPole-v1", 4, seed=1)
    always_left = policy_for_cartpole()
    with torch.no_grad():  # a policy that always pushes left falls within ~10 steps
        always_left.actor[-1].bias.copy_(torch.tensor([50.0, -50.0]))
    batch = collector.collect(always_left, 30, torch.Generator().manual_seed(0))
    assert batch.terminated.sum() >= 4 and batch.truncated.sum() == 0
    assert all(length < 30 for length in batch.episode_lengths)


def test_same_seed_same_rollouts():
    def run():
        collector = EpisodeCollector("CartPole-v1", 3, seed=7)
        return collector.collect(policy_for_cartpole(), 20, torch.Generator().manual_seed(3))

    a, b = run(), run()
    assert torch.equal(a.obs, b.obs) and torch.equal(a.rollouts.actions, b.rollouts.actions)
    assert torch.equal(a.rewards, b.rewards)


def test_continuous_actions_are_clipped_for_the_env_but_stored_raw():
    collector = EpisodeCollector("Pendulum-v1", 2, seed=0)
    torch.manual_seed(0)
    policy = ActorCritic(3, 1, discrete=False, log_std_init=2.0)  # σ ≈ 7.4 ≫ bound 2
    batch = collector.collect(policy, 10, torch.Generator().manual_seed(0))
    assert batch.rollouts.actions.abs().max() > 2.0
    logp, _, _ = policy.evaluate(batch.obs, batch.rollouts.actions)
    assert torch.allclose(logp, batch.rollouts.logprobs[:, 0], atol=1e-5)


def test_evaluation_uses_fixed_episodes():
    policy = policy_for_cartpole()
    a = evaluate_policy(policy, "CartPole-v1", episodes=3, seed=100)
    b = evaluate_policy(policy, "CartPole-v1", episodes=3, seed=100)
    assert a == b and a["eval/return_mean"] == a["eval/length_mean"]


def test_stored_logprobs_are_what_the_first_update_recomputes_with_a_normaliser():
    # the normaliser is frozen during collection and updated by the trainer afterwards, so
    # the ratio of the first minibatch is exactly 1 (a per-step update would break this)
    collector = EpisodeCollector("Pendulum-v1", 2, seed=0)
    policy = make_actor_critic(
        collector.envs.single_observation_space,
        collector.envs.single_action_space,
        normalize_obs=True,
    )
    policy.obs_norm.update(torch.randn(50, 3) * 4 + 1)  # not the identity
    batch = collector.collect(policy, 16, torch.Generator().manual_seed(0))
    logp, _, values = policy.evaluate(batch.obs, batch.rollouts.actions)
    torch.testing.assert_close(logp, batch.rollouts.logprobs[:, 0], rtol=0, atol=1e-6)
    torch.testing.assert_close(values, batch.rollouts.values[:, 0], rtol=0, atol=1e-6)


def test_reward_scaler_divides_by_the_std_of_the_discounted_return():
    scaler = RewardScaler(1, gamma=0.5)
    done = np.array([False])
    returns = []
    for _ in range(4):  # R = 1, 1.5, 1.75, 1.875
        returns.append((returns[-1] * 0.5 if returns else 0.0) + 1.0)
        scaled = scaler(np.array([1.0]), done)
    # the running variance of R over the 4 steps (the 1e-4 prior count is negligible)
    assert scaled[0] == pytest.approx(1.0 / np.sqrt(np.var(returns)), rel=1e-3)
    scaler(np.array([1.0]), np.array([True]))
    assert scaler.ret[0] == 0.0  # the discounted return restarts with the episode


def test_reward_scaling_leaves_episode_returns_raw():
    raw = EpisodeCollector("CartPole-v1", 2, seed=0)
    scaled = EpisodeCollector("CartPole-v1", 2, seed=0, reward_gamma=0.99)
    policy = make_actor_critic(raw.envs.single_observation_space, raw.envs.single_action_space)
    a = raw.collect(policy, 64, torch.Generator().manual_seed(0))
    b = scaled.collect(policy, 64, torch.Generator().manual_seed(0))
    assert a.episode_returns == b.episode_returns and a.episode_returns
    assert not torch.equal(a.rewards, b.rewards)
    torch.testing.assert_close(a.rollouts.actions, b.rollouts.actions)


def test_async_environments_step_like_sync_ones():
    sync = EpisodeCollector("CartPole-v1", 2, seed=1)
    async_ = EpisodeCollector("CartPole-v1", 2, seed=1, vector="async")
    policy = make_actor_critic(sync.envs.single_observation_space, sync.envs.single_action_space)
    a = sync.collect(policy, 40, torch.Generator().manual_seed(0))
    b = async_.collect(policy, 40, torch.Generator().manual_seed(0))
    async_.close()
    torch.testing.assert_close(a.obs, b.obs)
    torch.testing.assert_close(a.rewards, b.rewards)
    with pytest.raises(ValueError, match="choices: sync, async"):
        EpisodeCollector("CartPole-v1", 2, seed=1, vector="threads")
