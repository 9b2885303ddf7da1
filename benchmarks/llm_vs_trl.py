"""policylab vs TRL's GRPOTrainer: the same GRPO run side by side, in one invocation.

    .venv/bin/python benchmarks/llm_vs_trl.py --model tiny --task arithmetic \\
        --task-knobs '{"ops": "+"}' --steps 100 --prompts 16 --samples 8 \\
        --max-new-tokens 24 --lr 2e-4 --eval-n 200 --seed 0 --out /tmp/bench-llm.md

Four runs — {policylab, TRL} × {GRPO without KL (β = 0), GRPO with KL (β = 0.04)} — each
in its own subprocess, so its peak RSS is its own. For each: seconds per optimiser step,
generated tokens per second, peak RSS, and the held-out greedy accuracy of the final model,
scored by the same function (`policylab.evaluate.evaluate`) for both frameworks.

Step time is the sum, over steps, of one optimiser step's work: draw prompts, generate,
score, reference forward (β > 0), advantages, loss, backward, clip, AdamW step. For
policylab it is the trainer's own `perf/step_s`; for TRL a callback times `on_step_begin`
→ `on_step_end`. Logging, held-out evaluation, checkpoints and model loading are excluded
from both. Generated tokens count every completion token up to and including the end token.
See benchmarks/README.md for the settings that match and those that cannot.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FRAMEWORKS = ("policylab", "trl")
KL_COEFS = (0.0, 0.04)  # GRPO without KL, then with the DeepSeekMath coefficient
EPSILON = 0.2  # PPO clip range; policylab's grpo recipe and TRL's default
LAST_STEPS = 10  # training reward is averaged over at most this many final steps
WORKER_ENV = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "error",
}


# ---- the parent: validate, run each configuration in a subprocess, print the table -------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="tiny", help='"tiny", a local model folder or a hub id')
    p.add_argument("--task", default="arithmetic", help="embedded task name")
    p.add_argument("--task-knobs", default="{}", help='task knobs as JSON, e.g. \'{"ops": "+"}\'')
    p.add_argument("--steps", type=int, default=100, help="optimiser steps per run")
    p.add_argument("--prompts", type=int, default=16, help="prompts per optimiser step")
    p.add_argument("--samples", type=int, default=8, help="G: completions per prompt (>= 2)")
    p.add_argument("--max-new-tokens", type=int, default=24, help="generation budget")
    p.add_argument("--lr", type=float, default=2e-4, help="AdamW learning rate (constant)")
    p.add_argument("--eval-n", type=int, default=200, help="held-out examples for accuracy")
    p.add_argument("--seed", type=int, default=0, help="seed of prompts, sampling and eval")
    p.add_argument("--only", choices=FRAMEWORKS, help="run one framework only")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    p.add_argument("--out", help="also write the Markdown report to this file")
    p.add_argument("--work-dir", help="keep run folders here (default: a temporary folder)")
    p.add_argument("--worker", help=argparse.SUPPRESS)  # internal: path of a run spec
    args = p.parse_args(argv)
    try:
        args.knobs = json.loads(args.task_knobs)
    except json.JSONDecodeError as err:
        p.error(f"--task-knobs {args.task_knobs!r} is not JSON: {err}")
    if not isinstance(args.knobs, dict):
        p.error(f"--task-knobs must be a JSON object, got {args.task_knobs!r}")
    for name in ("steps", "prompts", "max_new_tokens", "eval_n"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} = {getattr(args, name)} must be >= 1")
    if args.samples < 2:
        p.error(f"--samples = {args.samples}: TRL's GRPOTrainer needs at least 2 per prompt")
    return args


def validate(args: argparse.Namespace) -> None:
    """Fail before any run starts: unknown task or knob, missing model, missing TRL."""
    from policylab import tasks
    from policylab.config import TrainConfig
    from policylab.models import resolve_model_path

    try:
        task = tasks.get(args.task, **args.knobs)
    except (KeyError, ValueError) as err:
        sys.exit(f"error: {err}")
    if "train_pool" not in TrainConfig.model_fields:
        sys.exit("error: this policylab has no TrainConfig.train_pool; the benchmark needs it")
    # policylab's rule: its default pool size, capped by a data file's train rows
    args.pool = TrainConfig.model_fields["train_pool"].default
    args.pool = min(args.pool, getattr(task, "rows", {}).get("train", args.pool))
    try:
        path = resolve_model_path(args.model)
    except FileNotFoundError as err:
        sys.exit(f"error: --model {args.model!r}: {err}")
    if Path(path).exists() and not (Path(path) / "config.json").exists():
        sys.exit(f"error: --model {args.model!r}: {path} holds no config.json")
    if args.only != "policylab" and _version("trl") is None:
        sys.exit(
            "error: TRL is not installed; `pip install 'policylab[bench]'` or pass --only policylab"
        )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        return worker(json.loads(Path(args.worker).read_text()))
    validate(args)
    python = os.path.relpath(sys.executable)
    python = python if not python.startswith("..") else Path(sys.executable).name
    command = shlex.join([python, *sys.argv]) if argv is None else ""
    args.load = os.getloadavg()[0]
    if args.load > 0.5:
        print(
            f"warning: the machine is busy (load average {args.load:.1f}); timings will be "
            "noisy, and with threads competing for cores torch can slow down many-fold "
            "(--threads 1 avoids most of it)",
            flush=True,
        )
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="llm_vs_trl-"))
    work.mkdir(parents=True, exist_ok=True)
    common = {
        "model": args.model,
        "task": args.task,
        "knobs": args.knobs,
        "steps": args.steps,
        "prompts": args.prompts,
        "samples": args.samples,
        "max_new_tokens": args.max_new_tokens,
        "lr": args.lr,
        "eval_n": args.eval_n,
        "seed": args.seed,
        "threads": args.threads,
        "pool": args.pool,
    }
    try:
        initial = launch({**common, "kind": "initial"}, work / "initial")
        print(f"initial model: held-out greedy accuracy {initial['accuracy']:.3f}", flush=True)
        frameworks = [args.only] if args.only else list(FRAMEWORKS)
        results = []
        for beta in KL_COEFS:
            for framework in frameworks:
                name = f"{framework}-kl{beta:g}"
                result = launch({**common, "kind": framework, "beta": beta}, work / name)
                results.append(result)
                print(
                    f"{framework:>9} β={beta:<4g} {result['step_s']:.3f} s/step  "
                    f"{result['tokens_per_s']:.0f} tok/s  {result['peak_rss_mib']:.0f} MiB  "
                    f"acc {result['accuracy']:.3f}  ({result['wall_s']:.0f} s)",
                    flush=True,
                )
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    report = render(args, command, initial, results)
    print("\n" + report)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(report)
        print(f"written to {args.out}")


def launch(spec: dict, folder: Path) -> dict:
    """Run one configuration in a fresh Python process; its output goes to folder/log.txt."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = {**spec, "dir": str(folder), "result": str(folder / "result.json")}
    (folder / "spec.json").write_text(json.dumps(spec, indent=1))
    log = folder / "log.txt"
    started = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--worker", str(folder / "spec.json")],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **WORKER_ENV},
            check=False,
        )
    if proc.returncode != 0 or not Path(spec["result"]).exists():
        tail = "\n".join(log.read_text().splitlines()[-40:])
        sys.exit(
            f"error: the {spec['kind']} run failed (exit {proc.returncode}); log {log}:\n{tail}"
        )
    return {**json.loads(Path(spec["result"]).read_text()), "wall_s": time.perf_counter() - started}


