"""Eval-only arena of the test-time methods (papers/seed_agents.md §A9): greedy, best_of_n,
latentseek, latent_conf_pg and best_of_m_by_confidence on one held-out set, paired by
prompt, at equal reward calls (N = 10 per instance: best_of_n draws up to 10, latentseek
scores its first answer then takes up to 9 steps) or equal decodes (latent_conf_pg's
10 × 8 + 1 = 81 against 81 samples ranked by confidence).

    # the DMLR-text model: SFT of the tiny model with 4 pauses `~` between prompt and answer
    python benchmarks/testtime.py pause-data --out runs/pause_arith3.jsonl n_operands=3
    policylab sft --model tiny --task runs/pause_arith3.jsonl --out runs/sft-pause3 \\
        steps=1000 pool_size=20000 eval_n=200
    # the arena (every contender on the same model, prompts end with the 4 pauses)
    python benchmarks/testtime.py arena --model runs/sft-pause3 --n 200 --seeds 5 \\
        --out runs/testtime-arena n_operands=3

Statistics: per seed, the accuracy over the prompts; across seeds, the mean with its
Student-t interval and paired differences (policylab.arena.stats); over prompts, a paired
bootstrap of the accuracy difference (prompts resampled, seeds averaged) and exact McNemar
tests per seed. Deterministic contenders (greedy, latentseek under the exact oracle) run
once and stand for every seed. Finished (contender, seed) files are reused on a rerun.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from policylab import tasks
from policylab.arena.stats import mcnemar_p, mean_ci, paired_bootstrap_ci, paired_difference_ci
from policylab.config import parse_overrides
from policylab.testtime_run import evaluate, pause_rows, resolve

N_REWARD_CALLS = 10
# name → (method, options, sampled): every contender gets pause=4 (the model's input)
CONTENDERS = {
    "greedy": ("greedy", {}, False),
    "best_of_n": ("best_of_n", {"n": N_REWARD_CALLS}, True),
    "latentseek": ("latentseek", {"steps": N_REWARD_CALLS - 1}, False),
    "latentseek_answer": (
        "latentseek",
        {"steps": N_REWARD_CALLS - 1, "start": "answer", "rho": 0.5},
        False,
    ),
    "best_of_n_noisy": ("best_of_n", {"n": N_REWARD_CALLS, "reward": "noisy_oracle"}, True),
    "latentseek_answer_noisy": (
        "latentseek",
        {"steps": N_REWARD_CALLS - 1, "start": "answer", "rho": 0.5, "reward": "noisy_oracle"},
        True,
    ),
    "latent_conf_pg": ("latent_conf_pg", {}, True),
    "best_of_m_by_confidence": ("best_of_m_by_confidence", {"m": 81}, True),
}
PAIRS = [
    ("latentseek_answer", "best_of_n"),
    ("latentseek", "best_of_n"),
    ("latentseek_answer_noisy", "best_of_n_noisy"),
    ("latentseek_answer", "greedy"),
    ("latent_conf_pg", "best_of_m_by_confidence"),
    ("latent_conf_pg", "greedy"),
]


def _pause_data(args) -> int:
    task = tasks.get(args.task, **parse_overrides(args.knobs))
    rows = pause_rows(task, args.n, pause=args.pause, seed=args.seed)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {len(rows)} rows to {args.out}, e.g. {rows[0]}")
    return 0


def _run(args, model, tok, task, name: str, seed: int) -> dict:
    path = Path(args.out) / f"{name}-s{seed}.json"
    if path.is_file():
        return json.loads(path.read_text())
    method, options, _ = CONTENDERS[name]
    options = {**options, "pause": args.pause}
    if method == "latent_conf_pg":  # its K pauses are the model's pause characters
        options["K"] = args.pause
    method, options = resolve(method, options)
    started = time.perf_counter()
    outcomes, summary = evaluate(
        model, tok, task, method, options, n=args.n, seed=seed, eval_seed=args.eval_seed
    )
    record = {
        "contender": name,
        "seed": seed,
        "options": options,
        "summary": summary,
        "correct": [o.correct for o in outcomes],
        "seconds": time.perf_counter() - started,
    }
    path.write_text(json.dumps(record))
    print(
        f"{name} seed {seed}: accuracy {summary['eval/accuracy']:.3f} ({record['seconds']:.0f} s)",
        flush=True,
    )
    return record


def _arena(args) -> int:
    from policylab.models import load_model

    task = tasks.get(args.task, **parse_overrides(args.knobs))
    model, tok = load_model(args.model)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    names = args.contenders.split(",") if args.contenders else list(CONTENDERS)
    records: dict[str, dict[int, dict]] = {}
    for name in names:
        sampled = CONTENDERS[name][2]
        seeds = range(args.seeds) if sampled else [0]
        runs = {s: _run(args, model, tok, task, name, s) for s in seeds}
        records[name] = {s: runs[s if sampled else 0] for s in range(args.seeds)}
    text = report(records, args)
    (Path(args.out) / "results.md").write_text(text)
    print(text)
    return 0


def report(records: dict[str, dict[int, dict]], args) -> str:
    lines = [
        f"Held-out {args.task} {' '.join(args.knobs)}, {args.n} prompts (eval_seed "
        f"{args.eval_seed}), model {args.model}, seeds 0..{args.seeds - 1}.",
        "",
        "| contender | accuracy, mean [95 % CI over seeds] | reward calls | decodes | "
        "forward passes | s per run |",
        "|---|---|---|---|---|---|",
    ]
    for name, runs in records.items():
        acc = mean_ci([r["summary"]["eval/accuracy"] for r in runs.values()])
        s0 = runs[0]["summary"]
        lines.append(
            f"| {name} | {acc.mean:.3f} [{acc.low:.3f}, {acc.high:.3f}] | "
            f"{s0['eval/reward_calls_mean']:.2f} | {s0['eval/decodes_mean']:.1f} | "
            f"{s0['eval/forward_passes_mean']:.1f} | {runs[0]['seconds']:.0f} |"
        )
    lines += [
        "",
        "| pair (a − b) | Δ accuracy, paired t over seeds | Δ, bootstrap over prompts | "
        "McNemar p per seed |",
        "|---|---|---|---|",
    ]
    for a, b in PAIRS:
        if a not in records or b not in records:
            continue
        ra, rb = records[a], records[b]
        d = paired_difference_ci(
            {s: r["summary"]["eval/accuracy"] for s, r in ra.items()},
            {s: r["summary"]["eval/accuracy"] for s, r in rb.items()},
        )
        seeds = sorted(ra)
        mean, low, high = paired_bootstrap_ci(
            [ra[s]["correct"] for s in seeds], [rb[s]["correct"] for s in seeds]
        )
        ps = ", ".join(f"{mcnemar_p(ra[s]['correct'], rb[s]['correct']):.3g}" for s in seeds)
        lines.append(
            f"| {a} − {b} | {d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}] | "
            f"{mean:+.3f} [{low:+.3f}, {high:+.3f}] | {ps} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    data = sub.add_parser("pause-data", help="SFT rows with pauses between prompt and answer")
    data.add_argument("--out", required=True)
    data.add_argument("--n", type=int, default=20000)
    data.add_argument("--pause", type=int, default=4)
    data.add_argument("--seed", type=int, default=0)
    data.add_argument("--task", default="arithmetic")
    data.add_argument("knobs", nargs="*", help="task knobs key=value")
    arena = sub.add_parser("arena", help="every contender on one held-out set")
    arena.add_argument("--model", required=True)
    arena.add_argument("--n", type=int, default=200)
    arena.add_argument("--seeds", type=int, default=5)
    arena.add_argument("--eval-seed", type=int, default=0)
    arena.add_argument("--pause", type=int, default=4)
    arena.add_argument("--task", default="arithmetic")
    arena.add_argument("--contenders", default="", help="comma-separated (default: all)")
    arena.add_argument("--out", default="runs/testtime-arena")
    arena.add_argument("knobs", nargs="*", help="task knobs key=value")
    args = parser.parse_args(argv)
    return _pause_data(args) if args.command == "pause-data" else _arena(args)


if __name__ == "__main__":
    sys.exit(main())
