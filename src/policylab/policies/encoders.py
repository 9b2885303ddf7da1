"""Observation encoders: what turns `spaces.encode`'s flat vector into the features the
actor and critic MLPs read, chosen from the observation space (`make_encoder`).

- no image anywhere (Box, Discrete, MultiDiscrete, MultiBinary, Dict/Tuple of these): no
  encoder, the MLPs read the flat vector (one-hots and flattened keys, as SB3's
  `FlattenExtractor` / `CombinedExtractor` give them);
- an image Box: `SmallCNN`;
- a Dict/Tuple with images: `PartsEncoder`, a `SmallCNN` per image part and the flat
  values of the others, concatenated (SB3's `CombinedExtractor`).
The encoder is shared by actor and critic (SB3's PPO default, share_features_extractor)."""

from __future__ import annotations

import math

import torch
from gymnasium import spaces as gym_spaces
from torch import nn

from policylab.policies.spaces import (
    _parts,
    channels_first,
    flat_dim,
    has_image,
    image_shape,
    is_image_space,
)

CNN_FEATURES = 64  # our choice: NatureCNN's 512 scaled to the 64-wide MLPs after it


class SmallCNN(nn.Module):
    """SB3's NatureCNN (Mnih et al. 2015) scaled down for small images: three ReLU convs
    (16, 32, 32 channels; kernels 3; strides 2, 2, 1; padding 1, so any H, W ≥ 1 works,
    where NatureCNN's 8×8/4 first layer needs 36×36) → flatten → Linear → ReLU, `features`
    wide. Input: the flat raw image [B, C·H·W] in the space's own layout (C×H×W or
    H×W×C); it is reshaped to C×H×W and scaled by 1/255 (SB3's `preprocess_obs` and
    `VecTransposeImage`). Orthogonal init, gain √2, zero biases (SB3's feature extractor)."""

    def __init__(self, space: gym_spaces.Box, features: int = CNN_FEATURES) -> None:
        super().__init__()
        self.space_shape = tuple(space.shape)
        self.channels_first = channels_first(space)
        c, h, w = image_shape(space)
        self.cnn = nn.Sequential(
            nn.Conv2d(c, 16, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=1, padding=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            n_flat = self.cnn(torch.zeros(1, c, h, w)).shape[1]
        self.linear = nn.Sequential(nn.Linear(n_flat, features), nn.ReLU())
        for module in self.modules():
            if isinstance(module, nn.Conv2d | nn.Linear):
                nn.init.orthogonal_(module.weight, math.sqrt(2))
                nn.init.zeros_(module.bias)
        self.features = features

    def images(self, x: torch.Tensor) -> torch.Tensor:
        """[B, C·H·W] raw values → [B, C, H, W] in [0, 1]."""
        x = x.reshape(x.shape[0], *self.space_shape)
        if not self.channels_first:
            x = x.permute(0, 3, 1, 2)
        return x / 255.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.cnn(self.images(x)))


class PartsEncoder(nn.Module):
    """A Dict/Tuple observation with images: each part's slice of the flat vector through
    its own encoder (`SmallCNN` for an image, none for the rest), concatenated in the
    space's key order."""

    def __init__(self, space: gym_spaces.Dict | gym_spaces.Tuple) -> None:
        super().__init__()
        self.slices: list[tuple[int, int]] = []
        encoders: list[nn.Module] = []
        start, self.features = 0, 0
        for part in _parts(space):
            size = flat_dim(part)
            self.slices.append((start, start + size))
            encoder, width = make_encoder(part)
            encoders.append(nn.Identity() if encoder is None else encoder)
            start, self.features = start + size, self.features + width
        self.parts = nn.ModuleList(encoders)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = [enc(x[:, a:b]) for enc, (a, b) in zip(self.parts, self.slices, strict=True)]
        return torch.cat(out, dim=-1)


def make_encoder(space: gym_spaces.Space) -> tuple[nn.Module | None, int]:
    """(encoder or None, width of the features it gives) for an observation space; None
    (the flat vector itself, flat_dim wide) when the space holds no image."""
    if is_image_space(space):
        cnn = SmallCNN(space)
        return cnn, cnn.features
    if isinstance(space, gym_spaces.Dict | gym_spaces.Tuple) and has_image(space):
        parts = PartsEncoder(space)
        return parts, parts.features
    return None, flat_dim(space)
