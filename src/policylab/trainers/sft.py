"""Supervised training of a causal LM on demonstrations: how the shipped tiny model is
made (`policylab sft`, `make assets`), and how a user's model is warm-started before RL
(`policylab sft --model <folder or hub id> --task <data file or task>`).

Each step draws a batch of training rows (the task mixture's demonstrations, or a data
file's rows: sft_data.py says which tokens carry the loss), feeds prompt + demonstration
+ end token, and minimises the mean cross-entropy of the demonstration tokens only. AdamW
with linear warm-up and cosine decay; fixed seeds. The result is saved with
`save_pretrained` (model and tokenizer), with `policylab.json` (the config and the
held-out scores measured at the end) and `SHA256SUMS`; `policylab train --model <out>`
starts from it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import time
from pathlib import Path
from typing import Literal

import torch
from pydantic import AliasChoices, Field, field_validator
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from policylab import tasks
from policylab.config import Schema
from policylab.devices import Precision, autocast_for, place, resolve_device
from policylab.evaluate import evaluate
from policylab.models import TinyConfig, build_model, build_tokenizer, load_model
from policylab.policies.language_model import LanguageModelPolicy
from policylab.tasks.files import FileTask, looks_like_data
from policylab.trainers.sft_data import (
    completion_loss,
    context_length,
    encode_rows,
    loss_tokens,
    token_loss,
)
from policylab.workflows.agents import AgentOptions, evaluate_episodes

log = logging.getLogger(__name__)

DEFAULT_TASKS = {"arithmetic": {}, "countdown": {}, "sudoku4": {}, "plan_path": {}}


class SFTConfig(Schema):
    out: str = Field("runs/sft", description="folder to save the model, tokenizer and scores")
    tasks: dict[str, dict] = Field(
        default_factory=lambda: dict(DEFAULT_TASKS),
        description="task name or data file/folder → its knobs (e.g. prompt_column); "
        "--task X is {X: {}}",
    )
    pool_size: int = Field(
        4000, ge=1, description="training examples generated per task (a data file: all rows)"
    )
    steps: int = Field(1500, ge=1, description="optimiser steps (unless epochs is set)")
    epochs: int = Field(
        0, ge=0, description="passes over the training rows instead of steps (0 = use steps)"
    )
    batch_size: int = Field(64, ge=1, description="examples per step")
    micro_batch_size: int = Field(
        0, ge=0, description="examples per forward pass, gradients accumulated (0 = batch_size)"
    )
    lr: float = Field(1e-3, gt=0, description="peak AdamW learning rate")
    warmup_steps: int = Field(30, ge=0, description="linear warm-up steps")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay")
    seed: int = Field(0, description="seed of the data pool, the initialisation and the order")
    eval_n: int = Field(200, ge=1, description="held-out examples per task for the final scores")
    eval_every: int = Field(
        0, ge=0, description="also score the held-out split every N steps (0 = only at the end)"
    )
    max_new_tokens: int = Field(24, ge=1, description="generation budget of the held-out scores")
    init: str = Field(
        "",
        validation_alias=AliasChoices("init", "model"),
        description='start from this model ("tiny", a folder or a hub id; also model= or '
        "--model) instead of a fresh one; the width and depth fields are then ignored",
    )
    hidden_size: int = Field(128, ge=8, description="model width")
    num_hidden_layers: int = Field(4, ge=1, description="transformer layers")
    max_length: int = Field(
        0, ge=0, description="longest row in tokens (0 = the model's context); longer is an error"
    )
    device: str = Field("auto", description="auto (cuda when present, else cpu), cpu, cuda, cuda:N")
    dtype: Literal["float32", "bfloat16"] = Field(
        "float32", description="bfloat16: autocast forward passes (weights stay float32)"
    )
    gradient_checkpointing: bool = Field(False, description="recompute activations (less memory)")
    overwrite: bool = Field(False, description="write into a non-empty out folder")

    @field_validator("device")
    @classmethod
    def _device_here(cls, value: str) -> str:
        resolve_device(value)  # the form, and a GPU when one is asked for
        return value


def sft(cfg: SFTConfig, *, progress: bool = True) -> dict:
    """Train a fresh tiny model, or `cfg.init`, on the demonstrations of `cfg.tasks`;
    returns the saved metadata."""
    check_out(cfg)
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    task_objs = {name: _task(name, knobs) for name, knobs in cfg.tasks.items()}
    tokenizer, max_length = _tokenizer(cfg)
    pool = []
    for name, task in task_objs.items():
        pool += encode_rows(tokenizer, demonstrations(task, cfg), max_length, f"task {name!r}")
    if not pool:
        raise ValueError(f"no training rows in tasks {', '.join(cfg.tasks)}")
    heldout = {n: _heldout(t, tokenizer, max_length, cfg) for n, t in task_objs.items()}

    if cfg.init:
        model, tokenizer = load_model(cfg.init)
        model.train()  # from_pretrained returns a model in eval mode (dropout off)
    else:
        arch = TinyConfig(
            hidden_size=cfg.hidden_size,
            intermediate_size=3 * cfg.hidden_size,
            num_hidden_layers=cfg.num_hidden_layers,
        )
        model = build_model(tokenizer, arch, seed=cfg.seed)
    # weights stay float32; forward passes autocast to cfg.dtype (devices.py)
    place(
        model,
        Precision.of(cfg.device, cfg.dtype),
        gradient_checkpointing=cfg.gradient_checkpointing,
    )
    pad = _pad_id(tokenizer)
    total = math.ceil(cfg.epochs * len(pool) / cfg.batch_size) if cfg.epochs else cfg.steps
    optimiser = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, _warmup_cosine(cfg, total))

    start = time.perf_counter()
    losses: list[float] = []
    curve: list[dict] = []
    with _progress(progress) as bar:
        job = bar.add_task("sft", total=total, loss=float("nan"))
        for step, batch in enumerate(_batches(len(pool), total, cfg, rng)):
            optimiser.zero_grad()
            with autocast_for(model):
                loss = _backward(model, [pool[i] for i in batch], pad, cfg.micro_batch_size)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimiser.step()
            schedule.step()
            losses.append(loss)
            bar.update(job, advance=1, loss=sum(losses[-20:]) / len(losses[-20:]))
            if cfg.eval_every and (step + 1) % cfg.eval_every == 0 and step + 1 < total:
                curve.append(_scores(model, tokenizer, task_objs, heldout, cfg, step + 1))
                log.info("step %d held-out %s", step + 1, curve[-1])

    seconds = round(time.perf_counter() - start, 1)
    curve.append(_scores(model, tokenizer, task_objs, heldout, cfg, total))
    meta = {
        "config": cfg.model_dump(),
        "final_loss": sum(losses[-20:]) / len(losses[-20:]),
        "train_seconds": seconds,
        "heldout": curve[-1]["scores"],
        "curve": curve,
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    if cfg.gradient_checkpointing:
        _checkpointing(model, "disable")
    save(model, tokenizer, Path(cfg.out), meta)
    return meta


def check_out(cfg: SFTConfig) -> None:
    """`out` is a new or empty folder, or `overwrite` is set: a finished model is never
    replaced by accident (raised before any data is read or model loaded)."""
    out = Path(cfg.out)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"out={cfg.out!r} is a file; give a folder to save the model in")
    if out.is_dir() and any(out.iterdir()) and not cfg.overwrite:
        raise FileExistsError(
            f"out={cfg.out!r} is not empty ({', '.join(sorted(p.name for p in out.iterdir())[:5])}"
            "); give another out, or overwrite=true (--overwrite) to write into it"
        )


def _task(name: str, knobs: dict):
    """The task `name`; a data file without a `prompt` column but with `messages` (chat
    conversations, trained on their assistant turns) is read with prompt_column=messages."""
    try:
        return tasks.get(name, **knobs)
    except ValueError as err:
        if not looks_like_data(name) or "prompt_column" in knobs:
            raise
        first = err  # the error about the prompt column, unless the file has messages
    try:
        return tasks.get(name, **knobs, prompt_column="messages")
    except ValueError:
        raise first from None


def _tokenizer(cfg: SFTConfig):
    """The tokenizer rows are encoded with, and the longest row allowed in tokens; read
    before the model's weights, so that bad rows fail first."""
    if not cfg.init:
        return build_tokenizer(), cfg.max_length or TinyConfig().max_position_embeddings
    from transformers import AutoConfig, AutoTokenizer

    from policylab.models import resolve_model_path

    path = resolve_model_path(cfg.init)
    try:
        context = context_length(AutoConfig.from_pretrained(path))
        tokenizer = AutoTokenizer.from_pretrained(path)
    except OSError as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise FileNotFoundError(
            f"model {cfg.init!r}: cannot read its config or tokenizer: {reason}"
        ) from None
    limits = [n for n in (cfg.max_length, context) if n]
    if not limits:
        raise ValueError(f"model {cfg.init!r} states no context length; set max_length=...")
    return tokenizer, min(limits)


