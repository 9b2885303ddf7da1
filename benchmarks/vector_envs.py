"""Collection throughput of sync vs async vector environments (issue #5: "async where it
pays"). Each collector steps an untrained MLP policy for ~5 s after a warm-up.

    .venv/bin/python benchmarks/vector_envs.py
"""

import time

import torch

from policylab.policies import make_actor_critic
from policylab.workflows.episodes import EpisodeCollector
torch.set_num_threads(1)
for env_id, n, T in [("Pendulum-v1", 4, 1024), ("CartPole-v1", 8, 32)]:
    for vector in ("sync", "async"):
        c = EpisodeCollector(env_id, n, 0, vector=vector)
        p = make_actor_critic(c.envs.single_observation_space, c.envs.single_action_space)
        c.collect(p, T)  # warm-up
        t = time.perf_counter(); steps = 0
        while time.perf_counter() - t < 5:
            c.collect(p, T); steps += n * T
        print(env_id, vector, f"{steps / (time.perf_counter() - t):.0f} steps/s")
        c.close()
