"""VisualReach-v0 (envs/procedural/visual_reach.py): images, moves, shaped reward, the
train/test backgrounds and the knobs' errors."""

import gymnasium
import numpy as np
import pytest

import policylab.envs  # noqa: F401  (registers policylab/VisualReach-v0)
from policylab.envs.procedural.visual_reach import (
    BG_HIGH,
    BG_LOW,
    TEST_COLOURS,
    TRAIN_COLOURS,
    VisualReachEnv,
)

ID = "policylab/VisualReach-v0"


def background_colours(env, split, n=40):
    env = VisualReachEnv(split=split)
    seen = []
    for seed in range(n):
        env.reset(seed=seed)
        seen.append(env.background.reshape(-1, 3))
    return seen


def test_spaces_and_the_image():
    env = gymnasium.make(ID)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (32, 32, 3) and obs.dtype == np.uint8
    assert env.observation_space.contains(obs) and env.action_space.n == 4
    u = env.unwrapped
    # agent: a white 4×4 square centred in its 8-px cell (offset 2); goal: black
    r, c = u.agent
    assert (obs[r * 8 + 2 : r * 8 + 6, c * 8 + 2 : c * 8 + 6] == 255).all()
    r, c = u.goal
    assert (obs[r * 8 + 2 : r * 8 + 6, c * 8 + 2 : c * 8 + 6] == 0).all()
    assert (obs == 255).all(-1).sum() == 16 and (obs == 0).all(-1).sum() == 16


def test_moves_rewards_and_the_end():
    env = VisualReachEnv()
    env.reset(seed=0)
    env.agent, env.goal = np.array([0, 0]), np.array([0, 2])
    # up at the border: no move, reward 0; right twice: 0.1 (d 2 → 1), then 0.1 + 1 (reached)
    assert env.step(0)[1:4] == (0.0, False, False)
    obs, reward, term, _, info = env.step(3)
    assert reward == pytest.approx(0.1) and not term and info["reach/success"] == 0.0
    obs, reward, term, _, info = env.step(3)
    assert reward == pytest.approx(1.1) and term and info["reach/success"] == 1.0
    # moving away costs the same 0.1
    env.agent, env.goal = np.array([1, 1]), np.array([1, 2])
    assert env.step(2)[1] == pytest.approx(-0.1)


def test_twenty_steps_truncate():
    env = gymnasium.make(ID)
    env.reset(seed=1)
    env.unwrapped.agent, env.unwrapped.goal = np.array([0, 0]), np.array([3, 3])
    ends = [env.step(0)[2:4] for _ in range(20)]  # up, at the top border: never arrives
    assert ends[:19] == [(False, False)] * 19 and ends[19] == (False, True)


def test_train_and_test_backgrounds_are_disjoint():
    train = {tuple(b[0]) for b in background_colours(None, "train")}
    assert train == {tuple(c) for c in TRAIN_COLOURS}
    test = {tuple(b[0]) for b in background_colours(None, "test_colours")}
    assert test == {tuple(c) for c in TEST_COLOURS} and not train & test
    for image in background_colours(None, "test_textures", 12):
        assert len({tuple(p) for p in image}) > 1  # a texture, not a flat colour
        assert image.min() >= BG_LOW and image.max() <= BG_HIGH  # the marks stay extreme
    mixed = background_colours(None, "test", 40)
    flat = sum(len({tuple(p) for p in b}) == 1 for b in mixed)
    assert 5 < flat < 35  # half each, about


def test_the_same_seed_gives_the_same_episode():
    a, _ = gymnasium.make(ID, split="test").reset(seed=5)
    b, _ = gymnasium.make(ID, split="test").reset(seed=5)
    assert np.array_equal(a, b)


def test_bad_knobs_name_the_field():
    with pytest.raises(ValueError, match="split='val'.*train, test"):
        VisualReachEnv(split="val")
    with pytest.raises(ValueError, match="cells=5; accepted: \\[2, 4, 8\\]"):
        VisualReachEnv(cells=5)
