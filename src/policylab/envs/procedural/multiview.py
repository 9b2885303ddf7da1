"""Multi-view objects: a coarse class visible in every view, a fine class in one view only
(papers/seed_control_theory.md §0.7, §16.2; the testbed of AFGR, Du et al., arXiv
2206.01153).

An object has a coarse class c ∈ {0..3} and a fine class f ∈ {0, 1}; its label is
y = 2c + f. Each of its `views` (4) is a 16×16 grey image: the coarse shape (a bar, a
column, a ring or a cross, shifted by the view) over Gaussian pixel noise, and a 3×3
marker in one of two corners. In view v*(c) = c (`informative_view`) the marker's corner
is the fine class; in every other view it is a coin flip, so it says nothing. Hence a
recogniser that looks at the first view (uniform) and then at v*(c) is always right, and
one that never sees v*(c) is right half the time: accuracy at two glances has the exact
ceilings of `bayes_accuracy` (T16.2) — oracle 1.0, random distinct second view 0.75,
fixed order (views 0, 1) 0.75.

Rendering is numpy from a seed, so a batch is a pure function of (seed, labels)."""

from __future__ import annotations

import numpy as np

COARSE, FINE, VIEWS, SIZE = 4, 2, 4, 16
CLASSES = COARSE * FINE
NOISE = 0.3  # pixel noise SD [ours]: the marker (height 1, 9 pixels) stays easy to read
# marker corners (row, col of its top-left pixel): fine class 0 top-left, 1 bottom-right
CORNERS = ((1, 1), (SIZE - 4, SIZE - 4))
# per-view shift of the shape, so views differ in appearance [ours]
SHIFTS = ((0, 0), (0, 1), (1, 0), (1, 1))


def informative_view(coarse: np.ndarray | int) -> np.ndarray | int:
    """v*(c): the one view whose marker shows the fine class (v*(c) = c)."""
    return coarse


def _shapes() -> np.ndarray:
    """The four coarse shapes, [COARSE, 12, 12] in {0, 1}: bar, column, ring, cross."""
    s = np.zeros((COARSE, 12, 12), dtype=np.float32)
    s[0, 5:7, 1:11] = 1.0
    s[1, 1:11, 5:7] = 1.0
    s[2, 2:10, 2:10] = 1.0
    s[2, 4:8, 4:8] = 0.0
    idx = np.arange(1, 11)
    s[3, idx, idx] = 1.0
    s[3, idx, 11 - idx] = 1.0
    return s


SHAPES = _shapes()


def render(labels: np.ndarray, seed: int, noise: float = NOISE) -> np.ndarray:
    """Images [N, VIEWS, SIZE, SIZE] (float32) of objects with classes `labels` [N]."""
    labels = np.asarray(labels, dtype=np.int64)
    if labels.ndim != 1 or (labels.size and (labels.min() < 0 or labels.max() >= CLASSES)):
        raise ValueError(f"labels must be a 1-D array of classes in [0, {CLASSES}), got {labels}")
    rng = np.random.default_rng(seed)
    n = labels.shape[0]
    coarse, fine = labels // FINE, labels % FINE
    images = rng.normal(0.0, noise, size=(n, VIEWS, SIZE, SIZE)).astype(np.float32)
    distractor = rng.integers(0, FINE, size=(n, VIEWS))
    for v, (dr, dc) in enumerate(SHIFTS):
        images[:, v, 2 + dr : 14 + dr, 2 + dc : 14 + dc] += SHAPES[coarse]
        corner = np.where(informative_view(coarse) == v, fine, distractor[:, v])
        for k, (r, c) in enumerate(CORNERS):
            rows = corner == k
            images[rows, v, r : r + 3, c : c + 3] += 1.0
    return images


def balanced_labels(n: int, seed: int) -> np.ndarray:
    """`n` labels, each class equally often (n a multiple of CLASSES), shuffled."""
    if n <= 0 or n % CLASSES:
        raise ValueError(f"n must be a positive multiple of {CLASSES}, got {n}")
    return np.random.default_rng(seed).permutation(np.arange(n) % CLASSES)


def bayes_accuracy(first: np.ndarray, second: np.ndarray) -> float:
    """Exact accuracy at two glances of the Bayes classifier for a view policy.

    first: [VIEWS] the first view's distribution; second: [COARSE, VIEWS, VIEWS] the second
    view's distribution given the coarse class and the first view (the coarse class is
    visible in every view, so a policy may depend on it). The classifier knows c from any
    view and f exactly when it saw v*(c); otherwise it guesses: ½. Classes are uniform.

        seen(c, v) = 1 if v = v*(c) else second[c, v, v*(c)]
        acc = Σ_c ¼ Σ_v first[v] (seen(c, v) + ½(1 − seen(c, v)))
    """
    first, second = np.asarray(first, float), np.asarray(second, float)
    acc = 0.0
    for c in range(COARSE):
        star = informative_view(c)
        seen = np.where(np.arange(VIEWS) == star, 1.0, second[c, :, star])
        acc += float(first @ (seen + 0.5 * (1.0 - seen))) / COARSE
    return acc


def view_tables(kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(first, second) of the reference view policies, for `bayes_accuracy`:
    `random` (first uniform, second uniform over the other views), `fixed` (views 0 then
    1), `oracle` (first uniform, second v*(c))."""
    first = np.full(VIEWS, 1.0 / VIEWS)
    second = np.zeros((COARSE, VIEWS, VIEWS))
    if kind == "random":
        second[:] = (1.0 - np.eye(VIEWS)) / (VIEWS - 1)
    elif kind == "fixed":
        first = np.eye(VIEWS)[0]
        second[:, :, 1] = 1.0
    elif kind == "oracle":
        for c in range(COARSE):
            second[c, :, informative_view(c)] = 1.0
    else:
        raise ValueError(f"view policy kind {kind!r} is not valid; choices: random, fixed, oracle")
    return first, second
