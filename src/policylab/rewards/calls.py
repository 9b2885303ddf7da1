"""One call of a user's reward function, contained: every exception but KeyboardInterrupt is
caught (`sys.exit` in a reward must not end a run), and with a timeout the call runs in a
worker thread that is abandoned when it does not return in time.

A Python thread cannot be killed. An abandoned call is sent `RewardTimeout` at its next
bytecode, which stops a reward spinning in Python code; one blocked in C code or waiting
stays blocked, harmlessly, in a daemon thread that does not keep the process alive."""

from __future__ import annotations

import ctypes
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class RewardTimeout(BaseException):  # noqa: N818 - raised inside the abandoned call only
    """Sent into a reward call that ran past its timeout (a BaseException, so that a
    reward's own `except Exception` does not swallow it)."""


@dataclass
class Call:
    """The outcome of one call: its value, or the exception it raised (with the formatted
    traceback), or `timed_out`."""

    value: Any = None
    error: BaseException | None = None
    traceback: str = ""
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out


def call(fn: Callable, args: tuple, kwargs: dict, timeout_s: float, name: str) -> Call:
    """`fn(*args, **kwargs)` contained; `timeout_s = 0` calls it in this thread, without a
    limit (for rewards that need the main thread, e.g. to use signals)."""
    if not timeout_s:
        try:
            return Call(value=fn(*args, **kwargs))
        except KeyboardInterrupt:
            raise
        except BaseException as err:  # noqa: BLE001 - sys.exit in a reward is a failed sample
            return Call(error=err, traceback=traceback.format_exc(limit=3))
    outcome = Call()

    def work() -> None:
        try:
            outcome.value = fn(*args, **kwargs)
        except BaseException as err:  # noqa: BLE001 - handed to the calling thread
            outcome.error, outcome.traceback = err, traceback.format_exc(limit=3)

    worker = threading.Thread(target=work, name=f"reward {name}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        _interrupt(worker)
        return Call(timed_out=True)
    if isinstance(outcome.error, KeyboardInterrupt):
        raise outcome.error
    return outcome


def _interrupt(worker: threading.Thread) -> None:
    # CPython's documented hook for raising in another thread (threading has no kill)
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(worker.ident), ctypes.py_object(RewardTimeout)
    )
