"""The rich-observation combination lock of HNPG (papers/seed_control_theory.md §8.3),
batched in torch with an explicit generator, with the official code's dynamics
[code YifeiZhou02/HNPG:lock_continuous.py:Lock].

Latent states A (0), B (1) and the dead state C (2), horizon H, `actions` discrete actions.
The agent sends a continuous vector a ∈ R^actions; the env draws the discrete action from
softmax(a / temperature). At step h in A (B) the right action is opt_a[h] (opt_b[h]); it
keeps the agent alive, switching A↔B with probability p_switch; any other action sends it
to C for good. Only the last step pays: 1 for the right action in A or B, else the
anti-reward 0.1 with probability p_anti_r (so an agent that dies early still sees 0.1
half the time — the trap). The code computes an anti-reward at the step the agent dies
but returns 0 there; we keep that.

Observation: e_s + e_{3+h} + N(0, noise²) on the first H + 3 coordinates of a
2^⌈log₂(H+4)⌉ vector, times the (unnormalised) Hadamard matrix, as the code. The reset
state is A with probability p_switch, else B."""

from __future__ import annotations

import math
from dataclasses import dataclass

import gymnasium
import numpy as np
import torch

DEAD = 2
ENV_ID = "policylab/CombinationLock-v0"


def hadamard(n: int) -> torch.Tensor:
    """Sylvester's Hadamard matrix of order n (a power of 2), entries ±1, as
    scipy.linalg.hadamard (the code's rotation), [n, n] float64."""
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)])
    return h


@dataclass
class LockStep:
    obs: torch.Tensor  # [N, D] observation after the step
    reward: torch.Tensor  # [N]
    state: torch.Tensor  # [N] latent state after the step (0, 1 or 2)


