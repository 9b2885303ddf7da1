"""The lab task `lab/image_pairs` (papers/seed_control_theory.md §15.2): learn keypoints and
descriptors that match across a homography, scored on held-out pairs.

A policy here is a feature extractor: images [N, S, S] → per image (keypoints (x, y)
[K, 2], L2-normalised descriptors [K, D]). Matches are cycle-consistent nearest neighbours
of the descriptors; a match is correct when its reprojection distance is < 2 px both ways
(the reward's rule). `value` = correct matches per held-out pair; `optimum` = the number
of detector cells (64 at 64 px, w = 8), an upper bound — one keypoint per cell — not a
known attainable value. The initial policy is the fixed cell-centre grid with raw-patch
descriptors, so `eval/score` reads 0 for that grid and 1 at the bound."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from policylab.envs.procedural.image_pairs import (
    SHAPES,
    SIZE,
    WARP_PX,
    homography_from_points,
    make_pairs,
    pair_rewards,
    project,
)
from policylab.lab import lab_tasks
from policylab.policies.keypoints import CELL, cycle_consistent_matches
from policylab.tabular.methods import Problem

Features = Callable[[np.ndarray], list[tuple[np.ndarray, np.ndarray]]]
HELD_OUT = (
    1_000_003  # held-out pairs come from seed + HELD_OUT, training pairs from the run's generator
)
PATCH = 9  # raw-patch descriptor side [ours]


def grid_points(size: int = SIZE, cell: int = CELL) -> np.ndarray:
    """The cell centres (x, y), row-major: [(size/cell)², 2]."""
    centres = np.arange(cell // 2, size, cell)
    ys, xs = np.meshgrid(centres, centres, indexing="ij")
    return np.stack([xs.ravel(), ys.ravel()], 1)


def raw_patches(image: np.ndarray, xy: np.ndarray, side: int = PATCH) -> np.ndarray:
    """Mean-subtracted, L2-normalised side×side patches around integer keypoints (edge
    padding): [K, side²]."""
    half = side // 2
    padded = np.pad(image, half, mode="edge")
    out = np.stack([padded[y : y + side, x : x + side].ravel() for x, y in xy.astype(int)])
    out = out - out.mean(1, keepdims=True)
    return out / (np.linalg.norm(out, axis=1, keepdims=True) + 1e-8)


def grid_patches(images: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The reference extractor: the cell-centre grid with raw patches."""
    xy = grid_points(images.shape[-1])
    return [(xy, raw_patches(img, xy)) for img in images]


def ransac_homography(
    p1: np.ndarray, p2: np.ndarray, iters: int = 200, tol: float = 3.0, seed: int = 0
) -> np.ndarray | None:
    """H with H·p1 ≈ p2 from matched points [M, 2]: the 4-point fit with the most inliers
    (reprojection < tol px) over `iters` random draws, refitted on its inliers; None with
    fewer than 4 matches [ours: plain RANSAC, as the HPatches protocol's estimate]."""
    if len(p1) < 4:
        return None
    rng = np.random.default_rng(seed)
    best = np.zeros(len(p1), bool)
    for _ in range(iters):
        pick = rng.choice(len(p1), 4, replace=False)
        with np.errstate(all="ignore"):
            inliers = (
                np.linalg.norm(project(homography_from_points(p1[pick], p2[pick]), p1) - p2, axis=1)
                < tol
            )
        if inliers.sum() > best.sum():
            best = inliers
    if best.sum() < 4:
        return None
    return homography_from_points(p1[best], p2[best])


def corner_error(estimate: np.ndarray | None, truth: np.ndarray, size: int = SIZE) -> float:
    """Mean distance between the image corners mapped by `estimate` and by `truth` (inf
    without an estimate)."""
    if estimate is None:
        return float("inf")
    corners = np.array([[0, 0], [size - 1, 0], [size - 1, size - 1], [0, size - 1]], float)
    with np.errstate(all="ignore"):
        err = np.linalg.norm(project(estimate, corners) - project(truth, corners), axis=1).mean()
    return float(err) if np.isfinite(err) else float("inf")


def match_metrics(features: Features, pairs) -> dict[str, float]:
    """Correct matches per pair, matching precision (correct / matches, pooled), matches
    and keypoints per pair, and the fraction of pairs whose RANSAC homography from the
    matches has a mean corner error < 3 px (§15.2's check), over `pairs`."""
    first = features(np.stack([p.image1 for p in pairs]))
    second = features(np.stack([p.image2 for p in pairs]))
    correct = matches = keypoints = homography_ok = 0
    for pair, (kp1, d1), (kp2, d2) in zip(pairs, first, second, strict=True):
        keypoints += len(kp1) + len(kp2)
        found = cycle_consistent_matches(
            torch.as_tensor(d1, dtype=torch.float32), torch.as_tensor(d2, dtype=torch.float32)
        )
        if len(found) == 0:
            continue
        i, j = found[:, 0].tolist(), found[:, 1].tolist()
        good = pair_rewards(pair.homography, kp1[i], kp2[j]).diagonal() > 0
        correct += int(good.sum())
        matches += len(i)
        estimate = ransac_homography(kp1[i].astype(float), kp2[j].astype(float))
        homography_ok += corner_error(estimate, pair.homography) < 3.0
    n = len(pairs)
    return {
        "correct": correct / n,
        "precision": correct / matches if matches else 0.0,
        "matches": matches / n,
        "keypoints": keypoints / (2 * n),
        "homography_3px": homography_ok / n,
    }


def image_pairs(
    seed: int, warp: float = WARP_PX, shapes: int = SHAPES, eval_pairs: int = 32
) -> Problem:
    """`lab/image_pairs`: knobs warp (largest corner move of the homography, px), shapes
    (per scene), eval_pairs (held-out pairs scored); budget in image pairs."""
    if not 0 <= warp <= SIZE / 4:
        raise ValueError(f"lab/image_pairs: warp = {warp!r} px; accepted 0 ≤ warp ≤ {SIZE / 4}")
    if not isinstance(shapes, int) or shapes < 0:
        raise ValueError(f"lab/image_pairs: shapes = {shapes!r}; accepted an integer ≥ 0")
    if not isinstance(eval_pairs, int) or eval_pairs < 1:
        raise ValueError(f"lab/image_pairs: eval_pairs = {eval_pairs!r}; accepted an integer ≥ 1")
    held_out = make_pairs(seed + HELD_OUT, eval_pairs, warp=warp, shapes=shapes)
    return Problem(
        mdp={"warp": float(warp), "shapes": shapes, "size": SIZE},
        value=lambda features: match_metrics(features, held_out)["correct"],
        optimum=float((SIZE // CELL) ** 2),
        initial_policy=grid_patches,
        budget_unit="image pairs",
        extras={"held_out": held_out},
    )


lab_tasks.add("image_pairs", image_pairs, summary="DISK's testbed: 64 px shapes under homographies")