def render(args: argparse.Namespace, command: str, initial: dict, results: list[dict]) -> str:
    knobs = json.dumps(args.knobs) if args.knobs else "defaults"
    lines = [
        f"# policylab vs TRL GRPOTrainer: GRPO on {args.task} ({knobs}), model {args.model}",
        "",
        f"{args.steps} optimiser steps × {args.prompts} prompts × G = {args.samples} completions, "
        f"≤ {args.max_new_tokens} new tokens at temperature 1, AdamW lr {args.lr:g} (constant, "
        f"no weight decay, grad-norm clip 1.0), clip ε = {EPSILON}, one update per batch, "
        f"the same {args.pool} training prompts, seed {args.seed}. Held-out greedy accuracy "
        f"on {args.eval_n} test prompts, both models "
        f"scored by `policylab.evaluate.evaluate`; before training: {initial['accuracy']:.3f}.",
        "",
        "| framework | KL β | s / step | generated tok / s | peak RSS (MiB) "
        f"| greedy accuracy | train reward (last {min(LAST_STEPS, args.steps)} steps) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['label']} | {r['beta']:g} | {r['step_s']:.3f} | {r['tokens_per_s']:.0f} "
            f"| {r['peak_rss_mib']:.0f} | {r['accuracy']:.3f} | {r['reward_last']:.3f} |"
        )
    versions = ", ".join(
        f"{pkg} {_version(pkg)}" for pkg in ("policylab", "torch", "transformers", "trl")
    )
    threads = args.threads or "torch default"
    lines += [
        "",
        "s / step: generate + score + reference forward + loss/backward + clip + AdamW, "
        "excluding logging, evaluation, checkpoints and loading. Peak RSS: the run's "
        "process (`ru_maxrss`) through model loading and training. Generated tokens include "
        "each completion's end token.",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, torch threads: {threads}, "
        f"load average {args.load:.1f} at the start. "
        f"Versions: {versions}.",
        "",
        "Command:",
        "",
        "```bash",
        command or "(called from Python)",
        "```",
        "",
    ]
    return "\n".join(lines)


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


