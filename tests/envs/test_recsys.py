"""The synthetic recommender's user model (papers/seed_control_theory.md T14.3) and TPGR's
returns (seed_llm_algorithms.md T20.3)."""

from __future__ import annotations

import math

import pytest
import torch

from policylab.algebra.tpgr import discounted_returns, standardise_per_user, uniformity_penalty
from policylab.envs.recsys import UserModel, ideal_dcg, precision_ceiling, relevance


def test_t14_3_user_model():
    u = torch.tensor([[1.0, 0.5]], dtype=torch.float64)
    items = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]], dtype=torch.float64)
    p = relevance(u, items, scale=1.0)  # no scaling: scores [1, 0.5, 1.05]
    assert p[0].tolist() == pytest.approx([0.731059, 0.622459, 0.740775], abs=1e-6)
    assert int(p.argmax()) == 2


def test_model_scale_and_ceilings():
    model = UserModel.make(20, dim=8, seed=0)
    assert model.scale == pytest.approx(3 / math.sqrt(8))
    p = torch.tensor([[0.1, 0.9, 0.5, 0.7]], dtype=torch.float64)
    assert float(precision_ceiling(p, 2)) == pytest.approx(0.8)
    assert float(ideal_dcg(p, 2)) == pytest.approx(0.9 + 0.7 / math.log2(3))


def test_t20_3_returns():
    Q = discounted_returns(torch.tensor([[1.0, 0.0, 1.0]], dtype=torch.float64), 0.6)
    assert Q[0].tolist() == pytest.approx([1.36, 0.6, 1.0])
    Qt = standardise_per_user(Q, torch.tensor([0]))  # population std 0.310412
    assert Qt[0].tolist() == pytest.approx([1.202703, -1.245657, 0.042954], abs=1e-6)


def test_standardise_per_user_keeps_users_apart_and_skips_zero_std():
    Q = torch.tensor([[1.0, 3.0], [2.0, 2.0]], dtype=torch.float64)
    out = standardise_per_user(Q, torch.tensor([0, 1]))
    assert out.tolist() == [[-1.0, 1.0], [0.0, 0.0]]


def test_uniformity_penalty():
    probs = torch.tensor([[[0.5, 0.5], [1.0, 0.0]]], dtype=torch.float64)
    assert uniformity_penalty(probs).tolist() == pytest.approx([0.25])  # 0 + mean(.25, .25)
