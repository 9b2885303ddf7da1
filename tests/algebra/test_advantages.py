"""Advantage estimators (spec §1.3, §2.1–§2.3, §2.6): GRPO (group/batch/none), Dr. GRPO,
RLOO, REINFORCE++ (plain and baseline), GAE; NaN rewards; and properties over random ragged
batches (equal rewards give zero, masked positions are zero and never matter, group shifts)."""

from __future__ import annotations

import math

import pytest
import torch
from algebra_testing import OLP, PROPERTY, REF, M, close, garbage_like, ragged_batches
from hypothesis import given
from hypothesis import strategies as st

import policylab
from policylab.algebra.advantages import gae_returns

F64 = torch.float64


def adv(name, **overrides):
    return policylab.advantages(f"component:{name}", **overrides)


# ------------------------------------------------------------------------- GRPO (§1.3)


def test_t1_1_grpo_group():
    # R = [1,0,0,1]: mean 0.5; Bessel σ = sqrt(4·0.25/3) = sqrt(1/3) = 0.5773502692;
    # A = ±0.5/(0.5773502692 + 1e-6) = ±0.8660239038
    a = adv("grpo")(
        rewards=[1.0, 0.0, 0.0, 1.0], group_ids=[0, 0, 0, 0], response_mask=torch.ones(4, 1)
    )
    assert a.shape == (4, 1)
    close(a[:, 0], [0.8660239038, -0.8660239038, -0.8660239038, 0.8660239038], atol=1e-6)


# T1.2, R = [1,0,1 | 0.5,0.5], groups [0,0,0 | 1,1]. Group 0: mean 2/3, deviations
# [1/3, −2/3, 1/3]; σ_0 = sqrt((1/9+4/9+1/9)/2) = sqrt(1/3) = 0.5773502692. Group 1 has zero
# variance → exactly 0.
#   group: (1/3)/(0.5773502692+1e-6) = 0.5773492692, (−2/3)/(…) = −1.1546985384
#   batch: S = sample std of raw R over all 5 rows: mean 0.6, Σ dev² = .16+.36+.16+.01+.01 = .7,
#          S = sqrt(.7/4) = 0.4183300133 → (1/3)/(S+1e-6) = 0.7968171681, −1.5936343363
#   none:  the deviations themselves [1/3, −2/3, 1/3, 0, 0]
T1_2 = {
    "group": [0.5773492692, -1.1546985384, 0.5773492692, 0.0, 0.0],
    "batch": [0.7968171681, -1.5936343363, 0.7968171681, 0.0, 0.0],
    "none": [1 / 3, -2 / 3, 1 / 3, 0.0, 0.0],
}


@pytest.mark.parametrize("scale", list(T1_2))
def test_t1_2_grpo_scales(scale):
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.5, 0.5], dtype=F64)
    group_ids = torch.tensor([0, 0, 0, 1, 1])
    per_row = adv("grpo", scale=scale)(rewards=rewards, group_ids=group_ids)
    assert per_row.shape == (5,)
    close(per_row, T1_2[scale], atol=1e-9)
    assert per_row[3] == 0 and per_row[4] == 0  # zero-variance group: exactly 0
    # with a mask the per-row value is broadcast to the valid tokens
    mask = torch.tensor([[1, 1], [1, 0], [1, 1], [0, 0], [1, 1]], dtype=F64)
    tokens = adv("grpo", scale=scale)(rewards=rewards, group_ids=group_ids, response_mask=mask)
    close(tokens, per_row[:, None] * mask, atol=1e-9)


def test_t1_2_group_of_two_and_singleton():
    # G=2, R=[1,0]: σ = sqrt(0.5) = 0.7071067812 → 0.5/(0.7071067812+1e-6) = 0.7071057812.
    # The third row is alone in its group → 0.
    a = adv("grpo")(rewards=[1.0, 0.0, 5.0], group_ids=[0, 0, 1])
    close(a, [0.7071057812, -0.7071057812, 0.0], atol=1e-6)


