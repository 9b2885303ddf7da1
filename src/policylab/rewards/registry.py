"""The reward registry and the loading of users' reward functions by name."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

from policylab.registry import Registry, UnknownNameError

RewardFn = Callable[..., list]

reward_functions: Registry[RewardFn] = Registry("reward function")


def register(name: str, fn: RewardFn | None = None):
    """Register a reward function (usable as a decorator: `@rewards.register("brevity")`)."""
    if fn is None:
        return reward_functions.register(name)
    reward_functions.add(name, fn)
    return fn


def names() -> list[str]:
    """Built-in rewards and every task's verifier."""
    from policylab import tasks

    return sorted(set(reward_functions.names()) | set(tasks.names()))


def get(name: str) -> RewardFn:
    """A registered reward, a task's verifier (by task name), or a user function given as
    `package.module:function` or `path/to/file.py:function`."""
    if name in reward_functions:
        return reward_functions.get(name)
    from policylab import tasks

    if name in tasks.names():
        return tasks.get(name).reward
    if ":" in name:
        return load_user_reward(name)
    raise UnknownNameError(
        f"unknown reward function {name!r}; choices: {', '.join(names())}, or a user "
        "function as 'package.module:function' or 'path/to/file.py:function'"
    )


def load_user_reward(spec: str) -> RewardFn:
    """Import `module.path:function` or `file.py:function`; errors name what is missing."""
    target, _, attr = spec.rpartition(":")
    if not target or not attr:
        raise ValueError(
            f"reward {spec!r}: expected 'package.module:function' or 'path/to/file.py:function'"
        )
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target).expanduser()
        if not path.is_file():
            raise ValueError(f"reward {spec!r}: no file {str(path)!r}")
        module_name = f"policylab_user_reward_{abs(hash(str(path.resolve())))}"
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        module_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as err:
            raise ValueError(f"reward {spec!r}: cannot import module {target!r}: {err}") from err
    fn = getattr(module, attr, None)
    if fn is None or not callable(fn):
        public = sorted(
            n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))
        )
        raise ValueError(
            f"reward {spec!r}: {target!r} has no function {attr!r}; it has: {', '.join(public)}"
        )
    return fn
