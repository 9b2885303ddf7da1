"""gymnasium spaces as plain data (tensors, numbers, strings), so a saved policy holds its
spaces and loads with `torch.load(weights_only=True)`, without pickle and without
building the environment. Box, Discrete, MultiDiscrete, MultiBinary, and Dict and Tuple
of them; any other space is a ValueError naming it."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces


def space_to_data(space: spaces.Space) -> dict[str, Any]:
    """{"type": ..., fields} of `space`; `space_from_data` gives back an equal space."""
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "low": torch.from_numpy(np.array(space.low)),
            "high": torch.from_numpy(np.array(space.high)),
            "dtype": str(space.dtype),
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "MultiDiscrete",
            "nvec": torch.from_numpy(np.array(space.nvec)),
            "start": torch.from_numpy(np.array(space.start)),
        }
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": list(np.atleast_1d(space.n).tolist())}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "items": [[k, space_to_data(v)] for k, v in space.items()]}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "items": [space_to_data(v) for v in space]}
    raise ValueError(
        f"cannot save the space {space} ({type(space).__name__}); saved policies hold Box, "
        "Discrete, MultiDiscrete, MultiBinary, Dict and Tuple spaces"
    )


def space_from_data(data: dict[str, Any]) -> spaces.Space:
    """The space `space_to_data` described."""
    kind = data["type"]
    if kind == "Box":
        dtype = np.dtype(data["dtype"])
        return spaces.Box(data["low"].numpy(), data["high"].numpy(), dtype=dtype)
    if kind == "Discrete":
        return spaces.Discrete(data["n"], start=data["start"])
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(data["nvec"].numpy(), start=data["start"].numpy())
    if kind == "MultiBinary":
        n = data["n"]
        return spaces.MultiBinary(n[0] if len(n) == 1 else n)
    if kind == "Dict":
        return spaces.Dict({k: space_from_data(v) for k, v in data["items"]})
    if kind == "Tuple":
        return spaces.Tuple([space_from_data(v) for v in data["items"]])
    raise ValueError(f"saved space of unknown type {kind!r}")