def test_group_ids_none_means_every_row_alone():
    for name in ["grpo", "dr_grpo", "rloo"]:
        a = adv(name)(rewards=[1.0, 0.0, 3.0])
        close(a, [0.0, 0.0, 0.0], atol=0.0)


def test_grpo_eps_override():
    # eps=0.5 with T1.1: 0.5/(0.5773502692 + 0.5) = 0.4641016151
    a = adv("grpo", eps=0.5)(rewards=[1.0, 0.0, 0.0, 1.0], group_ids=[0, 0, 0, 0])
    close(a, [0.4641016151, -0.4641016151, -0.4641016151, 0.4641016151], atol=1e-6)


# ------------------------------------------------------------------- Dr. GRPO (§2.1)


@pytest.mark.parametrize(("name", "overrides"), [("grpo", {"scale": "none"}), ("dr_grpo", {})])
def test_t2_1_centred_rewards(name, overrides):
    # group 0 [1,0,0,1]: mean 0.5 → [0.5, −0.5, −0.5, 0.5]; group 1 [3,1,2]: mean 2 → [1, −1, 0]
    a = adv(name, **overrides)(rewards=[1, 0, 0, 1, 3, 1, 2], group_ids=[0, 0, 0, 0, 1, 1, 1])
    close(a, [0.5, -0.5, -0.5, 0.5, 1.0, -1.0, 0.0], atol=1e-6)


# ----------------------------------------------------------------------- RLOO (§2.2)


def test_t2_3_rloo():
    # A_i = R_i − mean of the other three: 1 − 1/3 = 2/3; 0 − 2/3 = −2/3 (= 4/3 × T2.1)
    a = adv("rloo")(rewards=[1.0, 0.0, 0.0, 1.0], group_ids=[0, 0, 0, 0])
    close(a, [2 / 3, -2 / 3, -2 / 3, 2 / 3], atol=1e-6)


def test_t2_4_rloo_with_singleton():
    # [3,1,2]: 3 − (1+2)/2 = 1.5; 1 − (3+2)/2 = −1.5; 2 − (3+1)/2 = 0; the singleton → 0
    a = adv("rloo")(rewards=[3.0, 1.0, 2.0, 5.0], group_ids=[0, 0, 0, 1])
    close(a, [1.5, -1.5, 0.0, 0.0], atol=1e-6)


def test_rloo_is_g_over_g_minus_1_times_centring():
    # groups of sizes 4 and 2: factors 4/3 and 2/1 (so not interchangeable with dr_grpo)
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 3.0, 1.0], dtype=F64)
    g = torch.tensor([0, 0, 0, 0, 1, 1])
    centred = adv("dr_grpo")(rewards=r, group_ids=g)
    factor = torch.tensor([4 / 3] * 4 + [2.0] * 2, dtype=F64)
    close(adv("rloo")(rewards=r, group_ids=g), centred * factor, atol=1e-12)


# ------------------------------------------------------------------ NaN rewards (§1.3, §2.2)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # stats over the scorable [1,0,0,1] (T1.1); the NaN row gets 0
        ("grpo", [0.8660239038, -0.8660239038, 0.0, -0.8660239038, 0.8660239038]),
        ("dr_grpo", [0.5, -0.5, 0.0, -0.5, 0.5]),
        # sibling mean over scorable siblings only: 1 − (0+0+1)/3 = 2/3
        ("rloo", [2 / 3, -2 / 3, 0.0, -2 / 3, 2 / 3]),
    ],
)
def test_nan_reward_is_left_out(name, expected):
    rewards = torch.tensor([1.0, 0.0, math.nan, 0.0, 1.0], dtype=F64)
    mask = torch.ones(5, 2, dtype=F64)
    a = adv(name)(rewards=rewards, group_ids=torch.zeros(5, dtype=torch.long), response_mask=mask)
    assert torch.isfinite(a).all()
    close(a, torch.tensor(expected, dtype=F64)[:, None].expand(5, 2), atol=1e-6)


# ------------------------------------------------------------------- REINFORCE++ (§2.3)


