"""PolicySet: roles → policies (papers/seed_agents.md §A0.7, §A1 test 3)."""

import pytest
import torch

from policylab.models import build_model, build_tokenizer
from policylab.policies.language_model import LanguageModelPolicy
from policylab.policies.policy_set import PolicySet


def make_optimiser(module):
    opt = torch.optim.AdamW(module.parameters(), lr=1e-3)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)


@pytest.fixture(scope="module")
def policy():
    tokenizer = build_tokenizer()
    return LanguageModelPolicy(build_model(tokenizer, seed=0), tokenizer)


def test_routing_of_rows_to_policies(policy):
    """§A1 test 3: agent_ids (0, 1, 0, 1); per_role → policy 0 trains rows {0, 2}, policy 1
    rows {1, 3}; shared → one policy, every row."""
    agents = torch.tensor([0, 1, 0, 1])
    per_role = PolicySet.build(policy, 2, "per_role", make_optimiser)
    assert len(per_role) == 2
    assert per_role.rows_of(0, agents).tolist() == [0, 2]
    assert per_role.rows_of(1, agents).tolist() == [1, 3]
    shared = PolicySet.build(policy, 2, "shared", make_optimiser)
    assert len(shared) == 1 and shared.rows_of(0, agents) is None
    assert shared(0) is shared(1) is policy


def test_per_role_copies_are_independent(policy):
    per_role = PolicySet.build(policy, 2, "per_role", make_optimiser)
    first, second = per_role(0), per_role(1)
    assert first is policy and second is not policy
    assert second.engine.model is second.model  # the copy samples from itself
    weight = second.model.lm_head.weight
    with torch.no_grad():
        weight.add_(1.0)
    assert not torch.equal(weight, first.model.lm_head.weight)
    assert per_role.members[0].optimiser is not per_role.members[1].optimiser
    with pytest.raises(ValueError, match="regime"):
        PolicySet.build(policy, 2, "solo", make_optimiser)
