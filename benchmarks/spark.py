"""SPARK's arena extras (seed_agents.md §A7): the format-SFT data, the fixed held-out judge
set, and the scores `policylab arena` does not log — judge accuracy and test-time
self-selection — for the final model of every run of an arena, with 95 % t intervals and
differences paired by seed (policylab.arena.stats).

    # ≤ 500 format examples from the initial model's own answers (labels: the verifier)
    python benchmarks/spark.py data --model tiny --split train --prompts 125 \
        --out runs/spark/format.jsonl
    # the held-out judge set, built once from the initial model's answers on test prompts
    python benchmarks/spark.py data --model tiny --split test --prompts 100 --judge-only \
        --out runs/spark/judge_test.jsonl
    # after the arena: judge accuracy, greedy, majority@4, best-of-4 by self-judge
    python benchmarks/spark.py score runs/arena-spark --judge-set runs/spark/judge_test.jsonl

Best-of-4 by self-judge [ours, the paper's test-time self-reflection read as selection]:
4 answers sampled at T = 1; each pair (i, j) is judged greedily with the pairwise format
`q a_i|a_j?`; the answer with the most wins is chosen (ties: the earliest). An answer that
cannot be shown (no tag, separator) loses every comparison.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

import torch

from policylab import tasks
from policylab.arena.stats import mean_ci, paired_difference_ci
from policylab.engines import HFEngine, Sampling
from policylab.evaluate import prompt_ids
from policylab.models import load_model
from policylab.tasks.base import extract_answer
from policylab.workflows.spark import Group, RecycleOptions, answers_of, build_items

G = 4
SHOW = RecycleOptions()


def generate(model, tokenizer, prompts, n, temperature, seed, max_new_tokens=16) -> list[str]:
    """n completions per prompt, prompt-major."""
    engine = HFEngine(model, tokenizer)
    sampling = Sampling(temperature=temperature, max_new_tokens=max_new_tokens)
    generator = torch.Generator().manual_seed(seed)
    texts: list[str] = []
    for start in range(0, len(prompts), 256):
        ids = prompt_ids(tokenizer, prompts[start : start + 256])
        texts += engine.generate(ids, n, sampling, generator).texts
    return texts


def build_data(args) -> None:
    task = tasks.get("arithmetic")
    model, tokenizer = load_model(args.model)
    examples = task.examples(args.split, args.prompts, seed=args.seed)
    texts = generate(model, tokenizer, [e["prompt"] for e in examples], G, 1.0, args.seed)
    groups = []
    for j, example in enumerate(examples):
        completions = texts[j * G : (j + 1) * G]
        scores = task.reward([example["prompt"]] * G, completions, answer=[example["answer"]] * G)
        groups.append(
            Group(example["prompt"], example["answer"], completions, [s >= 1 for s in scores])
        )
    options = RecycleOptions(reflection=not args.judge_only, reflect_max=len(groups))
    items = build_items(groups, random.Random(args.seed), options).items
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(i) + "\n" for i in items))
    kinds = Counter(i["kind"] for i in items)
    solved = sum(any(g.correct) for g in groups) / len(groups)
    print(f"{out}: {len(items)} examples {dict(kinds)}; groups with a correct answer {solved:.2f}")


def judge_accuracy(model, tokenizer, items: list[dict]) -> float:
    texts = generate(model, tokenizer, [i["prompt"] for i in items], 1, 0.0, 0, 8)
    return sum(extract_answer(t) == i["answer"] for t, i in zip(texts, items, strict=True)) / len(
        items
    )


def most_wins(n: int, said: dict[tuple[int, int], str | None]) -> int:
    """The answer with the most pairwise wins, ties to the earliest: `said[i, j]` is the
    judge's verdict on `q a_i|a_j?` ("1": a_i is right, "2": a_j; anything else: no win)."""
    wins = [0] * n
    for (i, j), verdict in said.items():
        if verdict in ("1", "2"):
            wins[i if verdict == "1" else j] += 1
    return max(range(n), key=lambda k: (wins[k], -k))


