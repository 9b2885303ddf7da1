"""Pre-train the tiny masked diffusion LM by masked SFT (papers/seed_generative.md G1.1, G0.7).

    python -m policylab.pretrain_mdm --out runs/tiny-mdm [--steps 1000]

Builds the ~0.7 M-parameter `MaskedDiffusionLM` (d 128, 4 layers, L = 6), trains it on the
demonstrations `<answer>{sum}</answer>` + EOS padding of the `arithmetic` task (2-digit
addition, train split), measures greedy held-out accuracy with S = 6 and S = 3 decoding
steps, and saves the folder (config.json, model.safetensors, policylab.json with the
measurements and the wall time, SHA256SUMS). Defaults [G0.7]: batch 64, AdamW lr 1e-3
cosine, 1,000 steps (≈ 0.3 greedy: headroom for RL).
"""

from __future__ import annotations

import argparse
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from policylab.algebra.mdm import masked_sft_loss, noise_levels
from policylab.policies.masked_lm import MaskedDiffusionLM, MDMConfig, MDMSampling, decode, left_pad

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PretrainMDMConfig:
    """Masked-SFT settings; sources: [G0.7] the spec's calibration run, [code] d1's SFT."""

    out: str = "runs/tiny-mdm"
    steps: int = 1000  # [G0.7]
    batch_size: int = 64  # [G0.7]
    lr: float = 1e-3  # [G0.7] AdamW, cosine to 0.1·lr
    warmup_steps: int = 30  # [ours: as the shipped AR model's SFT]
    weight_decay: float = 0.01  # [ours: as the shipped AR model's SFT]
    pool_size: int = 4000  # train-split demonstrations [ours: as the shipped AR SFT]
    eval_n: int = 200  # held-out prompts [ours: as the shipped AR SFT]
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "pool_size", "eval_n"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"pretrain_mdm {name} = {value!r}; accepted: an integer >= 1")
        if not self.lr > 0:
            raise ValueError(f"pretrain_mdm lr = {self.lr!r}; accepted: a number > 0")


def encode(tokenizer, examples: list[dict], length: int, eos_id: int):
    """(prompt id lists, targets [N, L]): each completion padded with EOS to L; a longer
    completion is a ValueError naming it."""
    prompts = [tokenizer(e["prompt"], add_special_tokens=False)["input_ids"] for e in examples]
    targets = []
    for e in examples:
        ids = tokenizer(e["completion"], add_special_tokens=False)["input_ids"]
        if len(ids) > length:
            raise ValueError(
                f"completion {e['completion']!r} has {len(ids)} tokens; the MDM's "
                f"completion_length is {length}"
            )
        targets.append(ids + [eos_id] * (length - len(ids)))
    return prompts, torch.tensor(targets)


def heldout_accuracy(model, tokenizer, task, examples: list[dict], steps: int) -> float:
    """Greedy held-out accuracy: the task's verifier on completions decoded with S = steps
    (one block, τ_s = 0)."""
    prompts, _ = encode(tokenizer, examples, model.config.completion_length, model.eos_id)
    sampling = MDMSampling(length=model.config.completion_length, steps=steps, temperature=0.0)
    out = model.generate(prompts, sampling)
    texts = decode(tokenizer, out.response_ids, model.eos_id)
    rewards = task.reward(
        [e["prompt"] for e in examples], texts, answer=[e["answer"] for e in examples]
    )
    return sum(rewards) / len(rewards)


def pretrain(cfg: PretrainMDMConfig, *, on_step: Callable[[int, int], None] | None = None) -> dict:
    """Train, measure and save; returns the metadata written to policylab.json.
    `on_step(done, steps)` after each step (`policylab pretrain tiny_mdm`'s progress)."""
    from policylab import tasks
    from policylab.models import build_tokenizer
    from policylab.trainers.sft import checksums

    task = tasks.get("arithmetic")
    tokenizer = build_tokenizer()
    mdm_config = MDMConfig(vocab_size=len(tokenizer) + 1, mask_id=len(tokenizer))
    torch.manual_seed(cfg.seed)
    model = MaskedDiffusionLM(mdm_config)
    length = mdm_config.completion_length
    prompts, targets = encode(
        tokenizer, task.examples("train", cfg.pool_size, cfg.seed), length, model.eos_id
    )
    heldout = task.examples("test", cfg.eval_n, seed=cfg.seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, _warmup_cosine(cfg))
    rng = random.Random(cfg.seed)
    noise = torch.Generator().manual_seed(cfg.seed)
    start, loss_value, first_loss = time.perf_counter(), float("nan"), float("nan")
    model.train()
    for step in range(cfg.steps):
        rows = [rng.randrange(len(prompts)) for _ in range(cfg.batch_size)]
        prompt = left_pad([prompts[i] for i in rows], model.pad_id)
        y = targets[rows]
        t = noise_levels(torch.rand(len(rows), generator=noise))
        masked = torch.rand(y.shape, generator=noise) < t[:, None]
        noisy = torch.where(masked, torch.full_like(y, model.mask_id), y)
        ids = torch.cat([prompt, noisy], 1)
        attention = torch.cat([prompt != model.pad_id, torch.ones_like(y, dtype=torch.bool)], 1)
        logits = model(ids, attention)[:, prompt.shape[1] :]
        loss = masked_sft_loss(logits, y, masked, t)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        schedule.step()
        loss_value = loss.item()
        first_loss = loss_value if step == 0 else first_loss
        if on_step is not None:
            on_step(step + 1, cfg.steps)
        if (step + 1) % 100 == 0:
            log.info(
                "step %d/%d loss %.4f %.0f s",
                step + 1,
                cfg.steps,
                loss_value,
                time.perf_counter() - start,
            )
    seconds = time.perf_counter() - start
    model.eval()
    accuracy = {
        f"greedy_accuracy_S{s}": heldout_accuracy(model, tokenizer, task, heldout, s)
        for s in (6, 3)
    }
    meta = {
        "config": asdict(cfg),
        "model": asdict(mdm_config),
        "parameters": sum(p.numel() for p in model.parameters()),
        "first_loss": first_loss,
        "final_loss": loss_value,
        "train_seconds": round(seconds, 1),
        "torch_threads": torch.get_num_threads(),
        "heldout": {"task": "arithmetic", "n": len(heldout), **accuracy},
    }
    out = Path(cfg.out)
    model.save(out, meta)
    (out / "SHA256SUMS").write_text(checksums(out))
    return meta


def _warmup_cosine(cfg: PretrainMDMConfig):
    def factor(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))

    return factor


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m policylab.pretrain_mdm", description=__doc__)
    defaults = PretrainMDMConfig()
    for name, value in asdict(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cfg = PretrainMDMConfig(**vars(args))
    meta = pretrain(cfg)
    heldout = meta["heldout"]
    print(
        f"saved {cfg.out}: {meta['parameters']:,} parameters, {cfg.steps} steps in "
        f"{meta['train_seconds']} s, loss {meta['final_loss']:.4f}, greedy held-out accuracy "
        f"S=6 {heldout['greedy_accuracy_S6']:.3f}, S=3 {heldout['greedy_accuracy_S3']:.3f}"
    )
    return meta


if __name__ == "__main__":
    main()
