"""FLAG-Trader's arena (papers/seed_agents.md §A5): does a partially fine-tuned LM,
trained as an actor-critic by PPO, trade better on held-out series than buy-and-hold and
the untrained LM, and no worse than PPO with an MLP on the same numbers?

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/flag_trader.py \
        --seeds 5 --steps 4800 --eval-n 50 --out runs/flag_trader_arena

Each trained contender is an ordinary `policylab train` run on `policylab/TradeSim-v0`
(the control trainer, equal environment steps, the same settings: config.py
CONTROL_DEFAULTS), then its mode (argmax action) trades the same `eval_n` held-out series
of the test split (seeds 10⁶ …, never trained on). Evaluated-only contenders: the two
rule baselines and the untrained LM policy (its head at initialisation). Per run: the
mean over series of Sharpe ratio, cumulative return, max drawdown and turnover; per
algorithm: mean over seeds with a 95 % t interval; differences paired by seed
(policylab.arena.stats)."""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from policylab.arena.stats import mean_ci, paired_difference_ci
from policylab.envs import ID_TRADE_SIM
from policylab.envs.trade_sim import BASELINES, evaluate_trader
from policylab.policies.lm_control import make_lm_control_policy
from policylab.routing import run_config
from policylab.routing import train as run_train
from policylab.trainers.control import load_policy

TRAINED = {"flag_trader": "lm_ppo_partial", "lm_ppo_full": "lm_ppo_full", "ppo": "mlp_ppo"}
METRICS = ("trade/sharpe", "trade/cr", "trade/mdd", "trade/turnover")


def acting(policy, how: str):
    """observations [n, 7] → actions [n]: the policy's most likely ones ("mode"), or drawn
    from it with a fixed generator ("sample", the same draws for every contender)."""
    generator = torch.Generator().manual_seed(12345)

    def act(obs: np.ndarray) -> np.ndarray:
        x = torch.as_tensor(obs, dtype=torch.float32)
        with torch.no_grad():
            if how == "mode":
                return policy.mode(x).numpy()
            return policy.sample(x, generator=generator).actions.numpy()

    return act


def score(act, eval_n: int) -> dict[str, float]:
    result = evaluate_trader(act, n=eval_n, split="test")
    return {key: result[key] for key in METRICS}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--steps", type=int, default=4800, help="environment steps per run")
    p.add_argument("--eval-n", type=int, default=50, help="held-out series")
    p.add_argument("--algos", default="flag_trader,lm_ppo_full,ppo")
    p.add_argument("--out", default="runs/flag_trader_arena")
    p.add_argument(
        "--act",
        choices=("mode", "sample"),
        default="mode",
        help="how trained and LM policies act on the held-out series (a finished run is "
        "re-scored, not retrained)",
    )
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / ("results.json" if args.act == "mode" else f"results_{args.act}.json")
    results: dict = json.loads(results_path.read_text()) if results_path.exists() else {}

    def record(name: str, seed: int, scores: dict, seconds: float) -> None:
        results.setdefault(name, {})[str(seed)] = {**scores, "seconds": seconds}
        results_path.write_text(json.dumps(results, indent=1))

    fixed = {"buy_and_hold": None, "momentum": None, "untrained_lm": None}
    fixed["untrained_lm"] = score(acting(make_lm_control_policy(), args.act), args.eval_n)
    for name in ("buy_and_hold", "momentum"):
        fixed[name] = score(BASELINES[name], args.eval_n)
    for seed in range(args.seeds):
        for name, scores in fixed.items():
            record(name, seed, scores, 0.0)  # deterministic: the same at every seed
        for algo in args.algos.split(","):
            label = TRAINED.get(algo, algo)
            if str(seed) in results.get(label, {}):
                continue  # done in an earlier, interrupted invocation
            run_dir = out / f"{label}-s{seed}"
            if (run_dir / "summary.md").exists():  # trained before: score it again
                policy = load_policy(run_dir)
                record(label, seed, score(acting(policy, args.act), args.eval_n), math.nan)
                continue
            cfg = run_config(
                None,
                {
                    "algo": algo,
                    "task": ID_TRADE_SIM,
                    "seed": seed,
                    "total_steps": args.steps,
                    "eval_every": 0,
                    "progress": False,
                    "report_to": [],
                    "run_dir": str(run_dir),
                },
            )
            started = time.perf_counter()
            result = run_train(cfg)
            seconds = time.perf_counter() - started
            policy = load_policy(result.run_dir)
            record(label, seed, score(acting(policy, args.act), args.eval_n), seconds)
            print(f"{label} seed {seed}: {results[label][str(seed)]}", flush=True)
    (out / "table.md").write_text(table(results, args))
    print(table(results, args))


def table(results: dict, args) -> str:
    names = list(results)
    lines = [
        f"{args.seeds} seeds × {args.steps} environment steps per trained run; "
        f"{args.eval_n} held-out series (test split), policies act by {args.act}.",
        "",
        "| algorithm | Sharpe | CR | MDD | turnover | s/run |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        runs = results[name]
        cells = []
        for key in METRICS:
            ci = mean_ci([r[key] for r in runs.values()])
            cells.append(f"{ci.mean:.3f} [{ci.low:.3f}, {ci.high:.3f}]")
        secs = np.nanmean([r["seconds"] for r in runs.values()] or [math.nan])
        lines.append(f"| {name} | {' | '.join(cells)} | {secs:.0f} |")
    lines += ["", "| paired Δ Sharpe (seed-paired) | Δ | 95 % CI |", "|---|---|---|"]
    ours = "lm_ppo_partial"
    for other in names:
        if other == ours or ours not in results:
            continue
        a = {int(s): r["trade/sharpe"] for s, r in results[ours].items()}
        b = {int(s): r["trade/sharpe"] for s, r in results[other].items()}
        d = paired_difference_ci(a, b)
        lines.append(f"| {ours} − {other} | {d.mean:+.3f} | [{d.low:+.3f}, {d.high:+.3f}] |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
