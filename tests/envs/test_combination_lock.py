"""HNPG's combination lock and its offline data (envs/combination_lock.py; §8.3, T8.1)."""

from __future__ import annotations

import gymnasium
import pytest
import torch
from scipy.linalg import hadamard

from policylab.envs.combination_lock import (
    DEAD,
    ENV_ID,
    CombinationLock,
    collect_offline,
    reach_probability,
)
from policylab.envs.combination_lock import hadamard as sylvester


def test_t8_1_reach_probabilities():
    assert reach_probability(10) == pytest.approx(1e-10, rel=1e-12)  # uniform, A = 10
    assert reach_probability(10, epsilon=1 / 10) == pytest.approx(0.389416, abs=1e-6)
    assert reach_probability(5, epsilon=1 / 5) == pytest.approx(0.370740, abs=1e-6)
    assert reach_probability(50, epsilon=1 / 50) == pytest.approx(0.403250, abs=1e-6)


def one_hot(idx: torch.Tensor, a: int = 10, scale: float = 100.0) -> torch.Tensor:
    # scale 100 / temperature 0.1 → softmax puts mass 1 − 9e^{−1000} on the index
    return scale * torch.nn.functional.one_hot(idx, a).double()


def test_observation_is_the_hadamard_rotation_of_state_and_time():
    lock = CombinationLock(5, seed=0, noise=0.0)
    assert lock.obs_dim == 16  # 2^⌈log₂ 9⌉
    obs = lock.observe(torch.tensor([1, 2]), 3, torch.Generator())
    raw = torch.zeros(2, 16, dtype=torch.float64)
    raw[0, 1] = raw[1, 2] = 1.0
    raw[:, 3 + 3] = 1.0
    assert torch.equal(obs, raw @ torch.tensor(hadamard(16), dtype=torch.float64).T)


def test_right_actions_open_the_lock_and_only_the_last_step_pays():
    lock = CombinationLock(4, seed=3)
    g = torch.Generator().manual_seed(0)
    _, state = lock.reset(64, g)
    assert set(state.tolist()) == {0, 1}  # A or B, never C, at the start
    for h in range(4):
        out = lock.step(state, h, one_hot(lock.right_action(state, h)), g)
        state = out.state
        assert torch.all(state != DEAD)
        assert torch.all(out.reward == (1.0 if h == 3 else 0.0))


def test_a_wrong_action_kills_and_the_end_pays_the_anti_reward_half_the_time():
    lock = CombinationLock(3, seed=1)
    g = torch.Generator().manual_seed(0)
    _, state = lock.reset(4000, g)
    wrong = (lock.right_action(state, 0) + 1) % 10
    out = lock.step(state, 0, one_hot(wrong), g)
    assert torch.all(out.state == DEAD) and torch.all(out.reward == 0)  # the code returns 0 here
    state = out.state
    for h in (1, 2):  # dead stays dead whatever it does
        out = lock.step(state, h, one_hot(lock.right_action(state, h)), g)
        state = out.state
    assert torch.all(state == DEAD)
    assert set(out.reward.tolist()) == {0.0, 0.1}
    assert float((out.reward > 0).double().mean()) == pytest.approx(0.5, abs=0.03)


def test_offline_data_is_eps_greedy_deterministic_and_reaches_as_t8_1():
    lock = CombinationLock(5, seed=0)
    a = collect_offline(lock, 20_000, seed=7)
    b = collect_offline(lock, 20_000, seed=7)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert a["obs"].shape == (20_000, 6, 16) and a["action"].shape == (20_000, 5, 10)
    # T8.1 counts a greedy step as always right; the env's softmax(one-hot / 0.1) picks it
    # w.p. e^10/(e^10 + 9) = 0.999591, so the exact reach is 0.370740·0.999591^5 = 0.369983
    reach = float(a["reached"].double().mean())
    assert reach == pytest.approx(0.369983, abs=4 * 0.0035)  # 4 standard errors
    assert torch.equal(a["reward"][:, 4] == 1.0, a["reached"])
    corrupt = collect_offline(lock, 2000, seed=7, corrupted=0.5)
    assert float(corrupt["reached"][:1000].double().mean()) == 0.0  # uniform: 10^−5
    assert float(corrupt["reached"][1000:].double().mean()) > 0.3


def test_bad_settings_name_the_field():
    with pytest.raises(ValueError, match="H = 0"):
        CombinationLock(0, seed=0)
    lock = CombinationLock(3, seed=0)
    with pytest.raises(ValueError, match="corrupted = 1.5"):
        collect_offline(lock, 10, seed=0, corrupted=1.5)
    with pytest.raises(ValueError, match="offline_episodes = 0"):
        collect_offline(lock, 0, seed=0)


def test_hadamard_is_scipys():
    for n in (1, 2, 16, 64):
        assert torch.equal(sylvester(n), torch.tensor(hadamard(n), dtype=torch.float64))


def test_gymnasium_id_runs_an_episode_that_pays_only_at_the_end():
    from gymnasium.utils.env_checker import check_env

    import policylab.envs  # noqa: F401  (registers the id)

    env = gymnasium.make(ENV_ID, horizon=4, lock_seed=2)
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    lock, rewards, done = env.unwrapped.lock, [], False
    state, h = torch.tensor([env.unwrapped._state[0]]), 0
    while not done:
        obs, r, done, truncated, info = env.step(one_hot(lock.right_action(state, h))[0].numpy())
        rewards.append(r)
        state, h = torch.tensor([info["latent"]]), h + 1
    assert obs.shape == (8,)  # D = 2^⌈log₂(4 + 4)⌉
    assert rewards == [0.0, 0.0, 0.0, 1.0] and not truncated
