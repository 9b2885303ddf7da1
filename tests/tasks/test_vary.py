"""Difficulty-aware variants of embedded tasks (spec §5.2, [ours]): each task's ladder
matches its knobs' valid ranges, shifted knobs move the right way by the hand-computed
number of steps and stop at the ends, and `vary` returns a fresh train-split instance of
the shifted task that its own verifier accepts with its reference answer, seeded."""

from __future__ import annotations

import dataclasses
import random
import re

import pytest

import policylab.tasks as tasks
from policylab.tasks.arithmetic import Arithmetic
from policylab.tasks.base import split_of

NAMES = ["arithmetic", "countdown", "plan_path", "sudoku4"]
LADDERS = {
    "arithmetic": (("digits", 1, 4), ("n_operands", 2, 4)),
    "countdown": (("n_numbers", 2, 5),),
    "plan_path": (("size", 2, 6),),
    "sudoku4": (("blanks", 1, 12),),
}


def measured(name: str, example: dict) -> dict[str, int]:
    """The ladder knobs an example shows: exact for all but arithmetic's digits, which is
    the widest operand (operands are drawn up to `digits` digits)."""
    if name == "arithmetic":
        operands = re.findall(r"[0-9]+", example["prompt"])
        return {"digits": max(map(len, operands)), "n_operands": len(operands)}
    if name == "countdown":
        return {"n_numbers": len(example["numbers"])}
    if name == "plan_path":
        return {"size": len(example["grid"].split("/"))}
    return {"blanks": example["puzzle"].count(".")}


def ladder_knobs(task) -> dict[str, int]:
    return {knob: getattr(task.knobs, knob) for knob, _, _ in task.ladder}


@pytest.mark.parametrize("name", NAMES)
def test_ladder_is_the_knobs_valid_range(name):
    cls = tasks.task_classes.get(name)
    assert cls.ladder == LADDERS[name]
    for knob, low, high in cls.ladder:
        assert getattr(cls(**{knob: low}).knobs, knob) == low
        assert getattr(cls(**{knob: high}).knobs, knob) == high
        for outside in (low - 1, high + 1):
            with pytest.raises(ValueError, match=f"{knob}={outside}"):
                cls(**{knob: outside})


@pytest.mark.parametrize(
    ("knobs", "harder", "level", "expected"),
    [
        # arithmetic span (4 − 1) + (4 − 2) = 5; steps s = max(1, ⌊5ℓ + ½⌋)
        ({"digits": 2, "n_operands": 2}, True, 0.0, (3, 2)),  # s = 1 (at least one)
        ({"digits": 2, "n_operands": 2}, True, 0.1, (3, 2)),  # ⌊1.0⌋ = 1
        ({"digits": 2, "n_operands": 2}, True, 0.3, (4, 2)),  # ⌊2.0⌋ = 2: digits to its top
        ({"digits": 2, "n_operands": 2}, True, 0.5, (4, 3)),  # ⌊3.0⌋ = 3: 2 + 1 spills over
        ({"digits": 2, "n_operands": 2}, True, 1.0, (4, 4)),  # s = 5: the ladder's end
        ({"digits": 4, "n_operands": 4}, False, 0.5, (1, 4)),  # s = 3, all on digits
        ({"digits": 1, "n_operands": 3}, False, 0.0, (1, 2)),  # digits at 1: n_operands moves
        ({"digits": 3, "n_operands": 4}, False, 1.0, (1, 2)),
    ],
)
def test_arithmetic_shift_by_hand(knobs, harder, level, expected):
    shifted = tasks.get("arithmetic", **knobs).shifted_knobs(harder, level)
    assert (shifted.digits, shifted.n_operands) == expected
    assert shifted.ops == "+"  # knobs off the ladder stay as set


def test_half_steps_round_up():
    # sudoku4 span 11: ℓ = 1.5/11 → 1.5 steps → 2 (round() would give 2 too); 2.5/11 → 3
    task = tasks.get("sudoku4", blanks=1)
    assert task.shifted_knobs(True, 1.5 / 11).blanks == 3
    assert task.shifted_knobs(True, 2.5 / 11).blanks == 4  # round(2.5) would be 2


