"""The gradient combiners of CG2A (our reading, papers/seed_control_theory.md §10)."""

import pytest
import torch

from policylab.algebra.gradient_combine import (
    CombineOptions,
    combine,
    conflict_metrics,
    equal_norm,
    gradient_combiners,
    min_norm,
    min_norm_weights,
    soft_surgery,
)

G = torch.tensor([[1.0, 0.0], [-1.0, 1.0]], dtype=torch.float64)  # g₁·g₂ = −1


def close(a, b):
    torch.testing.assert_close(a, torch.as_tensor(b, dtype=a.dtype), atol=1e-6, rtol=0)


def test_t10_1_surgery_pcgrad_and_soft():
    # κ = 1: g₁' = g₁ − (−1/‖g₂‖²=2)·g₂ = [1,0] + ½[−1,1] = [0.5, 0.5]
    #        g₂' = g₂ − (−1/‖g₁‖²=1)·g₁ = [−1,1] + [1,0] = [0, 1]
    out = soft_surgery(G, 1.0)
    close(out[0], [0.5, 0.5])
    close(out.sum(0), [0.5, 1.5])  # PCGrad's sum, against the plain sum [0, 1]
    close(G.sum(0), [0.0, 1.0])
    # κ = 0.5: g₁' = [1,0] + ¼[−1,1] = [0.75, 0.25]
    close(soft_surgery(G, 0.5)[0], [0.75, 0.25])


def test_t10_2_equal_norm():
    # norms [1, √2 = 1.414214], mean 1.207107: g₁·1.207107, g₂·1.207107/1.414214
    close(equal_norm(G), [[1.207107, 0.0], [-0.853553, 0.853553]])


def test_surgery_leaves_agreeing_gradients_and_kappa_zero_alone():
    agree = torch.tensor([[1.0, 0.2], [0.5, 1.0]], dtype=torch.float64)
    close(soft_surgery(agree, 1.0), agree)
    close(soft_surgery(G, 0.0), G)


def test_pcgrad_removes_the_conflict_for_two_gradients():
    # κ = 1 makes each surgered gradient orthogonal to the other's original
    out = soft_surgery(G, 1.0)
    assert abs(float(out[0] @ G[1])) < 1e-12
    assert abs(float(out[1] @ G[0])) < 1e-12


def test_surgery_order_is_drawn_by_the_generator():
    grads = torch.randn(4, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    a = soft_surgery(grads, 1.0, torch.Generator().manual_seed(7))
    b = soft_surgery(grads, 1.0, torch.Generator().manual_seed(7))
    close(a, b)
    # with three or more conflicting gradients the order matters for some draw
    outs = [soft_surgery(grads, 1.0, torch.Generator().manual_seed(s)) for s in range(8)]
    assert any((o - outs[0]).abs().max() > 1e-9 for o in outs)


def test_min_norm_two_gradients_closed_form():
    # w₁ = (g₂ − g₁)·g₂ / ‖g₁ − g₂‖² = ([−2,1]·[−1,1]) / 5 = 3/5, w₂ = 2/5
    w = min_norm_weights(G)
    close(w, [0.6, 0.4])
    close(min_norm(G).mean(0), 0.6 * G[0] + 0.4 * G[1])  # = [0.2, 0.4]
    close(0.6 * G[0] + 0.4 * G[1], [0.2, 0.4])


def test_min_norm_is_zero_inside_the_hull_and_no_larger_than_mean():
    opposite = torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=torch.float64)
    close(min_norm(opposite).mean(0), [0.0, 0.0])
    grads = torch.randn(5, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    w = min_norm_weights(grads, iters=200)
    assert float(w.sum()) == pytest.approx(1.0) and bool((w >= 0).all())
    assert (w @ grads).norm() <= grads.mean(0).norm() + 1e-12


def test_registered_combiners_and_their_updates():
    assert set(gradient_combiners.names()) >= {
        "mean",
        "equal_norm",
        "min_norm",
        "soft_surgery",
        "cg2a_provisional",
    }
    close(combine("mean", G), [0.0, 0.5])
    close(combine("soft_surgery", G, CombineOptions(kappa=1.0)), [0.25, 0.75])
    # cg2a = equal norm, then surgery: ĝ₁ = [1.207107, 0], ĝ₂ = [−0.853553, 0.853553];
    # dot = −1.030330, ‖ĝ₂‖² = 1.457107, ‖ĝ₁‖² = 1.457107; κ = 1:
    # ĝ₁' = ĝ₁ + 0.707107·ĝ₂ = [0.603553, 0.603553];  ĝ₂' = ĝ₂ + 0.707107·ĝ₁ = [0, 0.853553]
    close(combine("cg2a_provisional", G, CombineOptions(kappa=1.0)), [0.301777, 0.728553])


def test_conflict_metrics():
    m = conflict_metrics(G)
    assert m["combine/cos_min"] == pytest.approx(-1 / 2**0.5)
    assert m["combine/conflict_frac"] == 1.0
    assert m["combine/norm_ratio"] == pytest.approx(2**0.5)


def test_bad_options_name_the_field():
    with pytest.raises(ValueError, match="kappa=1.5"):
        CombineOptions(kappa=1.5)
    with pytest.raises(ValueError, match="solver='pcgrad'.*equal_norm"):
        CombineOptions(solver="pcgrad")
    with pytest.raises(ValueError, match="gradient combine 'nope'"):
        combine("nope", G)
    with pytest.raises(ValueError, match=r"\[K, P\]"):
        combine("mean", torch.zeros(3))
