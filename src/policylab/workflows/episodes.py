"""Rollouts from a gymnasium vector environment: one row per (time step, environment).

`EpisodeCollector` owns a SyncVectorEnv (same-step autoreset) and the episode in progress
in each of its environments; `collect(policy, n_steps)` returns a `Rollouts` whose rows
are time-major (row = t·N + n) plus the [T, N] tensors that GAE along the time axis reads.
Termination and truncation are kept apart: on truncation (a time limit) the value of the
final observation, before the automatic reset, is recorded in `next_values`, so GAE
bootstraps it instead of treating the time limit as death.

Observations are normalised here, step by step, by the policy's running statistics
updated first with that step's observations (`policy.normalize(obs, update=True)`, as
SB3's VecNormalize), and the *normalised* input is what the batch stores: the learner
recomputes log-probs on exactly what the sampler saw, so the ratio is 1 before the first
update. Rewards can be scaled by a running estimate of the std of
the discounted return (`normalize_reward`, as SB3's VecNormalize; episode statistics stay
in raw reward).

A synchronous collector's state is plain data (`state_dict`: tensors, numbers, strings,
every environment's attributes wrapper by wrapper, its RNG as the bit generator's state),
so a checkpoint, loaded with `weights_only=True`, restores every environment's exact state
into a collector rebuilt from the same id and seed, and a resumed run continues step for
step; nothing is unpickled. An environment holding other objects, or an asynchronous
collector (`vector="async"`, one subprocess per environment), is not saved: a resumed run
restarts its episodes (see trainers/control.py)."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from enum import Enum
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from policylab import envs as _registered_envs  # noqa: F401  (policylab/... gymnasium ids)
from policylab.envs.user import make_env
from policylab.policies.mlp import RunningMeanStd
from policylab.policies.spaces import encode, encode_one
from policylab.rollouts import Rollouts

log = logging.getLogger(__name__)

VECTOR = ("sync", "async")
# gymnasium's construction-time attributes: rebuilt identically from the id, never saved
_BUILT = {"metadata", "_metadata", "_saved_kwargs", "spec", "_cached_spec", "env_fns"}
_STATIC = (gym.Env, gym.vector.VectorEnv, gym.Space, Enum, type, ModuleType)
_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


def make_vector_env(
    env_id: str, num_envs: int, vector: str = "sync", **kwargs
) -> gym.vector.VectorEnv:
    """N copies of `env_id` (a gymnasium id, module:EnvId or module:EnvClass: envs/user.py)
    stepping in lock-step; a finished episode resets in the same step
    and its last observation is in info["final_obs"]. vector: "sync" (one process) or
    "async" (one subprocess per environment; pays only for slow environments)."""
    if vector not in VECTOR:
        raise ValueError(f"vector={vector!r}; choices: {', '.join(VECTOR)}")
    cls = gym.vector.SyncVectorEnv if vector == "sync" else gym.vector.AsyncVectorEnv
    return cls(
        [lambda: make_env(env_id, **kwargs) for _ in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


class RewardScaler:
    """r / √(Var[R] + ε), clipped to ±clip, where R is the running discounted return
    R_t = γ·R_{t−1} + r_t of each environment (reset at episode end) and Var[R] its running
    variance over all environments and steps (OpenAI baselines' and SB3's VecNormalize)."""

    def __init__(self, num_envs: int, gamma: float, clip: float = 10.0, eps: float = 1e-8):
        self.gamma, self.clip, self.eps = gamma, clip, eps
        self.ret = np.zeros(num_envs)
        self.stats = RunningMeanStd(())

    def __call__(self, reward: np.ndarray, done: np.ndarray) -> np.ndarray:
        self.ret = self.ret * self.gamma + reward
        self.stats.update(torch.as_tensor(self.ret))
        self.ret[done] = 0.0
        scale = float(torch.sqrt(self.stats.var + self.eps))
        return np.clip(reward / scale, -self.clip, self.clip)


@dataclass
class Batch:
    """One collection: `rollouts` (B = T·N rows) and the [T, N] views GAE needs."""

    rollouts: Rollouts
    obs: torch.Tensor  # [B, obs_dim] the policy's input (normalised observation) per action
    rewards: torch.Tensor  # [T, N]
    values: torch.Tensor  # [T, N]
    next_values: torch.Tensor  # [T, N] V of the observation after step t (final obs on reset)
    terminated: torch.Tensor  # [T, N]
    truncated: torch.Tensor  # [T, N]
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    # numbers an environment reports in its last step's info under a name with a "/"
    # (trade_sim's "trade/sharpe"), one entry per finished episode
    episode_metrics: dict[str, list[float]] = field(default_factory=dict)


class EpisodeCollector:
    """Steps `num_envs` copies of `env_id` with a policy; seeds env i with seed + i.
    `reward_gamma` set: rewards for learning are scaled by `RewardScaler` with that γ.
    `env_kwargs` go to gym.make (e.g. max_episode_steps)."""

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        seed: int,
        *,
        vector: str = "sync",
        reward_gamma: float | None = None,
        **env_kwargs,
    ) -> None:
        self.envs = make_vector_env(env_id, num_envs, vector, **env_kwargs)
        self.num_envs = num_envs
        self.scaler = None if reward_gamma is None else RewardScaler(num_envs, reward_gamma)
        obs, _ = self.envs.reset(seed=[seed + i for i in range(num_envs)])
        self.envs.action_space.seed(seed)
        # every observation space as one flat float vector per env (policies/spaces.py)
        self.space = self.envs.single_observation_space
        self.obs = encode(self.space, obs)
        self._warned = False  # that the environments' state cannot be saved
        self.episode_return = np.zeros(num_envs)
        self.episode_length = np.zeros(num_envs, dtype=np.int64)
        space = self.envs.single_action_space
        self.bounds = (
            (torch.as_tensor(space.low), torch.as_tensor(space.high))
            if isinstance(space, gym.spaces.Box)
            else None
        )

    def collect(self, policy, n_steps: int, generator: torch.Generator | None = None) -> Batch:
        """`n_steps` steps of every environment under `policy` (a control policy of the
        protocol in policies/base.py, with a critic: `sample` gives values, and `normalize`
        and `value` as in policies/mlp.py). Batch.rewards are the rewards GAE learns from
        (scaled if `reward_gamma` was given); the sample's extras become the rollouts'."""
        T, N = n_steps, self.num_envs
        obs_rows, actions, logprobs, entropies, extras = [], [], [], [], []
        rewards, values, next_values = torch.zeros(T, N), torch.zeros(T, N), torch.zeros(T, N)
        terminated, truncated = torch.zeros(T, N), torch.zeros(T, N)
        ep_returns, ep_lengths, ep_metrics = [], [], {}
        # gSDE (policies/gsde.py): new exploration matrices at the rollout's start and
        # every sde_sample_freq steps (SB3's collect_rollouts)
        resample = getattr(policy, "reset_noise", None)
        for t in range(T):
            x = policy.normalize(self.obs, update=True)
            if resample is not None and policy.noise_due(t):
                resample(N, generator)
            step = policy.sample(x, generator=generator)
            action = step.actions
            if self.bounds is not None:  # the unclipped sample keeps its exact log-prob
                action = action.clamp(*self.bounds)
            obs, reward, term, trunc, info = self.envs.step(action.numpy())
            obs_rows.append(x)
            actions.append(step.actions)
            logprobs.append(step.logprobs)
            entropies.append(step.entropy)
            extras.append(step.extras)
            values[t] = step.values
            learn_reward = reward if self.scaler is None else self.scaler(reward, term | trunc)
            rewards[t] = torch.as_tensor(learn_reward, dtype=torch.float32)
            terminated[t] = torch.as_tensor(term, dtype=torch.float32)
            truncated[t] = torch.as_tensor(trunc & ~term, dtype=torch.float32)
            next_obs = encode(self.space, obs)
            # V of the observation after step t is the next step's V (filled in below),
            # except after a time limit: there it is V of the final observation
            for i in np.nonzero(trunc & ~term)[0]:
                final = encode_one(self.space, info["final_obs"][i])
                with torch.no_grad():
                    next_values[t, i] = policy.value(policy.normalize(final))[0]
            self.episode_return += reward
            self.episode_length += 1
            for i in np.nonzero(term | trunc)[0]:
                ep_returns.append(float(self.episode_return[i]))
                ep_lengths.append(int(self.episode_length[i]))
                self.episode_return[i], self.episode_length[i] = 0.0, 0
            final_info = info.get("final_info", {})
            for key in (k for k in final_info if "/" in k and not k.startswith("_")):
                ended = final_info[f"_{key}"]
                ep_metrics.setdefault(key, []).extend(map(float, final_info[key][ended]))
            self.obs = next_obs
        with torch.no_grad():
            after = torch.cat([values[1:], policy.value(policy.normalize(self.obs)).unsqueeze(0)])
        next_values = torch.where(truncated.bool(), next_values, after)
        dones = torch.maximum(terminated, truncated)
        B = T * N
        rollouts = Rollouts(
            rewards=rewards.reshape(B),
            response_mask=torch.ones(B, 1),
            logprobs=torch.stack(logprobs).reshape(B, 1),
            # the sampling policy's entropy per step, when the kind reports it (D³S reads it)
            entropy=None if entropies[0] is None else torch.stack(entropies).reshape(B, 1),
            values=values.reshape(B, 1),
            actions=torch.stack(actions).reshape(B, *step.actions.shape[1:]),
            dones=dones.reshape(B).bool(),
            truncated=truncated.reshape(B).bool(),
            extras={
                key: torch.stack([e[key] for e in extras]).reshape(B, *step.extras[key].shape[1:])
                for key in step.extras
            },
        )
        return Batch(
            rollouts,
            torch.stack(obs_rows).reshape(B, -1),
            rewards,
            values,
            next_values,
            terminated,
            truncated,
            ep_returns,
            ep_lengths,
            ep_metrics,
        )

    def state_dict(self) -> dict[str, Any] | None:
        """What a rebuilt collector needs to continue step for step, as tensors and plain
        values: observations, running episode statistics, the reward scaler and every
        environment's attributes, wrapper by wrapper. None when that is not possible:
        asynchronous environments, or an attribute that is not plain data (said once, in a
        warning)."""
        if not isinstance(self.envs, gym.vector.SyncVectorEnv):
            return None
        try:
            envs = [[_plain_attributes(layer) for layer in _layers(e)] for e in self.envs.envs]
            vector = _plain_attributes(self.envs)
        except _NotPlain as err:
            if not self._warned:
                log.warning("environment state not saved (%s): a resume restarts episodes", err)
                self._warned = True
            return None
        scaler = None
        if self.scaler is not None:
            scaler = {"ret": torch.from_numpy(self.scaler.ret.copy()),
                      "stats": self.scaler.stats.state_dict()}  # fmt: skip
        return {
            "obs": self.obs.clone(),
            "episode_return": torch.from_numpy(self.episode_return.copy()),
            "episode_length": torch.from_numpy(self.episode_length.copy()),
            "scaler": scaler,
            "vector": vector,
            "envs": envs,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put `state_dict()`'s state into this collector, built from the same id, number
        of environments and seed. A state that does not fit (another environment, another
        gymnasium version) is a ValueError naming the attribute."""
        self.obs = state["obs"].clone()
        self.episode_return = state["episode_return"].numpy().copy()
        self.episode_length = state["episode_length"].numpy().copy()
        if (state["scaler"] is None) != (self.scaler is None):
            raise ValueError("saved collector state: reward scaling differs from this run's")
        if self.scaler is not None:
            self.scaler.ret = state["scaler"]["ret"].numpy().copy()
            self.scaler.stats.load_state_dict(state["scaler"]["stats"])
        _restore_attributes(self.envs, state["vector"])
        if len(state["envs"]) != len(self.envs.envs):
            raise ValueError(
                f"saved collector state has {len(state['envs'])} environments; this run "
                f"has {len(self.envs.envs)}"
            )
        for env, saved in zip(self.envs.envs, state["envs"], strict=True):
            layers = _layers(env)
            if len(layers) != len(saved):
                raise ValueError(
                    f"saved state of {type(env).__name__} has {len(saved)} wrapper layers; "
                    f"rebuilt it has {len(layers)}"
                )
            for layer, attributes in zip(layers, saved, strict=True):
                _restore_attributes(layer, attributes)

    def close(self) -> None:
        self.envs.close()


