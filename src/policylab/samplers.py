"""Prompt samplers: which prompts the next step trains on.

The contract (DESIGN.md, selection): `sample(n) -> indices` and `update(indices,
outcomes)`, plus `state_dict()` / `load_state_dict()` so a resumed run draws exactly the
prompts the uninterrupted run would have drawn. Adaptive samplers (VADE, VAS, ...) come
with the selection issue; `UniformSampler` is the default.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np


class UniformSampler:
    """Epochs over a pool of `size` prompts, each epoch in a fresh seeded order."""

    def __init__(self, size: int, seed: int = 0) -> None:
        if size < 1:
            raise ValueError("the prompt pool is empty")
        self.size = size
        self._rng = random.Random(seed)
        self._order: list[int] = []
        self._position = 0
        self.epoch = 0

    def sample(self, n: int) -> list[int]:
        out = []
        while len(out) < n:
            if self._position >= len(self._order):
                self._order = list(range(self.size))
                self._rng.shuffle(self._order)
                self._position = 0
                self.epoch += 1
            out.append(self._order[self._position])
            self._position += 1
        return out

    def update(self, indices: list[int], outcomes: Any) -> None:
        """Uniform sampling learns nothing from outcomes."""

    def state_dict(self) -> dict[str, Any]:
        return {
            "rng": self._rng.getstate(),
            "order": list(self._order),
            "position": self._position,
            "epoch": self.epoch,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._rng.setstate(state["rng"])
        self._order, self._position, self.epoch = (
            list(state["order"]),
            state["position"],
            state["epoch"],
        )


class VADESampler:
    """VADE (Hu et al., arXiv:2511.18902; papers/seed_llm_algorithms.md §8): a rollout-free
    prompt sampler. Every prompt j keeps a Beta(α_j, β_j) posterior of its success
    probability; each step takes the n prompts whose Thompson draw p̃_j ~ Beta(α_j, β_j)
    scores highest on p̃(1 − p̃) (the reward variance a group of it would show).

    Only the abstract was readable; every formula here is [ours] (§8 "Math"):
      long-scale decay, once per step (so ρ_L^Δ after Δ steps): α ← α₀ + ρ_L (α − α₀);
      short-scale decay when observed again:          α ← α₀ + ρ_S (α − α₀), β likewise;
      evidence from a group of G rewards r ∈ [0, 1]:  α ← α + Σr, β ← β + G − Σr.
    `thompson=False` ranks by the posterior mean instead of a draw (deterministic)."""

    def __init__(
        self,
        size: int,
        seed: int = 0,
        *,
        alpha0: float = 1.0,
        beta0: float = 1.0,
        rho_long: float = 0.99,
        rho_short: float = 0.5,
        thompson: bool = True,
    ) -> None:
        if size < 1:
            raise ValueError("the prompt pool is empty")
        if not (alpha0 > 0 and beta0 > 0 and 0 <= rho_long <= 1 and 0 <= rho_short <= 1):
            raise ValueError("VADE needs α₀, β₀ > 0 and decays ρ in [0, 1]")
        self.size, self.alpha0, self.beta0 = size, alpha0, beta0
        self.rho_long, self.rho_short, self.thompson = rho_long, rho_short, thompson
        self.alpha = np.full(size, alpha0)
        self.beta = np.full(size, beta0)
        self.step = 0
        self._rng = np.random.default_rng(seed)

    def _decay(self, idx, rho) -> None:
        self.alpha[idx] = self.alpha0 + rho * (self.alpha[idx] - self.alpha0)
        self.beta[idx] = self.beta0 + rho * (self.beta[idx] - self.beta0)

    def scores(self) -> Any:
        """p̃(1 − p̃) of every prompt, p̃ a Thompson draw (or the posterior mean)."""
        if self.thompson:
            p = self._rng.beta(self.alpha, self.beta)
        else:
            p = self.alpha / (self.alpha + self.beta)
        return p * (1 - p)

    def sample(self, n: int) -> list[int]:
        """The n best-scoring prompts (ties by index); more than the pool wraps around."""
        if self.step > 0:  # the policy has moved since the last draw
            self._decay(slice(None), self.rho_long)
        self.step += 1
        order = np.argsort(-self.scores(), kind="stable")
        return [int(order[i % self.size]) for i in range(n)]

    def update(self, indices: list[int], outcomes: Any) -> None:
        """Evidence from the groups of `indices` (prompt-major rows of `outcomes`, G per
        prompt; rewards clipped to [0, 1], unscored NaN rows left out)."""
        if not indices:
            return
        r = np.asarray(outcomes, dtype=np.float64).reshape(len(indices), -1)
        seen = ~np.isnan(r)
        successes = np.where(seen, np.clip(r, 0.0, 1.0), 0.0).sum(1)
        for j, s, g in zip(indices, successes, seen.sum(1), strict=True):
            if g == 0:
                continue
            self._decay(j, self.rho_short)
            self.alpha[j] += s
            self.beta[j] += g - s

    def state_dict(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha.copy(),
            "beta": self.beta.copy(),
            "step": self.step,
            "rng": self._rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.alpha, self.beta = state["alpha"].copy(), state["beta"].copy()
        self.step = state["step"]
        self._rng.bit_generator.state = state["rng"]


SAMPLERS = {"uniform": UniformSampler, "vade": VADESampler}


def make_sampler(name: str, size: int, seed: int = 0):
    """The prompt sampler called `name` over a pool of `size` prompts."""
    if name not in SAMPLERS:
        raise ValueError(f"unknown sampler {name!r}; choices: {', '.join(SAMPLERS)}")
    return SAMPLERS[name](size, seed=seed)
