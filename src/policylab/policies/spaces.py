"""Gymnasium spaces as the control networks see them: every observation becomes one flat
float vector per environment, and each action space names the distribution over it.

Observations (`encode(space, obs) -> [N, D]`, D = `flat_dim(space)`):
- `Box`: its values, flattened (an image Box keeps its raw 0–255 values here; the CNN
  encoder of policies/encoders.py reshapes them and scales by 1/255, as SB3's
  `preprocess_obs` does);
- `Discrete(n, start)`: the one-hot of obs − start (SB3's `preprocess_obs`);
- `MultiDiscrete(nvec)`: one one-hot per entry, concatenated; `MultiBinary`: its 0/1s;
- `Dict` / `Tuple`: each part encoded in the space's key order, concatenated (SB3's
  `CombinedExtractor` flattens the non-image keys the same way).
The collector stores this vector, so rollouts, the observation normaliser, checkpoints and
replay buffers stay flat tensors whatever the space. A flat Box encodes to exactly the
tensor `torch.as_tensor(obs, dtype=torch.float32)` gave before.

Images follow SB3's `is_image_space` (check_channels=False): a 3-D `Box` of dtype uint8
with low 0 and high 255 everywhere; channels first when the first dimension is the
smallest (SB3's `is_image_space_channels_first`), else channels last."""

from __future__ import annotations

import math

import numpy as np
import torch
from gymnasium import spaces

SUPPORTED_OBSERVATIONS = "Box, Discrete, MultiDiscrete, MultiBinary, and Dict/Tuple of these"
SUPPORTED_ACTIONS = "Discrete, MultiDiscrete (1-D, start 0) or Box"


def is_image_space(space: spaces.Space) -> bool:
    """SB3's `is_image_space(space, check_channels=False)`: a 3-D uint8 Box on [0, 255]."""
    return (
        isinstance(space, spaces.Box)
        and len(space.shape) == 3
        and space.dtype == np.uint8
        and bool(np.all(space.low == 0))
        and bool(np.all(space.high == 255))
    )


def channels_first(space: spaces.Box) -> bool:
    """SB3's heuristic: an image is C×H×W when its first dimension is the smallest (the
    first smallest, as np.argmin picks), else H×W×C."""
    return int(np.argmin(space.shape)) == 0


def image_shape(space: spaces.Box) -> tuple[int, int, int]:
    """(C, H, W) of an image space, whichever its channel order."""
    if channels_first(space):
        return tuple(space.shape)  # type: ignore[return-value]
    h, w, c = space.shape
    return c, h, w


def has_image(space: spaces.Space) -> bool:
    """Whether `space` is an image or holds one (in a Dict or Tuple)."""
    if isinstance(space, spaces.Dict | spaces.Tuple):
        return any(has_image(s) for s in _parts(space))
    return is_image_space(space)


def check_observation_space(space: spaces.Space) -> None:
    """A ValueError naming `space` (and the part of it) when no encoding exists for it."""
    if isinstance(space, spaces.Dict | spaces.Tuple):
        for part in _parts(space):
            try:
                check_observation_space(part)
            except ValueError as err:
                raise ValueError(f"observation space {space}: {err}") from None
        return
    if not isinstance(space, spaces.Box | spaces.Discrete | spaces.MultiDiscrete):
        if not isinstance(space, spaces.MultiBinary):
            raise ValueError(
                f"observation space {space} ({type(space).__name__}) is not supported; "
                f"accepted: {SUPPORTED_OBSERVATIONS}"
            )


def flat_dim(space: spaces.Space) -> int:
    """D, the length of `encode`'s vector for one observation of `space`."""
    check_observation_space(space)
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(space.nvec.sum())
    if isinstance(space, spaces.Dict | spaces.Tuple):
        return sum(flat_dim(s) for s in _parts(space))
    return int(math.prod(space.shape))


def encode(space: spaces.Space, obs) -> torch.Tensor:
    """A batch of N observations of `space` (as a vector env returns them) → [N, D] float32
    (the module docstring gives the encoding of each space)."""
    if isinstance(space, spaces.Dict):
        return torch.cat([encode(s, obs[k]) for k, s in space.spaces.items()], dim=-1)
    if isinstance(space, spaces.Tuple):
        return torch.cat([encode(s, o) for s, o in zip(space.spaces, obs, strict=True)], -1)
    check_observation_space(space)
    if isinstance(space, spaces.Discrete):
        index = torch.as_tensor(np.asarray(obs) - space.start, dtype=torch.long)
        return torch.nn.functional.one_hot(index.reshape(-1), int(space.n)).float()
    if isinstance(space, spaces.MultiDiscrete):
        index = torch.as_tensor(np.asarray(obs) - space.start, dtype=torch.long)
        index = index.reshape(index.shape[0], -1)
        nvec = space.nvec.reshape(-1)
        hot = [torch.nn.functional.one_hot(index[:, j], int(n)) for j, n in enumerate(nvec)]
        return torch.cat(hot, dim=-1).float()
    x = torch.as_tensor(obs, dtype=torch.float32)
    return x if x.dim() == 2 else x.reshape(x.shape[0], -1)


def encode_one(space: spaces.Space, obs) -> torch.Tensor:
    """One observation (not batched, e.g. a vector env's info["final_obs"][i]) → [1, D]."""
    return encode(space, _batch_of_one(space, obs))


def _batch_of_one(space: spaces.Space, obs):
    if isinstance(space, spaces.Dict):
        return {k: _batch_of_one(s, obs[k]) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_batch_of_one(s, o) for s, o in zip(space.spaces, obs, strict=True))
    return np.asarray(obs)[None]


def _parts(space: spaces.Dict | spaces.Tuple) -> list[spaces.Space]:
    return list(space.spaces.values()) if isinstance(space, spaces.Dict) else list(space.spaces)


def action_nvec(space: spaces.Space) -> tuple[int, ...] | None:
    """The categorical sizes of a discrete action space: (n,) for Discrete(n), nvec for a
    1-D MultiDiscrete with start 0 (a product of categoricals); None for a Box. Any other
    space is a ValueError naming it."""
    if isinstance(space, spaces.Discrete):
        return (int(space.n),)
    if isinstance(space, spaces.MultiDiscrete):
        if space.nvec.ndim != 1 or np.any(space.start != 0):
            raise ValueError(
                f"action space {space} is not supported: a MultiDiscrete action must be "
                "1-D with start 0"
            )
        return tuple(int(n) for n in space.nvec)
    if isinstance(space, spaces.Box):
        return None
    raise ValueError(
        f"action space {space} ({type(space).__name__}) is not supported; accepted: "
        f"{SUPPORTED_ACTIONS}"
    )


def mlp_input_dim(space: spaces.Space, kind: str) -> int:
    """D for a policy kind that reads the flat vector with MLPs alone (no image encoder):
    every supported space but images, which are a ValueError naming the space."""
    check_observation_space(space)
    if has_image(space):
        raise ValueError(
            f"observation space {space} holds images; the {kind} policy has no image "
            "encoder; accepted: algo=ppo (a CNN encoder), or observations without images"
        )
    return flat_dim(space)
