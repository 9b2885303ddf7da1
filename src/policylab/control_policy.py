"""A trained control policy as Stable-Baselines3 users handle one: `load_policy`,
`predict`, one-file `save` / `load`, and `evaluate_policy` over an environment.

    policy = policylab.load_policy("runs/ppo-CartPole-v1-s0")     # or a saved .pt file
    action, _ = policy.predict(obs, deterministic=True)           # SB3's signature
    policy.save("cartpole.pt")                                     # weights, obs statistics,
    policy = policylab.ControlPolicy.load("cartpole.pt")           # spaces and config
    mean, std = policylab.evaluate_policy(policy, gym.make("CartPole-v1"), n_eval_episodes=10)

`ControlPolicy` wraps the trainer's network (`.network`: the policy protocol of
policies/base.py, with `normalize` and `mode`) with the run's config and the environment's
spaces, so it predicts without building the environment. The file is a `torch.save` of
plain data (tensors, numbers, strings) and loads with `weights_only=True`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from policylab.config import ConfigError, ControlConfig, load, policy_fields
from policylab.config_offpolicy import OffPolicyConfig, is_off_policy
from policylab.envs.space_data import space_from_data, space_to_data
from policylab.envs.user import make_env
from policylab.policies.deterministic import DeterministicActor
from policylab.policies.spaces import encode, encode_one, flat_dim

FORMAT = "policylab.ControlPolicy"
VERSION = 1


class ControlPolicy:
    """A control network with its config and spaces. `predict` takes raw observations (one,
    or a batch with a leading axis) and gives numpy actions, clipped to a Box action space,
    as SB3's `predict` does."""

    def __init__(
        self,
        network: torch.nn.Module,
        config: ControlConfig,
        observation_space: gym.Space,
        action_space: gym.Space,
    ) -> None:
        self.network = network.eval()
        self.config = config
        self.observation_space = observation_space
        self.action_space = action_space

    @torch.no_grad()
    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, None]:
        """(action, None) for `observation` (SB3's signature: `state` and `episode_start`
        are for recurrent policies, which policylab's are not; deterministic=False samples,
        as SB3's default). One observation of the space's shape gives one action; a batch
        [n, *shape] gives n."""
        single = _is_single(self.observation_space, observation)
        # the encoding the trainer's collector used (one-hot, per key, flattened, images)
        x = (encode_one if single else encode)(self.observation_space, observation)
        x = self.network.normalize(x)
        if not hasattr(self.network, "sample"):  # a deterministic actor (DDPG): μ(s)
            action = self.network.mode(x)
        elif deterministic and hasattr(self.network, "mode"):
            action = self.network.mode(x)
        else:
            action = self.network.sample(x, deterministic=deterministic).actions
        action = action.numpy()
        if isinstance(self.action_space, gym.spaces.Box):
            action = np.clip(action, self.action_space.low, self.action_space.high)
            action = action.reshape(-1, *self.action_space.shape)
        elif isinstance(self.action_space, gym.spaces.Discrete | gym.spaces.MultiDiscrete):
            action = action.astype(np.int64)
        return (action[0] if single else action), None

    def save(self, path: str | os.PathLike) -> Path:
        """One file (torch.save; .pt by convention) holding the weights with the observation
        statistics, the spaces and the config; written to a temporary name, then renamed."""
        path = Path(path)
        data = {
            "format": FORMAT,
            "version": VERSION,
            "config": self.config.model_dump(),
            "observation_space": space_to_data(self.observation_space),
            "action_space": space_to_data(self.action_space),
            "policy": self.network.state_dict(),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        torch.save(data, tmp)
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> ControlPolicy:
        """The policy `save` wrote to `path`."""
        data = torch.load(Path(path), weights_only=True, map_location="cpu")
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(
                f"{path}: not a policy file written by ControlPolicy.save; load_policy also "
                "takes a control run folder"
            )
        if data["version"] > VERSION:
            raise ValueError(
                f"{path}: policy file version {data['version']} is newer than {VERSION}"
            )
        return _build(
            data["config"],
            space_from_data(data["observation_space"]),
            space_from_data(data["action_space"]),
            data["policy"],
            str(path),
        )


def load_policy(path: str | os.PathLike) -> ControlPolicy:
    """The trained policy of a control run folder (its latest checkpoint), or of a file
    written by `ControlPolicy.save`."""
    from policylab.trainers.run import latest_checkpoint, load_state

    path = Path(path)
    if path.is_file():
        return ControlPolicy.load(path)
    if not path.is_dir():
        raise FileNotFoundError(
            f"{path}: no such file or folder; load_policy takes a control run folder or a "
            "file written by ControlPolicy.save"
        )
    checkpoint = latest_checkpoint(path)
    if checkpoint is None:
        raise FileNotFoundError(f"{path}: no checkpoint to load a policy from")
    state = load_state(checkpoint / "state.pt")
    spaces = state.get("spaces")
    if spaces is None:  # a checkpoint without its spaces (older, off-policy): build one env
        cfg = _control_config(state.get("config", {}), str(path))
        env = make_env(cfg.task, **cfg.env_kwargs)
        observation_space, action_space = env.observation_space, env.action_space
        env.close()
    else:
        observation_space = space_from_data(spaces["observation"])
        action_space = space_from_data(spaces["action"])
    return _build(state["config"], observation_space, action_space, state["policy"], str(path))


def evaluate_policy(
    policy: Any,
    env: Any,
    n_eval_episodes: int = 10,
    deterministic: bool = True,
    *,
    return_episode_rewards: bool = False,
    seed: int | None = None,
) -> tuple[float, float] | tuple[list[float], list[int]]:
    """Mean and std of the return of `n_eval_episodes` episodes, played one after another
    in `env` with `policy.predict(obs, deterministic=...)` (SB3's `evaluate_policy`; any
    object with that method, an SB3 model too). `env`: a gymnasium.Env (used as is), a
    function that returns one, or a task string (`CartPole-v1`, module:EnvId,
    module:EnvClass), made as the trainer's evaluation makes it for a ControlPolicy (its
    `env_kwargs`, `max_episode_steps` and `eval_env_kwargs`); one made here is closed here. `seed`:
    episode i resets with seed + i (None: the environment's own sequence).
    `return_episode_rewards`: the lists of returns and lengths instead."""
    if n_eval_episodes < 1:
        raise ValueError(f"n_eval_episodes={n_eval_episodes}; accepted: 1 or more")
    if isinstance(env, gym.vector.VectorEnv):
        raise ValueError(
            f"env = a {type(env).__name__}: evaluate_policy plays one environment; give a "
            "gymnasium.Env, a function returning one, or a task string"
        )
    own = not isinstance(env, gym.Env)
    if isinstance(env, str | os.PathLike):
        # a ControlPolicy's own evaluation environment: its time limit and evaluation-only
        # arguments (e.g. TradeSim's held-out split), as the trainer's evaluation makes it
        from policylab.trainers.control import env_arguments

        config = getattr(policy, "config", None)
        own_config = isinstance(config, ControlConfig | OffPolicyConfig)
        made = env_arguments(config, evaluation=True) if own_config else {}
        env = make_env(str(env), **made)
    elif own and callable(env):
        env = env()
    if not isinstance(env, gym.Env):
        raise ValueError(
            f"env = {type(env).__name__}: accepted: a gymnasium.Env, a function returning "
            "one, or a task string"
        )
    returns, lengths = [], []
    try:
        for i in range(n_eval_episodes):
            obs, _ = env.reset(seed=None if seed is None else seed + i)
            total, steps, done = 0.0, 0, False
            while not done:
                action, _ = policy.predict(obs, deterministic=deterministic)
                obs, reward, terminated, truncated, _ = env.step(action)
                total, steps = total + float(reward), steps + 1
                done = terminated or truncated
            returns.append(total)
            lengths.append(steps)
    finally:
        if own:
            env.close()
    if return_episode_rewards:
        return returns, lengths
    return float(np.mean(returns)), float(np.std(returns))


def _control_config(fields: dict[str, Any], where: str) -> ControlConfig | OffPolicyConfig:
    """The run's config: an off-policy one (DDPG) or an on-policy control one."""
    schema = OffPolicyConfig if is_off_policy(fields.get("algo")) else ControlConfig
    try:
        return load(schema, None, policy_fields(fields))
    except ConfigError as err:
        raise ValueError(
            f"{where}: not a control run (its config does not load as a ControlConfig: "
            f"{err}); a language model's run is evaluated with policylab.evaluate_model"
        ) from None


def _build(fields, observation_space, action_space, weights, where: str) -> ControlPolicy:
    from policylab.trainers.control import policy_for_spaces

    cfg = _control_config(fields, where)
    if isinstance(cfg, OffPolicyConfig):  # DDPG: its deterministic actor μ(s)
        low, high = action_space.low, action_space.high
        network = DeterministicActor(flat_dim(observation_space), low, high, cfg.hidden)
    else:
        network, _ = policy_for_spaces(cfg, observation_space, action_space)
    network.load_state_dict(weights)
    return ControlPolicy(network, cfg, observation_space, action_space)


def _is_single(space: gym.Space, obs: Any) -> bool:
    """Whether `obs` is one observation of `space` (else a batch [n, ...] of them): its
    shape is the space's (a Dict or Tuple judged by its first part)."""
    if isinstance(space, gym.spaces.Dict):
        key = next(iter(space.spaces))
        return _is_single(space.spaces[key], obs[key])
    if isinstance(space, gym.spaces.Tuple):
        return _is_single(space.spaces[0], obs[0])
    return np.shape(obs) == tuple(space.shape or ())
