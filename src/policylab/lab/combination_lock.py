"""`lab/combination_lock`: HNPG's rich-observation lock with its offline data
(papers/seed_control_theory.md §8.3; envs/combination_lock.py has the dynamics).

Knobs: `H` (horizon, default 5 [ours: the paper's 50 is out of reach on 2 cores]),
`offline_episodes` (ε-greedy optimal episodes, ε = 1/H; 10,000 [ours, cut from the code's
50,000]), `corrupted` (the fraction of those episodes that act uniformly at random; 0),
`eval_episodes` (100 [paper: success = greedy return ≥ 0.9 over 100 episodes]),
`offline_file` (a dataset written by `benchmarks/hnpg_lock.py collect`; empty = collect in
memory from the seed, the same data).

The instance of seed s: the combination from s, the offline data from s + 1, the
evaluation episodes from s + 2 (the same draws at every evaluation: common random
numbers), the initial policy's weights from s. The value of a policy is the mean return
of its greedy (mean) action over `eval_episodes`; the optimum is 1 (the supremum: the env
still samples softmax(a / 0.1), so a finite mean action reaches it only in the limit)."""

from __future__ import annotations

import torch

from policylab.envs.combination_lock import DEAD, CombinationLock, collect_offline
from policylab.lab import lab_tasks
from policylab.policies.time_indexed import TimeIndexedGaussian
from policylab.tabular.methods import Problem

SUCCESS = 0.9  # greedy return ≥ 0.9 over the evaluation episodes [paper §8.3 via spec]


def rollout(lock: CombinationLock, act, n: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    """n episodes with `act(obs [N, D], h) -> action [N, A]`: obs [N, H+1, D], action
    [N, H, A], reward [N, H], reach [N] (steps survived, H for a success)."""
    H = lock.horizon
    obs = torch.zeros(n, H + 1, lock.obs_dim, dtype=torch.float64)
    action = torch.zeros(n, H, lock.actions, dtype=torch.float64)
    reward = torch.zeros(n, H, dtype=torch.float64)
    reach = torch.zeros(n, dtype=torch.long)
    obs[:, 0], state = lock.reset(n, g)
    for h in range(H):
        action[:, h] = act(obs[:, h], h)
        out = lock.step(state, h, action[:, h], g)
        obs[:, h + 1], reward[:, h], state = out.obs, out.reward, out.state
        reach += (state != DEAD).long()
    return {"obs": obs, "action": action, "reward": reward, "reach": reach}


def greedy_return(lock: CombinationLock, policy, episodes: int, seed: int) -> float:
    """Mean return of `policy.greedy(obs, h)` over `episodes` episodes drawn from `seed`."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        out = rollout(lock, policy.greedy, episodes, g)
    return float(out["reward"].sum(1).mean())


def initial_policy(lock: CombinationLock, seed: int) -> TimeIndexedGaussian:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return TimeIndexedGaussian(lock.obs_dim, lock.actions, lock.horizon)


def combination_lock(
    seed: int,
    H: int = 5,
    offline_episodes: int = 10_000,
    corrupted: float = 0.0,
    eval_episodes: int = 100,
    offline_file: str = "",
) -> Problem:
    if int(eval_episodes) < 1:
        raise ValueError(f"lab/combination_lock: eval_episodes = {eval_episodes!r} must be >= 1")
    lock = CombinationLock(H, seed)
    if offline_file:
        if offline_episodes != 10_000 or corrupted:
            raise ValueError(
                "lab/combination_lock: offline_file holds its own episodes; offline_episodes "
                "and corrupted apply only when the task collects the data itself (set them "
                "when collecting: benchmarks/hnpg_lock.py collect)"
            )
        data = torch.load(offline_file, weights_only=True)
        meta = data.get("meta")
        if meta is not None and (meta["H"], meta["seed"]) != (H, seed):
            raise ValueError(
                f"lab/combination_lock: offline_file {offline_file!r} was collected on the "
                f"lock of H = {meta['H']}, seed {meta['seed']}; this run's lock is H = {H}, "
                f"seed {seed} (each seed is another combination)"
            )
        if data["obs"].shape[1:] != (lock.horizon + 1, lock.obs_dim):
            raise ValueError(
                f"lab/combination_lock: offline_file {offline_file!r} holds episodes of "
                f"shape {tuple(data['obs'].shape[1:])}, not H + 1 = {lock.horizon + 1} "
                f"observations of {lock.obs_dim}"
            )
    else:
        data = collect_offline(lock, offline_episodes, seed + 1, corrupted=corrupted)
    return Problem(
        mdp=lock,
        value=lambda policy: greedy_return(lock, policy, int(eval_episodes), seed + 2),
        optimum=1.0,
        initial_policy=initial_policy(lock, seed),
        budget_unit="env steps",
        extras={"offline": data},
    )


if "combination_lock" not in lab_tasks:
    lab_tasks.add("combination_lock", combination_lock)
