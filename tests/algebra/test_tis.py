"""Truncated importance sampling weights and the sampler/learner log-prob gap."""

import math

import pytest
import torch

from policylab.algebra.tis import logprob_gap, truncated_is_weights


def test_weights_by_hand():
    # row 0: learner −1.0 vs sampler −1.5 → exp(0.5) = 1.6487 (under C = 2)
    #        learner −0.1 vs sampler −2.0 → exp(1.9) = 6.686 → capped at 2
    #        learner −3.0 vs sampler −2.0 → exp(−1) = 0.3679
    # row 1: one valid token −2 vs −2 → 1; then padding (junk values) → 0
    learner = torch.tensor([[-1.0, -0.1, -3.0], [-2.0, 50.0, float("nan")]])
    sampler = torch.tensor([[-1.5, -2.0, -2.0], [-2.0, -50.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    w = truncated_is_weights(learner, sampler, mask, cap=2.0)
    expected = torch.tensor([[math.exp(0.5), 2.0, math.exp(-1.0)], [1.0, 0.0, 0.0]])
    torch.testing.assert_close(w, expected)


def test_weights_are_detached_and_one_on_the_same_policy():
    learner = torch.randn(3, 5, requires_grad=True)
    w = truncated_is_weights(learner, learner.detach().clone(), torch.ones(3, 5), cap=1.5)
    assert not w.requires_grad
    torch.testing.assert_close(w, torch.ones(3, 5))


def test_weights_never_exceed_the_cap():
    torch.manual_seed(0)
    w = truncated_is_weights(3 * torch.randn(4, 9), 3 * torch.randn(4, 9), torch.ones(4, 9), 1.2)
    assert float(w.max()) == pytest.approx(1.2) and float(w.min()) > 0  # float32(1.2)


def test_a_cap_of_zero_is_refused():
    with pytest.raises(ValueError, match="tis_cap"):
        truncated_is_weights(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), 0.0)


def test_gap_by_hand():
    # |−1 − (−1.5)| = 0.5, |−0.1 − (−2)| = 1.9, padding ignored → mean 1.2, max 1.9
    learner = torch.tensor([[-1.0, -0.1, 9.0]])
    sampler = torch.tensor([[-1.5, -2.0, 0.0]])
    mean, biggest = logprob_gap(learner, sampler, torch.tensor([[1.0, 1.0, 0.0]]))
    assert mean == pytest.approx(1.2) and biggest == pytest.approx(1.9)
    assert logprob_gap(learner, sampler, torch.zeros(1, 3)) == (0.0, 0.0)
