"""countdown step judging (BCPG-NSA stages 1–2, spec §15.5): segmentation, J1, J2, the
consensus with error propagation and termination, the exhaustive reachability search
against a brute-force reference, and the token → step mapping with a toy tokenizer."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest

import policylab.tasks as tasks
from policylab.tasks.countdown_steps import (
    MAX_SEARCH,
    countdown_step_labels,
    judge_steps,
    parse_step,
    reachable,
    segment_ids,
    step_labels,
    step_spans,
)

TASK = tasks.get("countdown")
EXAMPLE = {"numbers": [3, 5, 7], "target": 22}


def verdicts(completion, example=EXAMPLE):
    return [(s.valid, s.reachable, s.correct) for s in judge_steps(completion, example)]


def test_fully_correct_solution():
    completion = "3*5=15\n15+7=22\n<answer>3*5+7</answer>"
    assert TASK.verify(completion, EXAMPLE) == 1.0
    assert verdicts(completion) == [(True, True, True), (True, True, True)]


def test_wrong_answer_with_a_correct_first_step():
    # 15+7=23 is bad arithmetic (J1); the answer is wrong too
    completion = "3*5=15\n15+7=23\n<answer>3*5+7+1</answer>"
    assert TASK.verify(completion, EXAMPLE) == 0.0
    assert step_labels(completion, EXAMPLE) == [True, False]
    assert verdicts(completion)[1] == (False, False, False)


def test_propagation_then_termination():
    # 9 is not available (J1 false); 27 − 5 uses the wrong step's result (propagation);
    # 3*5 uses only available numbers again and leads on (termination), then 15+7 finishes
    completion = "3*9=27\n27-5=22\n3*5=15\n15+7=22\n<answer>3*5+7</answer>"
    assert step_labels(completion, EXAMPLE) == [False, False, True, True]


def test_a_dead_end_fails_the_prospect_judge():
    # 15 − 7 = 8 is valid arithmetic on available numbers, but {8} cannot make 22 (J2)
    completion = "3*5=15\n15-7=8\n<answer>3*5-7</answer>"
    assert verdicts(completion) == [(True, True, True), (True, False, False)]
    # 3 + 5 = 8 leaves {8, 7}: 15, 1, −1, 56, 8/7, 7/8 — no 22
    assert verdicts("3+5=8") == [(True, False, False)]


def test_a_dead_end_does_not_consume_its_numbers():
    # after the rejected 3+5=8 the numbers 3 and 5 are still available (backtracking)
    completion = "3+5=8\n3*5=15\n15+7=22"
    assert step_labels(completion, EXAMPLE) == [False, True, True]
    # but 8, the dead end's result, is not
    assert step_labels("3+5=8\n8*7=56", EXAMPLE) == [False, False]


def test_garbage_lines_are_wrong_steps_and_change_nothing():
    completion = "let me think\n3*5=15\n???\n\n   \n15+7=22\n<answer>3*5+7</answer> bye"
    assert step_labels(completion, EXAMPLE) == [False, True, False, True]
    assert [s.text for s in judge_steps(completion, EXAMPLE)] == [
        "let me think",
        "3*5=15",
        "???",
        "15+7=22",
    ]


def test_each_number_is_used_once():
    example = {"numbers": [3, 3, 5], "target": 45}
    assert step_labels("3*3=9\n9*5=45", example) == [True, True]
    assert verdicts("5*5=25", example) == [(False, False, False)]  # one 5 only
    assert step_labels("3*5=15\n15*3=45", example) == [True, True]


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        ("3*5=15", (3, "*", 5, 15)),
        (" 15 + 7 = 22 ", (15, "+", 7, 22)),
        ("Step 2: 15-7=8", (15, "-", 7, 8)),
        ("step 1) 8/4=2.", (8, "/", 4, 2)),
        ("3*5", None),
        ("3*5=15=15", None),
        ("3*5+1=16", None),
        ("-3*5=-15", None),
        ("x=3*5", None),
        ("", None),
    ],
)
def test_parse_step(line, parsed):
    assert parse_step(line) == parsed


@pytest.mark.parametrize(
    ("line", "valid"),
    [("15/3=5", True), ("15/4=3", False), ("5-7=2", False), ("7-5=2", True), ("7/0=0", False)],
)
def test_exact_arithmetic(line, valid):
    example = {"numbers": [0, 3, 4, 5, 7, 15], "target": 1}
    assert judge_steps(line, example)[0].valid is valid


def test_no_steps():
    assert judge_steps("<answer>3*5+7</answer>", EXAMPLE) == []
    assert judge_steps("", EXAMPLE) == []


def test_step_spans():
    completion = "  a\n\nbb \n<answer>x</answer>\nc"
    spans = step_spans(completion)
    assert spans == [(2, 3), (5, 7)]
    assert [completion[s:e] for s, e in spans] == ["a", "bb"]
    assert step_spans("a\nb") == [(0, 1), (2, 3)]  # no answer: every line
    assert step_spans("x <answer>1</answer>") == [(0, 1)]


# ------------------------------------------------------------------- J2: reachability
def brute_force(numbers, target):
    """Combine any two numbers with any op until one is left (the textbook search)."""
    if len(numbers) == 1:
        return numbers[0] == target
    for i, j in itertools.permutations(range(len(numbers)), 2):
        a, b = numbers[i], numbers[j]
        rest = [x for k, x in enumerate(numbers) if k not in (i, j)]
        results = [a + b, a - b, a * b] + ([a / b] if b != 0 else [])
        if any(brute_force([*rest, r], target) for r in results):
            return True
    return False


def test_reachable_agrees_with_brute_force():
    rng = random.Random(0)
    for _ in range(300):
        numbers = [Fraction(rng.randint(0, 6)) for _ in range(rng.randint(1, 4))]
        target = rng.randint(-10, 40)
        assert reachable(numbers, target) == brute_force(numbers, target), (numbers, target)


@pytest.mark.parametrize(
    ("numbers", "target", "expected"),
    [
        ([3, 5, 7], 22, True),
        ([15, 7], 22, True),
        ([8, 7], 22, False),
        ([3, 4], Fraction(3, 4), True),  # 3/4: fractions allowed, as in the verifier
        ([1, 5, 5, 5], 24, True),  # (5 − 1/5)·5: needs a fractional intermediate
        ([0, 5], 0, True),
        ([22], 22, True),
        ([], 22, False),
    ],
)
def test_reachable_cases(numbers, target, expected):
    assert reachable(numbers, target) is expected


def test_reachable_takes_at_most_six_numbers():
    assert reachable([1] * MAX_SEARCH, 6)
    with pytest.raises(ValueError, match="at most 6"):
        reachable([1] * (MAX_SEARCH + 1), 7)


def test_every_countdown_instance_is_reachable():
    task = tasks.get("countdown", n_numbers=4, max_number=12, max_target=200)
    for example in task.examples("train", 20, seed=3):
        assert reachable(example["numbers"], example["target"])


# ------------------------------------------------------------------- tokens → steps
def test_segment_ids_with_a_character_tokenizer():
    completion = "3*5=15\n15+7=22\n<answer>3*5+7</answer>"
    # the shipped tokenizer: one token per character, the answer tags one token each
    pieces = [*"3*5=15\n15+7=22\n", "<answer>", *"3*5+7", "</answer>", ""]
    assert "".join(pieces) == completion
    labels, seg = countdown_step_labels(pieces, EXAMPLE)
    assert labels == [True, True]
    assert seg == [0] * 6 + [-1] + [1] * 7 + [-1] + [-1] * 8


def test_segment_ids_with_multi_character_pieces():
    # pieces: "3*", "5=15\n1", "5+7=22", "\n", "<answer>…"; a piece across a line break
    # belongs to the first step it touches
    pieces = ["3*", "5=15\n1", "5+7=22", "\n", "<answer>", "22", "</answer>"]
    spans = step_spans("".join(pieces))
    assert spans == [(0, 6), (7, 14)]
    assert segment_ids(pieces, spans) == [0, 0, 1, -1, -1, -1, -1]


def test_segment_ids_skip_whitespace_and_empty_pieces():
    pieces = ["  ", "ab", "", " ", "\n", "\n", "c"]
    assert segment_ids(pieces, step_spans("".join(pieces))) == [-1, 0, -1, -1, -1, -1, 1]
    assert segment_ids([], []) == []
    assert segment_ids(["x", "y"], []) == [-1, -1]
