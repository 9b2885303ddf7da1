"""countdown: hand-made verifier cases (right, wrong, malformed, adversarial), the solver,
and generator properties (every instance solvable by its own answer)."""

from __future__ import annotations

from collections import Counter

import pytest

import policylab.tasks as tasks
from policylab.tasks.countdown import solve
from policylab.tasks.expression import evaluate

TASK = tasks.get("countdown")
EXAMPLE = {"numbers": [3, 5, 7], "target": 22}


@pytest.mark.parametrize(
    ("answer", "reward"),
    [
        ("3*5+7", 1.0),
        ("7+5*3", 1.0),
        ("(3*5)+7", 1.0),
        (" 3 * 5 + 7 ", 1.0),
        ("((3)*(5))+(7)", 1.0),
        ("3+5+7", 0.0),  # wrong value
        ("3*7+5", 0.0),
        ("3*5", 0.0),  # a number unused
        ("15+7", 0.0),  # a number not given
        ("3*5+7+3-3", 0.0),  # a number used twice
        ("3*5+7+0", 0.0),
        ("3*5+7-7+7", 0.0),
        ("03*5+7", 0.0),  # leading zero
        ("3.0*5+7", 0.0),
        ("3*5+7=22", 0.0),
        ("22", 0.0),
        ("", 0.0),
        ("-3*5+37", 0.0),  # unary minus
        ("3**5+7", 0.0),  # power
        ("(3*5+7", 0.0),  # unbalanced
        ("3*5+7)", 0.0),
        (")3*5+7(", 0.0),
        ("3*5+7; import os", 0.0),  # code
        ("__import__('os').system('ls')", 0.0),
        ("eval('3*5+7')", 0.0),
        ("9" * 10_000, 0.0),  # huge
        ("99999**99999", 0.0),
        ("(" * 30 + "3*5+7" + ")" * 30, 0.0),  # longer than 64 characters
    ],
)
def test_verify(answer, reward):
    assert TASK.verify(f"<answer>{answer}</answer>", EXAMPLE) == reward


@pytest.mark.parametrize(
    ("answer", "numbers", "target", "reward"),
    [
        ("5/(3-3)", [3, 3, 5], 0, 0.0),  # division by zero
        ("5/(3-3)", [3, 3, 5], 5, 0.0),
        ("3/2*4", [2, 3, 4], 6, 1.0),  # a fractional intermediate is allowed
        ("2-5+4", [2, 4, 5], 1, 1.0),  # so is a negative one
        ("4/(2-2)+1", [1, 2, 2, 4], 1, 0.0),
    ],
)
def test_verify_arithmetic_edge_cases(answer, numbers, target, reward):
    example = {"numbers": numbers, "target": target}
    assert TASK.verify(f"<answer>{answer}</answer>", example) == reward


def test_verify_needs_the_tags():
    assert TASK.verify("3*5+7", EXAMPLE) == 0.0
    assert TASK.verify("<answer>3+5+7</answer><answer>3*5+7</answer>", EXAMPLE) == 0.0
    assert TASK.verify("<answer>3*5+7</answer><answer>3+5+7</answer>", EXAMPLE) == 1.0


@pytest.mark.parametrize(
    ("numbers", "target", "expected"),
    [
        ([3, 5, 7], 22, "3*5+7"),  # 3+5 fails, then 3*5 = 15, 15 + 7 = 22
        ([1, 2, 10], 7, "10-(1+2)"),  # parentheses where precedence needs them
        ([4, 8], 2, "8/4"),
        ([2, 3], 7, None),  # unsolvable
        ([2, 9, 18], 11, "18-(9-2)"),
    ],
)
def test_solve(numbers, target, expected):
    assert solve(numbers, target) == expected


@pytest.mark.parametrize(
    ("knobs", "n"),
    [
        ({}, 200),
        ({"n_numbers": 2, "max_number": 9}, 50),
        ({"n_numbers": 4, "max_number": 50, "max_target": 500}, 200),
        ({"n_numbers": 5, "max_number": 99, "max_target": 9999}, 20),
    ],
)
def test_every_instance_is_solved_by_its_answer(knobs, n):
    task = tasks.get("countdown", **knobs)
    k = task.knobs
    for example in task.examples("train", n, seed=11):
        numbers, target = example["numbers"], example["target"]
        assert len(numbers) == k.n_numbers and numbers == sorted(numbers)
        assert all(1 <= x <= k.max_number for x in numbers)
        assert 1 <= target <= k.max_target
        assert example["prompt"] == f"{' '.join(map(str, numbers))} -> {target}:"
        value, literals = evaluate(example["answer"])
        assert value == target and Counter(literals) == Counter(numbers)
        assert task.verify(example["completion"], example) == 1.0
