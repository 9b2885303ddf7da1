"""arithmetic: compute an integer expression with the usual operator precedence.

Prompt: `n_operands` integers of up to `digits` digits joined by operators from `ops`,
then "=", e.g. "17+25*3=". Answer: the integer result, e.g. "92" (negative results carry a
"-": "17-25=" gives "-8"). Columns: none beyond `answer`.

Knobs: digits (default 2; 1..4): operands are drawn uniformly from 0 .. 10**digits - 1;
ops (default "+", the shipped tiny model's setting): the operators to draw from, a
non-empty string of distinct characters from "+-*"; n_operands (default 2; 2..4).
Augmentation ladder [ours]: digits, then n_operands (larger operands first: each digit adds
work to every operation; `ops` is not ordered by difficulty and stays as set).

Verifier: 1.0 when the extracted answer matches -?[0-9]+ (at most 40 characters) and its
integer value equals the answer column, else 0.0. So "042" and "-0" count as 42 and 0
(int() reads them so), while "+42", "42.0", "4 2" and "forty-two" are wrong.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from policylab.tasks.base import Task, check_int
from policylab.tasks.expression import evaluate

_ALLOWED_OPS = "+-*"
_INTEGER = re.compile(r"-?[0-9]{1,40}")


@dataclass(frozen=True)
class ArithmeticKnobs:
    """Difficulty of arithmetic: operand size, operators and operand count."""

    digits: int = 2
    ops: str = "+"
    n_operands: int = 2

    def __post_init__(self) -> None:
        check_int("arithmetic", "digits", self.digits, 1, 4)
        check_int("arithmetic", "n_operands", self.n_operands, 2, 4)
        if (
            not isinstance(self.ops, str)
            or not self.ops
            or len(set(self.ops)) != len(self.ops)
            or any(op not in _ALLOWED_OPS for op in self.ops)
        ):
            raise ValueError(
                f"arithmetic knob ops={self.ops!r} is invalid; accepted: a non-empty string "
                f"of distinct characters from {_ALLOWED_OPS!r}"
            )


class Arithmetic(Task):
    """Integer arithmetic with precedence: "17+25*3=" -> "92"."""

    name = "arithmetic"
    knobs_class = ArithmeticKnobs
    columns = ("answer",)
    chars = "0123456789+-*="
    ladder = (("digits", 1, 4), ("n_operands", 2, 4))

    def _sample(self, rng: random.Random) -> dict:
        k = self.knobs
        operands = [rng.randrange(10**k.digits) for _ in range(k.n_operands)]
        ops = [rng.choice(k.ops) for _ in range(k.n_operands - 1)]
        text = str(operands[0]) + "".join(
            op + str(x) for op, x in zip(ops, operands[1:], strict=True)
        )
        return {"prompt": text + "="}

    def _answer(self, example: dict) -> str:
        value, _ = evaluate(example["prompt"][:-1])
        return str(int(value))

    def _score(self, text: str, example: dict) -> float:
        if not _INTEGER.fullmatch(text):
            return 0.0
        return 1.0 if int(text) == int(str(example["answer"]).strip()) else 0.0
