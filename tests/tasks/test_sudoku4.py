"""sudoku4: hand-made verifier cases, partial credit, and unique-solution puzzles."""

from __future__ import annotations

import pytest

import policylab.tasks as tasks
from policylab.tasks.sudoku4 import all_grids, count_solutions, is_valid_grid

SOLUTION = "1234341221434321"  # rows 1234 / 3412 / 2143 / 4321
BLANKS = (1, 6, 11, 12)
PUZZLE = "".join("." if i in BLANKS else d for i, d in enumerate(SOLUTION))  # 1.3434.2214..321
EXAMPLE = {"puzzle": PUZZLE, "solution": SOLUTION}
OTHER_GRID = "2143341212344321"  # valid, but breaks the givens


def _cells(puzzle: str) -> list[int]:
    return [0 if ch == "." else int(ch) for ch in puzzle]


def _with(grid: str, **digits: str) -> str:
    cells = list(grid)
    for index, digit in digits.items():
        cells[int(index[1:])] = digit
    return "".join(cells)


def test_the_example_is_a_unique_puzzle():
    assert PUZZLE == "1.3434.2214..321"
    assert is_valid_grid(SOLUTION) and is_valid_grid(OTHER_GRID)
    assert count_solutions(_cells(PUZZLE)) == 1


@pytest.mark.parametrize(
    ("answer", "full", "partial"),
    [
        (SOLUTION, 1.0, 1.0),
        (f" {SOLUTION}\n", 1.0, 1.0),
        (_with(SOLUTION, c1="1"), 0.0, 0.75),  # one blank wrong: 3 of 4 right
        (_with(SOLUTION, c1="4", c6="4"), 0.0, 0.5),
        (_with(SOLUTION, c1="9"), 0.0, 0.75),  # a digit outside 1-4 is still 16 digits
        (_with(SOLUTION, c0="2"), 0.0, 0.0),  # a given changed
        (OTHER_GRID, 0.0, 0.0),  # a valid grid that breaks the givens
        (PUZZLE, 0.0, 0.0),  # malformed: blanks left
        (SOLUTION[:15], 0.0, 0.0),
        (SOLUTION + "1", 0.0, 0.0),
        ("1234 3412 2143 4321", 0.0, 0.0),
        ("1234/3412/2143/4321", 0.0, 0.0),
        ("", 0.0, 0.0),
        ("abcdabcdabcdabcd", 0.0, 0.0),
        ("１２３４３４１２２１４３４３２１", 0.0, 0.0),  # full-width digits
        ("__import__('os')", 0.0, 0.0),
        ("1" * 10_000, 0.0, 0.0),
    ],
)
def test_verify(answer, full, partial):
    completion = f"<answer>{answer}</answer>"
    assert tasks.get("sudoku4").verify(completion, EXAMPLE) == full
    assert tasks.get("sudoku4", partial_credit=True).verify(completion, EXAMPLE) == partial


def test_verify_needs_the_tags():
    task = tasks.get("sudoku4", partial_credit=True)
    assert task.verify(SOLUTION, EXAMPLE) == 0.0
    assert task.verify(f"<answer>{SOLUTION}", EXAMPLE) == 0.0
    assert task.verify(f"<answer>{OTHER_GRID}</answer><answer>{SOLUTION}</answer>", EXAMPLE) == 0.0


def test_all_grids():
    grids = all_grids()
    assert len(grids) == 288 == len(set(grids))
    assert all(is_valid_grid(g) for g in grids)
    assert not is_valid_grid("1234123412341234")


def test_count_solutions_stops_at_the_limit():
    assert count_solutions([0] * 16, limit=2) == 2
    assert count_solutions([0] * 16, limit=1000) == 288


@pytest.mark.parametrize(("blanks", "n"), [(6, 200), (1, 50), (12, 50)])
def test_every_puzzle_has_one_solution(blanks, n):
    task = tasks.get("sudoku4", blanks=blanks)
    for example in task.examples("train", n, seed=13):
        puzzle, solution = example["puzzle"], example["solution"]
        assert example["prompt"] == puzzle + ":" and example["answer"] == solution
        assert puzzle.count(".") == blanks
        assert all(p in (".", s) for p, s in zip(puzzle, solution, strict=True))
        assert is_valid_grid(solution)
        assert count_solutions(_cells(puzzle), limit=3) == 1
