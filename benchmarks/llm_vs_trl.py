"""policylab vs TRL's GRPOTrainer: the same GRPO run, alternated in short blocks.

    .venv/bin/python benchmarks/llm_vs_trl.py --model tiny --task arithmetic \\
        --prompts 16 --samples 8 --max-new-tokens 24 --lr 5e-5 --kl 0,0.04 \\
        --pairs 4 --block-steps 15 --threads 1 --eval-n 200 --seed 0 --out /tmp/bench-llm.md

A shared machine's load changes by the minute, so one run after the other cannot tell
which framework is faster. Here the contenders alternate — policylab, TRL, policylab,
TRL, … (`--pairs` pairs per KL coefficient) — each block a fresh subprocess that trains
`--block-steps` optimiser steps from the same seed, so every block of one side does the
same work and each pair runs under nearly the same load. Reported per KL coefficient:

- each side's median seconds per optimiser step (each block's median over its steps, the
  first, warm-up step left out; then the median over blocks) with its min–max;
- the per-pair ratio TRL s/step ÷ policylab s/step (> 1: policylab faster), its median
  and min–max — the figure that survives a changing load;
- the load average (os.getloadavg, 1 min) before and after every block;
- peak RSS (`ru_maxrss`) of each block's process, model loading included;
- a phase split: generate / score / reference (+ advantages) / learn / optimiser. policylab
  reads its trainer's own `perf/*` metrics; TRL's methods are timed from outside
  (`_generate`, `_calculate_rewards`, the rest of `_generate_and_score_completions`,
  `training_step` less its input preparation, and the remainder of the step);
- the compute floor of the necessary work: FLOPs of one prompt pass per group, each
  generated token decoded once, and the unpadded (prompt once + response) tokens through
  the learner's forward and backward (3×) and the reference's forward (β > 0), at the
  float32 matmul rate the block's own process measured just before training (so the floor
  moves with the load as the measurement does);
- the held-out greedy accuracy of each side's last block's model, scored by the same
  function (`policylab.evaluate.evaluate`).

Step time is one optimiser step's work: draw prompts, generate, score, reference forward
(β > 0), advantages, loss, backward, clip, AdamW step; logging, evaluation, checkpoints
and model loading are left out on both sides. See benchmarks/README.md for the settings
that match and those that cannot.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FRAMEWORKS = ("policylab", "trl")
EPSILON = 0.2  # PPO clip range; policylab's grpo recipe and TRL's default
LAST_STEPS = 10  # training reward is averaged over at most this many final steps
PHASES = ("generate", "score", "reference", "learn", "optimiser")
WORKER_ENV = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "error",
}


# ---- the parent: validate, alternate the contenders' blocks, print the report ------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="tiny", help='"tiny", a local model folder or a hub id')
    p.add_argument("--task", default="arithmetic", help="embedded task name")
    p.add_argument("--task-knobs", default="{}", help='task knobs as JSON, e.g. \'{"ops": "+"}\'')
    p.add_argument("--pairs", type=int, default=4, help="policylab/TRL block pairs per KL β")
    p.add_argument("--block-steps", type=int, default=15, help="optimiser steps per block")
    p.add_argument("--prompts", type=int, default=16, help="prompts per optimiser step")
    p.add_argument("--samples", type=int, default=8, help="G: completions per prompt (>= 2)")
    p.add_argument("--max-new-tokens", type=int, default=24, help="generation budget")
    p.add_argument("--lr", type=float, default=5e-5, help="AdamW learning rate (constant)")
    p.add_argument("--kl", default="0,0.04", help="KL coefficients β, comma-separated")
    p.add_argument("--eval-n", type=int, default=200, help="held-out examples for accuracy")
    p.add_argument("--seed", type=int, default=0, help="seed of prompts, sampling and eval")
    p.add_argument("--only", choices=FRAMEWORKS, help="run one framework only (no ratio)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    p.add_argument(
        "--packing",
        choices=("on", "off"),
        default="on",
        help="policylab's TrainConfig.packing (rows without padding)",
    )
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
    try:
        args.betas = [float(b) for b in args.kl.split(",") if b.strip()]
    except ValueError:
        p.error(f"--kl {args.kl!r}: comma-separated numbers, e.g. 0,0.04")
    if not args.betas or any(b < 0 for b in args.betas):
        p.error(f"--kl {args.kl!r}: at least one coefficient, each >= 0")
    for name in ("pairs", "prompts", "max_new_tokens", "eval_n"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} = {getattr(args, name)} must be >= 1")
    if args.block_steps < 2:
        p.error(f"--block-steps = {args.block_steps}: need >= 2 (the first is warm-up)")
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
    for field in ("train_pool", "packing"):
        if field not in TrainConfig.model_fields:
            sys.exit(f"error: this policylab has no TrainConfig.{field}; the benchmark needs it")
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
    args.load = os.getloadavg()
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="llm_vs_trl-"))
    work.mkdir(parents=True, exist_ok=True)
    common = {
        "model": args.model,
        "task": args.task,
        "knobs": args.knobs,
        "steps": args.block_steps,
        "prompts": args.prompts,
        "samples": args.samples,
        "max_new_tokens": args.max_new_tokens,
        "lr": args.lr,
        "eval_n": args.eval_n,
        "seed": args.seed,
        "threads": args.threads,
        "pool": args.pool,
        "packing": args.packing == "on",
    }
    started = time.perf_counter()
    try:
        initial = launch({**common, "kind": "initial"}, work / "initial")
        print(f"initial model: held-out greedy accuracy {initial['accuracy']:.3f}", flush=True)
        frameworks = [args.only] if args.only else list(FRAMEWORKS)
        blocks = []
        for beta in args.betas:
            for pair in range(args.pairs):
                for framework in frameworks:  # A B A B …: each pair under nearly one load
                    last = pair == args.pairs - 1
                    name = f"kl{beta:g}-pair{pair}-{framework}"
                    spec = {**common, "kind": framework, "beta": beta, "evaluate": last}
                    before = os.getloadavg()[0]
                    block = launch(spec, work / name)
                    block.update(beta=beta, pair=pair, framework=framework)
                    block.update(load_before=before, load_after=os.getloadavg()[0])
                    blocks.append(block)
                    print(
                        f"β={beta:<4g} pair {pair} {framework:>9}: "
                        f"{block['median_step_s']:.3f} s/step (floor "
                        f"{block['floor_step_s']:.3f}), {block['peak_rss_mib']:.0f} MiB, "
                        f"load {before:.1f}→{block['load_after']:.1f} "
                        f"({block['wall_s']:.0f} s)",
                        flush=True,
                    )
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    report = render(args, command, initial, blocks, time.perf_counter() - started)
    print("\n" + report)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(report)
        print(f"written to {args.out}")


def launch(spec: dict, folder: Path) -> dict:
    """Run one block in a fresh Python process; its output goes to folder/log.txt."""
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


# ---- the report ---------------------------------------------------------------------------
def _spread(values: list[float], fmt: str = ".3f") -> str:
    """median [min–max]"""
    return (
        f"{statistics.median(values):{fmt}} [{min(values):{fmt}}–{max(values):{fmt}}]"
        if values
        else "–"
    )


def summarise(blocks: list[dict], beta: float, frameworks: list[str]) -> dict:
    """Per side: median s/step, floor, RSS, phases; and the per-pair ratios."""
    mine = [b for b in blocks if b["beta"] == beta]
    sides = {}
    for fw in frameworks:
        own = [b for b in mine if b["framework"] == fw]
        sides[fw] = {
            "label": own[0]["label"],
            "step_s": [b["median_step_s"] for b in own],
            "floor_s": [b["floor_step_s"] for b in own],
            "over_floor": [b["median_step_s"] / b["floor_step_s"] for b in own],
            "gflop": [b["floor_gflop"] for b in own],
            "gflops_rate": [b["matmul_gflops"] for b in own],
            "tokens": [b["tokens_per_step"] for b in own],
            "rss": [b["peak_rss_mib"] for b in own],
            "phases": {ph: statistics.median(b["phases_s"][ph] for b in own) for ph in PHASES},
            "accuracy": next((b["accuracy"] for b in own if b.get("accuracy") is not None), None),
            "reward_last": own[-1]["reward_last"],
        }
    ratios = []
    if len(frameworks) == 2:
        by_pair = {}
        for b in mine:
            by_pair.setdefault(b["pair"], {})[b["framework"]] = b["median_step_s"]
        ratios = [p["trl"] / p["policylab"] for _, p in sorted(by_pair.items())]
    return {"sides": sides, "ratios": ratios, "blocks": mine}


def render(args, command: str, initial: dict, blocks: list[dict], seconds: float) -> str:
    knobs = json.dumps(args.knobs) if args.knobs else "defaults"
    frameworks = [args.only] if args.only else list(FRAMEWORKS)
    loads = [b["load_before"] for b in blocks] + [b["load_after"] for b in blocks]
    state = "loaded" if statistics.median(loads) > 0.5 * (os.cpu_count() or 1) else "idle"
    lines = [
        f"# policylab vs TRL GRPOTrainer: GRPO on {args.task} ({knobs}), model {args.model}",
        "",
        f"{args.pairs} alternating pairs of blocks per KL β (policylab, then TRL), each block "
        f"a fresh process training {args.block_steps} optimiser steps from seed {args.seed}: "
        f"{args.prompts} prompts × G = {args.samples} completions, ≤ {args.max_new_tokens} "
        f"new tokens at temperature 1, AdamW lr {args.lr:g} (constant, no weight decay, "
        f"grad-norm clip 1.0), clip ε = {EPSILON}, one update per batch, the same "
        f"{args.pool} training prompts. policylab packing: {args.packing}. Held-out greedy "
        f"accuracy on {args.eval_n} test prompts after the last block of each side, scored "
        f"by `policylab.evaluate.evaluate`; before training: {initial['accuracy']:.3f}.",
        "",
    ]
    verdicts = []
    for beta in args.betas:
        summary = summarise(blocks, beta, frameworks)
        lines += [f"## KL β = {beta:g}", ""]
        lines += [
            "| framework | s / step | floor s / step | × floor | GFLOP / step (floor) "
            "| tokens / step (floor) | peak RSS MiB | greedy accuracy | reward (last steps) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for side in summary["sides"].values():
            acc = "–" if side["accuracy"] is None else f"{side['accuracy']:.3f}"
            lines.append(
                f"| {side['label']} | {_spread(side['step_s'])} | {_spread(side['floor_s'])} "
                f"| {_spread(side['over_floor'], '.1f')} "
                f"| {statistics.median(side['gflop']):.2f} "
                f"| {statistics.median(side['tokens']):.0f} | {_spread(side['rss'], '.0f')} "
                f"| {acc} | {side['reward_last']:.3f} |"
            )
        if summary["ratios"]:
            ratio = statistics.median(summary["ratios"])
            met = "met" if ratio >= 2 else "missed"
            verdicts.append((beta, ratio, met))
            lines += [
                "",
                "**Per-pair ratio TRL s/step ÷ policylab s/step: "
                f"{_spread(summary['ratios'], '.2f')}** (median [min–max] over "
                f"{len(summary['ratios'])} pairs; ≥ 2 target {met}).",
            ]
        lines += [
            "",
            "Phase split, median seconds per step over blocks (policylab: its `perf/*` "
            "metrics; reference includes reward shaping and advantages; TRL: its methods "
            "timed from outside, reference = old/ref log-probs and advantages):",
            "",
            "| framework | " + " | ".join(PHASES) + " |",
            "|---|" + "---|" * len(PHASES),
        ]
        for side in summary["sides"].values():
            cells = " | ".join(f"{side['phases'][ph]:.3f}" for ph in PHASES)
            lines.append(f"| {side['label']} | {cells} |")
        lines += [
            "",
            "| pair | framework | s / step (block median) | floor s / step | matmul GFLOP/s "
            "| peak RSS MiB | load before → after |",
            "|---|---|---|---|---|---|---|",
        ]
        for b in summary["blocks"]:
            lines.append(
                f"| {b['pair']} | {b['label']} | {b['median_step_s']:.3f} "
                f"| {b['floor_step_s']:.3f} | {b['matmul_gflops']:.1f} "
                f"| {b['peak_rss_mib']:.0f} | {b['load_before']:.1f} → {b['load_after']:.1f} |"
            )
        lines.append("")
    versions = ", ".join(
        f"{pkg} {_version(pkg)}" for pkg in ("policylab", "torch", "transformers", "trl")
    )
    threads = args.threads or "torch default"
    lines += [
        "s / step: generate + score + reference forward + loss/backward + clip + AdamW, "
        "excluding logging, evaluation, checkpoints and loading; each block's median over its "
        "steps after the first. Floor: 2 FLOPs per weight of every linear layer (LM head "
        "included) per token, over one prompt pass per group plus each generated token but "
        "the last of a row, × (1 generation + 3 learner + 1 reference when β > 0), at the "
        "block's own measured float32 matmul rate; attention is left out (small at these "
        "lengths). Peak RSS: each block's process (`ru_maxrss`) through loading and training.",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, torch threads: {threads}, "
        f"load average (1 min) {args.load[0]:.1f} at the start, blocks' loads "
        f"{min(loads):.1f}–{max(loads):.1f} (median {statistics.median(loads):.1f}): "
        f"{state}. Total wall-clock {seconds / 60:.1f} min. Versions: {versions}.",
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


# ---- the worker: one block in its own process --------------------------------------------
def worker(spec: dict) -> None:
    import resource

    import torch

    if spec["threads"]:
        torch.set_num_threads(spec["threads"])
    shape = model_shape(spec["model"])
    rate = matmul_gflops(shape["hidden"], shape["intermediate"])
    runner = {"initial": run_initial, "policylab": run_policylab, "trl": run_trl}[spec["kind"]]
    result = runner(spec)
    result["peak_rss_mib"] = _peak_rss_mib(resource)
    if spec["kind"] != "initial":
        steady = slice(1, None)  # the first step warms up allocators and kernels
        result["median_step_s"] = statistics.median(result["step_times"][steady])
        rows = spec["prompts"] * spec["samples"]
        generated = statistics.median(result["generated"][steady])
        # the necessary work: each prompt once per group, each response token but the last
        tokens = spec["prompts"] * prompt_tokens(spec) + generated - rows
        passes = 1 + 3 + (1 if spec["beta"] > 0 else 0)  # generate, learn (fwd+bwd), ref
        flops = 2 * shape["linear_weights"] * tokens * passes
        result.update(
            tokens_per_step=tokens,
            floor_gflop=flops / 1e9,
            matmul_gflops=rate,
            floor_step_s=flops / 1e9 / rate,
        )
    Path(spec["result"]).write_text(json.dumps(result, indent=1))


def _peak_rss_mib(resource) -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes vs KiB


def model_shape(name: str) -> dict:
    """Hidden and MLP widths, and the weights of every linear layer (LM head included):
    2 FLOPs each per token forward. Built on the meta device: no memory, no weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from policylab.models import resolve_model_path

    config = AutoConfig.from_pretrained(resolve_model_path(name))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    return {
        "hidden": config.hidden_size,
        "intermediate": getattr(config, "intermediate_size", 4 * config.hidden_size),
        "linear_weights": linear,
    }


