"""A run folder's defences against interruption, a second process and untrusted files
(trainers/run.py uses them): the folder's lock, checkpoint loading with
`weights_only=True`, JSONL rows that survive a torn last line, and the fields a resumed
run must keep."""

from __future__ import annotations

import atexit
import json
import logging
import os
import pickle
import re
import socket
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

log = logging.getLogger(__name__)

LOCK = ".lock"
# fields a resumed run keeps: which run it is, and the shape of its networks (a checkpoint
# of one shape does not load into another)
KEPT_ON_RESUME = (
    "task",
    "algo",
    "seed",
    "model",
    "lora",
    "use_sde",
    "hidden",
    "normalize_obs",
    "knobs",  # a tabular or lab task's instance (another would mix two instances in one curve)
)


class RunFolderInUse(FileExistsError):
    """Another live process owns the run folder."""


class RunFolderError(OSError):
    """The run folder could not be written (disk full, read-only): the run stopped."""


def read_jsonl(path: Path) -> list[dict]:
    """The rows of a run folder's JSONL file ([] if absent). A torn last line (a kill in
    the middle of a write) is dropped with a warning; a bad line before it is an error
    naming the file and the line."""
    if not path.exists():
        return []
    lines = [(i, line) for i, line in enumerate(path.read_bytes().split(b"\n"), 1)]
    lines = [(i, line) for i, line in lines if line.strip()]
    rows = []
    for i, line in lines:
        try:
            row = json.loads(line.decode())
            if not isinstance(row, dict):
                raise ValueError("not a JSON object")
        except ValueError as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            if i == lines[-1][0]:
                log.warning("%s: dropped its torn last line %d (%s)", path, i, err)
                break
            raise ValueError(
                f"{path}, line {i}: not a JSON object ({err}); a run folder's metrics are "
                "written one whole line at a time, so this file was changed by hand or is "
                "corrupt: fix or delete that line"
            ) from None
        rows.append(row)
    return rows


def load_state(path: Path) -> dict[str, Any]:
    """A checkpoint's state.pt, read with `weights_only=True`: tensors and plain values
    (numbers, strings, lists, dicts, numpy arrays of numbers: a sampler's statistics) only.
    A file holding anything else is refused, never run: unpickling it could execute code."""
    try:
        with torch.serialization.safe_globals(_NUMPY_ARRAYS):
            return torch.load(path, weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL (\S+)|got <class '([^']+)'>", str(err))
        what = f" ({found.group(1) or found.group(2)})" if found else ""
        raise ValueError(
            f"{path}: refused to load: it holds a Python object{what}, not only tensors and "
            "plain values as the checkpoints policylab writes; loading it could run code. "
            "Resume only run folders you trust"
        ) from None


def _numpy_arrays() -> list:
    """What unpickling a numpy array or scalar of booleans or numbers calls (object arrays
    stay refused: their dtype class is not in the list)."""
    try:
        from numpy._core.multiarray import _reconstruct, scalar  # numpy >= 2
    except ImportError:
        from numpy.core.multiarray import _reconstruct, scalar
    numbers = [type(np.dtype(code)) for code in "?bBhHiIlLqQefdgFDG"]
    return [_reconstruct, scalar, np.ndarray, np.dtype, *numbers]


_NUMPY_ARRAYS = _numpy_arrays()


def check_resumable(config_file: Path, config: dict[str, Any]) -> None:
    """A resumed run keeps the task, algorithm, seed and model it started with."""
    check_keeps(yaml.safe_load(config_file.read_text()) or {}, config, config_file.parent)


def check_keeps(saved: dict[str, Any], config: dict[str, Any], where: Any) -> None:
    """`config` keeps every field of KEPT_ON_RESUME that the run `where` was started with
    (`saved`, its config.yaml): another value would mix two runs in one folder."""
    for key in KEPT_ON_RESUME:
        if key in saved and key in config and saved[key] != config[key]:
            raise ValueError(
                f"cannot resume {where} with {key}={config[key]!r}: it was started with "
                f"{key}={saved[key]!r}. A resumed run keeps its {', '.join(KEPT_ON_RESUME)} "
                "(other fields, e.g. steps, may change); choose another run_dir to change them"
            )


# ---- the folder's owner -----------------------------------------------------------------
_HELD: dict[Path, int] = {}  # lock file -> its open descriptor, for this process's folders


def acquire_lock(folder: Path) -> Path | None:
    """Own `folder`: an exclusive `flock` on folder/.lock, which records our pid and host.
    The kernel drops the lock when its process dies, so a lock file naming a process that
    no longer holds it is stale (a kill -9): taken over with a warning. A live owner makes
    this a `RunFolderInUse` error. Released by `release_lock`, at exit, or by the same
    process locking the folder again (an earlier attempt that raised)."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): the folder is not locked
        return None
    path = (folder / LOCK).resolve()
    release_lock(path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = _owner(fd)
        os.close(fd)
        raise RunFolderInUse(
            f"run folder {folder} is in use by process {owner.get('pid', '?')} on "
            f"{owner.get('host', '?')} (lock {path}): wait for it to end or stop it (an "
            "arena's training child left running, a second --resume of the same folder)"
        ) from None
    owner = _owner(fd)
    if owner:
        log.warning(
            "run folder %s: taking over the stale lock of process %s on %s (it ended "
            "without releasing it)",
            folder,
            owner.get("pid", "?"),
            owner.get("host", "?"),
        )
    me = json.dumps({"pid": os.getpid(), "host": socket.gethostname()}) + "\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, me.encode(), 0)
    _HELD[path] = fd
    return path


def release_lock(path: Path | None) -> None:
    """Give up a lock this process holds (the file stays, empty: deleting it would let two
    processes lock two different files)."""
    fd = _HELD.pop(path, None) if path is not None else None
    if fd is None:
        return
    try:
        os.ftruncate(fd, 0)
    except OSError:  # a read-only or full folder: the kernel lock goes anyway
        pass
    os.close(fd)


@atexit.register
def _release_all() -> None:
    for path in list(_HELD):
        release_lock(path)


def _owner(fd: int) -> dict:
    try:
        owner = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except ValueError:
        return {"pid": "unknown (unreadable lock)"}
    return owner if isinstance(owner, dict) else {}
