"""SGN certificates (spec §4; arXiv:2512.06791): the hand cases T4.1–T4.3 on the code's 2-D
game J = [[1, 10], [0.05, 1]] to 1e-6, the band's closed form against the margin, the edge
cases of §4.3, and soundness on 50 small random games (every certified step contracts in
‖·‖_M and simulated play converges)."""

from __future__ import annotations

import math

import pytest
import torch

from policylab.games import (
    euclidean_certificate,
    h_stab,
    linear_game,
    metric_norm,
    quadratic_jacobian,
    scalar_game,
    sgn_certificate,
    sgn_margin,
    step_matrix,
    true_margin,
    two_player_band,
)
from policylab.games.sgn import expand_weights

F64 = torch.float64
TOL = 1e-6
J2 = torch.tensor([[1.0, 10.0], [0.05, 1.0]], dtype=F64)
MU = torch.tensor([1.0, 1.0], dtype=F64)
L2 = torch.tensor([[0.0, 10.0], [0.05, 0.0]], dtype=F64)


def test_t41_euclidean_fails_but_the_game_is_stable():
    # sym J = [[1, 5.025], [5.025, 1]] -> λ_min = 1 - 5.025 = -4.025
    euclid = euclidean_certificate(J2, player_dims=(1, 1))
    assert euclid.alpha == pytest.approx(-4.025, abs=TOL)
    assert not euclid.certified and euclid.h_euler == 0.0
    # eig J = 1 ± √(10·0.05) = 1 ± 0.707107
    eig = sorted(torch.linalg.eigvals(J2).real.tolist())
    assert eig == pytest.approx([0.292893, 1.707107], abs=TOL)
    # C(1,1) = [[2, -10.05], [-10.05, 2]] -> ½(2 - 10.05) = -4.025
    assert float(sgn_margin(MU, L2, torch.tensor([1.0, 1.0]))) == pytest.approx(-4.025, abs=TOL)


def test_t42_sgn_certifies_with_w_1_200():
    w = torch.tensor([1.0, 200.0], dtype=F64)
    cert = sgn_certificate(J2, player_dims=(1, 1), weights=w)
    # D^-1/2 C D^-1/2 = [[2, -20/√200], [., 2]] -> ½(2 - √2) = 0.292893
    assert cert.alpha == pytest.approx(1 - 1 / math.sqrt(2), abs=TOL)
    assert true_margin(J2, w, (1, 1)) == pytest.approx(0.292893, abs=TOL)
    assert cert.beta == pytest.approx(1.707107, abs=TOL)
    assert cert.h_euler == pytest.approx(0.201010, abs=TOL)
    assert cert.certified and cert.exact
    T = step_matrix(J2, 0.2)
    assert metric_norm(T, expand_weights(w, (1, 1))) == pytest.approx(0.941421, abs=TOL)
    assert float(torch.linalg.matrix_norm(T, ord=2)) == pytest.approx(2.281724, abs=TOL)
    assert float(torch.linalg.eigvals(T).abs().max()) == pytest.approx(0.941421, abs=TOL)
    # h_stab = min 2/λ = 2/1.707107; the certified step is 0.201010 / 1.171573 of it
    assert h_stab(J2) == pytest.approx(1.171573, abs=TOL)


def test_t43_band_and_margin_along_the_ratio():
    # p = 1, L12·L21 = 0.5: r± = (1.5 ± 2√0.5) / 0.0025
    band = two_player_band(MU, L2)
    assert band == pytest.approx((34.314575, 1165.685425), abs=TOL)
    for r, expected in [(30, -0.049802), (35, 0.006944), (1100, 0.020088), (1200, -0.010363)]:
        alpha = float(sgn_margin(MU, L2, torch.tensor([1.0, float(r)], dtype=F64)))
        assert alpha == pytest.approx(expected, abs=TOL)
    searched = sgn_certificate(scalar_game())
    assert searched.band == pytest.approx(band, abs=TOL)
    assert band[0] < float(searched.w[1]) < band[1]
    assert searched.h_euler >= 0.201010 - TOL  # the search finds w = (1, 200) or better


@pytest.mark.parametrize("target", [0.0, 0.1])
def test_band_edges_are_where_the_margin_hits_the_target(target):
    gen = torch.Generator().manual_seed(3)
    for _ in range(20):
        mu = 0.5 + torch.rand(2, generator=gen, dtype=F64)
        l12 = 3 * float(torch.rand(1, generator=gen, dtype=F64))
        l21 = 0.05 + 0.2 * float(torch.rand(1, generator=gen, dtype=F64))
        L = torch.tensor([[0.0, l12], [l21, 0.0]], dtype=F64)
        band = two_player_band(mu, L, target)
        feasible = (mu[0] - target) * (mu[1] - target) > l12 * l21
        assert (band is not None) == bool(feasible)
        if band is None:
            continue
        edges = torch.tensor([[1.0, band[0]], [1.0, band[1]]], dtype=F64)
        assert sgn_margin(mu, L, edges).tolist() == pytest.approx([target, target], abs=1e-9)
        mid = torch.tensor([1.0, math.sqrt(band[0] * band[1])], dtype=F64)
        assert float(sgn_margin(mu, L, mid)) > target


