"""Data-parallel training of the language-model learner (`distributed=ddp`): W processes,
each generating and scoring its share of a step's prompts, each learning on its share of
every minibatch, with gradients summed across ranks before the optimiser step.

Why a 2-process run computes the single-process run's loss and gradients on the same batch:

1. Rollouts. The prompt stage is the same on every rank (same seed, same updates), so every
   rank draws the same prompts for a round; rank r generates and scores the r-th
   contiguous block of them (`ShardedWorkflow`, its own sampling seed), and the round's
   rollouts are gathered, so every rank then holds the whole round, as one process would.
   Everything computed from a step's batch — filters and refills, reward shaping, the
   reference's log-probs, the advantages (group statistics, and batch statistics such as
   REINFORCE++'s whitening or GRPO's scale="batch"), advantage-time selections, metrics —
   is therefore the single-process computation on the whole batch, with no per-estimator
   reduction to write (the batch of token ids and rewards is small; the reference pass is
   repeated on each rank, the price of that simplicity).
2. Loss. `llm_update.update` fixes each minibatch's global normaliser
   (algebra/aggregate.py) from the whole minibatch, which every rank holds, then rank r
   forwards only its share of the minibatch's groups (`DataParallel.share`; groups are
   kept whole on one rank). Its loss is its rows' numerator over the global normaliser, so
   the ranks' losses add up to the single-process loss,
3. and the ranks' gradients add up to its gradient: `DataParallel.gradients` all-reduces
   the SUM of the .grad tensors (not DDP's mean, which would divide by W), before
   clipping, so the clipped norm and the AdamW step are the single-process ones.

Rank 0 writes the one run folder (metrics, samples, checkpoints, model); the other ranks
write to a scratch folder removed at the end, read rank 0's checkpoint on resume, and
stop when a callback on rank 0 stops the run (`RankRun.stopping` is agreed by all ranks).
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from policylab.config import ConfigError
from policylab.distributed import launch
from policylab.distributed.launch import World
from policylab.rollouts import Rollouts
from policylab.trainers.run import Run, latest_checkpoint
from policylab.trainers.run_safety import load_state
from policylab.workflows.single_turn import RolloutInfo

log = logging.getLogger(__name__)


# ---- starting a job -------------------------------------------------------------------------
def needs_launch(cfg) -> bool:
    """`cfg` asks for DDP and this process is not yet in a process group: it must start the
    workers (workers=N) or join torchrun's group."""
    if getattr(cfg, "distributed", "none") != "ddp" or launch.current().distributed:
        return False
    return launch.env_world() is not None or cfg.workers > 1