# ---- the worker: one configuration in its own process -----------------------------------
def worker(spec: dict) -> None:
    import resource

    import torch

    if spec["threads"]:
        torch.set_num_threads(spec["threads"])
    runner = {"initial": run_initial, "policylab": run_policylab, "trl": run_trl}[spec["kind"]]
    result = runner(spec)
    if "peak_rss_mib" not in result:
        result["peak_rss_mib"] = _peak_rss_mib(resource)
    Path(spec["result"]).write_text(json.dumps(result, indent=1))


def _peak_rss_mib(resource) -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes vs KiB


def held_out_accuracy(model_dir: str, spec: dict) -> float:
    """Greedy accuracy of the model saved in `model_dir`: the one function for both sides."""
    from policylab import tasks
    from policylab.evaluate import evaluate
    from policylab.models import load_model

    model, tokenizer = load_model(model_dir)
    task = tasks.get(spec["task"], **spec["knobs"])
    result = evaluate(
        model.eval(),
        tokenizer,
        task,
        n=spec["eval_n"],
        seed=spec["seed"],
        max_new_tokens=spec["max_new_tokens"],
    )
    return result.greedy_accuracy


def run_initial(spec: dict) -> dict:
    from policylab.models import resolve_model_path

    return {"accuracy": held_out_accuracy(resolve_model_path(spec["model"]), spec)}


def run_policylab(spec: dict) -> dict:
    import resource

    from policylab.config import TrainConfig
    from policylab.trainers.llm import train

    cfg = TrainConfig(
        algo="grpo",
        task=spec["task"],
        task_knobs=spec["knobs"],
        model=spec["model"],
        steps=spec["steps"],
        prompts_per_step=spec["prompts"],
        train_pool=spec["pool"],
        samples_per_prompt=spec["samples"],
        epochs=1,
        minibatches=1,
        micro_batch_rows=0,
        lr=spec["lr"],
        warmup_steps=0,
        schedule="constant",
        weight_decay=0.0,
        grad_clip=1.0,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        max_new_tokens=spec["max_new_tokens"],
        loss={"kl_coef": spec["beta"], "eps_low": EPSILON, "eps_high": EPSILON},
        eval_every=0,
        eval_n=spec["eval_n"],
        save_every=0,
        run_dir=str(Path(spec["dir"]) / "run"),
        seed=spec["seed"],
        progress=False,
    )
    result = train(cfg)
    peak = _peak_rss_mib(resource)
    rows = [
        json.loads(line)
        for line in (Path(result.run_dir) / "metrics.jsonl").read_text().splitlines()
        if line.strip()
    ]
    rows = [r for r in rows if r["kind"] == "train"]
    seconds = sum(r["perf/step_s"] for r in rows)
    tokens = sum(r["perf/tokens_per_s"] * r["perf/step_s"] for r in rows)
    checkpoints = Path(result.run_dir) / "checkpoints"
    final = checkpoints / (checkpoints / "latest").read_text().strip() / "model"
    return {
        "label": "policylab",
        "beta": spec["beta"],
        "step_s": seconds / len(rows),
        "step_times": [r["perf/step_s"] for r in rows],
        "tokens_per_s": tokens / seconds,
        "peak_rss_mib": peak,
        "accuracy": held_out_accuracy(str(final), spec),
        "trainer_accuracy": result.after["eval/greedy_accuracy"],  # the same call, in train()
        "reward_last": _mean([r["reward/mean"] for r in rows[-LAST_STEPS:]]),
    }