def demonstrations(task, cfg: SFTConfig) -> list[dict]:
    """The task's demonstration rows: `completion` after `prompt`, then the end token; a
    multi-turn task's rows are one turn each (context → segment, no end token: the
    segment ends at the environment's stop string), from its scripted demonstrator; a
    data file's rows are all its train rows, in an order shuffled by the seed."""
    if hasattr(task, "demonstrations"):
        rows = task.demonstrations(cfg.pool_size, seed=cfg.seed)
        return [{**row, "end": False} for row in rows]
    if isinstance(task, FileTask):
        return task.examples("train", task.rows.get("train", 0), seed=cfg.seed)
    return task.examples("train", cfg.pool_size, seed=cfg.seed)


def _batches(size: int, total: int, cfg: SFTConfig, rng: random.Random):
    """`total` batches of row indices: drawn with replacement, or with `epochs` set,
    consecutive slices of one shuffled order per pass (the last batch may be short)."""
    if not cfg.epochs:
        for _ in range(total):
            yield [rng.randrange(size) for _ in range(cfg.batch_size)]
        return
    order: list[int] = []
    for _ in range(cfg.epochs):
        order += rng.sample(range(size), size)
    for step in range(total):
        yield order[step * cfg.batch_size : (step + 1) * cfg.batch_size]