def start(train_fn, cfg, **kwargs):
    """Run `train_fn(cfg, **kwargs)` on every rank and return rank 0's result: in this
    process when torchrun started it (joining torchrun's group), else in `cfg.workers`
    spawned processes. Callbacks run on rank 0 only."""
    env = launch.env_world()
    objects = kwargs.get("objects")
    if env is None and objects:
        raise ConfigError(
            "workers > 1 starts new processes, which would each get a pickled copy of the "
            "model, data or reward objects given in Python (the model would not be trained in "
            "place); give them by name or file (model=<folder>, task=<data file>, rewards="
            "{'module:function': w}), or start the job with torchrun"
        )
    if env is None:
        gpus = torch.cuda.device_count()
        if launch.backend_for(cfg.device) == "nccl" and cfg.workers > gpus:
            raise ConfigError(
                f"workers = {cfg.workers} on device {cfg.device!r}: each process needs its own "
                f"GPU and this machine has {gpus}; accepted workers 1 .. {gpus}, or device=cpu"
            )
        threads = max(1, torch.get_num_threads() // cfg.workers)
        return launch.spawn(
            _train_rank, cfg.workers, train_fn, cfg, kwargs, device=cfg.device, threads=threads
        )
    if cfg.workers not in (1, env.size):
        raise ConfigError(
            f"workers = {cfg.workers}, but torchrun started WORLD_SIZE = {env.size} processes: "
            "under torchrun leave workers at 1 (torchrun's --nproc-per-node decides)"
        )
    launch.init(cfg.device, world=env)
    try:
        return _train_rank(train_fn, cfg, kwargs)
    finally:
        launch.destroy()


def _train_rank(train_fn, cfg, kwargs: dict):
    if launch.current().is_main:
        return train_fn(cfg, **kwargs)
    # one progress bar, rank 0's callbacks only, and the result names rank 0's folder
    quiet = cfg.model_copy(update={"progress": False})
    result = train_fn(quiet, **{**kwargs, "callbacks": ()})
    return dataclasses.replace(result, run_dir=str(cfg.folder))


def world_of(cfg) -> World:
    """This rank's World when `cfg` trains with DDP, else SINGLE."""
    return launch.current() if getattr(cfg, "distributed", "none") == "ddp" else launch.SINGLE


def check(plan, world: World) -> None:
    """What DDP does not support yet, refused before any model loads: interactive tasks
    (episodes), stages that generate outside a round (VAS's scoring pass, offline data),
    augmenters (they call the workflow themselves) and learn-time stages (CAPO's state
    would learn from each rank's micro-batches only, and the ranks would drift apart)."""
    if not world.distributed:
        return
    refused = []
    if plan.agent is not None:
        refused.append(f"the multi-turn task {plan.task.name}")
    refused += [
        f"stage {s.name!r}"
        for s in plan.pipeline
        if hasattr(s, "prepare") or hasattr(s, "setup") or s.kind in ("augment", "learn")
    ]
    if refused:
        raise ConfigError(
            f"distributed=ddp does not support {', '.join(refused)} yet: train it in one "
            "process (distributed=none)"
        )


# ---- the run folder -------------------------------------------------------------------------
class RankRun(Run):
    """The run folder as one rank sees it: rank 0's is the real one; another rank's is a
    scratch folder (no trackers, no checkpoints) removed at `close`, which resumes from
    rank 0's newest checkpoint. `stopping` is true on every rank once it is on any."""

    def __init__(self, world: World, run_dir, config: dict, *, resume: bool = False, **options):
        self.world, self.main_dir = world, Path(run_dir)
        if world.is_main:
            super().__init__(run_dir, config, resume=resume, **options)
        else:
            scratch = tempfile.mkdtemp(prefix=f"policylab-rank{world.rank}-")
            super().__init__(scratch, config, keep_checkpoints=1, report_to=())

    @property
    def stopping(self) -> bool:
        return launch.any_rank(self.callbacks.stop is not None)

    @property
    def keeps_outputs(self) -> bool:
        """Only rank 0's folder keeps what a run leaves (another rank's is scratch)."""
        return self.world.is_main

    def load_checkpoint(self):
        if self.world.is_main:
            return super().load_checkpoint()
        path = latest_checkpoint(self.main_dir)
        return None if path is None else (path, load_state(path / "state.pt"))

    def save_checkpoint(self, *args, **kwargs):
        if self.world.is_main:
            return super().save_checkpoint(*args, **kwargs)
        return None

    def save_best(self, *args, **kwargs):
        if self.world.is_main:
            return super().save_best(*args, **kwargs)
        return None

    def close(self) -> None:
        super().close()
        if not self.world.is_main:
            shutil.rmtree(self.dir, ignore_errors=True)


def run_folder(world: World, run_dir, config: dict, **options) -> Run:
    """A plain `Run` in one process, a `RankRun` in a DDP job."""
    return (
        RankRun(world, run_dir, config, **options)
        if world.distributed
        else Run(run_dir, config, **options)
    )


# ---- rollouts: each rank its share of a round, then the whole round on every rank -------------
def sampling_generator(generator: torch.Generator, world: World) -> torch.Generator:
    """The generator the workflow samples with: the run's own in one process; in a DDP job
    a separate one per rank (`ShardedWorkflow` seeds it each round), so that the run's
    generator, which orders minibatches, stays the same on every rank."""
    return torch.Generator() if world.distributed else generator


class ShardedWorkflow:
    """A workflow (`workflow(examples) -> (Rollouts, RolloutInfo)`) whose rank r rolls out
    the r-th contiguous block of the examples, with the sampling generator seeded from the
    run's generator (the same draw on every rank) + r; every rank returns the gathered
    round: groups in example order, ids 0..n−1, times the slowest rank's."""

    def __init__(self, workflow, world: World, generator: torch.Generator, sampler) -> None:
        self.workflow, self.world = workflow, world
        self.generator, self.sampler = generator, sampler

    def __getattr__(self, name: str) -> Any:  # task, tokenizer, policy, ... of the workflow
        return getattr(self.workflow, name)

    def __call__(self, examples: list[dict]) -> tuple[Rollouts, RolloutInfo]:
        seed = int(torch.randint(0, 2**62, (1,), generator=self.generator))
        self.sampler.manual_seed(seed + self.world.rank)
        lo, hi = share(len(examples), self.world)
        mine = self.workflow(examples[lo:hi]) if hi > lo else None
        rounds = [r for r in launch.all_gather_objects(mine) if r is not None]
        batches, infos, offset = [], [], 0
        for batch, info in rounds:
            batches.append(batch.replace(group_ids=batch.group_ids + offset))
            offset += int(batch.group_ids.max()) + 1 if len(batch) else 0
            infos.append(info)
        info = RolloutInfo.concat(infos)
        slowest = {k: max(getattr(i, k) for i in infos) for k in ("generate_s", "score_s")}
        return Rollouts.concat(batches), dataclasses.replace(info, **slowest)


def share(n: int, world: World) -> tuple[int, int]:
    """[lo, hi): rank r's contiguous block of n items (sizes differ by at most one)."""
    return n * world.rank // world.size, n * (world.rank + 1) // world.size


def shard(workflow, world: World, generator: torch.Generator):
    """The workflow itself in one process; a ShardedWorkflow in a DDP job."""
    if not world.distributed:
        return workflow
    return ShardedWorkflow(workflow, world, generator, workflow.generator)


def same_start(policies, world: World) -> None:
    """Every rank starts from rank 0's weights (value heads and LoRA adapters included)."""
    for member in policies.members if world.distributed else ():
        launch.broadcast_parameters(member.policy, src=0)


# ---- the learner ----------------------------------------------------------------------------
class Local:
    """One process: every row of a minibatch is this learner's; nothing is exchanged."""

    def share(self, minibatch: Rollouts, advantages: torch.Tensor):
        return minibatch, advantages

    def gradients(self, parameters) -> None:
        pass

    def metrics(self, metrics: list) -> list:
        return metrics


LOCAL = Local()


class DataParallel:
    """Rank r of W learners: its share of each minibatch's groups, gradients summed."""

    def __init__(self, world: World) -> None:
        self.world = world

    def share(self, minibatch: Rollouts, advantages: torch.Tensor):
        """This rank's rows of `minibatch`: the r-th contiguous block of its groups, in the
        order they first appear (whole groups: a loss that reads its group sees all of it)."""
        ids = minibatch.group_ids
        groups = torch.tensor(list(dict.fromkeys(ids.tolist())), dtype=ids.dtype)
        lo, hi = share(len(groups), self.world)
        rows = torch.isin(ids, groups[lo:hi]).nonzero(as_tuple=True)[0]
        return minibatch.select(rows), advantages[rows]

    def gradients(self, parameters) -> None:
        """Each trained parameter's .grad becomes the sum over ranks; one that no rank
        touched stays None (as in one process, so AdamW leaves it alone)."""
        params = [p for p in parameters if p.requires_grad]
        if not params:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        touched = flat.new_tensor([float(p.grad is not None) for p in params])
        launch.all_reduce_sum(flat)
        launch.all_reduce_sum(touched)
        chunks = flat.split([p.numel() for p in params])
        for p, chunk, seen in zip(params, chunks, touched, strict=True):
            p.grad = chunk.view_as(p).clone() if seen > 0 else None

    def metrics(self, metrics: list) -> list:
        """Every rank's (tokens, metrics) of its micro-batches, rank 0's first."""
        return [m for part in launch.all_gather_objects(metrics) for m in part]


def learner_sync(cfg) -> Local | DataParallel:
    """How `llm_update.update` shares a minibatch: DataParallel in a DDP job, else LOCAL."""
    world = world_of(cfg)
    return DataParallel(world) if world.distributed else LOCAL
