"""Weighted combination of reward functions, with checked outputs and isolated failures.

R_i = Σ_f w_f·r_f(i) over the functions that scored row i (NaN parts are skipped; a row
no function could score is NaN). A function that raises is retried sample by sample;
each sample that still raises gets `failure_reward`, is counted in `failures[name]` and
logged once with its traceback: one bad sample never ends a run. A function that returns
the wrong number of values or a non-number is a bug in that function and fails at once,
naming it."""

from __future__ import annotations

import inspect
import logging
import math
import numbers
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from policylab.rewards.lookup import get

log = logging.getLogger(__name__)


@dataclass
class RewardResult:
    total: list[float]  # [B] weighted sum per sample
    parts: dict[str, list[float]]  # name → [B] unweighted value of each function
    failures: dict[str, int] = field(default_factory=dict)  # name → samples that raised


class CombinedReward:
    """Callable `(prompts, completions, **columns) -> RewardResult`."""

    def __init__(
        self,
        weights: Mapping[str | Callable, float],
        failure_reward: float = 0.0,
        functions: Mapping[str, Callable] | None = None,
    ):
        if not weights:
            raise ValueError("combine() needs at least one reward function")
        self.functions: dict[str, Callable] = {}
        self.weights: dict[str, float] = {}
        for key, weight in weights.items():
            if isinstance(key, str):
                fn = (functions or {}).get(key) or get(key)
            else:
                fn = key
            name = key if isinstance(key, str) else getattr(fn, "__name__", repr(fn))
            if not callable(fn):
                raise ValueError(f"reward {name!r} is not callable")
            if not isinstance(weight, numbers.Real) or not math.isfinite(weight):
                raise ValueError(f"reward {name!r}: weight must be a finite number, got {weight!r}")
            self.functions[name] = fn
            self.weights[name] = float(weight)
        self.failure_reward = float(failure_reward)

    def __call__(self, prompts: Sequence, completions: Sequence, **columns: Any) -> RewardResult:
        n = len(completions)
        if len(prompts) != n:
            raise ValueError(f"{len(prompts)} prompts but {n} completions")
        for key, column in columns.items():
            if len(column) != n:
                raise ValueError(f"column {key!r} has {len(column)} values for {n} completions")
        parts, failures = {}, {}
        for name, fn in self.functions.items():
            kwargs = _columns_for(name, fn, columns)
            parts[name], failures[name] = self._score(name, fn, prompts, completions, kwargs)
        total = []
        for i in range(n):
            values = [(self.weights[k], v[i]) for k, v in parts.items() if not math.isnan(v[i])]
            total.append(sum(w * v for w, v in values) if values else math.nan)
        return RewardResult(total, parts, {k: v for k, v in failures.items() if v})

    def _score(self, name, fn, prompts, completions, kwargs) -> tuple[list[float], int]:
        try:
            return _checked(
                name, fn(list(prompts), list(completions), **kwargs), len(completions)
            ), 0
        except RewardOutputError:
            raise
        except Exception:  # noqa: BLE001 - isolate below, sample by sample
            pass
        scores, failed = [], 0
        for i in range(len(completions)):
            row = {k: [v[i]] for k, v in kwargs.items()}
            try:
                scores.extend(_checked(name, fn([prompts[i]], [completions[i]], **row), 1))
            except RewardOutputError:
                raise
            except Exception:  # noqa: BLE001 - a failing sample gets the failure reward
                if failed == 0:
                    log.warning(
                        "reward %r raised on sample %d; it gets %s:\n%s",
                        name,
                        i,
                        self.failure_reward,
                        traceback.format_exc(limit=3),
                    )
                failed += 1
                scores.append(self.failure_reward)
        return scores, failed


class RewardOutputError(ValueError):
    """A reward function returned something that is not one number per completion."""


def _checked(name: str, values: Any, n: int) -> list[float]:
    if hasattr(values, "tolist"):  # numpy arrays and tensors
        values = values.tolist()
    if not isinstance(values, (list, tuple)):
        raise RewardOutputError(
            f"reward function {name!r} returned {type(values).__name__}; expected a list of "
            f"{n} numbers (one per completion)"
        )
    if len(values) != n:
        raise RewardOutputError(
            f"reward function {name!r} returned {len(values)} values for {n} completions"
        )
    out = []
    for i, v in enumerate(values):
        if v is None:
            out.append(math.nan)
        elif isinstance(v, numbers.Real):
            out.append(float(v))
        else:
            raise RewardOutputError(
                f"reward function {name!r} returned {v!r} ({type(v).__name__}) for completion "
                f"{i}; expected a number or None"
            )
    return out


def _columns_for(name: str, fn: Callable, columns: Mapping[str, Any]) -> dict[str, Any]:
    """All columns for a function taking **kwargs; else only the ones it names. A required
    column that is missing is an error naming the function and the available columns."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return dict(columns)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return dict(columns)
    named = list(params.values())[2:]  # after prompts, completions
    missing = [
        p.name
        for p in named
        if p.default is p.empty
        and p.name not in columns
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    if missing:
        raise ValueError(
            f"reward function {name!r} needs column(s) {', '.join(missing)}; the data has: "
            f"{', '.join(sorted(columns)) or '(none)'}"
        )
    return {p.name: columns[p.name] for p in named if p.name in columns}


def combine(
    weights: Mapping[str | Callable, float],
    failure_reward: float = 0.0,
    functions: Mapping[str, Callable] | None = None,
) -> CombinedReward:
    """Weighted sum of reward functions given by name (or as callables). `functions` maps
    names to callables that take precedence over the registry (e.g. a task's verifier
    built with non-default knobs)."""
    return CombinedReward(weights, failure_reward, functions)
