"""DiLoCoX vs DDP at our scale (papers/seed_agents.md §A10): bytes sent per worker to reach
L* = 1.02 × ddp's final held-out loss, final held-out loss at equal tokens, and simulated
wall-clock on a slow link. `dilocox` is provisional (its delay and compression rules are our
reading of the paper's abstract).

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/diloco.py \
        --mode ddp diloco@50 dilocox@50 dilocox@100 --workers 2 --inner-steps 1000 \
        --seeds 0 1 --link-gbps 1 --out runs/diloco

Each (mode, seed) run is saved as JSON in --out as it finishes (a rerun skips those already
there); the table is printed as markdown at the end. The criterion (§A10): dilocox reaches
L* with ≥ 100× fewer bytes than ddp and its final loss is within 2 % of ddp's; "inside the
noise" when the loss gap's ±2 standard errors straddle 2 %.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from policylab.distributed.diloco_sft import MODES, LowCommConfig, launch

ARENA = ("ddp", "diloco@50", "dilocox@50", "dilocox@100")
TARGET = 1.02  # L* = 1.02 × ddp's final held-out loss
BYTES_FACTOR = 100  # the claim: ≥ 100× fewer bytes
LOSS_GAP = 0.02  # the claim: final loss within 2 %


ABLATIONS = {"nodelay": {"delay": 0}, "fp32": {"compress": False}}  # dilocox's parts


def arm(entry: str, local_steps: int) -> tuple[str, int, dict]:
    """'dilocox@100' → ('dilocox', 100, {}); a bare mode takes --local-steps; a suffix
    '+nodelay' or '+fp32' turns off DiLoCoX's delay or its compression (ablations)."""
    head, *options = entry.split("+")
    mode, _, h = head.partition("@")
    if mode not in MODES or any(o not in ABLATIONS for o in options):
        raise SystemExit(
            f"--mode {entry!r}: accepted MODE[@H][+nodelay][+fp32], MODE one of {MODES}"
        )
    changes = {k: v for o in options for k, v in ABLATIONS[o].items()}
    return mode, int(h) if h else local_steps, changes


def run_all(args) -> dict:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[int, dict]] = {}
    for entry in args.mode:
        mode, h, changes = arm(entry, args.local_steps)
        suffix = entry[len(entry.split("+")[0]) :]
        name = mode if mode == "ddp" else f"{mode}@{h}{suffix}"
        for seed in args.seeds:
            path = out / f"{name.replace('@', '_H').replace('+', '_')}_seed{seed}.json"
            if not path.exists():
                cfg = LowCommConfig(
                    mode=mode,
                    inner_steps=args.inner_steps,
                    local_steps=h,
                    batch_size=args.batch_size,
                    eval_every=args.eval_every,
                    link_gbps=args.link_gbps,
                    seed=seed,
                    **changes,
                )
                started = time.perf_counter()
                result = launch([cfg], workers=args.workers)[0][0]
                result["wall_seconds"] = round(time.perf_counter() - started, 1)
                result.pop("history")
                path.write_text(json.dumps(result, indent=1) + "\n")
                print(
                    f"{name} seed {seed}: loss {result['loss/held_out']:.4f} "
                    f"({result['wall_seconds']} s)",
                    flush=True,
                )
            results.setdefault(name, {})[seed] = json.loads(path.read_text())
    return results


def bytes_to_reach(curve: list[dict], target: float) -> int | None:
    """Bytes sent when the held-out loss first reaches `target` (None: never)."""
    return next((point["bytes"] for point in curve if point["loss"] <= target), None)


def mean_sd(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def table(results: dict) -> str:
    ddp = results["ddp"]
    lines = [
        "| arm | final held-out loss | gap to ddp | bytes/worker (all steps) | bytes/worker to L* "
        "| ddp bytes to L* ÷ arm's | sim. wall-clock (s) | of which link (s) | rank mean "
        "| compression | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, runs in results.items():
        seeds = sorted(set(runs) & set(ddp))
        losses = [runs[s]["loss/held_out"] for s in seeds]
        gaps = [runs[s]["loss/held_out"] / ddp[s]["loss/held_out"] - 1 for s in seeds]
        reach = [bytes_to_reach(runs[s]["curve"], TARGET * ddp[s]["loss/held_out"]) for s in seeds]
        ddp_reach = [
            bytes_to_reach(ddp[s]["curve"], TARGET * ddp[s]["loss/held_out"]) for s in seeds
        ]
        ratios = [d / r for d, r in zip(ddp_reach, reach, strict=True) if r and d]
        loss_m, loss_sd = mean_sd(losses)
        gap_m, gap_sd = mean_sd(gaps)
        reached = (
            f"{statistics.mean(reach):,.0f}"
            if all(reach)
            else (f"not reached in {reach.count(None)}/{len(seeds)}")
        )
        ratio = f"{min(ratios):,.0f}×–{max(ratios):,.0f}×" if all(reach) else "—"
        sim = statistics.mean(runs[s]["comm/sim_seconds"] for s in seeds)
        link = statistics.mean(
            runs[s]["comm/sim_seconds"] - runs[s]["compute_seconds"] for s in seeds
        )
        sent = statistics.mean(runs[s]["comm/bytes_total"] for s in seeds)
        ratio_c = statistics.mean(runs[s]["comm/compression_ratio"] for s in seeds)
        ranks = [runs[s]["comm/rank_mean"] for s in seeds]
        rank = None if None in ranks else statistics.mean(ranks)
        lines.append(
            f"| {name} | {loss_m:.4f} ± {loss_sd:.4f} | {100 * gap_m:+.2f} % ± {100 * gap_sd:.2f} "
            f"| {sent:,.0f} | {reached} | {ratio} | {sim:,.1f} | {link:,.1f} "
            f"| {'—' if rank is None else f'{rank:.1f}'} | {ratio_c:.1f}× "
            f"| {verdict(name, gaps, reach, ratios)} |"
        )
    return "\n".join(lines)


def verdict(name: str, gaps: list[float], reach: list, ratios: list[float]) -> str:
    if not name.startswith("dilocox"):
        return "(reference)"
    if "+" in name:
        return "(ablation)"
    if not all(reach) or min(ratios) < BYTES_FACTOR:
        return "not held"
    gap, sd = mean_sd(gaps)
    se = sd / len(gaps) ** 0.5
    if gap + 2 * se <= LOSS_GAP:
        return "held"
    if gap - 2 * se > LOSS_GAP:
        return "not held"
    return "inside the noise"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", nargs="+", default=list(ARENA), help="MODE or MODE@H")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--inner-steps", type=int, default=1000)
    parser.add_argument("--local-steps", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--link-gbps", type=float, default=1.0)
    parser.add_argument("--out", default="runs/diloco")
    args = parser.parse_args()
    results = run_all(args)
    if "ddp" in results:
        print(table(results))


if __name__ == "__main__":
    main()
