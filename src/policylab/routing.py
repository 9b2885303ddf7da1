"""Which trainer a run goes to, and its config: one rule, used by `policylab.train` (api.py)
and `policylab train` (cli.py).

The rule: a task named `tabular/<name>` is a tabular run — a `TabularConfig`, trained by
trainers/tabular.py against its exact oracle; `lab/<name>` is a lab run — a `LabConfig`,
the same trainer over the lab registries (policylab/lab); a task that is a gymnasium environment id
(`config.is_gym_task`: CartPole-v1, Pendulum-v1, the policylab/... ids) is a control run —
a `ControlConfig` with the environment's tuned defaults (`config.CONTROL_DEFAULTS`),
trained by trainers/control.py; any other task (an embedded task, a data file) is a
language-model run — a `TrainConfig`, trained by trainers/llm.py. The task is read from
the explicit fields first, then the config (object, dict or YAML file), then a resumed
run's saved config; with none given it is TrainConfig's default (a language-model task)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from policylab.config import (
    ControlConfig,
    LabConfig,
    TabularConfig,
    TrainConfig,
    is_gym_task,
    load,
    load_control,
)
from policylab.config_offpolicy import OffPolicyConfig, is_off_policy
from policylab.lab import PREFIX as LAB_PREFIX  # a lab task: lab/<name>
from policylab.objects import RunObjects, check_given

RunConfig = TrainConfig | ControlConfig | TabularConfig | OffPolicyConfig
TABULAR_PREFIX = "tabular/"  # a tabular task: tabular/<name> (tabular/tasks.py)


def run_config(
    config: Any = None,
    fields: dict[str, Any] | None = None,
    *,
    saved: dict[str, Any] | None = None,
) -> RunConfig:
    """The checked config of one run. `config`: a TrainConfig or ControlConfig, a dict of
    fields, a YAML path, or None; `fields` override it; `saved` is a resumed run's
    config.yaml (its fields, the lowest layer)."""
    fields, saved = dict(fields or {}), dict(saved or {})
    path = None
    if (
        isinstance(config, TrainConfig | ControlConfig | TabularConfig)
        and not saved
        and _same_kind(config, fields)
    ):
        # a config object is taken as it is (its own defaults, not a task's tuned ones)
        return load(type(config), None, {**config.model_dump(), **fields})
    if isinstance(config, TrainConfig | ControlConfig | TabularConfig):
        given = config.model_dump(exclude_unset=True)
    elif isinstance(config, dict):
        given = dict(config)
    elif config is None:
        given = {}
    else:
        path = Path(config)
        given = _task_of_file(path)
    task = fields.get("task") or given.get("task") or saved.get("task") or ""
    algo = fields.get("algo") or given.get("algo") or saved.get("algo")
    if saved:  # before the task picks a trainer: a clear error, not another schema's (the
        # other kept fields are compared once checked: lora={r: 4} is its full form then)
        _keeps(saved, {"task": task, **({"algo": algo} if algo else {})})
    if is_gym_task(str(task)) and is_off_policy(algo):  # DDPG: trainers/offpolicy.py
        layers = {**saved, **_unset(OffPolicyConfig, path, given), **fields}
        cfg = load(OffPolicyConfig, None, layers)
    else:
        cfg = _route(task, path, given, fields, saved)
    if saved:
        _keeps(saved, cfg.model_dump())
    return cfg


def _route(task, path: Path | None, given: dict, fields: dict, saved: dict) -> RunConfig:
    """The config of `task`'s trainer, from its layers (saved < given < fields)."""
    for prefix, schema in ((TABULAR_PREFIX, TabularConfig), (LAB_PREFIX, LabConfig)):
        if str(task).startswith(prefix):
            return load(schema, None, {**saved, **_unset(schema, path, given), **fields})
    if is_gym_task(str(task)):
        if "model" in fields:
            raise ValueError(
                f"model={fields['model']!r} is for language models; task {task!r} is a "
                "gymnasium id, whose control policies are MLPs (hidden=...)"
            )
        if saved:  # a resumed run's config is complete: the tuned defaults are in it
            return load(
                ControlConfig, None, {**saved, **_unset(ControlConfig, path, given), **fields}
            )
        if path is not None:
            return load_control(path, fields)
        return load_control(None, {**given, **fields})
    from policylab.envs.ids import unknown_gym_id

    message = unknown_gym_id(str(task))
    if message is not None:  # not the language-model tasks' list: a gymnasium error
        raise ValueError(message)
    return load(TrainConfig, None, {**saved, **_unset(TrainConfig, path, given), **fields})


