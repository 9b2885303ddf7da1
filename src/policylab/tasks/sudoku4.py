"""sudoku4: fill a 4x4 sudoku (every row, column and 2x2 box holds 1, 2, 3, 4 once).

Prompt: the 16 cells row by row, "." for a blank, then ":", e.g. "1.3434.2214..321:".
Answer: the 16 digits of the solution, e.g. "1234341221434321". Columns: puzzle (the 16
cells, str), solution (16 digits, str).

Knobs: blanks (default 11; 1..12): how many cells are blank; partial_credit (default False).
A solution is drawn uniformly from the 288 valid grids, then `blanks` cells uniformly at
random; only puzzles whose solution is unique (checked by a small solver) are kept.
Augmentation ladder [ours]: blanks (more blanks, fewer givens to deduce from);
partial_credit changes the reward, not the puzzle, and stays as set.

Verifier: 1.0 when the answer is 16 digits that keep every given and form a valid sudoku.
Otherwise 0.0; or, with partial_credit, the fraction of blank cells whose digit equals the
solution's when the answer is 16 digits that keep every given (0.0 when it is not, so
changing a given never earns reward).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from policylab.tasks.base import Task, check_bool, check_int

_ROWS = [[4 * r + c for c in range(4)] for r in range(4)]
_COLUMNS = [[4 * r + c for r in range(4)] for c in range(4)]
_BOXES = [
    [4 * (br + r) + bc + c for r in range(2) for c in range(2)] for br in (0, 2) for bc in (0, 2)
]
UNITS = _ROWS + _COLUMNS + _BOXES
PEERS = [sorted({j for unit in UNITS if i in unit for j in unit if j != i}) for i in range(16)]
_DIGITS = set("0123456789")


@dataclass(frozen=True)
class Sudoku4Knobs:
    """Difficulty of sudoku4: how many blanks, and whether part-right answers earn reward."""

    blanks: int = 11
    partial_credit: bool = False

    def __post_init__(self) -> None:
        check_int("sudoku4", "blanks", self.blanks, 1, 12)
        check_bool("sudoku4", "partial_credit", self.partial_credit)


def count_solutions(cells: list[int], limit: int = 2) -> int:
    """How many ways to complete `cells` (16 ints, 0 for blank), counting up to `limit`."""
    if 0 not in cells:
        return 1
    i = cells.index(0)
    used = {cells[j] for j in PEERS[i]}
    found = 0
    for digit in range(1, 5):
        if digit not in used:
            cells[i] = digit
            found += count_solutions(cells, limit - found)
            cells[i] = 0
            if found >= limit:
                break
    return found


@lru_cache(maxsize=1)
def all_grids() -> tuple[str, ...]:
    """The 288 valid 4x4 sudoku grids as 16-digit strings, in lexicographic order."""
    grids: list[str] = []

    def fill(cells: list[int]) -> None:
        if 0 not in cells:
            grids.append("".join(map(str, cells)))
            return
        i = cells.index(0)
        used = {cells[j] for j in PEERS[i]}
        for digit in range(1, 5):
            if digit not in used:
                cells[i] = digit
                fill(cells)
                cells[i] = 0

    fill([0] * 16)
    return tuple(grids)


def is_valid_grid(grid: str) -> bool:
    """True when `grid` is 16 characters and every unit holds exactly 1, 2, 3, 4."""
    return len(grid) == 16 and all({grid[i] for i in unit} == set("1234") for unit in UNITS)


class Sudoku4(Task):
    """4x4 sudoku with a unique solution: "1.3434.2214..321:" -> "1234341221434321"."""

    name = "sudoku4"
    knobs_class = Sudoku4Knobs
    columns = ("puzzle", "solution")
    chars = "1234.:"
    ladder = (("blanks", 1, 12),)

    def _sample(self, rng: random.Random) -> dict | None:
        solution = rng.choice(all_grids())
        hidden = set(rng.sample(range(16), self.knobs.blanks))
        puzzle = "".join("." if i in hidden else d for i, d in enumerate(solution))
        cells = [0 if ch == "." else int(ch) for ch in puzzle]
        if count_solutions(cells) != 1:
            return None
        return {"prompt": puzzle + ":", "puzzle": puzzle, "solution": solution}

    def _answer(self, example: dict) -> str:
        return example["solution"]

    def _score(self, text: str, example: dict) -> float:
        puzzle, solution = str(example["puzzle"]), str(example["solution"])
        if len(text) != 16 or not set(text) <= _DIGITS:
            return 0.0
        keeps_givens = all(p == "." or p == t for p, t in zip(puzzle, text, strict=True))
        if keeps_givens and is_valid_grid(text):
            return 1.0
        if not self.knobs.partial_credit:
            return 0.0
        if not keeps_givens:
            return 0.0
        blanks = [i for i, p in enumerate(puzzle) if p == "."]
        return sum(text[i] == solution[i] for i in blanks) / len(blanks)
