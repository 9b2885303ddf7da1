"""Process groups for training across processes: who this process is (`World`), joining and
leaving the group (`init`, `destroy`), starting N local workers (`spawn`), and the few
collectives the trainers use (`all_reduce_sum`, `all_reduce_mean`, `all_gather_objects`,
`broadcast_parameters`).

Two ways in, the same code after:
- `torchrun --nproc-per-node N ...`: torchrun sets RANK, WORLD_SIZE, LOCAL_RANK,
  MASTER_ADDR and MASTER_PORT; `env_world()` reads them and `init()` joins with `env://`.
- `spawn(fn, N)`: N local processes (torch.multiprocessing, start method "spawn"), joined
  through a file store; rank 0's return value comes back.

The backend follows the device (devices.py): gloo on the CPU, NCCL on CUDA, where rank r
uses GPU `LOCAL_RANK`. Every collective waits at most `timeout_s`; a rank that raises makes
`spawn` stop the other ranks and raise `WorkerFailed` naming that rank, with its traceback.
"""

from __future__ import annotations

import datetime
import os
import pickle
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from policylab.devices import resolve_device

TIMEOUT_S = 300.0  # our choice: long enough for a slow generation round, short enough to fail
ENV_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


class WorkerFailed(RuntimeError):
    """A worker process raised (its rank and traceback are in the message) or died."""


@dataclass(frozen=True)
class World:
    """This process's place in the job: rank r of `size` processes, `local_rank` on its
    machine (the GPU it uses)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that logs and checkpoints."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1


SINGLE = World()


def env_world() -> World | None:
    """The World that torchrun's environment variables describe, or None outside torchrun."""
    if "WORLD_SIZE" not in os.environ:
        return None
    try:
        rank, size = int(os.environ.get("RANK", "0")), int(os.environ["WORLD_SIZE"])
        local = int(os.environ.get("LOCAL_RANK", str(rank)))
    except ValueError:
        shown = {k: os.environ.get(k) for k in ENV_KEYS}
        raise ValueError(f"torch.distributed environment {shown}: integers expected") from None
    if size < 1 or not 0 <= rank < size:
        raise ValueError(f"RANK={rank} with WORLD_SIZE={size}: accepted 0 <= RANK < WORLD_SIZE")
    return World(rank, size, local)


def current() -> World:
    """This process's World: from the initialised process group, else SINGLE."""
    if not (dist.is_available() and dist.is_initialized()):
        return SINGLE
    env = env_world()
    local = env.local_rank if env is not None else dist.get_rank()
    return World(dist.get_rank(), dist.get_world_size(), local)


def backend_for(device: str) -> str:
    """ "nccl" when `device` resolves to a CUDA GPU, else "gloo"."""
    return "nccl" if resolve_device(device).type == "cuda" else "gloo"


def init(
    device: str = "auto",
    *,
    world: World | None = None,
    init_method: str = "env://",
    timeout_s: float = TIMEOUT_S,
) -> World:
    """Join the process group as `world` (default: torchrun's environment); on CUDA, make
    GPU `local_rank` this process's device first, so that device="cuda"/"auto" means it."""
    world = world or env_world()
    if world is None:
        raise ValueError(
            "no torch.distributed environment (RANK, WORLD_SIZE): start the job with torchrun "
            "--nproc-per-node N, or with workers=N to spawn N local processes"
        )
    backend = backend_for(device)
    if backend == "nccl":
        torch.cuda.set_device(world.local_rank)
    dist.init_process_group(
        backend,
        init_method=init_method,
        rank=world.rank,
        world_size=world.size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    return world


def destroy() -> None:
    """Leave the process group (nothing when none was joined)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


# ---- collectives ----------------------------------------------------------------------------
def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Σ over ranks, in place; returned for chaining (no-op in one process)."""
    if current().distributed:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def all_reduce_mean(tensor: torch.Tensor) -> torch.Tensor:
    """The mean over ranks, in place (no-op in one process)."""
    size = current().size
    if size > 1:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        tensor.div_(size)
    return tensor


def any_rank(flag: bool) -> bool:
    """Whether `flag` is true on any rank (every rank must ask, in the same order)."""
    if not current().distributed:
        return flag
    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    return bool(all_reduce_sum(torch.tensor([float(flag)], device=device)) > 0)


def all_gather_objects(obj: Any) -> list[Any]:
    """[rank 0's obj, rank 1's, ...] on every rank (pickled: tensors, lists, dataclasses)."""
    if not current().distributed:
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast_parameters(module: torch.nn.Module, src: int = 0) -> None:
    """Every rank's parameters and buffers become rank `src`'s (no-op in one process)."""
    if not current().distributed:
        return
    with torch.no_grad():
        for tensor in [*module.parameters(), *module.buffers()]:
            dist.broadcast(tensor.data, src)


# ---- local workers --------------------------------------------------------------------------
def spawn(
    fn: Callable[..., Any],
    workers: int,
    *args: Any,
    device: str = "auto",
    store: str | Path | None = None,
    timeout_s: float = TIMEOUT_S,
    threads: int | None = None,
) -> Any:
    """Run `fn(*args)` in `workers` new processes joined in one process group (through a
    file store in `store`, default a fresh temporary folder) and return rank 0's result.

    Each worker sees torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK), so code that
    reads `env_world()` behaves as under torchrun; `threads` sets torch's CPU threads per
    worker. A worker that raises stops the others and raises `WorkerFailed` here."""
    if workers < 1:
        raise ValueError(f"workers = {workers}: at least 1 process is needed")
    with tempfile.TemporaryDirectory(prefix="policylab-ddp-") as scratch:
        folder = Path(store) if store is not None else Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        rendezvous = folder / "store"
        rendezvous.unlink(missing_ok=True)  # a file store must not outlive its job
        result, errors = Path(scratch) / "result.pkl", Path(scratch) / "errors"
        errors.mkdir()
        options = (workers, f"file://{rendezvous}", device, timeout_s, threads, result, errors)
        try:
            mp.start_processes(_worker, args=(fn, args, options), nprocs=workers)
        except (mp.ProcessRaisedException, mp.ProcessExitedException) as err:
            raise WorkerFailed(_first_error(errors, err, workers)) from None
        return pickle.loads(result.read_bytes()) if result.exists() else None


def _first_error(errors: Path, err: Exception, workers: int) -> str:
    """The error of the rank that failed first: the others' are consequences (a collective
    whose partner is gone), though one of them may be the first that torch sees exit."""
    raised = sorted(errors.iterdir(), key=lambda p: int(p.name.split("-")[0]))
    if raised:
        rank = raised[0].name.split("-rank")[1]
        return f"rank {rank} of {workers} raised:\n{raised[0].read_text()}"
    what = "raised" if isinstance(err, mp.ProcessRaisedException) else "died"
    return f"rank {getattr(err, 'error_index', '?')} of {workers} {what}: {err}"


def _worker(rank: int, fn: Callable[..., Any], args: tuple, options: tuple) -> None:
    workers, init_method, device, timeout_s, threads, result, errors = options
    if threads is not None:
        torch.set_num_threads(threads)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(workers), LOCAL_RANK=str(rank))
    world = World(rank, workers, rank)
    try:
        init(device, world=world, init_method=init_method, timeout_s=timeout_s)
        out = fn(*args)
        if world.is_main:
            result.write_bytes(pickle.dumps(out))
    except BaseException:
        (errors / f"{time.time_ns()}-rank{rank}").write_text(traceback.format_exc())
        raise
    finally:
        destroy()