class CombinationLock:
    """A batch of locks sharing one combination (opt_a, opt_b drawn from `seed`)."""

    def __init__(
        self,
        horizon: int,
        seed: int,
        actions: int = 10,
        p_switch: float = 0.5,
        p_anti_r: float = 0.5,
        anti_r: float = 0.1,
        noise: float = 0.1,
        temperature: float = 0.1,
    ) -> None:
        if int(horizon) < 1:
            raise ValueError(f"combination_lock: H = {horizon!r} must be an integer >= 1")
        if int(actions) < 2:
            raise ValueError(f"combination_lock: actions = {actions!r} must be >= 2")
        self.horizon, self.actions = int(horizon), int(actions)
        self.p_switch, self.p_anti_r, self.anti_r = p_switch, p_anti_r, anti_r
        self.noise, self.temperature = noise, temperature
        self.obs_dim = 2 ** math.ceil(math.log2(self.horizon + 4))
        self.rotation = hadamard(self.obs_dim)
        g = torch.Generator().manual_seed(int(seed))
        self.opt_a = torch.randint(self.actions, (self.horizon,), generator=g)
        self.opt_b = torch.randint(self.actions, (self.horizon,), generator=g)

    def observe(self, state: torch.Tensor, h: int, g: torch.Generator) -> torch.Tensor:
        """[N, D]: rotation · (e_state + e_{3+h} + noise on the first H + 3 coordinates)."""
        n = state.shape[0]
        x = torch.zeros(n, self.obs_dim, dtype=torch.float64)
        live = self.horizon + 3
        x[:, :live] = self.noise * torch.randn(n, live, generator=g, dtype=torch.float64)
        x[torch.arange(n), state] += 1.0
        x[:, 3 + h] += 1.0
        return x @ self.rotation.T

    def reset(self, n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(obs [N, D], state [N]) at h = 0: A with probability p_switch, else B."""
        state = (torch.rand(n, generator=g) >= self.p_switch).long()
        return self.observe(state, 0, g), state

    def discrete(self, action: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        """The discrete action drawn from softmax(action / temperature), [N]."""
        probs = torch.softmax(action.double() / self.temperature, dim=-1)
        return torch.multinomial(probs, 1, generator=g).squeeze(-1)

    def right_action(self, state: torch.Tensor, h: int) -> torch.Tensor:
        """The action that keeps each lock alive at step h ([N]; arbitrary in C)."""
        return torch.where(state == 0, self.opt_a[h], self.opt_b[h])

    def step(
        self, state: torch.Tensor, h: int, action: torch.Tensor, g: torch.Generator
    ) -> LockStep:
        """One step of every lock at time h with continuous actions [N, actions]."""
        n = state.shape[0]
        switch = torch.rand(n, generator=g) < self.p_switch
        anti = torch.rand(n, generator=g) < self.p_anti_r
        chosen = self.discrete(action, g)
        alive = (state != DEAD) & (chosen == self.right_action(state, h))
        reward = torch.zeros(n, dtype=torch.float64)
        if h == self.horizon - 1:
            nxt = torch.where(alive, state, torch.full_like(state, DEAD))
            anti_reward = anti.double() * self.anti_r
            reward = torch.where(alive, torch.ones_like(reward), anti_reward)
        else:
            flipped = 1 - state
            nxt = torch.where(alive, torch.where(switch, flipped, state), DEAD)
        return LockStep(self.observe(nxt, h + 1, g), reward, nxt)


def reach_probability(horizon: int, actions: int = 10, epsilon: float | None = None) -> float:
    """P(an episode ends alive): uniform discrete actions (epsilon None) give actions^−H;
    ε-greedy over the right action gives (1 − ε + ε/actions)^H (ε = 1/H by default in
    the code's collector, passed explicitly here) — T8.1."""
    if epsilon is None:
        return float(actions) ** (-horizon)
    return (1.0 - epsilon + epsilon / actions) ** horizon


def collect_offline(
    lock: CombinationLock,
    episodes: int,
    seed: int,
    epsilon: float | None = None,
    corrupted: float = 0.0,
) -> dict[str, torch.Tensor]:
    """ε-greedy optimal episodes [code YifeiZhou02/HNPG:collect_offline.py:
    collect_offline_buffer, eps_greedy_actions]: each step sends the one-hot of the right
    action, or w.p. ε (default 1/H) a U(0, 1)^actions vector; the first
    ⌊corrupted·episodes⌋ episodes send U(0, 1)^actions at every step (the corrupted-data
    arm, §8.3 [ours]). Deterministic in `seed`.

    Returns obs [E, H+1, D], action [E, H, actions], reward [E, H], reached [E] (alive at
    the end), the transition at step h being (obs[:, h], action[:, h], reward[:, h],
    obs[:, h+1])."""
    if int(episodes) < 1:
        raise ValueError(f"offline_episodes = {episodes!r} must be an integer >= 1")
    if not 0.0 <= corrupted <= 1.0:
        raise ValueError(f"corrupted = {corrupted!r} must be in [0, 1]")
    H, A, n = lock.horizon, lock.actions, int(episodes)
    eps = 1.0 / H if epsilon is None else float(epsilon)
    g = torch.Generator().manual_seed(int(seed))
    random_episode = torch.arange(n) < int(corrupted * n)
    obs = torch.zeros(n, H + 1, lock.obs_dim, dtype=torch.float64)
    action = torch.zeros(n, H, A, dtype=torch.float64)
    reward = torch.zeros(n, H, dtype=torch.float64)
    obs[:, 0], state = lock.reset(n, g)
    for h in range(H):
        greedy = torch.nn.functional.one_hot(lock.right_action(state, h), A).double()
        noise = torch.rand(n, A, generator=g, dtype=torch.float64)
        explore = (torch.rand(n, generator=g) < eps) | random_episode
        action[:, h] = torch.where(explore[:, None], noise, greedy)
        out = lock.step(state, h, action[:, h], g)
        obs[:, h + 1], reward[:, h], state = out.obs, out.reward, out.state
    return {"obs": obs, "action": action, "reward": reward, "reached": state != DEAD}


class CombinationLockEnv(gymnasium.Env):
    """One lock as a gymnasium env (`policylab/CombinationLock-v0`): Box(actions)
    actions (the softmax logits ×τ), Box(D) observations, H steps then terminated. The
    combination comes from `lock_seed` (kwarg), the episode noise from `reset(seed=...)`."""

    def __init__(self, horizon: int = 5, lock_seed: int = 0, **lock_kwargs) -> None:
        self.lock = CombinationLock(horizon, lock_seed, **lock_kwargs)
        d, a = self.lock.obs_dim, self.lock.actions
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (d,), np.float64)
        self.action_space = gymnasium.spaces.Box(0.0, 1.0, (a,), np.float64)
        self._g = torch.Generator().manual_seed(lock_seed)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._g.manual_seed(seed)
        obs, self._state = self.lock.reset(1, self._g)
        self._h = 0
        return obs[0].numpy(), {}

    def step(self, action):
        a = torch.as_tensor(np.asarray(action, dtype=np.float64)).reshape(1, -1)
        out = self.lock.step(self._state, self._h, a, self._g)
        self._state, self._h = out.state, self._h + 1
        done = self._h == self.lock.horizon
        info = {"latent": int(out.state[0])}
        return out.obs[0].numpy(), float(out.reward[0]), done, False, info


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=CombinationLockEnv)
