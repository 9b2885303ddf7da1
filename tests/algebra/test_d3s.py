"""D³S (spec §9): the max-Var(Â) row subset (T9.1, T9.2), the token top-k by |A|·H
(T9.3), the linear schedule (T9.4), then properties: the exact subset beats every other
subset of the same size, the budgets relax to keeping everything."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from algebra_testing import PROPERTY
from hypothesis import given
from hypothesis import strategies as st
from test_selection import selection

from policylab import Rollouts
from policylab.algebra.selection import max_variance_subset
from policylab.api import advantages as advantage_fn


def rows_of(values, width=1, entropy=None, groups=None) -> tuple[Rollouts, torch.Tensor]:
    """A batch whose row advantages are `values` (constant over `width` tokens)."""
    a = torch.tensor(values, dtype=torch.float32).unsqueeze(1).expand(-1, width).clone()
    batch = Rollouts(
        rewards=torch.zeros(len(values)),
        response_mask=torch.ones(len(values), width),
        group_ids=torch.tensor(groups if groups is not None else range(len(values))),
        entropy=entropy if entropy is not None else torch.ones(len(values), width),
    )
    return batch, a


def test_t9_1_three_groups_of_four_keep_the_max_variance_rows():
    rewards = torch.tensor([1.0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0])
    batch = Rollouts(
        rewards=rewards,
        response_mask=torch.ones(12, 1),
        group_ids=torch.arange(3).repeat_interleave(4),
        entropy=torch.ones(12, 1),
    )
    a = advantage_fn("grpo", eps=0.0)(batch)
    expected = [
        1.5,
        -0.5,
        -0.5,
        -0.5,
        0,
        0,
        0,
        0,
        3**0.5 / 2,
        3**0.5 / 2,
        -(3**0.5) / 2,
        -(3**0.5) / 2,
    ]
    assert torch.allclose(a[:, 0], torch.tensor(expected), atol=1e-6)
    d3s = selection("d3s", sample_init=4 / 12, token_init=1.0)
    chosen = d3s(batch, a, {"step": 0, "total_steps": 10})
    assert chosen.row_keep.nonzero().flatten().tolist() == [0, 8, 10, 11]
    assert chosen.metrics["d3s/var_adv_kept"] == pytest.approx(1.099880, abs=1e-6)
    assert chosen.metrics["d3s/useful_frac_kept"] == 1.0  # the all-zero group is gone
    # with the grpo default eps = 1e-6 the same rows are kept
    a_eps = advantage_fn("grpo")(batch)
    chosen = d3s(batch, a_eps, {"step": 0, "total_steps": 10})
    assert chosen.row_keep.nonzero().flatten().tolist() == [0, 8, 10, 11]
    assert chosen.metrics["d3s/var_adv_kept"] == pytest.approx(1.099876, abs=1e-6)


def test_t9_2_extremes_beat_the_largest_magnitudes():
    values = torch.tensor([3, 2.5, 2, -1, -1.2], dtype=torch.float64)
    subset = max_variance_subset(values, 3)
    assert sorted(subset.tolist()) == [0, 3, 4]
    assert float(values[subset].var(unbiased=False)) == pytest.approx(842 / 225)
    assert float(values[[0, 1, 2]].var(unbiased=False)) == pytest.approx(1 / 6)


def test_t9_3_tokens_with_the_largest_abs_advantage_times_entropy():
    entropy = torch.tensor([[0.1, 0.8, 0.4, 0.2], [0.9, 0.3, 0.5, 0.0]])
    batch, a = rows_of([1.5, -0.5], width=4, entropy=entropy)
    batch = batch.replace(response_mask=torch.tensor([[1.0, 1, 1, 1], [1, 1, 1, 0]]))
    chosen = selection("d3s", sample_init=1.0, token_init=0.25)(batch, a, {"step": 0})
    # 7 valid tokens, keep ⌈1.75⌉ = 2: keys 1.2 at (0, 1) and 0.6 at (0, 2)
    assert chosen.token_weight.nonzero().tolist() == [[0, 1], [0, 2]]
    assert chosen.metrics["d3s/token_keep_frac"] == pytest.approx(2 / 7)
    assert chosen.metrics["d3s/key_threshold"] == pytest.approx(0.6)
    # Selection.apply trains on exactly those tokens
    kept = chosen.apply(batch)
    assert kept.response_mask.tolist() == [[0, 1, 1, 0], [0, 0, 0, 0]]


def test_t9_4_the_schedule_is_linear_in_progress():
    d3s = selection("d3s")  # 0.5 → 1.0 rows, 0.2 → 1.0 tokens
    batch, a = rows_of([float(i) for i in range(64)], width=10)
    chosen = d3s(batch, a, {"step": 250, "total_steps": 1000})
    assert chosen.metrics["d3s/p"] == 0.25
    assert chosen.metrics["d3s/sample_keep_frac"] == pytest.approx(40 / 64)  # ⌈5/8 · 64⌉
    kept_tokens = int(chosen.row_keep.sum()) * 10
    assert chosen.metrics["d3s/token_keep_frac"] == pytest.approx(
        math.ceil(0.4 * kept_tokens) / 640
    )
    assert d3s(batch, a, {"step": 500, "total_steps": 1000}).row_keep.sum() == 48
    final = d3s(batch, a, {"step": 1000, "total_steps": 1000})
    assert bool(final.row_keep.all()) and bool((final.token_weight == 1).all())


def test_intra_mode_selects_inside_each_group():
    batch, a = rows_of([1.0, 0.5, -0.2, -1.0, 2.0, 2.0, -3.0, 0.0], groups=[0] * 4 + [1] * 4)
    chosen = selection("d3s", sample_init=0.5, token_init=1.0, mode="intra")(batch, a, {})
    # ⌈0.5·4⌉ = 2 per group: the two extremes of each
    assert chosen.row_keep.nonzero().flatten().tolist() == [0, 3, 4, 6]


def test_rows_without_tokens_are_never_kept_and_missing_inputs_are_refused():
    batch, a = rows_of([1.0, -1.0, 0.5])
    batch = batch.replace(response_mask=torch.tensor([[1.0], [0.0], [1.0]]))
    chosen = selection("d3s", sample_init=1.0, token_init=1.0)(batch, a, {})
    assert chosen.row_keep.tolist() == [True, False, True]
    with pytest.raises(ValueError, match="after the advantage"):
        selection("d3s")(batch, None, {})
    with pytest.raises(ValueError, match="entropy"):
        selection("d3s")(batch.replace(entropy=None), a, {})
    with pytest.raises(ValueError, match="mode"):
        selection("d3s", mode="both")
    with pytest.raises(ValueError, match="sample_init"):
        selection("d3s", sample_init=0.0)


def test_all_equal_advantages_keep_the_first_rows_in_sort_order():
    batch, a = rows_of([0.0] * 6)
    chosen = selection("d3s", sample_init=0.5)(batch, a, {})
    assert chosen.row_keep.nonzero().flatten().tolist() == [0, 1, 2]
    assert chosen.metrics["d3s/var_adv_kept"] == 0.0


@PROPERTY
@given(
    st.lists(st.integers(-4, 4), min_size=2, max_size=8),
    st.data(),
)
def test_the_exact_subset_is_as_good_as_brute_force(values, data):
    v = torch.tensor(values, dtype=torch.float64) / 2
    n = data.draw(st.integers(1, len(values)))
    best = max(
        float(v[list(s)].var(unbiased=False)) for s in itertools.combinations(range(len(v)), n)
    )
    subset = max_variance_subset(v, n)
    assert len(subset) == n and len(set(subset.tolist())) == n
    assert float(v[subset].var(unbiased=False)) == pytest.approx(best, abs=1e-12)
