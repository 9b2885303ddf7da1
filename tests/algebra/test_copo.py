"""COPO (spec §13): the spec's hand case (global advantage, consistency entropy, weights and
the effective advantages of every mode, the forced mode included), the consistency
coefficient, edge cases (one prompt, equal prompts, NaN rewards, missing answers, missing
extras), and properties (the estimator is GRPO, the blend reduces to PPO dual-clip,
micro-batching is exact)."""

from __future__ import annotations

import math

import pytest
import torch
from algebra_testing import PROPERTY, close, grad_of, ragged_batches
from hypothesis import given
from hypothesis import strategies as st

import policylab
from policylab.algebra.aggregate import global_normaliser
from policylab.algebra.copo import (
    COPOLossOptions,
    answer_entropy,
    copo_globals,
    copo_row_weights,
)
from policylab.rollouts import Rollouts

F64 = torch.float64

# Spec test fixture: three groups of G = 4 (γ = 5, ρ = 1).
#   q0 R = [1,1,1,1], answers 5,5,5,5;  q1 R = [1,0,0,0], answers 3,4,4,7;
#   q2 R = [0,0,0,0], answers 1,2,1,2.
# A^loc: q1 mean 0.25, Bessel std sqrt((0.5625 + 3·0.0625)/3) = 0.5 →
#   [0.75, −0.25 ×3]/(0.5 + 1e-6) = [1.499997, −0.499999 ×3]; q0, q2 equal rewards → 0.
# Prompt means [1, 0.25, 0]: mean 5/12, unbiased std sqrt(((7/12)² + (1/6)² + (5/12)²)/2)
#   = 0.520416 → A^glob = [0.583333, −0.166667, −0.416667]/(0.520416 + 1e-6)
#   = [1.120895, −0.320256, −0.800639].
# H (bits) = [0, −(¼log2¼·2 + ½log2½) = 1.5, 1.0] → w = σ(5(H − 1)) = [σ(−5), σ(2.5), σ(0)]
#   = [0.006693, 0.924142, 0.5].
R = [1.0] * 4 + [1.0, 0.0, 0.0, 0.0] + [0.0] * 4
ANSWERS = ["5"] * 4 + ["3", "4", "4", "7"] + ["1", "2", "1", "2"]
GROUPS = [0] * 4 + [1] * 4 + [2] * 4
A_LOC = [0.0] * 4 + [1.499997, -0.499999, -0.499999, -0.499999] + [0.0] * 4
A_GLOB = [1.120895] * 4 + [-0.320256] * 4 + [-0.800639] * 4
# Effective advantage w_i·A^loc_i + (1 − w_i)·A^glob per mode (ratio 1):
#   soft_with_zero: q0 R ≠ 0 → w = 0.006693: 0.993307·1.120895 = 1.113393; q1 row 0
#     0.924142·1.499997 + 0.075858·(−0.320256) = 1.361916, R = 0 rows → w = 0 → −0.320256;
#     q2 R = 0 → −0.800639.
#   soft_with_forced: q0 A^loc = 0 → forced global 1.120895; q1 rows keep w = 0.924142:
#     row 0 1.361916, others 0.924142·(−0.499999) + 0.075858·(−0.320256) = −0.486364;
#     q2 forced global −0.800639.
#   only_soft: q0 1.113393; q1 1.361916, −0.486364; q2 0.5·(−0.800639) = −0.400320.
#   only_forced: q0 1.120895; q1 A^loc itself; q2 −0.800639.
#   only_zero: q0 w = 1 → A^loc = 0; q1 [1.499997, −0.320256 ×3]; q2 −0.800639.
EFFECTIVE = {
    "soft_with_zero": [1.113393] * 4 + [1.361916] + [-0.320256] * 3 + [-0.800639] * 4,
    "soft_with_forced": [1.120895] * 4 + [1.361916] + [-0.486364] * 3 + [-0.800639] * 4,
    "only_soft": [1.113393] * 4 + [1.361916] + [-0.486364] * 3 + [-0.400320] * 4,
    "only_forced": [1.120895] * 4 + A_LOC[4:8] + [-0.800639] * 4,
    "only_zero": [0.0] * 4 + [1.499997] + [-0.320256] * 3 + [-0.800639] * 4,
    "only_global": A_GLOB,
    "no_global": A_LOC,
}


def spec_batch(T: int = 2, **extras) -> Rollouts:
    return Rollouts(
        rewards=torch.tensor(R, dtype=F64),
        response_mask=torch.ones(12, T, dtype=F64),
        group_ids=torch.tensor(GROUPS),
        extras={"answers": list(ANSWERS), **extras},
    )


