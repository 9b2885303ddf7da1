"""Arena of papers/seed_generative.md G1.8 at our scale: pretrained, diffu_grpo (d1),
d2_stepmerge (N = 2) and d2_exact on 2-digit `arithmetic`, from the tiny MDM, equal
generated samples per run, paired seeds, 95 % Student-t CIs.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/mdm_arena.py \
        --model runs/tiny-mdm-1500 --seeds 5 --steps 40

Budget per run: steps × prompts_per_step × samples_per_prompt generated samples (default
40 × 8 × 8 = 2,560; the spec's 25,600 = 200 × 16 × 8 cut 10× to fit ~8 minutes of one
core). Metric [G1.8]: late-window held-out greedy accuracy, the mean of the last 3
evaluations (every `--eval-every` steps, 200 held-out prompts, the same for every run).
`pretrained` is the start model's evaluation (greedy: the same for every seed). The
estimator gap |one_step − exact_steps| (nats/token) is measured on each run's own rows.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from policylab import recipes  # noqa: E402
from policylab.api import train  # noqa: E402
from policylab.arena.stats import mean_ci, paired_difference_ci  # noqa: E402
from policylab.recipes.base import S  # noqa: E402

ALGOS = ("diffu_grpo", "d2_stepmerge", "d2_exact")


def decode_at(algos: list[str], steps: int) -> None:
    """Every recipe in `algos` decodes in `steps` steps for this process (G1.8: Co-GRPO is
    compared with d2_exact at S = L/2, so all of them decode at the same S)."""
    for name in algos:
        recipe = recipes.get(name)
        training = {**recipe.training, "decode_steps": S(steps, "[ours] arena: one S for all")}
        recipes.recipes.add(name, dataclasses.replace(recipe, training=training), replace=True)


def late_window(run_dir: Path) -> tuple[float, float, list[float]]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [r["eval/greedy_accuracy"] for r in rows if r["kind"] == "eval"]
    gaps = [r["estimator/gap"] for r in rows if r["kind"] == "train" and "estimator/gap" in r]
    return sum(evals[-3:]) / len(evals[-3:]), evals[0], gaps


def run_seconds(run_dir: Path) -> float:
    """A finished run's wall time (its last evaluation's time/elapsed_s)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["kind"] == "eval"][-1]["time/elapsed_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="runs/tiny-mdm-1500")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds first … first+seeds−1")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--out", default="runs/mdm-arena")
    parser.add_argument("--algos", default=",".join(ALGOS))
    parser.add_argument("--compare", default="diffu_grpo", help="paired baselines (comma list)")
    parser.add_argument("--decode-steps", type=int, default=0, help="0: each recipe's own S")
    parser.add_argument(
        "--table-only", action="store_true", help="no training: the table of the runs in --out"
    )
    args = parser.parse_args()
    algos = args.algos.split(",")
    compare = args.compare.split(",")
    if args.decode_steps:
        decode_at(algos, args.decode_steps)
    out = Path(args.out)
    load_before = os.getloadavg()
    start = time.perf_counter()
    score: dict[str, dict[int, float]] = {"pretrained": {}}
    gaps: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    for algo in algos:
        score[algo], gaps[algo], seconds[algo] = {}, [], 0.0
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            run_dir = out / f"{algo}-s{seed}"
            t0 = time.perf_counter()
            if args.table_only:
                if not (run_dir / "metrics.jsonl").is_file():
                    continue  # a seed this method was not run for (the table gives counts)
                seconds[algo] += run_seconds(run_dir)
            else:
                train(
                    algo=algo,
                    task="arithmetic",
                    model=args.model,
                    seed=seed,
                    steps=args.steps,
                    prompts_per_step=args.prompts,
                    samples_per_prompt=args.group,
                    epochs=args.epochs,
                    lr=args.lr,
                    eval_every=args.eval_every,
                    eval_n=200,
                    run_dir=str(run_dir),
                    progress=False,
                    report_to=[],
                )
                seconds[algo] += time.perf_counter() - t0
            score[algo][seed], score["pretrained"][seed], run_gaps = late_window(run_dir)
            gaps[algo] += run_gaps
            print(f"{algo} seed {seed}: late-window greedy {score[algo][seed]:.3f}", flush=True)
    budget = args.steps * args.prompts * args.group
    lines = [
        f"budget {budget} generated samples per run ({args.steps} steps × {args.prompts} "
        f"prompts × {args.group} samples), μ = {args.epochs}, lr {args.lr}, "
        f"{args.seeds} seeds, model {args.model}, decode steps {args.decode_steps or 'recipe'}",
        "",
        "| method | late-window greedy accuracy | 95 % CI | − pretrained (paired) | "
        + "".join(f"− {b} (paired) | " for b in compare)
        + "mean estimator gap (nats/token) | seconds / run |",
        "|---|---|---|---|" + "---|" * len(compare) + "---|---|",
    ]
    for algo in ("pretrained", *algos):
        ci = mean_ci(list(score[algo].values()))
        diffs = []
        for base in ("pretrained", *compare):
            if base == algo or (base != "pretrained" and algo == "pretrained"):
                diffs.append("—")
                continue
            d = paired_difference_ci(score[algo], score[base])
            diffs.append(f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}]")
        gap = f"{sum(gaps[algo]) / len(gaps[algo]):.3f}" if gaps.get(algo) else "—"
        secs = f"{seconds[algo] / len(score[algo]):.0f}" if algo in seconds else "—"
        name = algo if algo == "pretrained" else f"{algo} ({len(score[algo])} seeds)"
        interval = "—" if ci.low != ci.low else f"[{ci.low:.3f}, {ci.high:.3f}]"
        lines.append(
            f"| {name} | {ci.mean:.3f} | {interval} | {' | '.join(diffs)} | {gap} | {secs} |"
        )
    lines.append("")
    lines.append(
        f"total {time.perf_counter() - start:.0f} s; load average before {load_before}, "
        f"after {os.getloadavg()}"
    )
    text = "\n".join(lines)
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text(text + "\n")
    (out / "scores.json").write_text(json.dumps({"score": score, "gaps": gaps}, indent=1))


if __name__ == "__main__":
    main()
