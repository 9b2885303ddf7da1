"""Weighted combination of reward functions, with checked outputs and isolated failures.

R_i = Σ_f w_f·r_f(i) over the functions that scored row i (NaN parts are skipped; a row
no function could score is NaN). A function that raises is retried sample by sample;
each sample that still raises gets `failure_reward`, is counted and logged (the first
traceback of each kind of error, once): one bad sample never ends a run, and neither
does `sys.exit` in a reward (only KeyboardInterrupt passes). With `timeout_s`, each call
runs in a worker thread (calls.py); a call past it fails its samples, and after a timeout
the function's remaining samples of the batch fail without being tried, so one batch
waits at most two timeouts per function. A value that is NaN, ±inf or beyond float32
(alone or times its weight) is left out like None and counted (counts.py). A function
that returns the wrong number of values or a non-number is a bug in that function and
fails at once, naming it.

Functions are called as TRL calls them (trl.py): by keyword when they name `completions`
or take only **kwargs (`fn(prompts=..., completions=..., completion_ids=...,
trainer_state=..., **columns)`), else positionally as `fn(prompts, completions,
**columns)`; each gets the columns, `completion_ids` and `trainer_state` it names, or all
of them with **kwargs. A function that fails (raises or times out) on more than
`failure_limit` of a call's samples stops the run with `RewardFailureError`, naming it and
carrying its traceback (1.0: never)."""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from policylab.rewards.calls import Call, call
from policylab.rewards.counts import RewardCounts
from policylab.rewards.lookup import get
from policylab.rewards.signature import columns_for, takes
from policylab.rewards.trl import EXTRAS, TrainerState, as_completions

log = logging.getLogger(__name__)

FLOAT32_MAX = 3.4028234663852886e38  # rewards travel as float32 tensors: beyond is ±inf


@dataclass
class RewardResult:
    total: list[float]  # [B] weighted sum per sample
    parts: dict[str, list[float]]  # name → [B] unweighted value of each function
    failures: dict[str, int] = field(default_factory=dict)  # name → samples that failed
    counts: RewardCounts = field(default_factory=RewardCounts)  # failed, non-finite, None


