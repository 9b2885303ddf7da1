"""A replay buffer of named tensor fields: a ring of `capacity` rows, sampled uniformly
with a passed torch.Generator, and saved whole in checkpoints so a resumed run samples the
same minibatches as a straight one."""

from __future__ import annotations

import torch


class ReplayBuffer:
    """`fields`: name → shape of one row (obs: (3,), reward: ()). `add` appends a batch of
    rows (the oldest are overwritten once full); `sample(n, generator)` draws n row indices
    uniformly with replacement (CleanRL/SB3: randint over the filled rows)."""

    def __init__(self, capacity: int, fields: dict[str, tuple[int, ...]]) -> None:
        if capacity < 1:
            raise ValueError(f"replay capacity={capacity}; accepted: >= 1")
        self.capacity = capacity
        self.data = {k: torch.zeros(capacity, *shape) for k, shape in fields.items()}
        self.pos = 0  # the next row to write
        self.size = 0  # rows filled

    def __len__(self) -> int:
        return self.size

    def add(self, **rows: torch.Tensor) -> None:
        """Append rows [N, *shape] of every field (all fields, the same N)."""
        if rows.keys() != self.data.keys():
            raise ValueError(
                f"replay rows have fields {sorted(rows)}; the buffer has {sorted(self.data)}"
            )
        n = len(next(iter(rows.values())))
        index = (self.pos + torch.arange(n)) % self.capacity
        for key, value in rows.items():
            self.data[key][index] = value.to(self.data[key].dtype).reshape(
                n, *self.data[key].shape[1:]
            )
        self.pos = int((self.pos + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def sample(self, n: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """n rows drawn uniformly with replacement from the filled ones."""
        if self.size == 0:
            raise ValueError("cannot sample an empty replay buffer")
        index = torch.randint(self.size, (n,), generator=generator)
        return {key: value[index] for key, value in self.data.items()}

    def state_dict(self) -> dict:
        """The filled rows (not the empty tail) and the write position."""
        return {
            "capacity": self.capacity,
            "pos": self.pos,
            "size": self.size,
            "data": {k: v[: self.size].clone() for k, v in self.data.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        if state["capacity"] != self.capacity or state["data"].keys() != self.data.keys():
            raise ValueError(
                f"saved replay buffer (capacity {state['capacity']}, fields "
                f"{sorted(state['data'])}) does not fit this one (capacity {self.capacity}, "
                f"fields {sorted(self.data)})"
            )
        self.pos, self.size = int(state["pos"]), int(state["size"])
        for key, value in state["data"].items():
            self.data[key][: self.size] = value
