"""AT-GRPO's group filter (agents spec §A1, seed §18; PettingLLMs _assign_consistent_uids):
dapo drops groups whose rewards are all equal, std drops the lowest range-normalised
variances, mean the lowest mean rewards; whole groups only; metrics; registration."""

from __future__ import annotations

import math

import pytest
import torch
from algebra_testing import PROPERTY, close
from hypothesis import given
from hypothesis import strategies as st

from policylab import Rollouts
from policylab.algebra.catalogue import selections
from policylab.algebra.group_filter import GroupFilterOptions, group_filter
from policylab.algebra.options import build_options
from policylab.algebra.selection import stage_of

F, T = False, True


def batch(group_ids, rewards, width=3) -> Rollouts:
    return Rollouts(
        rewards=torch.tensor(rewards, dtype=torch.float64),
        response_mask=torch.ones(len(rewards), width),
        group_ids=torch.tensor(group_ids, dtype=torch.long),
    )


def run(b: Rollouts, **options):
    return group_filter(b, None, build_options(GroupFilterOptions, options, where="test"))


def test_dapo_drops_groups_whose_rewards_are_all_equal_singletons_included():
    # g0 (1, 1) equal → drop; g1 (0, 1) → keep; g2 single row → range 0 → drop [code];
    # g3 (0.2, 0.2, 0.3) → keep. ratio does not matter for dapo.
    b = batch([0, 0, 1, 1, 2, 3, 3, 3], [1, 1, 0, 1, 7, 0.2, 0.2, 0.3])
    chosen = run(b, method="dapo", ratio=0.0)
    assert chosen.row_keep.tolist() == [F, F, T, T, F, T, T, T]
    assert chosen.metrics == {
        "at/groups": 4.0,
        "at/kept_groups": 2.0,
        "at/group_size_mean": 2.0,  # 8 rows / 4 groups
        "at/filtered_frac": 0.375,  # 3 of 8 rows
    }
    assert torch.equal(chosen.token_weight, torch.ones(8, 3))


def test_std_ranks_groups_by_range_normalised_variance():
    # v = Var_pop/range²: A (0, 0, 0, 10): 18.75/100 = 0.1875 (largest raw std, 4.33);
    # B (0, 1): 0.25/1 = 0.25; D (5, 5): 0; E (0, 0, 1): (2/9)/1 = 0.2222.
    # ratio 0.5 of 4 groups → drop the 2 lowest: D (0) and A (0.1875)
    b = batch([0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 3], [0, 0, 0, 10, 0, 1, 5, 5, 0, 0, 1])
    chosen = run(b, method="std", ratio=0.5)
    assert chosen.row_keep.tolist() == [F, F, F, F, T, T, F, F, T, T, T]
    # ratio 0.75 → ⌊3⌋: D, A, E dropped, B kept
    assert run(b, method="std", ratio=0.75).row_keep.tolist() == [F] * 4 + [T, T] + [F] * 5


def test_mean_ranks_groups_by_mean_reward_singletons_count_as_zero():
    # means: A (1, 1) → 1; B (−1, 0) → −0.5; C single row −5 → 0 [code]; D (2, 4) → 3.
    # ratio 0.5 → drop B (−0.5) and C (0); ratio 0.25 → ⌊1⌋: B only
    b = batch([0, 0, 1, 1, 2, 3, 3], [1, 1, -1, 0, -5, 2, 4])
    assert run(b, method="mean", ratio=0.5).row_keep.tolist() == [T, T, F, F, F, T, T]
    assert run(b, method="mean", ratio=0.25).row_keep.tolist() == [T, T, F, F, T, T, T]
    assert run(b, method="mean", ratio=0.0).row_keep.all()


def test_ties_drop_the_groups_that_appear_first_and_the_count_is_floored():
    # three groups with the same mean 0.5, listed as ids 9, 4, 6: ⌊3·0.5⌋ = 1 group goes,
    # the first to appear (id 9)
    b = batch([9, 9, 4, 4, 6, 6], [0, 1, 1, 0, 0.5, 0.5])
    assert run(b, method="mean", ratio=0.5).row_keep.tolist() == [F, F, T, T, T, T]
    # std: groups 9 and 4 have v = 0.25, group 6 has 0 → it goes first
    assert run(b, method="std", ratio=0.5).row_keep.tolist() == [T, T, T, T, F, F]


