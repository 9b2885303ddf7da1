"""Procedural image pairs with exact correspondences (papers/seed_control_theory.md §0.7,
§15.2): a 64×64 grey image of shapes and textures, and the same scene seen through a
random homography, so every keypoint pair has an exact label.

The scene is a function of the continuous plane (a smooth background of sinusoids, then
filled circles, rotated rectangles and triangles painted in order, each flat or striped),
so the second image is the scene evaluated at H⁻¹(x) — no interpolation, and no pixel
without a source: a point of image 1 at p is at H·p in image 2, exactly. Each pixel is the
mean of 2×2 samples (light anti-aliasing, our choice). numpy only; deterministic by seed.

    pair = make_pair(np.random.default_rng(0))      # pair.image1, pair.image2: [64, 64]
    q = project(pair.homography, p)                 # p: [N, 2] (x, y) pixels of image 1
    R = pair_rewards(pair.homography, kp1, kp2)     # DISK's reward matrix (§15.1)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SIZE = 64  # [paper §15.2 testbed: 64×64]
WARP_PX = 8.0  # largest corner displacement of the homography, pixels [ours]
SHAPES = 8  # shapes per scene [ours]


@dataclass(frozen=True)
class ImagePair:
    """image1, image2: [S, S] float32 in [0, 1]; homography [3, 3] maps image-1 pixel
    coordinates (x, y, 1) to image 2's (pixel centres at integers)."""

    image1: np.ndarray
    image2: np.ndarray
    homography: np.ndarray


def project(homography: np.ndarray, points: np.ndarray) -> np.ndarray:
    """x' = H·(x, y, 1) dehomogenised; points [N, 2] → [N, 2]."""
    points = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    ones = np.ones((points.shape[0], 1))
    mapped = np.concatenate([points, ones], 1) @ np.asarray(homography, dtype=np.float64).T
    return mapped[:, :2] / mapped[:, 2:3]


