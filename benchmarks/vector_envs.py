"""Collection throughput of sync vs async vector environments (issue #5: "async where it
pays"). Each collector steps an untrained MLP policy for ~5 s after a warm-up, one torch
thread.

    .venv/bin/python benchmarks/vector_envs.py
"""

import time

import torch

from policylab.policies import make_actor_critic
from policylab.workflows.episodes import EpisodeCollector

CASES = [("Pendulum-v1", 4, 1024), ("CartPole-v1", 8, 32)]  # env, num_envs, num_steps


def steps_per_second(env_id: str, num_envs: int, num_steps: int, vector: str) -> float:
    collector = EpisodeCollector(env_id, num_envs, 0, vector=vector)
    spaces = (collector.envs.single_observation_space, collector.envs.single_action_space)
    policy = make_actor_critic(*spaces)
    collector.collect(policy, num_steps)  # warm-up
    started, steps = time.perf_counter(), 0
    while time.perf_counter() - started < 5:
        collector.collect(policy, num_steps)
        steps += num_envs * num_steps
    rate = steps / (time.perf_counter() - started)
    collector.close()
    return rate


def main() -> None:
    torch.set_num_threads(1)
    for env_id, num_envs, num_steps in CASES:
        for vector in ("sync", "async"):
            rate = steps_per_second(env_id, num_envs, num_steps, vector)
            print(f"{env_id} {num_envs} envs, {vector}: {rate:,.0f} steps/s")


if __name__ == "__main__":
    main()
