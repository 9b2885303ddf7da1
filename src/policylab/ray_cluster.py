"""Ray, the optional engine behind `policylab arena --ray` and the reward actors: importing
it with an error that names the extra, and joining a cluster (a local one by default).

    with cluster("auto"):          # the running cluster of `ray start --head`
        ...
    with cluster(None, num_cpus=4):  # a local cluster of 4 CPUs, shut down on exit
        ...

A Ray session already started in this process (e.g. by the user's own `ray.init`) is
used as it is and left running."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

log = logging.getLogger(__name__)

INSTALL = 'pip install "policylab[ray]"'


def import_ray() -> ModuleType:
    """The `ray` module, or an ImportError that says which extra to install."""
    try:
        import ray
    except ImportError as err:
        raise ImportError(
            f"Ray is not installed (needed by --ray and policylab.rewards.ray_workers): {INSTALL}"
        ) from err
    return ray


@contextmanager
def cluster(address: str | None = None, *, num_cpus: int | None = None) -> Iterator[ModuleType]:
    """Ray connected for the block: to `address` (e.g. "auto" or "ray://head:10001"), or
    to a new local cluster of `num_cpus` CPUs when address is None. A cluster this block
    started is shut down at its end; one already connected is used and kept."""
    ray = import_ray()
    if ray.is_initialized():
        if address:
            log.info("Ray is already initialised in this process; using it, not %s", address)
        yield ray
        return
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()