def homography_from_points(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The H with H·src_k ∝ dst_k for four (or more, least squares) correspondences,
    h₃₃ = 1 (direct linear transform)."""
    rows, rhs = [], []
    for (x, y), (u, v) in zip(np.asarray(src, float), np.asarray(dst, float), strict=True):
        rows.append([x, y, 1, 0, 0, 0, -u * x, -u * y])
        rows.append([0, 0, 0, x, y, 1, -v * x, -v * y])
        rhs += [u, v]
    h = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)[0]
    return np.append(h, 1.0).reshape(3, 3)


def random_homography(rng: np.random.Generator, size: int = SIZE, warp: float = WARP_PX):
    """Each image corner moved by U(−warp, warp) px in x and y [ours: the usual 4-point
    parametrisation, e.g. SuperPoint's homographic adaptation]."""
    corners = np.array([[0, 0], [size - 1, 0], [size - 1, size - 1], [0, size - 1]], float)
    moved = corners + rng.uniform(-warp, warp, size=corners.shape)
    return homography_from_points(corners, moved)


def _scene(rng: np.random.Generator, size: int, shapes: int):
    """A random scene: a function (x, y) arrays → intensity arrays."""
    waves = [
        (rng.uniform(0.05, 0.15), rng.uniform(0, 2 * np.pi), rng.uniform(0, 2 * np.pi))
        for _ in range(3)
    ]
    base = rng.uniform(0.3, 0.7)
    parts = []
    for _ in range(shapes):
        kind = rng.integers(3)
        centre = rng.uniform(-0.1 * size, 1.1 * size, size=2)
        scale = rng.uniform(0.08, 0.25) * size
        level = rng.uniform(0, 1)
        stripes = (rng.uniform(0.2, 0.6), rng.uniform(0, np.pi), rng.uniform(0, 0.4))
        if kind == 2:  # triangle: three vertices around the centre
            angles = np.sort(rng.uniform(0, 2 * np.pi, 3))
            radii = rng.uniform(0.6, 1.2, 3) * scale
            geometry = centre + np.stack([np.cos(angles), np.sin(angles)], 1) * radii[:, None]
        else:  # circle: radius; rectangle: half sizes and an angle
            geometry = (rng.uniform(0.5, 1.0, 2) * scale, rng.uniform(0, np.pi))
        parts.append((kind, centre, scale, level, stripes, geometry))

    def intensity(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        img = np.full(x.shape, base)
        for freq, angle, phase in waves:
            img += 0.1 * np.sin(freq * (np.cos(angle) * x + np.sin(angle) * y) + phase)
        for kind, centre, scale, level, (freq, angle, depth), geometry in parts:
            dx, dy = x - centre[0], y - centre[1]
            if kind == 0:
                inside = dx**2 + dy**2 <= scale**2
            elif kind == 1:
                (hx, hy), theta = geometry
                u = np.cos(theta) * dx + np.sin(theta) * dy
                v = -np.sin(theta) * dx + np.cos(theta) * dy
                inside = (np.abs(u) <= hx) & (np.abs(v) <= hy)
            else:
                inside = np.ones(x.shape, bool)
                for k in range(3):  # counter-clockwise vertices: left of every edge
                    (ax, ay), (bx, by) = geometry[k], geometry[(k + 1) % 3]
                    inside &= (bx - ax) * (y - ay) - (by - ay) * (x - ax) >= 0
            texture = level + depth * np.sin(freq * (np.cos(angle) * x + np.sin(angle) * y))
            img = np.where(inside, texture, img)
        return np.clip(img, 0.0, 1.0)

    return intensity


def _render(intensity, size: int, inverse: np.ndarray | None) -> np.ndarray:
    """The mean of 2×2 samples per pixel, at H⁻¹(sample) when `inverse` is given."""
    offsets = (-0.25, 0.25)
    ys, xs = np.mgrid[0:size, 0:size].astype(np.float64)
    total = np.zeros((size, size))
    for ox in offsets:
        for oy in offsets:
            pts = np.stack([(xs + ox).ravel(), (ys + oy).ravel()], 1)
            if inverse is not None:
                pts = project(inverse, pts)
            total += intensity(pts[:, 0], pts[:, 1]).reshape(size, size)
    return (total / 4).astype(np.float32)


def make_pair(
    rng: np.random.Generator,
    size: int = SIZE,
    warp: float = WARP_PX,
    shapes: int = SHAPES,
    homography: np.ndarray | None = None,
) -> ImagePair:
    """One scene, seen directly (image 1) and through a homography (image 2; a random one
    unless given)."""
    intensity = _scene(rng, size, shapes)
    if homography is None:
        homography = random_homography(rng, size, warp)
    image1 = _render(intensity, size, None)
    image2 = _render(intensity, size, np.linalg.inv(homography))
    return ImagePair(image1, image2, homography)


def make_pairs(seed: int, n: int, **kwargs) -> list[ImagePair]:
    """`n` pairs, deterministic by `seed`."""
    rng = np.random.default_rng(seed)
    return [make_pair(rng, **kwargs) for _ in range(n)]


def reprojection_distances(
    homography: np.ndarray, kp1: np.ndarray, kp2: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """d₁₂[i, j] = ‖H·kp1_i − kp2_j‖, d₂₁[i, j] = ‖kp1_i − H⁻¹·kp2_j‖: [N1, N2] each."""
    fwd = project(homography, kp1)
    back = project(np.linalg.inv(homography), kp2)
    d12 = np.linalg.norm(fwd[:, None, :] - np.asarray(kp2, float)[None, :, :], axis=-1)
    d21 = np.linalg.norm(np.asarray(kp1, float)[:, None, :] - back[None, :, :], axis=-1)
    return d12, d21


def pair_rewards(
    homography: np.ndarray,
    kp1: np.ndarray,
    kp2: np.ndarray,
    *,
    threshold: float = 2.0,
    lm_tp: float = 1.0,
    lm_fp: float = -0.25,
) -> np.ndarray:
    """DISK's reward matrix with a homography in place of depth: R[i, j] = λ_tp when the
    reprojection distance is < threshold both ways, else λ_fp (a homography labels every
    pair, so none is "unknown") [code cvlab-epfl/disk:disk/loss/rewards.py:DepthReward;
    threshold 2 px, λ_tp 1, λ_fp −0.25 there]. kp1 [N1, 2], kp2 [N2, 2] → [N1, N2]."""
    d12, d21 = reprojection_distances(homography, kp1, kp2)
    good = (d12 < threshold) & (d21 < threshold)
    return np.where(good, lm_tp, lm_fp)
