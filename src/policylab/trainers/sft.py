"""Supervised training of a causal LM on task demonstrations: how the shipped tiny model
is made (`policylab sft`, `make assets`).

Each step draws a batch from a fixed pool of training examples of every task, feeds
prompt + demonstration + end token, and minimises the mean cross-entropy of the
demonstration tokens only. AdamW with linear warm-up and cosine decay; fixed seeds.
The result is saved with `save_pretrained` (model and tokenizer), with `policylab.json`
(the config and the held-out scores measured at the end) and `SHA256SUMS`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import time
from pathlib import Path

import torch
from pydantic import Field
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from policylab import tasks
from policylab.config import Schema
from policylab.evaluate import evaluate
from policylab.models import TinyConfig, build_model, build_tokenizer, load_model
from policylab.policies.language_model import LanguageModelPolicy
from policylab.workflows.agents import AgentOptions, evaluate_episodes

log = logging.getLogger(__name__)

DEFAULT_TASKS = {"arithmetic": {}, "countdown": {}, "sudoku4": {}, "plan_path": {}}


class SFTConfig(Schema):
    out: str = Field("runs/sft", description="folder to save the model, tokenizer and scores")
    tasks: dict[str, dict] = Field(
        default_factory=lambda: dict(DEFAULT_TASKS),
        description="task name → difficulty knobs of the mixture",
    )
    pool_size: int = Field(4000, ge=1, description="training examples generated per task")
    steps: int = Field(1500, ge=1, description="optimiser steps")
    batch_size: int = Field(64, ge=1, description="examples per step")
    lr: float = Field(1e-3, gt=0, description="peak AdamW learning rate")
    warmup_steps: int = Field(30, ge=0, description="linear warm-up steps")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay")
    seed: int = Field(0, description="seed of the data pool, the initialisation and the order")
    eval_n: int = Field(200, ge=1, description="held-out examples per task for the final scores")
    eval_every: int = Field(
        0, ge=0, description="also score the held-out split every N steps (0 = only at the end)"
    )
    init: str = Field(
        "",
        description='start from this model ("tiny", a folder) instead of a fresh one; the '
        "width and depth fields are then ignored",
    )
    hidden_size: int = Field(128, ge=8, description="model width")
    num_hidden_layers: int = Field(4, ge=1, description="transformer layers")


def sft(cfg: SFTConfig, *, progress: bool = True) -> dict:
    """Train a fresh tiny model on the task mixture; returns the saved metadata."""
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    task_objs = {name: tasks.get(name, **knobs) for name, knobs in cfg.tasks.items()}
    pool = [ex for task in task_objs.values() for ex in demonstrations(task, cfg)]

    if cfg.init:
        model, tokenizer = load_model(cfg.init)
    else:
        tokenizer = build_tokenizer()
        arch = TinyConfig(
            hidden_size=cfg.hidden_size,
            intermediate_size=3 * cfg.hidden_size,
            num_hidden_layers=cfg.num_hidden_layers,
        )
        model = build_model(tokenizer, arch, seed=cfg.seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, _warmup_cosine(cfg))

    start = time.perf_counter()
    losses: list[float] = []
    curve: list[dict] = []
    with _progress(progress) as bar:
        job = bar.add_task("sft", total=cfg.steps, loss=float("nan"))
        for step in range(cfg.steps):
            batch = [pool[rng.randrange(len(pool))] for _ in range(cfg.batch_size)]
            input_ids, labels, attention = _encode(tokenizer, batch)
            logits = model(input_ids=input_ids, attention_mask=attention).logits
            loss = torch.nn.functional.cross_entropy(
                logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100
            )
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimiser.step()
            schedule.step()
            losses.append(loss.item())
            bar.update(job, advance=1, loss=sum(losses[-20:]) / len(losses[-20:]))
            if cfg.eval_every and (step + 1) % cfg.eval_every == 0 and step + 1 < cfg.steps:
                curve.append(_scores(model, tokenizer, task_objs, cfg, step + 1))
                log.info("step %d held-out %s", step + 1, curve[-1])

    seconds = round(time.perf_counter() - start, 1)
    curve.append(_scores(model, tokenizer, task_objs, cfg, cfg.steps))
    meta = {
        "config": cfg.model_dump(),
        "final_loss": sum(losses[-20:]) / len(losses[-20:]),
        "train_seconds": seconds,
        "heldout": curve[-1]["scores"],
        "curve": curve,
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    save(model, tokenizer, Path(cfg.out), meta)
    return meta


def demonstrations(task, cfg: SFTConfig) -> list[dict]:
    """The task's demonstration rows: `completion` after `prompt`, then the end token; a
    multi-turn task's rows are one turn each (context → segment, no end token: the
    segment ends at the environment's stop string), from its scripted demonstrator."""
    if hasattr(task, "demonstrations"):
        rows = task.demonstrations(cfg.pool_size, seed=cfg.seed)
        return [{**row, "end": False} for row in rows]
    return task.examples("train", cfg.pool_size, seed=cfg.seed)


def _scores(model, tokenizer, task_objs, cfg: SFTConfig, step: int) -> dict:
    scores = {name: _score(model, tokenizer, task, cfg) for name, task in task_objs.items()}
    return {"step": step, "scores": scores}


def _score(model, tokenizer, task, cfg: SFTConfig) -> dict:
    if not hasattr(task, "env"):
        return evaluate(model, tokenizer, task, n=cfg.eval_n, seed=cfg.seed).as_dict()
    attempts = getattr(task.knobs, "attempts", 1)
    options = AgentOptions(attempts=attempts, reflect=attempts > 1)
    policy = LanguageModelPolicy(model, tokenizer)
    return evaluate_episodes(lambda role: policy, task, options, n=cfg.eval_n, seed=cfg.seed)


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


def _encode(tokenizer, batch: list[dict]):
    """Right-padded prompt + demonstration + end; labels only on the demonstration."""
    rows, targets = [], []
    for ex in batch:
        prompt = tokenizer(ex["prompt"], add_special_tokens=False)["input_ids"]
        answer = tokenizer(ex["completion"], add_special_tokens=False)["input_ids"]
        answer = answer + ([tokenizer.eos_token_id] if ex.get("end", True) else [])
        rows.append(prompt + answer)
        targets.append([-100] * len(prompt) + answer)
    width = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
    labels = torch.tensor([t + [-100] * (width - len(t)) for t in targets])
    attention = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    return input_ids, labels, attention


def _warmup_cosine(cfg: SFTConfig):
    def factor(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
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
