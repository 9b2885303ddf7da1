"""VisualReach: move a white square to a black goal square on a 32×32 RGB image whose
background changes between training and test (papers/seed_control_theory.md §0.7, §10.2;
the testbed of CG2A, our reading; all settings [ours]).

The image is a `cells` × `cells` grid (default 4, cells of 8 px); the agent and the goal
are `MARK`-px squares centred in their cells (agent (255, 255, 255), goal (0, 0, 0)).
Actions: 0 up, 1 down, 2 left, 3 right (a move into the border stays put). The reward is
potential-shaped, r_t = SHAPING·(d_{t−1} − d_t) + 1[agent on goal], d the Manhattan
distance in cells, so the best policy is unchanged and an episode's best return is
1 + SHAPING·d_0. Reaching the goal ends the episode; 20 steps truncate it (gymnasium's
TimeLimit). The last step's info reports `reach/success` (1 or 0).

Backgrounds (`split`): `train` — one of four flat colours; `test_colours` — one of four
other flat colours; `test_textures` — procedural textures (checkerboards, stripes, smooth
noise) in random colours; `test` — either test kind, half the episodes each. Every
background channel stays within [BG_LOW, BG_HIGH] so the marks stay the image's extremes.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

SIZE = 32
STEPS = 20
SHAPING = 0.1
MARK = 4
BG_LOW, BG_HIGH = 40, 215
TRAIN_COLOURS = np.array([[200, 60, 60], [60, 160, 60], [60, 90, 200], [190, 170, 50]])
TEST_COLOURS = np.array([[150, 60, 170], [60, 170, 170], [210, 120, 40], [120, 120, 120]])
SPLITS = ("train", "test", "test_colours", "test_textures")
MOVES = np.array([[-1, 0], [1, 0], [0, -1], [0, 1]])  # (row, column) per action


def flat(colour: np.ndarray) -> np.ndarray:
    """A SIZE × SIZE × 3 image of one colour."""
    return np.broadcast_to(colour.astype(np.uint8), (SIZE, SIZE, 3)).copy()


def texture(rng: np.random.Generator) -> np.ndarray:
    """A procedural texture in two random colours: a checkerboard, stripes or smooth noise."""
    a, b = rng.integers(BG_LOW, BG_HIGH + 1, size=(2, 3))
    kind = int(rng.integers(3))
    rows, cols = np.mgrid[0:SIZE, 0:SIZE]
    if kind == 0:
        period = int(rng.integers(2, 9))
        mix = ((rows // period + cols // period) % 2).astype(float)
    elif kind == 1:
        period = int(rng.integers(2, 9))
        mix = ((cols if rng.random() < 0.5 else rows) // period % 2).astype(float)
    else:  # 5×5 random values, bilinearly upsampled to SIZE × SIZE
        coarse = rng.random((5, 5))
        x = np.linspace(0, 4, SIZE)
        i0 = np.minimum(x.astype(int), 3)
        t = x - i0
        down = coarse[i0] * (1 - t)[:, None] + coarse[i0 + 1] * t[:, None]  # [SIZE, 5]
        mix = down[:, i0] * (1 - t)[None, :] + down[:, i0 + 1] * t[None, :]
    image = a * (1 - mix[..., None]) + b * mix[..., None]
    return np.clip(np.rint(image), BG_LOW, BG_HIGH).astype(np.uint8)


class VisualReachEnv(gym.Env):
    """Reach the goal on an image; `split` picks the backgrounds (module docstring)."""

    metadata = {"render_modes": ["rgb_array"]}
    action_space = gym.spaces.Discrete(4)
    observation_space = gym.spaces.Box(0, 255, (SIZE, SIZE, 3), dtype=np.uint8)

    def __init__(self, split: str = "train", cells: int = 4, render_mode: str | None = None):
        if split not in SPLITS:
            raise ValueError(f"VisualReach split={split!r}; accepted: {', '.join(SPLITS)}")
        if cells < 2 or SIZE % cells or SIZE // cells < MARK:
            valid = [c for c in range(2, SIZE + 1) if SIZE % c == 0 and SIZE // c >= MARK]
            raise ValueError(f"VisualReach cells={cells!r}; accepted: {valid}")
        self.split, self.cells, self.render_mode = split, cells, render_mode
        self.cell = SIZE // cells
        self.background = flat(TRAIN_COLOURS[0])
        self.agent = np.zeros(2, dtype=np.int64)
        self.goal = np.ones(2, dtype=np.int64)

    def draw_background(self) -> np.ndarray:
        kind = self.split
        if kind == "test":
            kind = "test_colours" if self.np_random.random() < 0.5 else "test_textures"
        if kind == "train":
            return flat(TRAIN_COLOURS[self.np_random.integers(len(TRAIN_COLOURS))])
        if kind == "test_colours":
            return flat(TEST_COLOURS[self.np_random.integers(len(TEST_COLOURS))])
        return texture(self.np_random)

    def observation(self) -> np.ndarray:
        image = self.background.copy()
        pad = (self.cell - MARK) // 2
        for (r, c), value in ((self.goal, 0), (self.agent, 255)):
            y, x = r * self.cell + pad, c * self.cell + pad
            image[y : y + MARK, x : x + MARK] = value
        return image

    def distance(self) -> int:
        return int(np.abs(self.agent - self.goal).sum())

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.background = self.draw_background()
        n = self.cells * self.cells
        agent, goal = self.np_random.choice(n, size=2, replace=False)
        self.agent = np.array(divmod(int(agent), self.cells))
        self.goal = np.array(divmod(int(goal), self.cells))
        return self.observation(), {}

    def step(self, action):
        before = self.distance()
        self.agent = np.clip(self.agent + MOVES[int(action)], 0, self.cells - 1)
        after = self.distance()
        reached = after == 0
        reward = SHAPING * (before - after) + float(reached)
        return self.observation(), reward, reached, False, {"reach/success": float(reached)}

    def render(self):
        return self.observation()