def matmul_gflops(hidden: int, intermediate: int, seconds: float = 0.3) -> float:
    """Float32 GFLOP/s of this process's threads on the model's MLP shape ([1024, d] ×
    [d, ff]), best of a few timed batches: the rate the floor is converted at."""
    import torch

    x, w = torch.randn(1024, hidden), torch.randn(hidden, intermediate)
    flop = 2 * 1024 * hidden * intermediate
    best, spent = 0.0, 0.0
    while spent < seconds:
        start = time.perf_counter()
        for _ in range(10):
            x @ w
        took = time.perf_counter() - start
        spent += took
        best = max(best, 10 * flop / took / 1e9)
    return best


def prompt_tokens(spec: dict) -> float:
    """Mean prompt length in tokens over the training pool, as policylab encodes it."""
    from transformers import AutoTokenizer

    from policylab import tasks
    from policylab.models import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(spec["model"]))
    task = tasks.get(spec["task"], **spec["knobs"])
    pool = task.examples("train", min(spec["pool"], 500), seed=spec["seed"])
    lengths = []
    for e in pool:
        prompt = e["prompt"]
        if isinstance(prompt, str):
            lengths.append(len(tokenizer(prompt)["input_ids"]))
        else:
            lengths.append(len(tokenizer.apply_chat_template(prompt, add_generation_prompt=True)))
    return sum(lengths) / len(lengths)


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
        packing=spec["packing"],
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
        eval_n=spec["eval_n"] if spec["evaluate"] else 1,  # the trainer's own, not timed
        save_every=0,
        run_dir=str(Path(spec["dir"]) / "run"),
        seed=spec["seed"],
        progress=False,
    )
    result = train(cfg)
    rows = [
        json.loads(line)
        for line in (Path(result.run_dir) / "metrics.jsonl").read_text().splitlines()
        if line.strip()
    ]
    rows = [r for r in rows if r["kind"] == "train"]
    phases = []
    for r in rows:
        step, optimiser = r["perf/step_s"], r.get("perf/optimiser_s", 0.0)
        phases.append(
            {
                "generate": r["perf/generate_frac"] * step,
                "score": r["perf/score_frac"] * step,
                "reference": r["perf/reference_frac"] * step,
                "learn": r["perf/learn_frac"] * step - optimiser,
                "optimiser": optimiser,
            }
        )
    checkpoints = Path(result.run_dir) / "checkpoints"
    final = checkpoints / (checkpoints / "latest").read_text().strip() / "model"
    return {
        "label": "policylab" + (" (packed)" if spec["packing"] else ""),
        "step_times": [r["perf/step_s"] for r in rows],
        "generated": [r["perf/tokens_per_s"] * r["perf/step_s"] for r in rows],
        "phases_s": _median_phases(phases[1:]),
        "accuracy": held_out_accuracy(str(final), spec) if spec["evaluate"] else None,
        "reward_last": _mean([r["reward/mean"] for r in rows[-LAST_STEPS:]]),
    }


