"""EMPG (spec §12): the spec's hand cases, edge cases (one step, zero and equal entropies,
uniform groups, NaN rewards, empty steps, linked one-step rows), the newline segmentation
helper, and properties over random ragged batches."""

from __future__ import annotations

import math

import pytest
import torch
from algebra_testing import PROPERTY, close, garbage_like, ragged_batches
from hypothesis import given
from hypothesis import strategies as st

import policylab
from policylab.algebra.empg import (
    EMPGOptions,
    empg_details,
    empg_steps,
    segment_ids_from_newlines,
)
from policylab.rollouts import Rollouts

F64 = torch.float64
CFG = EMPGOptions()  # k_s = k_f = 1, ζ = 0.05, ε = 1e-8


def batch(rewards, entropy, mask, seg=None, groups=None, **extras):
    return Rollouts(
        rewards=torch.tensor(rewards, dtype=F64),
        response_mask=torch.tensor(mask, dtype=F64),
        group_ids=None if groups is None else torch.tensor(groups),
        entropy=torch.tensor(entropy, dtype=F64),
        segment_ids=None if seg is None else torch.tensor(seg),
        extras=extras,
    )


# ------------------------------------------------------------------- spec tests (§12)
def test_spec_case_1_two_trajectories():
    # Row 0 (A = +1): steps with token entropies [0.2, 0.2 | 0.8 | 0.5] → H = [0.2, 0.8, 0.5].
    # Row 1 (A = −1): [0.2 | 1.0, 1.0 | pad] → H = [0.2, 1.0]. Dr. GRPO base: R = [1, −1]
    # in one group gives A = R − 0 = [1, −1].
    # min 0.2, max 1.0 → H̃ = [0, 0.75, 0.375], [0, 1]; exp(−H̃) = [1, 0.472367, 0.687289],
    # [1, 0.367879], mean 0.705507 → g = [1.417420, 0.669542, 0.974178], [1.417420, 0.521440].
    # f(next) = [0.472367, 0.687289, 0], [0.367879, 0].
    # A_mod = g·A + 0.05·f = [1.441039, 0.703906, 0.974178], [−1.399026, −0.521440];
    # mean 0.239731 → A_fin = [1.201307, 0.464175, 0.734446], [−1.638758, −0.761171].
    b = batch(
        [1.0, -1.0],
        [[0.2, 0.2, 0.8, 0.5], [0.2, 1.0, 1.0, 9.0]],
        [[1, 1, 1, 1], [1, 1, 1, 0]],
        seg=[[0, 0, 1, 2], [0, 1, 1, 0]],
        groups=[0, 0],
    )
    a = policylab.advantages("empg", scale="none")(b)
    expected = [[1.201307, 1.201307, 0.464175, 0.734446], [-1.638758, -0.761171, -0.761171, 0.0]]
    close(a, expected, atol=2e-6)
    d = empg_details(b, EMPGOptions(scale="none"))
    close(d.H, [0.2, 0.8, 0.5, 0.2, 1.0], atol=1e-12)
    close(d.g, [1.417420, 0.669542, 0.974178, 1.417420, 0.521440], atol=2e-6)
    close(d.f, [0.472367, 0.687289, 0.0, 0.367879, 0.0], atol=2e-6)
    close(d.A_mod, [1.441039, 0.703906, 0.974178, -1.399026, -0.521440], atol=2e-6)
    m = d.metrics()
    close(m["empg/adv_mod_mean"], 0.239731, atol=2e-6)
    assert m["empg/n_steps"] == 5.0
    assert m["empg/corr_H_absA"] < 0
    close(m["empg/frac_g_gt1"], 0.4, atol=1e-6)


def test_spec_case_2_equal_entropies_one_step_per_row():
    # H all equal → H̃ = 0, g = 1; one step per row → no bonus. A_mod = A = [1, −1, 1],
    # mean 1/3 → A_fin = [2/3, −4/3, 2/3].
    mask = torch.ones(3, 2, dtype=F64)
    d = empg_steps(torch.tensor([1.0, -1.0, 1.0], dtype=F64), 0.7 * mask, mask, None, CFG)
    close(d.g, [1.0, 1.0, 1.0], atol=1e-12)
    close(d.f, [0.0, 0.0, 0.0], atol=0.0)
    close(d.advantages, [[2 / 3] * 2, [-4 / 3] * 2, [2 / 3] * 2], atol=1e-12)


