"""A user's environment module for the custom-environment tests: importing it registers
`PolicylabTestCountdown-v0` (gymnasium's module:EnvId), and it defines an Env class and a
factory (module:EnvClass)."""

import gymnasium as gym
import numpy as np

ENV_ID = "PolicylabTestCountdown-v0"
NOT_AN_ENV = 3


class Countdown(gym.Env):
    """An episode of `length` steps, or 1 + seed % 5 when reset with a seed; reward 1 per
    step for action 1, 0 for action 0; the observation is the number of steps left."""

    observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int = 5):
        self.length = self.left = length

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.left = self.length if seed is None else 1 + seed % 5
        return np.array([self.left], np.float32), {}

    def step(self, action):
        self.left -= 1
        return np.array([self.left], np.float32), float(action), self.left <= 0, False, {}


def make_countdown():
    return Countdown(length=3)


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=Countdown)


class Endless(Countdown):
    """Never ends by itself: only a time limit stops an episode."""

    def step(self, action):
        obs, reward, _, truncated, info = super().step(action)
        return obs, reward, False, truncated, info
