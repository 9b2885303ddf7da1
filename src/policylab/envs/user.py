"""Users' own environments: a task string naming Python code, or an environment object.

A control task is one of:

- a registered gymnasium id (`CartPole-v1`, `policylab/TwoGoal-v0`);
- `module:EnvId` — gymnasium's own syntax: the module is imported (it registers EnvId when
  imported) and EnvId is made;
- `module:EnvClass` — an attribute of the module that is a `gymnasium.Env` subclass or a
  function returning an environment; it is registered under `policylab-user/<module>.<name>`
  (`USER_NAMESPACE`) the first time it is asked for, in every process that asks;
- from Python only, an environment object or a factory (`policylab.train(task=make_env)`):
  `register_object` registers it under `policylab-object/<name>-v0` (`OBJECT_NAMESPACE`),
  and that id is the run's task. An instance is deep-copied for every environment the run
  builds (num_envs, evaluation); a factory is called. The id exists only in the Python
  session that registered it: a subprocess (`vector=async`, the arena's jobs) or a later
  `policylab train --resume` cannot build it, and `object_env_error` says so.

A module that is not importable but is a file or package in the current folder is imported
from there (the `policylab` command, unlike `python -m`, does not put the current folder
on sys.path)."""

from __future__ import annotations

import copy
import importlib
import logging
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym

log = logging.getLogger(__name__)

USER_NAMESPACE = "policylab-user"  # module:EnvClass, registered on first use
OBJECT_NAMESPACE = "policylab-object"  # environments given in Python
FORMS = (
    "a gymnasium id (CartPole-v1), module:EnvId (the module registers EnvId when imported) "
    "or module:EnvClass (a gymnasium.Env subclass or a function returning one)"
)
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_NOT_MODULES = ("rg",)  # rg:<name> is a reasoning-gym language task (tasks/reasoning_gym.py)


def is_user_env(task: str) -> bool:
    """Whether `task` has the form module:Name of a custom environment (its syntax only:
    nothing is imported). A file that exists, and rg:<name>, are not."""
    module, sep, name = task.partition(":")
    if not sep or not name or ":" in name or module in _NOT_MODULES:
        return False
    return bool(_MODULE.match(module)) and not Path(task).exists()


def is_object_id(task: str) -> bool:
    """Whether `task` is the id of an environment object given in Python."""
    return task.startswith(OBJECT_NAMESPACE + "/")


def gym_id(task: str) -> str:
    """The registered gymnasium id that builds `task`'s environment: `task` itself for a
    gymnasium id; for module:Name, the module is imported and Name (a registered id) or
    the registered id of its class or function. Errors name the module, the name and the
    accepted forms."""
    if is_object_id(task) and task not in gym.registry:
        raise ValueError(object_env_error(task))
    if not is_user_env(task):
        return task
    module_name, _, name = task.partition(":")
    module = _import(module_name, task)
    if name in gym.registry:
        return name
    target = getattr(module, name, None)
    if target is None:
        registered = sorted(
            env_id
            for env_id, spec in gym.registry.items()
            if isinstance(spec.entry_point, str) and spec.entry_point.startswith(module_name)
        )
        known = f"ids its entry points register: {', '.join(registered)}" if registered else ""
        raise ValueError(
            f"task {task!r}: module {module_name!r} was imported, but gymnasium has no id "
            f"{name!r} and the module has no attribute {name!r}. {known} Accepted: {FORMS}"
        )
    if not callable(target):
        raise ValueError(
            f"task {task!r}: {module_name}.{name} is a {type(target).__name__}, not an "
            f"environment class or a function returning one. Accepted: {FORMS}"
        )
    env_id = f"{USER_NAMESPACE}/{module_name}.{name}-v0"
    if env_id not in gym.registry or gym.registry[env_id].entry_point is not target:
        gym.register(env_id, entry_point=target)
    return env_id


def make_env(task: str, **kwargs: Any) -> gym.Env:
    """One environment of `task` (any form `gym_id` takes); `kwargs` go to gym.make."""
    return gym.make(gym_id(task), **kwargs)


def check_buildable(task: str, vector: str = "sync") -> str:
    """`gym_id(task)`, refusing an environment given in Python with `vector="async"`
    (a subprocess cannot get the object): a run calls it before it builds anything."""
    if vector == "async" and is_object_id(task):
        raise ValueError(f"vector='async': {object_env_error(task)}; use vector='sync'")
    return gym_id(task)


