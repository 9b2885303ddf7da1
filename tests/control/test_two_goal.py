"""The two-goal task (envs/two_goal.py): reward and goal membership by hand, the
gymnasium registration, the sampled goal fractions of a policy."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import policylab.envs  # noqa: F401
from policylab.config import is_gym_task
from policylab.envs.two_goal import goal_fractions, reached, reward
from policylab.policies.base import Sample


def test_reward_by_hand():
    # both goals pay 1; the midpoint exp(−1/(2·0.09)) = exp(−5.5556) ≈ 0.003866
    r = reward(np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.0], [1.0, 0.3]]))
    assert r[:2] == pytest.approx([1.0, 1.0])
    assert r[2] == pytest.approx(np.exp(-1 / 0.18))
    assert r[3] == pytest.approx(np.exp(-0.09 / 0.18))  # 0.3 from the right goal: e^−0.5


def test_reaching_a_goal_is_within_its_radius():
    hit = reached(np.array([[0.75, 0.0], [-1.2, 0.1], [0.0, 0.0], [1.0, 0.31]]))
    assert hit.tolist() == [[False, True], [True, False], [False, False], [False, False]]


def test_registered_one_step_environment():
    assert is_gym_task("policylab/TwoGoal-v0")
    env = gym.make("policylab/TwoGoal-v0")
    obs, _ = env.reset(seed=0)
    assert obs.tolist() == [1.0]
    _, r, terminated, truncated, info = env.step(np.array([-1.0, 0.0]))
    assert (r, terminated, truncated, info["goal"]) == (1.0, True, False, 0)


class FixedActions:
    """A stand-in policy that returns the given actions whatever the observation."""

    def __init__(self, actions):
        self.actions = torch.as_tensor(actions, dtype=torch.float32)

    def normalize(self, obs):
        return obs

    def act(self, obs, generator=None):
        return Sample(self.actions[: len(obs)], torch.zeros(len(obs)), values=torch.zeros(len(obs)))


def test_goal_fractions_count_sampled_episodes():
    actions = [[1.0, 0.0]] * 2 + [[-1.0, 0.1]] + [[0.0, 0.0]]
    out = goal_fractions(FixedActions(actions), episodes=4)
    assert (out["goal_left"], out["goal_right"], out["goal_none"]) == (0.25, 0.5, 0.25)