def self_selection(model, tokenizer, examples, seed: int) -> dict[str, float]:
    """Greedy, majority@4 and best-of-4-by-self-judge accuracy on `examples`."""
    task = tasks.get("arithmetic")
    prompts = [e["prompt"] for e in examples]
    answers = [e["answer"] for e in examples]
    greedy = generate(model, tokenizer, prompts, 1, 0.0, seed)
    sampled = generate(model, tokenizer, prompts, G, 1.0, seed)
    pairs = list(itertools.permutations(range(G), 2))
    judge_prompts, where = [], []
    shown_all = []
    for j, q in enumerate(prompts):
        group = Group(q, answers[j], sampled[j * G : (j + 1) * G], [False] * G)
        shown = answers_of(group, SHOW)
        shown_all.append(shown)
        for a, b in pairs:
            if shown[a] is not None and shown[b] is not None:
                judge_prompts.append(f"{q}{shown[a]}|{shown[b]}?")
                where.append((j, a, b))
    verdicts = generate(model, tokenizer, judge_prompts, 1, 0.0, seed, 4) if judge_prompts else []
    said: list[dict] = [{} for _ in prompts]
    for (j, a, b), text in zip(where, verdicts, strict=True):
        said[j][a, b] = extract_answer(text)
    chosen, majority = [], []
    for j in range(len(prompts)):
        chosen.append(sampled[j * G + most_wins(G, said[j])])
        votes = Counter(s for s in shown_all[j] if s is not None)
        top = votes.most_common(1)[0][0] if votes else ""
        majority.append(f"<answer>{top}</answer>")

    def acc(texts):
        return sum(s >= 1 for s in task.reward(prompts, texts, answer=answers)) / len(prompts)

    return {"greedy": acc(greedy), "maj4": acc(majority), "bo4_judge": acc(chosen)}


def score(args) -> None:
    folder = Path(args.arena)
    items = [json.loads(line) for line in Path(args.judge_set).read_text().splitlines()]
    examples = tasks.get("arithmetic").examples("test", args.n, seed=0)
    table: dict[str, dict[int, dict[str, float]]] = {}
    finished = [r for r in sorted((folder / "runs").iterdir()) if (r / "arena_done.json").exists()]
    runs = [(*r.name.rsplit("-s", 1), r / "model") for r in finished]
    if args.start:  # the shared starting model, scored with each seed's sampling draws
        seeds = sorted({seed for _, seed, _ in runs})
        runs = [("start", seed, Path(args.start)) for seed in seeds] + runs
    for algo, seed, path in runs:
        model, tokenizer = load_model(str(path))
        scores = {"judge_acc": judge_accuracy(model, tokenizer, items)}
        scores.update(self_selection(model, tokenizer, examples, int(seed)))
        scores["bo4_minus_greedy"] = scores["bo4_judge"] - scores["greedy"]
        table.setdefault(algo, {})[int(seed)] = scores
        print(algo, seed, {k: round(v, 3) for k, v in scores.items()}, file=sys.stderr)
    metrics = ["judge_acc", "greedy", "maj4", "bo4_judge", "bo4_minus_greedy"]
    base = re.sub(r"[^\w@=.,+-]", "_", args.base)  # as the arena names run folders
    base = base if base in table else next(iter(table))
    lines = [
        f"judge set: {len(items)} items ({args.judge_set}); self-selection on {len(examples)} "
        "held-out prompts; mean [95 % t CI] over seeds; Δ = paired by seed vs " + base,
        "",
        "| algorithm | seeds | " + " | ".join(metrics) + " | Δ judge_acc | Δ bo4_judge |",
        "|---|---|" + "---|" * (len(metrics) + 2),
    ]
    for algo, runs in table.items():
        cells = []
        for m in metrics:
            ci = mean_ci([r[m] for r in runs.values()])
            cells.append(f"{ci.mean:.3f} [{ci.low:.3f}, {ci.high:.3f}]")
        deltas = []
        for m in ("judge_acc", "bo4_judge"):
            if algo == base:
                deltas.append("—")
                continue
            d = paired_difference_ci(
                {s: r[m] for s, r in runs.items()}, {s: r[m] for s, r in table[base].items()}
            )
            deltas.append(f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}]")
        lines.append(f"| {algo} | {len(runs)} | " + " | ".join(cells + deltas) + " |")
    text = "\n".join(lines) + "\n"
    (folder / "spark_scores.md").write_text(text)
    (folder / "spark_scores.json").write_text(json.dumps(table, indent=1))
    print(text)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    data = sub.add_parser("data", help="format-SFT data or the held-out judge set")
    data.add_argument("--model", default="tiny")
    data.add_argument("--split", choices=("train", "test"), default="train")
    data.add_argument("--prompts", type=int, default=125)
    data.add_argument("--seed", type=int, default=0)
    data.add_argument("--judge-only", action="store_true", help="no reflection items")
    data.add_argument("--out", required=True)
    scored = sub.add_parser("score", help="judge accuracy and self-selection of an arena")
    scored.add_argument("arena")
    scored.add_argument("--judge-set", required=True)
    scored.add_argument("--n", type=int, default=100, help="held-out arithmetic prompts")
    scored.add_argument("--base", default="grpo", help="the --algos entry paired against")
    scored.add_argument("--start", default="", help="also score this model (the warm start)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    build_data(args) if args.cmd == "data" else score(args)


if __name__ == "__main__":
    main()
