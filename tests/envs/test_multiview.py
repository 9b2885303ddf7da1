"""Multi-view objects (envs/procedural/multiview.py; papers/seed_control_theory.md §16.2):
the exact two-glance ceilings (T16.2) and that the renderings carry the information those
ceilings assume — coarse class in every view, fine class in view v*(c) only."""

from __future__ import annotations

import numpy as np
import pytest

from policylab.envs.procedural import multiview as mv


@pytest.mark.parametrize(("kind", "expected"), [("oracle", 1.0), ("random", 0.75), ("fixed", 0.75)])
def test_t16_2_exact_accuracies_at_two_glances(kind, expected):
    # random: P(see v*) = ¼ (first is v*) + ¾·⅓ (second is) = ½ → ½·1 + ½·½ = 0.75;
    # fixed (0, 1): v*(c) = c is seen for c ∈ {0, 1} only → ½·1 + ½·½ = 0.75
    assert mv.bayes_accuracy(*mv.view_tables(kind)) == pytest.approx(expected, abs=1e-12)


def test_a_policy_that_never_sees_the_informative_view_is_at_one_half():
    first = np.eye(mv.VIEWS)[0]
    second = np.zeros((mv.COARSE, mv.VIEWS, mv.VIEWS))
    for c in range(mv.COARSE):
        second[c, 0, (c + 1) % mv.VIEWS if c != 0 else 1] = 1.0  # never v*(c) (except c = 0)
    # c = 0: the first view is v* → 1; c = 1..3: never seen → ½: (1 + 3·½)/4 = 0.625
    assert mv.bayes_accuracy(first, second) == pytest.approx(0.625)


def _markers(images: np.ndarray) -> np.ndarray:
    """The marker's corner (0 or 1) in each view of noise-free images: [N, V]."""
    (r0, c0), (r1, c1) = mv.CORNERS
    a = images[:, :, r0 : r0 + 3, c0 : c0 + 3].mean((-1, -2))
    b = images[:, :, r1 : r1 + 3, c1 : c1 + 3].mean((-1, -2))
    return (b > a).astype(int)


def test_the_fine_class_is_in_the_informative_view_only():
    labels = mv.balanced_labels(4000, seed=1)
    images = mv.render(labels, seed=2, noise=0.0)
    coarse, fine = labels // mv.FINE, labels % mv.FINE
    corner = _markers(images)
    star = corner[np.arange(len(labels)), mv.informative_view(coarse)]
    assert (star == fine).all()
    others = corner[np.arange(mv.VIEWS)[None, :] != mv.informative_view(coarse)[:, None]]
    repeated = np.repeat(fine, mv.VIEWS - 1)
    # a coin flip per view, whatever the fine class: agreement ≈ ½ (SE 0.005)
    assert 0.47 < (others == repeated).mean() < 0.53


def test_the_coarse_shape_is_in_every_view():
    labels = np.arange(mv.CLASSES)
    images = mv.render(labels, seed=0, noise=0.0)
    for i, label in enumerate(labels):
        for v, (dr, dc) in enumerate(mv.SHIFTS):
            patch = images[i, v, 2 + dr : 14 + dr, 2 + dc : 14 + dc]
            # the shape's pixels are 1 (a marker may overlap the shape's corner only)
            assert (patch[mv.SHAPES[label // mv.FINE] > 0] >= 1.0).all()


def test_rendering_is_a_function_of_the_seed():
    labels = mv.balanced_labels(16, seed=3)
    assert np.array_equal(mv.render(labels, 5), mv.render(labels, 5))
    assert not np.array_equal(mv.render(labels, 5), mv.render(labels, 6))


def test_bad_inputs_name_what_is_accepted():
    with pytest.raises(ValueError, match=r"labels must be .* classes in \[0, 8\)"):
        mv.render(np.array([8]), 0)
    with pytest.raises(ValueError, match="positive multiple of 8"):
        mv.balanced_labels(12, 0)
    with pytest.raises(ValueError, match="choices: random, fixed, oracle"):
        mv.view_tables("greedy")