# ---------------------------------------------------------------------------- edge cases
def test_zero_entropy_gives_g_one_and_full_bonus():
    # Every token entropy 0 → H̃ = 0/(0 + ε) = 0, g = 1, f = exp(0) = 1 before a next step.
    # Rows: A = [1, −1], two steps each. A_mod = [1.05, 1], [−0.95, −1]; mean 0.1/4 = 0.025
    # → A_fin = [1.025, 0.975], [−0.975, −1.025].
    b = batch([1.0, -1.0], [[0.0] * 4] * 2, [[1] * 4] * 2, seg=[[0, 0, 1, 1]] * 2, groups=[0, 0])
    a = policylab.advantages("empg", scale="none")(b)
    close(a, [[1.025, 1.025, 0.975, 0.975], [-0.975, -0.975, -1.025, -1.025]], atol=1e-12)


def test_one_step_per_row_reduces_to_g_scaling_and_centring():
    # segment_ids None: one step per row, no bonus. H = [0, 1, 0.5] → H̃ = [0, 1, 0.5]
    # (ε aside); e = [1, 0.367879, 0.606531], mean 0.658137 → g = [1.519441, 0.558971,
    # 0.921588]. A = [1, −1, 0] (0: the third row is alone in its group) →
    # A_mod = [1.519441, −0.558971, 0], mean 0.320157 → A_fin = [1.199285, −0.879128, −0.320157].
    b = batch(
        [1.0, -1.0, 5.0], [[0.0, 0.0], [1.0, 1.0], [0.2, 0.8]], [[1, 1]] * 3, groups=[0, 0, 1]
    )
    d = empg_details(b, EMPGOptions(scale="none"))
    close(d.g, [1.519441, 0.558971, 0.921588], atol=2e-6)
    close(d.advantages[:, 0], [1.199285, -0.879128, -0.320157], atol=2e-6)


def test_uniform_group_still_gets_bonus_and_shift():
    # One group, R = [1, 1] → A = 0 for both rows. Equal entropies: g = 1, f = 1 for row 0's
    # first step. A_mod = [0.05, 0], [0] → mean 0.05/3; A_fin = [0.033333, −0.016667], [−0.016667].
    b = batch([1.0, 1.0], [[0.3] * 2] * 2, [[1, 1], [1, 0]], seg=[[0, 1], [0, 0]], groups=[0, 0])
    a = policylab.advantages("empg")(b)
    close(a, [[0.05 - 0.05 / 3, -0.05 / 3], [-0.05 / 3, 0.0]], atol=1e-12)


def test_the_estimate_carries_the_step_metrics_it_computed():
    # one pass: the `empg/` metrics come with the advantages (nothing re-runs the estimator)
    b = batch([1.0, 1.0], [[0.3] * 2] * 2, [[1, 1], [1, 0]], seg=[[0, 1], [0, 0]], groups=[0, 0])
    estimate = policylab.advantages("empg").estimate(b)
    assert estimate.metrics["empg/n_steps"] == 3.0
    assert estimate.columns == {}
    close(estimate.advantages, policylab.advantages("empg")(b), atol=0)


def test_nan_reward_row_gets_zero_and_stays_out_of_the_statistics():
    # Row 1 is unscorable: A = 0 on its tokens and its entropy 5.0 is not in min/max.
    # R = [1, NaN, 0] in one group: mean 0.5 over the scorable rows → A = [0.5, ·, −0.5];
    # steps H = [0, 1] → g = [1, e^-1]/mean, A_fin = g·A − mean(g·A).
    b = batch([1.0, math.nan, 0.0], [[0.0], [5.0], [1.0]], [[1], [1], [1]], groups=[0, 0, 0])
    d = empg_details(b, EMPGOptions(scale="none"))
    assert d.advantages[1, 0] == 0
    close(d.H, [0.0, 1.0], atol=0.0)
    e = torch.tensor([1.0, math.exp(-1.0)], dtype=F64)
    g = e / e.mean()
    a_mod = g * torch.tensor([0.5, -0.5], dtype=F64)
    close(d.advantages[[0, 2], 0], a_mod - a_mod.mean(), atol=1e-7)


