"""GPU smoke test: policylab's own trainer on a model of real size, in bfloat16, on one GPU.

    .venv/bin/python benchmarks/gpu_smoke.py                # CUDA: Qwen2-0.5B's shape, bf16
    .venv/bin/python benchmarks/gpu_smoke.py --cpu-tiny     # the same path, tiny, on the CPU
    .venv/bin/python benchmarks/gpu_smoke.py --engine vllm  # generation by a colocated vLLM

The model is randomly initialised from transformers' `Qwen2Config` with Qwen2-0.5B's
architecture (24 layers, hidden 896, 14 heads / 2 KV heads, a 151,936-token vocabulary,
~494 M parameters) and the tokenizer is built here (policylab's character tokenizer padded
to that vocabulary), so nothing is downloaded. Both are saved to a folder that
`policylab.trainers.llm.train` loads like any checkpoint; the run is GRPO on the
arithmetic task with a reward that varies within each group (the parity of the
completion's length: a random model solves nothing), so every step updates the weights.

Printed: per step the wall time, generated tokens/s (the trainer's `perf/tokens_per_s`)
and its generate / learn split; then the mean over the steps after the first (CUDA
start-up and kernel selection fall in the first) and torch.cuda.max_memory_allocated over
the whole run. Without a CUDA GPU (and without --cpu-tiny) it says so and exits 0.

`--engine vllm` (the extra vllm, a CUDA GPU) generates with a vLLM engine in the trainer's
process (engines/vllm.py, colocate mode) that gets the learner's weights after every
update; each step also prints the sampler/learner log-prob gap (`engine/logprob_gap_mean`
and `_max`: |log π_vLLM − log π_learner| over the first update's tokens), and
`--tis-cap C` turns truncated importance sampling on. Without vllm it says so and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

# Qwen2-0.5B (its config.json), without its weights
QWEN2_05B = dict(
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    max_position_embeddings=32768,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    vocab_size=151_936,
)
TINY = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    max_position_embeddings=256,
    tie_word_embeddings=True,
    vocab_size=160,
)
PARITY = (
    "def parity(prompts, completions, **kw):\n    return [float(len(c) % 2) for c in completions]\n"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu-tiny", action="store_true", help="a tiny model on the CPU (a test)")
    p.add_argument("--device", default="cuda", help='"cuda" or "cuda:N" (ignored with --cpu-tiny)')
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--prompts", type=int, default=16, help="prompts per step")
    p.add_argument("--samples", type=int, default=8, help="samples per prompt")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--micro-batch-rows", type=int, default=0, help="0 = the whole batch")
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work-dir", default=None, help="keep the model and run folder here")
    p.add_argument("--json", default=None, help="also write the results to this file")
    p.add_argument("--engine", default="hf", choices=["hf", "vllm"], help="generation engine")
    p.add_argument("--tis-cap", type=float, default=0.0, help="truncated IS cap C (0 = off)")
    p.add_argument(
        "--vllm-gpu-memory-utilization", type=float, default=0.3, help="vLLM's share of the GPU"
    )
    p.add_argument("--vllm-max-model-len", type=int, default=2048, help="vLLM's context length")
    args = p.parse_args(argv)
    if args.cpu_tiny and args.engine == "vllm":
        p.error("--engine vllm needs a CUDA GPU; --cpu-tiny runs on the CPU")
    if args.cpu_tiny:
        args.device = "cpu"
        args.steps, args.prompts, args.samples = min(args.steps, 2), 2, 4
        args.max_new_tokens = min(args.max_new_tokens, 8)
    return args


def build(folder: Path, shape: dict, seed: int) -> int:
    """A random Qwen2 of `shape` and a tokenizer of its vocabulary size, saved in `folder`
    (float32, as a checkpoint would be); returns the parameter count."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from policylab.models import build_tokenizer

    shape = dict(shape)
    vocab = shape.pop("vocab_size")
    tokenizer = build_tokenizer(filler_tokens=vocab - len(build_tokenizer()))
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        **shape,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # initialising is faster there
    with torch.device(device):
        model = Qwen2ForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def engine_fields(args: argparse.Namespace) -> dict:
    """The config's engine fields: nothing for hf; vLLM colocated on the trainer's GPU."""
    if args.engine == "hf":
        return {}
    vllm = {
        "mode": "colocate",
        "gpu_memory_utilization": args.vllm_gpu_memory_utilization,
        "max_model_len": args.vllm_max_model_len,
        "dtype": args.dtype,
    }
    return {"engine": "vllm", "vllm": vllm}


