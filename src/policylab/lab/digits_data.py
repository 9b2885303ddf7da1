"""The 8×8 digits of scikit-learn, loaded offline (papers/seed_generative.md G0.6): the file
ships inside the scikit-learn wheel (1,797 images, values 0–16). Pixels are scaled to
x = pixel/8 − 1 ∈ [−1, 1] and split by a fixed permutation (seed 0) into 1,500 train and
297 test images [ours]. scikit-learn is the optional `generative` extra; it is imported
only here, and only when the digits are asked for."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

N_TRAIN = 1500
SIDE, CLASSES = 8, 10
DIM = SIDE * SIDE


@dataclass(frozen=True)
class DigitsSplit:
    x_train: torch.Tensor  # [1500, 64] float32 in [−1, 1]
    y_train: torch.Tensor  # [1500] int64
    x_test: torch.Tensor  # [297, 64]
    y_test: torch.Tensor  # [297]


@lru_cache(maxsize=1)
def load_digits_split() -> DigitsSplit:
    """The fixed train/test split of the scaled digits (the same on every call)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as err:  # the optional extra
        raise ImportError(
            "the digits testbed needs scikit-learn: pip install 'policylab[generative]' "
            "(or `make test`, whose test extra includes it)"
        ) from err
    data = load_digits()
    x = torch.as_tensor(data.data, dtype=torch.float32) / 8.0 - 1.0
    y = torch.as_tensor(data.target, dtype=torch.int64)
    order = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(0))
    train, test = order[:N_TRAIN], order[N_TRAIN:]
    return DigitsSplit(x[train], y[train], x[test], y[test])
