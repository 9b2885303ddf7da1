"""countdown: combine all the given numbers with + - * / and parentheses to hit a target.

Prompt: the numbers in ascending order, separated by spaces, then " -> ", the target and
":", e.g. "3 5 7 -> 22:". Answer: one expression that uses every number exactly once,
e.g. "3*5+7". Columns: numbers (list[int], ascending), target (int).

Knobs: n_numbers (default 3; 2..5), max_number (default 20; 1..99): the numbers are drawn
uniformly from 1..max_number, repeats allowed; max_target (default 100; 1..9999).
Augmentation ladder [ours]: n_numbers only, the size of the search (pairs × operations
grow with every number). max_number and max_target stay as set: with the target capped,
larger numbers mostly change which targets are rejected, not clearly the difficulty.

Only solvable instances exist: the target is the value of a random expression over ALL the
numbers in which every intermediate result is a positive integer (subtraction of the
smaller from the larger, exact division only); targets above max_target are redrawn. The
canonical answer is the first solution of a fixed-order search (`solve`), not necessarily
the expression the target was drawn from.

Verifier: the answer is parsed by the safe parser of `expression.py` (integers, + - * /,
parentheses and spaces only; at most 64 characters; never eval) and evaluated exactly with
fractions. 1.0 when its integer literals are exactly the given numbers (as a multiset) and
its value equals the target, else 0.0. Intermediates of the answer may be fractions or
negative: only the final value counts.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from policylab.tasks.base import Task, check_int
from policylab.tasks.countdown_steps import countdown_step_labels
from policylab.tasks.expression import evaluate

# A partial expression: (value, text, precedence); precedence 1 for + -, 2 for * /, 3 atom.
_Node = tuple[int, str, int]


@dataclass(frozen=True)
class CountdownKnobs:
    """Difficulty of countdown: how many numbers, how large, and how large the target."""

    n_numbers: int = 3
    max_number: int = 20
    max_target: int = 100

    def __post_init__(self) -> None:
        check_int("countdown", "n_numbers", self.n_numbers, 2, 5)
        check_int("countdown", "max_number", self.max_number, 1, 99)
        check_int("countdown", "max_target", self.max_target, 1, 9999)


def _join(left: _Node, op: str, right: _Node, value: int) -> _Node:
    """The node `left op right`, with only the parentheses the precedence requires."""
    prec = 1 if op in "+-" else 2
    left_text = f"({left[1]})" if left[2] < prec else left[1]
    needs = right[2] < prec or (op in "-/" and right[2] == prec)
    right_text = f"({right[1]})" if needs else right[1]
    return value, f"{left_text}{op}{right_text}", prec


def _combinations(a: _Node, b: _Node) -> Iterator[_Node]:
    """Every positive-integer result of one operation on a and b, in a fixed order."""
    yield _join(a, "+", b, a[0] + b[0])
    yield _join(a, "*", b, a[0] * b[0])
    big, small = (a, b) if a[0] >= b[0] else (b, a)
    if big[0] > small[0]:
        yield _join(big, "-", small, big[0] - small[0])
    if big[0] % small[0] == 0:
        yield _join(big, "/", small, big[0] // small[0])


def solve(numbers: list[int], target: int) -> str | None:
    """The first expression over all `numbers` (each once) that equals `target`, searching
    pairs in list order and operations in the order + * - /, with every intermediate a
    positive integer; None when there is none. Deterministic: the canonical answer."""
    failed: set[tuple[int, ...]] = set()

    def search(nodes: list[_Node]) -> str | None:
        if len(nodes) == 1:
            return nodes[0][1] if nodes[0][0] == target else None
        key = tuple(sorted(node[0] for node in nodes))
        if key in failed:
            return None
        for i in range(len(nodes)):
            for j in range(i + 1, len(nodes)):
                rest = nodes[:i] + nodes[i + 1 : j] + nodes[j + 1 :]
                for node in _combinations(nodes[i], nodes[j]):
                    found = search([node, *rest])
                    if found is not None:
                        return found
        failed.add(key)
        return None

    return search([(x, str(x), 3) for x in numbers])


class Countdown(Task):
    """Reach the target with all the numbers: "3 5 7 -> 22:" -> "3*5+7"."""

    name = "countdown"
    knobs_class = CountdownKnobs
    columns = ("numbers", "target")
    chars = "0123456789+-*/() >:"
    ladder = (("n_numbers", 2, 5),)

    def _sample(self, rng: random.Random) -> dict | None:
        k = self.knobs
        numbers = sorted(rng.randint(1, k.max_number) for _ in range(k.n_numbers))
        pool = list(numbers)
        while len(pool) > 1:
            a = pool.pop(rng.randrange(len(pool)))
            b = pool.pop(rng.randrange(len(pool)))
            results = [a + b, a * b]
            if a != b:
                results.append(abs(a - b))
            big, small = max(a, b), min(a, b)
            if big % small == 0:
                results.append(big // small)
            pool.append(rng.choice(results))
        target = pool[0]
        if target > k.max_target:
            return None
        prompt = f"{' '.join(map(str, numbers))} -> {target}:"
        return {"prompt": prompt, "numbers": numbers, "target": target}

    def step_labels(self, pieces: list[str], example: dict) -> tuple[list[bool], list[int]]:
        """BCPG-NSA's step judge (countdown_steps.py): each `a op b = c` line's label
        (locally valid ∧ target still reachable) and each token's step index (−1 outside)."""
        return countdown_step_labels(pieces, example)

    def _answer(self, example: dict) -> str:
        answer = solve(example["numbers"], example["target"])
        if answer is None:  # cannot happen: the target was built from the numbers
            raise RuntimeError(f"countdown instance {example['prompt']!r} has no solution")
        return answer

    def _score(self, text: str, example: dict) -> float:
        parsed = evaluate(text)
        if parsed is None:
            return 0.0
        value, literals = parsed
        numbers = [int(x) for x in example["numbers"]]
        if Counter(literals) != Counter(numbers):
            return 0.0
        return 1.0 if value == int(example["target"]) else 0.0
