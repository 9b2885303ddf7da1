"""A slow reward function (a verifier, a simulator, a judge) scored by several Ray actors.

    from policylab.rewards.ray_workers import RayRewardPool

    pooled = RayRewardPool(run_unit_tests, workers=8)   # 8 processes, on a local cluster
    policylab.train(task="my_code_task", rewards={pooled: 1.0})

`RayRewardPool(fn, workers=N)` is a reward function with `fn`'s name and signature: each
call splits the batch into N contiguous slices, one per actor (each holds its own copy
of `fn`), and joins their values in the batch's order. Everything else stays where it
was, in `rewards/combine.py`: an exception raised by `fn` on any slice is raised by the
pool's call (`sys.exit` included, as it would be in this process), so `combine` retries
the samples one by one, gives the failed ones `failure_reward` and counts them; values,
None, NaN and the counts are the ones `fn` gives in this process. Arguments with one
value per sample (the prompts, completions, data columns, `completion_ids`) are sliced;
any other (`trainer_state`) goes whole to every actor.

The actors start at the first call: on the Ray session this process already has, else
on `address` ("auto", "ray://head:10001"), else on a local cluster of `workers` ×
`cpus_per_worker` CPUs; `close()` (or a `with` block) ends them and any cluster the pool
started. The actors import `fn`'s module (install it on a remote cluster's nodes); a
function defined in `__main__` or loaded from a file (`rewards.py:fn`) is sent by value."""

from __future__ import annotations

import inspect
import logging
import sys
import traceback
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any

from policylab.ray_cluster import cluster

log = logging.getLogger(__name__)

MAX_RESTARTS = 3  # a crashed actor (segfault, out of memory) is restarted this many times


class _Scorer:
    """A Ray actor holding the reward function; it reports an exception instead of raising
    it, so that `sys.exit` in a reward fails the call, not the actor."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    def score(self, args: tuple, kwargs: dict) -> tuple[bool, Any]:
        try:
            return True, self.fn(*args, **kwargs)
        except BaseException as err:  # noqa: BLE001 - the calling process raises it
            return False, (_picklable(err), traceback.format_exc(limit=3))


class RayRewardPool:
    """Reward function `fn` scored by `workers` Ray actors (see the module's docstring)."""

    def __init__(
        self,
        fn: Callable,
        workers: int = 2,
        *,
        address: str | None = None,
        cpus_per_worker: float = 1.0,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"RayRewardPool: fn={fn!r} is not callable")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"RayRewardPool: workers={workers!r}; expected 1 or more actors")
        if not cpus_per_worker > 0:
            raise ValueError(f"RayRewardPool: cpus_per_worker={cpus_per_worker!r}; expected > 0")
        self.fn, self.workers, self.address = fn, workers, address
        self.cpus_per_worker = cpus_per_worker
        # combine.py names the reward and reads how to call it from these
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        try:
            self.__signature__ = inspect.signature(fn)
        except (TypeError, ValueError):
            pass
        if getattr(fn, "timeout_exempt", False):
            self.timeout_exempt = True
        self._stack: ExitStack | None = None
        self._actors: list = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        n = _rows(args, kwargs)
        bounds = [(k * n // self.workers, (k + 1) * n // self.workers) for k in range(self.workers)]
        bounds = [(lo, hi) for lo, hi in bounds if hi > lo] or [(0, n)]
        actors = self._start()
        refs = [
            actor.score.remote(_slice(args, n, lo, hi), _slice(kwargs, n, lo, hi))
            for actor, (lo, hi) in zip(actors, bounds, strict=False)
        ]
        outcomes = self.ray.get(refs)
        for ok, out in outcomes:
            if not ok:
                error, text = out
                log.debug("reward %r raised on an actor:\n%s", self.__name__, text)
                raise error
        if len(outcomes) == 1:
            return outcomes[0][1]  # as fn returned it: combine checks it
        values: list = []
        for (_, out), (lo, hi) in zip(outcomes, bounds, strict=True):
            out = out.tolist() if hasattr(out, "tolist") else out
            if not isinstance(out, (list, tuple)) or len(out) != hi - lo:
                return out  # not one value per sample: combine names the fault
            values.extend(out)
        return values

    def _start(self) -> list:
        """The actors, started at the first call (and Ray with them when needed)."""
        if self._actors:
            return self._actors
        self._stack = ExitStack()
        local_cpus = max(1, round(self.workers * self.cpus_per_worker))
        self.ray = self._stack.enter_context(cluster(self.address, num_cpus=local_cpus))
        _by_value_if_unimportable(self.fn)
        actor = self.ray.remote(num_cpus=self.cpus_per_worker, max_restarts=MAX_RESTARTS)(_Scorer)
        self._actors = [actor.remote(self.fn) for _ in range(self.workers)]
        return self._actors

    def close(self) -> None:
        """End the actors, and the Ray cluster if the pool started it."""
        for actor in self._actors:
            self.ray.kill(actor)
        self._actors = []
        if self._stack is not None:
            self._stack.close()
            self._stack = None

    def __enter__(self) -> RayRewardPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _rows(args: tuple, kwargs: dict) -> int:
    """The batch size: the completions' count (positional, or by keyword)."""
    completions = args[1] if len(args) > 1 else kwargs.get("completions")
    if completions is None:
        raise TypeError("RayRewardPool: called without completions")
    return len(completions)


def _per_sample(value: Any, n: int) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and len(value) == n


def _slice(values: tuple | dict, n: int, lo: int, hi: int) -> tuple | dict:
    """Rows lo:hi of every per-sample argument; the others whole."""
    if isinstance(values, dict):
        return {k: v[lo:hi] if _per_sample(v, n) else v for k, v in values.items()}
    return tuple(v[lo:hi] if _per_sample(v, n) else v for v in values)


def _by_value_if_unimportable(fn: Callable) -> None:
    """A function from a module that cannot be imported by name (a reward file loaded as
    `rewards.py:fn`) travels to the actors by value, not as a reference to its module."""
    from importlib.machinery import PathFinder

    from ray import cloudpickle

    name = getattr(fn, "__module__", None)
    module = sys.modules.get(name or "")
    if module is None or name == "__main__":  # __main__ goes by value already
        return
    # searched on sys.path, not in sys.modules (where the loaded file is registered)
    top = name.partition(".")[0]
    if top not in sys.builtin_module_names and PathFinder.find_spec(top) is None:
        cloudpickle.register_pickle_by_value(module)


def _picklable(err: BaseException) -> BaseException:
    """The exception itself when it can travel back from the actor, else a RuntimeError
    with its text."""
    import pickle

    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:  # noqa: BLE001 - any pickling failure
        return RuntimeError(f"{type(err).__name__}: {err}")