class CombinedReward:
    """Callable `(prompts, completions, *, completion_ids=None, **columns) -> RewardResult`.
    `state` is the `trainer_state` handed to functions that take it (`at_step` moves it)."""

    def __init__(
        self,
        weights: Mapping[str | Callable, float],
        failure_reward: float = 0.0,
        functions: Mapping[str, Callable] | None = None,
        timeout_s: float = 0.0,
        failure_limit: float = 1.0,
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
        if not 0.0 <= failure_limit <= 1.0:
            raise ValueError(f"failure_limit must be in [0, 1], got {failure_limit!r}")
        self.takes = {name: takes(fn) for name, fn in self.functions.items()}
        self.failure_reward = float(failure_reward)
        self.timeout_s = float(timeout_s)
        self.failure_limit = float(failure_limit)
        self.state = TrainerState()  # the trainer_state handed to functions taking it
        self._reported: set[tuple[str, str]] = set()  # (function, what) already logged

    def at_step(self, global_step: int, **progress: float) -> None:
        """The run's progress as the next calls' `trainer_state` reports it: global_step
        (optimiser steps done), and max_steps or epoch when given."""
        unknown = set(progress) - {"max_steps", "epoch"}
        if unknown:
            raise ValueError(f"at_step: unknown {sorted(unknown)}; known: max_steps, epoch")
        self.state.global_step = global_step
        for key, value in progress.items():
            setattr(self.state, key, value)

    def __call__(
        self,
        prompts: Sequence,
        completions: Sequence,
        *,
        completion_ids: Sequence[Sequence[int]] | None = None,
        **columns: Any,
    ) -> RewardResult:
        n = len(completions)
        if len(prompts) != n:
            raise ValueError(f"{len(prompts)} prompts but {n} completions")
        # TRL's own arguments win over data columns of the same names
        reserved = ("prompts", "completions", *EXTRAS)
        columns = {k: v for k, v in columns.items() if k not in reserved}
        if completion_ids is not None:
            columns["completion_ids"] = [list(ids) for ids in completion_ids]
        for key, column in columns.items():
            if len(column) != n:
                raise ValueError(f"column {key!r} has {len(column)} values for {n} completions")
        completions = as_completions(prompts, completions)
        parts = {}
        counts = RewardCounts(tuple(self.functions), rows=n)
        scored = [False] * n
        for name, fn in self.functions.items():
            args, rows, fixed = self._arguments(name, prompts, completions, columns)
            values, failed, first = self._score(name, fn, args, rows, fixed, n)
            parts[name] = self._part(name, values, failed, counts, scored)
            self._check_failures(name, len(failed), n, first)
        total = []
        for i in range(n):
            values = [(self.weights[k], v[i]) for k, v in parts.items() if not math.isnan(v[i])]
            total.append(sum(w * v for w, v in values) if values else math.nan)
        counts.scored = sum(scored)
        return RewardResult(total, parts, dict(counts.failed), counts)

    def _arguments(self, name, prompts, completions, columns) -> tuple[tuple, dict, dict]:
        """The call of function `name`: positional arguments, keyword arguments with one
        value per sample, and the others (`trainer_state`)."""
        how = self.takes[name]
        rows = columns_for(name, how, columns)
        if how.keywords:
            given = {"prompts": list(prompts), "completions": list(completions)}
            rows = {**rows, **{k: v for k, v in given.items() if how.accepts(k)}}
            args = ()
        else:
            args = (list(prompts), list(completions))
        fixed = {"trainer_state": self.state} if how.accepts("trainer_state") else {}
        return args, rows, fixed

    def _part(self, name, values, failed: set[int], counts, scored: list[bool]) -> list[float]:
        """The part of function `name`: failed samples keep the failure reward, None and
        non-finite values become NaN; each counted, rows with a finite value marked."""
        part = []
        for i, v in enumerate(values):
            if i in failed:
                counts.failed[name] += 1
            elif v is None:
                counts.missing[name] += 1
                v = math.nan
            elif not abs(v) <= FLOAT32_MAX or not abs(self.weights[name] * v) <= FLOAT32_MAX:
                counts.nonfinite[name] += 1
                self._once(
                    name,
                    "nonfinite",
                    "reward %r returned %r for sample %d; a value that is NaN, ±inf or, "
                    "times its weight %g, beyond float32's %.3g is left out (as None) and "
                    "counted in reward/nonfinite/%s",
                    name,
                    v,
                    i,
                    self.weights[name],
                    FLOAT32_MAX,
                    name,
                )
                v = math.nan
            else:
                scored[i] = True
            part.append(v)
        return part

    def _score(self, name, fn, args, rows, fixed, n) -> tuple[list, set[int], Call | None]:
        """The function's values (None where it cannot score), the samples that failed
        (raised or timed out), which hold the failure reward, and the first failed call."""
        timeout = 0.0 if getattr(fn, "timeout_exempt", False) else self.timeout_s
        limit = (timeout, name)
        whole = call(fn, args, {**rows, **fixed}, *limit)
        if whole.ok:
            return _checked(name, whole.value, n), set(), None
        if whole.timed_out:
            self._timed_out(name, n)
            return [self.failure_reward] * n, set(range(n)), whole
        values, failed, hung, first = [], set(), False, None
        for i in range(n):
            one_args = tuple([a[i]] for a in args)
            one_rows = {k: [v[i]] for k, v in rows.items()}
            one = None if hung else call(fn, one_args, {**one_rows, **fixed}, *limit)
            if one is not None and one.ok:
                values.extend(_checked(name, one.value, 1))
                continue
            failed.add(i)
            values.append(self.failure_reward)
            if one is None:  # after a timeout the remaining samples fail untried
                continue
            if first is None:
                first = one
            if one.timed_out:
                hung = True
                self._timed_out(name, n - i)
            else:
                self._raised(name, i, one)
        return values, failed, first

    def _check_failures(self, name: str, failed: int, n: int, first: Call | None) -> None:
        """Stop when function `name` failed on more than `failure_limit` of the samples."""
        if not n or failed / n <= self.failure_limit:
            return
        if first is not None and first.timed_out:
            why = f"its call did not return within {self.timeout_s:g} s (reward_timeout_s)"
        else:
            why = f"its first error:\n{first.traceback if first else ''}"
        raise RewardFailureError(
            f"reward function {name!r} failed (raised or timed out) on {failed} of {n} "
            f"samples ({failed / n:.0%}), more than the limit of {self.failure_limit:.0%} "
            f"(reward_failure_limit); {why}\nFix the function, or set reward_failure_limit "
            "= 1.0 to keep going (failed samples get failure_reward and are counted in "
            f"reward/failed/{name})."
        ) from (first.error if first is not None else None)

    def _raised(self, name: str, i: int, one: Call) -> None:
        self._once(
            name,
            type(one.error).__name__,
            "reward %r raised on sample %d; it gets %s (failure_reward; every failed sample "
            "is counted in reward/failed/%s, this traceback is shown once):\n%s",
            name,
            i,
            self.failure_reward,
            name,
            one.traceback,
        )

    def _timed_out(self, name: str, samples: int) -> None:
        log.warning(
            "reward %r did not return within %g s (reward_timeout_s); its call is abandoned "
            "and %d sample(s) get %s (failure_reward), counted in reward/failed/%s",
            name,
            self.timeout_s,
            samples,
            self.failure_reward,
            name,
        )

    def _once(self, name: str, what: str, message: str, *args) -> None:
        if (name, what) not in self._reported:
            self._reported.add((name, what))
            log.warning(message, *args)


class RewardFailureError(RuntimeError):
    """A reward function failed on more than its `failure_limit` of a batch's samples."""


class RewardOutputError(ValueError):
    """A reward function returned something that is not one number per completion."""


def _checked(name: str, values: Any, n: int) -> list[float | None]:
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
            out.append(None)
        elif isinstance(v, numbers.Real):
            out.append(float(v))
        else:
            raise RewardOutputError(
                f"reward function {name!r} returned {v!r} ({type(v).__name__}) for completion "
                f"{i}; expected a number or None"
            )
    return out


def combine(
    weights: Mapping[str | Callable, float],
    failure_reward: float = 0.0,
    functions: Mapping[str, Callable] | None = None,
    timeout_s: float = 0.0,
    failure_limit: float = 1.0,
) -> CombinedReward:
    """Weighted sum of reward functions given by name (or as callables). `functions` maps
    names to callables that take precedence over the registry (e.g. a task's verifier
    built with non-default knobs); `timeout_s` bounds each call (0: no limit, called in
    this thread); a function failing on more than `failure_limit` of a call's samples
    raises `RewardFailureError` (1.0: never)."""
    return CombinedReward(weights, failure_reward, functions, timeout_s, failure_limit)
