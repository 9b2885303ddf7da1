"""SFT across gloo workers in three communication modes (papers/seed_agents.md §A10 testbed):
a freshly initialised tiny Llama learns arithmetic demonstrations, one data shard per worker.

- `ddp`: the gradients are all-reduced (averaged) every step; the replicas stay identical.
- `diloco`: H = `local_steps` inner AdamW steps, then the averaged pseudo-gradient drives the
  outer Nesterov SGD (`diloco.OuterLoop`); all-reduce in fp32.
- `dilocox` (provisional: the delay and compression rules are our reading of arXiv
  2506.21263's abstract): the one-step delay (the round's all_gather is issued with
  `async_op=True` and awaited a round later, `diloco.Delay`) and rank-r int8 compression with
  error feedback (`compression.Compressor`); the rank is probed on worker 0 every
  `rank_every` rounds and broadcast. `delay=0` or `compress=False` turn either part off
  (both off: exactly `diloco`).

Communication is counted exactly (payload bytes per worker per collective) and priced on a
simulated link (`links.Link`); nothing is slept. Metrics (rank 0's result): comm/bytes_total,
comm/bytes_per_round, comm/rank_mean, comm/compression_ratio, comm/sim_seconds,
comm/overlap_frac, loss/held_out, and the curve of (step, bytes, held-out loss).

    from policylab.distributed.diloco_sft import LowCommConfig, launch
    results = launch([LowCommConfig(mode="dilocox", inner_steps=200)], workers=2)

The process group here is this module's own (file store, 1 torch thread per worker).
"""

from __future__ import annotations

import dataclasses
import math
import random
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from policylab.distributed.compression import Compressor, probe_ranks
from policylab.distributed.diloco import Delay, OuterLoop
from policylab.distributed.links import Link, simulated_seconds
from policylab.models import TinyConfig, build_model, build_tokenizer
from policylab.tasks.arithmetic import Arithmetic
from policylab.trainers.sft_data import completion_loss, encode_rows, token_loss

MODES = ("ddp", "diloco", "dilocox")
FP32_BYTES = 4
RANK_BYTES = 4  # the probed ranks are broadcast as int32


@dataclass(frozen=True)
class LowCommConfig:
    """One run. Inner AdamW as OpenDiLoCo (lr 4e-4, weight decay 0.1, β (0.9, 0.95), clip 1.0,
    warm-up then cosine; our scaled-down warm-up); outer SGD lr 0.7, momentum 0.9, Nesterov;
    τ 0.9, probe every 10 rounds [ours], link 1 Gbps and 50 ms [ours]."""

    mode: str = "ddp"
    inner_steps: int = 1000
    local_steps: int = 50
    batch_size: int = 32
    lr: float = 4e-4
    weight_decay: float = 0.1
    warmup_steps: int = 50
    outer_lr: float = 0.7
    outer_momentum: float = 0.9
    rank_energy: float = 0.9
    rank_every: int = 10
    link_gbps: float = 1.0
    link_latency_ms: float = 50.0
    eval_every: int = 100
    eval_n: int = 256
    pool_size: int = 20_000
    hidden_size: int = 128
    num_hidden_layers: int = 4
    seed: int = 0
    delay: int = 1  # dilocox: rounds between a collective and its outer step (0: none)
    compress: bool = True  # dilocox: rank-r int8 payloads (False: fp32 all-reduce)
    record_params: bool = False  # tests: keep each worker's parameters after every sync

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode={self.mode!r} is invalid; accepted: {', '.join(MODES)}")
        for name in ("inner_steps", "local_steps", "batch_size", "eval_every", "rank_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} is invalid; accepted: an integer >= 1")
        if isinstance(self.delay, bool) or not isinstance(self.delay, int) or self.delay < 0:
            raise ValueError(f"delay={self.delay!r} is invalid; accepted: an integer >= 0")
        if self.mode != "ddp" and self.eval_every % self.local_steps:
            raise ValueError(
                f"eval_every={self.eval_every} is not a multiple of local_steps="
                f"{self.local_steps}: {self.mode} evaluates the global parameters at round ends"
            )
        Link(self.link_gbps, self.link_latency_ms)  # validates


def launch(configs: list[LowCommConfig], workers: int = 2, timeout_s: float = 1800) -> list:
    """Run `configs` one after another in `workers` spawned gloo processes; returns, per
    config, the list of each rank's result. A worker's error ends the job (spawn kills the
    others); a stuck collective fails after `timeout_s`."""
    import torch.multiprocessing as mp

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers={workers!r} is invalid; accepted: an integer >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_worker, args=(configs, workers, tmp, timeout_s), nprocs=workers, join=True)
        per_rank = [torch.load(Path(tmp) / f"rank{r}.pt") for r in range(workers)]
    return [[per_rank[r][i] for r in range(workers)] for i in range(len(configs))]


