"""Rollouts validates on construction: a wrong shape, a non-0/1 mask or float group ids
raise ValueError naming the field (spec §0 `rollouts` fields)."""

from __future__ import annotations

import pytest
import torch

from policylab import Rollouts


def test_valid_rollouts_construct():
    Rollouts(
        rewards=torch.tensor([1.0, 0.0, 1.0, 0.0]),
        response_mask=torch.tensor([[1, 1], [1, 0], [1, 1], [0, 0]]),
        group_ids=torch.tensor([0, 0, 1, 1]),
        logprobs=torch.zeros(4, 2),
    )


def test_rewards_shape_mismatch_names_the_field_and_shapes():
    # rewards [3] against a mask of [4, 2]
    with pytest.raises(ValueError) as err:
        Rollouts(rewards=torch.zeros(3), response_mask=torch.ones(4, 2))
    message = str(err.value)
    assert "rewards" in message
    assert "3" in message and "4" in message


def test_logprobs_shape_mismatch_names_the_field():
    with pytest.raises(ValueError, match="logprobs"):
        Rollouts(rewards=torch.zeros(4), response_mask=torch.ones(4, 2), logprobs=torch.zeros(4, 3))


def test_group_ids_length_mismatch_names_the_field():
    with pytest.raises(ValueError, match="group_ids"):
        Rollouts(
            rewards=torch.zeros(4),
            response_mask=torch.ones(4, 2),
            group_ids=torch.tensor([0, 0, 1]),
        )


def test_mask_must_be_zero_or_one():
    with pytest.raises(ValueError, match="response_mask"):
        Rollouts(rewards=torch.zeros(2), response_mask=torch.tensor([[1.0, 2.0], [1.0, 0.0]]))


def test_group_ids_must_be_integer():
    with pytest.raises(ValueError, match="group_ids"):
        Rollouts(
            rewards=torch.zeros(2),
            response_mask=torch.ones(2, 2),
            group_ids=torch.tensor([0.0, 1.5]),
        )