def test_l21_zero_band_is_open_ended_and_certifies():
    # p = 1, L12 = 4: r > 16/4 = 4 (linear condition, no division by L21)
    L = torch.tensor([[0.0, 4.0], [0.0, 0.0]], dtype=F64)
    assert two_player_band(MU, L) == (4.0, math.inf)
    assert float(sgn_margin(MU, L, torch.tensor([1.0, 3.9]))) < 0
    assert float(sgn_margin(MU, L, torch.tensor([1.0, 4.1]))) > 0
    cert = sgn_certificate(torch.tensor([[1.0, 4.0], [0.0, 1.0]], dtype=F64), player_dims=(1, 1))
    assert cert.certified and cert.band == (4.0, math.inf) and float(cert.w[1]) > 4.0
    assert two_player_band(MU, torch.zeros(2, 2, dtype=F64)) == (0.0, math.inf)


@pytest.mark.parametrize("mu2", [0.0, -0.5])
def test_nonpositive_curvature_gives_no_certificate_and_says_why(mu2):
    J = torch.tensor([[1.0, 0.1], [0.1, mu2]], dtype=F64)
    cert = sgn_certificate(J, player_dims=(1, 1))
    assert not cert.certified and cert.h_euler == 0.0 and cert.h_rk4 == 0.0
    assert "μ_2" in cert.reason and "<= 0" in cert.reason
    assert cert.band is None
    # both curvatures negative: p > 0 yet no band (the code's `p > L12 L21` alone misses it)
    assert two_player_band(torch.tensor([-1.0, -1.0]), torch.zeros(2, 2)) is None


def test_small_gain_failure_reason():
    # μ1μ2 = 1 < L12·L21 = 2
    cert = sgn_certificate(torch.tensor([[1.0, 2.0], [1.0, 1.0]], dtype=F64), player_dims=(1, 1))
    assert not cert.certified and "small-gain" in cert.reason


def test_three_players_certified_where_euclid_fails():
    # a one-way chain 1 -> 2 -> 3 with strong coupling: lower-triangular J, eig = 1, 1, 1
    J = torch.tensor([[1.0, 0.0, 0.0], [8.0, 1.0, 0.0], [0.0, 8.0, 1.0]], dtype=F64)
    assert not euclidean_certificate(J, player_dims=(1, 1, 1)).certified
    cert = sgn_certificate(J, player_dims=(1, 1, 1))
    assert cert.certified
    assert true_margin(J, cert.w, (1, 1, 1)) >= cert.alpha - 1e-12
    h = 0.9 * cert.h_euler
    assert metric_norm(step_matrix(J, h), torch.diag(cert.M)) <= cert.euler_factor(h) + 1e-12


def _m_norm(x: torch.Tensor, m: torch.Tensor) -> float:
    return float((m * x * x).sum().sqrt())


def test_soundness_on_50_random_games():
    """Every certified (game, h < h_euler): ‖I − hJ‖_M ≤ √(1 − 2hα + h²β²) < 1, and
    2^16 steps of play from a random start shrink ‖x‖_M by at least that factor^(2^16)."""
    gen = torch.Generator().manual_seed(0)
    certified = euclid_certified = 0
    for s in range(50):
        lam = 2.5 * s / 49
        J = quadratic_jacobian(100 + s, lam, d_total=8)
        cert = sgn_certificate(J, player_dims=(4, 4))
        euclid_certified += euclidean_certificate(J, player_dims=(4, 4)).certified
        if not cert.certified:
            continue
        certified += 1
        m = torch.diag(cert.M)
        assert true_margin(J, cert.w, (4, 4)) >= cert.alpha - 1e-10
        assert cert.h_euler <= h_stab(J) + 1e-12
        for frac in (0.25, 0.5, 0.9, 0.999):
            h = frac * cert.h_euler
            q = cert.euler_factor(h)
            T = step_matrix(J, h)
            assert metric_norm(T, m) <= q + 1e-12 and q < 1
            power = T
            for _ in range(16):
                power = power @ power
            x0 = torch.randn(8, generator=gen, dtype=F64)
            shrink = _m_norm(power @ x0, m) / _m_norm(x0, m)
            assert shrink <= q ** (2**16) * (1 + 1e-9) + 1e-300
    assert 10 <= certified < 50  # the ensemble has both outcomes
    assert euclid_certified < certified


def test_validation_names_the_field():
    with pytest.raises(ValueError, match="objective"):
        sgn_certificate(J2, player_dims=(1, 1), objective="rk5")
    with pytest.raises(ValueError, match="weights"):
        sgn_certificate(J2, player_dims=(1, 1), weights=torch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="player_dims"):
        sgn_certificate(J2)
    with pytest.raises(ValueError, match="L ="):
        sgn_margin(MU, -L2, torch.ones(2))
    with pytest.raises(ValueError, match="exactly 2"):
        two_player_band(torch.ones(3), torch.zeros(3, 3))
    with pytest.raises(ValueError, match="symmetric"):
        linear_game(torch.tensor([[1.0, 2.0], [0.0, 1.0]]), (2,))


def test_rk4_objective_maximises_alpha_over_beta():
    euler = sgn_certificate(J2, player_dims=(1, 1))
    rk4 = sgn_certificate(J2, player_dims=(1, 1), objective="rk4")
    assert rk4.certified and rk4.h_rk4 == pytest.approx(2.5 / rk4.beta)
    assert rk4.alpha / rk4.beta >= euler.alpha / euler.beta - 1e-12
    assert euler.alpha / euler.beta**2 >= rk4.alpha / rk4.beta**2 - 1e-12