@pytest.mark.parametrize("level", [0.0, 0.2, 0.6, 1.0])
@pytest.mark.parametrize("harder", [True, False])
@pytest.mark.parametrize("name", NAMES)
def test_shift_moves_the_right_way_and_stays_in_range(name, harder, level):
    # start mid-ladder so that both directions can move
    middle = {knob: (low + high) // 2 for knob, low, high in LADDERS[name]}
    task = tasks.get(name, **middle)
    shifted = task.shifted_knobs(harder, level)
    sign = 1 if harder else -1
    moves = [sign * (getattr(shifted, knob) - middle[knob]) for knob in middle]
    assert all(m >= 0 for m in moves) and sum(moves) >= 1
    for knob, low, high in LADDERS[name]:
        assert low <= getattr(shifted, knob) <= high
    if level == 1.0:  # ℓ = 1 goes to the end of the ladder
        ends = {knob: high if harder else low for knob, low, high in LADDERS[name]}
        assert {knob: getattr(shifted, knob) for knob in middle} == ends


@pytest.mark.parametrize("name", NAMES)
def test_no_shift_past_the_end(name):
    top = {knob: high for knob, _, high in LADDERS[name]}
    bottom = {knob: low for knob, low, _ in LADDERS[name]}
    example = {"prompt": "unused"}
    assert tasks.get(name, **top).shifted_knobs(True, 0.5) is None
    assert tasks.get(name, **top).vary(example, True, 0.5, random.Random(0)) is None
    assert tasks.get(name, **bottom).shifted_knobs(False, 1.0) is None
    assert tasks.get(name, **bottom).vary(example, False, 1.0, random.Random(0)) is None


def test_a_task_without_a_ladder_cannot_vary():
    class Fixed(Arithmetic):
        ladder = ()

    example = Fixed().examples("train", 1)[0]
    assert Fixed().shifted_knobs(True, 1.0) is None
    assert Fixed().vary(example, True, 1.0, random.Random(0)) is None


@pytest.mark.parametrize("level", [-0.1, 1.5, True, "high"])
def test_bad_level(level):
    with pytest.raises(ValueError, match="level=.* accepted: a number from 0 to 1"):
        tasks.get("countdown").shifted_knobs(True, level)


@pytest.mark.parametrize("level", [0.0, 1.0])
@pytest.mark.parametrize("harder", [True, False])
@pytest.mark.parametrize("name", NAMES)
def test_vary_gives_a_valid_train_instance_of_the_shifted_task(name, harder, level):
    task = tasks.get(name)
    originals = task.examples("train", 5, seed=0)
    shifted = ladder_knobs(task.__class__(**dataclasses.asdict(task.shifted_knobs(harder, level))))
    for i, original in enumerate(originals):
        variant = task.vary(original, harder, level, random.Random(i))
        assert variant is not None
        assert variant.keys() == original.keys()
        assert variant["prompt"] != original["prompt"]
        assert split_of(name, variant["prompt"]) == "train"
        assert variant["completion"] == f"<answer>{variant['answer']}</answer>"
        assert task.verify(variant["completion"], variant) == 1.0, variant
        shown = measured(name, variant)
        if name == "arithmetic":  # operands have up to `digits` digits
            assert shown["n_operands"] == shifted["n_operands"]
            assert shown["digits"] <= shifted["digits"]
        else:
            assert shown == shifted


@pytest.mark.parametrize("name", NAMES)
def test_level_sets_the_size_of_the_shift(name):
    # from the defaults, harder at ℓ = 0 moves one step and ℓ = 1 to the ladder's end
    task = tasks.get(name)
    start = ladder_knobs(task)
    first = LADDERS[name][0][0]
    near = ladder_knobs(task.__class__(**dataclasses.asdict(task.shifted_knobs(True, 0.0))))
    far = ladder_knobs(task.__class__(**dataclasses.asdict(task.shifted_knobs(True, 1.0))))
    assert near == {**start, first: start[first] + 1}
    assert far == {knob: high for knob, _, high in LADDERS[name]}


@pytest.mark.parametrize("name", NAMES)
def test_vary_is_seeded(name):
    task = tasks.get(name)
    original = task.examples("train", 1, seed=0)[0]
    a = [task.vary(original, True, 0.0, random.Random(3)) for _ in range(2)]
    assert a[0] == a[1]
    rng = random.Random(3)
    stream = [task.vary(original, True, 0.0, rng) for _ in range(6)]
    assert stream[0] == a[0]
    assert len({v["prompt"] for v in stream}) > 1  # the generator moves on


def test_vary_never_draws_a_test_prompt():
    # easier than 3 blanks: 2-blank puzzles, a small space with about a tenth in the test split
    task = tasks.get("sudoku4", blanks=3)
    rng = random.Random(0)
    variants = [task.vary({"prompt": "?"}, False, 0.0, rng) for _ in range(300)]
    assert all(split_of("sudoku4", v["prompt"]) == "train" for v in variants)
    assert {v["puzzle"].count(".") for v in variants} == {2}


def test_draw_excludes_prompts_and_checks_the_split():
    task = tasks.get("arithmetic", digits=1)
    first = task.draw("train", random.Random(0))
    other = task.draw("train", random.Random(0), exclude={first["prompt"]})
    assert other["prompt"] != first["prompt"]
    with pytest.raises(ValueError, match="split='valid'"):
        task.draw("valid", random.Random(0))


def test_draw_gives_up_on_an_exhausted_space():
    # digits=1, one "+", 2 operands: 100 prompts; excluding every train one leaves none
    task = tasks.get("arithmetic", digits=1)
    train = {f"{a}+{b}=" for a in range(10) for b in range(10)}
    train = {p for p in train if split_of("arithmetic", p) == "train"}
    assert task.draw("train", random.Random(0), exclude=train) is None
    assert task.draw("test", random.Random(0), exclude=train) is not None
