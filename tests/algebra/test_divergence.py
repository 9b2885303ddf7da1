"""Hand-computed cases of algebra/divergence.py (papers/seed_generative.md G4.3 C1, C2;
numbers computed in float64 in the spec) and the divergences' properties."""

from __future__ import annotations

import math

import pytest
import torch

from policylab.algebra.divergence import DIVERGENCES, gaussian_divergence, rocm_loss

D = torch.float64


def _c1_delta():
    # f_θ − f_ref = [0.2, −0.4], τ_{j+1} = 0.5 → Δ = [0.1, −0.2], s = 0.5, ‖Δ‖² = 0.05
    return 0.5 * torch.tensor([[[0.2, -0.4]]], dtype=D), torch.tensor([0.5], dtype=D)


@pytest.mark.parametrize(
    ("kind", "expected"),
    # a² = 0.05/0.25 = 0.2: KL a²/2 = 0.1; H² 1 − e^{−0.025}; TV erf(√0.2/(2√2))
    [("kl", 0.1), ("hellinger_sq", 0.0246901), ("tv", 0.1769367), ("js", 0.0243946)],
)
def test_c1_divergences(kind, expected):
    delta, s = _c1_delta()
    assert gaussian_divergence(delta, s, kind).item() == pytest.approx(expected, abs=1e-7)


def test_js_quadrature_agrees_with_a_fine_grid():
    """JS of N(0, 1) and N(a, 1) by a 200,001-point Riemann sum on [−12, 12 + a]."""
    for a in (0.3, 1.0, 3.0, 6.0):
        z = torch.linspace(-12, 12 + a, 200_001, dtype=D)
        p = torch.exp(-(z**2) / 2) / math.sqrt(2 * math.pi)
        q = torch.exp(-((z - a) ** 2) / 2) / math.sqrt(2 * math.pi)
        m = (p + q) / 2
        js = 0.5 * (p * torch.log(p / m) + q * torch.log(q / m)).sum() * (z[1] - z[0])
        got = gaussian_divergence(torch.tensor([[[a, 0.0]]], dtype=D), torch.ones(1, dtype=D), "js")
        assert got.item() == pytest.approx(js.item(), abs=1e-8)


def test_c2_loss():
    # −0.7 + 0.1·(0.1 + 0.05) = −0.685
    loss = rocm_loss(torch.tensor([0.7], dtype=D), torch.tensor([[0.1, 0.05]], dtype=D), 0.1)
    assert loss.item() == pytest.approx(-0.685, abs=1e-12)
    last = rocm_loss(
        torch.tensor([0.7], dtype=D),
        torch.tensor([[0.1, 0.05]], dtype=D),
        0.1,
        torch.tensor([0.2], dtype=D),
        0.5,
    )
    assert last.item() == pytest.approx(-0.585, abs=1e-12)  # + 0.5·0.2


@pytest.mark.parametrize("kind", DIVERGENCES)
def test_zero_at_equal_means_and_finite_gradient(kind):
    delta = torch.zeros(3, 2, 4, dtype=D, requires_grad=True)
    out = gaussian_divergence(delta, torch.tensor([0.75, 0.5], dtype=D), kind)
    assert torch.equal(out, torch.zeros(3, 2, dtype=D))
    out.sum().backward()
    assert torch.isfinite(delta.grad).all()


@pytest.mark.parametrize("kind", ["kl", "hellinger_sq", "tv", "js"])
def test_monotone_in_the_distance_and_bounded(kind):
    direction = torch.tensor([0.6, -0.8], dtype=D)
    scales = torch.linspace(0.0, 2.0, 201, dtype=D)  # a = ‖Δ‖/s up to 4: no saturation
    delta = (scales[:, None] * direction).unsqueeze(1)  # [201, 1, 2]
    out = gaussian_divergence(delta, torch.tensor([0.5], dtype=D), kind).squeeze(1)
    assert bool((out.diff() > 0).all())
    if kind in ("tv", "hellinger_sq"):
        assert bool((out <= 1).all())
    if kind == "js":
        assert bool((out <= math.log(2) + 1e-12).all())


def test_smaller_std_means_larger_divergence():
    delta = torch.tensor([[[0.1, 0.1], [0.1, 0.1]]], dtype=D)
    out = gaussian_divergence(delta, torch.tensor([0.5, 0.25], dtype=D), "kl")
    assert out[0, 1].item() == pytest.approx(4 * out[0, 0].item())  # KL ∝ 1/s²


def test_bad_input_is_named():
    delta, s = _c1_delta()
    with pytest.raises(ValueError, match="kind = 'kld'; choices: kl, hellinger_sq"):
        gaussian_divergence(delta, s, "kld")
    with pytest.raises(ValueError, match="s_j must be > 0"):
        gaussian_divergence(delta, torch.zeros(1, dtype=D), "kl")
    with pytest.raises(ValueError, match=r"\[B, J, D\]"):
        gaussian_divergence(delta[0], s, "kl")
