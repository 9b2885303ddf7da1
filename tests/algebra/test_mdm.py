"""Pure MDM pieces (papers/seed_generative.md G1.1, G1.3, G1.4; tests D2–D4)."""

import math

import pytest
import torch

from policylab.algebra.mdm import (
    masked_sft_loss,
    noise_levels,
    prompt_mask,
    segment_micro_losses,
    segment_start_of,
    segment_starts,
)


def test_noise_levels_keep_t_away_from_zero():
    t = noise_levels(torch.tensor([0.0, 0.5, 1.0]))
    # (1 - 1e-3) * u + 1e-3
    assert torch.allclose(t, torch.tensor([0.001, 0.5005, 1.0]), atol=1e-7)


def test_masked_sft_loss_by_hand():
    # uniform logits over V = 2: CE = ln 2 at every position.
    # row 0 (t = 0.5) masks position 0; row 1 (t = 0.25) masks both.
    # sum = ln2/0.5 + 2·ln2/0.25 = 10·ln2 over B·L = 4 tokens -> 2.5·ln 2 = 1.7328680
    logits = torch.zeros(2, 2, 2)
    targets = torch.tensor([[0, 1], [1, 1]])
    masked = torch.tensor([[True, False], [True, True]])
    loss = masked_sft_loss(logits, targets, masked, torch.tensor([0.5, 0.25]))
    assert loss.item() == pytest.approx(2.5 * math.log(2))
    # unmasked positions never matter
    logits2 = logits.clone()
    logits2[0, 1] = torch.tensor([9.0, -9.0])
    assert masked_sft_loss(logits2, targets, masked, torch.tensor([0.5, 0.25])) == loss


def test_d4_prompt_mask():
    uniforms = torch.tensor([[0.10, 0.50, 0.14, 0.90]])
    assert prompt_mask(uniforms, 0.15).nonzero()[:, 1].tolist() == [0, 2]
    valid = torch.tensor([[0, 1, 1, 1]])  # left padding is never masked
    assert prompt_mask(uniforms, 0.15, valid).nonzero()[:, 1].tolist() == [2]
    with pytest.raises(ValueError, match="prompt_mask_p"):
        prompt_mask(uniforms, 1.5)


def test_d3_segments():
    assert segment_starts(6, 4) == [0, 1, 3, 4]
    assert segment_starts(64, 8) == [0, 8, 16, 24, 32, 40, 48, 56]
    assert segment_starts(6, 1) == [0]  # d1's one_step
    assert segment_starts(6, 6) == segment_starts(6, 60) == [0, 1, 2, 3, 4, 5]  # N > S clamps
    reveal = torch.tensor([[0, 1, 2, 3, 4, 5]])
    assert segment_start_of(reveal, [0, 1, 3, 4]).tolist() == [[0, 1, 1, 3, 4, 4]]


def test_d2_segment_accumulation_is_token_mean():
    loss = torch.tensor([[0.2, 0.4, -0.1]])
    mask = torch.ones(1, 3)
    segment = torch.tensor([[0, 0, 1]])
    micro = segment_micro_losses(loss, mask, segment, 2)
    assert micro.tolist() == pytest.approx([0.4, -0.0666667], abs=1e-7)
    assert micro.mean().item() == pytest.approx(0.1666667, abs=1e-7)
    assert micro.mean().item() == pytest.approx((loss * mask).sum().item() / 3)
