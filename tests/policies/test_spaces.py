"""policies/spaces.py encodings, policies/categorical.py's product of categoricals,
policies/encoders.py's CNN, and the errors for spaces still unsupported."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces

from policylab.policies import categorical
from policylab.policies.encoders import PartsEncoder, SmallCNN, make_encoder
from policylab.policies.mlp import make_actor_critic
from policylab.policies.spaces import (
    channels_first,
    encode,
    encode_one,
    flat_dim,
    is_image_space,
)


def test_discrete_observations_are_one_hot_from_start():
    # Discrete(3, start=1): 1 → [1, 0, 0], 3 → [0, 0, 1]
    x = encode(spaces.Discrete(3, start=1), np.array([1, 3]))
    assert x.tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    assert flat_dim(spaces.Discrete(3, start=1)) == 3


def test_multidiscrete_observations_are_one_hot_per_entry():
    # nvec (2, 3), obs (1, 2) → [0, 1 | 0, 0, 1]
    x = encode(spaces.MultiDiscrete([2, 3]), np.array([[1, 2]]))
    assert x.tolist() == [[0.0, 1.0, 0.0, 0.0, 1.0]]


def test_dict_observations_concatenate_their_keys_in_the_space_order():
    space = spaces.Dict({"a": spaces.Discrete(2), "b": spaces.Box(-1, 1, (2,))})
    keys = list(space.spaces)  # gymnasium's order (sorted for a plain dict)
    obs = {"a": np.array([1, 0]), "b": np.array([[0.5, -0.5], [0.25, 0.0]], np.float32)}
    x = encode(space, obs)
    parts = {"a": [[0.0, 1.0], [1.0, 0.0]], "b": [[0.5, -0.5], [0.25, 0.0]]}
    expected = [sum((parts[k][i] for k in keys), []) for i in range(2)]
    assert x.tolist() == expected
    assert flat_dim(space) == 4
    one = encode_one(space, {"a": 1, "b": np.array([0.5, -0.5], np.float32)})
    assert one.tolist() == expected[:1]


def test_a_flat_box_encodes_to_the_tensor_it_always_gave():
    obs = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    assert torch.equal(encode(spaces.Box(-5, 5, (3,)), obs), torch.as_tensor(obs))


def test_image_spaces_follow_sb3_is_image_space():
    assert is_image_space(spaces.Box(0, 255, (3, 8, 8), np.uint8))
    assert not is_image_space(spaces.Box(0, 255, (3, 8, 8), np.float32))  # dtype
    assert not is_image_space(spaces.Box(0, 1, (3, 8, 8), np.uint8))  # bounds
    assert not is_image_space(spaces.Box(0, 255, (64,), np.uint8))  # not 3-D
    assert channels_first(spaces.Box(0, 255, (3, 8, 8), np.uint8))
    assert not channels_first(spaces.Box(0, 255, (8, 8, 3), np.uint8))


def test_the_cnn_reads_either_channel_order_and_scales_by_1_over_255():
    torch.manual_seed(0)
    first = SmallCNN(spaces.Box(0, 255, (2, 5, 7), np.uint8))
    last = SmallCNN(spaces.Box(0, 255, (5, 7, 2), np.uint8))
    last.load_state_dict(first.state_dict())
    chw = torch.randint(0, 256, (3, 2, 5, 7)).float()
    hwc = chw.permute(0, 2, 3, 1)
    a, b = first(chw.reshape(3, -1)), last(hwc.reshape(3, -1))
    assert a.shape == (3, 64)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(first.images(chw.reshape(3, -1)), chw / 255)


def test_encoders_are_chosen_from_the_space():
    image = spaces.Box(0, 255, (6, 6, 3), np.uint8)
    assert make_encoder(spaces.Box(-1, 1, (4,))) == (None, 4)
    assert make_encoder(spaces.Dict({"a": spaces.Discrete(3), "b": spaces.Box(0, 1, (2,))})) == (
        None,
        5,
    )
    cnn, width = make_encoder(image)
    assert isinstance(cnn, SmallCNN) and width == 64
    parts, width = make_encoder(spaces.Dict({"image": image, "vec": spaces.Box(-1, 1, (2,))}))
    assert isinstance(parts, PartsEncoder) and width == 64 + 2
    x = torch.cat([torch.zeros(1, 108), torch.tensor([[0.5, -0.5]])], dim=-1)
    assert parts(x)[0, -2:].tolist() == [0.5, -0.5]  # the flat key passes through


def test_multi_categorical_log_prob_and_entropy_by_hand():
    # nvec (2, 3), uniform logits: log π = log ½ + log ⅓, H = log 2 + log 3
    logp, entropy = categorical.log_prob_entropy(torch.zeros(1, 5), torch.tensor([[1, 2]]), (2, 3))
    assert logp.item() == pytest.approx(math.log(1 / 2) + math.log(1 / 3))
    assert entropy.item() == pytest.approx(math.log(2) + math.log(3))
    # block 1 logits (0, ln 3): π(1) = 3/4; block 2 (ln 2, 0, 0): π(0) = 1/2
    logits = torch.tensor([[0.0, math.log(3), math.log(2), 0.0, 0.0]])
    logp, _ = categorical.log_prob_entropy(logits, torch.tensor([[1, 0]]), (2, 3))
    assert logp.item() == pytest.approx(math.log(3 / 4) + math.log(1 / 2))
    assert categorical.mode(logits, (2, 3)).tolist() == [[1, 0]]


def test_multi_categorical_samples_match_their_probabilities():
    logits = torch.tensor([[0.0, math.log(3), 0.0, 0.0, 5.0]]).expand(4000, -1)
    draws = categorical.sample(logits, (2, 3), torch.Generator().manual_seed(0))
    assert draws.shape == (4000, 2)
    assert draws[:, 0].float().mean().item() == pytest.approx(0.75, abs=0.03)
    assert (draws[:, 1] == 2).float().mean().item() > 0.95  # e^5 / (2 + e^5) ≈ 0.987


def test_the_policy_log_prob_of_a_multidiscrete_action_is_the_sum_over_entries():
    torch.manual_seed(0)
    policy = make_actor_critic(spaces.Discrete(4), spaces.MultiDiscrete([2, 3]))
    x = encode(spaces.Discrete(4), np.array([0, 3]))
    step = policy.sample(x, generator=torch.Generator().manual_seed(1))
    assert step.actions.shape == (2, 2)
    logits = policy.actor(x)
    by_hand = sum(
        torch.log_softmax(block, -1).gather(-1, a.unsqueeze(-1)).squeeze(-1)
        for block, a in zip(logits.split((2, 3), -1), step.actions.unbind(-1), strict=True)
    )
    torch.testing.assert_close(step.logprobs, by_hand)
    torch.testing.assert_close(policy.evaluate(x, step.actions).logprobs, by_hand)


@pytest.mark.parametrize(
    ("observation", "action", "named"),
    [
        (spaces.Text(5), spaces.Discrete(2), "Text"),
        (spaces.Dict({"t": spaces.Text(5)}), spaces.Discrete(2), "Text"),
        (spaces.Box(-1, 1, (2,)), spaces.MultiBinary(3), "MultiBinary"),
        (spaces.Box(-1, 1, (2,)), spaces.MultiDiscrete([2, 2], start=[1, 1]), "start 0"),
    ],
)
def test_unsupported_spaces_are_named(observation, action, named):
    with pytest.raises(ValueError, match=named):
        make_actor_critic(observation, action)


def test_normalize_obs_with_images_is_refused():
    with pytest.raises(ValueError, match="normalize_obs=false"):
        make_actor_critic(
            spaces.Box(0, 255, (3, 6, 6), np.uint8), spaces.Discrete(2), normalize_obs=True
        )


def test_the_mlp_only_kinds_take_one_hot_observations_and_refuse_images():
    from policylab.policies import make_flow_policy, make_pg_rainbow_policy

    policy = make_pg_rainbow_policy(spaces.Discrete(16), spaces.Discrete(4))
    assert policy.actor[0].in_features == 16
    image = spaces.Box(0, 255, (3, 6, 6), np.uint8)
    with pytest.raises(ValueError, match="no image encoder"):
        make_flow_policy(image, spaces.Box(-1, 1, (2,)))
