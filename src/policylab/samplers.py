"""Prompt samplers: which prompts the next step trains on.

The contract (DESIGN.md, selection): `sample(n) -> indices` and `update(indices,
outcomes)`, plus `state_dict()` / `load_state_dict()` so a resumed run draws exactly the
prompts the uninterrupted run would have drawn. Adaptive samplers (VADE, VAS, ...) come
with the selection issue; `UniformSampler` is the default.
"""

from __future__ import annotations

import random
from typing import Any


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
