"""Objects given to `policylab.train` in Python (a model, a tokenizer, the data, reward
functions), carried beside the run's config, which stays plain strings (config.yaml).

    policylab.train(model=model, tokenizer=tokenizer, task=rows, rewards=[brevity, "format"])

The config names each object by a readable marker: `model: "<object: Qwen2ForCausalLM,
weights 1a2b3c4d>"`, `task: "<object: list of 20 dicts, rows 5e6f7a8b>"`; the digests
say which weights and rows, so a resume given other ones is refused. A reward function is
registered under its `__name__` (`rewards: {brevity: 1.0}`); registering that name again
with a new function (a notebook cell run twice) replaces it with a logged note, while a
function under a built-in reward's name is an error. The objects travel to the trainer as
a `RunObjects`. A run started with objects resumes only with the same objects given again:
`check_given` names the missing ones before any model loads.

The model object is trained in place, as TRL trains the model it is given; the reference
model of a KL term is a copy of it taken before the first step."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

log = logging.getLogger(__name__)

MARKER = "<object: {}>"
IN_MEMORY_TASK = "data"  # the name of a task given as rows (progress bar, summary)
REWARD_FORMS = (
    "a function fn(prompts, completions, **columns) -> list[float], or the name of a "
    "reward (policylab.rewards.names()), 'package.module:function' or "
    "'path/to/file.py:function'"
)


def is_object(value: Any) -> bool:
    """Whether a config value is the marker of an object given in Python."""
    return isinstance(value, str) and value.startswith(MARKER[:9]) and value.endswith(">")


@dataclass
class RunObjects:
    """What a run was given as objects; empty for a run given only names (then every
    method does what the trainer did before: load `cfg.model`)."""

    model: Any = None
    tokenizer: Any = None
    task: Any = None  # a FileTask built from rows in memory
    rewards: dict[str, Callable] = field(default_factory=dict)  # name → function

    def __bool__(self) -> bool:
        given = (self.model, self.tokenizer, self.task)
        return any(obj is not None for obj in given) or bool(self.rewards)

    def model_and_tokenizer(self, name: str):
        """The policy's (model, tokenizer): the objects given, else loaded from `name`."""
        from policylab.models import load_model

        if self.model is not None:
            return self.model, self.tokenizer
        model, tokenizer = load_model(name)
        return model, self.tokenizer or tokenizer

    def reference(self, name: str):
        """The frozen reference model: a copy of the model object (taken before training
        changes it), else `name` loaded again."""
        from policylab.models import load_model

        model = copy.deepcopy(self.model) if self.model is not None else load_model(name)[0]
        return model.eval().requires_grad_(False)

    def check_fits(self, task, name: str, max_new_tokens: int, prompt_format=None) -> None:
        """Every prompt of a data task leaves room for `max_new_tokens` in the model's
        context (`FileTask.check_fits`), with the objects' config and tokenizer if given."""
        if self.model is None and self.tokenizer is None:
            task.check_fits(name, max_new_tokens, prompt_format)
            return
        if self.model is not None:
            config = self.model.config
        else:
            from transformers import AutoConfig

            from policylab.models import resolve_model_path

            config = AutoConfig.from_pretrained(resolve_model_path(name))
        task.check_fits_with(config, self.tokenizer, max_new_tokens, prompt_format)

    def describe(self) -> dict[str, Any]:
        """What config.yaml records of the objects (under `resolved.objects`)."""
        out: dict[str, Any] = {}
        if self.tokenizer is not None:
            out["tokenizer"] = type(self.tokenizer).__name__
        if self.rewards:
            out["rewards"] = sorted(self.rewards)
        return out


def gather(
    *,
    model: Any = None,
    tokenizer: Any = None,
    task: Any = None,
    rewards: Any = None,
    task_knobs: dict | None = None,
) -> tuple[dict[str, Any], RunObjects]:
    """(config fields, objects) of `policylab.train`'s arguments: names and paths become
    fields as they are, objects become markers; every check runs before any model loads."""
    fields: dict[str, Any] = {}
    objects = RunObjects()
    if model is not None:
        if isinstance(model, str | os.PathLike):
            fields["model"] = str(model)
        elif _is_model(model):
            objects.model = model
            fields["model"] = MARKER.format(f"{type(model).__name__}, weights {_weights(model)}")
        else:
            raise ValueError(
                f"model = {_short(model)}: accepted: a transformers causal LM object (e.g. "
                'AutoModelForCausalLM.from_pretrained(...)), a model folder, a hub id or "tiny"'
            )
    if tokenizer is not None:
        if not hasattr(tokenizer, "decode") or not callable(tokenizer):
            raise ValueError(
                f"tokenizer = {_short(tokenizer)}: accepted: a transformers tokenizer "
                "(AutoTokenizer.from_pretrained(...)) or None (the model's own)"
            )
        objects.tokenizer = prepared(tokenizer)
    elif objects.model is not None:
        objects.tokenizer = prepared(_tokenizer_of(objects.model))
    if rewards is not None:
        fields["rewards"], objects.rewards = _rewards(rewards)
    if task is not None:
        if isinstance(task, str | os.PathLike):
            fields["task"] = str(task)
        else:
            scored = bool(fields.get("rewards"))
            objects.task, fields["task"] = _task(task, task_knobs or {}, scored)
    return fields, objects


