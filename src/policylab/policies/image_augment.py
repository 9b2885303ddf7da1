"""Image augmentations for visual control (CG2A's set, papers/seed_control_theory.md §10.2).

Each registered augmentation maps images [B, C, H, W] (float, values in [0, 255], C = 3)
to images of the same shape and range, drawing its randomness per image from a
`torch.Generator` (so a resumed run draws the same ones). `augment_observations` applies
one to the flat observation rows the control trainer stores ([B, C·H·W] in the space's
own layout), `augment_per_row` picks one augmentation per row (the naive combination).

- `shift`: replicate-pad 4 px, random 32×32 crop — ±4 px (DrQ, Kostrikov et al. 2020,
  arXiv:2004.13649, pad 4 [code denisyarats/drq RandomShiftsAug]).
- `colour_jitter`: brightness, contrast, saturation factors U[0.6, 1.4] and a hue rotation
  U[−0.5, 0.5] of a turn (RAD's values, Laskin et al. 2020, arXiv:2004.14990 [code
  RLE-Foundation/Hsuanwu random_colorjitter.py: 0.4, 0.4, 0.4, 0.5]); the hue turn is a
  rotation of RGB about the grey axis [ours: torchvision's goes through HSV].
- `random_conv`: a random 3×3 convolution, 3 → 3 channels, weights N(0, (1/(√3·3))²)
  (network randomisation, Lee et al. 2020, arXiv:1910.05396 [code ankurhanda/rand_conv]),
  one filter per image, output clamped to [0, 255] [ours].
- `grayscale`: luminance 0.299 R + 0.587 G + 0.114 B on all three channels (ITU-R BT.601;
  RAD applies it with p = 0.3, we always [ours]).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from policylab.registry import Registry

Augmentation = Callable[[torch.Tensor, torch.Generator], torch.Tensor]
image_augmentations: Registry[Augmentation] = Registry("image augmentation")

SHIFT_PAD = 4
JITTER = 0.4  # brightness, contrast, saturation
HUE = 0.5  # of a turn
LUMA = (0.299, 0.587, 0.114)


def _uniform(n: int, low: float, high: float, generator, like: torch.Tensor) -> torch.Tensor:
    u = torch.rand(n, generator=generator, dtype=like.dtype)
    return (low + (high - low) * u).view(n, 1, 1, 1)


@image_augmentations.register("shift")
def shift(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Random translation by up to ±4 px per image, edges replicated (DrQ)."""
    b, _, h, w = images.shape
    padded = F.pad(images, (SHIFT_PAD,) * 4, mode="replicate")
    dy, dx = torch.randint(0, 2 * SHIFT_PAD + 1, (2, b), generator=generator)
    rows = (dy[:, None] + torch.arange(h)[None, :])[:, :, None]  # [B, H, 1]
    cols = (dx[:, None] + torch.arange(w)[None, :])[:, None, :]  # [B, 1, W]
    batch = torch.arange(b)[:, None, None]
    return padded.permute(0, 2, 3, 1)[batch, rows, cols].permute(0, 3, 1, 2)


def grey(images: torch.Tensor) -> torch.Tensor:
    """Luminance [B, 1, H, W] of RGB images [B, 3, H, W]."""
    luma = torch.tensor(LUMA, dtype=images.dtype).view(1, 3, 1, 1)
    return (images * luma).sum(1, keepdim=True)


@image_augmentations.register("grayscale")
def grayscale(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Every image to its luminance, on all three channels."""
    return grey(images).expand_as(images).clone()


def hue_rotation(turns: torch.Tensor) -> torch.Tensor:
    """[B] turns → [B, 3, 3] rotations of RGB about the grey axis (1, 1, 1)/√3 (Rodrigues)."""
    angle = 2 * math.pi * turns
    cos, sin = torch.cos(angle), torch.sin(angle)
    k = torch.full((3,), 1 / math.sqrt(3), dtype=turns.dtype)
    cross = torch.tensor([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]], dtype=turns.dtype)
    outer = torch.outer(k, k)
    eye = torch.eye(3, dtype=turns.dtype)
    return cos.view(-1, 1, 1) * eye + sin.view(-1, 1, 1) * cross + (1 - cos).view(-1, 1, 1) * outer


@image_augmentations.register("colour_jitter")
def colour_jitter(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Brightness, contrast, saturation and hue jitter, one draw per image (RAD's values)."""
    b = images.shape[0]
    x = images * _uniform(b, 1 - JITTER, 1 + JITTER, generator, images)
    x = x.clamp(0, 255)
    mean = grey(x).mean(dim=(2, 3), keepdim=True)
    x = (mean + (x - mean) * _uniform(b, 1 - JITTER, 1 + JITTER, generator, images)).clamp(0, 255)
    g = grey(x)
    x = (g + (x - g) * _uniform(b, 1 - JITTER, 1 + JITTER, generator, images)).clamp(0, 255)
    turns = (torch.rand(b, generator=generator, dtype=images.dtype) * 2 - 1) * HUE
    x = torch.einsum("bij,bjhw->bihw", hue_rotation(turns), x)
    return x.clamp(0, 255)


@image_augmentations.register("random_conv")
def random_conv(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A random 3×3 convolution per image (network randomisation), clamped to [0, 255]."""
    b, c, h, w = images.shape
    std = 1 / (math.sqrt(3) * 3)
    weight = torch.randn(b * c, c, 3, 3, generator=generator, dtype=images.dtype) * std
    x = F.pad(images.reshape(1, b * c, h, w), (1, 1, 1, 1), mode="replicate")
    return F.conv2d(x, weight, groups=b).reshape(b, c, h, w).clamp(0, 255)


def to_images(rows: torch.Tensor, shape: tuple[int, ...], channels_first: bool) -> torch.Tensor:
    """Flat observation rows [B, prod(shape)] → [B, C, H, W]."""
    x = rows.reshape(rows.shape[0], *shape)
    return x if channels_first else x.permute(0, 3, 1, 2)


def to_rows(images: torch.Tensor, channels_first: bool) -> torch.Tensor:
    """[B, C, H, W] → flat rows in the space's layout."""
    x = images if channels_first else images.permute(0, 2, 3, 1)
    return x.reshape(images.shape[0], -1)


def augment_observations(
    name: str,
    rows: torch.Tensor,
    shape: tuple[int, ...],
    channels_first: bool,
    generator: torch.Generator,
) -> torch.Tensor:
    """Augmentation `name` applied to flat image rows [B, C·H·W] of an image space of
    `shape` (C×H×W when `channels_first`, else H×W×C)."""
    images = to_images(rows, shape, channels_first)
    return to_rows(image_augmentations.get(name)(images, generator), channels_first)


def augment_per_row(
    names: list[str],
    rows: torch.Tensor,
    shape: tuple[int, ...],
    channels_first: bool,
    generator: torch.Generator,
) -> torch.Tensor:
    """Each row through one of `names`, drawn uniformly per row (the naive combination)."""
    pick = torch.randint(0, len(names), (rows.shape[0],), generator=generator)
    out = rows.clone()
    for k, name in enumerate(names):
        chosen = (pick == k).nonzero().flatten()
        if len(chosen):
            out[chosen] = augment_observations(name, rows[chosen], shape, channels_first, generator)
    return out
