"""DISK's detector and matcher distributions (policies/keypoints.py, §15.1)."""

from __future__ import annotations

import torch

from policylab.policies.keypoints import (
    UNet,
    cell_logits,
    cycle_consistent_matches,
    keypoint_logp,
    mode_keypoints,
    sample_keypoints,
)


def test_cells_are_row_major_and_proposals_map_to_pixels():
    heat = torch.full((1, 1, 16, 16), -5.0)
    heat[0, 0, 2, 13] = 4.0  # cell 1 (top right), proposal (x 5, y 2) → index 2·8 + 5
    heat[0, 0, 9, 0] = -1.0  # cell 2's best, but σ(−1) < ½: not kept by the mode
    logits = cell_logits(heat)
    assert logits.shape == (1, 4, 64)
    assert int(logits[0, 1].argmax()) == 21
    assert mode_keypoints(heat)[0].tolist() == [[13, 2]]


def test_sampled_keypoints_carry_their_log_probability():
    gen = torch.Generator().manual_seed(0)
    heat = torch.randn(2, 1, 16, 16, generator=gen, requires_grad=True)
    (xy, logp), _ = sample_keypoints(heat, torch.Generator().manual_seed(1))
    assert xy.shape[1] == 2 and len(xy) == len(logp) >= 1
    # recompute one from the cell's logits: proposal = its position in the cell
    x, y = xy[0].tolist()
    cell = (y // 8) * 2 + x // 8
    expect = keypoint_logp(
        cell_logits(heat)[0, cell], torch.tensor((y % 8) * 8 + x % 8), torch.tensor(True)
    )
    assert torch.allclose(logp[0], expect)
    logp.sum().backward()
    assert heat.grad.abs().sum() > 0


def test_sampling_follows_the_distribution():
    # one cell, logits [0, log 3, −∞…]: proposal 1 three times as likely; accept σ(·)
    heat = torch.full((1, 1, 8, 8), -1e4)
    heat[0, 0, 0, 0], heat[0, 0, 0, 1] = 0.0, float(torch.log(torch.tensor(3.0)))
    gen = torch.Generator().manual_seed(0)
    counts = torch.zeros(2)
    for _ in range(2000):
        ((xy, _),) = sample_keypoints(heat, gen)
        for x, _ in xy.tolist():
            counts[x] += 1
    # P(x=0, accept) = ¼·½ = 0.125, P(x=1, accept) = ¾·¾ = 0.5625
    assert abs(counts[0] / 2000 - 0.125) < 0.03
    assert abs(counts[1] / 2000 - 0.5625) < 0.04


def test_cycle_consistent_matches_keep_mutual_nearest_only():
    d1 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.9, 0.1]])
    d2 = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    # row 2's nearest is column 0, whose nearest is row 0: dropped
    assert cycle_consistent_matches(d1, d2).tolist() == [[0, 0], [1, 1]]
    assert cycle_consistent_matches(d1[:0], d2).shape == (0, 2)


def test_unet_shapes():
    heat, desc = UNet(desc_dim=32)(torch.zeros(2, 1, 64, 64))
    assert heat.shape == (2, 1, 64, 64) and desc.shape == (2, 32, 64, 64)
