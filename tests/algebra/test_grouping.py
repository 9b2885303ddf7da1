"""Grouping keys (agents spec §A0.4): the hand case T-A0.2, the ways keys and columns are
named, errors, properties (relabelling invariance, first-appearance numbering), and
AT-GRPO's (instance, turn, agent) groups through the existing grpo estimator (§A1 T2)."""

from __future__ import annotations

import pytest
import torch
from algebra_testing import PROPERTY
from hypothesis import given
from hypothesis import strategies as st

import policylab
from policylab import Rollouts
from policylab.algebra.grouping import group_by


def test_t_a0_2_instance_turn_agent():
    # (e, t, k) = (0,0,0) (0,0,0) (0,0,1) (0,1,0) (1,0,0): rows 0 and 1 share a tuple,
    # every other tuple is new, numbered as it first appears → [0, 0, 1, 2, 3]
    columns = {
        "instance": torch.tensor([0, 0, 0, 0, 1]),
        "turn": torch.tensor([0, 0, 0, 1, 0]),
        "agent": torch.tensor([0, 0, 1, 0, 0]),
    }
    assert group_by(columns, ("instance", "turn", "agent")).tolist() == [0, 0, 1, 2, 3]
    assert group_by(columns, "instance, turn,agent").tolist() == [0, 0, 1, 2, 3]
    assert group_by(columns, "instance").tolist() == [0, 0, 0, 0, 1]
    assert group_by(columns, "agent").tolist() == [0, 0, 1, 0, 0]


def test_numbering_follows_first_appearance_not_value_order():
    # instance values 7, 3, 7, 5: 7 appears first → 0, then 3 → 1, then 5 → 2
    ids = group_by({"instance": [7, 3, 7, 5]}, "instance")
    assert ids.dtype == torch.long
    assert ids.tolist() == [0, 1, 0, 2]


def test_anchor_strings_and_mixed_column_types():
    # a list of anchor texts next to a tensor: equal (instance, anchor) pairs share a group;
    # the reflect rows share the anchor "reflection" within an instance, not across them
    columns = {
        "instance": torch.tensor([0, 0, 0, 1, 0, 1]),
        "anchor": ["S..G", "S.xG", "S..G", "S..G", "reflection", "reflection"],
    }
    assert group_by(columns, "instance,anchor").tolist() == [0, 1, 0, 2, 3, 4]


def test_values_compare_by_value_and_nested_lists_hash():
    assert group_by({"x": torch.tensor([1.0, 2.0, 1.0])}, "x").tolist() == [0, 1, 0]
    assert group_by({"s": [[1, 2], [1, 2], [2, 1]]}, "s").tolist() == [0, 0, 1]


def test_rollouts_columns_extras_first_then_row_fields():
    batch = Rollouts(
        rewards=torch.zeros(4),
        response_mask=torch.ones(4, 2),
        agent_ids=torch.tensor([0, 1, 0, 1]),
        extras={"instance": torch.tensor([0, 0, 0, 1]), "turn": [0, 0, 1, 0]},
    )
    assert group_by(batch, "instance,turn,agent").tolist() == [0, 1, 2, 3]
    assert group_by(batch, "instance,agent").tolist() == [0, 1, 0, 2]
    # an extras column of the same name as a row field wins
    shadowed = batch.with_extras({"agent": [5, 5, 5, 5]})
    assert group_by(shadowed, "instance,agent").tolist() == [0, 0, 0, 1]


def test_unknown_key_lists_the_available_columns():
    batch = Rollouts(
        rewards=torch.zeros(2),
        response_mask=torch.ones(2, 1),
        agent_ids=torch.tensor([0, 1]),
        extras={"instance": [0, 0]},
    )
    with pytest.raises(ValueError, match="'attempt'") as err:
        group_by(batch, "instance,attempt")
    assert "agent" in str(err.value) and "instance" in str(err.value)
    with pytest.raises(ValueError, match="empty"):
        group_by(batch, "instance,")
    with pytest.raises(ValueError, match="different lengths"):
        group_by({"a": [0, 1], "b": [0]}, "a,b")


def test_empty_batch_gives_no_ids():
    assert group_by({"instance": torch.zeros(0, dtype=torch.long)}, "instance").shape == (0,)


# ------------------------------------------------------------------------ properties
keys_tables = st.integers(1, 12).flatmap(
    lambda b: st.lists(st.lists(st.integers(0, 3), min_size=b, max_size=b), min_size=1, max_size=3)
)


@PROPERTY
@given(columns=keys_tables, offset=st.integers(1, 50))
def test_relabelling_a_column_never_changes_the_groups(columns, offset):
    # any injective relabelling of each column's values (here v → str(v·7 + offset))
    names = [f"c{j}" for j in range(len(columns))]
    table = {n: torch.tensor(c) for n, c in zip(names, columns, strict=True)}
    relabelled = {n: [f"v{v * 7 + offset}" for v in c] for n, c in zip(names, columns, strict=True)}
    assert torch.equal(group_by(table, names), group_by(relabelled, names))


@PROPERTY
@given(columns=keys_tables)
def test_ids_are_dense_first_appearance_and_exact(columns):
    names = [f"c{j}" for j in range(len(columns))]
    ids = group_by(dict(zip(names, columns, strict=True)), names).tolist()
    tuples = list(zip(*columns, strict=True))
    seen = -1
    for i, g in enumerate(ids):
        assert g <= seen + 1  # a new id is the next integer
        seen = max(seen, g)
        for j in range(i):
            assert (ids[i] == ids[j]) == (tuples[i] == tuples[j])


# ------------------------------------------------- AT-GRPO through the existing grpo
def test_at_grpo_t2_one_group_through_grpo():
    # spec §A1 T2: K = 4 branches of one (e, t, k) group with turn rewards
    # (3.49, 1.0, −0.08, 0.92), next to rows of other (e, t, k) groups that must not mix.
    # mean = 5.33/4 = 1.3325; deviations (2.1575, −0.3325, −1.4125, −0.4125);
    # Σ dev² = 6.930675; Bessel σ = sqrt(6.930675/3) = 1.5199424 (grpo's std; the
    # population σ 1.3163 would give A_0 = 1.639, not the spec's 1.4194607);
    # A = dev/(σ + 1e-6) = (1.4194607, −0.2187581, −0.9293109, −0.2713917)
    columns = {
        "instance": torch.tensor([0, 0, 0, 0, 0, 0, 1, 1]),
        "turn": torch.tensor([0, 0, 0, 0, 0, 0, 0, 0]),
        "agent": torch.tensor([1, 1, 1, 1, 0, 0, 1, 1]),
    }
    rewards = torch.tensor([3.49, 1.0, -0.08, 0.92, 5.0, -5.0, 0.0, 2.0], dtype=torch.float64)
    groups = group_by(columns, "instance,turn,agent")
    assert groups.tolist() == [0, 0, 0, 0, 1, 1, 2, 2]
    grpo = policylab.advantages("component:grpo", eps=1e-6)
    A = grpo(rewards=rewards, group_ids=groups)
    expected = torch.tensor([1.4194607, -0.2187581, -0.9293109, -0.2713917], dtype=torch.float64)
    torch.testing.assert_close(A[:4], expected, atol=5e-8, rtol=0.0)
    # the code's doubled plan reward: A moves through eps only, by less than 5e-7
    doubled = grpo(rewards=2 * rewards, group_ids=groups)
    change = (doubled[:4] - A[:4]).abs()
    assert 0 < float(change.max()) < 5e-7
