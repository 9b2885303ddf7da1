"""Small synthetic gymnasium environments, one per observation/action space the control
trainer accepts: each step shows a random target t ∈ {0, 1} in the observation and pays
1 when the action names it; episodes end by time limit after `LENGTH` steps (so the
collector's final-observation path is taken). A random policy scores LENGTH/2 with a
Discrete action, LENGTH/2 · 2 = LENGTH on the two entries of a MultiDiscrete one (each
entry pays 1), the best policy 2 · LENGTH there and LENGTH otherwise."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

LENGTH = 8
SIDE = 6  # image height and width


def _image(target: int, channels_first: bool, channels: int) -> np.ndarray:
    """A dark SIDE×SIDE image, its left (target 0) or right (target 1) half lit at 255."""
    img = np.zeros((SIDE, SIDE), dtype=np.uint8)
    if target == 0:
        img[:, : SIDE // 2] = 255
    else:
        img[:, SIDE // 2 :] = 255
    stack = np.stack([img] * channels, axis=0 if channels_first else -1)
    return stack


IMAGE_CHW = spaces.Box(0, 255, (1, SIDE, SIDE), dtype=np.uint8)
IMAGE_HWC = spaces.Box(0, 255, (SIDE, SIDE, 3), dtype=np.uint8)
OBSERVATIONS = {
    "discrete": spaces.Discrete(2),
    "dict": spaces.Dict(
        {"noise": spaces.Box(-1, 1, (2,), np.float32), "target": spaces.Discrete(2)}
    ),  # fmt: skip
    "image_chw": IMAGE_CHW,
    "image_hwc": IMAGE_HWC,
    "dict_image": spaces.Dict({"image": IMAGE_HWC, "vec": spaces.Box(-1, 1, (2,), np.float32)}),
}
ACTIONS = {"discrete": spaces.Discrete(2), "multi": spaces.MultiDiscrete([2, 2])}


class TargetEnv(gym.Env):
    """Name the target (see the module docstring); `obs` and `act` pick the spaces."""

    def __init__(self, obs: str = "discrete", act: str = "discrete") -> None:
        self.kind, self.act = obs, act
        self.observation_space = OBSERVATIONS[obs]
        self.action_space = ACTIONS[act]
        self.t, self.target = 0, 0

    def _obs(self):
        noise = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        if self.kind == "discrete":
            return self.target
        if self.kind == "dict":
            return {"noise": noise, "target": self.target}
        if self.kind == "image_chw":
            return _image(self.target, True, 1)
        if self.kind == "image_hwc":
            return _image(self.target, False, 3)
        return {"image": _image(self.target, False, 3), "vec": noise}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.target = 0, int(self.np_random.integers(2))
        return self._obs(), {}

    def step(self, action):
        if self.act == "discrete":
            reward = float(int(action) == self.target)
        else:  # entry 0 names the target, entry 1 its opposite
            reward = float(action[0] == self.target) + float(action[1] == 1 - self.target)
        self.t += 1
        self.target = int(self.np_random.integers(2))
        return self._obs(), reward, False, self.t >= LENGTH, {}


def env_id(obs: str, act: str = "discrete") -> str:
    """The registered id of TargetEnv(obs, act) (registered on first use)."""
    name = f"policylab-test/Target-{obs}-{act}-v0"
    if name not in gym.registry:
        gym.register(name, entry_point=TargetEnv, kwargs={"obs": obs, "act": act})
    return name
