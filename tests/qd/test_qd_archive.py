"""The CMA-MAE grid archive (papers/seed_control_theory.md §9.4 T9.2)."""

import pytest
import torch

from policylab.qd.archive import GridArchive, cma_mae_threshold

D = torch.float64


def test_t9_2_cma_mae_cell_by_hand():
    # t = 0, α = 0.1: f = 10 → Δ = 10, t = 0.9·0 + 0.1·10 = 1.0
    assert cma_mae_threshold(0.0, 10.0, 0.1) == pytest.approx((10.0, 1.0, True))
    # f = 5 → Δ = 5 − 1 = 4, t = 0.9·1 + 0.1·5 = 1.4
    assert cma_mae_threshold(1.0, 5.0, 0.1) == pytest.approx((4.0, 1.4, True))
    # f = 0.5 ≤ 1.4 → not inserted, t stays 1.4
    delta, t, inserted = cma_mae_threshold(1.4, 0.5, 0.1)
    assert (delta, t, inserted) == (pytest.approx(-0.9), 1.4, False)


def test_t9_2_through_the_archive_keeps_the_best_elite():
    archive = GridArchive((10, 10), -1.0, 1.0, solution_dim=1, alpha=0.1)
    m = torch.tensor([[0.05, 0.05]] * 3, dtype=D)  # one cell
    sols = torch.tensor([[1.0], [2.0], [3.0]], dtype=D)
    deltas, inserted = archive.add(sols, torch.tensor([10.0, 5.0, 0.5], dtype=D), m)
    assert deltas.tolist() == pytest.approx([10.0, 4.0, -0.9])
    assert inserted.tolist() == [True, True, False]
    e = int(archive.index(m[:1]))
    assert float(archive.thresholds[e]) == pytest.approx(1.4)
    # f = 5 passed the threshold but the cell's best elite (f = 10) stays
    assert float(archive.fitness[e]) == 10.0 and float(archive.solutions[e, 0]) == 1.0
    assert int(archive.occupied.sum()) == 1


def test_alpha_one_is_plain_map_elites():
    archive = GridArchive((2,), 0.0, 1.0, solution_dim=1, alpha=1.0, threshold_min=float("-inf"))
    m = torch.tensor([[0.1], [0.2], [0.3]], dtype=D)
    deltas, inserted = archive.add(torch.zeros(3, 1, dtype=D), torch.tensor([0.5, 0.4, 0.7]), m)
    assert inserted.tolist() == [True, False, True]
    assert float(archive.thresholds[0]) == pytest.approx(0.7)  # the elite's f
    assert deltas[1:].tolist() == pytest.approx([-0.1, 0.2])


def test_index_row_major_with_edges_clamped():
    archive = GridArchive((10, 10), -1.0, 1.0, solution_dim=1)
    m = torch.tensor([[-1.0, -1.0], [1.0, 1.0], [0.05, -0.05], [1.5, -3.0]], dtype=D)
    # [0.05, −0.05]: row ⌊1.05/0.2⌋ = 5, column ⌊0.95/0.2⌋ = 4 → 54; out of range → edges
    assert archive.index(m).tolist() == [0, 99, 54, 90]


def test_bad_settings_name_the_field():
    with pytest.raises(ValueError, match="alpha.*got 0"):
        GridArchive((2,), 0.0, 1.0, 1, alpha=0.0)
    with pytest.raises(ValueError, match="threshold_min.*alpha = 0.5"):
        GridArchive((2,), 0.0, 1.0, 1, alpha=0.5, threshold_min=float("-inf"))
    with pytest.raises(ValueError, match="high"):
        GridArchive((2,), 1.0, 1.0, 1)
    with pytest.raises(ValueError, match="empty"):
        GridArchive((2,), 0.0, 1.0, 1).sample_elites(1, torch.Generator())


def test_state_round_trip():
    settings = {"cells": (3, 3), "low": -1.0, "high": 1.0, "solution_dim": 2, "alpha": 0.1}
    archive = GridArchive(**settings)
    archive.add(torch.ones(1, 2, dtype=D), torch.tensor([0.3]), torch.tensor([[0.0, 0.9]]))
    back = GridArchive.from_state(archive.state(), **settings)
    for name, value in archive.state().items():
        assert torch.equal(getattr(back, name), value)