def run_trl(spec: dict) -> dict:
    from datasets import Dataset
    from trl import GRPOTrainer

    from policylab import tasks
    from policylab.models import load_model

    task = tasks.get(spec["task"], **spec["knobs"])
    # policylab's prompt pool: the same examples, and TRL also walks it in seeded epochs
    pool = task.examples("train", spec["pool"], seed=spec["seed"])
    dataset = Dataset.from_list([{k: v for k, v in e.items() if k != "completion"} for e in pool])
    timer = step_timer()

    def task_reward(prompts, completions, completion_ids, **columns):
        timer.generated += sum(len(ids) for ids in completion_ids)  # end token included
        return task.reward(prompts, completions, **columns)

    task_reward.__name__ = f"{task.name}_verifier"
    model, tokenizer = load_model(spec["model"])  # fp32, pad token set, left padding
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=task_reward,
        args=trl_config(spec),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[timer],
    )
    for method in timer.TIMED:  # the phases, timed from outside on this instance
        setattr(trainer, method, timer.timed(method, getattr(trainer, method)))
    trainer.train()
    steps = trainer.state.global_step
    if steps != spec["steps"]:
        raise RuntimeError(f"TRL ran {steps} optimiser steps, asked for {spec['steps']}")
    accuracy = None
    if spec["evaluate"]:
        final = Path(spec["dir"]) / "final"
        trainer.save_model(str(final))
        tokenizer.save_pretrained(str(final))
        accuracy = held_out_accuracy(str(final), spec)
    rewards = [r["reward"] for r in trainer.state.log_history if "reward" in r]
    return {
        "label": f"TRL {_version('trl')}",
        "step_times": timer.steps,
        "generated": timer.tokens,
        "phases_s": _median_phases(timer.phases[1:]),
        "accuracy": accuracy,
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
    """A TRL callback that times each optimiser step (generation included), and its
    phases from the GRPOTrainer methods in TIMED, wrapped on the instance."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        TIMED = (
            "_generate",
            "_calculate_rewards",
            "_generate_and_score_completions",
            "_prepare_inputs",
            "training_step",
        )

        def __init__(self) -> None:
            self.steps: list[float] = []
            self.tokens: list[float] = []
            self.phases: list[dict[str, float]] = []
            self.generated = 0
            self._spent = dict.fromkeys(self.TIMED, 0.0)
            self._start = 0.0

        def timed(self, name, method):
            def wrapper(*args, **kwargs):
                start = time.perf_counter()
                try:
                    return method(*args, **kwargs)
                finally:
                    self._spent[name] += time.perf_counter() - start

            return wrapper

        def on_step_begin(self, args, state, control, **kwargs):
            self._spent = dict.fromkeys(self.TIMED, 0.0)
            self.generated = 0
            self._start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            step = time.perf_counter() - self._start
            t = self._spent
            self.steps.append(step)
            self.tokens.append(self.generated)
            self.phases.append(
                {
                    "generate": t["_generate"],
                    "score": t["_calculate_rewards"],
                    "reference": t["_generate_and_score_completions"]
                    - t["_generate"]
                    - t["_calculate_rewards"],
                    "learn": t["training_step"] - t["_prepare_inputs"],
                    "optimiser": step - t["training_step"],
                }
            )

    return StepTimer()


def _median_phases(phases: list[dict[str, float]]) -> dict[str, float]:
    return {ph: statistics.median(p[ph] for p in phases) for ph in PHASES}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


if __name__ == "__main__":
    main()
