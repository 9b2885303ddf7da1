"""Selections (spec §6): DAPO's dynamic sampling keeps a group iff its accuracy is not
all equal (T6.2), filters on accuracy rather than the shaped reward, keeps singletons,
leaves NaN rows out; `all` keeps everything; names are unique."""

from __future__ import annotations

import pytest
import torch
from algebra_testing import PROPERTY
from hypothesis import given
from hypothesis import strategies as st

from policylab import Rollouts
from policylab.algebra.options import build_options
from policylab.algebra.selection import selections
from policylab.api import SelectionRule
from policylab.registry import Registry

F, T = False, True


def selection(name: str, **overrides) -> SelectionRule:
    entry = selections.entry(name)
    return SelectionRule(name, entry, build_options(entry.config, overrides, where=name))


def batch(group_ids, rewards, *, parts=None, width=2) -> Rollouts:
    return Rollouts(
        rewards=torch.tensor(rewards, dtype=torch.float32),
        response_mask=torch.ones(len(rewards), width),
        group_ids=torch.tensor(group_ids, dtype=torch.long),
        reward_parts={k: torch.tensor(v, dtype=torch.float32) for k, v in (parts or {}).items()},
    )


def test_t6_2_dynamic_sampling_keeps_groups_whose_accuracy_varies():
    # groups: 0 all correct (dropped), 1 one of three correct (kept), 2 all wrong
    # (dropped), 3 two of three correct (kept). The shaped rewards (accuracy minus a length
    # penalty) differ inside group 0 and group 2, which must be dropped all the same.
    acc = [1, 1, 1, 0, 1, 0, 0, 0, 0, 1, 0, 1]
    shaped = [a - p for a, p in zip(acc, [0, 0.25, 0.5] * 4, strict=True)]
    chosen = selection("dynamic_sampling")(
        batch([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3], shaped, parts={"acc": acc})
    )
    assert chosen.row_keep.tolist() == [F, F, F, T, T, T, F, F, F, T, T, T]
    assert chosen.metrics == {
        "ds/kept_groups": 2.0,
        "ds/drop_all_correct": 1.0,
        "ds/drop_all_wrong": 1.0,
        "ds/kept_frac": 0.5,  # 2 of 4 groups
    }
    assert torch.equal(chosen.token_weight, torch.ones(12, 2))


def test_without_an_acc_part_the_total_reward_is_the_accuracy():
    # group 0: rewards 0.5, 0.5 (partial credit, all equal → dropped, counted correct);
    # group 1: −1, −1 (DAPO's ±1 wrong → dropped, counted wrong); group 2: 0.5, 1 (kept)
    chosen = selection("dynamic_sampling")(batch([0, 0, 1, 1, 2, 2], [0.5, 0.5, -1, -1, 0.5, 1]))
    assert chosen.row_keep.tolist() == [F, F, F, F, T, T]
    assert chosen.metrics["ds/drop_all_correct"] == 1
    assert chosen.metrics["ds/drop_all_wrong"] == 1


def test_the_metric_option_names_the_reward_part_to_filter_on():
    # total = exact + 0.1·format varies in both groups; exact is all wrong in group 0
    parts = {"exact": [0, 0, 1, 0], "format": [1, 0, 1, 1]}
    total = [0.1, 0.0, 1.1, 0.1]
    rollouts = batch([0, 0, 1, 1], total, parts=parts)
    assert selection("dynamic_sampling")(rollouts).row_keep.tolist() == [T, T, T, T]
    by_exact = selection("dynamic_sampling", metric="exact")(rollouts)
    assert by_exact.row_keep.tolist() == [F, F, T, T]
    with pytest.raises(ValueError, match="'exactt' is not a reward part.*exact, format"):
        selection("dynamic_sampling", metric="exactt")(rollouts)


def test_equal_rewards_are_dropped_without_float_tolerance_issues():
    # the mean of three 0.1 is not exactly 0.1 in floating point; max == min still is
    chosen = selection("dynamic_sampling")(batch([0, 0, 0], [0.1, 0.1, 0.1]))
    assert chosen.row_keep.tolist() == [F, F, F]


def test_singletons_are_kept_and_nan_rows_are_left_out():
    # group 0: a single row (kept); group 1: 1, NaN, 1 → the finite values agree (dropped);
    # group 2: 0, NaN, 1 (kept); group 3: NaN, NaN (dropped, counted wrong)
    nan = float("nan")
    chosen = selection("dynamic_sampling")(
        batch([0, 1, 1, 1, 2, 2, 2, 3, 3], [1, 1, nan, 1, 0, nan, 1, nan, nan])
    )
    assert chosen.row_keep.tolist() == [T, F, F, F, T, T, T, F, F]
    assert chosen.metrics["ds/kept_groups"] == 2
    assert chosen.metrics["ds/drop_all_correct"] == 1
    assert chosen.metrics["ds/drop_all_wrong"] == 1


def test_group_ids_need_not_be_contiguous_or_sorted():
    chosen = selection("dynamic_sampling")(batch([7, 3, 7, 3], [1, 0, 0, 0]))
    assert chosen.row_keep.tolist() == [T, F, T, F]


def test_an_empty_batch_keeps_nothing():
    chosen = selection("dynamic_sampling")(batch([], []))
    assert chosen.row_keep.shape == (0,)
    assert chosen.metrics["ds/kept_frac"] == 0.0


def test_all_keeps_every_row():
    chosen = selection("all")(batch([0, 0, 1, 1], [1, 1, 0, 0]))
    assert chosen.row_keep.tolist() == [T, T, T, T]
    assert chosen.metrics == {}


@PROPERTY
@given(
    st.lists(
        st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=5),
        min_size=1,
        max_size=6,
    )
)
def test_a_group_is_kept_iff_its_population_std_is_positive(groups):
    rewards = [r for g in groups for r in g]
    ids = [i for i, g in enumerate(groups) for _ in g]
    chosen = selection("dynamic_sampling")(batch(ids, rewards))
    for i, g in enumerate(groups):
        expected = len(g) == 1 or torch.tensor(g).std(correction=0) > 0
        rows = [k for k, gid in enumerate(ids) if gid == i]
        assert chosen.row_keep[rows].tolist() == [bool(expected)] * len(g)
    m = chosen.metrics
    assert m["ds/kept_groups"] + m["ds/drop_all_correct"] + m["ds/drop_all_wrong"] == len(groups)


def test_a_duplicate_selection_name_is_rejected():
    registry = Registry("selection")
    registry.add("dynamic_sampling", selections.get("dynamic_sampling"))
    with pytest.raises(ValueError, match="already registered"):
        registry.add("dynamic_sampling", selections.get("all"))