class _NotPlain(Exception):
    """An environment attribute that is not plain data (cannot be saved without pickle)."""


def _layers(env) -> list:
    """An environment and the ones it wraps, outermost first."""
    out = [env]
    while isinstance(getattr(out[-1], "env", None), gym.Env):
        out.append(out[-1].env)
    return out


def _plain_attributes(obj) -> dict[str, Any]:
    """{"type": class name, "attributes": {name: encoded value}} of the attributes of
    `obj` that change as it runs (construction-time ones and nested environments left)."""
    attributes = {}
    for name, value in vars(obj).items():
        if name in _BUILT or _is_static(value):
            continue
        try:
            attributes[name] = _encode(value)
        except _NotPlain as err:
            raise _NotPlain(f"{type(obj).__name__}.{name} holds a {err}") from None
    return {"type": type(obj).__name__, "attributes": attributes}


def _restore_attributes(obj, saved: dict[str, Any]) -> None:
    if saved["type"] != type(obj).__name__:
        raise ValueError(
            f"saved environment state is of a {saved['type']}; rebuilt it is a {type(obj).__name__}"
        )
    for name, value in saved["attributes"].items():
        if name not in vars(obj):
            raise ValueError(f"saved environment state sets {saved['type']}.{name}, unknown now")
        setattr(obj, name, _decode(value))


