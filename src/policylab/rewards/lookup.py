"""Reward functions by name, tasks' verifiers included: what `rewards.get` and the
`rewards=` of a run accept. Sits above both the reward registry and the tasks."""

from __future__ import annotations

from policylab import tasks
from policylab.registry import UnknownNameError
from policylab.rewards.registry import RewardFn, function, load_user_reward, reward_functions
from policylab.rewards.reward_model import RewardModel, is_reward_model
from policylab.rewards.signature import takes


def names() -> list[str]:
    """Built-in and registered rewards, and every task's verifier."""
    return sorted(set(reward_functions.names()) | set(tasks.names()))


def get(name: str) -> RewardFn:
    """A registered reward, a task's verifier (by task name), a user function given as
    `package.module:function` or `path/to/file.py:function`, or a reward model: a folder
    holding a sequence classifier (reward_model.py)."""
    if name in reward_functions:
        return reward_functions.get(name)
    if name in tasks.names():
        return tasks.get(name).reward
    if is_reward_model(name):
        return RewardModel(name)
    if ":" in name:
        return load_user_reward(name)
    raise UnknownNameError(
        f"unknown reward function {name!r}; choices: {', '.join(names())}, a user "
        "function as 'package.module:function' or 'path/to/file.py:function', or a reward "
        "model's folder (config.json with a ...ForSequenceClassification architecture)"
    )


def missing_columns(fn: RewardFn, columns) -> list[str]:
    """The data columns `fn` requires that `columns` lacks (none for a function taking
    **kwargs, or whose signature cannot be read)."""
    return [c for c in takes(fn).required if c not in columns]


def verifies(task, example: dict) -> bool:
    """Whether `task` has a verifier of its own that can score rows like `example`: every
    embedded task does; a data file's (its `reward=`, exact_answer by default) only when
    the data has the columns it needs (exact_answer needs an answer column)."""
    from policylab.tasks.files import FileTask

    if not isinstance(task, FileTask):  # an embedded or reasoning-gym task: its own verifier
        return True
    reward_name = task.reward_name
    columns = [k for k in example if k not in ("prompt", "completion")]
    return not missing_columns(function(reward_name), columns)
