"""The digit rewards of rewards/generated.py (papers/seed_generative.md G0.6), by hand with a
stub classifier whose logits are the first 10 pixels, so every number can be checked."""

from __future__ import annotations

import math

import pytest
import torch

from policylab.rewards import generated as gen


class Stub(torch.nn.Module):
    """logits = x[:, :10]; features = x (the similarity's features)."""

    def forward(self, x):
        return x[:, :10]

    def features(self, x):
        return x


def onehot(labels):
    return torch.nn.functional.one_hot(torch.tensor(labels), 10).float()


def test_digit_prob_by_hand_clamps_inside_the_reward():
    x = torch.zeros(2, 64)
    x[0, 0] = 2.0  # clamped to 1: logits [1, 0, …, 0] → p(0) = e / (e + 9)
    x[1, 3] = 0.5  # inside the box: p(3) = e^0.5 / (e^0.5 + 9)
    x.requires_grad_(True)
    p = gen.score("digit_prob", x, onehot([0, 3]), classifier=Stub())
    e, h = math.e, math.exp(0.5)
    assert torch.allclose(p, torch.tensor([e / (e + 9), h / (h + 9)]), atol=1e-6)
    p.sum().backward()
    # the clamped pixel has no gradient; the one inside the box has ∂p/∂z = p(1 − p)
    assert x.grad[0, 0] == 0.0
    assert x.grad[1, 3] == pytest.approx(h / (h + 9) * (1 - h / (h + 9)), abs=1e-6)
    logp = gen.score("digit_logprob", x.detach(), onehot([0, 3]), classifier=Stub())
    assert torch.allclose(logp, p.detach().log(), atol=1e-6)


def test_heldout_is_not_for_training_and_similarity_is_a_cosine():
    with pytest.raises(ValueError, match="heldout_digit_prob.*not differentiable"):
        gen.get_reward("heldout_digit_prob", need_gradient=True)
    assert gen.get_reward("digit_prob", need_gradient=True).differentiable
    refs = torch.zeros(2, 64)
    refs[0, 0], refs[1, 1] = 1.0, 1.0  # mean feature (½, ½, 0, …)
    x = torch.zeros(3, 64)
    x[0, 0], x[1, :2], x[2, 5] = 1.0, 1.0, 1.0  # cos 1/√2, 1, 0
    s = gen.score("digit_similarity", x, None, refs=refs, classifier=Stub())
    assert torch.allclose(s, torch.tensor([1 / math.sqrt(2), 1.0, 0.0]), atol=1e-6)


def test_bad_shapes_and_nan_are_errors_that_name_the_reward():
    stub = Stub()
    with pytest.raises(ValueError, match=r"digit_prob scores 8×8 digits \[B, 64\]; got \(3, 2\)"):
        gen.score("digit_prob", torch.zeros(3, 2), onehot([0, 1, 2]), classifier=stub)
    with pytest.raises(ValueError, match=r"digit_prob needs one-hot labels cond \[B, 10\]"):
        gen.score("digit_prob", torch.zeros(3, 64), None, classifier=stub)
    with pytest.raises(ValueError, match="heldout_digit_prob needs one-hot labels"):
        gen.score("heldout_digit_prob", torch.zeros(3, 64), onehot([0, 1]), classifier=stub)
    with pytest.raises(ValueError, match="digit_similarity needs refs"):
        gen.score("digit_similarity", torch.zeros(3, 64), None, refs=torch.zeros(0, 64))
    x = torch.zeros(2, 64)
    x[1, 0] = float("nan")
    with pytest.raises(ValueError, match=r"reward 'digit_prob' returned 1 non-finite.*rows \[1\]"):
        gen.score("digit_prob", x, onehot([0, 1]), classifier=stub)
