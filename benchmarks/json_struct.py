"""RL-Struct's arena metrics (papers/seed_agents.md §A8) from a finished `policylab arena`
on json_extract, plus `sft_more` models: held-out validity, structural accuracy (exact key
set and types), content accuracy, exact match and mean answer length of greedy answers,
each arm's mean with its 95 % t interval and its paired difference to the baseline
(greedy, or one sample per prompt with --temperature 1, where validity is not saturated); then
the "syntax before semantics" curriculum read from the logged reward parts.

    python benchmarks/json_struct.py runs/arena-json_extract \
        --sft-more 'runs/sft-more-s{seed}' --n 200 --out runs/arena-json_extract/struct.md

Arms are the arena's run folders (`<label>-s<seed>`, the final checkpoint's model) and,
with --sft-more, one model folder per seed (`{seed}` in the pattern). Every arm answers
the same `--n` held-out prompts (task.examples("test", n, seed=10000), greedy). The
baseline is the first arena arm (the arena's own baseline) unless --baseline names one.

Curriculum (per run that logged reward/json_valid and reward/json_content): the first
training step at which the 3-step running mean of each part reaches 90 % of its final
value (the mean of the last 5 steps); validity "precedes" content when its step is
smaller. The claim asks for that in ≥ 2 of 3 seeds (here: of however many ran).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import torch

from policylab import tasks
from policylab.arena.stats import mean_ci, paired_difference_ci
from policylab.engines import HFEngine, Sampling
from policylab.evaluate import prompt_ids
from policylab.models import load_model
from policylab.tasks import json_schema
from policylab.trainers.run import latest_checkpoint, read_metrics

METRICS = ("valid", "structural", "content", "exact", "length")
EVAL_SEED = 10_000  # the trainer's default eval_seed: the same held-out draw as the arena
WINDOW, TAIL, SHARE = 3, 5, 0.9  # curriculum: running mean, final value, 90 % [ours]


def scores(
    model_dir: Path, examples: list[dict], max_new_tokens: int, temperature: float = 0.0
) -> dict[str, float]:
    """Held-out metrics of one model folder's answers: greedy (temperature 0), or one
    sample per prompt at `temperature` from a fixed generator (seed 0)."""
    model, tokenizer = load_model(model_dir)
    model.eval()
    engine = HFEngine(model, tokenizer)
    ids = prompt_ids(tokenizer, [e["prompt"] for e in examples])
    sampling = Sampling(temperature=temperature, max_new_tokens=max_new_tokens)
    out = engine.generate(ids, 1, sampling, torch.Generator().manual_seed(0))
    rows = []
    for text, e in zip(out.texts, examples, strict=True):
        p = json_schema.score(text, e["schema"], e["gold"])
        rows.append(
            {
                "valid": p.valid,
                "structural": float(p.struct == 1.0 and p.fmt == 1.0),
                "content": float(p.content == 1.0),
                "exact": json_schema.exact(text, e["gold"]),
                "length": float(len(json_schema.answer_text(text))),
            }
        )
    return {m: sum(r[m] for r in rows) / len(rows) for m in METRICS}


def arena_arms(folder: Path) -> dict[str, dict[int, Path]]:
    """label → seed → the model folder of that run's final checkpoint."""
    arms: dict[str, dict[int, Path]] = {}
    for run in finished(folder):
        label, seed = run.name.rsplit("-s", 1)
        checkpoint = latest_checkpoint(run)
        if checkpoint is not None and (checkpoint / "model").is_dir():
            arms.setdefault(label, {})[int(seed)] = checkpoint / "model"
    return arms


def finished(folder: Path) -> list[Path]:
    """The arena's finished runs (those with arena_done.json), by name."""
    return sorted(run for run in (folder / "runs").iterdir() if (run / "arena_done.json").is_file())


def reach_step(rows: list[dict], key: str) -> int | None:
    """First step whose running mean of `key` reaches SHARE × its final value."""
    values = [r[key] for r in rows if key in r]
    if len(values) < TAIL:
        return None
    final = sum(values[-TAIL:]) / TAIL
    for i in range(len(values)):
        window = values[max(0, i - WINDOW + 1) : i + 1]
        if sum(window) / len(window) >= SHARE * final:
            return rows[i]["step"]
    return None


def curriculum(folder: Path) -> list[str]:
    lines = [
        "| run | validity 90 % step | content 90 % step | validity first? |",
        "|---|---|---|---|",
    ]
    for run in finished(folder):
        rows = read_metrics(run, kind="train")
        if not rows or "reward/json_valid" not in rows[0] or "reward/json_content" not in rows[0]:
            continue
        v, c = reach_step(rows, "reward/json_valid"), reach_step(rows, "reward/json_content")
        first = (
            "—" if v is None or c is None else ("yes" if v < c else "same step" if v == c else "no")
        )
        lines.append(f"| {run.name} | {v} | {c} | {first} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("arena")
    parser.add_argument("--sft-more", default="", help="model folder pattern with {seed}")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--baseline", default="")
    parser.add_argument("--temperature", type=float, default=0.0, help="0: greedy answers")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    torch.manual_seed(0)
    folder = Path(args.arena)
    arms = arena_arms(folder)
    if args.sft_more:
        seeds = sorted({s for runs in arms.values() for s in runs})
        found = {s: Path(args.sft_more.format(seed=s)) for s in seeds}
        arms["sft_more"] = {s: p for s, p in found.items() if p.is_dir()}
    examples = tasks.get("json_extract").examples("test", args.n, seed=EVAL_SEED)
    results = {
        label: {
            s: scores(p, examples, args.max_new_tokens, args.temperature) for s, p in runs.items()
        }
        for label, runs in arms.items()
    }
    baseline = args.baseline or next(iter(arms))
    how = "greedy answers" if not args.temperature else f"answers sampled at T={args.temperature:g}"
    lines = [
        f"Held-out {how} to {len(examples)} json_extract test prompts; mean over "
        "seeds [95 % t interval]; Δ = paired difference to "
        f"`{baseline}` [95 % t interval].",
        "",
        "| arm | seeds | "
        + " | ".join(METRICS)
        + " | "
        + " | ".join(f"Δ {m}" for m in METRICS)
        + " |",
        "|---|---|" + "---|" * (2 * len(METRICS)),
    ]
    for label, per_seed in results.items():
        cells = []
        for m in METRICS:
            i = mean_ci([r[m] for r in per_seed.values()])
            cells.append(f"{i.mean:.3f} [{i.low:.3f}, {i.high:.3f}]")
        for m in METRICS:
            if label == baseline:
                cells.append("—")
                continue
            a = {s: r[m] for s, r in per_seed.items()}
            b = {s: r[m] for s, r in results[baseline].items()}
            d = paired_difference_ci(a, b)
            cells.append(f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}]")
        lines.append(f"| {_short(label)} | {len(per_seed)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Curriculum (training reward parts, seed_agents.md §A8):",
        "",
        *curriculum(folder),
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


def _short(label: str) -> str:
    return re.sub(r"\s+", " ", label)


if __name__ == "__main__":
    main()
