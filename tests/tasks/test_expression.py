"""The safe expression parser: exact values, literals in order, and hostile text -> None."""

from __future__ import annotations

from fractions import Fraction

import pytest

from policylab.tasks.expression import MAX_LENGTH, evaluate


@pytest.mark.parametrize(
    ("text", "value", "literals"),
    [
        ("7", 7, [7]),
        ("3*5+7", 22, [3, 5, 7]),
        ("7+3*5", 22, [7, 3, 5]),  # precedence: 7 + 15
        ("(7+3)*5", 50, [7, 3, 5]),
        ("10-4-3", 3, [10, 4, 3]),  # left to right: (10 - 4) - 3
        ("10-(4-3)", 9, [10, 4, 3]),
        ("12/4/3", 1, [12, 4, 3]),  # (12 / 4) / 3
        ("3/2*4", 6, [3, 2, 4]),  # exact: 3/2 * 4 = 6, the fraction is kept
        ("1/3+1/3+1/3", 1, [1, 3, 1, 3, 1, 3]),
        (" ( 2 + 3 ) * 4 ", 20, [2, 3, 4]),
        ("((((5))))", 5, [5]),
        ("2-5", -3, [2, 5]),  # a negative result is fine; a unary minus is not
        ("0", 0, [0]),
    ],
)
def test_values_and_literals(text, value, literals):
    assert evaluate(text) == (Fraction(value), literals)


def test_fraction_value_is_exact():
    assert evaluate("1/3")[0] == Fraction(1, 3)


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "-3+5",  # unary minus
        "3*-5",
        "+3",
        "2**3",  # power
        "2^3",
        "3//2",
        "(3+5",  # unbalanced
        "3+5)",
        ")(",
        "()",
        "3 5",  # two numbers, no operator
        "3+",
        "*3",
        "3.5",  # no decimals
        "07",  # no leading zeros
        "1234567",  # more than 6 digits
        "5/(3-3)",  # division by zero
        "1/0",
        "__import__('os').system('ls')",
        "abs(3)",
        "3;4",
        "x",
        "٣+1",  # a non-ASCII digit
        "9" * 1000,
        "(" * 40 + "1" + ")" * 40,  # longer than MAX_LENGTH
        "1+" * 40 + "1",
        None,
        42,
    ],
)
def test_rejected(text):
    assert evaluate(text) is None


def test_length_limit_is_inclusive():
    text = "1+" * ((MAX_LENGTH - 1) // 2) + "1"
    assert len(text) <= MAX_LENGTH and evaluate(text) is not None
    assert evaluate(text + "+1") is None
