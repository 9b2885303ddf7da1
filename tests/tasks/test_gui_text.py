"""gui_text: screens, boxes, canonical answers, the exact verifier, held-out layouts,
knob errors and the noisy demonstrator (papers/seed_agents.md §A6)."""

from __future__ import annotations

import random

import pytest

import policylab.tasks as tasks
from policylab import rewards
from policylab.tasks.base import split_of
from policylab.tasks.gui_text import GuiTextKnobs, answer_for, box_of, centre, draw_screen

REWARD_NAMES = ("gui_r1", "gui/format", "gui/acc", "gui_hit")


def _columns(rows):
    return {k: [r[k] for r in rows] for k in ("mode", "action", "box", "text", "edge")}


def test_box_and_centre_by_hand():
    # an element 2 cells wide, 1 high, top-left cell (col 6, row 2): x 60..79, y 20..29
    assert box_of(6, 2, 2, 1) == [60, 20, 79, 29]
    assert centre([60, 20, 79, 29]) == (69, 24)  # (60 + 79) // 2, (20 + 29) // 2
    assert answer_for("ground", "click", (69, 24), "") == "69,24"
    assert answer_for("action", "type", (69, 24), "42") == "t 69,24 42"
    assert answer_for("action", "scroll", None, "up") == "s up"
    assert answer_for("action", "back", None, "") == "b"


def test_screen_rows_match_the_element_boxes():
    rng = random.Random(3)
    screen, elements = draw_screen(rng, GuiTextKnobs())
    rows = screen.split("/")
    assert len(rows) == 5 and all(len(r) == 10 for r in rows)
    for letter, (box, cells) in elements.items():
        covered = {(c, r) for r, row in enumerate(rows) for c, ch in enumerate(row) if ch == letter}
        x0, y0, x1, y1 = box
        assert covered == {
            (c, r) for c in range(x0 // 10, x1 // 10 + 1) for r in range(y0 // 10, y1 // 10 + 1)
        }
        assert len(covered) == cells


@pytest.mark.parametrize("mode", ["ground", "action"])
def test_canonical_answers_score_full_marks_and_prompts_fit(mode):
    task = tasks.get("gui_text", mode=mode)
    rows = task.examples("train", 60, seed=1)
    prompts, completions = [r["prompt"] for r in rows], [r["completion"] for r in rows]
    assert task.reward(prompts, completions, **_columns(rows)) == [1.0] * 60
    for name in REWARD_NAMES:
        assert rewards.get(name)(prompts, completions, **_columns(rows)) == [1.0] * 60
    # SE-GUI's reward: 1 + dense near the centre for boxed rows, 1 for scroll/back
    dense = rewards.get("se_gui_point")(prompts, completions, **_columns(rows))
    assert all(d > 1.9 if r["box"] else d == 1.0 for d, r in zip(dense, rows, strict=True))
    # prompt + completion + end token within the tiny model's 128 positions
    assert max(len(p) + len(c) + 1 for p, c in zip(prompts, completions, strict=True)) <= 128
    assert all(set(p) <= set(task.chars) for p in prompts)


def test_verifier_is_exact_where_gui_r1_is_lenient():
    row = {
        "prompt": "",
        "mode": "action",
        "action": "type",
        "box": [60, 20, 79, 29],
        "text": "42",
        "edge": "paper",
    }
    task = tasks.get("gui_text", mode="action")
    # "4" is a substring of "42": GUI-R1's acc counts it, the exact verifier does not
    assert task.verify("<answer>t 65,25 4</answer>", row) == 0.0
    assert task.verify("<answer>t 65,25 42</answer>", row) == 1.0
    assert task.verify("<answer>t 90,25 42</answer>", row) == 0.0  # point off the element
    cols = {k: [row[k]] for k in ("mode", "action", "box", "text", "edge")}
    assert rewards.get("gui/acc")([""], ["<answer>t 90,25 4</answer>"], **cols) == [1.0]
    # edges: on the element's pixels counts unless edge=strict
    click = {**row, "action": "click", "text": ""}
    assert task.verify("<answer>c 60,20</answer>", click) == 1.0
    assert task.verify("<answer>c 60,20</answer>", {**click, "edge": "strict"}) == 0.0


def test_held_out_screens_never_appear_in_training():
    task = tasks.get("gui_text")
    train = {r["screen"] for r in task.examples("train", 400, seed=0)}
    test = task.examples("test", 60, seed=0)
    assert not train & {r["screen"] for r in test}
    assert all(split_of("gui_text", r["screen"]) == "test" for r in test)


@pytest.mark.parametrize(
    ("knob", "value", "accepted"),
    [
        ("mode", "swipe", "ground, action"),
        ("edge", "fuzzy", "paper, strict, inclusive"),
        ("max_width", 9, "an integer from 1 to 5"),
        ("max_elements", 2, "an integer from 3 to 8"),
        ("demo_noise", 1.5, "a number from 0.0 to 1.0"),
    ],
)
def test_bad_knobs_name_the_knob_value_and_choices(knob, value, accepted):
    with pytest.raises(ValueError, match=f"{knob}={value!r}.*{accepted}"):
        tasks.get("gui_text", **{knob: value})


def test_demonstrator_noise_moves_about_that_share_of_points():
    task = tasks.get("gui_text", demo_noise=0.5)
    rows = task.demonstrations(400, seed=0)
    columns = _columns(rows)
    prompts = [r["prompt"] for r in rows]
    hits = task.reward(prompts, [r["completion"] for r in rows], **columns)
    # a random point lands on the target now and then (targets cover ~2.5 of 50 cells)
    assert 0.45 <= sum(hits) / len(hits) <= 0.62
    clean = tasks.get("gui_text", demo_noise=0.0).demonstrations(50, seed=0)
    assert all(r["completion"] == f"<answer>{r['answer']}</answer>" for r in clean)


def test_edge_knob_reaches_the_rewards_through_the_column():
    task = tasks.get("gui_text", edge="strict")
    rows = task.examples("train", 5, seed=0)
    assert {r["edge"] for r in rows} == {"strict"}
    # a click on the top-left pixel of each target: edge, so a miss under the strict rule
    completions = [f"<answer>{r['box'][0]},{r['box'][1]}</answer>" for r in rows]
    prompts = [r["prompt"] for r in rows]
    assert rewards.get("gui_hit")(prompts, completions, **_columns(rows)) == [0.0] * 5
    loose = {**_columns(rows), "edge": ["inclusive"] * 5}
    assert rewards.get("gui_hit")(prompts, completions, **loose) == [1.0] * 5
