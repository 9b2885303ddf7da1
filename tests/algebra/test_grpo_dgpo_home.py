"""One home for DGPO's advantage (papers/seed_generative.md G2.1, test G3): the registered
`grpo` with bessel=False, eps = 1e-4 and clip = 5; `dgpo_advantages` calls it and gives the
numbers of its former copy to the last bit."""

from __future__ import annotations

import pytest
import torch

from policylab.algebra import generative as gen
from policylab.algebra.advantages import GRPOOptions, grpo_advantages
from policylab.rollouts import Rollouts


def _rows(rewards, groups):
    return Rollouts(rewards=rewards, response_mask=torch.ones(len(rewards), 2), group_ids=groups)


def _former_dgpo_advantages(rewards, group_ids, *, eps=1e-4, clip=5.0, scale="group"):
    """algebra/generative.dgpo_advantages before it called grpo, verbatim."""
    _, idx = torch.unique(group_ids, return_inverse=True)
    n = int(idx.max()) + 1
    count = torch.zeros(n, dtype=rewards.dtype).index_add_(0, idx, torch.ones_like(rewards))
    mean = torch.zeros(n, dtype=rewards.dtype).index_add_(0, idx, rewards) / count
    centred = rewards - mean[idx]
    var = torch.zeros(n, dtype=rewards.dtype).index_add_(0, idx, centred**2) / count
    std = var.sqrt()[idx] if scale == "group" else rewards.std(unbiased=False).expand_as(rewards)
    adv = (centred / (std + eps)).clamp(-clip, clip)
    return torch.where(var.sqrt()[idx] <= 1e-12, torch.zeros_like(adv), adv)


def test_g3_through_the_registered_grpo():
    # rewards [1, 0, 0, 0]: mean 0.25, population std √(0.1875) = 0.4330127 (Bessel 0.5);
    # A = (0.75, −0.25)/(0.4330127 + 1e-4)
    r, g = torch.tensor([1.0, 0, 0, 0], dtype=torch.float64), torch.zeros(4, dtype=torch.long)
    adv = grpo_advantages(_rows(r, g), GRPOOptions(bessel=False, eps=1e-4))
    expected = torch.tensor([1.7316509, -0.5772170, -0.5772170, -0.5772170], dtype=torch.float64)
    assert torch.allclose(adv[:, 0], expected, atol=1e-7) and torch.equal(adv[:, 0], adv[:, 1])
    bessel = grpo_advantages(_rows(r, g), GRPOOptions(eps=1e-4))  # the default: std 0.5
    assert bessel[0, 0].item() == pytest.approx(0.75 / 0.5001, abs=1e-12)
    # clip: one hit in 53 gives √52 = 7.21 unclipped, 5 clipped
    hit = torch.zeros(53, dtype=torch.float64)
    hit[0] = 1.0
    g53 = torch.zeros(53, dtype=torch.long)
    assert grpo_advantages(_rows(hit, g53), GRPOOptions(bessel=False))[0, 0] > 7.2
    assert grpo_advantages(_rows(hit, g53), GRPOOptions(bessel=False, clip=5.0))[0, 0] == 5.0


def test_defaults_are_unchanged():
    options = GRPOOptions()
    assert (options.bessel, options.clip, options.eps) == (True, 0.0, 1e-6)
    with pytest.raises(ValueError, match="clip"):
        GRPOOptions(clip=-1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", ["group", "batch"])
@pytest.mark.parametrize("seed", range(5))
def test_dgpo_advantages_equal_the_former_copy_to_the_last_bit(dtype, scale, seed):
    g = torch.Generator().manual_seed(seed)
    groups = torch.tensor([0] * 8 + [1] * 32 + [2] * 8 + [3] * 8)  # √31 > 5: group 1 clips
    rewards = torch.rand(56, generator=g, dtype=dtype) * (torch.rand(56, generator=g) < 0.4)
    rewards[:8] = 0.5  # a flat group: A = 0 (0.5 is exact: see the report on 0.3 in float32)
    rewards[8:40] = 0.0
    rewards[8] = 40.0  # a clipped row
    new = gen.dgpo_advantages(rewards, groups, scale=scale)
    assert torch.equal(new, _former_dgpo_advantages(rewards, groups, scale=scale))
    assert new.dtype == dtype and new[:8].eq(0).all() and new[8] == 5.0


def test_near_flat_groups_follow_the_house_threshold():
    """The one behaviour the move changes: a group whose std lies in (1e-12, 1e-8] counted
    as informative for the former copy; now, as everywhere in policylab, it is flat."""
    r = torch.tensor([0.0, 1e-9, 0.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    groups = torch.tensor([0, 0, 0, 0, 1, 1])
    assert gen.dgpo_advantages(r, groups)[:4].eq(0).all()
    assert _former_dgpo_advantages(r, groups)[1] > 0