def prepared(tokenizer):
    """A copy of `tokenizer` set up as `load_model` sets up a loaded one: left padding,
    and a pad token when it has none (`models.ensure_pad_token`); the user's object is
    unchanged."""
    from policylab.models import ensure_pad_token

    tokenizer = copy.deepcopy(tokenizer)
    ensure_pad_token(tokenizer, type(tokenizer).__name__)
    tokenizer.padding_side = "left"
    return tokenizer


def check_given(cfg, objects: RunObjects, *, resume: bool) -> None:
    """Every object `cfg` names is given, and a resumed run is given the objects it was
    started with; else a ValueError naming them, before any model loads."""
    saved = _saved_config(Path(cfg.folder)) if resume else {}
    missing = []
    for key in ("model", "task"):
        value = getattr(cfg, key)
        if is_object(value) and getattr(objects, key) is None:
            missing.append(f"{key} (config.yaml: {value})")
        was = saved.get(key)
        if is_object(was) and value != was and getattr(objects, key) is not None:
            raise ValueError(
                f"cannot resume {cfg.folder} with {key} = {value}: it was started with {was}. "
                f"Give the same {key} as at the start of the run"
                + (
                    " (a model object is trained in place: load it again as it was, e.g. "
                    "with from_pretrained)"
                    if key == "model"
                    else ""
                )
            )
    started = (saved.get("resolved") or {}).get("objects") or {}
    lacking = [name for name in started.get("rewards", []) if name not in objects.rewards]
    if lacking:
        missing.append(f"rewards {', '.join(lacking)} (functions given in Python)")
    if missing:
        raise ValueError(
            f"run {cfg.folder} was started in Python with objects that config.yaml cannot hold: "
            f"{'; '.join(missing)}. Give them again: policylab.train(model=..., tokenizer=..., "
            f"task=..., rewards=[...], run_dir={str(cfg.folder)!r}, resume=True, "
            "<the same fields>)"
        )


def _saved_config(folder: Path) -> dict[str, Any]:
    path = folder / "config.yaml"
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    return data if isinstance(data, dict) else {}


# ---- models -------------------------------------------------------------------------------
def _is_model(obj: Any) -> bool:
    import torch

    return isinstance(obj, torch.nn.Module) and hasattr(obj, "generate") and hasattr(obj, "config")