def test_t2_5_reinforce_pp():
    # k1 = OLP − REF = [[−0.1, 0.1, 0.3], [0.2, 0.1, ·]]; ρ = −0.1·k1 + R at the last valid token:
    #   ρ = [[0.01, −0.01, −0.03+1], [−0.02, −0.01+0]] = [[0.01, −0.01, 0.97], [−0.02, −0.01]]
    # returns (γ=1, reverse cumsum): [[0.97, 0.96, 0.97], [−0.03, −0.01]]
    # μ = 2.86/5 = 0.572; deviations [.398, .388, .398, −.602, −.582]; Σdev² = 1.16848
    # v = 1.16848/5 = 0.233696, sqrt = 0.4834211413 → A = dev/0.4834211413
    fn = adv("reinforce_pp", kl_coef=0.1, gamma=1.0)
    a = fn(
        rewards=torch.tensor([1.0, 0.0], dtype=F64),
        response_mask=torch.tensor(M, dtype=F64),
        logprobs=torch.tensor(OLP, dtype=F64),
        ref_logprobs=torch.tensor(REF, dtype=F64),
    )
    expected = [[0.8232987056, 0.8026128084, 0.8232987056], [-1.245291007, -1.203919213, 0.0]]
    close(a, expected, atol=1e-9)


def test_t2_5_reinforce_pp_unbiased():
    # verl's rule: Bessel variance 1.16848/4 = 0.29212, rsqrt(0.29212 + 1e-8) → dev·1.850182…
    fn = adv("reinforce_pp", kl_coef=0.1, gamma=1.0, unbiased=True)
    a = fn(
        rewards=torch.tensor([1.0, 0.0], dtype=F64),
        response_mask=torch.tensor(M, dtype=F64),
        logprobs=torch.tensor(OLP, dtype=F64),
        ref_logprobs=torch.tensor(REF, dtype=F64),
    )
    expected = [[0.7363807360, 0.7178787074, 0.7363807360], [-1.113822118, -1.076818061, 0.0]]
    close(a, expected, atol=1e-9)


def test_t2_6_reinforce_pp_baseline():
    # c = R − group mean = [0.5, −0.5, 0.25, −0.25]; tokens per row 2,1,3,1 (7 in all)
    # μ = (0.5·2 − 0.5 + 0.25·3 − 0.25)/7 = 1/7
    # v = (2·(5/14)² + (9/14)² + 3·(3/28)² + (11/28)²)/7 = 0.1224489796, sqrt = 0.3499271061
    # A = (c − 1/7)/0.3499271061
    a = adv("reinforce_pp_baseline")(
        rewards=[1.0, 0.0, 0.5, 0.0],
        group_ids=[0, 0, 1, 1],
        response_mask=[[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 0, 0]],
    )
    expected = [
        [1.020620726, 1.020620726, 0.0],
        [-1.837117307, 0.0, 0.0],
        [0.3061862178, 0.3061862178, 0.3061862178],
        [-1.122682799, 0.0, 0.0],
    ]
    close(a, expected, atol=1e-6)


# ------------------------------------------------------------------------- GAE (§2.6)


def test_t2_11_gae():
    # γ=1, λ=0.95, V = [0.5, 0.6, 0.7, (pad)], ρ = [0, 0, 1]:
    #   t=2: δ = 1 + 0 − 0.7 = 0.3,        Â = 0.3
    #   t=1: δ = 0 + 0.7 − 0.6 = 0.1,      Â = 0.1 + 0.95·0.3 = 0.385
    #   t=0: δ = 0 + 0.6 − 0.5 = 0.1,      Â = 0.1 + 0.95·0.385 = 0.46575
    # returns = Â + V = [0.96575, 0.985, 1.0, 0]
    kwargs = {
        "token_rewards": torch.tensor([[0.0, 0.0, 1.0, 0.0]], dtype=F64),
        "values": torch.tensor([[0.5, 0.6, 0.7, 0.0]], dtype=F64),
        "response_mask": torch.tensor([[1.0, 1.0, 1.0, 0.0]], dtype=F64),
    }
    a = adv("gae", gamma=1.0, lam=0.95, whiten=False)(rewards=[1.0], **kwargs)
    close(a, [[0.46575, 0.385, 0.3, 0.0]], atol=1e-9)
    ret = gae_returns(**kwargs, gamma=1.0, lam=0.95)
    close(ret, [[0.96575, 0.985, 1.0, 0.0]], atol=1e-9)


