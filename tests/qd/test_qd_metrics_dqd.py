"""Archive metrics and the DQD branching rule (papers/seed_control_theory.md §9.4 T9.1)."""

import math

import pytest
import torch

from policylab.qd.dqd import branch, normalize_rows
from policylab.qd.metrics import best_fitness, coverage, qd_score

D = torch.float64


def test_t9_1_branch_by_hand():
    # θ' = [0,0] + 0.5·[1,0] − 1·[0,2] = [0.5, −2]
    theta = torch.zeros(2, dtype=D)
    grads = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=D)
    out = branch(theta, grads, torch.tensor([[0.5, -1.0]], dtype=D))
    assert out.tolist() == [[0.5, -2.0]]


def test_branch_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="grads \\[k\\+1, D\\]"):
        branch(torch.zeros(2), torch.zeros(3, 3), torch.zeros(1, 3))


def test_normalize_rows_unit_norm_and_zero_row_stays_zero():
    g = normalize_rows(torch.tensor([[3.0, 4.0], [0.0, 0.0]], dtype=D))
    assert g.tolist() == [[0.6, 0.8], [0.0, 0.0]]


def test_metrics_by_hand():
    occupied = torch.tensor([True, False, True, True])
    fitness = torch.tensor([0.5, 9.0, 0.25, 1.0], dtype=D)  # the empty cell's 9 never counts
    assert coverage(occupied) == 0.75
    assert qd_score(occupied, fitness) == 1.75
    assert qd_score(occupied, fitness, offset=-1.0) == 4.75
    assert best_fitness(occupied, fitness) == 1.0
    assert best_fitness(torch.zeros(2, dtype=torch.bool), fitness[:2]) == -math.inf