def _backward(model, rows: list[tuple], pad: int, micro: int) -> float:
    """Gradient of the batch's mean cross-entropy per demonstration token; with `micro`,
    accumulated over micro-batches, each summed and divided by the batch's token count."""
    if not micro or micro >= len(rows):
        loss = token_loss(model, rows, pad)
        loss.backward()
        return loss.item()
    count, value = max(loss_tokens(rows), 1), 0.0
    for i in range(0, len(rows), micro):
        loss = token_loss(model, rows[i : i + micro], pad, reduction="sum") / count
        loss.backward()
        value += loss.item()
    return value


def _heldout(task, tokenizer, max_length: int, cfg: SFTConfig) -> list[tuple]:
    """A data file's held-out rows (at most eval_n), encoded: its completion loss is
    measured on them; other tasks: none."""
    if not isinstance(task, FileTask):
        return []
    n = min(cfg.eval_n, task.rows.get("test", 0))
    if n == 0:
        log.warning("%s: no held-out rows, so no held-out scores", task.path)
        return []
    examples = task.examples("test", n, seed=cfg.seed)
    return encode_rows(tokenizer, examples, max_length, f"{task.path} (test split)")


def _scores(model, tokenizer, task_objs, heldout, cfg: SFTConfig, step: int) -> dict:
    model.eval()
    with autocast_for(model):
        scores = {
            name: _score(model, tokenizer, task, heldout[name], cfg)
            for name, task in task_objs.items()
        }
    model.train()
    return {"step": step, "scores": scores}


def _score(model, tokenizer, task, heldout: list[tuple], cfg: SFTConfig) -> dict:
    """The held-out split's accuracy and rewards (a multi-turn task: its episodes); a data
    file: the held-out completion loss, and the scores when it has answers to check."""
    if hasattr(task, "env"):
        attempts = getattr(task.knobs, "attempts", 1)
        options = AgentOptions(attempts=attempts, reflect=attempts > 1)
        policy = LanguageModelPolicy(model, tokenizer)
        return evaluate_episodes(lambda role: policy, task, options, n=cfg.eval_n, seed=cfg.seed)
    if not isinstance(task, FileTask):
        return evaluate(
            model, tokenizer, task, n=cfg.eval_n, seed=cfg.seed, max_new_tokens=cfg.max_new_tokens
        ).as_dict()
    if not heldout:
        return {}
    pad = _pad_id(tokenizer)
    scores = {"eval/completion_loss": completion_loss(model, heldout, pad, cfg.batch_size)}
    if task.answer_column in task.columns:
        result = evaluate(
            model, tokenizer, task, n=len(heldout), seed=cfg.seed, max_new_tokens=cfg.max_new_tokens
        )
        scores.update(result.as_dict())
    return scores


def _checkpointing(model, switch: str) -> None:
    """Activation (gradient) checkpointing on or off, under either transformers name (on:
    devices.place)."""
    new = hasattr(model, "activation_checkpointing_enable")
    getattr(model, f"{'activation' if new else 'gradient'}_checkpointing_{switch}")()


def _pad_id(tokenizer) -> int:
    """Padding is masked out of attention and loss, so any id pads; the tokenizer's own
    when it has one."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0


def save(model, tokenizer, out: Path, meta: dict) -> None:
    """save_pretrained, then the metadata and the checksums of every file written."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "policylab.json").write_text(json.dumps(meta, indent=2) + "\n")
    (out / "SHA256SUMS").write_text(checksums(out))


def checksums(folder: Path) -> str:
    """`sha256  name` lines for the files that make up a saved model (not SHA256SUMS)."""
    lines = []
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name != "SHA256SUMS":
            lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}")
    return "\n".join(lines) + "\n"


def _warmup_cosine(cfg: SFTConfig, total: int):
    def factor(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        progress = (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))

    return factor


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} loss {task.fields[loss]:.3f}"),
        TimeRemainingColumn(),
        disable=not enabled,
        transient=False,
    )
