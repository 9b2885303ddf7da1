"""The arena's training processes: each run is a child that dies with the arena.

`die_with_parent` gives each child a parent-death signal (Linux `prctl(PR_SET_PDEATHSIG,
SIGTERM)`), so a `kill -9` of the arena leaves no orphan writing to a run folder that a
re-run resumes; `Children` tracks the running children and, on an interruption or an
error in the arena, ends them and waits."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

# PR_SET_PDEATHSIG (linux/prctl.h): the signal a process gets when its parent dies
_PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    """libc's prctl, resolved in the parent (the child only calls it), or None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn that makes the child receive SIGTERM when the arena dies, even by
    kill -9, so that no orphaned run keeps writing to a folder that a re-run resumes.
    Linux only; elsewhere None (the arena still ends its children when it is interrupted
    or fails, in `Children.stop`)."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the arena died before prctl took effect
            os._exit(128 + signal.SIGTERM)

    return preexec


class Children:
    """The training processes this arena started. The signal of PR_SET_PDEATHSIG is sent
    when the *thread* that started the child ends; each child is started by a pool thread
    that waits for it, so it fires only when the arena's process dies. On an interruption
    or an error in the arena, `stop` ends every child and waits for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self.stopped = False

    def run(self, cmd: list[str], **popen: Any) -> int | None:
        """The child's exit code, or None when the arena stopped before or during it."""
        with self._lock:
            if self.stopped:
                return None
            proc = subprocess.Popen(cmd, preexec_fn=die_with_parent(), **popen)
            self._running.add(proc)
        code = proc.wait()
        with self._lock:
            self._running.discard(proc)
            return None if self.stopped else code

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM to every running child, then SIGKILL to any still alive after grace_s."""
        with self._lock:
            self.stopped = True
            procs = list(self._running)
        for proc in procs:
            proc.terminate()
        deadline = time.monotonic() + grace_s
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                logger.warning("run process %d ignored SIGTERM; killing it", proc.pid)
                proc.kill()
                proc.wait()
