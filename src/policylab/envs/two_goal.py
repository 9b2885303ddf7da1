"""A one-decision task with two equally good goals, to see whether a policy keeps both
modes of its action distribution (FPO's claim against Gaussian policies,
arXiv:2507.21053 §5; papers/seed_llm_algorithms.md §16).

The observation is the constant [1.0]; the action a ∈ [−2, 2]² is where the agent lands,
and the episode ends there. Two goals sit at g± = (±1, 0); the reward is

    r(a) = max over g of exp(−|a − g|² / (2·σ²)),  σ = 0.3,

so both goals pay 1 and their midpoint pays exp(−1/0.18) ≈ 0.004. An episode *reaches*
goal g when |a − g| < RADIUS (0.3). The best unimodal (Gaussian) policy sits on one goal;
a policy that can represent two modes can put half its mass on each. `goal_fractions`
samples a trained policy and reports the fraction of episodes reaching each goal."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

GOALS = np.array([[-1.0, 0.0], [1.0, 0.0]])
SIGMA = 0.3
RADIUS = 0.3


def reward(actions: np.ndarray) -> np.ndarray:
    """r(a) for actions [..., 2] → [...]."""
    sq = ((actions[..., None, :] - GOALS) ** 2).sum(-1)
    return np.exp(-sq / (2 * SIGMA**2)).max(-1)


def reached(actions: np.ndarray) -> np.ndarray:
    """[..., 2] → [..., 2] booleans: within RADIUS of goal (−1, 0), of goal (+1, 0)."""
    dist = np.sqrt(((actions[..., None, :] - GOALS) ** 2).sum(-1))
    return dist < RADIUS


class TwoGoalEnv(gym.Env):
    """One step: observe [1.0], choose a landing point, get r(a), done."""

    observation_space = gym.spaces.Box(0.0, 1.0, (1,), dtype=np.float32)
    action_space = gym.spaces.Box(-2.0, 2.0, (2,), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.ones(1, dtype=np.float32), {}

    def step(self, action):
        action = np.clip(np.asarray(action, dtype=np.float64), -2.0, 2.0)
        hit = reached(action)
        info = {"goal": int(np.argmax(hit)) if hit.any() else -1}
        return np.ones(1, dtype=np.float32), float(reward(action)), True, False, info


@torch.no_grad()
def goal_fractions(policy, episodes: int = 1000, seed: int = 0) -> dict[str, float]:
    """Sample `episodes` actions from `policy` (not its mode) and report the fraction that
    reach the left goal, the right goal and neither, and the mean reward."""
    generator = torch.Generator().manual_seed(seed)
    obs = torch.ones(episodes, 1)
    actions = policy.act(policy.normalize(obs), generator).actions.clamp(-2.0, 2.0).numpy()
    hit = reached(actions)
    return {
        "goal_left": float(hit[:, 0].mean()),
        "goal_right": float(hit[:, 1].mean()),
        "goal_none": float((~hit.any(-1)).mean()),
        "reward_mean": float(reward(actions).mean()),
    }
