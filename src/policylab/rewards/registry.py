"""The reward registry (the built-ins and users' registered functions) and the loading of
users' reward functions by path. Knows nothing of tasks: `rewards.get` (lookup.py) adds the
tasks' verifiers, so that tasks (a data file's `reward=`) can use this module without a cycle."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

from policylab.registry import Registry, UnknownNameError
from policylab.rewards.builtin import BUILTIN

RewardFn = Callable[..., list]

reward_functions: Registry[RewardFn] = Registry("reward function")
for _name, _fn in BUILTIN.items():
    reward_functions.add(_name, _fn)


def register(name: str, fn: RewardFn | None = None):
    """Register a reward function (usable as a decorator: `@rewards.register("brevity")`)."""
    if fn is None:
        return reward_functions.register(name)
    reward_functions.add(name, fn)
    return fn


def function(name: str) -> RewardFn:
    """A registered reward (built-in or a user's) or a user function given as
    `package.module:function` or `path/to/file.py:function`; not a task's verifier."""
    if name in reward_functions:
        return reward_functions.get(name)
    if ":" in name:
        return load_user_reward(name)
    raise UnknownNameError(
        f"unknown reward function {name!r}; choices: {', '.join(reward_functions.names())}, "
        "or a user function as 'package.module:function' or 'path/to/file.py:function'"
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
