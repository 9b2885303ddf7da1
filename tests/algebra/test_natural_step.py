"""The natural (TRPO) step: T8.2 of papers/seed_control_theory.md §8.4, CG and the line
search (algebra/natural.py)."""

from __future__ import annotations

import pytest
import torch

from policylab.algebra.natural import conjugate_gradient, line_search, natural


def identity(v: torch.Tensor) -> torch.Tensor:
    return v.clone()


def test_t8_2_natural_step():
    # ∇L = [−0.3, 0.4], F = I, damping 0.1 → F + 0.1·I = 1.1·I, δ = 0.01
    # s = −∇L/1.1 = [0.272727, −0.363636]; ½sᵀ(1.1·I)s = ½·1.1·0.206612 = 0.113636
    # multiplier √(0.113636/0.01) = 3.370999; Δθ = s/3.370999 = [0.080904, −0.107872]
    # expected improvement −∇L·Δθ = 0.3·0.080904 + 0.4·0.107872 = 0.067420
    grad = torch.tensor([-0.3, 0.4], dtype=torch.float64)
    step = natural(grad, identity, max_kl=0.01, cg_iters=10, damping=0.1)
    assert step.direction.tolist() == pytest.approx([0.272727, -0.363636], abs=1e-6)
    assert step.half_shs == pytest.approx(0.113636, abs=1e-6)
    assert step.multiplier == pytest.approx(3.370999, abs=1e-6)
    assert step.full_step.tolist() == pytest.approx([0.080904, -0.107872], abs=1e-6)
    assert step.expected_improvement == pytest.approx(0.067420, abs=1e-6)
    # the quadratic KL of the full step is exactly δ
    assert 0.5 * 1.1 * float(step.full_step @ step.full_step) == pytest.approx(0.01, abs=1e-12)


def test_conjugate_gradient_solves_an_spd_system_in_dim_steps():
    m = torch.tensor([[4.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 2.0]], dtype=torch.float64)
    b = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    x = conjugate_gradient(lambda v: m @ v, b, iters=3)
    assert torch.allclose(x, torch.linalg.solve(m, b), atol=1e-10)
    # one iteration is only the steepest-descent point along b
    x1 = conjugate_gradient(lambda v: m @ v, b, iters=1)
    assert not torch.allclose(x1, torch.linalg.solve(m, b), atol=1e-3)


def test_line_search_halves_until_the_ratio_is_met():
    # L(x) = x², x = 1, full step −4 (overshoots to 9), expected improvement 4:
    # k=0: 1 − 9 < 0; k=1: x = −1, actual 0 → rejected; k=2: x = 0, actual 1, expected 1 → ok
    loss = lambda x: float(x @ x)  # noqa: E731
    x0 = torch.tensor([1.0], dtype=torch.float64)
    x, k, ok = line_search(loss, x0, torch.tensor([-4.0], dtype=torch.float64), 4.0)
    assert ok and k == 2 and x.tolist() == [0.0]
    # an ascent step is never accepted: x unchanged
    x, k, ok = line_search(
        loss, x0, torch.tensor([1.0], dtype=torch.float64), 1.0, max_backtracks=3
    )
    assert not ok and k == 3 and x.tolist() == [1.0]


def test_bad_radius_and_damping_name_the_field():
    g = torch.ones(2, dtype=torch.float64)
    with pytest.raises(ValueError, match="max_kl = 0"):
        natural(g, identity, max_kl=0)
    with pytest.raises(ValueError, match="damping = -1"):
        natural(g, identity, damping=-1)
