"""Callbacks: your code at three points of a run, from the Python API.

    from policylab.callbacks import Callback, StopTraining

    class StopWhenSolved(Callback):
        def on_eval(self, step, metrics):
            if metrics["eval/greedy_accuracy"] >= 0.9:
                raise StopTraining(f"accuracy {metrics['eval/greedy_accuracy']:.2f}")

    policylab.train(task="arithmetic", steps=200, callbacks=[StopWhenSolved()])

The hooks, in the order a step calls them: `on_step(step, metrics)` once the step's
training metrics are logged; `on_eval(step, metrics)` after each held-out evaluation (the
first at step 0, before training); `on_checkpoint(step, path)` once a checkpoint folder is
complete. Every callback's hook runs, in the order the list gives them; `metrics` is a copy.

To stop a run, raise `StopTraining` from any hook (a hook's return value is ignored). The
run ends cleanly at that step: it evaluates (if it was not evaluating already), writes a
checkpoint, the curves and the summary, and returns its result as usual. A stop raised at
the step-0 evaluation ends the run before any training, without a checkpoint. Any other
exception from a hook stops the run with that exception.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

HOOKS = ("on_step", "on_eval", "on_checkpoint")


class StopTraining(Exception):  # noqa: N818  (a signal, not an error)
    """Raised by a callback's hook: the run stops cleanly at this step."""


class Callback:
    """Base class of a callback: override the hooks you need (each does nothing here)."""

    def on_step(self, step: int, metrics: dict[str, float]) -> None:
        """After step `step`'s training metrics are logged."""

    def on_eval(self, step: int, metrics: dict[str, float]) -> None:
        """After a held-out evaluation at `step` (0: before training)."""

    def on_checkpoint(self, step: int, path: Path) -> None:
        """After the checkpoint of `step` was written to `path`."""


class Callbacks:
    """The run's callbacks, called in order; remembers a `StopTraining` from any hook."""

    def __init__(self, callbacks: Iterable[object] = ()) -> None:
        if any(hasattr(callbacks, hook) for hook in HOOKS):  # one callback, not a list
            callbacks = [callbacks]
        self.callbacks = list(callbacks or ())
        for i, callback in enumerate(self.callbacks):
            if not any(callable(getattr(callback, hook, None)) for hook in HOOKS):
                raise TypeError(
                    f"callbacks[{i}] = {callback!r} has none of the hooks {', '.join(HOOKS)}: "
                    "subclass policylab.callbacks.Callback and override the ones you need"
                )
        self.stop: StopTraining | None = None

    def on_step(self, step: int, metrics: dict[str, float]) -> None:
        self._call("on_step", step, dict(metrics))

    def on_eval(self, step: int, metrics: dict[str, float]) -> None:
        self._call("on_eval", step, dict(metrics))

    def on_checkpoint(self, step: int, path: Path) -> None:
        self._call("on_checkpoint", step, path)

    def _call(self, hook: str, step: int, argument) -> None:
        for callback in self.callbacks:
            method = getattr(callback, hook, None)
            if method is None:
                continue
            try:
                method(step, argument)
            except StopTraining as stop:
                if self.stop is None:
                    log.info(
                        "%s.%s asked to stop at step %d%s",
                        type(callback).__name__,
                        hook,
                        step,
                        f": {stop}" if str(stop) else "",
                    )
                    self.stop = stop
