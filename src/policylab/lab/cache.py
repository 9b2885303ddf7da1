"""The one home of the lab's cached base models (papers/seed_generative.md G0.7): a model
built from a seed is saved under `$POLICYLAB_CACHE` (default ~/.cache/policylab) with a
checksum of its settings in the file name, written atomically (parallel arena workers never
read a torn file), and rebuilt when the file cannot be read."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch
from torch import nn

log = logging.getLogger(__name__)

M = TypeVar("M", bound=nn.Module)


def cache_dir() -> Path:
    return Path(os.environ.get("POLICYLAB_CACHE", Path.home() / ".cache" / "policylab"))


def cache_file(stem: str, settings: str) -> Path:
    """`<cache>/<stem>_<first 12 hex of sha256(settings)>.pt`."""
    return cache_dir() / f"{stem}_{hashlib.sha256(settings.encode()).hexdigest()[:12]}.pt"


def load_or_build(
    path: Path,
    fresh: Callable[[], M],
    build: Callable[[], M],
    *,
    part: Callable[[M], nn.Module] = lambda model: model,
    what: str = "model",
) -> M:
    """The model whose weights (`part(model)`'s state dict) are cached at `path`: loaded
    into `fresh()` when the file is readable, else `build()` and saved atomically."""
    # built whether or not the file is read, and build() runs on a forked global generator:
    # a run draws the same global random numbers with a cold cache as with a warm one
    model = fresh()
    if path.is_file():
        try:
            part(model).load_state_dict(torch.load(path, weights_only=True))
            return model
        except Exception as err:  # noqa: BLE001  (a torn or foreign file: torch raises many kinds)
            log.warning("the cached %s %s is unreadable (%s): rebuilding it", what, path, err)
    started = time.perf_counter()
    with torch.random.fork_rng(devices=[]):  # whatever build() draws stays out of the run
        model = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save(part(model).state_dict(), tmp)
    tmp.replace(path)  # atomic
    log.info("built the %s in %.1f s: %s", what, time.perf_counter() - started, path)
    return model