def test_nan_rewards_are_left_out_and_unscorable_groups_go_first():
    # g0 (1, NaN, 0): finite (1, 0), mean 0.5; g1 (NaN, NaN): no finite reward → mean −∞;
    # g2 (0, 0.2): mean 0.1. mean, ratio 0.5 → ⌊1.5⌋ = 1: g1
    b = batch([0, 0, 0, 1, 1, 2, 2], [1, math.nan, 0, math.nan, math.nan, 0, 0.2])
    assert run(b, method="mean", ratio=0.5).row_keep.tolist() == [T, T, T, F, F, T, T]
    assert run(b, method="dapo").row_keep.tolist() == [T, T, T, F, F, T, T]


def test_registered_at_the_advantage_stage_with_checked_options():
    entry = selections.entry("group_filter")
    assert entry.fn is group_filter and entry.config is GroupFilterOptions
    assert stage_of(group_filter) == "advantages"  # after regrouping, no refill
    assert GroupFilterOptions() == GroupFilterOptions(method="mean", ratio=0.5)
    with pytest.raises(ValueError, match="method"):
        GroupFilterOptions(method="median")
    with pytest.raises(ValueError, match="ratio"):
        GroupFilterOptions(ratio=1.5)


def test_empty_batch():
    chosen = run(batch([], []), method="std")
    assert chosen.row_keep.shape == (0,)
    assert chosen.metrics["at/groups"] == 0.0


# ------------------------------------------------------------------------ properties
@st.composite
def grouped(draw):
    B = draw(st.integers(1, 16))
    groups = draw(st.lists(st.integers(0, 5), min_size=B, max_size=B))
    rewards = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=B, max_size=B))
    return groups, rewards


@PROPERTY
@given(data=grouped(), method=st.sampled_from(["dapo", "std", "mean"]), ratio=st.floats(0, 1))
def test_whole_groups_are_kept_or_dropped(data, method, ratio):
    groups, rewards = data
    chosen = run(batch(groups, rewards), method=method, ratio=ratio)
    keep = chosen.row_keep.tolist()
    by_group: dict[int, set[bool]] = {}
    for g, k in zip(groups, keep, strict=True):
        by_group.setdefault(g, set()).add(k)
    assert all(len(v) == 1 for v in by_group.values())
    dropped = sum(not next(iter(v)) for v in by_group.values())
    n = len(by_group)
    if method == "dapo":
        values: dict[int, set[float]] = {}
        for g, r in zip(groups, rewards, strict=True):
            values.setdefault(g, set()).add(r)
        varied = {g for g, v in values.items() if len(v) > 1}
        assert {g for g, v in by_group.items() if v == {True}} == varied
    else:
        assert dropped == int(n * ratio)
    close(chosen.metrics["at/filtered_frac"], keep.count(False) / len(keep), atol=1e-12)
    assert chosen.metrics["at/kept_groups"] == n - dropped


@PROPERTY
@given(data=grouped(), method=st.sampled_from(["std", "mean"]), ratio=st.floats(0, 1))
def test_every_dropped_group_ranks_no_higher_than_every_kept_one(data, method, ratio):
    groups, rewards = data
    keep = run(batch(groups, rewards), method=method, ratio=ratio).row_keep.tolist()
    members: dict[int, list[float]] = {}
    for g, r in zip(groups, rewards, strict=True):
        members.setdefault(g, []).append(r)

    def key(rs):
        if len(rs) < 2:
            return 0.0
        if method == "mean":
            return sum(rs) / len(rs)
        spread = max(rs) - min(rs)
        mu = sum(rs) / len(rs)
        return 0.0 if spread == 0 else sum((r - mu) ** 2 for r in rs) / len(rs) / spread**2

    kept = {g for g, k in zip(groups, keep, strict=True) if k}
    dropped = set(members) - kept
    if kept and dropped:
        assert max(key(members[g]) for g in dropped) <= min(key(members[g]) for g in kept) + 1e-12