def blend(mode: str, rollouts: Rollouts, advantages, logprobs, old=None, **overrides):
    loss = policylab.policy_loss("copo_blend", mode=mode, **overrides)
    return loss(
        logprobs=logprobs,
        old_logprobs=logprobs.detach() if old is None else old,
        advantages=advantages,
        response_mask=rollouts.response_mask,
        rollouts=rollouts,
    )


def copo(b):
    """COPO's advantages and the batch with the estimator's columns added (the estimator
    returns them; it never writes into its input)."""
    estimate = policylab.advantages("copo").estimate(b)
    return estimate.advantages, b.with_extras(estimate.columns)


def test_the_estimator_returns_its_columns_and_leaves_its_input_alone():
    b = spec_batch()
    before = dict(b.extras)
    estimate = policylab.advantages("copo").estimate(b)
    assert b.extras.keys() == before.keys()
    assert set(estimate.columns) == {"copo_A_glob", "copo_H"}
    close(estimate.columns["copo_A_glob"], A_GLOB, atol=1e-6)
    close(policylab.advantages("copo")(b), estimate.advantages, atol=0)


# ----------------------------------------------------------------------- spec case (§13)
def test_spec_local_and_global_advantages_and_entropy():
    b = spec_batch()
    a, b = copo(b)
    close(a, torch.tensor(A_LOC, dtype=F64)[:, None].expand(12, 2), atol=1e-6)
    close(b.extras["copo_A_glob"], A_GLOB, atol=1e-6)
    close(b.extras["copo_H"], [0.0] * 4 + [1.5] * 4 + [1.0] * 4, atol=1e-7)
    w = copo_row_weights(
        b.extras["copo_H"], b.rewards, torch.ones(12, dtype=bool), COPOLossOptions(mode="only_soft")
    )
    close(w[[0, 4, 8]], [0.006693, 0.924142, 0.5], atol=1e-6)


@pytest.mark.parametrize("mode", list(EFFECTIVE))
def test_spec_effective_advantages_per_mode(mode):
    # At ratio 1 no clip is active, so with token-sum d loss / d logp[i,t] = −(effective A_i),
    # and with token-mean over equal lengths the loss is −mean(effective A).
    b = spec_batch()
    a, b = copo(b)
    lp = torch.zeros(12, 2, dtype=F64, requires_grad=True)
    loss, _ = blend(mode, b, a, lp, loss_agg_mode="token-sum")
    expected = torch.tensor(EFFECTIVE[mode], dtype=F64)
    close(-grad_of(loss, lp), expected[:, None].expand(12, 2), atol=2e-6)
    loss, _ = blend(mode, b, a, lp, loss_agg_mode="token-mean")
    close(float(loss.detach()), -float(expected.mean()), atol=2e-6)


def test_forced_mode_sends_equal_reward_groups_to_the_global_loss():
    # soft_with_forced: q0 and q2 have A^loc = 0, so w = 0 there whatever H says.
    b = spec_batch()
    a, b = copo(b)
    lp = torch.zeros(12, 2, dtype=F64, requires_grad=True)
    _, m = blend("soft_with_forced", b, a, lp)
    # w = [0 ×4, 0.924142 ×4, 0 ×4]
    close(m["copo/w_mean"], 0.924142 / 3, atol=1e-6)
    close(m["copo/w_max"], 0.924142, atol=1e-6)
    assert m["copo/w_min"] == 0.0
    close(m["copo/frac_groups_identical"], 2 / 3, atol=1e-12)
    close(m["copo/frac_rows_zero_reward"], 7 / 12, atol=1e-12)
    close(m["copo/H_mean"], 2.5 / 3, atol=1e-7)
    close(m["copo/A_glob_std"], 1.0, atol=1e-5)  # standardised across the three prompts


def test_consistency_coefficient():
    # λ_G = (1 − 1/4)/log2 4 = 0.375; R^glob = mean·(1 − 0.375·H):
    # q0 1·1 = 1; q1 0.25·(1 − 0.5625) = 0.109375; q2 0.
    found = copo_globals(
        torch.tensor(R, dtype=F64), torch.tensor(GROUPS), ANSWERS, consistency_coef=True
    )
    close(found.R_glob[[0, 4, 8]], [1.0, 0.109375, 0.0], atol=1e-7)


