"""Reward functions by name, tasks' verifiers included: what `rewards.get` and the
`rewards=` of a run accept. Sits above both the reward registry and the tasks."""

from __future__ import annotations

from policylab import tasks
from policylab.registry import UnknownNameError
from policylab.rewards.registry import RewardFn, load_user_reward, reward_functions


def names() -> list[str]:
    """Built-in and registered rewards, and every task's verifier."""
    return sorted(set(reward_functions.names()) | set(tasks.names()))


def get(name: str) -> RewardFn:
    """A registered reward, a task's verifier (by task name), or a user function given as
    `package.module:function` or `path/to/file.py:function`."""
    if name in reward_functions:
        return reward_functions.get(name)
    if name in tasks.names():
        return tasks.get(name).reward
    if ":" in name:
        return load_user_reward(name)
    raise UnknownNameError(
        f"unknown reward function {name!r}; choices: {', '.join(names())}, or a user "
        "function as 'package.module:function' or 'path/to/file.py:function'"
    )
