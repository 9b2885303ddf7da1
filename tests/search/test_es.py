"""Antithetic ES (papers/seed_control_theory.md §7.4 T7.2)."""

import pytest
import torch

from policylab.search.es import antithetic_perturbations, es_gradient, es_step

D = torch.float64


def test_t7_2_es_step_by_hand():
    # g = ½·[(2 − 1)·[1, 0] + (1 − 3)·[0, 1]] = [0.5, −1]; α = 0.1 → Δθ = [0.05, −0.1]
    delta = torch.eye(2, dtype=D)
    g = es_gradient(torch.tensor([2.0, 1.0], dtype=D), torch.tensor([1.0, 3.0], dtype=D), delta)
    assert torch.allclose(g, torch.tensor([0.5, -1.0], dtype=D))
    theta = torch.tensor([1.0, 1.0], dtype=D)
    assert torch.allclose(es_step(theta, g, 0.1) - theta, torch.tensor([0.05, -0.1], dtype=D))


def test_es_gradient_of_a_linear_function_is_unbiased():
    # v(θ) = cᵀθ: v(θ+δ) − v(θ−δ) = 2cᵀδ, so E[g] = 2ν²c.
    c = torch.tensor([1.0, -2.0, 0.5], dtype=D)
    delta = antithetic_perturbations(200_000, 3, 0.1, torch.Generator().manual_seed(0))
    g = es_gradient(delta @ c, -(delta @ c), delta)
    # each coordinate's standard error is about 2ν²‖c‖/√N ≈ 1e-4: allow five of them
    assert torch.allclose(g, 2 * 0.01 * c, atol=5e-4)


def test_bad_shapes_and_std_are_errors():
    with pytest.raises(ValueError, match="std"):
        antithetic_perturbations(2, 3, 0.0, torch.Generator())
    with pytest.raises(ValueError, match="es_gradient"):
        es_gradient(torch.zeros(3, dtype=D), torch.zeros(3, dtype=D), torch.zeros(2, 4, dtype=D))
