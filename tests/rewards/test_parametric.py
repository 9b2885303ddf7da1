"""Parameterised rewards r_U (papers/seed_generative.md G6.1): values by hand, U symmetric
positive definite by construction for every kind and any parameters, set_matrix round-trips."""

from __future__ import annotations

import pytest
import torch

from policylab.rewards.parametric import MahalanobisReward, OneHotMahalanobis


def test_values_by_hand():
    r = MahalanobisReward(2, "full")
    r.set_matrix(torch.tensor([[2.0, 0.5], [0.5, 1.0]]))
    # d = (1, −2): dᵀUd = 2·1 + 2·0.5·1·(−2) + 1·4 = 4
    assert float(r(torch.tensor([1.0, -1.0]), torch.tensor([0.0, 1.0]))) == pytest.approx(-4.0)
    iso = MahalanobisReward(3, "iso", init=0.5)  # u = 0.5: −0.5·(1 + 4 + 0)
    assert float(iso(torch.tensor([1.0, 2.0, 0.0]), torch.zeros(3))) == pytest.approx(-2.5)
    # broadcast: ŷ [M, B, D] against y [B, D]
    assert iso(torch.zeros(4, 5, 3), torch.ones(5, 3)).shape == (4, 5)


@pytest.mark.parametrize("kind", ["full", "diag", "iso"])
def test_spd_by_construction_for_any_parameters(kind):
    torch.manual_seed(0)
    r = MahalanobisReward(3, kind, init=2.0)
    assert torch.allclose(r.matrix(), 2.0 * torch.eye(3))
    for _ in range(10):
        with torch.no_grad():
            for p in r.parameters():
                p.copy_(3 * torch.randn_like(p))
        U = r.matrix().detach()
        assert torch.allclose(U, U.T)
        assert float(torch.linalg.eigvalsh(U).min()) > 0
        assert float(r(torch.randn(3), torch.randn(3))) <= 0


def test_set_matrix_projects_on_the_kind():
    U = torch.tensor([[2.0, 0.5], [0.5, 1.0]])
    full, diag, iso = (MahalanobisReward(2, k) for k in ("full", "diag", "iso"))
    for r in (full, diag, iso):
        r.set_matrix(U)
    assert torch.allclose(full.matrix(), U, atol=1e-6)
    assert torch.allclose(diag.matrix(), torch.diag(torch.tensor([2.0, 1.0])), atol=1e-6)
    assert torch.allclose(iso.matrix(), 1.5 * torch.eye(2), atol=1e-6)


def test_one_hot_equals_mahalanobis_on_one_hot_vectors():
    torch.manual_seed(1)
    oh = OneHotMahalanobis(4, "full")
    with torch.no_grad():
        for p in oh.parameters():
            p.copy_(torch.randn_like(p))
    y_hat, y = torch.tensor([0, 1, 3, 2]), torch.tensor([0, 2, 1, 2])
    eye = torch.eye(4)
    expected = oh.inner(eye[y_hat], eye[y])
    assert torch.allclose(oh(y_hat, y), expected, atol=1e-6)
    assert float(oh(y_hat, y)[0]) == 0.0 and float(oh(y_hat, y)[3]) == 0.0  # ŷ = y


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="kind = 'lowrank'"):
        MahalanobisReward(2, "lowrank")
    with pytest.raises(ValueError, match="init = 0"):
        MahalanobisReward(2, "iso", init=0)