def test_t2_12_gae_skips_masked_tokens():
    # γ=0.9, λ=0.8; the masked middle token (V=9.9) is skipped, so t=0 bootstraps from t=2:
    #   t=2: δ = 1 − 0.4 = 0.6,                 Â = 0.6,  ret = 1.0
    #   t=0: δ = 0 + 0.9·0.4 − 0.2 = 0.16,      Â = 0.16 + 0.72·0.6 = 0.592,  ret = 0.792
    kwargs = {
        "token_rewards": torch.tensor([[0.0, 0.0, 1.0]], dtype=F64),
        "values": torch.tensor([[0.2, 9.9, 0.4]], dtype=F64),
        "response_mask": torch.tensor([[1.0, 0.0, 1.0]], dtype=F64),
    }
    a = adv("gae", gamma=0.9, lam=0.8, whiten=False)(rewards=[1.0], **kwargs)
    close(a, [[0.592, 0.0, 0.6]], atol=1e-9)
    ret = gae_returns(**kwargs, gamma=0.9, lam=0.8)
    close(ret, [[0.792, 0.0, 1.0]], atol=1e-9)


def test_gae_builds_token_rewards_from_rewards():
    # No token_rewards: ρ = R at the last valid token (kl_coef 0) → same as T2.11.
    a = adv("gae", gamma=1.0, lam=0.95, whiten=False)(
        rewards=torch.tensor([1.0], dtype=F64),
        values=torch.tensor([[0.5, 0.6, 0.7, 0.0]], dtype=F64),
        response_mask=torch.tensor([[1.0, 1.0, 1.0, 0.0]], dtype=F64),
    )
    close(a, [[0.46575, 0.385, 0.3, 0.0]], atol=1e-9)


def test_gae_builds_token_rewards_with_k1_penalty():
    # kl_coef 0.5, k1 = old − ref = [−1 − (−1.2), ·, −1 − (−0.8)] = [0.2, ·, −0.2]
    # ρ = −0.5·k1 + R at last = [−0.1, ·, 0.1 + 1] = [−0.1, ·, 1.1]; γ=0.9, λ=0.8, V=[0.2, 9.9, 0.4]
    #   t=2: δ = 1.1 − 0.4 = 0.7,                  Â = 0.7
    #   t=0: δ = −0.1 + 0.9·0.4 − 0.2 = 0.06,      Â = 0.06 + 0.72·0.7 = 0.564
    mask = torch.tensor([[1.0, 0.0, 1.0]], dtype=F64)
    values = torch.tensor([[0.2, 9.9, 0.4]], dtype=F64)
    a = adv("gae", gamma=0.9, lam=0.8, whiten=False, kl_coef=0.5)(
        rewards=torch.tensor([1.0], dtype=F64),
        values=values,
        response_mask=mask,
        logprobs=torch.tensor([[-1.0, 3.0, -1.0]], dtype=F64),
        ref_logprobs=torch.tensor([[-1.2, -7.0, -0.8]], dtype=F64),
    )
    close(a, [[0.564, 0.0, 0.7]], atol=1e-9)
    ret = gae_returns(torch.tensor([[-0.1, 0.0, 1.1]], dtype=F64), values, mask, gamma=0.9, lam=0.8)
    close(ret, [[0.764, 0.0, 1.1]], atol=1e-9)


