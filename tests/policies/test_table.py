"""The tabular softmax policy: hand-computed log-probs, the bandit's draws, gradients."""

import math

import pytest
import torch

from policylab.policies import TablePolicy


def test_starts_uniform():
    policy = TablePolicy(2, 4)
    assert torch.equal(policy.probs(), torch.full((2, 4), 0.25))


def test_logprobs_and_entropy_by_hand():
    policy = TablePolicy(2, 2)
    with torch.no_grad():
        policy.logits[1] = torch.tensor([0.0, math.log(3.0)])  # state 1: π = (1/4, 3/4)
    out = policy.evaluate(torch.tensor([1, 1, 0]), torch.tensor([1, 0, 0]))
    # log(3/4), log(1/4), and state 0 is uniform: log(1/2)
    expected = torch.tensor([math.log(0.75), math.log(0.25), math.log(0.5)])
    torch.testing.assert_close(out.logprobs, expected)
    h1 = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))  # ≈ 0.5623
    torch.testing.assert_close(out.entropy, torch.tensor([h1, h1, math.log(2.0)]))
    assert out.values is None


def test_one_state_draws_exactly_as_the_bandit_did():
    policy = TablePolicy(1, 4)
    with torch.no_grad():
        policy.logits[0] = torch.tensor([0.1, -0.3, 0.7, 0.2])
    drawn = policy.sample(
        torch.zeros(64, dtype=torch.long), generator=torch.Generator().manual_seed(5)
    )
    log_pi = torch.log_softmax(policy.logits.detach()[0], dim=0)
    expected = torch.multinomial(
        log_pi.exp(), 64, replacement=True, generator=torch.Generator().manual_seed(5)
    )
    assert torch.equal(drawn.actions, expected)
    assert torch.equal(drawn.logprobs, log_pi[expected])


def test_each_state_draws_from_its_own_row():
    policy = TablePolicy(3, 3)
    with torch.no_grad():  # deterministic rows: state s picks action 2 − s
        policy.logits.copy_(torch.tensor([[-50.0, -50.0, 50.0], [-50, 50, -50], [50, -50, -50]]))
    states = torch.tensor([2, 0, 1, 0, 2, 1])
    drawn = policy.sample(states, generator=torch.Generator().manual_seed(0))
    assert drawn.actions.tolist() == (2 - states).tolist()


def test_the_gradient_reaches_only_the_visited_states():
    policy = TablePolicy(3, 2)
    policy.evaluate(torch.tensor([0, 2]), torch.tensor([1, 1])).logprobs.sum().backward()
    # d log π(1|s)/dθ[s] = onehot(1) − π(·|s) = (−1/2, 1/2) at uniform π
    expected = torch.tensor([[-0.5, 0.5], [0.0, 0.0], [-0.5, 0.5]])
    torch.testing.assert_close(policy.logits.grad, expected)


def test_an_empty_table_is_refused():
    with pytest.raises(ValueError, match="at least one"):
        TablePolicy(0, 3)