def _worker(rank: int, configs, workers: int, tmp: str, timeout_s: float) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"file://{tmp}/store",
        rank=rank,
        world_size=workers,
        timeout=timedelta(seconds=timeout_s),
    )
    try:
        results = [train(cfg) for cfg in configs]
        torch.save(results, Path(tmp) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def data(cfg: LowCommConfig, tokenizer) -> tuple[list[tuple], list[tuple]]:
    """(this worker's shard of the training rows, the held-out rows), encoded: arithmetic
    with 2 digits, `+-*`, 2 or 3 operands (half each); shards are interleaved slices."""
    rank, workers = dist.get_rank(), dist.get_world_size()
    tasks = [Arithmetic(digits=2, ops="+-*", n_operands=n) for n in (2, 3)]
    pool, heldout = [], []
    for task in tasks:
        pool += task.examples("train", cfg.pool_size // 2, seed=cfg.seed)
        heldout += task.examples("test", cfg.eval_n // 2, seed=cfg.seed)
    limit = TinyConfig().max_position_embeddings
    shard = encode_rows(tokenizer, pool[rank::workers], limit, "arithmetic train")
    return shard, encode_rows(tokenizer, heldout, limit, "arithmetic test")


class Ledger:
    """What one worker sent and what the link would have charged, round by round."""

    def __init__(self, link: Link, workers: int) -> None:
        self.link, self.workers = link, workers
        self.bytes = 0
        self.compute: list[float] = []  # measured compute of each round
        self.comm: list[float] = []  # the collective that ends each round (overlappable)
        self.blocking = 0.0  # collectives nothing overlaps (the rank broadcasts)
        self.rounds_bytes: list[int] = []

    def collective(self, payload: int, kind: str, blocking: bool = False) -> None:
        self.bytes += payload
        seconds = self.link.seconds(payload, self.workers, kind)
        if blocking:
            self.blocking += seconds
        else:
            self.comm.append(seconds)
            self.rounds_bytes.append(payload)


def train(cfg: LowCommConfig) -> dict:
    """One worker's run inside an initialised process group (module docstring)."""
    rank, workers = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(cfg.seed)
    tokenizer = build_tokenizer()
    arch = TinyConfig(
        hidden_size=cfg.hidden_size,
        intermediate_size=3 * cfg.hidden_size,
        num_hidden_layers=cfg.num_hidden_layers,
    )
    model = build_model(tokenizer, arch, seed=cfg.seed)
    model.train()
    shard, heldout = data(cfg, tokenizer)
    pad = tokenizer.pad_token_id
    params = list(model.parameters())
    numel = sum(p.numel() for p in params)
    inner = torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(inner, _warmup_cosine(cfg))
    rng = random.Random(cfg.seed * 1000 + rank)
    ledger = Ledger(Link(cfg.link_gbps, cfg.link_latency_ms), workers)
    sync = None if cfg.mode == "ddp" else Synchroniser(cfg, params, ledger)

    curve, history, round_compute = [], [], 0.0
    for step in range(1, cfg.inner_steps + 1):
        started = time.perf_counter()
        inner.zero_grad()
        token_loss(
            model, [shard[rng.randrange(len(shard))] for _ in range(cfg.batch_size)], pad
        ).backward()
        if cfg.mode == "ddp":
            round_compute += time.perf_counter() - started
            _average_gradients(params, workers)
            ledger.collective(numel * FP32_BYTES, "all_reduce")
            started = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        inner.step()
        schedule.step()
        round_compute += time.perf_counter() - started
        ends_round = cfg.mode == "ddp" or step % cfg.local_steps == 0 or step == cfg.inner_steps
        if not ends_round:
            continue
        if sync is not None:
            started = time.perf_counter()
            sync.end_round(final=step == cfg.inner_steps)
            round_compute += time.perf_counter() - started
        ledger.compute.append(round_compute)
        round_compute = 0.0
        if cfg.record_params:
            history.append(torch.cat([p.detach().flatten() for p in params]).clone())
        if step % cfg.eval_every == 0 or step == cfg.inner_steps:
            loss = _held_out(model, heldout, pad) if rank == 0 else float("nan")
            curve.append({"step": step, "bytes": ledger.bytes, "loss": loss})
    return _summary(cfg, ledger, sync, curve, history, numel)


class Synchroniser:
    """The end of a DiLoCo(X) round: pseudo-gradients out, the due average in, outer step."""

    def __init__(self, cfg: LowCommConfig, params: list, ledger: Ledger) -> None:
        self.cfg, self.ledger = cfg, ledger
        self.outer = OuterLoop(params, lr=cfg.outer_lr, momentum=cfg.outer_momentum)
        self.queue = Delay(cfg.delay if cfg.mode == "dilocox" else 0)
        self.compress = cfg.mode == "dilocox" and cfg.compress
        shapes = [p.shape for p in params]
        self.compressor = Compressor(shapes, seed=cfg.seed * 1000 + dist.get_rank())
        self.ranks: list[int] = []  # the probed rank of each matrix
        self.rank_log: list[list[int]] = []  # the ranks each round was sent at
        self.rounds = 0

    def end_round(self, final: bool) -> None:
        deltas = self.outer.pseudo_gradients()
        exchange = self._compressed(deltas) if self.compress else self._plain(deltas)
        self.rounds += 1
        due = self.queue.push(exchange)
        self.outer.step(due() if due else None)
        if final:
            for pending in self.queue.drain():  # the last round's average (a final outer step)
                self.outer.step(pending())

    def _plain(self, deltas: list[torch.Tensor]):
        workers = dist.get_world_size()
        flat = torch.cat([d.flatten() for d in deltas])
        work = dist.all_reduce(flat, async_op=True)
        self.ledger.collective(flat.numel() * FP32_BYTES, "all_reduce")

        def average() -> list[torch.Tensor]:
            work.wait()
            return _unflatten(flat / workers, deltas)

        return average

    def _compressed(self, deltas: list[torch.Tensor]):
        if self.rounds % self.cfg.rank_every == 0:
            self._probe(deltas)
        ranks = list(self.ranks)
        payload = self.compressor.encode(deltas, ranks)
        buffers = [torch.empty_like(payload) for _ in range(dist.get_world_size())]
        work = dist.all_gather(buffers, payload, async_op=True)
        self.ledger.collective(payload.numel(), "all_gather")
        self.rank_log.append(ranks)

        def average() -> list[torch.Tensor]:
            work.wait()
            decoded = [self.compressor.decode(b, ranks) for b in buffers]
            return [sum(parts) / len(parts) for parts in zip(*decoded, strict=True)]

        return average

    def _probe(self, deltas: list[torch.Tensor]) -> None:
        """Worker 0 measures the ranks on its Δ + e; every worker receives them."""
        matrices = self.compressor.residuals(deltas)
        ranks = torch.zeros(len(matrices), dtype=torch.int32)
        if dist.get_rank() == 0:
            ranks = torch.tensor(probe_ranks(matrices, self.cfg.rank_energy), dtype=torch.int32)
        dist.broadcast(ranks, src=0)
        self.ledger.collective(ranks.numel() * RANK_BYTES, "broadcast", blocking=True)
        self.ranks = ranks.tolist()


def _average_gradients(params: list, workers: int) -> None:
    """One all-reduce of every gradient, flattened; then divided by the worker count."""
    flat = torch.cat([p.grad.flatten() for p in params])
    dist.all_reduce(flat)
    for p, g in zip(params, _unflatten(flat / workers, params), strict=True):
        p.grad.copy_(g)


def _unflatten(flat: torch.Tensor, like: list) -> list[torch.Tensor]:
    out, at = [], 0
    for t in like:
        out.append(flat[at : at + t.numel()].view(t.shape))
        at += t.numel()
    return out


@torch.no_grad()
def _held_out(model, heldout: list[tuple], pad: int) -> float:
    model.eval()
    loss = completion_loss(model, heldout, pad)
    model.train()
    return loss


def _warmup_cosine(cfg: LowCommConfig):
    """Linear warm-up, then cosine to 10 % of lr over the inner steps (sft.py's shape)."""

    def factor(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        progress = (step - cfg.warmup_steps) / max(1, cfg.inner_steps - cfg.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))

    return factor


def _summary(cfg, ledger: Ledger, sync, curve: list, history: list, numel: int) -> dict:
    computes = [None] * dist.get_world_size()
    dist.all_gather_object(computes, ledger.compute)  # bookkeeping, not counted
    slowest = [max(c) for c in zip(*computes, strict=True)]  # a collective waits for all
    delayed = sync is not None and sync.queue.steps > 0
    seconds, overlapped = simulated_seconds(slowest, ledger.comm, overlap=delayed)
    rounds = len(ledger.comm)
    per_round = sum(ledger.rounds_bytes) / rounds
    ranks = sync.rank_log if sync is not None else []
    mean_rank = sum(sum(r) / len(r) for r in ranks) / len(ranks) if ranks else None
    return {
        "config": dataclasses.asdict(cfg),
        "rank": dist.get_rank(),
        "comm/bytes_total": ledger.bytes,
        "comm/rounds": rounds,
        "comm/bytes_per_round": per_round,
        "comm/rank_mean": mean_rank,
        "comm/ranks": ranks,
        "comm/compression_ratio": numel * FP32_BYTES / per_round,
        "comm/sim_seconds": seconds + ledger.blocking,
        "comm/overlap_frac": overlapped,
        "compute_seconds": sum(slowest),
        "loss/held_out": curve[-1]["loss"],
        "curve": curve,
        "history": history,
        "parameters": numel,
    }
