"""DISK and its baselines on lab/image_pairs (§15): the route, exact resume, the errors,
the scorer and the Harris baseline."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import policylab
from policylab.envs.procedural.image_pairs import make_pair
from policylab.lab.catalogue import build, lab_methods
from policylab.lab.disk import harris_keypoints
from policylab.lab.image_pairs import grid_patches, match_metrics

TINY = {"task": "lab/image_pairs", "knobs": {"eval_pairs": 2}, "progress": False}


@pytest.mark.slow
def test_disk_trains_through_the_lab_route(tmp_path):
    result = policylab.train(**TINY, algo="disk", budget=4, eval_every=1, run_dir=str(tmp_path))
    assert [e["budget/spent"] for e in result.evals] == [0, 2, 4]
    assert result.optimum == 64.0
    assert all(0 <= e["oracle/value"] <= 64 for e in result.evals)


def test_one_disk_step_changes_every_parameter():
    problem, method = build("lab/image_pairs", 0, eval_pairs=1), lab_methods.get("disk")
    options = method.build_options({"lr": 1e-2})
    gen = torch.Generator().manual_seed(0)
    state = method.init(problem, options, gen)
    before = {k: v.clone() for k, v in state["net"].state_dict().items()}
    state, metrics = method.step(problem, state, options, gen)
    assert metrics["cost"] == 2 and metrics["keypoints/per_image"] > 0
    for name, value in state["net"].state_dict().items():
        assert not torch.equal(value, before[name]), name


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["disk", "supervised_grid"])
def test_resume_is_exact(tmp_path, algo):
    common = {**TINY, "algo": algo, "eval_every": 1}
    straight = policylab.train(**common, budget=6, run_dir=str(tmp_path / "a"))
    policylab.train(**common, budget=2, save_every=1, run_dir=str(tmp_path / "b"))
    resumed = policylab.train(**common, budget=6, run_dir=str(tmp_path / "b"), resume=True)
    assert [e["oracle/value"] for e in resumed.evals] == [e["oracle/value"] for e in straight.evals]


def test_bad_knob_and_option_name_the_field():
    with pytest.raises(ValueError, match="warp = 40"):
        build("lab/image_pairs", 0, warp=40)
    with pytest.raises(ValueError, match="colour"):
        build("lab/image_pairs", 0, colour=1)
    with pytest.raises(ValueError, match="disk.epoch_pairs = 0"):
        lab_methods.get("disk").build_options({"epoch_pairs": 0})


def test_scorer_counts_correct_matches_on_an_exact_shift():
    # a shift by one cell: every grid point lands on a grid point, patches match inside
    shift = np.array([[1.0, 0, 8], [0, 1, 0], [0, 0, 1]])
    pairs = [make_pair(np.random.default_rng(s), homography=shift) for s in range(3)]
    m = match_metrics(grid_patches, pairs)
    assert m["keypoints"] == 64
    assert m["correct"] >= 40 and m["precision"] >= 0.9
    assert m["homography_3px"] == 1.0
    wrong = np.array([[1.0, 0, -8], [0, 1, 0], [0, 0, 1]])  # the labels of the opposite shift
    flipped = [type(p)(p.image1, p.image2, wrong) for p in pairs]
    assert match_metrics(grid_patches, flipped)["correct"] < 5


def test_harris_finds_the_corners_of_a_square():
    image = np.zeros((64, 64))
    image[20:40, 20:40] = 1.0
    xy = harris_keypoints(image, k=0.04, sigma=1.0)
    corners = np.array([(20, 20), (39, 20), (20, 39), (39, 39)])
    near = np.abs(xy[:, None, :] - corners[None, :, :]).max(-1) <= 2  # [K, 4]
    assert near.any(0).all()  # every corner found
    assert near.any(1).all()  # nothing else: edges and flat cells have no positive response


def test_ransac_recovers_the_homography_despite_outliers():
    from policylab.envs.procedural.image_pairs import project, random_homography
    from policylab.lab.image_pairs import corner_error, ransac_homography

    rng = np.random.default_rng(0)
    truth = random_homography(rng, warp=8.0)
    p1 = rng.uniform(0, 63, size=(30, 2))
    p2 = project(truth, p1)
    p2[:10] = rng.uniform(0, 63, size=(10, 2))  # a third are wrong matches
    assert corner_error(ransac_homography(p1, p2), truth) < 1e-6
    assert corner_error(ransac_homography(p1[:3], p2[:3]), truth) == float("inf")
    assert corner_error(np.eye(3), truth) > 1.0