def test_gae_whitening_is_a_positive_affine_map_with_zero_mean():
    # Whitening (token mean/var over the batch) maps Â to (Â − μ)·k with k > 0; we check the
    # shape of the map without fixing the variance convention (population or Bessel).
    kwargs = {
        "rewards": torch.tensor([1.0, 0.0], dtype=F64),
        "values": torch.tensor([[0.5, 0.6, 0.7, 0.0], [0.1, 0.3, 0.0, 0.0]], dtype=F64),
        "response_mask": torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=F64),
    }
    raw = adv("gae", gamma=1.0, lam=0.95, whiten=False)(**kwargs)
    white = adv("gae", gamma=1.0, lam=0.95)(**kwargs)
    valid = kwargs["response_mask"].bool()
    close(white[valid].mean(), 0.0, atol=1e-9)
    centred = raw[valid] - raw[valid].mean()
    k = white[valid] / centred
    assert (k > 0).all()
    close(k, torch.full_like(k, k[0].item()), atol=1e-9, rtol=1e-9)
    assert (white[~valid] == 0).all()


# ------------------------------------------------------------------- recipe names


def test_recipe_names_give_their_estimators():
    r = [1.0, 0.0, 0.0, 1.0, 3.0, 1.0, 2.0]
    g = [0, 0, 0, 0, 1, 1, 1]
    recipe = policylab.advantages
    close(recipe("dapo")(rewards=r, group_ids=g), adv("grpo")(rewards=r, group_ids=g), atol=0.0)
    close(recipe("dr_grpo")(rewards=r, group_ids=g), [0.5, -0.5, -0.5, 0.5, 1, -1, 0], atol=1e-6)


def test_unknown_estimator_and_override():
    with pytest.raises((ValueError, KeyError)) as err:
        adv("nope")
    assert "grpo" in str(err.value) and "rloo" in str(err.value)
    with pytest.raises(ValueError, match="scale"):
        adv("grpo", scale="sideways")
    with pytest.raises(ValueError, match="bogus"):
        adv("grpo", bogus=1)


# -------------------------------------------------------------------------- properties


def _group_ids(batch, n_groups):
    return torch.randint(0, n_groups, (batch.shape[0],), generator=batch.gen(1))


def _full_inputs(batch, rewards, group_ids):
    """Every input any estimator may want, all finite, zero at masked positions."""
    gen = batch.gen(2)
    mask = batch.mask
    old = -torch.rand(batch.shape, generator=gen, dtype=F64) * 3 * mask
    ref = (old + 0.3 * torch.randn(batch.shape, generator=gen, dtype=F64)) * mask
    values = torch.randn(batch.shape, generator=gen, dtype=F64) * mask
    return {
        "rewards": rewards,
        "group_ids": group_ids,
        "response_mask": mask,
        "logprobs": old,
        "ref_logprobs": ref,
        "values": values,
    }


ESTIMATORS = [
    ("grpo", {"scale": "group"}),
    ("grpo", {"scale": "batch"}),
    ("grpo", {"scale": "none"}),
    ("dr_grpo", {}),
    ("rloo", {}),
    ("reinforce_pp", {"kl_coef": 0.1}),
    ("reinforce_pp_baseline", {}),
    ("gae", {"gamma": 0.9, "lam": 0.8, "kl_coef": 0.1}),
]
CENTRING = [e for e in ESTIMATORS if e[0] not in ("reinforce_pp", "gae")]


def _call(name, overrides, inputs):
    return adv(name, **overrides)(**inputs)


@pytest.mark.parametrize(("name", "overrides"), CENTRING)
@PROPERTY
@given(
    batch=ragged_batches(max_rows=8),
    n_groups=st.integers(1, 4),
    level=st.lists(st.integers(-32, 32), min_size=4, max_size=4),
)
def test_equal_rewards_in_every_group_give_exactly_zero(name, overrides, batch, n_groups, level):
    # Rewards are multiples of 1/4, so group sums and means are exact in float32 and float64.
    g = _group_ids(batch, n_groups)
    rewards = torch.tensor(level, dtype=F64)[g] / 4
    a = _call(name, overrides, _full_inputs(batch, rewards, g))
    assert a.shape == batch.shape
    assert (a == 0).all(), a