def run_trl(spec: dict) -> dict:
    import resource

    from datasets import Dataset
    from trl import GRPOTrainer

    from policylab import tasks
    from policylab.models import load_model

    task = tasks.get(spec["task"], **spec["knobs"])
    # policylab's prompt pool: the same examples, and TRL also walks it in seeded epochs
    pool = task.examples("train", spec["pool"], seed=spec["seed"])
    dataset = Dataset.from_list([{k: v for k, v in e.items() if k != "completion"} for e in pool])
    counted = {"tokens": 0}

    def task_reward(prompts, completions, completion_ids, **columns):
        counted["tokens"] += sum(len(ids) for ids in completion_ids)  # end token included
        return task.reward(prompts, completions, **columns)

    task_reward.__name__ = f"{task.name}_verifier"
    model, tokenizer = load_model(spec["model"])  # fp32, pad token set, left padding
    timer = step_timer()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=task_reward,
        args=trl_config(spec),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[timer],
    )
    trainer.train()
    peak = _peak_rss_mib(resource)
    steps = trainer.state.global_step
    if steps != spec["steps"]:
        raise RuntimeError(f"TRL ran {steps} optimiser steps, asked for {spec['steps']}")
    final = Path(spec["dir"]) / "final"
    trainer.save_model(str(final))
    tokenizer.save_pretrained(str(final))
    rewards = [r["reward"] for r in trainer.state.log_history if "reward" in r]
    return {
        "label": f"TRL {_version('trl')}",
        "beta": spec["beta"],
        "step_s": sum(timer.steps) / steps,
        "tokens_per_s": counted["tokens"] / sum(timer.steps),
        "step_times": timer.steps,
        "peak_rss_mib": peak,
        "accuracy": held_out_accuracy(str(final), spec),
        "reward_last": _mean(rewards[-LAST_STEPS:]),
    }


def trl_config(spec: dict):
    """TRL's GRPOConfig set to policylab's grpo recipe and trainer defaults."""
    from trl import GRPOConfig

    # transformers 5 renamed gradient_checkpointing (the old name still works, with a warning)
    renamed = "activation_checkpointing" in GRPOConfig.__dataclass_fields__
    no_checkpointing = {"activation_checkpointing" if renamed else "gradient_checkpointing": False}
    return GRPOConfig(
        output_dir=str(Path(spec["dir"]) / "run"),
        # one optimiser step = one generation batch of prompts × G completions, used once;
        # TRL's batch sizes count completions, not prompts
        per_device_train_batch_size=spec["prompts"] * spec["samples"],
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        num_generations=spec["samples"],
        num_iterations=1,
        max_steps=spec["steps"],
        max_completion_length=spec["max_new_tokens"],
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        # GRPO as policylab's recipe: group-std advantages, token ratio clipped at 1 ± ε,
        # per-sequence token mean then batch mean, β·k3 KL added per token
        beta=spec["beta"],
        epsilon=EPSILON,
        epsilon_high=EPSILON,
        loss_type="grpo",
        scale_rewards="group",
        importance_sampling_level="token",
        use_bias_correction_kl=False,  # policylab's k3 term is not weighted by the ratio
        mask_truncated_completions=False,
        # policylab's optimiser: AdamW (torch defaults), constant lr, clip the grad norm at 1
        learning_rate=spec["lr"],
        optim="adamw_torch",
        weight_decay=0.0,
        lr_scheduler_type="constant",
        warmup_steps=0,
        max_grad_norm=1.0,
        # fp32 on the CPU, no activation checkpointing (TRL turns both on by default)
        use_cpu=True,
        bf16=False,
        fp16=False,
        **no_checkpointing,
        seed=spec["seed"],
        data_seed=spec["seed"],
        shuffle_dataset=True,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
    )


def step_timer():
    """A TRL callback that times each optimiser step (generation included)."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.steps: list[float] = []
            self._start = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            self._start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.steps.append(time.perf_counter() - self._start)

    return StepTimer()


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


if __name__ == "__main__":
    main()
