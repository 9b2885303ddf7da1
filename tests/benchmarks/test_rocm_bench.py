"""benchmarks/rocm_ring.py: the digits-only clamped metrics, arm parsing, merging saved runs."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

pytest.importorskip("sklearn")

from rocm_ring import clamped_metrics, merge_runs, parse_arm  # noqa: E402

from policylab.lab.digits import nn_dist, pair_dist  # noqa: E402
from policylab.lab.digits_data import load_digits_split  # noqa: E402


def test_clamped_metrics_undo_pixels_pushed_beyond_the_box():
    real = load_digits_split().x_train[:2].clone()
    assert float(real.abs().max()) <= 1.0
    j = int((real[0] == -1).nonzero()[0])  # a background pixel of image 0
    k = int((real[1] == -1).nonzero()[0])
    pushed = real.clone()
    pushed[0, j], pushed[1, k] = -5.0, -3.0  # beyond the box: the rewards clamp them back
    m = clamped_metrics(pushed)
    assert m["fid/out_of_box"] == pytest.approx(2 / (2 * 64))
    assert m["fid/nn_dist_clamped"] == pytest.approx(0.0, abs=1e-5)  # back on the images
    assert nn_dist(pushed) == pytest.approx((4.0 + 2.0) / 2, abs=1e-5)  # unclamped: off them
    assert m["div/pair_dist_clamped"] == pytest.approx(pair_dist(real), rel=1e-6)
    inside = clamped_metrics(real)
    assert inside["fid/out_of_box"] == 0.0
    assert inside["fid/nn_dist_clamped"] == pytest.approx(nn_dist(real), abs=1e-6)


def test_parse_arm_reads_named_and_ad_hoc_arms():
    assert parse_arm("rocm_none@steps=2") == ("rocm_none", {"steps": 2})
    assert parse_arm("rocm_tv_provisional@beta=0.5@lr=0.001") == (
        "rocm_tv_provisional",
        {"beta": 0.5, "lr": 0.001},
    )


def test_merge_runs_joins_seeds_and_refuses_a_seed_saved_twice():
    first = {"rocm_none": {"0": {"x": 1}, "1": {"x": 2}}, "rlcm": {"0": {"x": 3}}}
    later = {"rocm_none": {"5": {"x": 4}}}
    merged = merge_runs([first, later])
    assert sorted(merged["rocm_none"]) == [0, 1, 5]  # seeds joined, not the arm replaced
    assert merged["rlcm"] == {0: {"x": 3}}
    with pytest.raises(ValueError, match="'rocm_none' seed 1 is saved twice"):
        merge_runs([first, {"rocm_none": {"1": {"x": 9}}}])