def saved_config(run_dir: str | Path) -> dict[str, Any]:
    """A run folder's config.yaml as the lowest layer of a resumed run's config (its
    fields, without the provenance and resolved sections, run_dir its folder); {} when
    the folder has none (a run not started yet)."""
    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        return {}
    saved = yaml.safe_load(path.read_text()) or {}
    saved = {k: v for k, v in saved.items() if k not in ("provenance", "resolved")}
    saved["run_dir"] = str(run_dir)
    return saved


def _keeps(saved: dict[str, Any], config: dict[str, Any]) -> None:
    """A resumed run keeps the task, algorithm, seed and model it started with."""
    from policylab.trainers.run_safety import check_keeps

    check_keeps(saved, config, saved.get("run_dir") or "the run")


def _same_kind(config: RunConfig, fields: dict[str, Any]) -> bool:
    """Whether `fields` keep `config` on its trainer (no task, or a task of the same kind)."""
    task = fields.get("task")
    if task is None:
        return True
    if str(task).startswith(LAB_PREFIX) or isinstance(config, LabConfig):
        return str(task).startswith(LAB_PREFIX) and isinstance(config, LabConfig)
    if str(task).startswith(TABULAR_PREFIX) or isinstance(config, TabularConfig):
        return str(task).startswith(TABULAR_PREFIX) and isinstance(config, TabularConfig)
    return is_gym_task(str(task)) == isinstance(config, ControlConfig)


def train(cfg: RunConfig, *, resume: bool = False, objects: RunObjects | None = None, callbacks=()):
    """Run `cfg` with its trainer: a ControlResult for a ControlConfig, a TabularResult for
    a TabularConfig, else a TrainResult. `objects`: what a language-model run was given in
    Python (objects.py); every object `cfg` names must be among them. `callbacks`:
    language-model and control runs."""
    objects = objects or RunObjects()
    if objects and not isinstance(cfg, TrainConfig):
        raise ValueError(
            f"task {cfg.task!r} trains a {type(cfg).__name__.removesuffix('Config').lower()} "
            "policy; model, tokenizer, task and reward objects are for language-model runs"
        )
    if isinstance(cfg, TrainConfig):
        check_given(cfg, objects, resume=resume)
    if isinstance(cfg, TabularConfig):
        from policylab.trainers.tabular import train as train_tabular

        if callbacks:
            raise ValueError("callbacks are for language-model and control runs, not tabular")
        return train_tabular(cfg, resume=resume)
    if isinstance(cfg, OffPolicyConfig):
        from policylab.trainers.offpolicy import train as train_offpolicy

        return train_offpolicy(cfg, resume=resume, callbacks=callbacks)
    if isinstance(cfg, ControlConfig):
        from policylab.trainers.control import train as train_control

        return train_control(cfg, resume=resume, callbacks=callbacks)
    from policylab import testtime_run

    if testtime_run.is_testtime(cfg.algo):  # trains no weights: the method per instance
        if resume or objects or callbacks:
            raise ValueError(f"{cfg.algo} is a test-time method: no --resume, objects or callbacks")
        return testtime_run.train(cfg)
    from policylab.trainers import mdm

    if mdm.is_mdm_run(cfg):  # a masked diffusion LM folder (G1.7)
        if objects:
            raise ValueError(
                f"--model {cfg.model!r} is a masked diffusion LM: its trainer takes no model, "
                "tokenizer, task or reward objects (rewards are the task's verifier)"
            )
        return mdm.train(cfg, resume=resume, callbacks=callbacks)
    if mdm.needs_mdm(cfg.algo):
        raise ValueError(
            f"algorithm {cfg.algo!r} trains a masked diffusion LM through its likelihood "
            f"estimator; --model {cfg.model!r} is not one. Build one with `python -m "
            "policylab.pretrain_mdm --out runs/tiny-mdm` and pass --model runs/tiny-mdm"
        )
    from policylab.trainers.llm import train as train_llm

    return train_llm(cfg, resume=resume, objects=objects, callbacks=callbacks)


def _task_of_file(path: Path) -> dict[str, Any]:
    """{"task": ...} of a YAML config file, when it names one (the file is read in full,
    and checked, by `load` once the schema is known)."""
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    return {"task": data["task"]} if isinstance(data, dict) and "task" in data else {}


def _unset(schema, path: Path | None, given: dict[str, Any]) -> dict[str, Any]:
    """The fields a file or object sets: a file is loaded (and checked) with `schema`."""
    if path is None:
        return given
    return load(schema, path).model_dump(exclude_unset=True)
