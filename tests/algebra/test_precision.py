"""Importance ratios are formed in float32 or wider whatever the input dtype, and the losses
that read whole groups run under a float64 default dtype (issue #14, item 6)."""

from __future__ import annotations

import pytest
import torch
from algebra_testing import close

from policylab.algebra.catalogue import advantage_estimators, policy_losses
from policylab.algebra.options import build_options
from policylab.algebra.precision import at_least_float32
from policylab.rollouts import Rollouts

BF16 = torch.bfloat16


def test_at_least_float32_widens_half_types_and_keeps_wider_ones():
    assert at_least_float32(torch.zeros(2, dtype=BF16)).dtype == torch.float32
    assert at_least_float32(torch.zeros(2, dtype=torch.float16)).dtype == torch.float32
    assert at_least_float32(torch.zeros(2)).dtype == torch.float32
    assert at_least_float32(torch.zeros(2, dtype=torch.float64)).dtype == torch.float64


def _call(name, logprobs, old, adv, mask, *, ref=None, rollouts=None, **options):
    entry = policy_losses.entry(name)
    cfg = build_options(entry.config, options, where=f"test {name!r}")
    return entry.fn(logprobs, old, adv, mask, cfg, ref_logprobs=ref, rollouts=rollouts)


def test_gspo_clip_window_acts_on_bf16_logprobs():
    # One row of 4 tokens: old = −1 everywhere, logp = −1 + 2⁻⁷ on the first token (both exact
    # in bf16). Sequence log-ratio = 2⁻⁷/4 = 0.001953 → s = exp(0.001953) = 1.001955, above
    # 1 + ε_high = 1.0004, so with A > 0 every token is clipped. In bf16, s rounds to 1.0
    # (the spacing of bf16 near 1 is 2⁻⁷ = 0.0078) and the window never acts.
    old = torch.full((1, 4), -1.0, dtype=BF16)
    logp = old.clone()
    logp[0, 0] = -1.0 + 2**-7
    assert float(logp[0, 0]) == -0.9921875  # exact in bf16
    mask = torch.ones(1, 4, dtype=BF16)
    adv = torch.ones(1, dtype=BF16)
    for name in ("gspo", "gspo_token"):
        _, metrics = _call(name, logp, old, adv, mask, eps_low=3e-4, eps_high=4e-4)
        assert metrics["pg/clipfrac"] == 1.0, name
        _, wide = _call(name, logp.float(), old.float(), adv.float(), mask.float(), eps_low=3e-4)
        assert wide["pg/clipfrac"] == metrics["pg/clipfrac"]


def _group_batch(dtype=torch.float32):
    # 2 groups × 3 rows, 3 tokens, the last row of each group one token shorter.
    mask = torch.tensor([[1, 1, 1], [1, 1, 1], [1, 1, 0]] * 2, dtype=dtype)
    rollouts = Rollouts(
        rewards=torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0], dtype=dtype),
        response_mask=mask,
        group_ids=torch.tensor([0, 0, 0, 1, 1, 1]),
        extras={"answers": ["a", "b", "b", "c", "c", None]},
    )
    return rollouts, mask


# Every registered loss that forms an importance ratio, with the columns it reads.
RATIO_LOSSES = [
    "ppo_clip",
    "gspo",
    "gspo_token",
    "cispo",
    "reinforce",
    "rpg",
    "reg_grpo",
    "pacs",
    "p3o",
    "copo_blend",
]


@pytest.mark.parametrize("name", RATIO_LOSSES)
def test_bf16_inputs_give_the_float32_computation(name):
    # Log-probs drawn in float32 and rounded to bf16; the loss on the bf16 tensors must equal
    # the loss on the same (rounded) values held in float32, and so must its gradient.
    g = torch.Generator().manual_seed(0)
    rollouts, mask = _group_batch()
    logp32 = (-torch.rand(6, 3, generator=g) * 2).to(BF16).float()
    old32 = (logp32 + 0.01 * torch.randn(6, 3, generator=g)).to(BF16).float()
    ref32 = (logp32 + 0.02 * torch.randn(6, 3, generator=g)).to(BF16).float()
    estimate = advantage_estimators.get("copo")(
        rollouts, build_options(advantage_estimators.entry("copo").config, {}, where="test")
    )
    rollouts = rollouts.with_extras(estimate.columns)  # what copo_blend reads
    adv = estimate.advantages[:, 0].to(BF16).float()

    def run(dtype):
        lp = logp32.to(dtype).requires_grad_(True)
        loss, _ = _call(
            name,
            lp,
            old32.to(dtype),
            adv.to(dtype),
            mask.to(dtype),
            ref=ref32.to(dtype),
            rollouts=rollouts,
        )
        (grad,) = torch.autograd.grad(loss, lp)
        return loss, grad

    loss16, grad16 = run(BF16)
    loss32, grad32 = run(torch.float32)
    assert loss16.dtype == torch.float32
    close(loss16, loss32, atol=1e-7, rtol=1e-6)
    # the gradient flows back into the bf16 log-probs, so it is rounded to bf16 once
    close(grad16.float(), grad32.to(BF16).float(), atol=0, rtol=0)


@pytest.mark.parametrize("name", ["reg_grpo", "pacs", "p3o", "copo_blend"])
def test_group_losses_run_under_a_float64_default_dtype(name):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        rollouts, mask = _group_batch(torch.float64)
        logp = torch.tensor([[-1.0, -0.5, -2.0], [-0.3, -1.2, -0.7], [-0.9, -0.4, 0.0]] * 2)
        estimate = advantage_estimators.get("copo")(
            rollouts, build_options(advantage_estimators.entry("copo").config, {}, where="t")
        )
        rollouts = rollouts.with_extras(estimate.columns)  # what copo_blend reads
        adv = estimate.advantages[:, 0]
        loss, metrics = _call(name, logp, logp - 0.1, adv, mask, ref=logp + 0.05, rollouts=rollouts)
        assert loss.dtype == torch.float64
        assert torch.isfinite(loss)
        assert metrics
    finally:
        torch.set_default_dtype(previous)
