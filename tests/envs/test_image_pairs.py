"""Procedural image pairs (§0.7, §15.2): determinism, exact correspondences, rewards."""

from __future__ import annotations

import numpy as np
import pytest

from policylab.envs.procedural.image_pairs import (
    homography_from_points,
    make_pair,
    make_pairs,
    pair_rewards,
    project,
    random_homography,
)

SHIFT = np.array([[1.0, 0, 3], [0, 1, -2], [0, 0, 1]])  # x' = x + 3, y' = y − 2


def test_pairs_are_deterministic_by_seed_and_differ_across_seeds():
    a, b, c = make_pairs(5, 2), make_pairs(5, 2), make_pairs(6, 2)
    assert np.array_equal(a[1].image2, b[1].image2)
    assert np.array_equal(a[1].homography, b[1].homography)
    assert not np.array_equal(a[0].image1, c[0].image1)
    assert a[0].image1.shape == (64, 64) and a[0].image1.dtype == np.float32
    assert 0.0 <= a[0].image1.min() and a[0].image1.max() <= 1.0
    assert a[0].image1.std() > 0.05  # shapes and texture, not a flat field


def test_homography_from_points_maps_the_corners():
    src = np.array([[0, 0], [63, 0], [63, 63], [0, 63]], float)
    dst = src + np.array([[2, -1], [-3, 4], [1, 1], [0, -2]])
    H = homography_from_points(src, dst)
    assert project(H, src) == pytest.approx(dst, abs=1e-9)
    rand = random_homography(np.random.default_rng(0), warp=8.0)
    assert np.abs(project(rand, src) - src).max() <= 8.0 + 1e-9


def test_image_two_is_the_scene_through_the_homography():
    # an integer shift: image2[y, x] = image1[y + 2, x − 3] exactly (same samples)
    pair = make_pair(np.random.default_rng(1), homography=SHIFT)
    assert np.array_equal(pair.image2[0:62, 3:64], pair.image1[2:64, 0:61])
    assert not np.array_equal(pair.image2, pair.image1)


def test_rewards_follow_the_two_way_reprojection_rule():
    kp1 = np.array([[10.0, 10.0]])
    # H·(10, 10) = (13, 8): at 0 px, 1 px, exactly 2 px (not < 2), far
    kp2 = np.array([[13.0, 8.0], [14.0, 8.0], [15.0, 8.0], [40.0, 40.0]])
    assert pair_rewards(SHIFT, kp1, kp2).tolist() == [[1.0, 1.0, -0.25, -0.25]]
    assert pair_rewards(SHIFT, kp1, kp2, lm_fp=0.0, threshold=3).tolist() == [[1, 1, 1, 0]]