@pytest.mark.parametrize(("name", "overrides"), CENTRING)
@PROPERTY
@given(
    batch=ragged_batches(max_rows=8),
    n_groups=st.integers(1, 4),
    level=st.lists(st.floats(-10, 10, allow_nan=False), min_size=4, max_size=4),
)
def test_equal_arbitrary_rewards_give_zero(name, overrides, batch, n_groups, level):
    # Arbitrary floats: a group mean may differ from the shared value by round-off. GRPO's
    # zero-variance rule (§1.3) and Dr. GRPO's edge case (§2.1) make those groups exactly 0;
    # the other estimators only have to be ~0.
    g = _group_ids(batch, n_groups)
    rewards = torch.tensor(level, dtype=F64)[g]
    a = _call(name, overrides, _full_inputs(batch, rewards, g))
    exact = name == "dr_grpo" or overrides.get("scale") in ("group", "none")
    if exact:
        assert (a == 0).all(), a
    else:
        close(a, torch.zeros_like(a), atol=1e-6)


@pytest.mark.parametrize(("name", "overrides"), ESTIMATORS)
@PROPERTY
@given(
    batch=ragged_batches(max_rows=8),
    n_groups=st.integers(1, 4),
    reward_levels=st.lists(st.integers(-4, 4), min_size=8, max_size=8),
)
def test_masked_positions_are_zero_and_never_matter(
    name, overrides, batch, n_groups, reward_levels
):
    g = _group_ids(batch, n_groups)
    rewards = torch.tensor(reward_levels[: batch.shape[0]], dtype=F64) / 2
    clean = _full_inputs(batch, rewards, g)
    gen = batch.gen(3)
    dirty = dict(clean)
    for key in ("logprobs", "ref_logprobs", "values"):
        dirty[key] = garbage_like(clean[key], batch.mask, gen, nonfinite=False)
    a_clean = _call(name, overrides, clean)
    a_dirty = _call(name, overrides, dirty)
    assert torch.isfinite(a_dirty).all()
    assert (a_dirty[batch.mask == 0] == 0).all()
    close(a_dirty, a_clean, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("scale", ["group", "none"])
@PROPERTY
@given(
    batch=ragged_batches(max_rows=8),
    n_groups=st.integers(1, 4),
    reward_levels=st.lists(st.integers(-6, 6), min_size=8, max_size=8),
    shifts=st.lists(st.integers(-40, 40), min_size=4, max_size=4),
)
def test_grpo_invariant_to_a_constant_per_group(scale, batch, n_groups, reward_levels, shifts):
    # R_i + c_g(i): the group mean moves by c_g and the group std is unchanged.
    g = _group_ids(batch, n_groups)
    rewards = torch.tensor(reward_levels[: batch.shape[0]], dtype=F64) / 2
    shifted = rewards + torch.tensor(shifts, dtype=F64)[g] / 4
    mask = batch.mask
    fn = adv("grpo", scale=scale)
    a = fn(rewards=rewards, group_ids=g, response_mask=mask)
    b = fn(rewards=shifted, group_ids=g, response_mask=mask)
    close(b, a, atol=1e-9)


@PROPERTY
@given(
    batch=ragged_batches(max_rows=8),
    n_groups=st.integers(1, 4),
    reward_levels=st.lists(st.integers(-6, 6), min_size=8, max_size=8),
    shift=st.integers(-40, 40),
)
def test_grpo_batch_scale_invariant_to_a_global_constant(batch, n_groups, reward_levels, shift):
    # scale="batch" uses the std of the raw rewards, which only a shift of every row preserves.
    g = _group_ids(batch, n_groups)
    rewards = torch.tensor(reward_levels[: batch.shape[0]], dtype=F64) / 2
    fn = adv("grpo", scale="batch")
    a = fn(rewards=rewards, group_ids=g, response_mask=batch.mask)
    b = fn(rewards=rewards + shift / 4, group_ids=g, response_mask=batch.mask)
    close(b, a, atol=1e-9)