def is_env_object(obj: Any) -> bool:
    """Whether `obj`, given as a task in Python, is an environment or a factory of one (a
    language model's data is a list of dicts or a Dataset, never callable)."""
    if isinstance(obj, str | Path):
        return False
    return isinstance(obj, gym.Env | gym.vector.VectorEnv) or callable(obj)


def warn_without_time_limit(task: str, max_episode_steps: int | None) -> None:
    """A warning when a custom environment (module:Name, or one given in Python) has no
    time limit and the run sets none: an episode that never ends (an untrained policy's
    mode walking into a wall) would stall evaluation for ever."""
    if max_episode_steps is not None or not (is_user_env(task) or is_object_id(task)):
        return
    env = make_env(task)  # a factory may wrap its environment in a TimeLimit itself
    layer, limited = env, False
    while isinstance(layer, gym.Wrapper) and not limited:
        limited, layer = isinstance(layer, gym.wrappers.TimeLimit), layer.env
    env.close()
    if not limited:
        log.warning(
            "task %r has no time limit: an episode that never ends stalls the run's "
            "evaluation; set max_episode_steps=N (or register the id with one)",
            task,
        )


def register_object(env: Any) -> str:
    """Register an environment object or factory given in Python; returns its id (the
    run's task). A factory is called twice here, to check that it gives a new
    `gymnasium.Env` each time (both are closed); an instance is deep-copied for each
    environment a run builds. A vector environment is refused: policylab builds its own."""
    if isinstance(env, gym.vector.VectorEnv):
        raise ValueError(
            f"task = a {type(env).__name__}: give one environment (policylab builds "
            "num_envs copies of it) or a function that returns a new environment"
        )
    if isinstance(env, gym.Env):
        name = type(env.unwrapped).__name__
        source = env

        def entry_point(**kwargs):
            if kwargs:
                raise ValueError(f"{name} was given as an object: it takes no arguments")
            return copy.deepcopy(source)

    elif callable(env):
        name = getattr(env, "__name__", type(env).__name__)
        _check_factory(env, name)
        entry_point = env
    else:
        raise ValueError(
            f"task = {type(env).__name__}: accepted for control: a gymnasium.Env, a function "
            f"or class returning one, or a string: {FORMS}"
        )
    env_id = f"{OBJECT_NAMESPACE}/{_id_safe(name)}-v0"
    if env_id in gym.registry:
        log.info("%s registered again: the new environment replaces the older one", env_id)
        del gym.registry[env_id]
    gym.register(env_id, entry_point=entry_point)
    return env_id


def object_env_error(task: str) -> str:
    """Why an environment given in Python cannot be built here, and what to do instead."""
    return (
        f"task {task!r} is an environment given in Python to policylab.train; it exists only "
        "in that Python session, so a subprocess (vector=async, the arena's jobs) or a new "
        "process (policylab train --resume) cannot build it. Resume from Python with "
        "policylab.train(task=<the same environment or factory>, resume=True, run_dir=...), "
        "or make the environment importable and name it as module:EnvClass"
    )


def _check_factory(factory: Callable, name: str) -> None:
    made = [factory(), factory()]
    for env in made:
        if not isinstance(env, gym.Env):
            raise ValueError(
                f"task = {name}: called with no arguments it returned a "
                f"{type(env).__name__}, not a gymnasium.Env"
            )
    if made[0] is made[1]:
        raise ValueError(
            f"task = {name}: it returned the same environment object twice; return a new "
            "environment on each call (or give the environment itself, which policylab copies)"
        )
    for env in made:
        env.close()


def _id_safe(name: str) -> str:
    return re.sub(r"[^\w.-]", "_", name.strip("<>")) or "env"


def _import(module_name: str, task: str):
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name != module_name.split(".")[0] or not _in_cwd(module_name):
            raise ValueError(
                f"task {task!r}: cannot import module {module_name!r} ({err}); put it on "
                f"PYTHONPATH or run from its folder. Accepted: {FORMS}"
            ) from None
    # the `policylab` command does not put the current folder on sys.path; python -m does
    log.info("importing %s from the current folder %s", module_name, Path.cwd())
    sys.path.insert(0, str(Path.cwd()))
    return importlib.import_module(module_name)


def _in_cwd(module_name: str) -> bool:
    top = Path.cwd() / module_name.split(".")[0]
    return top.with_suffix(".py").is_file() or (top / "__init__.py").is_file()
