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


# ---- concat (generation rounds of dynamic sampling) ------------------------------------


def _round(rewards, mask, group_ids, name):
    rows = len(rewards)
    return Rollouts(
        rewards=torch.tensor(rewards),
        response_mask=torch.tensor(mask, dtype=torch.float32),
        group_ids=torch.tensor(group_ids),
        response_ids=torch.arange(1, rows * len(mask[0]) + 1).reshape(rows, -1),
        logprobs=-torch.ones(rows, len(mask[0])),
        truncated=torch.tensor([False] * rows),
        reward_parts={"acc": torch.tensor(rewards)},
        extras={"prompt_ids": [[name]] * rows},
    )


def test_concat_stacks_rows_and_pads_tokens_to_the_widest_batch():
    a = _round([1.0, 0.0], [[1, 1], [1, 0]], [0, 0], "a")  # T = 2
    b = _round([0.5], [[1, 1, 1]], [5], "b")  # T = 3
    both = Rollouts.concat([a, b])
    assert both.response_mask.tolist() == [[1, 1, 0], [1, 0, 0], [1, 1, 1]]
    # a's ids 1..4 padded with 0 in the new column; b's ids 1..3 unchanged
    assert both.response_ids.tolist() == [[1, 2, 0], [3, 4, 0], [1, 2, 3]]
    assert both.logprobs.tolist() == [[-1, -1, 0], [-1, -1, 0], [-1, -1, -1]]
    assert both.rewards.tolist() == [1.0, 0.0, 0.5]
    assert both.group_ids.tolist() == [0, 0, 5]  # kept as given
    assert both.reward_parts["acc"].tolist() == [1.0, 0.0, 0.5]
    assert both.extras["prompt_ids"] == [["a"], ["a"], ["b"]]
    assert both.truncated.tolist() == [False] * 3
    assert both.ref_logprobs is None


def test_concat_of_one_batch_is_that_batch():
    a = _round([1.0, 0.0], [[1, 1], [1, 0]], [0, 0], "a")
    same = Rollouts.concat([a])
    for name in ("rewards", "response_mask", "group_ids", "response_ids", "logprobs"):
        assert torch.equal(getattr(same, name), getattr(a, name))


def test_concat_rejects_batches_that_set_different_fields():
    a = _round([1.0], [[1]], [0], "a")
    with pytest.raises(ValueError, match="batch 1 has no logprobs"):
        Rollouts.concat([a, a.replace(logprobs=None)])
    with pytest.raises(ValueError, match="reward_parts"):
        Rollouts.concat([a, a.replace(reward_parts={})])
    with pytest.raises(ValueError, match="at least one"):
        Rollouts.concat([])
