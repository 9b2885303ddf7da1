"""Ridge, OFUL and Thompson sampling (papers/seed_control_theory.md §7.4 T7.1)."""

import pytest
import torch

from policylab.search.linear_bandit import (
    inverse_norms,
    oful_scores,
    ridge_stats,
    ridge_update,
    ridge_weights,
    thompson_scores,
    thompson_weights,
)

D = torch.float64


def t(x):
    return torch.tensor(x, dtype=D)


def test_t7_1_ridge_and_oful_by_hand():
    # V = 0.1·I + [1,0][1,0]ᵀ + [1,1][1,1]ᵀ = [[2.1, 1], [1, 1.1]], det = 1.31,
    # V⁻¹ = [[1.1, −1], [−1, 2.1]]/1.31; b = 1·[1,0] + 0·[1,1] = [1, 0];
    # ŵ = [1.1, −1]/1.31 = [0.839695, −0.763359]; x = [0,1]: ‖x‖² = 2.1/1.31.
    V, b = ridge_stats(t([[1.0, 0.0], [1.0, 1.0]]), t([1.0, 0.0]), lam=0.1)
    assert torch.allclose(V, t([[2.1, 1.0], [1.0, 1.1]]), atol=1e-12)
    w = ridge_weights(V, b)
    assert torch.allclose(w, t([0.839695, -0.763359]), atol=1e-6)
    x = t([[0.0, 1.0]])
    assert inverse_norms(x, V).item() == pytest.approx(1.266117, abs=1e-6)
    assert oful_scores(x, V, w, alpha=1.0).item() == pytest.approx(0.502759, abs=1e-6)


def test_incremental_update_matches_batch_statistics():
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(7, 3, generator=g, dtype=D), torch.randn(7, generator=g, dtype=D)
    V, b = 0.5 * torch.eye(3, dtype=D), torch.zeros(3, dtype=D)
    for x_i, y_i in zip(X, y, strict=True):
        V, b = ridge_update(V, b, x_i, y_i)
    V_batch, b_batch = ridge_stats(X, y, lam=0.5)
    assert torch.allclose(V, V_batch) and torch.allclose(b, b_batch)


def test_thompson_draw_is_w_hat_plus_sigma_cholesky_transform_of_the_generator_normal():
    # w̃ − ŵ = σ·L⁻ᵀε with V = LLᵀ and ε the generator's N(0, I) draw; then
    # Lᵀ(w̃ − ŵ) = σε, which makes Cov(w̃) = σ²L⁻ᵀL⁻¹ = σ²V⁻¹.
    V, b = ridge_stats(t([[1.0, 0.0], [1.0, 1.0]]), t([1.0, 0.0]), lam=0.1)
    w = ridge_weights(V, b)
    w_tilde = thompson_weights(V, w, 0.5, torch.Generator().manual_seed(1))
    eps = torch.randn(2, generator=torch.Generator().manual_seed(1), dtype=D)
    L = torch.linalg.cholesky(V)
    assert torch.allclose(L.T @ (w_tilde - w), 0.5 * eps, atol=1e-12)
    draws = torch.stack(
        [thompson_weights(V, w, 0.5, torch.Generator().manual_seed(k)) for k in range(400)]
    )
    # the mean of 400 draws is within 4 standard errors (σ·√(V⁻¹)_ii/20 ≤ 0.04) of ŵ
    assert torch.allclose(draws.mean(0), w, atol=0.16)


def test_thompson_scale_zero_is_the_ridge_estimate_and_generator_is_reproducible():
    V, b = ridge_stats(t([[1.0, 2.0], [0.0, 1.0]]), t([1.0, -1.0]))
    w = ridge_weights(V, b)
    X = t([[1.0, 1.0], [2.0, -1.0]])
    g = torch.Generator().manual_seed(3)
    assert torch.allclose(thompson_scores(X, V, w, 0.0, g), X @ w)
    s1 = thompson_scores(X, V, w, 1.0, torch.Generator().manual_seed(5))
    s2 = thompson_scores(X, V, w, 1.0, torch.Generator().manual_seed(5))
    assert torch.equal(s1, s2) and not torch.allclose(s1, X @ w)


def test_bad_inputs_name_the_field():
    with pytest.raises(ValueError, match="lam"):
        ridge_stats(t([[1.0]]), t([1.0]), lam=0.0)
    with pytest.raises(ValueError, match="y: expected 2"):
        ridge_stats(t([[1.0], [2.0]]), t([1.0]))
    with pytest.raises(ValueError, match="alpha"):
        oful_scores(t([[1.0]]), t([[1.0]]), t([0.0]), alpha=-1.0)
