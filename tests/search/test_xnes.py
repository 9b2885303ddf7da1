"""xNES (Wierstra et al., JMLR 2014, Alg. 5; search/xnes.py)."""

import math

import pytest
import torch

from policylab.search import xnes

D = torch.float64


def test_utilities_by_hand():
    # n = 4: max(0, ln 3 − ln r) = [ln 3, ln 1.5, 0, 0], normalised, minus 1/4
    raw = torch.tensor([math.log(3), math.log(1.5), 0, 0], dtype=D)
    assert torch.allclose(xnes.utilities(4), raw / raw.sum() - 0.25)
    assert xnes.utilities(2).tolist() == pytest.approx([0.5, -0.5])
    assert float(xnes.utilities(17).sum()) == pytest.approx(0.0, abs=1e-12)


def test_update_by_hand_1d():
    # n = 2, z = [1, −1], the first better: u = [½, −½] → G_δ = 1, G_M = 0
    # μ ← 0 + 1·σ·1 = σ = 2; σ and B unchanged
    mu, sigma, B = xnes.update(
        torch.zeros(1, dtype=D),
        2.0,
        torch.eye(1, dtype=D),
        torch.tensor([[1.0], [-1.0]], dtype=D),
        torch.tensor([3.0, 1.0], dtype=D),
    )
    assert mu.tolist() == [2.0] and sigma == 2.0 and B.tolist() == [[1.0]]


def test_update_by_hand_2d():
    # z = ±e₁, ±e₂ ranked e₁, e₂, −e₁, −e₂: u = [a, b, −¼, −¼], a = ln3/ln4.5 − ¼,
    # b = ln1.5/ln4.5 − ¼. G_δ = [a + ¼, b + ¼]; G_M = diag(a − ¼, b − ¼), tr = 0 →
    # σ unchanged, B = expm(η_B/2·G_M) = diag(e^{(a−¼)/4}, e^{(b−¼)/4}) with η_B = 0.5
    a = math.log(3) / math.log(4.5) - 0.25
    b = math.log(1.5) / math.log(4.5) - 0.25
    z = torch.tensor([[1.0, 0], [0, 1], [-1, 0], [0, -1]], dtype=D)
    mu, sigma, B = xnes.update(
        torch.zeros(2, dtype=D),
        1.0,
        torch.eye(2, dtype=D),
        z,
        torch.tensor([4.0, 3, 2, 1], dtype=D),
        rates=(1.0, 0.5, 0.5),
    )
    assert mu.tolist() == pytest.approx([a + 0.25, b + 0.25])
    assert sigma == pytest.approx(1.0)
    want = torch.diag(torch.tensor([math.exp((a - 0.25) / 4), math.exp((b - 0.25) / 4)]))
    assert torch.allclose(B, want.to(D), atol=1e-12)


def test_defaults_from_table_1():
    assert xnes.default_population(98) == 4 + math.floor(3 * math.log(98)) == 17
    eta = 3 * (3 + math.log(3)) / (5 * 3 * math.sqrt(3))
    assert xnes.default_rates(3) == pytest.approx((1.0, eta, eta))


def test_climbs_a_quadratic():
    g = torch.Generator().manual_seed(0)
    mu, sigma, B = torch.full((3,), 5.0, dtype=D), 1.0, torch.eye(3, dtype=D)
    for _ in range(150):
        z, x = xnes.sample(mu, sigma, B, 10, g)
        mu, sigma, B = xnes.update(mu, sigma, B, z, -(x**2).sum(1))
    assert float(mu.norm()) < 0.1 and sigma < 0.5
    assert float(torch.linalg.det(B)) == pytest.approx(1.0)


def test_scores_shape_is_checked():
    with pytest.raises(ValueError, match="scores"):
        xnes.update(torch.zeros(2), 1.0, torch.eye(2), torch.zeros(3, 2), torch.zeros(2))
