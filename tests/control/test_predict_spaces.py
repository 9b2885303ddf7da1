"""ControlPolicy.predict and evaluate_policy on every observation space the trainer reads:
the observation goes through the collector's encoding (one-hot, per key, images), one
observation or a batch; gSDE reads the same encodings (its CNN for images)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import policylab
from policylab.control_policy import ControlPolicy
from policylab.policies.gsde import GSDEActorCritic
from policylab.routing import run_config
from policylab.trainers.control import policy_for_spaces
from spaces_envs import TargetEnv, env_id


def built(obs: str, **fields) -> tuple[ControlPolicy, str]:
    task = env_id(obs)
    env = gym.make(task)
    cfg = run_config(None, {"task": task, **fields})
    torch.manual_seed(0)
    network, _ = policy_for_spaces(cfg, env.observation_space, env.action_space)
    return ControlPolicy(network, cfg, env.observation_space, env.action_space), task


@pytest.mark.parametrize("obs", ["discrete", "dict", "image_chw", "image_hwc", "dict_image"])
def test_predict_reads_one_observation_or_a_batch_of_any_space(obs):
    policy, task = built(obs)
    env = gym.make(task)
    first, _ = env.reset(seed=0)
    action, state = policy.predict(first, deterministic=True)
    assert state is None and np.ndim(action) == 0 and env.action_space.contains(action)
    second, *_ = env.step(action)
    batch = (
        {k: np.stack([first[k], second[k]]) for k in first}
        if isinstance(first, dict)
        else np.stack([first, second])
    )
    actions, _ = policy.predict(batch, deterministic=True)
    assert actions.shape == (2,) and actions[0] == action  # the batch's first row agrees
    mean, std = policylab.evaluate_policy(policy, task, n_eval_episodes=2, seed=0)
    assert np.isfinite(mean) and np.isfinite(std)


class BoxTarget(TargetEnv):
    """TargetEnv's observations with one continuous action (gSDE needs Box actions)."""

    def __init__(self, obs: str = "dict") -> None:
        super().__init__(obs, "discrete")
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def step(self, action):
        obs, _, terminated, truncated, info = super().step(0)
        return obs, -abs(float(action[0]) - self.target), terminated, truncated, info


def box_env_id(obs: str) -> str:
    name = f"policylab-test/BoxTarget-{obs}-v0"
    if name not in gym.registry:
        gym.register(name, entry_point=BoxTarget, kwargs={"obs": obs})
    return name


def test_gsde_reads_dict_and_image_observations_through_the_encoder():
    for obs in ("dict", "image_hwc"):
        task = box_env_id(obs)
        env = gym.make(task)
        cfg = run_config(None, {"task": task, "use_sde": True})
        network, _ = policy_for_spaces(cfg, env.observation_space, env.action_space)
        assert isinstance(network, GSDEActorCritic)
        assert (network.encoder is not None) == (obs == "image_hwc")  # the CNN for images
        policy = ControlPolicy(network, cfg, env.observation_space, env.action_space)
        action, _ = policy.predict(env.reset(seed=0)[0])
        assert env.action_space.shape == np.shape(action)
