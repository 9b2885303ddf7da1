"""Differentiable games (spec §0.3): pseudo-gradient and Jacobian by hand, block bounds on
a box for a non-quadratic game (an estimate, labelled so), the code's random LQ generator's
structure, and exact step-map stability thresholds."""

from __future__ import annotations

import math

import pytest
import torch

from policylab.games import (
    DifferentiableGame,
    block_bounds,
    box_points,
    game_jacobian,
    h_stab,
    pseudo_gradient,
    quadratic_game,
    quadratic_jacobian,
    rk4_step_matrix,
    scalar_game,
    sgn_certificate,
    step_matrix,
)

F64 = torch.float64


def _wavy_game() -> DifferentiableGame:
    # f1 = x1² + x1·sin(x2), f2 = x2² + 0.5·x1·x2 (players of one coordinate each)
    return DifferentiableGame(
        (1, 1),
        (
            lambda x: x[0] ** 2 + x[0] * torch.sin(x[1]),
            lambda x: x[1] ** 2 + 0.5 * x[0] * x[1],
        ),
    )


def test_pseudo_gradient_and_jacobian_by_hand():
    game, x = _wavy_game(), torch.tensor([1.0, 0.5], dtype=F64)
    # F = (2x1 + sin x2, 2x2 + 0.5x1) = (2 + sin 0.5, 1.5)
    assert pseudo_gradient(game, x).tolist() == pytest.approx([2 + math.sin(0.5), 1.5])
    # J = [[2, cos x2], [0.5, 2]]
    expected = [[2.0, math.cos(0.5)], [0.5, 2.0]]
    assert game_jacobian(game, x).tolist() == [pytest.approx(r) for r in expected]
    assert game_jacobian(scalar_game(), torch.zeros(2, dtype=F64)).tolist() == [
        [1.0, 10.0],
        [0.05, 1.0],
    ]


def test_block_bounds_on_a_box_are_estimates():
    game = _wavy_game()
    region = box_points(torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 1.0]), per_axis=3)
    assert region.shape == (9, 2)
    bounds = block_bounds(game, region)
    # μ = (2, 2); L12 = max |cos x2| over x2 ∈ {0, 0.5, 1} = 1; L21 = 0.5
    assert bounds.mu.tolist() == [2.0, 2.0]
    assert bounds.L.tolist() == [[0.0, 1.0], [0.5, 0.0]]
    assert not bounds.exact
    cert = sgn_certificate(game, region)
    assert cert.certified and not cert.exact and "estimate" in cert.reason


def test_quadratic_generator_matches_the_codes_structure():
    lam, J = 0.8, quadratic_jacobian(12345, 0.8)
    assert J.shape == (64, 64)
    top, bottom = J[:32, 32:] / (lam * 10.0), J[32:, :32] / (lam * 0.05)
    assert torch.allclose(top, bottom.T, atol=1e-12)
    assert float(torch.linalg.matrix_norm(top, ord=2)) == pytest.approx(1.0, abs=1e-12)
    for own in (J[:32, :32], J[32:, 32:]):  # Q = RᵀR + I: symmetric, λ_min >= 1
        assert torch.allclose(own, own.T) and float(torch.linalg.eigvalsh(own)[0]) >= 1 - 1e-12
    assert torch.equal(quadratic_jacobian(12345, 0.8), J)  # seeded
    game = quadratic_game(12345, 0.8)
    x = torch.randn(64, dtype=F64, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(pseudo_gradient(game, x), J @ x, atol=1e-10)


def test_h_stab_closed_form_agrees_with_a_scan():
    gen = torch.Generator().manual_seed(1)
    J = torch.eye(5, dtype=F64) * 2 + torch.randn(5, 5, generator=gen, dtype=F64)
    hs = h_stab(J)
    assert hs > 0
    rho = lambda h: float(torch.linalg.eigvals(step_matrix(J, h)).abs().max())  # noqa: E731
    assert rho(hs * 0.999) < 1 < rho(hs * 1.001)
    hr = h_stab(J, "rk4")
    rho4 = lambda h: float(torch.linalg.eigvals(rk4_step_matrix(J, h)).abs().max())  # noqa: E731
    assert rho4(hr * 0.999) <= 1 + 1e-12 < rho4(hr * 1.001)


def test_rk4_thresholds_of_the_classical_stability_region():
    one = torch.ones(1, 1, dtype=F64)
    assert h_stab(one, "rk4") == pytest.approx(2.785294, abs=1e-6)  # real-axis limit
    rotation = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=F64)  # eig ±i
    assert h_stab(rotation, "rk4") == pytest.approx(2 * math.sqrt(2), abs=1e-6)
    assert h_stab(rotation) == 0.0  # Euler spirals out for every h
    assert h_stab(-one, "rk4") == 0.0 and h_stab(-one) == 0.0


def test_validation():
    with pytest.raises(ValueError, match="costs"):
        DifferentiableGame((1, 1), (lambda x: x[0],))
    with pytest.raises(ValueError, match="shape"):
        pseudo_gradient(scalar_game(), torch.zeros(3, dtype=F64))
    with pytest.raises(ValueError, match="exceeds"):
        box_points(torch.zeros(20), torch.ones(20))
    with pytest.raises(ValueError, match="region"):
        sgn_certificate(_wavy_game())
    with pytest.raises(ValueError, match="method"):
        h_stab(torch.eye(2), "euler2")