def test_dual_clip_applies_to_the_global_loss():
    # only_global, A^glob = −0.800639 on q2, ratio 4 > c = 3: the loss is capped at
    # −c·A = 2.401917 per token and carries no gradient; clipped rows at ratio 1.5 > 1.2
    # with A^glob > 0 (q0): max(−1.5A, −1.2A) = −1.2A, no gradient either.
    b = spec_batch(T=1)
    a, b = copo(b)
    old = torch.zeros(12, 1, dtype=F64)
    lp = old.clone()
    lp[8:] = math.log(4.0)
    lp[:4] = math.log(1.5)
    lp.requires_grad_(True)
    loss, m = blend("only_global", b, a, lp, old=old, loss_agg_mode="token-sum")
    g = grad_of(loss, lp)
    assert (g[8:] == 0).all() and (g[:4] == 0).all()
    expected = 3 * 0.800639 * 4 - 1.2 * 1.120895 * 4 - 4 * (-0.320256)
    close(float(loss.detach()), expected, atol=1e-5)
    # clip fraction counts the PPO clip only (verl): q0's four rows
    close(m["copo/clipfrac_global"], 4 / 12, atol=1e-12)


# ----------------------------------------------------------------------------- edge cases
def test_answer_entropy():
    assert answer_entropy(["a"] * 6) == pytest.approx(0.0, abs=1e-7)
    assert answer_entropy(list("abcdef")) == pytest.approx(math.log2(6), abs=1e-6)
    # None is one class of its own: [None, None, "1", "1"] → 1 bit
    assert answer_entropy([None, None, "1", "1"]) == pytest.approx(1.0, abs=1e-7)
    assert answer_entropy([1, "1"]) == pytest.approx(0.0, abs=1e-7)  # compared as strings


def test_one_prompt_or_equal_prompts_give_zero_global_advantage():
    one = copo_globals(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), ["1", "2"])
    assert (one.A_glob == 0).all()
    equal = copo_globals(
        torch.tensor([1.0, 0.0, 0.0, 1.0]), torch.tensor([0, 0, 1, 1]), ["1", "2", "3", "3"]
    )
    assert (equal.A_glob == 0).all()


def test_nan_reward_is_left_out():
    # Group 0: R = [1, NaN] → mean 1 over the scorable row; group 1: R = [0, 0] → 0.
    # A^glob = ±0.5/(sqrt(0.5) + 1e-6) = ±0.707106; the NaN row gets 0.
    found = copo_globals(
        torch.tensor([1.0, math.nan, 0.0, 0.0], dtype=F64),
        torch.tensor([0, 0, 1, 1]),
        ["1", None, "2", "2"],
    )
    close(found.A_glob, [0.7071058, 0.0, -0.7071058, -0.7071058], atol=1e-6)


def test_missing_answers_is_a_clear_error():
    b = spec_batch()
    del b.extras["answers"]
    with pytest.raises(ValueError, match=r'extras\["answers"\]'):
        policylab.advantages("copo")(b)
    with pytest.raises(ValueError, match="one per row"):
        copo_globals(torch.zeros(3), torch.zeros(3, dtype=torch.long), ["1"])


def test_loss_without_the_estimator_s_columns_is_a_clear_error():
    b = spec_batch()
    lp = torch.zeros(12, 2, dtype=F64, requires_grad=True)
    with pytest.raises(ValueError, match="copo_A_glob.*rollouts="):
        blend("soft_with_zero", b, torch.zeros(12), lp)
    loss = policylab.policy_loss("copo_blend")
    with pytest.raises(ValueError, match="copo_A_glob"):
        loss(
            logprobs=lp, old_logprobs=lp, advantages=torch.zeros(12), response_mask=b.response_mask
        )


@pytest.mark.parametrize(
    ("field", "value"),
    [("mode", "soft"), ("gamma", -1.0), ("dual_clip_c", 1.0), ("eps_low", 2.0)],
)
def test_loss_options_are_validated(field, value):
    with pytest.raises(ValueError, match=field):
        policylab.policy_loss("copo_blend", **{field: value})


def test_defaults_follow_run_copo_sh():
    o = policylab.policy_loss("copo_blend").options
    assert (o.gamma, o.rho, o.mode, o.eps_low, o.eps_high, o.dual_clip_c, o.loss_agg_mode) == (
        5.0,
        1.0,
        "soft_with_zero",
        0.2,
        0.2,
        3.0,
        "seq-mean-token-mean",
    )
    with pytest.raises(ValueError, match="eps"):
        policylab.advantages("copo", eps=-1.0)


# --------------------------------------------------------------------------- properties
def _random(ragged, n_groups, n_answers):
    gen = ragged.gen()
    B, T = ragged.shape
    rollouts = Rollouts(
        rewards=torch.randint(0, 2, (B,), generator=gen).to(F64),
        response_mask=ragged.mask,
        group_ids=torch.randint(0, n_groups, (B,), generator=gen),
        extras={"answers": [str(a) for a in torch.randint(0, n_answers, (B,), generator=gen)]},
    )
    old = -torch.rand(B, T, generator=gen, dtype=F64)
    logp = old + 0.3 * torch.randn(B, T, generator=gen, dtype=F64)
    return rollouts, old, logp


