"""model_derivative_pg (papers/seed_control_theory.md §11.3, T11.1, verified numbers)."""

from __future__ import annotations

import pytest
import torch

from policylab.algebra.model_derivative import model_derivative_pg


def scalar_case(a: float, k: float, horizon: int, feedback: bool = True) -> float:
    """x_{t+1} = a·x_t + u_t, u_t = −k·x_t + v_t, θ = v_0, J = Σ_{t=1}^{T} x_t:
    ∂J/∂v_0 = Σ_t (a − k)^{t−1}."""
    T = horizon  # noqa: N806
    A = torch.full((T, 1, 1), a, dtype=torch.float64)  # noqa: N806
    B = torch.ones(T, 1, 1, dtype=torch.float64)  # noqa: N806
    Kx = torch.full((T, 1, 1), -k, dtype=torch.float64)  # noqa: N806
    Ktheta = torch.zeros(T, 1, 1, dtype=torch.float64)  # noqa: N806
    Ktheta[0] = 1.0  # v_0 enters the control at t = 0 only
    cx = torch.ones(T + 1, 1, dtype=torch.float64)
    cx[0] = 0.0  # the sum starts at t = 1
    return float(model_derivative_pg(A, B, Kx, Ktheta, cx, feedback=feedback).grad[0])


@pytest.mark.parametrize(
    "horizon, k, real, model, rel",
    [
        (10, 0.0, 25.958682, 15.937425, 0.386046),
        (10, 0.7, 1.998047, 1.666492, 0.165940),
        (50, 0.0, 45497.190750, 1163.908529, 0.974418),
        (50, 0.7, 2.0, 1.666667, 0.166667),
    ],
)
def test_t11_1_sensitivity_error_vs_horizon(horizon, k, real, model, rel):
    # real a = 1.2, model a = 1.1: e.g. T = 10, k = 0.7: Σ 0.5^{t−1} = 2(1 − 2^{−10}) = 1.998047
    got_real = scalar_case(1.2, k, horizon)
    got_model = scalar_case(1.1, k, horizon)
    assert got_real == pytest.approx(real, abs=1e-6)
    assert got_model == pytest.approx(model, abs=1e-6)
    assert abs(got_real - got_model) / got_real == pytest.approx(rel, abs=1e-6)


def test_without_feedback_the_error_grows_like_the_open_loop_product():
    # feedback=False ignores ∂κ/∂x: the model's estimate is Σ 1.1^{t−1} whatever k is
    assert scalar_case(1.1, 0.7, 10, feedback=False) == pytest.approx(15.937425, abs=1e-6)


def test_matches_autograd_through_a_random_linear_closed_loop():
    g = torch.Generator().manual_seed(0)
    T, n, m, p = 6, 3, 2, 4  # noqa: N806
    A = 0.5 * torch.randn(T, n, n, generator=g, dtype=torch.float64)  # noqa: N806
    B = torch.randn(T, n, m, generator=g, dtype=torch.float64)  # noqa: N806
    Kx = 0.3 * torch.randn(T, m, n, generator=g, dtype=torch.float64)  # noqa: N806
    Kth = torch.randn(T, m, p, generator=g, dtype=torch.float64)  # noqa: N806
    cx = torch.randn(T + 1, n, generator=g, dtype=torch.float64)
    cu = torch.randn(T, m, generator=g, dtype=torch.float64)
    theta = torch.zeros(p, dtype=torch.float64, requires_grad=True)
    x, J = torch.zeros(n, dtype=torch.float64), 0.0  # noqa: N806
    for t in range(T):
        u = Kx[t] @ x + Kth[t] @ theta
        J = J + cx[t] @ x + cu[t] @ u  # noqa: N806
        x = A[t] @ x + B[t] @ u
    J = J + cx[T] @ x  # noqa: N806
    (expected,) = torch.autograd.grad(J, theta)
    got = model_derivative_pg(A, B, Kx, Kth, cx, cu)
    torch.testing.assert_close(got.grad, expected)
    assert got.sensitivity_norms.shape == (T + 1,) and got.sensitivity_norms[0] == 0


def test_cx_of_the_wrong_length_is_named():
    z = torch.zeros(2, 1, 1, dtype=torch.float64)
    with pytest.raises(ValueError, match="cx has 2 rows; expected T\\+1 = 3"):
        model_derivative_pg(z, z, z, z, torch.zeros(2, 1, dtype=torch.float64))
