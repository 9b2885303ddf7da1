"""GUI grounding arena, read back (papers/seed_agents.md §A6): every finished run of a
`policylab arena --task gui_text` folder and the warm-start model itself (`sft_only`) are
scored greedily on the same held-out screens — click accuracy overall and on 1-cell
targets (SE-GUI's "small elements"), and the mean pixel distance of misses to the target's
centre — with 95 % t intervals over seeds and paired differences by seed
(policylab.arena.stats).

    python benchmarks/gui_grounding.py runs/arena-gui_text runs/sft-gui \
        'se_gui@rewards={gui_hit: 1}' 'se_gui@rewards={se_gui_point: 1}' --n 300

The first algorithm is the baseline of the paired differences; `sft_only` has no seeds
(greedy decoding of one model), so its difference to a contender is the contender's
per-seed score minus that one number. GUI-R1's data-efficiency comparison on the action
task (`--mode action`): the arena's RL runs from the small-SFT model against the
large-SFT model as the `sft` row:

    python benchmarks/gui_grounding.py runs/arena-gui_act runs/sft-act3000 \
        'gui_r1@rewards={gui/format: 0.2, gui/acc: 0.8}' --mode action --base-label sft_3000
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

import torch

from policylab import tasks
from policylab.arena.stats import mean_ci, paired_difference_ci
from policylab.engines import HFEngine, Sampling
from policylab.evaluate import prompt_ids
from policylab.models import load_model
from policylab.tasks import gui_rules
from policylab.tasks.gui_text import centre

METRICS = ("accuracy", "accuracy_1cell", "miss_distance")


def score(
    model_dir: Path, rows: list[dict], mode: str = "ground", max_new_tokens: int = 24
) -> dict[str, float]:
    """Greedy answers of the model in `model_dir` on `rows`: accuracy (the task's exact
    verifier), accuracy on 1-cell targets, mean pixel distance of parsed misses."""
    model, tokenizer = load_model(str(model_dir))
    model.eval()
    engine = HFEngine(model, tokenizer)
    ids = prompt_ids(tokenizer, [r["prompt"] for r in rows])
    with torch.no_grad():
        out = engine.generate(ids, 1, Sampling(temperature=0.0, max_new_tokens=max_new_tokens))
    task = tasks.get("gui_text", mode=mode)
    hits, small, misses = [], [], []
    for row, text in zip(rows, out.texts, strict=True):
        hit = task.verify(text, row)
        hits.append(hit)
        if row["cells"] == 1:
            small.append(hit)
        parsed, _ = gui_rules.parse(text, row["mode"])
        if not hit and parsed is not None and parsed.point is not None and row["box"]:
            cx, cy = centre(row["box"])
            misses.append(math.hypot(parsed.point[0] - cx, parsed.point[1] - cy))
    return {
        "accuracy": sum(hits) / len(hits),
        "accuracy_1cell": sum(small) / len(small) if small else math.nan,
        "miss_distance": sum(misses) / len(misses) if misses else math.nan,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("arena")
    parser.add_argument("sft")
    parser.add_argument("algos", nargs="+")
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--mode", default="ground", help="gui_text's mode knob")
    parser.add_argument("--base-label", default="sft_only", help="the name of the `sft` row")
    args = parser.parse_args()
    rows = tasks.get("gui_text", mode=args.mode).examples("test", args.n, seed=12345)
    base = score(Path(args.sft), rows, args.mode)
    per_algo: dict[str, dict[int, dict[str, float]]] = {}
    for algo in args.algos:
        for run in sorted((Path(args.arena) / "runs").glob("*-s*")):
            name, seed = run.name.rsplit("-s", 1)
            if name == _label(algo) and (run / "model").is_dir():
                per_algo.setdefault(algo, {})[int(seed)] = score(run / "model", rows, args.mode)
    print(f"{args.n} held-out screens, {sum(r['cells'] == 1 for r in rows)} 1-cell targets\n")
    print("| contender | seeds | " + " | ".join(METRICS) + " |")
    print("|---|---|" + "---|" * len(METRICS))
    print(f"| {args.base_label} | - | " + " | ".join(f"{base[m]:.3f}" for m in METRICS) + " |")
    for algo, seeds in per_algo.items():
        cells = []
        for m in METRICS:
            i = mean_ci([s[m] for s in seeds.values()])
            cells.append(f"{i.mean:.3f} [{i.low:.3f}, {i.high:.3f}]")
        print(f"| {algo} | {len(seeds)} | " + " | ".join(cells) + " |")
    print()
    first = args.algos[0]
    for algo in args.algos:
        for m in METRICS:
            if algo != first and first in per_algo and algo in per_algo:
                i = paired_difference_ci(
                    {s: v[m] for s, v in per_algo[algo].items()},
                    {s: v[m] for s, v in per_algo[first].items()},
                )
                print(
                    f"{algo} − {first}, {m}: {i.mean:+.3f} [{i.low:+.3f}, {i.high:+.3f}] (n={i.n})"
                )
            if algo in per_algo:
                i = mean_ci([v[m] - base[m] for v in per_algo[algo].values()])
                print(
                    f"{algo} − {args.base_label}, {m}: {i.mean:+.3f} [{i.low:+.3f}, {i.high:+.3f}]"
                )


def _label(algo: str) -> str:
    """The run-folder name the arena gives an entry (arena/runner.py ArenaSpec.run_name)."""
    return re.sub(r"[^\w@=.,+-]", "_", algo)


if __name__ == "__main__":
    main()