def test_steps_without_valid_tokens_are_skipped_and_ids_need_not_be_contiguous():
    # Row 0: segments 0, 7 (masked: tool output), 5 → steps in id order 0 then 5; the bonus of
    # step 0 comes from step 5. Equal entropies: g = 1, f(step 0) = 1; A = 0 (singleton).
    # A_mod = [0.05, 0] → A_fin = [0.025, −0.025].
    b = batch([1.0], [[0.4, 0.4, 0.4]], [[1, 0, 1]], seg=[[0, 7, 5]])
    d = empg_details(b, CFG)
    assert len(d.H) == 2
    close(d.advantages, [[0.025, 0.0, -0.025]], atol=1e-12)


def test_rows_without_tokens_and_empty_batches():
    b = batch([1.0, 0.0], [[0.1, 0.2], [0.3, 0.4]], [[0, 0], [0, 0]], groups=[0, 0])
    d = empg_details(b, CFG)
    assert (d.advantages == 0).all() and len(d.H) == 0
    assert d.metrics() == {"empg/n_steps": 0.0}


def test_one_step_rows_linked_by_trajectory():
    # Three rows, one step each: trajectory "a" holds rows 1 (step 0) and 0 (step 1), "b" row 2.
    # H = [1, 0, 0.5] → H̃ = [1, 0, 0.5]; the bonus of row 1 is exp(−H̃ of row 0) = e^-1.
    b = batch(
        [1.0, 1.0, 1.0],
        [[1.0], [0.0], [0.5]],
        [[1]] * 3,
        traj_id=["a", "a", "b"],
        step_idx=[1, 0, 0],
    )
    d = empg_details(b, CFG)
    bonus = dict(zip(d.row.tolist(), d.f.tolist(), strict=True))
    close(bonus[1], math.exp(-1.0), atol=1e-7)
    assert bonus[0] == 0 and bonus[2] == 0


def test_trajectory_links_are_checked():
    with pytest.raises(ValueError, match="step_idx"):
        empg_details(batch([1.0], [[0.0]], [[1]], traj_id=["a"]), CFG)
    with pytest.raises(ValueError, match="same"):
        empg_details(
            batch([1.0, 1.0], [[0.0]] * 2, [[1]] * 2, traj_id=["a", "a"], step_idx=[0, 0]), CFG
        )


def test_needs_entropy():
    b = Rollouts(rewards=torch.ones(2), response_mask=torch.ones(2, 3))
    with pytest.raises(ValueError, match="entropy"):
        policylab.advantages("empg")(b)


@pytest.mark.parametrize(
    ("field", "value"), [("k_s", -1.0), ("k_f", -0.1), ("zeta", -0.05), ("entropy_eps", 0.0)]
)
def test_options_are_validated(field, value):
    with pytest.raises(ValueError, match=field):
        policylab.advantages("empg", **{field: value})


def test_defaults():
    opts = policylab.advantages("empg").options
    assert (opts.k_s, opts.k_f, opts.zeta, opts.entropy_eps, opts.scale) == (
        1.0,
        1.0,
        0.05,
        1e-8,
        "group",
    )


# -------------------------------------------------------------------- segmentation helper
NL = 9


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        ([5, NL, 6, NL, NL, 7, 8, NL], [0, 0, 1, 1, 1, 2, 2, 2]),  # "\n\n" opens no empty step
        ([NL, 5, 6], [0, 1, 1]),  # a leading newline is a step of its own
        ([5, 6, 7], [0, 0, 0]),  # no newline: one step
        ([5, 11, 6, 9, 7], [0, 0, 1, 1, 2]),  # several newline ids (e.g. "\n" and ".\n")
    ],
)
def test_segment_ids_from_newlines(ids, expected):
    seg = segment_ids_from_newlines(torch.tensor([ids]), {NL, 11})
    assert seg.tolist() == [expected]


def test_segment_ids_without_newline_ids_and_bad_shape():
    assert segment_ids_from_newlines(torch.tensor([[1, 9, 2]]), []).tolist() == [[0, 0, 0]]
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        segment_ids_from_newlines(torch.tensor([1, 9, 2]), [9])


