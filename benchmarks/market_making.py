"""DRLMM's arena (papers/seed_control_theory.md §13.2): PPO and A2C, each with the PnL
and the trade-completion reward, on policylab/MarketMaking-v0, beside the exact optimum
(backward induction over (t, q)) and the best fixed symmetric quote.

    PYTHONPATH=src OMP_NUM_THREADS=1 .venv/bin/python benchmarks/market_making.py \
        --seeds 0 1 2 3 4 --total-steps 40000

Per run: the trained policy's deterministic actions at every (t, q) are evaluated
EXACTLY (`market_making.evaluate`), as a fraction of the optimum; and 1000 sampled
episodes give the PnL's mean and standard deviation (the trade-completion claim is about
the PnL's spread). Arms alternate seed by seed. Prints one line per run, then per arm
the mean with a 95 % t-interval, and paired differences."""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

import policylab
from policylab.arena.stats import mean_ci, paired_difference_ci
from policylab.envs import ID_MARKET_MAKING
from policylab.envs.market_making import Book, MarketMakingEnv, evaluate, policy_table, solve

ARMS = {
    "ppo/pnl": ("ppo", "pnl"),
    "ppo/trade_completion": ("ppo", "trade_completion"),
    "a2c/pnl": ("a2c", "pnl"),
    "a2c/trade_completion": ("a2c", "trade_completion"),
}


def sampled_pnl(act, episodes: int, seed: int) -> tuple[float, float]:
    """Mean and std of the episode PnL (the objective's sample, whatever the reward)."""
    env = MarketMakingEnv()
    totals = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            obs, _, done, _, info = env.step(int(act(obs[None])[0]))
            total += info["pnl"]
        totals.append(total)
    return float(np.mean(totals)), float(np.std(totals))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--total-steps", type=int, default=40_000)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    args = parser.parse_args()
    book = Book()
    V, best = solve(book)
    Q = book.max_inventory
    optimum = V[0, Q]
    fixed = {
        pair: evaluate(book, np.full((book.horizon, 2 * Q + 1), book.actions.index(pair)))[0, Q]
        for pair in [(d, d) for d in (2, 3, 4)]
    }
    pair, value = max(fixed.items(), key=lambda kv: kv[1])
    print(f"load before: {os.getloadavg()}")
    print(
        f"exact optimum {optimum:.4f}; best fixed symmetric quote {pair}: {value:.4f} "
        f"({value / optimum:.3f} of the optimum)"
    )

    def optimal(obs):
        t = np.rint(obs[:, 0] * book.horizon).astype(int)
        return best[t, np.rint(obs[:, 1] * Q).astype(int) + Q]

    mean, std = sampled_pnl(optimal, args.episodes, 10_000)
    print(f"optimal policy, sampled PnL: mean {mean:.2f} std {std:.2f}")
    exact: dict[str, dict[int, float]] = {a: {} for a in args.arms}
    means: dict[str, dict[int, float]] = {a: {} for a in args.arms}
    stds: dict[str, dict[int, float]] = {a: {} for a in args.arms}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for arm in args.arms:
                algo, reward = ARMS[arm]
                result = policylab.train(
                    task=ID_MARKET_MAKING,
                    algo=algo,
                    seed=seed,
                    total_steps=args.total_steps,
                    env_kwargs={"reward": reward},
                    eval_every=0,  # start and end only: the exact evaluation below scores it
                    run_dir=f"{tmp}/{arm.replace('/', '-')}-{seed}",
                    progress=False,
                    report_to=[],
                )
                policy = policylab.load_policy(result.run_dir)

                def act(obs, policy=policy):
                    return policy.predict(obs, deterministic=True)[0]

                exact[arm][seed] = evaluate(book, policy_table(act, book))[0, Q] / optimum
                means[arm][seed], stds[arm][seed] = sampled_pnl(act, args.episodes, 10_000)
                print(
                    f"{arm} seed {seed}: exact {exact[arm][seed]:.3f} of the optimum; PnL "
                    f"mean {means[arm][seed]:.2f} std {stds[arm][seed]:.2f} "
                    f"({result.seconds:.0f} s)",
                    flush=True,
                )
    print(f"load after: {os.getloadavg()}")
    print("| arm | exact value / optimum | sampled PnL mean | PnL std |")
    print("|---|---|---|---|")
    for arm in args.arms:
        cells = [mean_ci(list(d[arm].values())) for d in (exact, means, stds)]
        print(
            f"| {arm} | "
            + " | ".join(f"{c.mean:.3f} [{c.low:.3f}, {c.high:.3f}]" for c in cells)
            + " |"
        )
    for algo in ("ppo", "a2c"):
        pnl, tc = f"{algo}/pnl", f"{algo}/trade_completion"
        if pnl in args.arms and tc in args.arms:
            for name, d in (("value", exact), ("PnL mean", means), ("PnL std", stds)):
                diff = paired_difference_ci(d[tc], d[pnl])
                print(
                    f"{algo}: trade_completion − pnl, {name}: {diff.mean:+.3f} "
                    f"[{diff.low:+.3f}, {diff.high:+.3f}]"
                )


if __name__ == "__main__":
    main()
