"""The arena's runs as Ray tasks: `policylab arena ... --ray [ADDRESS]`.

A run is what it is without Ray: `runner.run_one` writes its config, starts `policylab
train` in a child process (resumed from the run folder's checkpoint when it has one),
logs to `logs/<run>.log` and marks it done or failed. Ray only chooses the machine: each
run is one task that calls `run_one` on its worker, asking for the run's resources —
`num_cpus` = the run's torch threads (the machine's cores / --jobs, as without Ray, so
the numbers are the same; at most a node's CPUs), and one GPU when the run's device is
cuda, or auto on a cluster that has GPUs. Without an address the cluster is local, with
CPUs for --jobs runs at once; with one ("auto", "ray://head:10001") every worker must see
the arena folder at the same path (a shared file system) and have policylab installed.

Faults. A worker that dies (killed, preempted, out of memory) takes its training process
with it (the child's parent-death signal, processes.py); Ray runs the task again, up to
`MAX_RETRIES` times, and `run_one` resumes the run from its latest checkpoint. A training
process killed by a signal while its worker lives is retried the same way (`RunKilled`);
one that exits with an error is reported as failed, as without Ray (the same error would
come back). Ctrl-C cancels every task, which ends their workers and training processes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from policylab.arena.processes import Children
from policylab.ray_cluster import cluster

log = logging.getLogger(__name__)

MAX_RETRIES = 3  # attempts after the first, each resumed from the run's checkpoint
WORKER_DIED = -1  # the `.failed` code of a run whose worker died on every attempt


class RunKilled(RuntimeError):
    """The training process was killed by a signal (its exit code is minus the signal):
    raised in the task so that Ray runs it again."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code

    def __str__(self) -> str:
        return f"the training process was killed by signal {-self.code}"


def attempt(run: Callable, folder: Path, spec, algo: str, seed: int, threads: int) -> int | None:
    """One attempt of a run, on a Ray worker: `run` (runner.run_one), raising `RunKilled`
    when the training process was killed so that Ray retries it from its checkpoint."""
    code = run(folder, spec, algo, seed, threads, Children())
    if code is not None and code < 0:
        raise RunKilled(code)
    return code


def gpus_for(config: Any, cluster_gpus: float) -> int:
    """GPUs a run asks Ray for: 1 for device cuda or cuda:N (Ray gives the task its own
    GPU, which the run sees as cuda:0), 1 for device auto when the cluster has GPUs,
    else 0 (control and tabular runs have no device field: CPU)."""
    device = getattr(config, "device", "cpu")
    return int(device.startswith("cuda") or (device == "auto" and cluster_gpus > 0))


class RayRuns:
    """The arena's runs on a Ray cluster, as a context manager that joins the cluster (a
    local one of `local_cpus` CPUs when `address` is None) and leaves it. `run_one` has
    the signature of `runner.run_one`; `stopped` and `stop()` are those of `Children`.
    The runner hands over what a run is: `run` (runner.run_one, called on the worker),
    `config_of` (the run's config, for its device) and `log_of` (its log file)."""

    def __init__(
        self,
        address: str | None,
        *,
        local_cpus: int,
        run: Callable[..., int | None],
        config_of: Callable[..., Any],
        log_of: Callable[..., Path],
    ) -> None:
        self._run, self._config_of, self._log_of = run, config_of, log_of
        self._cluster = cluster(address, num_cpus=local_cpus)
        self._lock = threading.Lock()
        self._running: set = set()
        self.stopped = False

    def __enter__(self) -> RayRuns:
        self.ray = self._cluster.__enter__()
        self._task = self.ray.remote(attempt)
        self._gpus = self.ray.cluster_resources().get("GPU", 0)
        nodes = [n["Resources"].get("CPU", 0) for n in self.ray.nodes() if n.get("Alive")]
        self._node_cpus = max(1, int(max(nodes, default=1)))
        return self

    def __exit__(self, *exc: Any) -> bool | None:
        return self._cluster.__exit__(*exc)

    def run_one(
        self, folder: Path, spec, algo: str, seed: int, threads: int, _children=None
    ) -> int | None:
        """The run's exit code once its task ends (retries included); None when the arena
        was stopped before or during it. The folder goes to the worker as an absolute path
        (a worker of a remote cluster has another working directory); a run asks for no
        more CPUs than the largest node has."""
        from ray.exceptions import RayError, TaskCancelledError

        folder = Path(folder).absolute()
        threads = min(threads, self._node_cpus)
        options = dict(
            num_cpus=threads,
            num_gpus=gpus_for(self._config_of(folder, spec, algo, seed), self._gpus),
            max_retries=MAX_RETRIES,
            retry_exceptions=[RunKilled],
        )
        with self._lock:
            if self.stopped:
                return None
            task = self._task.options(**options)
            ref = task.remote(self._run, folder, spec, algo, seed, threads)
            self._running.add(ref)
        try:
            return self.ray.get(ref)
        except TaskCancelledError:
            return None
        except RayError as err:  # the worker died, or the process was killed, every time
            if self.stopped:
                return None
            code = getattr(getattr(err, "cause", None), "code", WORKER_DIED)
            log.warning(
                "%s failed after %d retries: %s", spec.run_name(algo, seed), MAX_RETRIES, err
            )
            log_file = self._log_of(folder, spec, algo, seed)
            log_file.parent.mkdir(parents=True, exist_ok=True)
            with log_file.open("a") as out:
                out.write(f"ray: the run failed after {MAX_RETRIES} retries: {err}\n")
            log_file.with_suffix(".failed").write_text(f"{code}\n")
            return code
        finally:
            with self._lock:
                self._running.discard(ref)

    def stop(self) -> None:
        """Cancel every task: Ray ends their workers, whose training processes follow."""
        with self._lock:
            self.stopped = True
            refs = list(self._running)
        for ref in refs:
            self.ray.cancel(ref, force=True)
