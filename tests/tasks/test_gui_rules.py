"""GUI-R1's and SE-GUI's rewards (tasks/gui_rules.py) with the spec's hand-computed
numbers (papers/seed_agents.md §A6, "Tests": box [10, 20, 30, 40], image 100 × 80), the
edge option, counted faults, and properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policylab import rewards
from policylab.tasks import gui_rules
from policylab.tasks.gui_rules import (
    Parsed,
    gui_r1_acc,
    in_box,
    point_reward,
    token_f1,
)

BOX = [10, 20, 30, 40]


def test_se_gui_point_reward_spec_numbers():
    # centre (20, 30)/(100, 80) = (0.2, 0.375); d_max to the corner (1, 1):
    # 0.8² + 0.625² = 1.030625.
    # (12, 22) → (0.12, 0.275): d² = 0.08² + 0.1² = 0.0164; 1 − 0.0164/1.030625 = 0.9840873
    assert point_reward(12, 22, BOX, 100, 80) == pytest.approx(1.9840873, abs=1e-7)
    # (50, 70) → (0.5, 0.875): d² = 0.3² + 0.5² = 0.34; outside: 1 − 0.34/1.030625
    assert point_reward(50, 70, BOX, 100, 80) == pytest.approx(0.6701031, abs=1e-7)
    # the edge (10, 25) → (0.1, 0.3125): d² = 0.01 + 0.0625² = 0.01390625; inside (x0 ≤ x)
    assert point_reward(10, 25, BOX, 100, 80) == pytest.approx(1.9865070, abs=1e-7)
    # the same edge point under GUI-R1's strict rule loses the indicator only
    assert point_reward(10, 25, BOX, 100, 80, inclusive=False) == pytest.approx(0.9865070, abs=1e-7)


def test_gui_r1_click_is_strict_and_needs_the_right_type():
    assert gui_r1_acc(Parsed("click", (25, 30)), "click", BOX, "") == 1.0
    assert gui_r1_acc(Parsed("click", (10, 25)), "click", BOX, "") == 0.0  # edge: strict
    assert gui_r1_acc(Parsed("click", (10, 25)), "click", BOX, "", inclusive=True) == 1.0
    # a wrong action type scores 0 whatever the point
    assert gui_r1_acc(Parsed("type", (25, 30), "x"), "click", BOX, "") == 0.0
    assert in_box(10, 25, BOX, inclusive=True) and not in_box(10, 25, BOX, inclusive=False)


def test_gui_r1_text_f1_and_substring_rule():
    # pred 2 tokens, gold 3, common 2: P = 1, R = 2/3, F1 = 2·(2/3)/(5/3) = 0.8
    assert token_f1("hello world", "hello there world") == pytest.approx(0.8)
    assert gui_r1_acc(Parsed("type", (0, 0), "hello world"), "type", BOX, "hello there world") == 1
    assert token_f1("cat", "category") == 1.0  # single tokens: substring
    assert token_f1("a b", "c d") == 0.0
    assert gui_r1_acc(Parsed("type", (0, 0), "a b"), "type", BOX, "c d") == 0.0
    assert gui_r1_acc(Parsed("scroll", None, "up"), "scroll", [], "up") == 1.0
    assert gui_r1_acc(Parsed("back"), "back", [], "") == 1.0


def _call(name, answers, mode="action", action="click", box=(60, 20, 69, 29), text="", edge=None):
    n = len(answers)
    completions = [f"<answer>{a}</answer>" if a is not None else "no answer" for a in answers]
    cols = {"mode": [mode] * n, "action": [action] * n, "box": [list(box)] * n, "text": [text] * n}
    if edge is not None:
        cols["edge"] = [edge] * n
    return rewards.get(name)([""] * n, completions, **cols)


def test_gui_r1_overall_is_point_eight_acc_plus_point_two_format():
    # box [60, 20, 69, 29]: (64, 24) strictly inside; (60, 24) on the edge; (10, 10) a miss;
    # "t 64,24 5" the wrong type; "c 64;24" does not parse; no answer block at all
    answers = ["c 64,24", "c 60,24", "c 10,10", "t 64,24 5", "c 64;24", None]
    assert _call("gui_r1", answers) == pytest.approx([1.0, 0.2, 0.2, 0.2, 0.0, 0.0])
    assert _call("gui/format", answers) == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    assert _call("gui/acc", answers) == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    # the edge option: inclusive makes the edge click count
    assert _call("gui_r1", answers, edge="inclusive")[1] == pytest.approx(1.0)


def test_grounding_rewards_on_the_gui_text_screen():
    # screen 100 × 50, box [60, 20, 69, 29], centre (64.5, 24.5) → (0.645, 0.49);
    # d_max² to the farthest corner (0, 1): 0.645² + 0.51² = 0.676125.
    # (64, 24): d² = 0.005² + 0.01² = 0.000125 → 1 + (1 − 0.000125/0.676125) = 1.99981512
    # (60, 29) edge: d² = 0.045² + 0.09² = 0.010125 → inclusive 1 + 0.98502496, strict 0.98502496
    # (0, 0): d² = 0.645² + 0.49² = 0.656125 → 0 + (1 − 0.656125/0.676125) = 0.02958033
    answers = ["64,24", "60,29", "0,0"]
    got = _call("se_gui_point", answers, mode="ground")
    assert got == pytest.approx([1.99981512, 1.98502496, 0.02958033], abs=1e-8)
    strict = _call("se_gui_point", answers, mode="ground", edge="strict")
    assert strict == pytest.approx([1.99981512, 0.98502496, 0.02958033], abs=1e-8)
    assert _call("gui_hit", answers, mode="ground") == [1.0, 1.0, 0.0]
    assert _call("gui_hit", answers, mode="ground", edge="strict") == [1.0, 0.0, 0.0]


def test_faults_score_zero_in_every_reward_and_are_counted_by_reason():
    gui_rules.FAULTS.clear()
    # off screen (x = 100 on a 0..99 screen), unparseable, no answer block
    answers = ["100,10", "64,x", None]
    for name in ("se_gui_point", "gui_hit", "gui_r1"):
        assert _call(name, answers, mode="ground") == [0.0, 0.0, 0.0]
    counts = gui_rules.faults()
    for name in ("se_gui_point", "gui_hit", "gui_r1"):
        assert [counts[f"{name}/{r}"] for r in ("off_screen", "unparseable", "no_answer")] == [
            1,
            1,
            1,
        ]


def test_rows_without_a_box_score_type_and_text():
    assert _call("gui_hit", ["s up", "s down", "b"], action="scroll", box=(), text="up") == [
        1.0,
        0.0,
        0.0,
    ]
    assert _call("se_gui_point", ["b", "s up"], action="back", box=(), text="") == [1.0, 0.0]
    assert _call("gui_r1", ["s sideways"], action="scroll", box=(), text="up") == [0.0]


def test_an_unknown_edge_rule_is_an_error_naming_the_choices():
    with pytest.raises(ValueError, match="edge='diagonal'.*paper, strict, inclusive"):
        _call("gui_hit", ["64,24"], mode="ground", edge="diagonal")


@settings(max_examples=60, deadline=None)
@given(
    x=st.integers(0, 99),
    y=st.integers(0, 49),
    c0=st.integers(0, 9),
    r0=st.integers(0, 4),
    w=st.integers(1, 3),
    h=st.integers(1, 2),
)
def test_dense_reward_bounds_and_order(x, y, c0, r0, w, h):
    box = [c0 * 10, r0 * 10, min(99, (c0 + w) * 10 - 1), min(49, (r0 + h) * 10 - 1)]
    dense = point_reward(x, y, box, 100, 50)
    hit = float(in_box(x, y, box, True))
    assert 0.0 <= dense <= 2.0
    assert dense >= hit  # the dense term is never negative
    assert math.floor(dense) == hit or dense == 2.0  # the integer part is the indicator
    # the strict rule never scores above the inclusive one
    assert point_reward(x, y, box, 100, 50, inclusive=False) <= dense


def test_each_kind_of_fault_is_logged_once_with_its_answer(caplog):
    from policylab.rewards import FAULTS

    gui_rules.FAULTS.clear()
    FAULTS.take()
    with caplog.at_level("WARNING", logger="policylab.tasks.gui_rules"):
        _call("gui_hit", ["250,10", "250,11", "9,9,9"], mode="ground")
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2  # off_screen once (two samples), unparseable once
    assert "off_screen" in said[0] and "250,10" in said[0]
    assert "unparseable" in said[1] and "9,9,9" in said[1]
    assert gui_rules.faults() == {"gui_hit/off_screen": 2, "gui_hit/unparseable": 1}
    # and the step's counts for the trainer's metrics, once
    assert FAULTS.take() == {
        "reward/fault/gui_hit/off_screen": 2.0,
        "reward/fault/gui_hit/unparseable": 1.0,
    }