def _is_static(value) -> bool:
    if isinstance(value, _STATIC) or callable(value):
        return True
    if dataclasses.is_dataclass(value) and value.__dataclass_params__.frozen:
        return True  # an immutable parameter set (e.g. MarketMakingEnv.book)
    return isinstance(value, list | tuple) and bool(value) and all(map(_is_static, value))


def _encode(value) -> Any:
    """A value as tensors and plain Python values, tagged so `_decode` gives back the
    same types (numpy scalars and arrays keep their dtype)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, np.random.Generator):
        return {"kind": "rng", "state": value.bit_generator.state}
    if isinstance(value, np.ndarray) and value.dtype.kind in "SU":  # FrozenLake's map
        text = [v.decode("latin-1") if isinstance(v, bytes) else v for v in value.ravel().tolist()]
        return {"kind": "text", "dtype": value.dtype.str, "shape": list(value.shape), "items": text}
    if isinstance(value, np.ndarray | np.generic) and value.dtype != object:
        try:
            array = torch.from_numpy(np.array(value))
        except TypeError:  # a dtype torch lacks (strings, ...)
            raise _NotPlain(f"numpy {value.dtype}") from None
        return {"kind": "array", "value": array, "scalar": isinstance(value, np.generic)}
    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "value": value.detach().clone()}
    if isinstance(value, list | tuple):
        kind = "list" if isinstance(value, list) else "tuple"
        return {"kind": kind, "items": [_encode(v) for v in value]}
    if isinstance(value, dict):
        return {"kind": "dict", "items": [[_encode(k), _encode(v)] for k, v in value.items()]}
    raise _NotPlain(type(value).__name__)


def _decode(value) -> Any:
    if not isinstance(value, dict):
        return value
    kind = value["kind"]
    if kind == "rng":
        name = value["state"]["bit_generator"]
        if name not in _BIT_GENERATORS:
            raise ValueError(f"saved RNG state names bit generator {name!r}")
        rng = np.random.Generator(getattr(np.random, name)())
        rng.bit_generator.state = value["state"]
        return rng
    if kind == "array":
        array = value["value"].numpy().copy()
        return array[()] if value["scalar"] else array
    if kind == "tensor":
        return value["value"].clone()
    if kind == "text":
        dtype = np.dtype(value["dtype"])
        items = value["items"]
        if dtype.kind == "S":
            items = [item.encode("latin-1") for item in items]
        return np.array(items, dtype=dtype).reshape(value["shape"])
    if kind in ("list", "tuple"):
        items = [_decode(v) for v in value["items"]]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {_decode(k): _decode(v) for k, v in value["items"]}
    raise ValueError(f"saved environment state has a value of unknown kind {kind!r}")


def evaluate_policy(
    policy,
    env_id: str,
    episodes: int = 10,
    seed: int = 0,
    *,
    deterministic: bool = True,
    **env_kwargs,
) -> dict[str, float]:
    """Mean and std of the return of `episodes` episodes, one per environment, env i reset
    with seed + i (the same episodes at every evaluation); the policy's mode by default
    (`policy.mode(x)` when it has one, else `policy.sample(x, deterministic=True)`).
    `env_kwargs` go to gym.make (e.g. max_episode_steps)."""
    envs = make_vector_env(env_id, episodes, **env_kwargs)
    obs, _ = envs.reset(seed=[seed + i for i in range(episodes)])
    returns = np.zeros(episodes)
    lengths = np.zeros(episodes, dtype=np.int64)
    running = np.ones(episodes, dtype=bool)
    space = envs.single_action_space
    while running.any():
        x = policy.normalize(encode(envs.single_observation_space, obs))
        if deterministic and hasattr(policy, "mode"):  # the actions alone: one actor pass
            action = policy.mode(x)
        else:
            action = policy.sample(x, deterministic=deterministic).actions
        if isinstance(space, gym.spaces.Box):
            action = action.clamp(torch.as_tensor(space.low), torch.as_tensor(space.high))
        obs, reward, term, trunc, _ = envs.step(action.numpy())
        returns += reward * running
        lengths += running
        running &= ~(term | trunc)
    envs.close()
    return {
        "eval/return_mean": float(returns.mean()),
        "eval/return_std": float(returns.std()),
        "eval/length_mean": float(lengths.mean()),
    }