def _weights(model) -> str:
    """A short digest of the model's weights: 64 evenly spaced values of each parameter
    (cheap on any size, and enough to tell a trained copy from the one it started as)."""
    import torch

    digest = hashlib.sha1()
    with torch.no_grad():
        for name, p in model.named_parameters():
            flat = p.detach().reshape(-1)
            sample = flat[:: max(1, flat.numel() // 64)][:64]
            digest.update(name.encode())
            digest.update(sample.float().cpu().numpy().tobytes())
    return digest.hexdigest()[:8]


def _tokenizer_of(model):
    """The tokenizer saved with a model object's source (its `name_or_path`)."""
    source = getattr(model, "name_or_path", "") or ""
    if not source:
        raise ValueError(
            f"tokenizer = None with model = a {type(model).__name__} object that was not loaded "
            "from a folder or hub id (its name_or_path is empty): pass tokenizer=..."
        )
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(source)
    except OSError as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else repr(err)
        raise ValueError(
            f"tokenizer = None: cannot load the tokenizer of the model's source {source!r} "
            f"({reason}); pass tokenizer=..."
        ) from None


# ---- tasks --------------------------------------------------------------------------------
def _task(data: Any, knobs: dict, has_rewards: bool):
    """(FileTask, marker) of rows in memory: a list of dicts, a datasets Dataset or
    DatasetDict, read by the data-file machinery (tasks/files.py)."""
    from policylab.tasks import FileTask

    kind = type(data).__name__
    if isinstance(data, list):
        size = f"{len(data)} dicts"
    elif type(data).__module__.startswith("datasets") and kind in ("Dataset", "DatasetDict"):
        size = f"{data.num_rows} rows" if kind == "Dataset" else _split_sizes(data)
    else:
        raise ValueError(
            f"task = {_short(data)}: accepted: a task name (policylab list), a data file or "
            "folder, a list of dicts with a 'prompt' column, or a datasets Dataset or DatasetDict"
        )
    if not len(data):
        raise ValueError(f"task = an empty {kind}: it needs at least one row")
    unknown = sorted(set(knobs) - {"prompt_column", "answer_column", "reward"})
    if unknown:
        raise ValueError(
            f"task_knobs {unknown}: a {kind} task takes prompt_column, answer_column and reward"
        )
    task = FileTask("task", rows=data, name=IN_MEMORY_TASK, **knobs)
    answer = task.answer_column
    if answer not in task.columns and not has_rewards:
        raise ValueError(
            f"task: the rows have no {answer!r} column (columns: "
            f"{', '.join(task.columns) or 'none'} besides {task.prompt_column!r}), so nothing "
            "scores them: give rewards=[...], or "
            "name the answer column with task_knobs={'answer_column': ...}"
        )
    return task, MARKER.format(f"{kind} of {size}, rows {_rows_digest(data)}")


def _split_sizes(data) -> str:
    return " + ".join(f"{rows} {split}" for split, rows in data.num_rows.items()) + " rows"


def _rows_digest(data) -> str:
    if hasattr(data, "keys"):  # a DatasetDict
        rows: Any = {split: data[split].to_list() for split in data}
    else:
        rows = data if isinstance(data, list) else data.to_list()
    text = json.dumps(rows, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:8]


# ---- rewards ------------------------------------------------------------------------------
def _rewards(rewards: Any) -> tuple[dict[str, float], dict[str, Callable]]:
    """({name: weight}, {name: function given}) of `rewards`: one reward, a list (weight
    1 each) or a dict reward → weight; a reward is a function or a name."""
    if isinstance(rewards, str) or callable(rewards):
        rewards = [rewards]
    if isinstance(rewards, Mapping):
        items = [(f"rewards[{key!r}]", key, weight) for key, weight in rewards.items()]
    elif isinstance(rewards, list | tuple):
        items = [(f"rewards[{i}]", reward, 1.0) for i, reward in enumerate(rewards)]
    else:
        raise ValueError(
            f"rewards = {_short(rewards)}: accepted: a list of rewards or a dict reward → "
            f"weight, where a reward is {REWARD_FORMS}"
        )
    weights: dict[str, float] = {}
    functions: dict[str, Callable] = {}
    for where, reward, weight in items:
        if isinstance(reward, str) and reward:
            name = reward
        elif callable(reward):
            name = register_reward(reward, where)
            functions[name] = reward
        else:
            raise ValueError(
                f"{where} = {_short(reward)} is neither a reward function nor a name; "
                f"accepted: {REWARD_FORMS}"
            )
        if name in weights:
            raise ValueError(f"{where}: reward {name!r} is given twice; give each reward once")
        weights[name] = weight
    return weights, functions


def register_reward(fn: Callable, where: str = "reward") -> str:
    """Register `fn` in the reward registry under its `__name__`, and return the name.
    The function already registered under it is replaced (logged): a notebook cell run
    again defines a new function of the same name. A built-in reward's name or a task's
    (its verifier) is refused, unless `fn` is that very function."""
    from policylab import tasks
    from policylab.rewards.builtin import BUILTIN
    from policylab.rewards.registry import reward_functions

    for name in reward_functions.names():
        if reward_functions.get(name) is fn:
            return name
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(
            f"{where} = {_short(fn)}: a reward function is named by its __name__ (in "
            f"config.yaml and the metrics, reward/<name>), and this one's is {name!r}: "
            "define it with def"
        )
    if name in BUILTIN or name in tasks.names():
        what = "a built-in reward" if name in BUILTIN else f"the {name} task's verifier"
        raise ValueError(
            f"{where}: your function {name!r} has the name of {what}, which it would hide; "
            f"rename it (e.g. def my_{name}(prompts, completions, **columns))"
        )
    if name in reward_functions:
        log.info("reward %r: replacing the function registered under that name by %r", name, fn)
    reward_functions.add(name, fn, replace=True)
    return name


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."