def run(args: argparse.Namespace, work: Path) -> dict:
    from policylab.config import TrainConfig, load
    from policylab.trainers.llm import train
    from policylab.trainers.run import read_metrics

    started = time.perf_counter()
    parameters = build(work / "model", TINY if args.cpu_tiny else QWEN2_05B, args.seed)
    built_s = time.perf_counter() - started
    (work / "parity.py").write_text(PARITY)
    cfg = load(
        TrainConfig,
        None,
        {
            "algo": "grpo",
            "task": "arithmetic",
            "model": str(work / "model"),
            "rewards": {f"{work / 'parity.py'}:parity": 1.0},
            "device": args.device,
            "dtype": args.dtype,
            "gradient_checkpointing": args.gradient_checkpointing,
            "steps": args.steps,
            "prompts_per_step": args.prompts,
            "samples_per_prompt": args.samples,
            "max_new_tokens": args.max_new_tokens,
            "micro_batch_rows": args.micro_batch_rows,
            "train_pool": 4 * args.prompts,
            "eval_n": 2,
            "eval_every": 0,
            "save_every": 0,
            "progress": False,
            "seed": args.seed,
            "run_dir": str(work / "run"),
            "tis_cap": args.tis_cap,
            **engine_fields(args),
        },
    )
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    train(cfg)
    rows = read_metrics(cfg.run_dir, kind="train")
    steady = rows[1:] or rows  # the first step pays CUDA's start-up
    peak = torch.cuda.max_memory_allocated() if cfg.device != "cpu" else None
    return {
        "model": "tiny Qwen2 (CPU)" if args.cpu_tiny else "Qwen2-0.5B shape, random weights",
        "engine": args.engine,
        "tis_cap": args.tis_cap,
        "parameters": parameters,
        "device": str(torch.cuda.get_device_name()) if peak is not None else "cpu",
        "dtype": args.dtype,
        "gradient_checkpointing": args.gradient_checkpointing,
        "rows_per_step": args.prompts * args.samples,
        "max_new_tokens": args.max_new_tokens,
        "build_s": built_s,
        "steps": [
            {
                "step": r["step"],
                "step_s": r["perf/step_s"],
                "generated_tokens_per_s": r["perf/tokens_per_s"],
                "generate_frac": r["perf/generate_frac"],
                "learn_frac": r["perf/learn_frac"],
                "response_length": r["response/length"],
                "loss": r["loss"],
                "grad_norm": r["grad_norm"],
                "logprob_gap_mean": r.get("engine/logprob_gap_mean", 0.0),
                "logprob_gap_max": r.get("engine/logprob_gap_max", 0.0),
            }
            for r in rows
        ],
        "mean_step_s": sum(r["perf/step_s"] for r in steady) / len(steady),
        "generated_tokens_per_s": sum(r["perf/tokens_per_s"] for r in steady) / len(steady),
        "max_memory_allocated_gib": peak / 2**30 if peak is not None else None,
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }


def report(result: dict, argv: list[str]) -> str:
    lines = [
        f"# gpu_smoke: {result['model']} ({result['parameters'] / 1e6:.3g} M parameters), "
        f"{result['dtype']}, on {result['device']}, engine {result.get('engine', 'hf')}",
        "",
        "command: python benchmarks/gpu_smoke.py " + " ".join(argv),
        f"{result['rows_per_step']} rows per step, up to {result['max_new_tokens']} new tokens "
        f"each; gradient checkpointing {'on' if result['gradient_checkpointing'] else 'off'}",
        "",
        "| step | s | generated tok/s | generate / learn | length | loss | grad norm "
        "| log-prob gap mean / max |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in result["steps"]:
        lines.append(
            f"| {s['step']} | {s['step_s']:.2f} | {s['generated_tokens_per_s']:.0f} | "
            f"{s['generate_frac']:.0%} / {s['learn_frac']:.0%} | {s['response_length']:.1f} | "
            f"{s['loss']:.4f} | {s['grad_norm']:.3g} | "
            f"{s['logprob_gap_mean']:.2e} / {s['logprob_gap_max']:.2e} |"
        )
    memory = result["max_memory_allocated_gib"]
    lines += [
        "",
        f"tokens/s (generated, steps after the first): {result['generated_tokens_per_s']:.0f}",
        f"s/step: {result['mean_step_s']:.2f}",
        "torch.cuda.max_memory_allocated: "
        + (f"{memory:.2f} GiB" if memory is not None else "n/a (CPU)"),
        f"peak RSS: {result['peak_rss_gib']:.2f} GiB",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if not args.cpu_tiny and not torch.cuda.is_available():
        print(
            "gpu_smoke: no CUDA GPU here (torch.cuda.is_available() is False): nothing run. "
            "`--cpu-tiny` runs the same path on a tiny model on the CPU."
        )
        return 0
    if args.engine == "vllm" and importlib.util.find_spec("vllm") is None:
        print('gpu_smoke: --engine vllm needs vllm: pip install "policylab[vllm]"; nothing run.')
        return 0
    if args.work_dir:
        work = Path(args.work_dir)
        work.mkdir(parents=True, exist_ok=True)
        result = run(args, work)
    else:
        with tempfile.TemporaryDirectory(prefix="gpu-smoke-") as tmp:
            result = run(args, Path(tmp))
    print(report(result, argv))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