@PROPERTY
@given(ragged=ragged_batches(max_rows=8), n_groups=st.integers(1, 4), n_answers=st.integers(1, 4))
def test_the_estimator_is_grpo_and_the_globals_are_standardised(ragged, n_groups, n_answers):
    b, _, _ = _random(ragged, n_groups, n_answers)
    a, b = copo(b)
    close(a, policylab.advantages("grpo")(b), atol=0.0)
    H, A_glob = b.extras["copo_H"], b.extras["copo_A_glob"]
    sizes = torch.bincount(torch.unique(b.group_ids, return_inverse=True)[1])
    assert (H > -1e-7).all() and (H <= torch.log2(sizes.max().to(F64)) + 1e-7).all()
    per_prompt = torch.stack([A_glob[b.group_ids == g][0] for g in b.group_ids.unique()])
    close(float(per_prompt.mean()), 0.0, atol=1e-9)


@PROPERTY
@given(ragged=ragged_batches(max_rows=8), n_groups=st.integers(1, 4), n_answers=st.integers(1, 4))
def test_no_global_and_only_global_are_ppo_dual_clip(ragged, n_groups, n_answers):
    b, old, logp = _random(ragged, n_groups, n_answers)
    a, b = copo(b)
    ppo = policylab.policy_loss("ppo_clip", dual_clip_c=3.0, loss_agg_mode="seq-mean-token-mean")
    glob = b.extras["copo_A_glob"][:, None] * b.response_mask
    for mode, advantages in (("no_global", a), ("only_global", glob)):
        lp = logp.clone().requires_grad_(True)
        ours, _ = blend(mode, b, a, lp, old=old)
        lp2 = logp.clone().requires_grad_(True)
        theirs, _ = ppo(lp2, old, advantages, b.response_mask)
        close(ours, theirs.detach(), atol=1e-12)
        close(grad_of(ours, lp), grad_of(theirs, lp2), atol=1e-12)


@PROPERTY
@given(
    ragged=ragged_batches(max_rows=8),
    n_groups=st.integers(1, 4),
    n_answers=st.integers(1, 4),
    mode=st.sampled_from(list(EFFECTIVE)),
    agg=st.sampled_from(["token-mean", "seq-mean-token-mean", "token-sum"]),
    split=st.integers(1, 7),
)
def test_micro_batching_does_not_change_the_gradient(ragged, n_groups, n_answers, mode, agg, split):
    # The estimator runs once on the whole batch; each micro-batch carries its rows' extras.
    b, old, logp = _random(ragged, n_groups, n_answers)
    a, b = copo(b)
    B = len(b)
    norm = global_normaliser(b.response_mask, agg)
    lp = logp.clone().requires_grad_(True)
    whole = policylab.policy_loss("copo_blend", mode=mode, loss_agg_mode=agg)(
        logprobs=lp,
        old_logprobs=old,
        advantages=a,
        response_mask=b.response_mask,
        rollouts=b,
        normaliser=norm,
    )[0]
    total = torch.zeros((), dtype=F64)
    lp2 = logp.clone().requires_grad_(True)
    for rows in torch.arange(B).split(min(split, B)):
        part = b.select(rows)
        loss, _ = policylab.policy_loss("copo_blend", mode=mode, loss_agg_mode=agg)(
            logprobs=lp2[rows],
            old_logprobs=old[rows],
            advantages=a[rows],
            response_mask=part.response_mask,
            rollouts=part,
            normaliser=norm,
        )
        total = total + loss
    close(total, whole.detach(), atol=1e-12)
    close(grad_of(total, lp2), grad_of(whole, lp), atol=1e-12)


@PROPERTY
@given(ragged=ragged_batches(max_rows=8), n_groups=st.integers(1, 4), level=st.integers(0, 1))
def test_equal_rewards_everywhere_give_no_gradient(ragged, n_groups, level):
    # Every group has the same rewards and every prompt the same mean: A^loc = A^glob = 0.
    b, old, logp = _random(ragged, n_groups, 3)
    b = b.replace(rewards=torch.full((len(b),), float(level), dtype=F64))
    a, b = copo(b)
    lp = logp.clone().requires_grad_(True)
    loss, _ = blend("soft_with_zero", b, a, lp, old=old)
    assert (grad_of(loss, lp) == 0).all()