def test_helper_segments_feed_empg():
    # "a \n b" with entropies [0, 0 | 1]: steps H = [0, 1], A = 0 (singleton).
    # g = 2/(1 + e^-1)·[1, e^-1]; f = [e^-1, 0]; A_mod = 0.05·f → A_fin = ±0.05·e^-1/2.
    ids = torch.tensor([[4, NL, 5]])
    b = batch(
        [1.0], [[0.0, 0.0, 1.0]], [[1, 1, 1]], seg=segment_ids_from_newlines(ids, [NL]).tolist()
    )
    half = 0.05 * math.exp(-1.0) / 2
    close(policylab.advantages("empg")(b), [[half, half, -half]], atol=1e-9)


# --------------------------------------------------------------------------- properties
def _random_batch(ragged, n_groups):
    gen = ragged.gen()
    B, T = ragged.shape
    return Rollouts(
        rewards=torch.randint(0, 2, (B,), generator=gen).to(F64),
        response_mask=ragged.mask,
        group_ids=torch.randint(0, n_groups, (B,), generator=gen),
        entropy=3 * torch.rand(B, T, generator=gen, dtype=F64),
        segment_ids=torch.randint(0, 3, (B, T), generator=gen),
    )


@PROPERTY
@given(ragged=ragged_batches(max_rows=6, max_t=6), n_groups=st.integers(1, 3))
def test_masked_positions_never_matter(ragged, n_groups):
    b = _random_batch(ragged, n_groups)
    gen = ragged.gen(7)
    dirty = b.replace(
        entropy=garbage_like(b.entropy, b.response_mask, gen, nonfinite=True),
        segment_ids=torch.where(
            b.response_mask > 0,
            b.segment_ids,
            torch.randint(0, 9, b.segment_ids.shape, generator=gen),
        ),
    )
    a, a_dirty = policylab.advantages("empg")(b), policylab.advantages("empg")(dirty)
    assert torch.isfinite(a_dirty).all()
    assert (a_dirty[b.response_mask == 0] == 0).all()
    close(a_dirty, a, atol=1e-12)


@PROPERTY
@given(ragged=ragged_batches(max_rows=6, max_t=6), n_groups=st.integers(1, 3))
def test_scale_averages_one_and_final_advantages_centre(ragged, n_groups):
    d = empg_details(_random_batch(ragged, n_groups), CFG)
    if len(d.H):
        close(float(d.g.mean()), 1.0, atol=1e-12)
        close(float(d.A_fin.mean()), 0.0, atol=1e-12)
        assert ((d.f >= 0) & (d.f <= 1)).all()
        assert (d.g > 0).all()


@PROPERTY
@given(ragged=ragged_batches(max_rows=6, max_t=6), n_groups=st.integers(1, 3))
def test_each_step_has_one_value_on_its_tokens(ragged, n_groups):
    b = _random_batch(ragged, n_groups)
    a = policylab.advantages("empg")(b)
    valid = b.response_mask > 0
    for i in range(len(b)):
        for k in b.segment_ids[i][valid[i]].unique():
            values = a[i][valid[i] & (b.segment_ids[i] == k)]
            assert (values == values[0]).all()


@PROPERTY
@given(
    ragged=ragged_batches(max_rows=6, max_t=6),
    n_groups=st.integers(1, 3),
    shift=st.floats(-2, 2),
)
def test_invariant_to_a_constant_added_to_every_entropy(ragged, n_groups, shift):
    # min-max normalisation over the batch removes a common shift of the entropies.
    b = _random_batch(ragged, n_groups)
    shifted = b.replace(entropy=b.entropy + shift)
    close(policylab.advantages("empg")(shifted), policylab.advantages("empg")(b), atol=1e-6)


@PROPERTY
@given(ragged=ragged_batches(max_rows=6, max_t=6), n_groups=st.integers(1, 3))
def test_without_modulation_it_is_the_centred_base_advantage(ragged, n_groups):
    # k_s = 0 and ζ = 0: g = 1 and no bonus, so A_fin = A_i − (mean of A over the steps).
    b = _random_batch(ragged, n_groups)
    plain = EMPGOptions(k_s=0.0, zeta=0.0)
    d = empg_details(b, plain)
    base = policylab.advantages("grpo")(b)
    if len(d.H):
        first = (b.response_mask > 0).to(torch.int8).argmax(dim=-1)
        row_adv = base[torch.arange(len(b)), first]
        step_adv = row_adv[d.row]
        expected = base - step_adv.mean() * b.response_mask
        close(d.advantages, expected, atol=1e-12)
